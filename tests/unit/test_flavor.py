import json
from pathlib import Path

import pytest

from myaccel.errors import SandboxError
from myaccel.server.flavor import (
    binary_version_line,
    flavor_label,
    parse_binary_version,
    parse_server_version,
)
from myaccel.server.sandbox.install import parse_version_output

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


# ------------------------------------------------------------------ the one parser, every string


def _all_binary_lines() -> list[tuple[str, str, str, str]]:
    """Every fixture string as ``mysqld --version`` prints it: the recorded lines, and each
    VERSION()/comment pair in that format."""
    out = [(c["line"], c["flavor"], c["text"], "") for c in DATA["binary_version_lines"]]
    for c in DATA["cases"]:
        line = f"/usr/sbin/mysqld  Ver {c['version']} for Linux on x86_64 ({c['comment']})"
        out.append((line, c["flavor"], c["text"], c.get("variant", "")))
    return out


@pytest.mark.parametrize(("line", "flavor", "text", "variant"), _all_binary_lines())
def test_one_parser_for_binary_output(line: str, flavor: str, text: str, variant: str) -> None:
    sv = parse_binary_version("warning: some noise first\n" + line + "\n")
    assert sv is not None
    assert (sv.flavor, sv.text, sv.variant) == (flavor, text, variant)
    assert sv.raw == line.strip()
    # the sandbox reads binaries with the same parser (raising instead of None)
    assert parse_version_output(line) == sv
    assert sv.label == f"{flavor_label(flavor)} {text}"


@pytest.mark.parametrize("case", DATA["cases"], ids=lambda c: c["version"])
def test_one_parser_keeps_raw_and_series(case: dict[str, str]) -> None:
    sv = parse_server_version(case["version"], case["comment"])
    assert sv is not None
    assert sv.raw == case["version"]
    assert sv.series == ".".join(case["text"].split(".")[:2])
    # raw is what it was read from, not part of what the version is
    assert sv == parse_server_version(case["text"] + " " + case["version"], case["comment"])


def test_sandbox_parser_garbage_raises_with_hint() -> None:
    with pytest.raises(SandboxError, match="cannot read the server version") as exc:
        parse_version_output("bash: mysqld: command not found")
    assert exc.value.hint
    assert binary_version_line("") == ""
    assert flavor_label("percona") == "Percona Server" and flavor_label("x") == "x"
