"""``verify-build``: the KNOWLEDGE.md section 5 checklist on a produced binary.

Every check is ``pass``, ``fail``, ``unknown`` (cannot tell, with the reason) or ``skip``
(not requested / not applicable), with its evidence. The binary facts come from the probe's
analysis (``myaccel.facts.binary.collect_binary``); what the binary cannot show (compiler
warnings, the generated config, the pre-BOLT binary) comes from the build manifest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from myaccel.build.bolt import has_bolt_marker
from myaccel.build.manifest import BuildManifest, CheckResult
from myaccel.facts.binary import collect_binary
from myaccel.model import BinaryFacts

_DEFINE_RE = re.compile(r"^\s*#\s*define\s+CPU_LEVEL1_DCACHE_LINESIZE\s+(\d+)", re.MULTILINE)
_FLAG_RE = re.compile(r"-DCPU_LEVEL1_DCACHE_LINESIZE=(\d+)")
ATOMICS_EXPECTED = {"lse": "inline-lse", "outline": "outline", "llsc": "llsc"}


def _c(id_: str, title: str, status: str, evidence: str, expected: str = "") -> CheckResult:
    return CheckResult(id=id_, title=title, status=status, evidence=evidence, expected=expected)


def cacheline_found(
    build_dir: Path, headers: list[str], source_dir: Path | None
) -> tuple[set[int], list[str]]:
    """Cache line values seen in the generated config headers, the compile flags recorded
    in compile_commands.json, and a patched InnoDB constant; with where they were seen."""
    values: set[int] = set()
    where: list[str] = []
    for rel in headers:
        p = build_dir / rel
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
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
        from myaccel.build.patch import CANDIDATES

        for rel in CANDIDATES:
            p = source_dir / rel
            try:
                text = p.read_text(errors="replace")
            except OSError:
                continue
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
    from myaccel.build import pgo

    st = manifest.stage("build")
    if st is None or not st.log or not Path(st.log).is_file() or not manifest.install_dir:
        return None
    try:
        rel = binary.resolve().relative_to(Path(manifest.install_dir).resolve())
    except ValueError:
        return None
    instrumented = Path(manifest.out_dir) / "train-install" / rel
    return pgo.classify_missing_profiles(Path(st.log).read_text(errors="replace"), instrumented)


def run_checks(
    binary: Path, manifest: BuildManifest | None
) -> tuple[BinaryFacts, list[CheckResult]]:
    facts = collect_binary(binary)
    req = manifest.request if manifest else {}
    # BOLT rewrites the binary and drops its DWARF: the compiler's traces (PGO, LTO) are
    # read from the linked binary it started from, kept under OUT/bolt.
    built = facts
    built_note = ""
    pre = (
        Path(str(manifest.bolt.get("input"))) if manifest and manifest.bolt.get("applied") else None
    )
    if pre is not None and pre.is_file():
        built = collect_binary(pre)
        built_note = f" [read from the pre-BOLT binary {pre.name}]"

    opts = set(req.get("opts") or [])
    out: list[CheckResult] = []
    have = manifest is not None

    # PGO: the compiler switches recorded in DWARF, and the build's warnings
    pgo_ev = (
        "; ".join(built.pgo_evidence.value or []) or (built.pgo.unknown or built.pgo.source)
    ) + built_note
    if "pgo" in opts or (not have and built.pgo.value):
        if built.pgo.value:
            out.append(
                _c(
                    "pgo-profile-use",
                    "Profile use (-fprofile-use)",
                    "pass",
                    pgo_ev,
                    "-fprofile-use",
                )
            )
        elif built.pgo.known:
            out.append(
                _c(
                    "pgo-profile-use",
                    "Profile use (-fprofile-use)",
                    "fail",
                    pgo_ev,
                    "-fprofile-use",
                )
            )
        else:
            out.append(
                _c(
                    "pgo-profile-use",
                    "Profile use (-fprofile-use)",
                    "unknown",
                    pgo_ev,
                    "-fprofile-use",
                )
            )
        if have:
            assert manifest is not None
            warn = manifest.pgo.get("missing_profile", {})
            hot = list(warn.get("hot", []))
            other = list(warn.get("other", []))
            fresh = reclassify_missing_profiles(manifest, binary)
            if fresh is not None:  # manifests of earlier versions split by source file
                hot, other, _ = fresh
            if not manifest.pgo.get("use_build_done"):
                out.append(
                    _c(
                        "pgo-missing-profile",
                        "No -Wmissing-profile warnings",
                        "unknown",
                        "the optimized build did not finish",
                        "0 warnings",
                    )
                )
            elif hot:
                out.append(
                    _c(
                        "pgo-missing-profile",
                        "No -Wmissing-profile warnings",
                        "fail",
                        f"{len(hot)} server source(s) compiled without a profile, e.g. {hot[0]}",
                        "0 warnings for server sources",
                    )
                )
            else:
                extra = (
                    f"; {len(other)} warning(s) for objects outside the server (other programs, unlinked archive members)"
                    if other
                    else ""
                )
                out.append(
                    _c(
                        "pgo-missing-profile",
                        "No -Wmissing-profile warnings",
                        "pass",
                        f"0 warnings for server sources in the optimized build's log{extra}",
                        "0 warnings",
                    )
                )
        else:
            out.append(
                _c(
                    "pgo-missing-profile",
                    "No -Wmissing-profile warnings",
                    "unknown",
                    "needs the build log: pass --manifest",
                    "0 warnings",
                )
            )
    else:
        out.append(
            _c(
                "pgo-profile-use",
                "Profile use (-fprofile-use)",
                "skip",
                f"PGO not requested (binary: {pgo_ev})",
            )
        )

    # no instrumentation left
    if facts.instrumented.value:
        out.append(
            _c(
                "no-instrumentation",
                "No instrumentation left (__gcov_*)",
                "fail",
                facts.instrumented.source,
                "no __gcov_ symbols",
            )
        )
    elif facts.instrumented.known:
        out.append(
            _c(
                "no-instrumentation",
                "No instrumentation left (__gcov_*)",
                "pass",
                facts.instrumented.source,
                "no __gcov_ symbols",
            )
        )
    else:
        out.append(
            _c(
                "no-instrumentation",
                "No instrumentation left (__gcov_*)",
                "unknown",
                facts.instrumented.unknown or "",
            )
        )

    # LTO
    lto_ev = (
        "; ".join(built.lto_evidence.value or []) or (built.lto.unknown or built.lto.source)
    ) + built_note
    if "lto" in opts or (not have and built.lto.value):
        st = "pass" if built.lto.value else ("fail" if built.lto.known else "unknown")
        out.append(_c("lto", "LTO traces", st, lto_ev, ".lto_priv. symbols / GNU GIMPLE producer"))
    else:
        out.append(_c("lto", "LTO traces", "skip", f"LTO not requested (binary: {lto_ev[:160]})"))

    # atomics
    at = facts.atomics.value
    want = ATOMICS_EXPECTED.get(str(req.get("atomics_expected") or ""))
    if at is None:
        out.append(_c("atomics", "Atomics class", "unknown", facts.atomics.unknown or ""))
    elif at.klass == "not-applicable":
        out.append(_c("atomics", "Atomics class", "skip", at.detail))
    elif want is None:
        out.append(
            _c("atomics", "Atomics class", "skip", f"no class requested; binary: {at.detail}")
        )
    else:
        st = "pass" if at.klass == want else "fail"
        out.append(_c("atomics", "Atomics class", st, at.detail, want))

    # BOLT: relocations kept on the input, marker on the output
    if "bolt" in opts:
        bolt = manifest.bolt if manifest else {}
        if bolt.get("applied"):
            ok, ev = has_bolt_marker(binary)
            out.append(_c("bolt", "BOLT applied", "pass" if ok else "fail", ev, ".note.bolt_info"))
            rel = bolt.get("input_relocations")
            out.append(
                _c(
                    "relocations",
                    "Relocations kept for BOLT (--emit-relocs)",
                    "pass" if rel else "fail",
                    f"pre-BOLT binary {bolt.get('input')}: .rela.text {'present' if rel else 'absent'}",
                    ".rela.text",
                )
            )
        else:
            why = str(bolt.get("skipped") or "the BOLT stage did not run")
            out.append(_c("bolt", "BOLT applied", "skip", why))
            st = (
                "pass"
                if facts.relocations.value
                else ("fail" if facts.relocations.known else "unknown")
            )
            out.append(
                _c(
                    "relocations",
                    "Relocations kept for BOLT (--emit-relocs)",
                    st,
                    facts.relocations.source or (facts.relocations.unknown or ""),
                    ".rela.text",
                )
            )
    else:
        out.append(
            _c(
                "relocations",
                "Relocations kept for BOLT (--emit-relocs)",
                "skip",
                f"BOLT not requested ({facts.relocations.source or facts.relocations.unknown})",
            )
        )

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

    # cache line in the generated config / compile flags
    if "cacheline" in opts and manifest is not None:
        expected = int(req.get("cacheline_bytes") or 128)
        src_copy = (
            Path(manifest.source["compiled_from"]) if manifest.source.get("patched") else None
        )
        values, where = cacheline_found(
            Path(manifest.build_dir), list(manifest.source.get("config_headers") or []), src_copy
        )
        if expected in values and len(values) == 1:
            out.append(
                _c(
                    "cacheline",
                    "Cache line in the generated config",
                    "pass",
                    "; ".join(where),
                    str(expected),
                )
            )
        elif values:
            out.append(
                _c(
                    "cacheline",
                    "Cache line in the generated config",
                    "fail",
                    "; ".join(where),
                    str(expected),
                )
            )
        else:
            out.append(
                _c(
                    "cacheline",
                    "Cache line in the generated config",
                    "fail",
                    f"no CPU_LEVEL1_DCACHE_LINESIZE in {', '.join(manifest.source.get('config_headers') or [])} "
                    "or compile_commands.json",
                    str(expected),
                )
            )
    elif "cacheline" in opts:
        out.append(
            _c(
                "cacheline",
                "Cache line in the generated config",
                "unknown",
                "needs the build directory: pass --manifest",
            )
        )
    return facts, out
