"""The probe on malformed proc/sys content (issue 15): never an exception; the field read
from a bad file is unknown with a reason that names the file and what is wrong, and every
other field keeps the value it has on the intact tree.

The fuzz test copies the fixture sysroots once (``symlinks=True``: captured sysfs trees hold
symlink loops), then corrupts one file the probe reads per example and restores it."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from myaccel.cpulist import MAX_CPU, parse_cpu_list
from myaccel.facts.collect import DEFAULT_DATADIRS, collect_facts
from myaccel.facts.cpu import collect_cpu
from myaccel.facts.kernel import collect_kernel
from myaccel.facts.managers import collect_managers
from myaccel.facts.memory import collect_memory
from myaccel.facts.network import collect_network
from myaccel.facts.perfcap import collect_perf
from myaccel.facts.render import format_markdown, format_text
from myaccel.facts.storage import collect_storage
from myaccel.facts.sysroot import Sysroot, parse_int, parse_size
from myaccel.model import Facts

ROOTS = Path(__file__).parent.parent / "fixtures" / "sysroots"
MACHINES = ("this-vm", "graviton2-m6g", "kunpeng920-2s", "yitian710-g8y2xlarge")
CPU = "sys/devices/system/cpu"


# ---------------------------------------------------------------- the parser


@pytest.mark.parametrize(
    "text",
    [
        "0-3\0\0garbage",
        "0-3,zz",
        "garbage",
        "0-",
        "-1",
        "3-1",
        "0-3,,4",
        "1 2",
        "٣",  # a non-ASCII digit int() would accept
        f"0-{MAX_CPU}",
        "9" * 5000,  # beyond int()'s digit limit
        "0-7:0",
        "0-7:3/2",
    ],
)
def test_cpu_list_garbage_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_cpu_list_valid_forms() -> None:
    assert parse_cpu_list(" 0-3,8\n") == [0, 1, 2, 3, 8]
    assert parse_cpu_list("0-7:2/4") == [0, 1, 4, 5]  # the kernel's used/group form
    assert parse_cpu_list("5") == [5]
    assert parse_cpu_list("\n") == []


@pytest.mark.parametrize("text", ["", "12 zz", "0x10", "1" * 21, str(1 << 64), "--1"])
def test_parse_int_strict(text: str) -> None:
    with pytest.raises(ValueError):
        parse_int(text)


@pytest.mark.parametrize("text", ["-5K", "zzK", "1" * 30 + " kB", "16E"])
def test_parse_size_strict(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


# ---------------------------------------------------------------- the cases of issue 15


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sysroots")
    out: dict[str, Path] = {}
    for name in MACHINES:
        dst = base / name
        shutil.copytree(ROOTS / name, dst, symlinks=True)
        out[name] = dst
    return out


class Editor:
    """Edits files of the module's sysroot copies and puts the original bytes back."""

    def __init__(self, copies: dict[str, Path]) -> None:
        self.copies = copies
        self.saved: dict[Path, bytes] = {}

    def root(self, machine: str) -> Path:
        return self.copies[machine]

    def _keep(self, path: Path) -> None:
        if path not in self.saved:
            self.saved[path] = path.read_bytes()

    def write(self, machine: str, rel: str, data: bytes) -> None:
        path = Path(os.path.realpath(self.copies[machine] / rel))
        self._keep(path)
        path.write_bytes(data)

    def lines(self, machine: str, rel: str, fn: Callable[[str], str | None]) -> None:
        text = (self.copies[machine] / rel).read_text()
        kept = [out for ln in text.splitlines() if (out := fn(ln)) is not None]
        self.write(machine, rel, ("\n".join(kept) + "\n").encode())

    def unlink(self, machine: str, rel: str) -> None:
        path = Path(os.path.realpath(self.copies[machine] / rel))
        self._keep(path)
        path.unlink()

    def restore(self) -> None:
        for path, data in self.saved.items():
            path.write_bytes(data)
        self.saved.clear()


@pytest.fixture()
def edit(copies: dict[str, Path]) -> Iterator[Editor]:
    ed = Editor(copies)
    try:
        yield ed
    finally:
        ed.restore()


def probe(root: Path) -> Facts:
    return collect_facts(root, perf_live_test=False)


G = "graviton2-m6g"


def test_issue_cpu_lists_each_unknown_with_reason_rest_kept(edit: Editor) -> None:
    intact = probe(edit.root(G)).cpu
    edit.write(G, f"{CPU}/online", b"0-3\0\0garbage")
    edit.write(G, "sys/devices/system/node/node0/cpulist", b"0-3,zz\n")
    edit.write(G, f"{CPU}/cpu0/cache/index2/shared_cpu_list", b"garbage\n")
    edit.write(G, f"{CPU}/cpu1/topology/thread_siblings_list", b"0-\n")
    c = probe(edit.root(G)).cpu
    assert not c.online_cpus.known
    assert "/sys/devices/system/cpu/online" in (c.online_cpus.unknown or "")
    assert "not a CPU number" in (c.online_cpus.unknown or "")
    assert "node0/cpulist" in (c.numa_nodes.unknown or "") and "'zz'" in (
        c.numa_nodes.unknown or ""
    )
    # issue 34: one bad cache file no longer hides every level; the field it held is None
    # and the source says why
    assert c.caches.known and "index2/shared_cpu_list" in c.caches.source
    assert "'garbage'" in c.caches.source
    kept, was = c.caches.value or [], intact.caches.value or []
    assert len(kept) == len(was) and kept[2].shared_cpu_count is None
    assert [lv for i, lv in enumerate(kept) if i != 2] == [lv for i, lv in enumerate(was) if i != 2]
    for f in (c.threads_per_core, c.physical_cores, c.cores_per_socket):
        assert "cpu1/topology/thread_siblings_list" in (f.unknown or "")
    # valid fields of the same probe are kept (the CPU list comes from /proc/cpuinfo)
    assert c.logical_cpus.value == intact.logical_cpus.value == 16
    assert c.logical_cpus.source == "/proc/cpuinfo"
    assert c.sockets == intact.sockets and c.sockets.value == 1
    for name in ("arch", "vendor", "model", "family", "implementer", "part", "has_lse", "has_sve"):
        assert getattr(c, name) == getattr(intact, name), name


def test_siblings_list_without_its_own_cpu_is_unknown(edit: Editor) -> None:
    edit.write(G, f"{CPU}/cpu3/topology/thread_siblings_list", b"7\n")
    c = probe(edit.root(G)).cpu
    assert "does not contain cpu3" in (c.threads_per_core.unknown or "")


def test_issue_bad_part_keeps_the_vendor(edit: Editor) -> None:
    edit.lines(
        G, "proc/cpuinfo", lambda ln: "CPU part\t: 0xZZ9" if ln.startswith("CPU part") else ln
    )
    facts = probe(edit.root(G))
    c = facts.cpu
    assert c.implementer.value == "0x41" and c.vendor.value == "ARM"
    assert not c.part.known and "0xZZ9" in (c.part.unknown or "")
    assert not c.model.known and not c.family.known
    text_view = format_text(facts)
    assert "0x-" not in text_view
    assert "implementer 0x41, part ?" in text_view and "ARM, model unknown" in text_view


@pytest.mark.parametrize("value", ["-1", "0x1ff", "0b101", "1_0"])
def test_bad_implementer_is_unknown_not_negative_hex(edit: Editor, value: str) -> None:
    edit.lines(
        G,
        "proc/cpuinfo",
        lambda ln: f"CPU implementer\t: {value}" if ln.startswith("CPU implementer") else ln,
    )
    c = probe(edit.root(G)).cpu
    assert not c.implementer.known and not c.vendor.known
    assert c.part.value == "0xd0c"


@pytest.mark.parametrize("machine", ["this-vm", G])
@pytest.mark.parametrize("content", [b"", b"processor\t: 0\nvendor", b"\x00\xff\xfe garbage"])
def test_empty_or_truncated_cpuinfo_reasons_agree(
    edit: Editor, machine: str, content: bytes
) -> None:
    edit.write(machine, "proc/cpuinfo", content)
    edit.unlink(machine, "proc/sys/kernel/arch")
    c = probe(edit.root(machine)).cpu
    assert not c.arch.known
    reasons = [f.unknown or "" for f in c.__dict__.values() if getattr(f, "unknown", None)]
    assert not any("not applicable on" in r for r in reasons), reasons
    for f in (c.has_lse, c.has_sve, c.has_crc32, c.has_avx2, c.has_avx512):
        assert (f.unknown or "").startswith("architecture unknown")
    # the topology does not come from cpuinfo: it is kept
    assert c.logical_cpus.known and c.sockets.known


def test_x86_cpuinfo_without_flags_line_is_not_i686(edit: Editor) -> None:
    edit.lines("this-vm", "proc/cpuinfo", lambda ln: None if ln.startswith("flags") else ln)
    edit.unlink("this-vm", "proc/sys/kernel/arch")
    c = probe(edit.root("this-vm")).cpu
    assert not c.arch.known and "flags" in (c.arch.unknown or "")
    assert not c.features.known and not c.has_avx2.known


# ---------------------------------------------------------------- fuzz


def _read_set(sr: Sysroot, fn: Callable[[Sysroot], Any]) -> tuple[Any, frozenset[str]]:
    sr.trace = []
    out = fn(sr)
    reads = frozenset(_real(sr.root, p) for p in sr.trace if not p.startswith("?"))
    sr.trace = None
    return out, reads


def _real(root: Path, logical: str) -> str:
    return os.path.realpath(root / logical.lstrip("/"))


def _storage_path(sr: Sysroot) -> str:
    return next((d for d in DEFAULT_DATADIRS if sr.exists(d)), "/")


SECTIONS: dict[str, Callable[[Sysroot], Any]] = {
    "cpu": collect_cpu,
    "memory": collect_memory,
    "kernel": collect_kernel,
    "storage": lambda sr: collect_storage(sr, _storage_path(sr)),
    "network": collect_network,
    "perf": lambda sr: collect_perf(sr, live_test=False),
    "managers": collect_managers,
    "hostname": lambda sr: sr.read("/proc/sys/kernel/hostname"),
}


@dataclass(repr=False)
class Baseline:
    root: Path
    doc: dict[str, Any]
    reads: dict[str, frozenset[str]]  # section -> real paths it read
    files: list[str]  # logical paths of regular files the probe reads

    def __repr__(self) -> str:
        return f"Baseline({self.root.name})"

    def shapes(self) -> list[list[str]]:
        """The files grouped by shape (digits as N): cpu0..cpu127 count once."""
        groups: dict[str, list[str]] = {}
        for f in self.files:
            groups.setdefault(re.sub(r"[0-9]+", "N", f), []).append(f)
        return [groups[k] for k in sorted(groups)]


def _baseline(root: Path) -> Baseline:
    sr = Sysroot(root)
    reads: dict[str, frozenset[str]] = {}
    for name, fn in SECTIONS.items():
        reads[name] = _read_set(sr, fn)[1]
    sr.trace = []
    doc = _dump(collect_facts(sr, perf_live_test=False))
    seen: dict[str, str] = {}
    for logical in sr.trace:
        if logical.startswith("?"):
            continue
        real = _real(root, logical)
        if os.path.isfile(real) and real.startswith(str(root) + os.sep):
            seen.setdefault(real, logical)
    return Baseline(root, doc, reads, sorted(seen.values()))


def _dump(facts: Facts) -> dict[str, Any]:
    d = facts.model_dump(mode="json")
    d.pop("collected_at")
    return d


def _facts_in(node: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every Fact (as dumped) in a facts document, with its dotted path."""
    if isinstance(node, dict):
        if set(node) == {"value", "source", "unknown"}:
            yield where, node
        for k, v in node.items():
            yield from _facts_in(v, f"{where}.{k}" if where else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _facts_in(v, f"{where}[{i}]")


def _concrete(source: str) -> bool:
    return source.startswith("/") and not any(ch in source for ch in "*{}, ")


MODES = ("truncate", "empty", "garbage", "nuls", "huge", "negative", "missing")


def _corrupt(path: Path, original: bytes, mode: str, junk: bytes) -> None:
    if mode == "missing":
        path.unlink()
        return
    data = {
        "truncate": original[: len(original) // 2],
        "empty": b"",
        "garbage": junk or b"\xff",
        "nuls": original.rstrip(b"\n") + b"\0\0garbage\n",
        "huge": b"9" * 30 + b"\n",
        "negative": b"-1\n" if not junk else b"-" + original.lstrip(b"-"),
    }[mode]
    path.write_bytes(data)


@pytest.fixture(scope="module")
def baselines(copies: dict[str, Path]) -> dict[str, Baseline]:
    return {name: _baseline(root) for name, root in copies.items()}


def test_fuzz_one_corrupted_file(baselines: dict[str, Baseline]) -> None:
    @settings(
        max_examples=int(os.environ.get("MYACCEL_FUZZ_EXAMPLES", "400")),
        derandomize="MYACCEL_FUZZ_EXAMPLES" not in os.environ,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        base = baselines[data.draw(st.sampled_from(MACHINES), label="machine")]
        shape = data.draw(st.sampled_from(base.shapes()), label="shape")
        logical = data.draw(st.sampled_from(shape), label="file")
        mode = data.draw(st.sampled_from(MODES), label="mode")
        junk = data.draw(st.binary(max_size=64), label="junk")
        real = Path(_real(base.root, logical))
        original = real.read_bytes()
        try:
            _corrupt(real, original, mode, junk)
            facts = probe(base.root)
            format_text(facts)
            format_markdown(facts)
            doc = _dump(facts)
        finally:
            real.write_bytes(original)
        _check(base, logical, str(real), mode, facts, doc)

    one()


def _check(base: Baseline, logical: str, real: str, mode: str, facts: Facts, doc: Any) -> None:
    # the document validates against the facts schema (the pydantic model it is made from)
    again = Facts.model_validate_json(facts.model_dump_json())
    assert again == facts
    # every field is a value or unknown with a reason
    for where, f in _facts_in(doc):
        if f["unknown"] is not None:
            assert f["unknown"].strip(), f"{where}: unknown without a reason"
            assert f["value"] is None, where
    # sections that never read the corrupted file are untouched
    for name, reads in base.reads.items():
        if real not in reads:
            assert doc[name] == base.doc[name], f"{name} changed by {mode} {logical}"
    # within a section, a field read from another concrete file is unchanged (except when
    # the corrupted file says which files to read or how to interpret them)
    if logical not in HUBS:
        before = dict(_facts_in(base.doc))
        for where, f in _facts_in(doc):
            old = before.get(where)
            if old is None or not _concrete(old["source"]) or where in DERIVED:
                continue
            if _real(base.root, old["source"]) != real:
                assert f == old, f"{where} changed by {mode} {logical}: {old} -> {f}"
    # reasons are true: a file that is there is not reported missing, and an architecture
    # that is unknown makes nothing "not applicable"
    for where, f in _facts_in(doc):
        why = f["unknown"] or ""
        if f["source"] == logical and mode != "missing":
            assert why != "not present", where
        if not facts.cpu.arch.known:
            assert "not applicable on" not in why, where


# Files that decide which other files are read or what they mean: corrupting them may change
# fields sourced elsewhere (sections that never read them are still checked above).
HUBS = frozenset(
    {
        "/proc/cpuinfo",
        "/proc/sys/kernel/arch",
        "/sys/devices/system/cpu/online",
        "/proc/self/mountinfo",
        "/proc/self/cgroup",
        "/proc/sys/kernel/osrelease",
        "/proc/interrupts",
        "/etc/tuned/active_profile",
    }
)
# Fields computed from several files whose source names only the one that decided the value.
DERIVED = frozenset({"memory.effective_limit_bytes"})


def test_one_bad_cache_file_keeps_the_other_levels(edit: Editor) -> None:
    """Issue 34: a garbage ``size`` made every cache level unknown. Now only that size is
    None; a garbage ``level`` leaves that index out; unknown only when no index parses."""
    intact = probe(edit.root(G)).cpu.caches.value or []
    edit.write(G, f"{CPU}/cpu0/cache/index2/size", b"zz\n")
    c = probe(edit.root(G)).cpu.caches
    assert c.known and "index2" in c.source and "'zz'" in c.source
    got = c.value or []
    assert got[2].size_bytes is None and got[2].level == intact[2].level
    assert [lv.size_bytes for lv in got[:2]] == [lv.size_bytes for lv in intact[:2]]
    edit.write(G, f"{CPU}/cpu0/cache/index1/level", b"x\n")
    c = probe(edit.root(G)).cpu.caches
    assert c.known and "index1 skipped" in c.source
    assert len(c.value or []) == len(intact) - 1
