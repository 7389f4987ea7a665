"""`accelerate --versions`: the version headroom, measured on a sandbox or on the clone of
an existing server, never on the user's server.

The campaign of `accelerate` (the server as it is, and with the plan) gets two more arms,
interleaved round-robin with the same statistics: the next release line of the flavor
installed here (``next_version``) on the same data, as it is and with the plan. That data
is a copy of the campaign's dataset upgraded by the newer server and the flavor's own tool
(``upgrade.UpgradedDataset``), a snapshot of its own that every run of those arms restores
(``bench.ab``: ``Arm.dataset``). What the upgrade changes (the catalog's removed and
deprecated knobs, changed defaults; the one-way upgrade of the data directory) is advice
only (``advice``): nothing is upgraded outside the sandbox."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

from myaccel.accelerate.upgrade import UpgradedDataset
from myaccel.artifacts import write_text
from myaccel.bench import ab
from myaccel.errors import MyaccelError, ToolMissing
from myaccel.knobs.version_diff import VersionDiff, version_diff
from myaccel.server.flavor import ServerVersion, flavor_label, parse_server_version
from myaccel.server.flavors import Flavor
from myaccel.server.optionfile import normalize_key
from myaccel.server.sandbox import Sandbox, ServerInstall
from myaccel.server.sandbox.datadir import series_key
from myaccel.server.sandbox.install import find_server
from myaccel.server.sandbox.options import read_server_options
from myaccel.server.sandbox.project import project_installs

VERSION_ARM = "version"  # the next version, the same configuration
VERSION_PLAN_ARM = "version-plan"  # the next version with the plan


def installed_servers(flavor: Flavor) -> list[ServerInstall]:
    """The servers of ``flavor`` installed here: the system's and the project's."""
    found: list[ServerInstall] = []
    with contextlib.suppress(MyaccelError):
        found.append(find_server(flavor=flavor))
    for p in project_installs(flavor):
        with contextlib.suppress(MyaccelError):
            found.append(find_server(flavor=flavor, series=p.series))
    return list({i.binary.resolve(): i for i in found}.values())


def next_version(
    flavor: Flavor, current: ServerVersion, installed: list[ServerInstall] | None = None
) -> ServerInstall:
    """The nearest release line of ``flavor`` above ``current``'s installed here; a
    ``ToolMissing`` with the install hint when there is none (before any side effect)."""
    have = installed if installed is not None else installed_servers(flavor)
    newer = [i for i in have if series_key(i.version.series) > series_key(current.series)]
    if newer:
        return min(newer, key=lambda i: series_key(i.version.series))
    label = flavor_label(flavor)
    later = [
        p for p in project_installs(flavor) if series_key(p.series) > series_key(current.series)
    ]
    seen = ", ".join(sorted({i.version.text for i in have})) or "none"
    hint = (
        f"install {label} {later[0].series} with: bash {later[0].script} (make system-deps); "
        "or leave out --versions"
        if later
        else f"the project installs no {label} newer than {current.series}; leave out --versions"
    )
    raise ToolMissing(
        f"no {label} newer than {current.text} is installed here (found: {seen})",
        hint=hint,
    )


@dataclass(frozen=True)
class VersionHeadroom:
    """The versions compared and what the catalog says the upgrade changes."""

    current: ServerVersion
    newer: ServerInstall
    diff: VersionDiff

    @property
    def current_label(self) -> str:
        return self.current.series

    @property
    def newer_label(self) -> str:
        return self.newer.version.series

    def advice(self) -> list[str]:
        """Advice only: what upgrading the server would change, and that it is one way."""
        cur, new = self.current.label, self.newer.version.label
        out = [
            f"measured on a copy of the data upgraded to {new}; the server itself is not "
            "upgraded (advice only)",
            f"the upgrade of the data directory is one way: {cur} cannot start on it "
            f"afterwards; take a backup before upgrading (mariadb-backup or a dump)",
        ]
        out += [f"{cur} -> {new}: {line}" for line in self.diff.lines()]
        if not self.diff.lines():
            out.append(f"{cur} -> {new}: the knob catalog records no change between them")
        stuck = self.diff.configured_removed()
        if stuck:
            out.append(
                f"the configuration sets {', '.join(stuck)}, which {new} no longer has: "
                "remove it before upgrading"
            )
        return out

    def summary(self) -> dict[str, object]:
        """For ``versions.json``."""
        d = self.diff
        return {
            "current": self.current.label,
            "newer": self.newer.version.label,
            "newer_basedir": str(self.newer.basedir),
            "removed": [{"knob": n, "in": v} for n, v in d.removed],
            "deprecated": [{"knob": n, "in": v} for n, v in d.deprecated],
            "changed_defaults": [{"knob": c.name, "old": c.old, "new": c.new} for c in d.defaults],
            "new": list(d.added),
            "advice": self.advice(),
        }


VERSIONS_FILE = "versions.json"


def save_headroom(out: Path, head: VersionHeadroom) -> Path:
    """``OUT/versions.json``: the versions compared and the advice (the figures are the
    campaign's ``comparison-version*.json``)."""
    path = out / VERSIONS_FILE
    write_text(path, json.dumps(head.summary(), indent=2) + "\n", private=True)
    return path


def configured_names(sb: Sandbox, install: ServerInstall) -> list[str]:
    """The option names the sandbox's base configuration sets (a clone's: its source's)."""
    if sb.state.base_config is None:
        return []
    groups = install.adapter.option_groups(install.version.series)
    with contextlib.suppress(MyaccelError, OSError):
        return [
            normalize_key(o.key) for o in read_server_options(Path(sb.state.base_config), groups)
        ]
    return []


def sandbox_version(sb: Sandbox) -> ServerVersion:
    """The version of the server that made the sandbox's datadir."""
    parsed = parse_server_version(sb.state.version_string)
    if parsed is not None and parsed.text == sb.state.version:
        return parsed
    major, minor, patch = (int(p) for p in sb.state.version.split("."))
    return ServerVersion(sb.state.flavor, major, minor, patch)


def headroom_for(sb: Sandbox, newer: ServerInstall) -> VersionHeadroom:
    """What the catalog says between the sandbox's version and ``newer``."""
    current = sandbox_version(sb)
    diff = version_diff(
        sb.state.flavor,
        current.text,
        newer.version.text,
        configured=configured_names(sb, newer),
    )
    return VersionHeadroom(current=current, newer=newer, diff=diff)


def version_arms(abreq: ab.AbRequest, head: VersionHeadroom) -> ab.AbRequest:
    """``abreq`` (as is, with the plan) with the two arms of the next version on its
    upgraded copy of the data, and their comparisons."""
    upgraded = UpgradedDataset(head.newer)

    def arm(name: str, config: Path | None) -> ab.Arm:
        return ab.Arm(
            name, config=config, basedir=head.newer.basedir, dataset=upgraded.snapshot, newer=True
        )

    as_is, planned = arm(VERSION_ARM, None), arm(VERSION_PLAN_ARM, abreq.candidate.config)
    c, n = head.current_label, head.newer_label
    base, plan, nb, np_ = f"{c} as is", f"{c} + plan", f"{n} as is", f"{n} + plan"
    return replace(
        abreq,
        baseline_label=base,
        candidate_label=plan,
        more=(*abreq.more, as_is, planned),
        pairs=(
            *abreq.pairs,
            ab.ArmPair("version", "baseline", VERSION_ARM, base, nb),
            ab.ArmPair("version-plan", "baseline", VERSION_PLAN_ARM, base, np_),
            ab.ArmPair("version-plan-vs-plan", "candidate", VERSION_PLAN_ARM, plan, np_),
        ),
        datasets=(*abreq.datasets, upgraded),
    )
