"""``irq:IFACE``: a NIC's interrupts placed on chosen CPUs, on a copy of the this-vm fixture
sysroot (eth0: virtio2, IRQs 37-39 on CPUs 0-1); and the rule that proposes it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from myaccel.actions import apply_changes, rollback, setting_for, setting_from_spec, verify_journal
from myaccel.actions.settings.irq import RUNTIME_ONLY, IrqAffinitySetting
from myaccel.errors import UsageError
from myaccel.facts.collect import collect_facts
from myaccel.model import Irq, NetInterface
from myaccel.rules.engine import make_plan

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sysroots" / "this-vm"
IRQS = (37, 38, 39)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dest = tmp_path / "root"
    shutil.copytree(FIXTURE, dest, symlinks=True)
    return dest


def affinities(root: Path) -> list[str]:
    return [(root / f"proc/irq/{n}/smp_affinity_list").read_text() for n in IRQS]


def test_apply_places_every_irq_and_rollback_restores_them(root: Path, tmp_path: Path) -> None:
    s = setting_for("irq:eth0", root=root)
    assert isinstance(s, IrqAffinitySetting) and s.read() == "0-1"
    change = s.plan("1")
    assert change is not None and change.current == "0-1" and change.desired == "1"
    assert change.writes == tuple(f"/proc/irq/{n}/smp_affinity_list" for n in IRQS)
    assert RUNTIME_ONLY in change.warnings
    before = affinities(root)
    jdir = tmp_path / "journals"
    assert apply_changes([(s, "1")], jdir).status == "applied"
    assert affinities(root) == ["1\n"] * 3
    assert s.plan("1") is None and verify_journal(journal_dir=jdir) == []
    (root / "proc/irq/38/smp_affinity_list").write_text("0-1\n")  # a reboot resets it
    [drift] = verify_journal(journal_dir=jdir)
    assert drift.runtime_only and drift.actual == "37:1 38:0-1 39:1"
    rollback(journal_dir=jdir)
    assert affinities(root) == before


def test_rollback_finds_a_queue_by_name_after_its_number_changed(root: Path) -> None:
    """IRQ numbers may change across a reboot; the journal keeps each one's name."""
    s = IrqAffinitySetting("eth0", root=root)
    old = s.capture()
    recorded = json.loads(old.value or "{}")
    assert recorded["38"] == {"name": "virtio2-input.0", "cpus": "0-1"}
    # After a "reboot", virtio2-input.0 is IRQ 39 and virtio2-output.0 is IRQ 38.
    text = (root / "proc/interrupts").read_text()
    text = text.replace("virtio2-input.0", "SWAP").replace("virtio2-output.0", "virtio2-input.0")
    (root / "proc/interrupts").write_text(text.replace("SWAP", "virtio2-output.0"))
    (root / "proc/irq/38/smp_affinity_list").write_text("1\n")
    (root / "proc/irq/39/smp_affinity_list").write_text("0\n")
    recorded["38"]["cpus"] = "0"  # input.0 was on CPU 0, output.0 on 0-1
    entry = type("E", (), {"old": old.model_copy(update={"value": json.dumps(recorded)})})()
    s.revert(entry)  # type: ignore[arg-type]
    assert (root / "proc/irq/39/smp_affinity_list").read_text() == "0\n"  # input.0, by name
    assert (root / "proc/irq/38/smp_affinity_list").read_text() == "0-1\n"  # output.0


def test_spec_round_trip(root: Path) -> None:
    s = IrqAffinitySetting("eth0", root=root)
    again = setting_from_spec("irq", s.spec())
    assert isinstance(again, IrqAffinitySetting) and again.read() == s.read()
    assert not again.survives_reboot


@pytest.mark.parametrize(
    ("target", "value", "message"),
    [
        ("irq:eth9", "1", "no network interface 'eth9'"),
        ("irq:lo", "1", "has no interrupts of its own"),
        ("irq:eth0", "7", "CPUs 7 are not online here"),
        ("irq:eth0", "one", "is not a CPU list"),
        ("irq:eth0", "", "is not a CPU list"),
        ("irq:../x", "1", "is not a network interface name"),
    ],
)
def test_bad_input_is_refused_before_anything_changes(
    root: Path, target: str, value: str, message: str
) -> None:
    before = affinities(root)
    with pytest.raises(UsageError) as ei:
        setting_for(target, root=root).plan(value)
    assert message in ei.value.message and ei.value.hint
    assert affinities(root) == before


def test_a_running_irqbalance_is_warned_about(root: Path) -> None:
    (root / "proc/4242").mkdir()
    (root / "proc/4242/comm").write_text("irqbalance\n")
    change = IrqAffinitySetting("eth0", root=root).plan("1")
    assert change is not None and any("irqbalance (pid 4242)" in w for w in change.warnings)


def _with_cpus(root: Path, cpus: int, *, nic_node: int | None = None, balancing: bool = False):  # type: ignore[no-untyped-def]
    f = collect_facts(root, perf_live_test=False)
    eth = NetInterface(
        name="eth1",
        rx_queues=8,
        irqs=[Irq(irq=60 + q, name=f"virtio1-input.{q}", affinity="0-31") for q in range(8)],
        numa_node=nic_node,
    )
    cpu = f.cpu.model_copy(
        update={
            "logical_cpus": f.cpu.logical_cpus.model_copy(update={"value": cpus}),
            "online_cpus": f.cpu.online_cpus.model_copy(update={"value": f"0-{cpus - 1}"}),
        }
    )
    net = f.network.model_copy(
        update={
            "interfaces": f.network.interfaces.model_copy(update={"value": [eth]}),
            "irqbalance_running": f.network.irqbalance_running.model_copy(
                update={"value": balancing}
            ),
        }
    )
    return f.model_copy(update={"cpu": cpu, "network": net})


def test_the_rule_sets_one_core_per_eight_cpus_aside(root: Path) -> None:
    [r] = [r for r in make_plan(_with_cpus(root, 4)).recommendations if r.id.startswith("nic-irq")]
    assert (r.id, r.target, r.proposed, r.action) == (
        "nic-irq-affinity-eth1",
        "irq:eth1",
        "3",
        "apply",
    )
    [r] = [r for r in make_plan(_with_cpus(root, 32)).recommendations if r.id.startswith("nic-irq")]
    assert r.proposed == "28-31"


def test_the_rule_is_advice_while_irqbalance_runs_and_skips_small_machines(root: Path) -> None:
    p = make_plan(_with_cpus(root, 8, balancing=True))
    [r] = [r for r in p.recommendations if r.id.startswith("nic-irq")]
    assert r.action == "advisory" and "irqbalance" in r.verify
    p = make_plan(_with_cpus(root, 2))
    assert not [r for r in p.recommendations if r.id.startswith("nic-irq")]
    assert any(s.id == "nic-irq-affinity" and "fewer than 4 CPUs" in s.reason for s in p.skipped)
