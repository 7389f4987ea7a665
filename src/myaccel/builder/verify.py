"""``verify-build``: the KNOWLEDGE.md section 5 checklist on a produced binary.

Every check is ``pass``, ``fail``, ``unknown`` (cannot tell, with the reason) or ``skip``
(not requested / not applicable), with its evidence. The binary facts come from the probe's
analysis (``myaccel.facts.binary.collect_binary``); what the binary cannot show (compiler
warnings, the generated config, the pre-BOLT binary) comes from the build manifest.
"""

from __future__ import annotations

import json
import mmap
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from myaccel.builder.manifest import (
    MANIFEST,
    BoltInfo,
    BuildManifest,
    CheckResult,
    MissingProfile,
    RequestInfo,
    load_manifest,
    sha256_file,
)
from myaccel.builder.markers import has_bolt_marker
from myaccel.errors import BinaryError, MyaccelError
from myaccel.facts.binary import collect_binary
from myaccel.model import BinaryFacts

_DEFINE_RE = re.compile(r"^\s*#\s*define\s+CPU_LEVEL1_DCACHE_LINESIZE\s+(\d+)", re.MULTILINE)
_FLAG_RE = re.compile(r"-DCPU_LEVEL1_DCACHE_LINESIZE=(\d+)")
ATOMICS_EXPECTED = {"lse": "inline-lse", "outline": "outline", "llsc": "llsc"}


def _c(id_: str, title: str, status: str, evidence: str, expected: str = "") -> CheckResult:
    return CheckResult(id=id_, title=title, status=status, evidence=evidence, expected=expected)


def _readable(base: Path, rels: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(relative path, text) of each of ``rels`` under ``base`` that can be read."""
    for rel in rels:
        try:
            text = (base / rel).read_text(errors="replace")
        except OSError:
            continue
        yield rel, text


def cacheline_found(
    build_dir: Path, headers: list[str], source_dir: Path | None
) -> tuple[set[int], list[str]]:
    """Cache line values seen in the generated config headers, the compile flags recorded
    in compile_commands.json, and a patched InnoDB constant; with where they were seen."""
    values: set[int] = set()
    where: list[str] = []
    for rel, text in _readable(build_dir, headers):
        for m in _DEFINE_RE.finditer(text):
            values.add(int(m.group(1)))
            where.append(f"{rel}: #define CPU_LEVEL1_DCACHE_LINESIZE {m.group(1)}")
    cc = build_dir / "compile_commands.json"
    try:
        entries = json.loads(cc.read_text())
    except (OSError, ValueError):
        entries = []
    seen: dict[int, int] = {}
    for e in entries if isinstance(entries, list) else []:
        cmd = str(e.get("command") or " ".join(e.get("arguments") or []))
        for m in _FLAG_RE.finditer(cmd):
            seen[int(m.group(1))] = seen.get(int(m.group(1)), 0) + 1
    for v, n in sorted(seen.items()):
        values.add(v)
        where.append(
            f"compile_commands.json: -DCPU_LEVEL1_DCACHE_LINESIZE={v} in {n} of {len(entries)} compile commands"
        )
    if source_dir is not None:
        from myaccel.builder.patch import CANDIDATES

        for rel, text in _readable(source_dir, CANDIDATES):
            mc = re.search(
                r"(?:INNODB_CACHE_LINE_SIZE\s*=\s*|INNOBASE_CACHE_LINE_SIZE\s+)(\d+)\s*;?\s*$",
                text.split("#else", 1)[-1],
                re.MULTILINE,
            )
            if mc:
                values.add(int(mc.group(1)))
                where.append(f"{rel} (compiled copy): InnoDB cache line {mc.group(1)}")
    return values, where


def reclassify_missing_profiles(
    manifest: BuildManifest, binary: Path
) -> tuple[list[str], list[str], str] | None:
    """The optimized build's -Wmissing-profile warnings split by object, from its log and
    the instrumented server under OUT/train-install (None when either is gone)."""
    from myaccel.builder import pgo

    st = manifest.stage("build")
    if st is None or not st.log or not Path(st.log).is_file() or not manifest.install_dir:
        return None
    try:
        rel = binary.resolve().relative_to(Path(manifest.install_dir).resolve())
    except ValueError:
        return None
    instrumented = Path(manifest.out_dir) / "train-install" / rel
    return pgo.classify_missing_profiles(Path(st.log).read_text(errors="replace"), instrumented)


# Strings every mysqld/mariadbd carries whatever its version, architecture or build options
# (an InnoDB system variable and a server option); client programs and libraries have
# neither.
SERVER_MARKERS = (b"innodb_buffer_pool_size", b"skip-grant-tables")


def has_server_markers(binary: Path) -> bool:
    """Whether ``binary`` holds the strings of a MySQL-family server (read, not run: a
    binary of another architecture is recognised too)."""
    try:
        with binary.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return all(mm.find(m) >= 0 for m in SERVER_MARKERS)
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return False


def _build_owning(binary: Path, manifest: BuildManifest | None) -> BuildManifest | None:
    """The myaccel build ``binary`` belongs to: ``manifest`` (``--manifest``) or the
    manifest.json of an enclosing build directory, when the binary lies under its --out
    (the kvlab fixture, an instrumented server under OUT/train-install)."""
    real = binary.resolve()
    cands: list[BuildManifest] = [manifest] if manifest is not None else []
    for d in list(real.parents)[:4]:
        if (d / MANIFEST).is_file():
            try:
                cands.append(load_manifest(d / MANIFEST))
            except MyaccelError:
                continue
    digest = ""
    for m in cands:
        if m.out_dir and Path(m.out_dir).resolve() in real.parents:
            return m
        if m.binaries:
            digest = digest or sha256_file(real)
            if digest in m.binaries.values():
                return m
    return None


def require_server(binary: Path, manifest: BuildManifest | None) -> None:
    """``verify-build`` checks servers: refuse an ELF file that is neither a MySQL-family
    server (its strings) nor a binary of a myaccel build (its manifest)."""
    if has_server_markers(binary) or _build_owning(binary, manifest) is not None:
        return
    raise BinaryError(
        f"'{binary}' is not a MySQL/MariaDB server binary "
        "(it lacks the strings innodb_buffer_pool_size and skip-grant-tables of every server, "
        "and no myaccel build holds it)",
        hint="pass the server executable, e.g. <prefix>/bin/mariadbd, /usr/sbin/mysqld or "
        "OUT/install/bin/mariadbd of `myaccel build` (with --manifest OUT/manifest.json)",
    )


def run_checks(
    binary: Path, manifest: BuildManifest | None
) -> tuple[BinaryFacts, list[CheckResult]]:
    facts = collect_binary(binary)
    req = manifest.request if manifest else RequestInfo()
    # BOLT rewrites the binary and drops its DWARF: the compiler's traces (PGO, LTO) are
    # read from the linked binary it started from, kept under OUT/bolt.
    built = facts
    built_note = ""
    pre = Path(str(manifest.bolt.input)) if manifest and manifest.bolt.applied else None
    if pre is not None and pre.is_file():
        built = collect_binary(pre)
        built_note = f" [read from the pre-BOLT binary {pre.name}]"

    opts = set(req.opts)
    out: list[CheckResult] = []
    out += _pgo_checks(binary, built, built_note, opts, manifest)
    out.append(_instrumentation_check(facts))
    out.append(_lto_check(built, built_note, opts, have=manifest is not None))
    out.append(_atomics_check(facts, req))
    out += _bolt_checks(binary, facts, opts, manifest)

    # text alignment: informational (a link option of the OS layer's code huge pages)
    ta = facts.text_huge_page_ready
    out.append(
        _c(
            "text-alignment",
            "Text segment alignment",
            "pass" if ta.value else "skip",
            ta.source or (ta.unknown or ""),
        )
    )
    if "cacheline" in opts:
        out.append(_cacheline_check(req, manifest))
    return facts, out


def _pass_fail_unknown(value: object, known: bool) -> str:
    return "pass" if value else ("fail" if known else "unknown")


def _pgo_checks(
    binary: Path,
    built: BinaryFacts,
    built_note: str,
    opts: set[str],
    manifest: BuildManifest | None,
) -> list[CheckResult]:
    """PGO: the compiler switches recorded in DWARF, and the build's warnings."""
    have = manifest is not None
    pgo_ev = (
        "; ".join(built.pgo_evidence.value or []) or (built.pgo.unknown or built.pgo.source)
    ) + built_note
    if not ("pgo" in opts or (not have and built.pgo.value)):
        return [
            _c(
                "pgo-profile-use",
                "Profile use (-fprofile-use)",
                "skip",
                f"PGO not requested (binary: {pgo_ev})",
            )
        ]
    use = _c(
        "pgo-profile-use",
        "Profile use (-fprofile-use)",
        _pass_fail_unknown(built.pgo.value, built.pgo.known),
        pgo_ev,
        "-fprofile-use",
    )
    if manifest is None:
        return [
            use,
            _c(
                "pgo-missing-profile",
                "No -Wmissing-profile warnings",
                "unknown",
                "needs the build log: pass --manifest",
                "0 warnings",
            ),
        ]
    return [use, _missing_profile_check(binary, manifest)]


def _missing_profile_check(binary: Path, manifest: BuildManifest) -> CheckResult:
    """-Wmissing-profile warnings of the optimized build for the server's own sources."""
    warn = manifest.pgo.missing_profile or MissingProfile()
    hot, other = list(warn.hot), list(warn.other)
    fresh = reclassify_missing_profiles(manifest, binary)
    if fresh is not None:  # manifests of earlier versions split by source file
        hot, other, _ = fresh
    if not manifest.pgo.use_build_done:
        return _c(
            "pgo-missing-profile",
            "No -Wmissing-profile warnings",
            "unknown",
            "the optimized build did not finish",
            "0 warnings",
        )
    if hot:
        return _c(
            "pgo-missing-profile",
            "No -Wmissing-profile warnings",
            "fail",
            f"{len(hot)} server source(s) compiled without a profile, e.g. {hot[0]}",
            "0 warnings for server sources",
        )
    extra = (
        f"; {len(other)} warning(s) for objects outside the server (other programs, unlinked archive members)"
        if other
        else ""
    )
    return _c(
        "pgo-missing-profile",
        "No -Wmissing-profile warnings",
        "pass",
        f"0 warnings for server sources in the optimized build's log{extra}",
        "0 warnings",
    )


def _instrumentation_check(facts: BinaryFacts) -> CheckResult:
    """No instrumentation left (a PGO training build's __gcov_ symbols)."""
    title = "No instrumentation left (__gcov_*)"
    if facts.instrumented.value:
        return _c(
            "no-instrumentation", title, "fail", facts.instrumented.source, "no __gcov_ symbols"
        )
    if facts.instrumented.known:
        return _c(
            "no-instrumentation", title, "pass", facts.instrumented.source, "no __gcov_ symbols"
        )
    return _c("no-instrumentation", title, "unknown", facts.instrumented.unknown or "")


def _lto_check(built: BinaryFacts, built_note: str, opts: set[str], *, have: bool) -> CheckResult:
    lto_ev = (
        "; ".join(built.lto_evidence.value or []) or (built.lto.unknown or built.lto.source)
    ) + built_note
    if "lto" in opts or (not have and built.lto.value):
        st = _pass_fail_unknown(built.lto.value, built.lto.known)
        return _c("lto", "LTO traces", st, lto_ev, ".lto_priv. symbols / GNU GIMPLE producer")
    return _c("lto", "LTO traces", "skip", f"LTO not requested (binary: {lto_ev[:160]})")


def _atomics_check(facts: BinaryFacts, req: RequestInfo) -> CheckResult:
    at = facts.atomics.value
    want = ATOMICS_EXPECTED.get(str(req.atomics_expected or ""))
    if at is None:
        return _c("atomics", "Atomics class", "unknown", facts.atomics.unknown or "")
    if at.klass == "not-applicable":
        return _c("atomics", "Atomics class", "skip", at.detail)
    if want is None:
        return _c("atomics", "Atomics class", "skip", f"no class requested; binary: {at.detail}")
    st = "pass" if at.klass == want else "fail"
    return _c("atomics", "Atomics class", st, at.detail, want)


def _bolt_checks(
    binary: Path, facts: BinaryFacts, opts: set[str], manifest: BuildManifest | None
) -> list[CheckResult]:
    """BOLT: relocations kept on the input, marker on the output."""
    title = "Relocations kept for BOLT (--emit-relocs)"
    if "bolt" not in opts:
        return [
            _c(
                "relocations",
                title,
                "skip",
                f"BOLT not requested ({facts.relocations.source or facts.relocations.unknown})",
            )
        ]
    bolt = manifest.bolt if manifest else BoltInfo()
    if bolt.applied:
        ok, ev = has_bolt_marker(binary)
        rel = bolt.input_relocations
        return [
            _c("bolt", "BOLT applied", "pass" if ok else "fail", ev, ".note.bolt_info"),
            _c(
                "relocations",
                title,
                "pass" if rel else "fail",
                f"pre-BOLT binary {bolt.input}: .rela.text {'present' if rel else 'absent'}",
                ".rela.text",
            ),
        ]
    why = str(bolt.skipped or "the BOLT stage did not run")
    return [
        _c("bolt", "BOLT applied", "skip", why),
        _c(
            "relocations",
            title,
            _pass_fail_unknown(facts.relocations.value, facts.relocations.known),
            facts.relocations.source or (facts.relocations.unknown or ""),
            ".rela.text",
        ),
    ]


def _cacheline_check(req: RequestInfo, manifest: BuildManifest | None) -> CheckResult:
    """The cache line in the generated config / compile flags."""
    title = "Cache line in the generated config"
    if manifest is None:
        return _c("cacheline", title, "unknown", "needs the build directory: pass --manifest")
    expected = int(req.cacheline_bytes or 128)
    source = manifest.source
    src_copy = Path(source.compiled_from) if source.patched else None
    values, where = cacheline_found(Path(manifest.build_dir), list(source.config_headers), src_copy)
    if values:
        st = "pass" if expected in values and len(values) == 1 else "fail"
        return _c("cacheline", title, st, "; ".join(where), str(expected))
    return _c(
        "cacheline",
        title,
        "fail",
        f"no CPU_LEVEL1_DCACHE_LINESIZE in {', '.join(source.config_headers)} "
        "or compile_commands.json",
        str(expected),
    )
