"""Storage facts for the filesystem holding a path (the server's datadir by default)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from myaccel.facts.sysroot import Sysroot
from myaccel.model import Fact, StorageFacts, known, unknown

MOUNTINFO = "/proc/self/mountinfo"


@dataclass(frozen=True)
class Mount:
    dev: str  # major:minor
    mount_point: str
    options: str
    fs_type: str
    source: str
    super_options: str


def _unescape(s: str) -> str:
    return (
        s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
    )


def parse_mountinfo(text: str) -> list[Mount]:
    mounts: list[Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf = left.split()
        rf = right.split()
        if len(lf) < 6 or len(rf) < 2:
            continue
        mounts.append(
            Mount(
                dev=lf[2],
                mount_point=_unescape(lf[4]),
                options=lf[5],
                fs_type=rf[0],
                source=rf[1],
                super_options=rf[2] if len(rf) > 2 else "",
            )
        )
    return mounts


def find_mount(mounts: list[Mount], path: str) -> Mount | None:
    best: Mount | None = None
    p = path.rstrip("/") or "/"
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        covers = mp in (p, "/") or p.startswith(mp + "/")
        if covers and (best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/")):
            best = m  # later mounts shadow earlier ones on the same point
    return best


_SCHEDULERS = re.compile(r"(?:\[?[A-Za-z0-9_-]+\]?\s*)+")


def _scheduler(raw: Fact[str]) -> tuple[Fact[str], Fact[list[str]]]:
    """(selected, available) from ``mq-deadline [none]``; garbage is unknown."""
    if not raw.known or raw.value is None:
        return raw, unknown(raw.unknown or "?", raw.source)
    v = raw.value
    if v and _SCHEDULERS.fullmatch(v) and "[" not in v + "]" and len(v.split()) == 1:
        return known(v, raw.source), known([v], raw.source)  # "none": no elevator support
    if not v or not _SCHEDULERS.fullmatch(v) or v.count("[") != 1 or v.count("]") != 1:
        u = unknown(f"{raw.source}: unexpected content {v[:40]!r}", raw.source)
        return u, u
    sel = v[v.index("[") + 1 : v.index("]")]
    avail = v.replace("[", "").replace("]", "").split()
    if sel not in avail:
        u = unknown(f"{raw.source}: unexpected content {v[:40]!r}", raw.source)
        return u, u
    return known(sel, raw.source), known(avail, raw.source)


def _no_mount(path: Fact[str], why: str) -> StorageFacts:
    """Every fact but the path unknown, for one reason (the mount was not found)."""
    u = unknown(why, MOUNTINFO)
    return StorageFacts(
        path=path,
        mount_point=u,
        fs_type=u,
        mount_options=u,
        device=u,
        block_device=u,
        rotational=u,
        scheduler=u,
        schedulers_available=u,
        nr_requests=u,
        model=u,
    )


def collect_storage(sr: Sysroot, path: str) -> StorageFacts:
    if sr.live:
        path = os.path.realpath(path)
    path_f: Fact[str] = known(path, "argument")
    text = sr.read_text(MOUNTINFO)
    if text is None:
        return _no_mount(path_f, "cannot read /proc/self/mountinfo")
    m = find_mount(parse_mountinfo(text), path)
    if m is None:
        return _no_mount(path_f, f"no mount found for {path}")
    opts = m.options + ("," + m.super_options if m.super_options else "")
    disk: str | None = None
    why = ""
    if m.dev.startswith("0:"):
        why = f"{m.fs_type} on {m.source} is not backed by a block device"
    else:
        real = sr.realpath(f"/sys/dev/block/{m.dev}")
        if real is None:
            why = f"/sys/dev/block/{m.dev} not found"
        else:
            name = real.rstrip("/").rsplit("/", 1)[-1]
            parent = real.rstrip("/").rsplit("/", 1)[0]
            # a partition has a "partition" file; without it, its parent disk holds the queue
            if sr.exists(f"{real}/partition") or (
                sr.exists(f"{parent}/queue") and not sr.exists(f"{real}/queue")
            ):
                name = real.rstrip("/").rsplit("/", 2)[-2]
            disk = name
            # device-mapper / md: report the first slave disk's queue settings
            slaves = sr.listdir(f"/sys/block/{name}/slaves")
            if not sr.exists(f"/sys/block/{name}/queue/rotational") and slaves:
                disk = slaves[0]
    blk = f"/sys/block/{disk}" if disk else ""

    def q(fn: str) -> Fact[str]:
        if not disk:
            return unknown(why, "/sys/block")
        return sr.read(f"{blk}/queue/{fn}")

    scheduler, avail_f = _scheduler(q("scheduler"))
    rot = q("rotational")
    rot_f: Fact[bool] = (
        known(rot.value == "1", rot.source)
        if rot.known and rot.value in ("0", "1")
        else unknown(
            rot.unknown or f"{rot.source}: unexpected content {rot.value!r:.40}", rot.source
        )
    )
    nr = sr.read_int(f"{blk}/queue/nr_requests") if disk else unknown(why, "/sys/block")
    model = (
        sr.read(f"{blk}/device/model")
        if disk and sr.exists(f"{blk}/device/model")
        else unknown(
            "no model file (virtual disk or NVMe namespace)" if disk else why, f"{blk}/device/model"
        )
    )
    return StorageFacts(
        path=path_f,
        mount_point=known(m.mount_point, MOUNTINFO),
        fs_type=known(m.fs_type, MOUNTINFO),
        mount_options=known(opts, MOUNTINFO),
        device=known(m.source, MOUNTINFO),
        block_device=known(disk, f"/sys/dev/block/{m.dev}")
        if disk
        else unknown(why, f"/sys/dev/block/{m.dev}"),
        rotational=rot_f,
        scheduler=scheduler,
        schedulers_available=avail_f,
        nr_requests=nr,
        model=model,
    )
