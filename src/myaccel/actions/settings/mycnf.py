"""``mycnf:GROUP/OPTION``: one server option in the option file myaccel owns in the conf.d
directory that the server's my.cnf includes."""

from __future__ import annotations

import os
import re
from pathlib import Path

from myaccel.actions.files import check_logical_path, check_value_text, host_path, read_bytes
from myaccel.actions.settings.base import Change, ManagedEntrySetting, values_equal
from myaccel.errors import UsageError
from myaccel.server.optionfile import normalize_key

MYCNF_MANAGED_NAME = "99-myaccel.cnf"
# Where distributions include a conf.d directory from my.cnf, most specific first.
CONF_DIR_CANDIDATES = (
    "/etc/mysql/mariadb.conf.d",
    "/etc/mysql/mysql.conf.d",
    "/etc/my.cnf.d",
    "/etc/mysql/conf.d",
)
_GROUP_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


class OptionFileSetting(ManagedEntrySetting):
    """``mycnf:mysqld/innodb_io_capacity``: one option in ``<conf_dir>/99-myaccel.cnf``, the
    file myaccel owns (several knobs share it). Takes effect at the next server start.
    ``conf_dir`` is a logical path under ``root`` that the server's my.cnf includes."""

    kind = "mycnf"
    spec_fields = ("group", "key", "root", "conf_dir", "filename")
    managed_style = "mycnf"

    def __init__(
        self,
        group: str,
        key: str,
        *,
        root: str | Path = "/",
        conf_dir: str,
        filename: str = MYCNF_MANAGED_NAME,
    ) -> None:
        super().__init__(root)
        if not _GROUP_RE.match(group) or not _GROUP_RE.match(key):
            raise UsageError(
                f"mycnf:{group}/{key} is not an option target",
                hint="write it as mycnf:GROUP/OPTION, e.g. mycnf:mysqld/innodb_io_capacity",
            )
        check_logical_path(conf_dir, "option file directory")
        if "/" in filename or not filename.endswith(".cnf"):
            raise UsageError(
                f"'{filename}' is not a .cnf file name", hint="!includedir reads only *.cnf"
            )
        self.group = self.section = group.lower()
        self.key = normalize_key(key)
        self.conf_dir = conf_dir.rstrip("/") or "/"
        self.filename = filename
        self.target = f"mycnf:{self.group}/{self.key}"
        self.path = f"{self.conf_dir.rstrip('/')}/{self.filename}"
        self.purpose = (
            "Server options chosen by myaccel; they take effect at the next server start."
        )

    def _validate(self, desired: str) -> str:
        check_value_text(desired, self.target)
        if '"' in desired or "\\" in desired:
            raise UsageError(
                f"{self.target}: quotes and backslashes are not supported in values",
                hint="give the plain value",
            )
        return desired.strip()

    def _shadow_warnings(self) -> tuple[str, ...]:
        """Files read after ours in the same directory that set the same option win."""
        out = []
        hd = host_path(self.root, self.conf_dir)
        for name in sorted(os.listdir(hd)):
            if not name.endswith(".cnf") or name <= self.filename:
                continue
            data = read_bytes(self.root, f"{self.conf_dir}/{name}") or b""
            group = ""
            for line in data.decode(errors="replace").splitlines():
                s = line.strip()
                if s.startswith("[") and "]" in s:
                    group = s[1 : s.index("]")].strip().lower()
                elif group == self.group and normalize_key(s.partition("=")[0]) == self.key:
                    out.append(
                        f"{self.conf_dir}/{name} also sets {self.key} in [{group}] and is read "
                        f"after {self.filename}: its value wins"
                    )
        return tuple(out)

    def plan(self, desired: str) -> Change | None:
        desired = self._validate(desired)
        if not host_path(self.root, self.conf_dir).is_dir():
            raise UsageError(
                f"option file directory {self.conf_dir} does not exist",
                hint="pass the conf.d directory your my.cnf includes (!includedir) with --conf-dir",
            )
        current = self._owned_value()
        if values_equal(current, desired):
            return None
        return self._change(
            current,
            desired,
            [self.path],
            takes_effect="server restart",
            warnings=self._shadow_warnings(),
        )

    def apply(self, desired: str) -> None:
        self._write(self._validate(desired))


def find_conf_dir(root: str | Path = "/") -> str | None:
    """The conf.d directory a distribution's my.cnf includes, as a logical path."""
    for d in CONF_DIR_CANDIDATES:
        if host_path(Path(root), d).is_dir():
            return d
    return None
