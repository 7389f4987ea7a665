"""What perf can do here: the tool, permissions, PMUs and the events our metric sets use."""

from __future__ import annotations

from myaccel import proc
from myaccel.errors import MyaccelError
from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, PerfFacts, known, unknown

PMU_DIR = "/sys/bus/event_source/devices"
# Event names as sysfs spells them (lowercase), KNOWLEDGE.md section 6; x86 names as the
# core PMU ("cpu") exposes them.
WANTED_EVENTS = (
    "cpu_cycles",
    "inst_retired",
    "stall_frontend",
    "stall_backend",
    "stall_slot_frontend",
    "stall_slot_backend",
    "stall_slot",
    "op_retired",
    "op_spec",
    "l1i_tlb_refill",
    "itlb_walk",
    "l1i_cache_refill",
    "l1d_cache_refill",
    "l1d_tlb_refill",
    "dtlb_walk",
    "l2d_cache_refill",
    "br_mis_pred_retired",
    "cpu-cycles",
    "instructions",
    "branch-misses",
    "cache-misses",
    "slots",
    "topdown-fe-bound",
    "topdown-be-bound",
    "topdown-retiring",
    "topdown-bad-spec",
)


def collect_perf(sr: Sysroot, *, live_test: bool = True) -> PerfFacts:
    pmus = sr.listdir(PMU_DIR)
    pmus_f: Fact[list[str]] = (
        known(pmus, PMU_DIR) if pmus else unknown("no PMU devices in sysfs", PMU_DIR)
    )
    events: dict[str, bool] = dict.fromkeys(WANTED_EVENTS, False)
    for pmu in pmus:
        for ev in sr.listdir(f"{PMU_DIR}/{pmu}/events"):
            if ev in events:
                events[ev] = True
    events_f: Fact[dict[str, bool]] = known(events, f"{PMU_DIR}/*/events")

    if not sr.live:
        nl = "not a live system (sysroot): perf itself was not examined"
        perf_path: Fact[str] = unknown(nl, "PATH")
        perf_version: Fact[str] = unknown(nl, "perf --version")
        hw: Fact[bool] = unknown(nl, "perf stat")
    else:
        path = proc.which("perf")
        if path is None:
            nf = "perf is not installed (apt-get install linux-perf)"
            perf_path, perf_version, hw = (
                unknown(nf, "PATH"),
                unknown(nf, "perf --version"),
                unknown(nf, "perf stat"),
            )
        else:
            perf_path = known(path, "PATH")
            try:
                v = proc.run([path, "--version"], timeout_s=10)
                perf_version = (
                    known(v.stdout.strip(), "perf --version")
                    if v.ok
                    else unknown(v.stderr.strip()[:200] or "failed", "perf --version")
                )
            except MyaccelError as exc:
                perf_version = unknown(exc.message, "perf --version")
            hw = _hardware_counters(path) if live_test else unknown("not tested", "perf stat")
    return PerfFacts(
        perf_path=perf_path,
        perf_version=perf_version,
        paranoid=sr.read_int("/proc/sys/kernel/perf_event_paranoid"),
        kptr_restrict=sr.read_int("/proc/sys/kernel/kptr_restrict"),
        pmus=pmus_f,
        events=events_f,
        hardware_counters=hw,
    )


def _hardware_counters(perf: str) -> Fact[bool]:
    src = "perf stat -x, -e instructions -- true"
    try:
        r = proc.run([perf, "stat", "-x,", "-e", "instructions", "--", "true"], timeout_s=10)
    except MyaccelError as exc:
        return unknown(exc.message, src)
    text = r.stderr
    if "<not supported>" in text or "<not counted>" in text:
        return known(False, src)
    for line in text.splitlines():
        first = line.split(",", 1)[0].strip()
        if first.isdigit() and "instructions" in line:
            return known(True, src)
    if not r.ok:
        return unknown(f"perf stat failed: {text.strip()[:160]}", src)
    return known(False, src)
