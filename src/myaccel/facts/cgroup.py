"""Where a process sits in the cgroup tree: its v2 path and its v1 path for one controller
(from ``/proc/PID/cgroup``), and the directories from that cgroup up to the root (a parent's
limit binds its children)."""

from __future__ import annotations


def cgroup_paths(text: str, controller: str) -> tuple[str | None, str | None]:
    """(v2 path, v1 path of ``controller``) from the text of a ``/proc/PID/cgroup`` file;
    None where the file has no such line."""
    v2 = v1 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, ctrls, path = parts
        if hid == "0" and ctrls == "":
            v2 = path
        elif controller in ctrls.split(","):
            v1 = path
    return v2, v1


def ancestors(base: str, path: str) -> list[str]:
    """The cgroup directories below ``base`` from ``path`` up to ``base`` itself."""
    parts = [p for p in path.strip("/").split("/") if p]
    return [base + ("/" + "/".join(parts[:d]) if d else "") for d in range(len(parts), -1, -1)]
