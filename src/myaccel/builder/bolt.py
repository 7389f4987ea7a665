"""BOLT: post-link block and function layout from a profile of the training workload.

Needs Debian's ``bolt-N`` (``/usr/lib/llvm-N/bin/llvm-bolt`` and ``perf2bolt``), a binary
linked with ``-Wl,--emit-relocs`` and a perf profile. These VMs have no PMU and no LBR, so
the profile is sampled with ``perf record -e cpu-clock`` and converted in non-LBR mode
(``perf2bolt -nl``); with LBR hardware ``-j any,u`` branch stacks would give BOLT more.
``BoltStage`` is the build pipeline's stage that profiles, converts and rewrites.
"""

from __future__ import annotations

import contextlib
import glob
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from myaccel import proc
from myaccel.builder.errors import BuildFailed
from myaccel.builder.manifest import BoltInfo, sha256_file
from myaccel.builder.markers import has_bolt_marker
from myaccel.builder.runner import BuildContext, Stage
from myaccel.builder.stages import check_runs, server_binary
from myaccel.builder.train import FixtureWorkload, workload_inputs


@dataclass(frozen=True)
class BoltTools:
    llvm_bolt: str
    perf2bolt: str
    perf: str
    version: str


def find_bolt() -> tuple[BoltTools | None, str]:
    """The BOLT tools, or None with the reason they cannot be used."""
    cands: list[tuple[str, str]] = []
    lb, p2b = proc.which("llvm-bolt"), proc.which("perf2bolt")
    if lb and p2b:
        cands.append((lb, p2b))
    for d in sorted(glob.glob("/usr/lib/llvm-*/bin"), reverse=True):
        b, p = Path(d) / "llvm-bolt", Path(d) / "perf2bolt"
        if b.is_file() and p.is_file():
            cands.append((str(b), str(p)))
    if not cands:
        return None, "llvm-bolt is not installed (Debian: apt-get install bolt-16)"
    perf = proc.which("perf")
    if perf is None:
        return None, "perf is not installed (apt-get install linux-perf): BOLT needs a profile"
    lb, p2b = cands[0]
    ver = proc.run([lb, "--version"], timeout_s=30)
    line = next((ln.strip() for ln in ver.stdout.splitlines() if "version" in ln.lower()), "")
    return BoltTools(lb, p2b, perf, line or "?"), ""


def bolt_args(binary: Path, fdata: Path, output: Path) -> list[str]:
    return [
        str(binary),
        "-o",
        str(output),
        f"-data={fdata}",
        "-reorder-blocks=ext-tsp",
        "-reorder-functions=hfsort",
        "-split-functions",
        "-split-all-cold",
        "-dyno-stats",
    ]


@contextlib.contextmanager
def perf_record_pid(perf: str, pid: int | None, perf_data: Path, log: IO[str]) -> Iterator[None]:
    """Sample ``pid`` with ``perf record -e cpu-clock`` into ``perf_data`` while the block
    runs (perf's messages go to ``log``)."""
    if pid is None:
        raise BuildFailed("the BOLT profiling sandbox has no server pid", hint="see the log")
    child = proc.spawn(
        [perf, "record", "-e", "cpu-clock", "-p", str(pid), "-o", str(perf_data)], output=log
    )
    try:
        yield
    finally:
        # SIGINT makes perf record write its data and end; SIGKILL if it hangs
        child.stop(grace_s=300, sig=signal.SIGINT)


class BoltStage(Stage):
    name = "bolt"
    title = "BOLT (perf profile, perf2bolt, llvm-bolt)"

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        r = ctx.request
        return {"profile": r.train_profile, "ops": r.train_ops, **workload_inputs(r)}

    def skip_reason(self, ctx: BuildContext) -> str | None:
        if ctx.toolchain.cross:
            reason = "cross build: perf cannot profile the target binary here"
        else:
            tools, reason = find_bolt()
            if tools is not None:
                return None
        ctx.manifest.bolt = BoltInfo(applied=False, skipped=reason)
        return reason

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        from myaccel.facts.binary import collect_binary

        tools, reason = find_bolt()
        if tools is None:
            raise BuildFailed(f"BOLT cannot run: {reason}", hint="install bolt-16 and linux-perf")
        lay = ctx.layout
        lay.bolt.mkdir(parents=True, exist_ok=True)
        binary = server_binary(ctx, lay.install)
        assert binary is not None
        # same base name as the installed binary: perf2bolt matches samples to it by
        # build id and file name
        pre = lay.bolt / "input" / binary.name
        pre.parent.mkdir(parents=True, exist_ok=True)
        prev = ctx.manifest.bolt
        if not (prev.applied and pre.is_file() and sha256_file(binary) == prev.output_sha256):
            shutil.copy2(binary, pre)  # the linked binary, before any rewrite
        rel = collect_binary(pre).relocations
        if not rel.value:
            raise BuildFailed(
                f"{pre.name} has no relocations (.rela.text): BOLT cannot rewrite it",
                hint="the final link must use -Wl,--emit-relocs (myaccel adds it with --opt bolt); "
                "rerun without --resume",
            )
        perf_data = lay.bolt / "perf.data"
        if ctx.tree.adapter.trainer == "fixture":
            wl = FixtureWorkload(ops=ctx.request.train_ops, threads=2)
            ctx.run_logged(
                [
                    tools.perf,
                    "record",
                    "-e",
                    "cpu-clock",
                    "-o",
                    str(perf_data),
                    "--",
                    *wl.argv(pre),
                ],
                log,
                cwd=lay.bolt,
                what="perf record",
                timeout_s=900,
            )
        else:
            from myaccel.builder.train import train_sandbox, training_workload

            # profile the server binary that will be rewritten: a sandbox of the install tree
            r = ctx.request
            train_sandbox(
                lay.install,
                lay.work / "home",
                training_workload(r.train_profile, r.train_workload, r.holdout),
                log,
                name="build-bolt",
                during=lambda pid: perf_record_pid(tools.perf, pid, perf_data, log),
                say=ctx.progress.note,
            )
        fdata = lay.bolt / "perf.fdata"
        ctx.run_logged(
            [tools.perf2bolt, "-nl", "-p", str(perf_data), "-o", str(fdata), str(pre)],
            log,
            what="perf2bolt",
            timeout_s=3600,
        )
        out = lay.bolt / f"{binary.name}.bolt"
        ctx.run_logged(
            [tools.llvm_bolt, *bolt_args(pre, fdata, out)], log, what="llvm-bolt", timeout_s=3600
        )
        ok, ev = has_bolt_marker(out)
        if not ok:
            raise BuildFailed(f"llvm-bolt output has no BOLT marker ({ev})", hint=f"see {log.name}")
        shutil.copy2(out, binary)
        check_runs(ctx, binary, log)
        digest = sha256_file(binary)
        ctx.manifest.binaries[str(binary)] = digest
        ctx.manifest.bolt = BoltInfo(
            applied=True,
            tool=tools.llvm_bolt,
            version=tools.version,
            input=str(pre),
            input_sha256=sha256_file(pre),
            input_relocations=True,
            profile=str(perf_data),
            mode="non-LBR (perf record -e cpu-clock; perf2bolt -nl)",
            output_sha256=digest,
        )
        return {"summary": f"rewrote {binary.name} ({ev})"}
