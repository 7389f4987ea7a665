"""``systemd:UNIT/Key``: one key in a drop-in myaccel owns for the server's unit."""

from __future__ import annotations

import re
from pathlib import Path

from myaccel import proc
from myaccel.actions.errors import ApplyError
from myaccel.actions.files import check_value_text, host_path
from myaccel.actions.journal import JournalEntry
from myaccel.actions.settings.base import Change, ManagedEntrySetting, Runner
from myaccel.cpulist import parse_cpu_list
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
# keys whose value `systemctl show` prints as written (lists as ranges): systemd's reading
# of these is checked after every daemon-reload (it ignores a value it cannot parse, with
# only a log line: the lab saw "Invalid NUMA policy type, ignoring")
_LIST_KEYS = ("CPUAffinity", "NUMAMask")
_WORD_KEYS = ("NUMAPolicy",)


_CGROUP_UNIT = re.compile(r"/system\.slice/(?:.*/)?([^/]+\.service)")


def cgroup_unit(cgroup_text: str) -> tuple[str, str] | None:
    """The system service whose cgroup a ``/proc/PID/cgroup`` text names, with its line."""
    for line in cgroup_text.splitlines():
        m = _CGROUP_UNIT.search(line)
        if m:
            return m.group(1), line
    return None


def main_pid_unit(pid: int, root: Path = Path("/")) -> str | None:
    """The systemd service whose main process is ``pid`` (its cgroup names the unit and
    ``systemctl show -P MainPID`` agrees: a server started by hand from another service's
    shell is not that service's), on a host systemd runs; else None. ``root``: the sysroot
    of ``/proc`` and ``/run/systemd`` (a fixture tree in tests).

    How ``myaccel apply`` (``actions.session.derive_unit``) and the clone preflight
    (``clone.preflight.detect_restart``) both find the unit that restarts a server."""
    if not systemd_booted(root):
        return None
    try:
        found = cgroup_unit(host_path(root, f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return None
    if found is None:
        return None
    r = proc.run(["systemctl", "show", "-P", "MainPID", found[0]], timeout_s=60)
    return found[0] if r.returncode == 0 and r.stdout.strip() == str(pid) else None


def systemd_booted(root: Path = Path("/")) -> bool:
    """Whether this host (the one under ``root``) runs systemd as its init (sd_booted(3)'s
    test)."""
    return host_path(root, "/run/systemd/system").is_dir()


def same_value(key: str, shown: str, written: str) -> bool:
    """Whether systemd's reading of ``key`` (``systemctl show``) is the value written."""
    if key in _LIST_KEYS:
        try:
            return parse_cpu_list(shown.replace(" ", ",")) == parse_cpu_list(
                written.replace(" ", ",")
            )
        except ValueError:
            return False
    return shown.strip().lower() == written.strip().lower()


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

    def _checked(self) -> bool:
        """Whether systemd's own reading of this key can be asked for and compared."""
        return (
            self.runner is None
            and self.live
            and self.key in (*_LIST_KEYS, *_WORD_KEYS)
            and systemd_booted()
        )

    def loaded(self) -> str | None:
        """The value systemd holds for the unit now (``systemctl show -P KEY UNIT``)."""
        r = proc.run(["systemctl", "show", "-P", self.key, self.unit], timeout_s=60)
        return r.stdout.strip() if r.returncode == 0 else None

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
            if not self._checked():
                return None
            shown = self.loaded()
            if shown is not None and same_value(self.key, shown, desired):
                return None
            # the drop-in says it, systemd does not hold it: drift (verify says so)
            return self._change(
                f"{shown} (systemd's value; the drop-in says {current.strip()})",
                desired,
                [self.path],
                takes_effect="unit restart",
            )
        return self._change(current, desired, [self.path], takes_effect="unit restart")

    def matches(self, actual: str | None, desired: str) -> bool:
        return actual is not None and actual.strip() == desired.strip()

    def apply(self, desired: str) -> None:
        self._write(desired.strip())
        self._daemon_reload()
        if self._checked() and not same_value(self.key, shown := self.loaded() or "", desired):
            raise ApplyError(
                f"systemd did not take {self.key}={desired.strip()} for {self.unit} (it holds "
                f"{shown or 'nothing'})",
                hint=f"see `journalctl -b -u {self.unit}` and systemd.exec(5); the journal "
                "restores the drop-in",
            )

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
