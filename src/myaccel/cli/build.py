"""`myaccel build` (optimized server builds) and `myaccel verify-build` (the checklist)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from myaccel.cli import options
from myaccel.cli.progress import interactive, live_bar, note


class StageProgress:
    """Stage lines and a live bar for compiles on a terminal; plain lines elsewhere."""

    def __init__(self) -> None:
        self.tty = interactive()
        self._progress: Any = None
        self._task: Any = None
        self._name = ""
        self._t0 = 0.0
        self._last_plain = 0.0

    def stage_started(self, name: str, title: str) -> None:
        self._name, self._t0 = name, time.monotonic()
        if self.tty:
            from rich.progress import TimeElapsedColumn

            self._progress = live_bar("info", TimeElapsedColumn())
            self._task = self._progress.add_task(f"{name}: {title}", total=None, info="")
        else:
            note(f"[{name}] {title} ...")

    def stage_progress(self, done: int | None, total: int | None, text: str) -> None:
        if self._progress is not None and done is not None and total:
            self._progress.update(self._task, completed=done, total=total, info=f"{done}/{total}")
        elif (
            not self.tty
            and done is not None
            and total
            and time.monotonic() - self._last_plain >= 30
        ):
            self._last_plain = time.monotonic()
            note(f"[{self._name}] {done}/{total} ({time.monotonic() - self._t0:.0f} s)")

    def stage_finished(self, name: str, status: str, duration_s: float, info: str) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        mark = {"done": "ok", "resumed": "resumed", "skipped": "skipped", "failed": "FAILED"}
        note(
            f"[{name}] {mark.get(status, status)} {duration_s:.1f} s"
            + (f": {info}" if info else "")
        )

    def note(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.log(message)
        else:
            note(f"  {message}")


# the options of --from-installed
_HELP_INSTALLED = {
    "fetch": "With --from-installed: fetch and check the source tree, build nothing.",
    "basedir": "With --from-installed: the server of this install prefix (default: the system's).",
    "sandbox": "With --from-installed: the server binary this myaccel sandbox runs.",
}


def _training_file(value: str) -> str | None:
    """``--train``: a workload file (a path: ending in .json, holding a ``/``, or an
    existing file), checked now (replayable: not redacted, with statements); None for a
    bench profile, which must exist whether or not this build trains (a typo is refused,
    not ignored)."""
    path = Path(value)
    if not (value.endswith(".json") or "/" in value or path.is_file()):
        from myaccel.bench.profiles import get_profile
        from myaccel.errors import UsageError

        try:
            get_profile(value)
        except UsageError as exc:
            raise UsageError(f"--train {value}: {exc.message}", hint=exc.hint) from None
        return None
    from myaccel.bench.workload import load_replayable

    load_replayable(path)
    return str(path.resolve())


def _check_paths(kw: dict[str, Any]) -> None:
    """Every path of the command line, before anything is fetched, compiled or written (a
    dry run checks them too): the build directory can be created and written, the source
    fetched into $MYACCEL_HOME, ``--compare-with`` is an install tree that exists."""
    from myaccel.builder.errors import BuildOptionError
    from myaccel.outdir import check_writable_dir
    from myaccel.paths import myaccel_home

    if kw["from_installed"] and not kw["source"]:
        check_writable_dir(myaccel_home() / "sources", "the source directory (MYACCEL_HOME)")
    if not kw["fetch_only"]:
        out = kw["out"] or myaccel_home() / "builds"
        check_writable_dir(out, "--out" if kw["out"] else "the build directory (MYACCEL_HOME)")
    base = kw["compare_with"]
    if base and not Path(base).is_dir():
        raise BuildOptionError(
            f"--compare-with '{base}' does not exist",
            hint="pass the install tree of another build of the same source "
            "(OUT/install of `myaccel build`)",
        )


@click.command()
@click.option(
    "--source",
    "source",
    type=click.Path(),
    help="Top directory of a MariaDB/MySQL/Percona source tree.",
)
@click.option(
    "--from-installed",
    is_flag=True,
    help="Build the installed server's exact version: its Debian source package "
    "(apt-get source through a private deb-src list), or the tree given with --source, "
    "checked against the binary's version.",
)
@click.option("--fetch-only", is_flag=True, help=_HELP_INSTALLED["fetch"])
@options.directory("--basedir", help=_HELP_INSTALLED["basedir"])
@click.option("--sandbox", "sandbox_name", metavar="NAME", help=_HELP_INSTALLED["sandbox"])
@click.option(
    "--opt",
    "opt",
    default="",
    metavar="LIST",
    help="Optimizations, comma separated: lse,lto,pgo,bolt,cacheline (default: none, a plain build).",
)
@click.option(
    "--train",
    "train",
    default="quick",
    show_default=True,
    metavar="PROFILE|W.json",
    help="PGO/BOLT training: a bench profile (`myaccel bench --help` lists them), or a "
    "workload file of `myaccel capture` replayed on the training server (its schemas "
    "created from the capture's DDL).",
)
@click.option(
    "--holdout",
    is_flag=True,
    help="With --train W.json: train on the even-numbered examples of every statement class, "
    "replay the others on the final build (and --compare-with's) and record it in the manifest.",
)
@options.directory(
    "--out",
    "out",
    help="Build directory (default: $MYACCEL_HOME/builds/...).",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 256),
    default=None,
    help="Parallel compile jobs (default: CPUs).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue a build in --out: skip completed stages whose inputs are unchanged.",
)
@click.option(
    "--target-cpu",
    metavar="CPU",
    help="aarch64 core (-mcpu: neoverse-n1, tsv110, cortex-a72, ...) or x86 -march.",
)
@click.option(
    "--cross",
    type=click.Choice(["aarch64"]),
    help="Cross-build for aarch64 (aarch64-linux-gnu-gcc).",
)
@click.option(
    "--atomics",
    type=click.Choice(["auto", "llsc", "outline", "lse"]),
    default="auto",
    show_default=True,
    help="aarch64 atomics: auto = outline helpers; llsc = ARMv8.0 loops; lse = inline (as --opt lse).",
)
@click.option(
    "--sysroot",
    default="/",
    show_default=True,
    help="Probe the target CPU from this captured sysroot.",
)
@click.option(
    "--allow-patch", is_flag=True, help="Compile a reviewed source patch (MySQL InnoDB cache line)."
)
@click.option(
    "--cacheline-bytes", type=click.Choice(["64", "128", "256"]), default="128", show_default=True
)
@options.directory(
    "--compare-with",
    metavar="BASEDIR",
    help="Install tree of a baseline build: Ir per op of both.",
)
@click.option(
    "--cmake-arg",
    "cmake_args",
    multiple=True,
    metavar="ARG",
    help="Extra argument for cmake (repeatable).",
)
@click.option(
    "--train-ops", type=click.IntRange(1000), default=300_000, show_default=True, hidden=True
)
@click.option(
    "--measure-ops", type=click.IntRange(1000), default=60_000, show_default=True, hidden=True
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the manifest JSON at the end (with --dry-run: the plan as JSON).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Run every check and print the cmake invocations and stages; build and write nothing.",
)
def build(**kw: Any) -> None:
    """Build a server from source with verified optimizations.

    Every step is checked before hours are spent (tree, version, compiler, dependencies,
    target CPU), logged under OUT/logs, resumable, and recorded in OUT/manifest.json next
    to OUT/install, which `myaccel sandbox init --basedir` and `myaccel ab
    --candidate-basedir` accept.
    """
    import os

    from myaccel.builder.flags import BuildRequest, parse_opts
    from myaccel.builder.pipeline import build as run_build

    train_file = _training_file(kw["train"])
    _check_paths(kw)
    req = BuildRequest(
        opts=parse_opts(kw["opt"]),
        atomics=kw["atomics"],
        target_cpu=kw["target_cpu"],
        cross=kw["cross"],
        jobs=kw["jobs"] or os.cpu_count() or 2,
        train_profile="quick" if train_file else kw["train"],
        train_workload=train_file,
        holdout=kw["holdout"],
        train_ops=kw["train_ops"],
        measure_ops=kw["measure_ops"],
        allow_patch=kw["allow_patch"],
        cacheline_bytes=int(kw["cacheline_bytes"]),
        extra_cmake=tuple(kw["cmake_args"]),
        compare_with=str(Path(kw["compare_with"]).resolve()) if kw["compare_with"] else None,
        sysroot=kw["sysroot"],
    )
    source, origin = _source_tree(kw)
    if kw["fetch_only"]:
        click.echo(json.dumps(origin, indent=2) if kw["as_json"] else f"source tree: {source}")
        return
    if kw["dry_run"]:
        from myaccel.builder.pipeline import dry_run_plan, format_plan

        if source is None:  # --from-installed, not fetched yet: a dry run fetches nothing
            assert origin is not None
            plan: dict[str, Any] = {"source": {"from_installed": origin}, "stages": None}
            text = (
                f"# would fetch {origin['spec']} with apt-get source into {origin['dest']}, "
                "check its version, then build it (rerun --dry-run after fetching for the "
                "whole plan)"
            )
        else:
            plan = dry_run_plan(source, req, kw["out"], origin)
            text = format_plan(plan)
        click.echo(json.dumps(plan, indent=2) if kw["as_json"] else text)
        return
    t0 = time.monotonic()
    assert source is not None
    man = run_build(
        source, req, kw["out"], resume=kw["resume"], progress=StageProgress(), origin=origin
    )
    if kw["as_json"]:
        click.echo(man.model_dump_json(indent=2))
        return
    click.echo(format_summary(man.model_dump(), time.monotonic() - t0))
    from myaccel.cli.report import report_after_run

    # the manifest file, not OUT: OUT holds the build tree (compile_commands.json and more)
    out_dir = Path(man.out_dir)
    report_after_run([out_dir / "manifest.json"], out_dir)


def _source_tree(kw: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """The tree to build: ``--source``, or with ``--from-installed`` the installed server's
    own version (fetched unless this is a dry run; None then until it is fetched)."""
    from myaccel.builder.errors import BuildOptionError

    if not kw["from_installed"]:
        if kw["basedir"] or kw["sandbox_name"] or kw["fetch_only"]:
            raise BuildOptionError(
                "--basedir/--sandbox/--fetch-only go with --from-installed",
                hint="add --from-installed, or leave them out and pass --source DIR",
            )
        if not kw["source"]:
            raise BuildOptionError(
                "no source tree: pass --source DIR or --from-installed",
                hint="myaccel build --source DIR (a MariaDB/MySQL tree), or --from-installed "
                "to fetch the installed server's own source",
            )
        return str(kw["source"]), None
    from myaccel.builder.distsrc import describe_installed, installed_binary, resolve_source
    from myaccel.paths import myaccel_home

    binary = installed_binary(kw["basedir"], kw["sandbox_name"])
    server = describe_installed(binary)
    note(
        f"installed server: {binary} ({server.flavor} {server.version}"
        + (f", {server.package} {server.deb_version}" if server.package else "")
        + ")"
    )
    tree, origin = resolve_source(
        server, myaccel_home(), kw["source"], fetch_it=not kw["dry_run"], say=note
    )
    if tree is not None:
        note(f"source tree: {tree} ({origin['check']['matched_by']} {origin['check']['version']})")
    return (str(tree) if tree is not None else None), origin


def format_summary(m: dict[str, Any], wall_s: float) -> str:
    lines = [
        f"built {m['source']['label']} ({', '.join(m['request']['opts']) or 'plain'}) "
        f"with GCC {m['compiler']['version']} in {wall_s:.0f} s",
        f"install tree: {m['install_dir']}  (myaccel sandbox init NAME --basedir {m['install_dir']})",
        f"manifest:     {Path(m['out_dir']) / 'manifest.json'}  (report: build-report.md)",
        f"target:       {m['target']['why']}",
    ]
    if m["left_out"]:
        lines.append(f"left out:     {len(m['left_out'])} optional parts (see manifest left_out)")
    for s in m["stages"]:
        dur = f"{s['duration_s']:.0f} s" if s.get("duration_s") is not None else "-"
        why = f" ({s['reason']})" if s.get("reason") else ""
        lines.append(
            f"  {s['name']:22} {s['status']:8} {dur:>7}{' (resumed)' if s.get('resumed') else ''}{why}"
        )
    lines.append("verification:")
    for c in m["verification"]:
        lines.append(f"  {c['status']:7} {c['id']:20} {c['evidence'][:110]}")
    cg = m["measurements"].get("callgrind")
    if cg:
        mine = cg["this_build"]
        line = f"callgrind: {mine['ir_per_op']:.1f} Ir/op ({mine['ir_total']:,} Ir for {mine['ops']:,} ops)"
        if mine.get("mispredicts_per_op") is not None:
            line += f", {mine['mispredicts_per_op']:.2f} simulated mispredicts/op"
        if "baseline" in cg:
            b = cg["baseline"]
            line += f"; baseline {b['ir_per_op']:.1f} Ir/op ({cg['delta_pct']:+.1f}%)"
            if b.get("mispredicts_per_op") is not None:
                line += f", {b['mispredicts_per_op']:.2f} mispredicts/op"
        lines.append(line)
    return "\n".join(lines)


@click.command("verify-build")
@click.argument("binary", type=click.Path())
@click.option(
    "--manifest",
    "manifest_path",
    type=click.Path(),
    help="The build's manifest.json (adds warnings, config and BOLT checks).",
)
@options.json("Print the checks as JSON.")
@click.option(
    "--smoke",
    is_flag=True,
    help="Also start the MariaDB server (under qemu-user when built for another architecture) "
    "with a small, memory-bounded configuration on an empty datadir and check it answers.",
)
def verify_build(binary: str, manifest_path: str | None, as_json: bool, smoke: bool) -> None:
    """Check a built server binary: profile use, no instrumentation left, LTO, atomics class,
    relocations and BOLT, text alignment, cache line. Exit 6 when a check fails."""
    from myaccel.builder.errors import VerifyFailed
    from myaccel.builder.manifest import load_manifest
    from myaccel.builder.verify import require_server, run_checks

    man = load_manifest(Path(manifest_path)) if manifest_path else None
    facts, checks = run_checks(Path(binary), man)  # a missing, non-ELF, damaged file: refused
    require_server(Path(binary), man)  # /bin/true is an ELF file, not a server
    smoked = None
    if smoke:
        from myaccel.builder.smoke import smoke_binary
        from myaccel.paths import myaccel_home

        smoked = smoke_binary(
            Path(binary),
            str(facts.machine.value or ""),
            Path(man.install_dir) if man and man.install_dir else None,
            myaccel_home() / "verify-build",
            say=lambda m: None if as_json else click.echo(m),
        )
    if as_json:
        rows: Any = [c.model_dump() for c in checks]
        if smoked is not None:
            rows = {"checks": rows, "smoke": smoked.to_dict()}
        click.echo(json.dumps(rows, indent=2))
    else:
        for c in checks:
            exp = f" (expected {c.expected})" if c.expected and c.status != "pass" else ""
            click.echo(f"{c.status:7} {c.id:20} {c.evidence}{exp}")
        if smoked is not None:
            click.echo(f"smoke   {smoked.summary()}")
    failed = [c.id for c in checks if c.status == "fail"]
    if failed:
        raise VerifyFailed(
            f"{len(failed)} check(s) failed: {', '.join(failed)}",
            hint="see the evidence above; rebuild with the flags the manifest records",
        )
