"""A sandbox's dataset upgraded to a newer release line of its flavor, as a snapshot of its
own: the data of the version headroom's arms (``versions.py``).

From the campaign's dataset snapshot: the newer server started on a copy of it with the
sandbox's own configuration (it refuses nothing the older one accepted, or the start fails
with its error log's line), then the flavor's upgrade tool (MariaDB's ``mariadb-upgrade``:
the system tables, every table checked; MySQL >= 8.0.16 upgrades the data directory itself
while it starts), a clean stop, and the snapshot saved. One way: the older server cannot
start on it (``datadir.check_compatible`` refuses it by its ``mariadb_upgrade_info``), so the
campaign puts its own dataset back in the datadir at the end (``ab.restore_base_data``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from myaccel import proc
from myaccel.bench.ab import arm_owner
from myaccel.errors import SandboxError
from myaccel.server.sandbox import Sandbox, ServerInstall, ServerOptions

UPGRADED = "myaccel-ab-dataset-upgraded"
UPGRADE_TIMEOUT_S = 3600.0


def upgrade_tool(install: ServerInstall) -> Path | None:
    """The flavor's upgrade tool next to ``install``'s server (None: the server upgrades the
    data directory itself); a ``SandboxError`` when the flavor has one and it is missing."""
    names = install.adapter.upgrade_names
    if not names:
        return None
    for rel in install.adapter.upgrade_candidates():
        path = install.basedir / rel
        if path.is_file():
            return path
    raise SandboxError(
        f"{' or '.join(names)} not found under {install.basedir} ({install.label})",
        hint="the version headroom upgrades its copy of the data with the flavor's own tool: "
        "reinstall that server with it (scripts/ensure-mariadb.sh installs mariadb-upgrade)",
    )


def upgrade_argv(tool: Path, sb: Sandbox) -> list[str]:
    """The upgrade tool against the sandbox's running server: its admin (no password, over
    the sandbox's 0700 socket), no option file of the host's."""
    return [
        str(tool),
        "--no-defaults",
        f"--socket={sb.socket}",
        f"--user={sb.connect_params().user}",
    ]


@dataclass(frozen=True)
class UpgradedDataset:
    """``ab.DatasetMaker``: the dataset as ``install`` leaves it after its upgrade."""

    install: ServerInstall
    snapshot: str = UPGRADED

    def make(self, sb: Sandbox, base: str, note: Callable[[str], None]) -> None:
        t0 = time.monotonic()
        tool = upgrade_tool(self.install)
        sb.stop()
        if any(s.name == self.snapshot for s in sb.snapshot_list()):
            sb.snapshot_delete(self.snapshot)
        sb.snapshot_restore(base)
        note(f"upgrading a copy of the dataset to {self.install.label}")
        sb.start(
            ServerOptions(basedir=self.install.basedir, newer=True),
            progress=note,
            owner=arm_owner(),
        )
        how = "the server's own upgrade at start"
        if tool is not None:
            done = proc.run(upgrade_argv(tool, sb), timeout_s=UPGRADE_TIMEOUT_S)
            log = sb.dir / "upgrade.log"
            log.write_text(done.stdout + done.stderr)
            if not done.ok:
                sb.stop()
                raise SandboxError(
                    done.failure(f"{tool.name} on the copy of the dataset"),
                    hint=f"see {log}; the sandbox's own data is untouched (its snapshot '{base}')",
                )
            how = tool.name
        sb.stop()
        sb.snapshot_save(self.snapshot)
        note(
            f"dataset upgraded to {self.install.label} with {how} in "
            f"{time.monotonic() - t0:.1f} s: snapshot '{self.snapshot}' (the {self.install.version.series} arms start from it)"
        )
