"""A facts file is checked like live facts (issue 34, defect 8): a malformed CPU list in
it is a usage error naming the field, before any rule runs (before: `myaccel plan --facts
F` ended in "internal error ... exit 70" from a rule parsing the list)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_rules import ROOTS, server

from myaccel.cli.main import cli
from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.facts.load import load_facts
from myaccel.model import Facts, NumaNode

GOOD = ROOTS / "kunpeng920-2s"


@functools.cache
def _facts_json() -> str:
    f = collect_facts(GOOD, perf_live_test=False)
    f = f.model_copy(update={"server": server("8.0.36", "MySQL Community Server - GPL", {})})
    return f.model_dump_json()


def facts_doc() -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(json.loads(_facts_json()))
    return doc


def write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    p = tmp_path / "facts.json"
    p.write_text(json.dumps(doc))
    return p


def plan(path: Path) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["plan", "--facts", str(path)])
    return r.exit_code, r.stdout + r.stderr


def test_the_unchanged_file_plans(tmp_path: Path) -> None:
    code, out = plan(write(tmp_path, facts_doc()))
    assert code == 0, out


@pytest.mark.parametrize(
    ("where", "bad"),
    [
        (("server", "cpus_allowed", "value"), "0-"),
        (("server", "mems_allowed", "value"), "3-1"),
        (("cpu", "online_cpus", "value"), "0-127,x"),
    ],
)
def test_a_bad_cpu_list_is_a_usage_error_naming_the_field(
    tmp_path: Path, where: tuple[str, ...], bad: str
) -> None:
    doc = facts_doc()
    node = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = bad
    path = write(tmp_path, doc)
    with pytest.raises(UsageError) as err:
        load_facts(str(path))
    assert ".".join(where) in str(err.value.message) + str(err.value.hint)
    code, out = plan(path)
    assert code == 2, out
    assert "internal error" not in out and ".".join(where) in out


def test_a_numa_node_with_a_trailing_comma_or_a_wrong_count(tmp_path: Path) -> None:
    doc = facts_doc()
    doc["cpu"]["numa_nodes"]["value"][0]["cpus"] = "0-31,"
    code, out = plan(write(tmp_path, doc))
    assert code == 2 and "cpu.numa_nodes.value.0" in out, out
    doc = facts_doc()
    doc["cpu"]["numa_nodes"]["value"][1]["cpu_count"] = 7
    code, out = plan(write(tmp_path, doc))
    assert code == 2 and "cpu_count 7 but cpus lists 32" in out, out


def test_the_model_checks_what_it_is_given() -> None:
    assert NumaNode(node=0, cpus="0-3", cpu_count=4).cpu_count == 4
    assert NumaNode(node=1, cpus="", cpu_count=0, memory_total_bytes=0).cpus == ""  # memory-only
    with pytest.raises(ValueError, match="is not a CPU number or range"):
        NumaNode(node=0, cpus="0-3,", cpu_count=4)
    with pytest.raises(ValueError, match="negative"):
        NumaNode(node=0, cpus="0", cpu_count=1, memory_total_bytes=-1)
    assert isinstance(Facts.model_validate_json(_facts_json()), Facts)  # live facts still load
