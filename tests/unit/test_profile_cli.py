"""`myaccel profile`, `myaccel diagnose` and `myaccel plan --profile` without a server:
argument handling, the bad-input errors (each one line with its fix and a non-zero exit)
and the findings raising or lowering plan rules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from profile_captures import ROOTS, capture, host

from myaccel.cli.main import cli
from myaccel.errors import ToolMissing, UsageError
from myaccel.model import AtomicsFacts, BinaryFacts, Facts, ServerFacts, known, unknown
from myaccel.profile import record
from myaccel.profile.diagnose import diagnose
from myaccel.profile.folded import parse_folded, summarize
from myaccel.profile.perfstat import PerfPermissionDenied
from myaccel.profile.records import (
    save_profile,
)
from myaccel.rules.engine import FindingEffect, Hints, apply_finding_effects
from myaccel.rules.model import Recommendation


def invoke(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, args)
    return r.exit_code, r.stdout, r.stderr


def one_error(stderr: str) -> tuple[str, str]:
    """The error and hint lines; fails unless the error is one line with a hint."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    hints = [ln for ln in lines if ln.startswith("hint: ")]
    assert len(errors) == 1 and len(hints) == 1, stderr
    return errors[0], hints[0]


def saved(name: str, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    p = capture(name)
    return save_profile(p.model_copy(update={"findings": diagnose(p)}), where / "profile.json")


def with_server(f: Facts, flavor: str, cpus_allowed: str) -> Facts:
    version, comment = (
        ("10.11.6-MariaDB-0+deb12u1", "Debian 12")
        if flavor == "mariadb"
        else ("8.0.34", "MySQL Community Server - GPL")
    )
    q = "test"
    server = ServerFacts(
        connection="test",
        flavor=known(flavor, q),
        version=known(version.split("-")[0], q),
        version_string=known(version, q),
        version_comment=known(comment, q),
        uptime_s=known(3600, q),
        datadir=known("/var/lib/mysql", q),
        data_size_bytes=known(2**30, q),
        pid=known(1, q),
        binary_path=known("/usr/sbin/mysqld", q),
        cpus_allowed=known(cpus_allowed, q),
        # every node, as on a server with no memory policy of its own
        mems_allowed=known(f"0-{max(len(f.cpu.numa_nodes.value or []), 1) - 1}", q),
        cgroup_limit_bytes=known(None, q),
        variables=known(
            {
                "innodb_buffer_pool_size": "134217728",
                "innodb_adaptive_hash_index": "ON",
                "innodb_spin_wait_delay": "6",
                "innodb_sync_spin_loops": "30",
                "innodb_thread_concurrency": "0",
                "thread_handling": "one-thread-per-connection",
                "max_connections": "151",
            },
            q,
        ),
        status=known({"Uptime": "3600"}, q),
    )
    return f.model_copy(update={"server": server})


def with_binary(f: Facts, *, pgo: bool) -> Facts:
    q = "test"
    b = BinaryFacts(
        path="/usr/sbin/mysqld",
        size_bytes=known(60_000_000, q),
        elf_class=known(64, q),
        machine=known("aarch64", q),
        pie=known(True, q),
        compiler=unknown("no .comment", q),
        build_id=known("x", q),
        stripped=known(False, q),
        debug_info=known(False, q),
        atomics=known(AtomicsFacts(klass="inline-lse"), q),
        lto=known(pgo, q),
        lto_evidence=known([], q),
        pgo=known(pgo, q),
        pgo_evidence=known([], q),
        instrumented=known(False, q),
        text_segment_align=known(0x10000, q),
        text_huge_page_ready=known(False, q),
        relocations=known(False, q),
    )
    return f.model_copy(update={"binary": b})


@pytest.fixture
def fake_server(tmp_path: Path) -> Iterator[int]:
    """A process whose command is ``mariadbd`` (a copy of sleep): passes the pid check,
    so the checks after it can be reached without a real server."""
    exe = tmp_path / "mariadbd"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
    p = subprocess.Popen([str(exe), "60"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


# ---------------------------------------------------------------- target and arguments


def test_pid_that_is_not_a_server(myaccel_home: Path) -> None:
    code, _, err = invoke(["profile", "--pid", str(os.getpid())])
    assert code == 2
    e, h = one_error(err)
    assert f"pid {os.getpid()}" in e and "is not a MySQL/MariaDB server" in e
    assert "pidof mariadbd" in h


def test_pid_that_does_not_exist(myaccel_home: Path) -> None:
    p = subprocess.Popen(["true"])
    p.wait()
    code, _, err = invoke(["profile", "--pid", str(p.pid)])
    assert code == 2
    e, _ = one_error(err)
    assert "no process with pid" in e


def test_fake_server_passes_the_pid_check(fake_server: int) -> None:
    assert record.check_server_pid(fake_server) == "mariadbd"
    with pytest.raises(UsageError):
        record.check_server_pid(os.getpid())
    with pytest.raises(UsageError):
        record.check_server_pid(0)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--duration", "0"], "--duration 0 s is out of range"),
        (["--duration", "-3"], "out of range"),
        (["--frequency", "0"], "--frequency 0 Hz is out of range"),
        (["--frequency", "100000"], "out of range"),
    ],
)
def test_bad_numbers(myaccel_home: Path, args: list[str], needle: str) -> None:
    code, _, err = invoke(["profile", "--pid", "1", *args])
    assert code == 2
    e, _ = one_error(err)
    assert needle in e


def test_no_target_and_two_targets(myaccel_home: Path) -> None:
    code, _, err = invoke(["profile"])
    assert code == 2
    e, h = one_error(err)
    assert "no server to profile" in e and "--sandbox NAME" in h
    code, _, err = invoke(["profile", "--pid", "1", "--sandbox", "x"])
    assert code == 2
    assert "both name a server" in one_error(err)[0]


def test_sandbox_that_does_not_exist(myaccel_home: Path) -> None:
    code, _, err = invoke(["profile", "--sandbox", "nosuch"])
    assert code != 0
    e, _ = one_error(err)
    assert "nosuch" in e


# ---------------------------------------------------------------- tools


def test_perf_missing(fake_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, _, err = invoke(["profile", "--pid", str(fake_server)])
    assert code == ToolMissing.exit_code
    e, h = one_error(err)
    assert "'perf' is not installed" in e
    assert "apt-get install linux-perf" in h


def test_inferno_missing(fake_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    perf = shutil.which("perf")
    if perf is None:
        pytest.skip("perf not installed")
    only_perf = tmp_path / "bin"
    only_perf.mkdir()
    (only_perf / "perf").symlink_to(perf)
    monkeypatch.setenv("PATH", str(only_perf))
    monkeypatch.setattr(record, "inferno_dirs", lambda: [tmp_path / "nowhere"])
    code, _, err = invoke(["profile", "--pid", str(fake_server)])
    assert code == ToolMissing.exit_code
    e, h = one_error(err)
    assert "inferno-collapse-perf" in e
    assert f"cargo install inferno --locked --version {record.INFERNO_VERSION}" in h


def test_inferno_found_in_a_listed_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "venv-bin"
    d.mkdir()
    exe = d / "inferno-flamegraph"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert record.find_inferno("inferno-flamegraph", [tmp_path / "x", d]) == str(exe)
    with pytest.raises(ToolMissing):
        record.find_inferno("inferno-collapse-perf", [d])


# ---------------------------------------------------------------- perf_event_paranoid


def fake_proc(tmp_path: Path, paranoid: str, capeff: str = "0000000000000000") -> tuple[Path, Path]:
    par = tmp_path / "perf_event_paranoid"
    par.write_text(paranoid + "\n")
    status = tmp_path / "status"
    status.write_text(f"Name:\tpython3\nCapInh:\t0000000000000000\nCapEff:\t{capeff}\n")
    return par, status


@pytest.mark.parametrize("level", ["2", "3", "4"])
def test_paranoid_too_high_for_a_normal_user(tmp_path: Path, level: str) -> None:
    par, status = fake_proc(tmp_path, level)
    with pytest.raises(PerfPermissionDenied) as ei:
        record.check_perf_access(os.getpid(), paranoid_path=par, status_path=status, euid=1000)
    assert f"perf_event_paranoid is {level}" in ei.value.message
    assert "sysctl -w kernel.perf_event_paranoid=1" in ei.value.hint
    assert "CAP_PERFMON" in ei.value.hint


def test_paranoid_allows_root_capperfmon_and_low_levels(tmp_path: Path) -> None:
    par, status = fake_proc(tmp_path, "4")
    assert record.check_perf_access(1, paranoid_path=par, status_path=status, euid=0) == 4
    perfmon = f"{1 << record.CAP_PERFMON:016x}"
    par, status = fake_proc(tmp_path, "3", perfmon)
    assert record.check_perf_access(1, paranoid_path=par, status_path=status, euid=1000) == 3
    par, status = fake_proc(tmp_path, "1")
    me = os.geteuid()
    assert (
        record.check_perf_access(os.getpid(), paranoid_path=par, status_path=status, euid=me) == 1
    )


def test_another_users_process_needs_privilege(tmp_path: Path) -> None:
    par, status = fake_proc(tmp_path, "1")
    with pytest.raises(PerfPermissionDenied) as ei:
        record.check_perf_access(1, paranoid_path=par, status_path=status, euid=12345)
    assert "belongs to uid 0" in ei.value.message


def test_paranoid_refusal_through_the_cli(
    fake_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    par, status = fake_proc(tmp_path, "3")
    monkeypatch.setattr(record, "PARANOID_PATH", str(par))
    monkeypatch.setattr(record, "PROC_SELF_STATUS", str(status))
    monkeypatch.setattr(record, "_euid", lambda: 1000)
    monkeypatch.setattr(record, "require_tools", lambda: record.Tools("perf", "c", "f"))
    code, _, err = invoke(["profile", "--pid", str(fake_server)])
    assert code != 0
    e, h = one_error(err)
    assert "perf_event_paranoid is 3" in e
    assert "sysctl -w kernel.perf_event_paranoid=1" in h


def test_real_paranoid_file_is_read() -> None:
    v = record.read_paranoid()
    if Path(record.PARANOID_PATH).exists():
        assert isinstance(v, int)
    assert record.read_paranoid("/nonexistent/perf_event_paranoid") is None


# ---------------------------------------------------------------- workload arguments


def test_unknown_workload_profile(fake_server: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record, "require_tools", lambda: record.Tools("perf", "c", "f"))
    code, _, err = invoke(["profile", "--pid", str(fake_server), "--workload", "bogus"])
    assert code == 2
    e, h = one_error(err)
    assert "unknown profile 'bogus'" in e and "quick" in h


def test_workload_needs_a_local_server(fake_server: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record, "require_tools", lambda: record.Tools("perf", "c", "f"))
    code, _, err = invoke(
        [
            "profile",
            "--pid",
            str(fake_server),
            "--host",
            "192.0.2.10",
            "--user",
            "bench",
            "--workload",
            "quick",
        ]
    )
    assert code == 2
    e, h = one_error(err)
    assert "only against a local server" in e and "--workload none" in h


def test_workload_needs_a_connection(fake_server: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record, "require_tools", lambda: record.Tools("perf", "c", "f"))
    code, _, err = invoke(["profile", "--pid", str(fake_server), "--workload", "quick"])
    assert code == 2
    assert "needs a connection" in one_error(err)[0]


def test_record_argv() -> None:
    argv = record.build_record_argv(
        "perf",
        pid=42,
        duration_s=7,
        frequency_hz=99,
        event="cpu-clock",
        call_graph="dwarf",
        output="/tmp/x.data",
    )
    assert argv == [
        "perf",
        "record",
        "-e",
        "cpu-clock",
        "-F",
        "99",
        "--call-graph",
        "dwarf",
        "-p",
        "42",
        "-o",
        "/tmp/x.data",
        "--",
        "sleep",
        "7",
    ]
    fp = record.build_record_argv(
        "perf", pid=1, duration_s=1, frequency_hz=1, event="cycles", call_graph="fp", output="o"
    )
    assert "-g" in fp and "--call-graph" not in fp
    with pytest.raises(UsageError):
        record.build_record_argv(
            "perf",
            pid=1,
            duration_s=1,
            frequency_hz=1,
            event="cycles",
            call_graph="lbr",
            output="o",
        )


def test_record_errors() -> None:
    assert record.record_error(0, "", pid=1) is None
    e = record.record_error(255, "Error:\nNo permission to enable cycles event.\n", pid=7)
    assert isinstance(e, PerfPermissionDenied)
    e2 = record.record_error(1, "something odd\n", pid=7)
    assert e2 is not None and "exit code 1" in e2.message


def test_numa_nodes_from_a_sysroot() -> None:
    nodes = record.numa_nodes(ROOTS / "kunpeng920-2s")
    assert len(nodes) >= 2
    assert all(n.cpus for n in nodes)
    assert record.numa_nodes(ROOTS / "nonexistent") == []


# ---------------------------------------------------------------- diagnose


def test_diagnose_refuses_another_schema(tmp_path: Path, myaccel_home: Path) -> None:
    p = tmp_path / "run.json"
    p.write_text(json.dumps({"schema_version": "myaccel.run/1", "tps": 1}))
    code, out, err = invoke(["diagnose", str(p)])
    assert code == 2 and out == ""
    e, h = one_error(err)
    assert "'myaccel.run/1'" in e and "myaccel.profile/1" in e
    assert "myaccel profile" in h


@pytest.mark.parametrize(
    ("content", "needle"),
    [(None, "does not exist"), ("{not json", "not readable JSON"), ("[]", "schema None")],
)
def test_diagnose_bad_files(
    tmp_path: Path, myaccel_home: Path, content: str | None, needle: str
) -> None:
    p = tmp_path / "profile.json"
    if content is not None:
        p.write_text(content)
    code, _, err = invoke(["diagnose", str(p)])
    assert code == 2
    assert needle in one_error(err)[0]


def test_diagnose_without_any_profile(myaccel_home: Path) -> None:
    code, _, err = invoke(["diagnose"])
    assert code == 2
    e, h = one_error(err)
    assert "no profile given" in e and "myaccel profile --sandbox" in h


def test_diagnose_latest_dir_and_json(myaccel_home: Path, tmp_path: Path) -> None:
    older = saved("healthy-kunpeng920-4n", myaccel_home / "profiles" / "a")
    os.utime(older, (1, 1))
    newest = saved("seed004-spin-kunpeng920", myaccel_home / "profiles" / "b")
    code, out, _ = invoke(["diagnose"])
    assert code == 0
    assert str(newest) in out.splitlines()[0]
    assert "[high] spin-hot-spot" in out and "raises server-spin-wait" in out
    assert "evidence:" in out and "likely cause:" in out
    code, out, _ = invoke(["diagnose", str(older.parent)])
    assert code == 0 and "no findings" in out
    code, out, _ = invoke(["diagnose", str(newest), "--json"])
    doc = json.loads(out)
    assert {f["id"] for f in doc["findings"]} == {"spin-hot-spot", "scheduler-churn"}
    spin = next(f for f in doc["findings"] if f["id"] == "spin-hot-spot")
    assert {"rule": "server-spin-wait", "direction": "raise"}.items() <= spin["rules"][0].items()


def test_diagnose_with_facts(tmp_path: Path, myaccel_home: Path) -> None:
    prof = saved("seed004-spin-kunpeng920", tmp_path / "p")
    facts = tmp_path / "facts.json"
    facts.write_text(with_server(host("this-vm"), "mariadb", "0-1").model_dump_json())
    code, out, _ = invoke(["diagnose", str(prof), "--facts", str(facts), "--json"])
    assert code == 0
    spin = next(f for f in json.loads(out)["findings"] if f["id"] == "spin-hot-spot")
    rules = {r["rule"] for r in spin["rules"]}
    # MariaDB facts: the thread pool is the fix, innodb_thread_concurrency is not
    assert "server-thread-pool" in rules and "server-thread-concurrency" not in rules


def test_profile_summary_text() -> None:
    from myaccel.cli.profile import format_profile

    p = capture("seed004-spin-kunpeng920")
    text = format_profile(p.model_copy(update={"findings": diagnose(p)}), top=5)
    assert "top 5 symbols by self time:" in text
    assert "ut_delay" in text
    assert "context switches:" in text
    assert "[high] spin-hot-spot" in text


# ---------------------------------------------------------------- plan --profile


def plan_json(facts: Facts, tmp_path: Path, profile: Path | None) -> dict[str, object]:
    ff = tmp_path / "facts.json"
    ff.write_text(facts.model_dump_json())
    args = ["plan", "--facts", str(ff), "--json"]
    if profile is not None:
        args += ["--profile", str(profile)]
    code, out, err = invoke(args)
    assert code == 0, err
    doc: dict[str, object] = json.loads(out)
    return doc


def recs(doc: dict[str, object]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for r in doc["recommendations"]:  # type: ignore[attr-defined]
        out[r["id"]] = r
    return out


def test_plan_profile_spin_turns_on_the_spin_rules(tmp_path: Path, myaccel_home: Path) -> None:
    facts = with_server(host("this-vm"), "mysql", "0-1")
    prof = saved("seed004-spin-kunpeng920", tmp_path / "p")
    plain = recs(plan_json(facts, tmp_path, None))
    hinted = recs(plan_json(facts, tmp_path, prof))
    assert "server-spin-wait-delay" not in plain
    assert "server-spin-wait-delay" in hinted
    assert "server-thread-concurrency" in hinted and "server-thread-concurrency" not in plain
    ev = hinted["server-spin-wait-delay"]["evidence"]
    assert isinstance(ev, dict) and "finding:spin-hot-spot" in ev
    assert "profile finding spin-hot-spot raises it" in str(
        hinted["server-spin-wait-delay"]["rationale"]
    )


def test_plan_profile_ahi_turns_off_the_hash_index(tmp_path: Path, myaccel_home: Path) -> None:
    facts = with_server(host("this-vm"), "mariadb", "0-1")
    prof = saved("seed002-ahi-kunpeng920-4n", tmp_path / "p")
    plain = recs(plan_json(facts, tmp_path, None))
    hinted = recs(plan_json(facts, tmp_path, prof))
    assert "server-adaptive-hash-index" not in plain
    assert hinted["server-adaptive-hash-index"]["proposed"] == "OFF"


def test_plan_profile_numa_raises_binding(tmp_path: Path, myaccel_home: Path) -> None:
    facts = with_server(host("kunpeng920-2s"), "mysql", "0-127")
    prof = saved("seed002-ahi-kunpeng920-4n", tmp_path / "p")
    plain = recs(plan_json(facts, tmp_path, None))
    hinted = recs(plan_json(facts, tmp_path, prof))
    numa = [k for k in plain if k.startswith("numa-") and plain[k]["layer"] == "numa"]
    assert numa, plain.keys()
    for k in numa:
        before, after = plain[k]["confidence"], hinted[k]["confidence"]
        order = ["low", "medium", "high"]
        if k in ("numa-binding", "numa-interleave", "numa-balancing-off"):
            assert order.index(str(after)) >= order.index(str(before))
            ev = hinted[k]["evidence"]
            assert isinstance(ev, dict) and "finding:numa-imbalance" in ev
    assert any(hinted[k]["confidence"] != plain[k]["confidence"] for k in numa)


def test_plan_profile_frontend_raises_and_lowers_pgo(tmp_path: Path, myaccel_home: Path) -> None:
    base = with_server(host("yitian710-g8y2xlarge"), "mysql", "0-7")
    prof = saved("frontend-yitian710-mysql80", tmp_path / "p")
    plain = recs(plan_json(with_binary(base, pgo=False), tmp_path, None))
    hinted = recs(plan_json(with_binary(base, pgo=False), tmp_path, prof))
    assert plain["build-pgo-lto"]["confidence"] == "medium"
    assert hinted["build-pgo-lto"]["confidence"] == "high"
    assert "finding:frontend-bound" in hinted["build-pgo-lto"]["evidence"]  # type: ignore[operator]
    # a binary with PGO and LTO: the finding lowers the rule, which skips anyway
    done = plan_json(with_binary(base, pgo=True), tmp_path, prof)
    assert "build-pgo-lto" not in recs(done)


def test_finding_effects_step_confidence() -> None:
    r = Recommendation(
        id="build-pgo-lto",
        layer="build",
        title="t",
        target="build:pgo,lto",
        current=None,
        proposed="x",
        rationale="r",
        expected_effect="e",
        effect_source="s",
        risk="rebuild",
        verify="v",
        confidence="medium",
    )
    up = Hints(effects=(FindingEffect("frontend-bound", "build-pgo-lto", "raise", "why"),))
    down = Hints(effects=(FindingEffect("frontend-bound", "build-pgo-lto", "lower", "done"),))
    assert apply_finding_effects("build-pgo-lto", [r], up)[0].confidence == "high"
    low = apply_finding_effects("build-pgo-lto", [r], down)[0]
    assert low.confidence == "low"
    assert low.evidence["finding:frontend-bound"] == "lowers: done"
    assert apply_finding_effects("os-thp", [r], up) == [r]


def test_plan_profile_rejects_another_schema(tmp_path: Path, myaccel_home: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": "myaccel.plan/1"}))
    ff = tmp_path / "facts.json"
    ff.write_text(with_server(host("this-vm"), "mysql", "0-1").model_dump_json())
    code, _, err = invoke(["plan", "--facts", str(ff), "--profile", str(bad)])
    assert code == 2
    assert "myaccel.profile/1" in one_error(err)[0]


SCRIPT = """\
mariadbd 18578/18601 11381.028977: cpu-clock:pppH:
\tffffffff8162aabf finish_task_switch.isra.0 ([kernel.kallsyms])
\t          83d4e0 do_command(THD*, bool) (/usr/sbin/mariadbd)
\t          a0b0c0 [unknown] (/usr/sbin/mariadbd)
\t           fdc47 __libc_recv (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t          112233 operator[](unsigned long) (/usr/sbin/mariadbd)

"""


def test_frames_get_their_dso_back_from_perf_script() -> None:
    dsos = record.dso_map_from_script(SCRIPT)
    assert dsos["do_command"] == "mariadbd"
    assert dsos["__libc_recv"] == "libc.so.6"
    assert dsos["finish_task_switch"] == "[kernel.kallsyms]"
    assert "[unknown]" not in dsos
    folded = (
        "mariadbd;start_thread;do_command;[mariadbd];__libc_recv;finish_task_switch_[k] 3\n"
        "mariadbd;operator[];do_command [mariadbd] 2\n"
    )
    got = record.annotate_dsos(folded, dsos)
    assert got.splitlines() == [
        "mariadbd;start_thread;do_command [mariadbd];[mariadbd];__libc_recv [libc.so.6];"
        "finish_task_switch_[k] 3",
        "mariadbd;operator[] [mariadbd];do_command [mariadbd] 2",
    ]
    st = summarize(parse_folded(got))
    assert {d.dso: d.self_samples for d in st.top_dso_self} == {
        "[kernel.kallsyms]": 3,
        "mariadbd": 2,
    }


def test_simulate_needs_a_sandbox(fake_server: int) -> None:
    code, _, err = invoke(["profile", "--pid", str(fake_server), "--simulate"])
    assert code == 2
    e, h = one_error(err)
    assert "--simulate needs a sandbox" in e and "--sandbox NAME" in h
