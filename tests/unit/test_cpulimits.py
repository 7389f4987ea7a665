"""The server's own CPU limits: cgroup quota (v1, v2) and the budget rules size by."""

from __future__ import annotations

from pathlib import Path

import pytest
from sysroot_tree import sysroot_tree
from test_rules import server

from myaccel.facts.collect import collect_facts
from myaccel.facts.cpulimits import cgroup_cpu_quota
from myaccel.facts.resources import server_resources
from myaccel.model import Fact, Facts, known

ROOTS = Path(__file__).parent.parent / "fixtures" / "sysroots"


def test_v2_quota_is_the_tightest_on_the_path(tmp_path: Path) -> None:
    sr = sysroot_tree(
        tmp_path,
        {
            "/proc/77/cgroup": "0::/system.slice/mariadb.service\n",
            "/sys/fs/cgroup/cpu.max": "max 100000\n",
            "/sys/fs/cgroup/system.slice/cpu.max": "800000 100000\n",
            "/sys/fs/cgroup/system.slice/mariadb.service/cpu.max": "400000 100000\n",
        },
    )
    q = cgroup_cpu_quota(sr, "/proc/77/cgroup")
    assert q.known and q.value == 4.0
    assert q.source.endswith("mariadb.service/cpu.max")


def test_v2_without_quota_is_known_none(tmp_path: Path) -> None:
    sr = sysroot_tree(
        tmp_path,
        {"/proc/77/cgroup": "0::/a\n", "/sys/fs/cgroup/a/cpu.max": "max 100000\n"},
    )
    q = cgroup_cpu_quota(sr, "/proc/77/cgroup")
    assert q.known and q.value is None


def test_v1_quota(tmp_path: Path) -> None:
    sr = sysroot_tree(
        tmp_path,
        {
            "/proc/77/cgroup": "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n",
            "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "150000\n",
            "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    q = cgroup_cpu_quota(sr, "/proc/77/cgroup")
    assert q.known and q.value == 1.5


@pytest.mark.parametrize("content", ["garbage", "400000", "400000 0", "abc 100000"])
def test_garbage_cpu_max_is_unknown_with_the_file(tmp_path: Path, content: str) -> None:
    sr = sysroot_tree(tmp_path, {"/proc/77/cgroup": "0::/a\n", "/sys/fs/cgroup/a/cpu.max": content})
    q = cgroup_cpu_quota(sr, "/proc/77/cgroup")
    assert not q.known and "cpu.max" in (q.unknown or "")


def _kunpeng_with_server(cpus: str, quota: float | None) -> Facts:
    f = collect_facts(ROOTS / "kunpeng920-2s", perf_live_test=False)
    srv = server("10.11.19-MariaDB", "Debian", {}).model_copy(
        update={
            "cpus_allowed": known(cpus, "/proc/1/status"),
            "cpu_quota_cpus": Fact[float](value=quota, source="/sys/fs/cgroup/db/cpu.max"),
        }
    )
    return f.model_copy(update={"server": srv})


def test_budget_is_the_quota_when_it_binds() -> None:
    b = server_resources(_kunpeng_with_server("0-127", 4.0)).usable_cpus
    assert b.value == 4 and "quota" in b.source


def test_budget_is_the_affinity_when_it_binds() -> None:
    b = server_resources(_kunpeng_with_server("0-3", None)).usable_cpus
    assert b.value == 4 and "Cpus_allowed_list 0-3" in b.source


def test_fractional_quota_rounds_up() -> None:
    assert server_resources(_kunpeng_with_server("0-127", 2.5)).usable_cpus.value == 3


def test_host_only_facts_say_the_servers_limits_were_not_read() -> None:
    f = collect_facts(ROOTS / "kunpeng920-2s", perf_live_test=False)
    b = server_resources(f).usable_cpus
    assert b.value == 128 and "not read" in b.source


def _plan_on_64_cores(cpus: str, quota: float | None) -> dict[str, tuple[str, dict[str, str]]]:
    from test_rules import MYSQL_80

    from myaccel.rules.engine import make_plan

    f = collect_facts(ROOTS / "kunpeng920-2s", perf_live_test=False)
    srv = server("8.0.40", "MySQL Community Server - GPL", MYSQL_80).model_copy(
        update={
            "cpus_allowed": known(cpus, "/proc/1/status"),
            "cpu_quota_cpus": Fact[float](value=quota, source="/sys/fs/cgroup/db/cpu.max"),
        }
    )
    plan = make_plan(f.model_copy(update={"server": srv}))
    return {r.id: (r.proposed, r.evidence) for r in plan.recommendations}


def test_a_four_cpu_server_on_a_many_core_host_is_sized_as_four_cpus() -> None:
    small = _plan_on_64_cores("0-3", 4.0)
    big = _plan_on_64_cores("0-127", None)
    # redo by the dedicated-server formula: CPUs / 2 GiB
    assert small["server-redo-capacity"][0] == "2G"
    assert big["server-redo-capacity"][0] == "16G"
    # evidence names what bound the CPU count
    cited = [e["cpus"] for _, e in small.values() if "cpus" in e]
    assert cited and all(c.startswith("4 (") for c in cited)
    # no rule sized by the host's 128 CPUs
    assert not any("128" in v for v, _ in small.values() if v.isdigit())


def test_an_unreadable_quota_file_is_unknown_not_no_quota(tmp_path: Path) -> None:
    sr = sysroot_tree(
        tmp_path,
        {
            "/proc/4242/cgroup": "0::/system.slice/db.service\n",
            "/sys/fs/cgroup/cpu.max": "max 100000\n",
        },
    )
    (tmp_path / "sys/fs/cgroup/system.slice/db.service/cpu.max").mkdir(parents=True)
    q = cgroup_cpu_quota(sr, "/proc/4242/cgroup")
    assert not q.known and "db.service/cpu.max" in (q.unknown or "")
    v1 = sysroot_tree(
        tmp_path / "v1",
        {
            "/proc/4242/cgroup": "3:cpu,cpuacct:/db\n",
            "/sys/fs/cgroup/cpu,cpuacct/db/cpu.cfs_period_us": "100000\n",
        },
    )
    (tmp_path / "v1/sys/fs/cgroup/cpu,cpuacct/db/cpu.cfs_quota_us").mkdir(parents=True)
    q1 = cgroup_cpu_quota(v1, "/proc/4242/cgroup")
    assert not q1.known and "cpu.cfs_quota_us" in (q1.unknown or "")
