from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.cpulist import format_cpu_list, parse_cpu_list
from myaccel.errors import SysrootError
from myaccel.facts.collect import collect_facts
from myaccel.facts.memory import cgroup_memory, selected_choice
from myaccel.facts.sysroot import Sysroot, parse_size


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_cpu_list_round_trip() -> None:
    assert parse_cpu_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpu_list("0-7:2") == [0, 2, 4, 6]
    assert parse_cpu_list("") == []
    assert format_cpu_list([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"


def test_parse_size() -> None:
    assert parse_size("32K") == 32768
    assert parse_size("1024 kB") == 1024 * 1024
    assert parse_size("64M") == 64 * 1024**2


def test_selected_choice() -> None:
    assert selected_choice("always [madvise] never") == "madvise"
    assert selected_choice("0") == "0"


def test_missing_sysroot_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SysrootError):
        Sysroot(tmp_path / "nope")
    with pytest.raises(SysrootError):
        Sysroot(tmp_path)  # neither proc/ nor sys/


def test_cgroup_v2_limit_is_smallest_on_path(tmp_path: Path) -> None:
    write(tmp_path, "proc/self/cgroup", "0::/system.slice/mysql.service\n")
    write(tmp_path, "sys/fs/cgroup/memory.max", "max\n")
    write(tmp_path, "sys/fs/cgroup/system.slice/memory.max", str(4 * 1024**3) + "\n")
    write(tmp_path, "sys/fs/cgroup/system.slice/mysql.service/memory.max", "max\n")
    ver, path, limit = cgroup_memory(Sysroot(tmp_path), "/proc/self/cgroup")
    assert ver.value == "v2" and path.value == "/system.slice/mysql.service"
    assert limit.value == 4 * 1024**3


def test_cgroup_v1_unlimited(tmp_path: Path) -> None:
    write(tmp_path, "proc/self/cgroup", "4:memory:/user.slice\n1:cpu:/\n")
    write(
        tmp_path, "sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes", "9223372036854771712\n"
    )
    ver, _, limit = cgroup_memory(Sysroot(tmp_path), "/proc/self/cgroup")
    assert ver.value == "v1" and limit.known and limit.value is None


def test_container_limit_becomes_the_budget(tmp_path: Path) -> None:
    write(tmp_path, "proc/meminfo", "MemTotal:       65536000 kB\nMemAvailable:   60000000 kB\n")
    write(tmp_path, "proc/self/cgroup", "0::/\n")
    write(tmp_path, "sys/fs/cgroup/memory.max", str(4 * 1024**3) + "\n")
    f = collect_facts(tmp_path, perf_live_test=False)
    assert f.memory.total_bytes.value == 65536000 * 1024
    assert f.memory.effective_limit_bytes.value == 4 * 1024**3
    assert f.memory.effective_limit_bytes.source == "/sys/fs/cgroup/memory.max"


def test_unreadable_and_odd_files_become_unknown(tmp_path: Path) -> None:
    # cpuinfo is a directory (unreadable as a file), meminfo is garbage, THP is absent.
    (tmp_path / "proc" / "cpuinfo").mkdir(parents=True)
    write(tmp_path, "proc/meminfo", "garbage without colons\n\x00\x01")
    write(tmp_path, "sys/devices/system/cpu/online", "0-3\n")
    write(tmp_path, "proc/sys/vm/swappiness", "not-a-number\n")
    f = collect_facts(tmp_path, perf_live_test=False)
    assert not f.cpu.arch.known and not f.cpu.model.known
    assert f.cpu.logical_cpus.value == 4
    assert not f.memory.total_bytes.known
    assert not f.memory.swappiness.known and "unexpected content" in (
        f.memory.swappiness.unknown or ""
    )
    assert not f.memory.thp_enabled.known
    assert not f.storage.fs_type.known


def test_cli_missing_sysroot_one_line_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["probe", "--sysroot", str(tmp_path / "missing"), "--no-server"])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: sysroot") and lines[1].startswith("hint: ")


def test_cli_probe_json_schema_and_roundtrip(tmp_path: Path) -> None:
    root = Path(__file__).parent.parent / "fixtures" / "sysroots" / "this-vm"
    out = tmp_path / "facts.json"
    r = CliRunner().invoke(cli, ["probe", "--sysroot", str(root), "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    from myaccel.model import Facts

    f = Facts.model_validate_json(out.read_text())
    assert f.schema_version == "myaccel.facts/1" and f.cpu.logical_cpus.value == 2
    r = CliRunner().invoke(cli, ["probe", "--schema"])
    assert r.exit_code == 0 and '"CpuFacts"' in r.output


def test_an_unreadable_memory_max_is_unknown_not_no_limit(tmp_path: Path) -> None:
    """Issue 34: an unreadable leaf under a ``max`` parent read as "no limit". A file that
    is there but cannot be read (here a directory: CI runs as root, so a chmod 000 file
    would still read) makes the limit unknown, naming the file; an absent one is skipped."""
    write(tmp_path, "proc/self/cgroup", "0::/db\n")
    write(tmp_path, "sys/fs/cgroup/memory.max", "max\n")
    (tmp_path / "sys/fs/cgroup/db/memory.max").mkdir(parents=True)
    _, _, limit = cgroup_memory(Sysroot(tmp_path), "/proc/self/cgroup")
    assert not limit.known and "/sys/fs/cgroup/db/memory.max" in (limit.unknown or "")
    (tmp_path / "sys/fs/cgroup/db/memory.max").rmdir()
    _, _, limit = cgroup_memory(Sysroot(tmp_path), "/proc/self/cgroup")
    assert limit.known and limit.value is None  # absent leaf, "max" above: no limit
