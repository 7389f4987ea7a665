from pathlib import Path

from myaccel.facts.managers import collect_managers
from myaccel.facts.sysroot import Sysroot


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_tuned_profile_with_include(tmp_path: Path) -> None:
    # A tuned layout as shipped: throughput-performance included by a custom profile.
    write(tmp_path, "proc/4242/comm", "tuned\n")
    write(tmp_path, "proc/1/comm", "systemd\n")
    write(tmp_path, "etc/tuned/active_profile", "db\n")
    write(
        tmp_path,
        "etc/tuned/db/tuned.conf",
        "[main]\ninclude=throughput-performance\n[sysctl]\nvm.swappiness=1\n",
    )
    write(
        tmp_path,
        "usr/lib/tuned/throughput-performance/tuned.conf",
        "[main]\nsummary=x\n[vm]\ntransparent_hugepages=always\n[sysctl]\nvm.swappiness=10\nvm.dirty_ratio=40\n",
    )
    m = collect_managers(Sysroot(tmp_path))
    assert m.tuned_running.value is True and m.tuned_profile.value == "db"
    s = m.tuned_sysctls.value or {}
    assert s["vm.swappiness"] == "1"  # the child overrides its parent
    assert s["vm.dirty_ratio"] == "40"
    assert s["sys:kernel/mm/transparent_hugepage/enabled"] == "always"
    assert m.atune_running.value is False and m.bpftune_running.value is False


def test_no_managers(tmp_path: Path) -> None:
    write(tmp_path, "proc/1/comm", "init\n")
    m = collect_managers(Sysroot(tmp_path))
    assert m.tuned_running.value is False and not m.tuned_sysctls.known
