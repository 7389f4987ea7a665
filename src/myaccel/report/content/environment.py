"""The environment section: host, CPU, memory, kernel, storage, server and binary from
the facts (else from the run records), the dataset and the benchmark."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from myaccel import __version__
from myaccel.bench.run_record import RunRecord
from myaccel.model import Facts
from myaccel.units import format_gib as _gib


def _v(fact: Any) -> Any:
    return getattr(fact, "value", None)


def _yn(fact: Any) -> str:
    v = _v(fact)
    if v is None:
        return "unknown"
    return "yes" if v else "no"


def environment(facts: Facts | None, runs: Sequence[RunRecord]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if facts is not None:
        c, m, k, st = facts.cpu, facts.memory, facts.kernel, facts.storage
        rows.append(("Host", str(_v(facts.hostname) or "?")))
        rows.append(
            (
                "CPU",
                f"{_v(c.model) or '?'} ({_v(c.arch) or '?'}, family {_v(c.family) or '?'}), "
                f"{_v(c.logical_cpus) or '?'} logical CPUs, {_v(c.sockets) or '?'} socket(s), "
                f"{len(_v(c.numa_nodes) or [])} NUMA node(s)",
            )
        )
        feats = [
            name
            for name, f in (
                ("LSE", c.has_lse),
                ("SVE", c.has_sve),
                ("AVX2", c.has_avx2),
                ("AVX-512", c.has_avx512),
            )
            if _v(f)
        ]
        if feats:
            rows.append(("CPU features", ", ".join(feats)))
        rows.append(
            (
                "Memory",
                f"{_gib(_v(m.total_bytes))}, budget {_gib(_v(m.effective_limit_bytes))}; "
                f"THP {_v(m.thp_enabled) or '?'}; swappiness {_v(m.swappiness)}",
            )
        )
        rows.append(("Kernel", f"{_v(k.release) or '?'}"))
        rows.append(
            (
                "Storage",
                f"{_v(st.fs_type) or '?'} on {_v(st.block_device) or '?'} "
                f"(rotational {_v(st.rotational)}, scheduler {_v(st.scheduler) or '?'})",
            )
        )
        s = facts.server
        if s is not None:
            rows.append(
                (
                    "Server",
                    f"{_v(s.flavor) or '?'} {_v(s.version) or '?'}: {_v(s.version_string) or '?'} "
                    f"({_v(s.version_comment) or '?'})",
                )
            )
            rows.append(("Server binary", str(_v(s.binary_path) or "?")))
        b = facts.binary
        if b is not None:
            at = _v(b.atomics)
            rows.append(
                (
                    "Binary facts",
                    f"atomics {at.klass if at else '?'}; LTO {_yn(b.lto)}; PGO {_yn(b.pgo)}; "
                    f"stripped {_yn(b.stripped)}; text 2 MiB aligned {_yn(b.text_huge_page_ready)}; "
                    f"compiler {', '.join(_v(b.compiler) or []) or '?'}",
                )
            )
        perf = _v(facts.perf.perf_version)
        rows.append(
            ("perf", f"{perf or 'not found'}; hardware counters {_v(facts.perf.hardware_counters)}")
        )
        rows.append(("Facts", f"collected {facts.collected_at} by myaccel {facts.myaccel_version}"))
    elif runs:
        h, sv = runs[0].host, runs[0].server
        rows.append(("Host", str(h.get("hostname", "?"))))
        rows.append(
            (
                "CPU",
                f"{h.get('cpu_model', '?')} ({h.get('arch', '?')}), {h.get('logical_cpus', '?')} logical CPUs",
            )
        )
        rows.append(("Kernel", str(h.get("kernel", "?"))))
        rows.append(("Server", f"{sv.get('flavor', '?')} {sv.get('version_string', '?')}"))
    if runs:
        d = runs[0].dataset
        rows.append(
            (
                "Dataset",
                f"{d.get('tables', '?')} tables x {d.get('table_size', '?'):,} rows"
                if isinstance(d.get("table_size"), int)
                else f"{d.get('tables', '?')} tables x {d.get('table_size', '?')} rows",
            )
        )
        sp = runs[0].spec
        rows.append(
            (
                "Benchmark",
                f"sysbench ({runs[0].command[0] if runs[0].command else '?'}), "
                f"{sp.get('duration_s', '?')} s measured after {sp.get('warmup_s', '?')} s warm-up, "
                f"--rand-type={sp.get('rand_type', '?')}, ps-mode {sp.get('ps_mode', '?')}, "
                f"client CPUs {sp.get('client_cpus') or 'unpinned'}",
            )
        )
    rows.append(("Report", f"myaccel {__version__}"))
    return rows


def logical_cpus(facts: Facts | None, runs: Sequence[RunRecord]) -> int | None:
    if facts is not None and isinstance(_v(facts.cpu.logical_cpus), int):
        return int(facts.cpu.logical_cpus.value or 0) or None
    for r in runs:
        n = r.host.get("logical_cpus")
        if isinstance(n, int) and n > 0:
            return n
    return None
