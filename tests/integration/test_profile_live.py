"""`myaccel profile` on the session sandbox under a short sysbench workload, then
`myaccel diagnose` on what it wrote: real perf, real inferno, real MariaDB."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from html import escape as html_escape
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel import proc
from myaccel.cli.main import cli
from myaccel.errors import ToolMissing
from myaccel.profile import record
from myaccel.profile.records import PROFILE_SCHEMA, load_profile
from myaccel.server.sandbox import Sandbox

pytestmark = pytest.mark.integration

SVG = "{http://www.w3.org/2000/svg}"
# Functions of the SQL layer that mariadbd exports in .dynsym (Debian strips .symtab):
# every OLTP statement runs through them, so a profile under sysbench has them resolved.
SQL_LAYER = {
    "do_command",
    "dispatch_command",
    "mysql_execute_command",
    "handle_one_connection",
    "do_handle_one_connection",
    "mysqld_stmt_execute",
    "Prepared_statement::execute",
    "Prepared_statement::execute_loop",
    "JOIN::exec_inner",
    "JOIN::optimize_inner",
    "handler::ha_index_read_map",
    "handler::read_range_first",
}


def invoke(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, args)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def tools() -> record.Tools:
    try:
        return record.require_tools()
    except ToolMissing as exc:
        pytest.skip(f"{exc.message}: {exc.hint}")


def test_profile_under_sysbench_then_diagnose(
    sandbox_env: Sandbox, tools: record.Tools, tmp_path: Path
) -> None:
    if proc.which("sysbench") is None:
        pytest.skip("sysbench not installed")
    out = tmp_path / "prof"
    code, stdout, stderr = invoke(
        [
            "profile",
            "--sandbox",
            "pytest",
            "--duration",
            "6",
            "--workload",
            "quick",
            "--threads",
            "2",
            "--tables",
            "2",
            "--table-size",
            "2000",
            "--cleanup",
            "--top",
            "15",
            "--out",
            str(out),
        ]
    )
    assert code == 0, stderr
    prof = load_profile(out / "profile.json")
    assert prof.schema_version == PROFILE_SCHEMA
    r = prof.recording
    assert r.target == "mariadbd" and r.pid == sandbox_env.pid
    assert r.event == ("cycles" if record.has_cpu_pmu() else "cpu-clock")
    st = prof.stacks
    assert st is not None and st.total_samples >= 50, st

    # the flame graph: valid SVG (XML) whose frames include the top self symbols
    svg = (out / "flamegraph.svg").read_text()
    assert len(svg) < 5_000_000
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    titles = " ".join(t.text or "" for t in root.iter(f"{SVG}title"))
    top = [s.symbol for s in st.top_self[:3]]
    for sym in top:
        assert sym.split("::")[-1] in titles, (sym, titles[:500])
    assert "mariadbd" in titles

    # the top-N tables name resolved mariadbd symbols
    resolved = {
        s.symbol for s in st.top_inclusive if s.dso == "mariadbd" and not s.symbol.startswith("[")
    }
    assert resolved & SQL_LAYER, resolved
    assert "top 15 symbols by inclusive time:" in stdout
    assert any(name in stdout for name in SQL_LAYER)
    assert str(out / "flamegraph.svg") in stdout

    # per-CPU series over the window, context switches, status deltas
    assert prof.cpu is not None and prof.cpu.cpu_count == os.cpu_count()
    assert prof.cpu.intervals >= 4
    assert prof.context_switches is not None and prof.context_switches.total > 0
    assert prof.status is not None and prof.status.deltas.get("Questions", 0) > 100
    if not record.has_cpu_pmu():
        assert not prof.microarch
        assert any("no CPU PMU" in w for w in prof.warnings)

    # the folded file is what the summary came from
    folded = (out / "profile.folded").read_text()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines() if line) == (
        st.total_samples
    )
    # the workload ran through the bench harness and left its records
    camp = json.loads((out / "bench" / "campaign.json").read_text())
    assert camp["kind"] == "profile" and camp["finished"] is True
    assert list((out / "bench").glob("run-*.json"))
    # and the command wrote its report: the flame graph and the top table inside the HTML
    html = (out / "report.html").read_text()
    assert "myaccel profile report" in html and "<svg" in html
    assert html_escape(st.top_self[0].symbol.split("::")[-1]) in html
    assert f"report: {out / 'report.html'}" in stdout

    code, dout, derr = invoke(["diagnose", str(out)])
    assert code == 0, derr
    assert dout.startswith(f"profile {out / 'profile.json'}: mariadbd pid {r.pid}")
    code, jout, _ = invoke(["diagnose", str(out / "profile.json"), "--json"])
    assert code == 0
    assert isinstance(json.loads(jout)["findings"], list)
