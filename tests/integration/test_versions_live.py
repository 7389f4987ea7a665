"""`accelerate --versions` on real servers: a MariaDB 10.11 sandbox holding a schema of its
own, the plan measured as usual, and the next release line installed here (MariaDB 11.8,
scripts/ensure-mariadb.sh) on a copy of the same data upgraded with its own
``mariadb-upgrade``, as it is and with the plan: four arms in one interleaved campaign.

Checked: the 11.8 arms ran 11.8 on the upgraded copy (their run records' version, and the
user's rows there), every arm's runs interleaved, the comparisons and ``versions.json``
written with the advice, the report's layer table, and afterwards the sandbox back on
10.11 with its own data (the upgrade is one way: the sandbox's server is never run on the
upgraded copy). Tiny: 1 x 1,000 rows, 2 runs of 1 s per arm and cell (about a minute)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel import accelerate
from myaccel.accelerate.request import AccelerateRequest, SandboxTarget
from myaccel.accelerate.upgrade import UPGRADED
from myaccel.accelerate.versions import VERSION_ARM, VERSION_PLAN_ARM
from myaccel.bench.profiles import Profile
from myaccel.cli.main import cli
from myaccel.server.sandbox import Sandbox, find_server
from myaccel.server.sandbox.datadir import detect_datadir
from recorders import Notes

pytestmark = [pytest.mark.integration, pytest.mark.system]

TINY = Profile(
    name="tiny",
    description="version headroom test",
    source="test",
    workloads=("oltp_read_only", "oltp_read_write"),
    threads=(2,),
    tables=1,
    table_size=1000,
    duration_s=1,
    warmup_s=0,
    report_interval_s=1,
    runs_per_arm=2,
)


def test_versions_four_arms_on_an_upgraded_copy(
    myaccel_home: Path, tmp_path: Path, mariadb118_basedir: Path
) -> None:
    system = find_server(flavor="mariadb")
    if system.version.series != "10.11":
        pytest.skip(f"the system's MariaDB is {system.version.text}, not 10.11")
    sb = Sandbox.init("vh")
    try:
        sb.query("CREATE DATABASE shop")
        sb.query("CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2))")
        sb.query("INSERT INTO shop.orders SELECT seq, seq * 1.5 FROM shop.seq_1_to_500")
        out = tmp_path / "acc"
        notes = Notes()
        res = accelerate.run(
            AccelerateRequest(
                target=SandboxTarget(name="vh", explicit=True),
                profile=TINY,
                command=["myaccel", "accelerate", "--versions"],
                out_dir=out,
                measure_storage=False,
                versions=True,
            ),
            notes,  # type: ignore[arg-type]
        )
        head = res.versions
        assert head is not None and head.newer.version.series == "11.8"
        assert any("mariadb-upgrade" in ln and "dataset upgraded" in ln for ln in notes.lines)
        assert any("one way" in ln for ln in notes.lines)
        # four arms, round-robin with the order rotated every round
        arms = [ln.split()[1] for ln in notes.lines if ln.startswith("[")]
        arms = [a for i, a in enumerate(arms) if i == 0 or a != arms[i - 1]]
        assert arms == [
            "baseline",
            "candidate",
            VERSION_ARM,
            VERSION_PLAN_ARM,
            "candidate",
            VERSION_ARM,
            VERSION_PLAN_ARM,
            "baseline",
        ]
        # each arm ran its own server version
        ab_dir = out / "ab"
        versions = {}
        for rec in ab_dir.glob("run-*.json"):
            doc = json.loads(rec.read_text())
            versions.setdefault(doc["arm"], set()).add(doc["server"]["version"])
        assert versions["baseline"] == versions["candidate"] == {system.version.text}
        assert versions[VERSION_ARM] == versions[VERSION_PLAN_ARM] == {head.newer.version.text}
        assert set(res.more) == {"version", "version-plan", "version-plan-vs-plan"}
        for name in ("version", "version-plan", "version-plan-vs-plan"):
            assert (ab_dir / f"comparison-{name}.json").is_file()
        assert res.more["version"].candidate_label == "11.8 as is"
        assert res.more["version"].baseline_label == "10.11 as is"
        saved = json.loads((out / "versions.json").read_text())
        assert saved["newer"] == head.newer.version.label and saved["advice"]
        # the sandbox: back on 10.11 and its own data, the upgraded copy gone
        after = Sandbox.load("vh")
        assert after.is_running()
        assert str(after.query("SELECT VERSION()")[0][0]).startswith(system.version.text)
        assert after.query("SELECT COUNT(*) FROM shop.orders")[0][0] == 500
        marker = detect_datadir(after.datadir).version
        assert marker is None or marker.startswith("10.11")
        assert UPGRADED not in {s.name for s in after.snapshot_list()}
        # the report's layer table has the version row
        rep = CliRunner().invoke(cli, ["report", str(out), "--out", str(tmp_path / "rep")])
        assert rep.exit_code == 0, rep.output
        md = (tmp_path / "rep" / "report.md").read_text()
        assert "## Gain by layer" in md
        assert "| version | 11.8 as is vs 10.11 as is |" in md
        assert "| knobs | 10.11 + plan vs 10.11 as is |" in md
    finally:
        if Sandbox.exists("vh"):
            Sandbox.load("vh").destroy()


def test_a_killed_versions_campaign_leaves_no_upgraded_datadir(
    myaccel_home: Path, mariadb118_basedir: Path
) -> None:
    """A campaign killed while a newer version's arm ran left the sandbox's datadir holding
    a copy that server upgraded; the next command puts the campaign's dataset snapshot back
    and starts the sandbox's own server on it (its 10.11 refuses the upgraded copy)."""
    import subprocess
    import sys

    from myaccel.bench.ab import SNAPSHOT

    sb = Sandbox.init("vk")
    try:
        sb.query("CREATE DATABASE shop")
        sb.query("CREATE TABLE shop.orders (id INT PRIMARY KEY)")
        sb.query("INSERT INTO shop.orders SELECT seq FROM shop.seq_1_to_300")
        sb.stop()
        sb.snapshot_save(SNAPSHOT)
        # what the killed campaign did: 11.8 started on the data (upgrading it), its owner
        # a process that is gone
        code = (
            "from pathlib import Path\n"
            "from myaccel import proc\n"
            "from myaccel.accelerate.upgrade import upgrade_argv, upgrade_tool\n"
            "from myaccel.owner import ProcessOwner\n"
            "from myaccel.server.sandbox import Sandbox, ServerOptions, find_server\n"
            "sb = Sandbox.load('vk')\n"
            f"sb.start(ServerOptions(basedir={str(mariadb118_basedir)!r}, newer=True), "
            "owner=ProcessOwner.this_process('accelerate'))\n"
            f"tool = upgrade_tool(find_server(Path({str(mariadb118_basedir)!r})))\n"
            "assert tool is not None and proc.run(upgrade_argv(tool, sb), timeout_s=300).ok\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], check=False, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert "11.8" in str(Sandbox.load("vk").query("SELECT VERSION()")[0][0])
        r = CliRunner().invoke(cli, ["sandbox", "list"])
        assert r.exit_code == 0, r.output
        assert "dataset snapshot back" in r.output + r.stderr, r.output + r.stderr
        after = Sandbox.load("vk")
        assert after.is_running()
        assert not str(after.query("SELECT VERSION()")[0][0]).startswith("11.8")
        assert after.query("SELECT COUNT(*) FROM shop.orders")[0][0] == 300
    finally:
        if Sandbox.exists("vk"):
            Sandbox.load("vk").destroy()
