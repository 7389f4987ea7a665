"""`accelerate --build`: the optimized build of the installed server's exact version, as
the third arm of the campaign (distro defaults, distro + plan, build + plan).

The source is the one ``myaccel build --from-installed`` finds (Debian's source package of
the sandbox's binary, fetched through a private apt list, or ``--source DIR`` checked
against the binary's version); the build is ``build.pipeline.build`` with PGO+LTO trained
on the chosen profile. Resumable: a ``--build-dir`` (or the default
``$MYACCEL_HOME/builds/<flavor>-<version>-lto+pgo``) whose manifest is complete is reused as
it is; one that is not is resumed (finished stages with unchanged inputs are skipped).

The estimate: per stage, the duration recorded by a previous complete build of the same
flavor and optimizations under ``$MYACCEL_HOME/builds`` (or the build directory's own
manifest), else the figures measured here for MariaDB 10.11.18 on 2 vCPUs
(docs/building.md) with the compile stages scaled by the number of cores.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from myaccel.builder.manifest import MANIFEST, BuildManifest, load_manifest
from myaccel.builder.runner import ProgressSink
from myaccel.errors import MyaccelError, UsageError
from myaccel.paths import myaccel_home

OPTS = ("lto", "pgo")  # the order build.flags.parse_opts gives

# Seconds per stage of MariaDB 10.11.18 PGO+LTO on this 2-vCPU VM (docs/building.md,
# "Real MariaDB 10.11.18"): configure 77 s + 5 s, compiles 2717 s and 1993 s, training 158 s.
REFERENCE_CPUS = 2
REFERENCE_S: dict[str, float] = {
    "configure-instrumented": 77.0,
    "build-instrumented": 2717.0,
    "install-instrumented": 2.0,
    "train": 158.0,
    "profile-check": 5.0,
    "configure": 5.0,
    "build": 1993.0,
    "install": 2.0,
    "verify": 15.0,
    "measure": 0.0,
}
SCALED = ("build-instrumented", "build")  # parallel compiles: scale by cores


@dataclass(frozen=True)
class BuildSpec:
    """What ``--build`` asks for."""

    source: str | None = None  # --source DIR; else Debian's source package of the binary
    build_dir: Path | None = None  # --build-dir; else the default under $MYACCEL_HOME/builds
    train_profile: str = "quick"
    jobs: int | None = None  # default: the CPUs
    swap_binary: bool = False  # --swap-binary: the sandbox keeps the build (journaled)


@dataclass(frozen=True)
class BuiltServer:
    install: Path  # the build's install tree (an arm's basedir)
    manifest: Path
    reused: bool  # complete already: nothing was compiled
    estimate_s: float  # what was left to do, estimated before starting
    wall_s: float


def stage_estimates(previous: BuildManifest | None, cpus: int) -> dict[str, float]:
    """Seconds per stage: a previous build's recorded durations where it has them, else
    the reference figures (compiles scaled from 2 to ``cpus``)."""
    est = {
        k: v * (REFERENCE_CPUS / max(1, cpus)) if k in SCALED else v for k, v in REFERENCE_S.items()
    }
    if previous is not None:
        for s in previous.stages:
            if s.status == "done" and s.duration_s is not None and not s.resumed:
                est[s.name] = s.duration_s
    return est


def remaining_s(est: dict[str, float], current: BuildManifest | None) -> float:
    """The estimate of what is left: stages not done in ``current`` (the build directory's
    own manifest, when resuming)."""
    done = {s.name for s in current.stages if s.status in ("done", "skipped")} if current else set()
    return sum(v for k, v in est.items() if k not in done)


def previous_build(flavor: str, home: Path | None = None) -> BuildManifest | None:
    """The newest complete PGO+LTO build of ``flavor`` under ``$MYACCEL_HOME/builds``."""
    root = (home or myaccel_home()) / "builds"
    found: list[BuildManifest] = []
    for man in sorted(root.glob(f"*/{MANIFEST}")) if root.is_dir() else []:
        try:
            m = load_manifest(man)
        except MyaccelError:
            continue
        if m.status == "complete" and m.source.flavor == flavor and tuple(m.request.opts) == OPTS:
            found.append(m)
    return max(found, key=lambda m: m.updated_at) if found else None


def complete_build(build_dir: Path, version: str) -> BuiltServer | None:
    """A complete build in ``build_dir`` of ``version`` (None when there is none yet);
    a complete build of another version, or one without an install tree, is refused."""
    man_path = build_dir / MANIFEST
    if not man_path.is_file():
        return None
    man = load_manifest(man_path)
    if man.status != "complete":
        return None
    built = man.source.version
    if built != version:
        raise UsageError(
            f"{build_dir} holds a build of {man.source.flavor} {built}, the server is {version}",
            hint="pass the --build-dir of a build of the server's exact version, or a new one",
        )
    install = Path(man.install_dir or build_dir / "install")
    if not install.is_dir():
        raise UsageError(
            f"{build_dir}'s manifest is complete but {install} is missing",
            hint="build again into a new --build-dir",
        )
    return BuiltServer(install, man_path, reused=True, estimate_s=0.0, wall_s=0.0)


class BuildNotes:
    """A ``build.runner.ProgressSink`` that tells ``say`` each stage with the estimated time
    left, and compile progress at most once a minute."""

    def __init__(
        self,
        say: Callable[[str], None],
        est: dict[str, float],
        left_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.say, self.est, self.left_s, self.clock = say, est, left_s, clock
        self._stage, self._t0, self._last = "", 0.0, 0.0

    def stage_started(self, name: str, title: str) -> None:
        self._stage, self._t0 = name, self.clock()
        self._last = self._t0
        self.say(f"build [{name}] {title} (about {self.left_s / 60:.0f} min left in the build)")

    def stage_progress(self, done: int | None, total: int | None, text: str) -> None:
        now = self.clock()
        if done is None or not total or now - self._last < 60:
            return
        self._last = now
        spent = now - self._t0
        eta = spent / done * (total - done) if done else self.est.get(self._stage, 0.0)
        self.say(
            f"build [{self._stage}] {done}/{total}, {spent:.0f} s, about {eta / 60:.0f} min to go"
        )

    def stage_finished(self, name: str, status: str, duration_s: float, note: str) -> None:
        self.left_s = max(0.0, self.left_s - self.est.get(name, 0.0))
        self.say(f"build [{name}] {status} {duration_s:.0f} s" + (f": {note}" if note else ""))

    def note(self, message: str) -> None:
        self.say(f"build: {message}")


def ensure_build(spec: BuildSpec, binary: Path, say: Callable[[str], None]) -> BuiltServer:
    """The PGO+LTO build of ``binary``'s exact version: reused when complete, else found
    (source), built or resumed. Raises the build's own errors (``BuildFailed``, ...): a
    rerun with the same ``--build-dir`` resumes."""
    from myaccel.builder.distsrc import describe_installed, resolve_source
    from myaccel.builder.flags import BuildRequest
    from myaccel.builder.pipeline import build, default_out
    from myaccel.builder.tree import detect_tree

    server = describe_installed(binary)
    say(
        f"installed server: {server.binary} ({server.flavor} {server.version}"
        + (f", {server.package} {server.deb_version}" if server.package else "")
        + ")"
    )
    if spec.build_dir is not None:
        done = complete_build(spec.build_dir, server.version)
        if done is not None:
            say(f"build: reusing the complete build in {spec.build_dir}")
            return done
    tree, origin = resolve_source(server, myaccel_home(), spec.source, say=say)
    assert tree is not None  # fetched (fetch_it=True) or given
    req = BuildRequest(
        opts=OPTS, jobs=spec.jobs or os.cpu_count() or 2, train_profile=spec.train_profile
    )
    out = spec.build_dir or default_out(detect_tree(tree), req)
    if spec.build_dir is None and (done := complete_build(out, server.version)) is not None:
        say(f"build: reusing the complete build in {out}")
        return done
    current = load_manifest(out / MANIFEST) if (out / MANIFEST).is_file() else None
    est = stage_estimates(previous_build(server.flavor) or current, req.jobs)
    left = remaining_s(est, current)
    how = "resuming" if current is not None else "building"
    say(
        f"build: {how} PGO+LTO of {tree} into {out} (trained on --train {spec.train_profile}); "
        f"estimate {left / 60:.0f} min on {req.jobs} job(s); interrupt and rerun to resume"
    )
    t0 = time.monotonic()
    sink: ProgressSink = BuildNotes(say, est, left)
    man = build(tree, req, out, resume=current is not None, progress=sink, origin=origin)
    return BuiltServer(
        install=Path(man.install_dir),
        manifest=Path(man.out_dir) / MANIFEST,
        reused=False,
        estimate_s=left,
        wall_s=time.monotonic() - t0,
    )
