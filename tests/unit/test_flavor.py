import json
from pathlib import Path

import pytest

from myaccel.server.flavor import parse_binary_version, parse_server_version

DATA = json.loads((Path(__file__).parent.parent / "fixtures" / "version_strings.json").read_text())


@pytest.mark.parametrize("case", DATA["cases"], ids=lambda c: c["version"])
def test_version_strings(case: dict[str, str]) -> None:
    sv = parse_server_version(case["version"], case["comment"])
    assert sv is not None
    assert sv.flavor == case["flavor"]
    assert sv.text == case["text"]
    assert sv.variant == case.get("variant", "")


@pytest.mark.parametrize("case", DATA["binary_version_lines"], ids=lambda c: c["text"])
def test_binary_version_lines(case: dict[str, str]) -> None:
    sv = parse_binary_version(case["line"])
    assert sv is not None
    assert (sv.flavor, sv.text) == (case["flavor"], case["text"])


def test_garbage_versions() -> None:
    assert parse_server_version("not a version") is None
    assert parse_binary_version("") is None
    assert parse_binary_version("mysqld: unknown option") is None


def test_ordering() -> None:
    sv = parse_server_version("8.0.30", "")
    assert sv is not None
    assert sv.at_least(8, 0, 30) and not sv.at_least(8, 0, 31) and sv.series == "8.0"
