"""``systemd:UNIT/Key``: one key in a drop-in myaccel owns for the server's unit."""

from __future__ import annotations

import re
from pathlib import Path

from myaccel import proc
from myaccel.actions.files import check_value_text, host_path
from myaccel.actions.journal import JournalEntry
from myaccel.actions.settings.base import Change, ManagedEntrySetting, Runner
from myaccel.errors import UsageError

SYSTEMD_DROPIN_NAME = "99-myaccel.conf"
SYSTEMD_UNIT_DIRS = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/lib/systemd/system",
    "/usr/lib/systemd/system",
)
SERVER_UNITS = ("mariadb.service", "mysql.service", "mysqld.service")
_UNIT_RE = re.compile(r"^[A-Za-z0-9_.@:\\-]+\.(service|socket|slice|scope)$")
_SYSTEMD_KEY_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def check_unit_name(unit: str) -> str:
    if not _UNIT_RE.match(unit):
        raise UsageError(
            f"'{unit}' is not a systemd unit name", hint="write it like mariadb.service"
        )
    return unit


class SystemdDropInSetting(ManagedEntrySetting):
    """``systemd:mariadb.service/NUMAPolicy``: one ``[Service]`` key in
    /etc/systemd/system/<unit>.d/99-myaccel.conf, then ``systemctl daemon-reload`` (through
    ``runner``; on a non-live root nothing is run unless a runner is given). Takes effect
    when the unit restarts."""

    kind = "systemd"
    spec_fields = ("unit", "key", "root", "section")
    managed_style = "systemd"

    def __init__(
        self,
        unit: str,
        key: str,
        *,
        root: str | Path = "/",
        section: str = "Service",
        runner: Runner | None = None,
    ) -> None:
        super().__init__(root)
        check_unit_name(unit)
        if not _SYSTEMD_KEY_RE.match(key) or not _SYSTEMD_KEY_RE.match(section):
            raise UsageError(
                f"'{section}.{key}' is not a systemd setting name",
                hint="write it as systemd spells it: NUMAPolicy, CPUAffinity, LimitNOFILE",
            )
        self.unit = unit
        self.key = key
        self.section = section
        self.runner = runner
        self.target = f"systemd:{unit}/{key}"
        self.path = f"/etc/systemd/system/{unit}.d/{SYSTEMD_DROPIN_NAME}"
        self.purpose = f"Drop-in for {self.unit}; it takes effect when the unit restarts."

    def _daemon_reload(self) -> None:
        if self.runner is not None:
            self.runner(["systemctl", "daemon-reload"])
        elif self.live:
            proc.run(["systemctl", "daemon-reload"], check=True, timeout_s=60)

    def plan(self, desired: str) -> Change | None:
        check_value_text(desired, self.target)
        desired = desired.strip()
        if not any(host_path(self.root, f"{d}/{self.unit}").exists() for d in SYSTEMD_UNIT_DIRS):
            raise UsageError(
                f"systemd unit {self.unit} is not installed",
                hint="name the unit that runs the server (systemctl list-units '*mysql*' "
                "'*mariadb*')",
            )
        current = self._owned_value()
        if current is not None and current.strip() == desired:
            return None
        return self._change(current, desired, [self.path], takes_effect="unit restart")

    def matches(self, actual: str | None, desired: str) -> bool:
        return actual is not None and actual.strip() == desired.strip()

    def apply(self, desired: str) -> None:
        self._write(desired.strip())
        self._daemon_reload()

    def revert(self, entry: JournalEntry) -> None:
        if self._restore_files(entry):
            self._daemon_reload()


def find_server_unit(root: str | Path = "/") -> str | None:
    """The installed systemd unit of the server (mariadb.service, mysql.service, ...)."""
    for unit in SERVER_UNITS:
        for d in SYSTEMD_UNIT_DIRS:
            if host_path(Path(root), f"{d}/{unit}").exists():
                return unit
    return None
