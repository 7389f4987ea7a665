"""The source of the installed server's exact version (``myaccel build --from-installed``).

1. The server binary (the system's, a sandbox's or a ``--basedir``'s) and its version
   (``--version``); the Debian package that owns it (``dpkg -S``) and that package's
   source package and version (``dpkg-query``).
2. The source: a tree given with ``--source``, or Debian's source package fetched with
   ``apt-get source`` through a private apt configuration under ``$MYACCEL_HOME/apt``
   (its own sources list, lists and cache; the host's apt state is never touched). Its
   ``deb-src`` entries mirror the host's own ``deb`` entries (same mirrors, suites,
   components and keyrings), so the version the host installed is the one they list.
3. The tree's version must be the binary's: the Debian revision from
   ``debian/changelog`` when the tree has one (``1:10.11.19-0+deb12u1``), else the upstream
   version of the tree (``VERSION``/``MYSQL_VERSION``).

Resumable: a fetched tree is recorded in ``$MYACCEL_HOME/sources/<pkg>_<version>/``
(``myaccel-source.json``) and reused without touching the network.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from myaccel import proc
from myaccel.builder.errors import DependencyMissing, TreeError
from myaccel.builder.tree import detect_tree
from myaccel.errors import UsageError

MARKER = "myaccel-source.json"
_CHANGELOG_HEAD = re.compile(r"^(\S+) \(([^)\s]+)\)")


@dataclass(frozen=True)
class InstalledServer:
    binary: str
    flavor: str
    version: str  # upstream X.Y.Z from --version
    package: str | None = None  # the Debian package owning the binary
    deb_version: str | None = None  # that package's version
    source_package: str | None = None
    source_version: str | None = None  # what apt-get source needs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def installed_binary(basedir: str | None, sandbox: str | None) -> Path:
    """The server binary of ``--sandbox NAME``, of ``--basedir DIR``, or the system's."""
    if sandbox:
        from myaccel.server.sandbox import Sandbox

        return Sandbox.load(sandbox).binary_path
    from myaccel.server.sandbox.install import find_server

    return find_server(Path(basedir) if basedir else None).binary


def _dpkg_owner(binary: Path) -> str | None:
    if proc.which("dpkg") is None:
        return None
    for path in dict.fromkeys([str(binary), str(binary.resolve())]):
        done = proc.run(["dpkg", "-S", path], timeout_s=60)
        if not done.ok:
            continue
        for line in done.stdout.splitlines():
            if line.startswith("diversion ") or ": " not in line:
                continue
            return line.split(": ", 1)[0].split(",")[0].strip()
    return None


def describe_installed(binary: Path) -> InstalledServer:
    """The server binary's version and, when dpkg owns it, its package and source."""
    from myaccel.server.sandbox.install import find_server

    inst = find_server(binary=binary)
    base = InstalledServer(str(inst.binary), inst.version.flavor, inst.version.text)
    pkg = _dpkg_owner(inst.binary)
    if pkg is None:
        return base
    fmt = "${Version}\t${source:Package}\t${source:Version}"
    done = proc.run(["dpkg-query", "-W", f"-f={fmt}", pkg], timeout_s=60)
    parts = done.stdout.strip().split("\t") if done.ok else []
    if len(parts) != 3:
        return InstalledServer(**{**base.to_dict(), "package": pkg})
    return InstalledServer(
        **{
            **base.to_dict(),
            "package": pkg,
            "deb_version": parts[0],
            "source_package": parts[1] or pkg,
            "source_version": parts[2] or parts[0],
        }
    )


def upstream_of(deb_version: str) -> str:
    """``1:10.11.19-0+deb12u1`` -> ``10.11.19``."""
    v = deb_version.split(":", 1)[-1]
    return v.rsplit("-", 1)[0] if "-" in v else v


def changelog_version(tree: Path) -> tuple[str, str] | None:
    """(source package, version) from the first line of ``debian/changelog``."""
    log = tree / "debian" / "changelog"
    if not log.is_file():
        return None
    with log.open(errors="replace") as fh:
        m = _CHANGELOG_HEAD.match(fh.readline())
    return (m.group(1), m.group(2)) if m else None


def check_tree_matches(tree: Path, server: InstalledServer) -> dict[str, Any]:
    """The tree must be the source of the binary's exact version (raises ``TreeError``)."""
    src = detect_tree(tree)
    deb = changelog_version(tree)
    hint = (
        "pass --source DIR of the installed version's tree, or leave out --source to fetch "
        "it (myaccel build --from-installed)"
    )
    if deb is not None and server.source_version is not None:
        if deb[1] != server.source_version:
            raise TreeError(
                f"the source tree is {deb[0]} {deb[1]} (debian/changelog), the installed "
                f"server {server.binary} is {server.source_package} {server.source_version}",
                hint=hint,
            )
        how = "debian/changelog"
    elif src.version != server.version:
        raise TreeError(
            f"the source tree is {src.adapter.label}, the installed server {server.binary} is "
            f"{server.version}",
            hint=hint,
        )
    else:
        how = "upstream version"
    return {"tree": str(tree), "version": deb[1] if deb else src.version, "matched_by": how}


# ---------------------------------------------------------------- a private apt


def host_deb_entries(etc: Path = Path("/etc/apt")) -> list[tuple[str, str, str, str]]:
    """The host's ``deb`` entries as (options, URI, suite, components), one-line lists and
    deb822 ``.sources`` files alike."""
    out: list[tuple[str, str, str, str]] = []
    files = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]
    for f in files:
        if not f.is_file():
            continue
        for line in f.read_text(errors="replace").splitlines():
            m = re.match(r"^\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
            if m:
                opts = (m.group(1) or "").strip()[1:-1].strip()
                out.append((opts, m.group(2), m.group(3), m.group(4).strip()))
    for f in sorted((etc / "sources.list.d").glob("*.sources")):
        for para in re.split(r"\n\s*\n", f.read_text(errors="replace")):
            fields: dict[str, str] = {}
            for line in para.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.strip()
            if "deb" not in fields.get("types", "").split():
                continue
            if fields.get("enabled", "yes").lower() == "no":
                continue
            opts = f"signed-by={fields['signed-by']}" if fields.get("signed-by") else ""
            for uri in fields.get("uris", "").split():
                for suite in fields.get("suites", "").split():
                    out.append((opts, uri, suite, fields.get("components", "")))
    return out


def deb_src_lines(entries: list[tuple[str, str, str, str]]) -> list[str]:
    lines = []
    for opts, uri, suite, comps in entries:
        line = f"deb-src {f'[{opts}] ' if opts else ''}{uri} {suite} {comps}".strip()
        if line not in lines:
            lines.append(line)
    return lines


@dataclass(frozen=True)
class PrivateApt:
    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "apt.conf"

    def write(self, lines: list[str]) -> None:
        for d in ("lists/partial", "cache/archives/partial", "sources.list.d"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        (self.root / "sources.list").write_text("\n".join(lines) + "\n")
        conf = [
            f'Dir::Etc::SourceList "{self.root / "sources.list"}";',
            f'Dir::Etc::SourceParts "{self.root / "sources.list.d"}";',
            f'Dir::State::Lists "{self.root / "lists"}";',
            f'Dir::Cache "{self.root / "cache"}";',
            'Acquire::Languages "none";',
        ]
        if os.geteuid() == 0:  # the _apt user cannot write into a private home
            conf.append('APT::Sandbox::User "root";')
        self.conf.write_text("\n".join(conf) + "\n")

    def argv(self, tool: str, *args: str) -> list[str]:
        return [tool, "-c", str(self.conf), *args]


def source_versions(apt: PrivateApt, package: str) -> list[str]:
    done = proc.run(apt.argv("apt-cache", "showsrc", "--only-source", package), timeout_s=120)
    return re.findall(r"^Version: (\S+)", done.stdout, flags=re.M) if done.ok else []


@dataclass(frozen=True)
class SourcePlan:
    """Where the installed server's source is (or will be fetched to)."""

    server: InstalledServer
    dest: Path  # $MYACCEL_HOME/sources/<pkg>_<version>
    tree: Path | None  # the unpacked tree, None until fetched

    @property
    def spec(self) -> str:
        return f"{self.server.source_package}={self.server.source_version}"


def plan_fetch(server: InstalledServer, home: Path) -> SourcePlan:
    if server.source_package is None or server.source_version is None:
        raise UsageError(
            f"{server.binary} ({server.flavor} {server.version}) does not belong to a Debian "
            "package: its source cannot be fetched",
            hint="pass --source DIR with the source tree of that exact version",
        )
    safe = server.source_version.replace(":", "_")
    dest = home / "sources" / f"{server.source_package}_{safe}"
    tree = None
    marker = dest / MARKER
    if marker.is_file():
        with contextlib.suppress(ValueError, OSError):
            rec = json.loads(marker.read_text())
            cand = Path(rec.get("tree", ""))
            if rec.get("version") == server.source_version and cand.is_dir():
                tree = cand
    return SourcePlan(server, dest, tree)


def fetch(plan: SourcePlan, home: Path, say: Any = None) -> Path:
    """``apt-get source PKG=VERSION`` into ``plan.dest`` (reused when already there)."""
    if plan.tree is not None:
        return plan.tree
    for tool, pkg in (("apt-get", "apt"), ("dpkg-source", "dpkg-dev")):
        if proc.which(tool) is None:
            raise DependencyMissing(
                f"fetching the source package needs {tool}", hint=f"apt-get install {pkg}"
            )
    server = plan.server
    lines = deb_src_lines(host_deb_entries())
    if not lines:
        raise DependencyMissing(
            "no apt source to derive a deb-src entry from (/etc/apt has no deb entries)",
            hint="pass --source DIR with the source tree of the installed version",
        )
    apt = PrivateApt(home / "apt")
    apt.write(lines)
    if say:
        say(f"apt-get update of {len(lines)} deb-src entries ({apt.root})")
    upd = proc.run(apt.argv("apt-get", "-q", "update"), timeout_s=1800)
    if not upd.ok:
        first = next((ln for ln in upd.stderr.splitlines() if ln.startswith("E:")), "")
        raise DependencyMissing(
            f"apt-get update of the deb-src entries failed: {first or upd.stderr[-200:]}",
            hint=f"check the entries in {apt.root / 'sources.list'}, or pass --source DIR",
        )
    assert server.source_package is not None and server.source_version is not None
    versions = source_versions(apt, server.source_package)
    if not versions:
        raise DependencyMissing(
            f"no deb-src entry lists the source package {server.source_package} "
            f"(entries: {apt.root / 'sources.list'})",
            hint="add a deb-src line of a mirror that has it to that file and rerun, "
            "or pass --source DIR",
        )
    if server.source_version not in versions:
        raise DependencyMissing(
            f"the deb-src entries list {server.source_package} {', '.join(versions[:4])}, "
            f"not the installed {server.source_version}",
            hint="pass --source DIR with the tree of the installed version, or upgrade the "
            "server to a version the archive has",
        )
    plan.dest.mkdir(parents=True, exist_ok=True)
    if say:
        say(f"apt-get source {plan.spec} into {plan.dest}")
    got = proc.run(
        apt.argv("apt-get", "-q", "source", "--only-source", plan.spec),
        timeout_s=3600,
        cwd=plan.dest,
    )
    trees = [p.parent.parent for p in plan.dest.glob("*/debian/changelog")]
    trees = [t for t in trees if (changelog_version(t) or ("", ""))[1] == server.source_version]
    if not got.ok or not trees:
        first = next((ln for ln in got.stderr.splitlines() if ln.startswith("E:")), "")
        why = first or got.stderr[-200:] or "no tree"
        hint = f"rerun to continue (downloads in {plan.dest} are reused), or pass --source DIR"
        if " 404 " in first:  # listed in the index, not served by the mirror
            why = f"the mirror lists it but does not serve its files ({first[3:].strip()})"
            hint = f"pass --source DIR with the {server.source_version} tree"
        raise DependencyMissing(f"apt-get source {plan.spec} failed: {why}", hint=hint)
    tree = trees[0]
    (plan.dest / MARKER).write_text(
        json.dumps({"version": server.source_version, "tree": str(tree)}, indent=2)
    )
    return tree


def resolve_source(
    server: InstalledServer,
    home: Path,
    source: str | None,
    *,
    fetch_it: bool = True,
    say: Any = None,
) -> tuple[Path | None, dict[str, Any]]:
    """The tree to build for ``server`` and what the manifest records about it. With
    ``fetch_it=False`` (dry runs) nothing is fetched: the tree is None until fetched."""
    origin: dict[str, Any] = {"installed": server.to_dict()}
    if source is not None:
        tree: Path | None = Path(source).resolve()
        origin["from"] = "--source"
    else:
        plan = plan_fetch(server, home)
        origin.update({"from": "apt-get source", "spec": plan.spec, "dest": str(plan.dest)})
        origin["reused"] = plan.tree is not None
        tree = plan.tree
        if tree is None and fetch_it:
            tree = fetch(plan, home, say)
    if tree is not None:
        origin["check"] = check_tree_matches(tree, server)
    return tree, origin
