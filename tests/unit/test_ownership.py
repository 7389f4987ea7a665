"""Who owns a setting (issue 34 defects 5 and 7a): host-wide kernel settings are advice in
a container, host hardware advice goes to known bare metal only."""

from __future__ import annotations

import pytest
from test_rules import MYSQL_80, host, ids, server

from myaccel.model import Facts, known, unknown
from myaccel.rules.engine import make_plan
from myaccel.rules.ownership import Machine, decide, machine, scope_of


def kunpeng(container: str | None, hypervisor: str | None = "none") -> Facts:
    f = host("kunpeng920-2s").model_copy(
        update={"server": server("8.0.34", "MySQL Community Server - GPL", MYSQL_80)}
    )
    c = known(container, "test") if container else unknown("nothing readable", "test")
    hv = known(hypervisor, "test") if hypervisor else unknown("no DMI", "test")
    return f.model_copy(update={"container": c, "cpu": f.cpu.model_copy(update={"hypervisor": hv})})


@pytest.mark.parametrize(
    ("target", "scope"),
    [
        ("mysql:innodb_io_capacity", "server"),
        ("mycnf:mysqld/innodb_log_file_size", "server"),
        ("systemd:server/CPUAffinity", "server"),
        ("sysctl:net.core.somaxconn", "server"),
        ("sysctl:vm.swappiness", "host-kernel"),
        ("debugfs:/sys/kernel/debug/sched/migration_cost_ns", "host-kernel"),
        ("sysfs:/sys/kernel/mm/transparent_hugepage/enabled", "host-kernel"),
        ("irq:eth0-TxRx-0", "host-kernel"),
        ("advice:prefetch", "host-hardware"),
        ("build:lse", "build"),
    ],
)
def test_scope_of(target: str, scope: str) -> None:
    assert scope_of(target) == scope


def test_the_decision_table() -> None:
    host_m, guest = Machine("host", "bare metal"), Machine("guest", "a kvm guest")
    box, nobody = Machine("container", "docker (/.dockerenv)"), Machine("unknown", "?")
    blind = Machine("guest-unknown-hypervisor", "hypervisor unknown (no DMI)")
    for m in (host_m, guest, box, nobody, blind):
        assert decide("server", m).action == "apply"
        assert decide("build", m).action == "apply"
    assert decide("host-kernel", host_m).action == "apply"
    assert decide("host-kernel", guest).action == "apply"  # a guest's kernel is its own
    assert decide("host-kernel", blind).action == "apply"
    assert decide("host-kernel", box).action == "advisory"
    assert decide("host-kernel", nobody).action == "advisory"
    assert decide("host-hardware", host_m).action == "apply"  # the rule's own (advisory)
    for m in (guest, box, nobody, blind):
        assert decide("host-hardware", m).action == "skip"


def test_a_container_gets_host_kernel_settings_as_advice() -> None:
    bare = make_plan(kunpeng("none"))
    assert any(
        r.target.startswith(("sysctl:kernel.sched", "debugfs:")) and r.action == "apply"
        for r in bare.recommendations
    )
    p = make_plan(kunpeng("docker"))
    host_kernel = [r for r in p.recommendations if scope_of(r.target) == "host-kernel"]
    assert host_kernel, "the container's plan still names the host settings, as advice"
    for r in host_kernel:
        assert r.action == "advisory", r
        assert "docker" in r.evidence["owner"] and "shares the host's kernel" in r.rationale
    # the server's own settings stay applicable
    assert any(r.target.startswith("mysql:") and r.action == "apply" for r in p.recommendations)
    assert "hardware-prefetch" not in ids(p)


def test_an_unknown_hypervisor_is_not_bare_metal() -> None:
    f = kunpeng("none", hypervisor=None)
    assert machine(f).role == "guest-unknown-hypervisor"
    p = make_plan(f)
    why = {s.id: s.reason for s in p.skipped}
    assert (
        "hypervisor unknown" in why["hardware-prefetch"]
        and "no host-level advice" in why["hardware-prefetch"]
    )
    assert "hardware-prefetch" in ids(make_plan(kunpeng("none", hypervisor="none")))
