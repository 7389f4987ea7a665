"""Setting targets as URIs: which class serves a scheme, and how a journal entry's spec
becomes a setting again."""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any

from myaccel.actions.files import host_path
from myaccel.actions.settings.base import Connect, Runner, Setting
from myaccel.actions.settings.irq import IrqAffinitySetting
from myaccel.actions.settings.kernel import (
    GLOB_CHARS,
    DebugfsSetting,
    SysctlSetting,
    SysfsSetting,
)
from myaccel.actions.settings.mycnf import CONF_DIR_CANDIDATES, OptionFileSetting, find_conf_dir
from myaccel.actions.settings.mysql import ServerVariableSetting, check_variable_name
from myaccel.actions.settings.pfs import ConsumerSetting, check_consumer_name
from myaccel.actions.settings.sandbox import SandboxBasedirSetting
from myaccel.actions.settings.server_binary import ServerBinarySetting
from myaccel.actions.settings.systemd import (
    SERVER_UNITS,
    SystemdDropInSetting,
    find_server_unit,
)
from myaccel.actions.settings.whole_file import FileSetting
from myaccel.errors import UsageError

SCHEMES = (
    "sysctl",
    "sysfs",
    "debugfs",
    "file",
    "mycnf",
    "mysql",
    "systemd",
    "pfs-consumer",
    "sandbox",
    "systemd-binary",
    "irq",
)
ADVISORY_SCHEMES = ("advice", "build", "hardware", "bios")


def _split_scheme(target: str) -> tuple[str, str]:
    scheme, sep, rest = target.partition(":")
    if not sep or not rest or not scheme:
        raise UsageError(
            f"'{target}' is not a setting target",
            hint="write SCHEME:NAME, e.g. sysctl:vm.swappiness or mysql:innodb_io_capacity "
            f"(schemes: {', '.join(SCHEMES)})",
        )
    return scheme.lower(), rest


def _split_two(target: str, rest: str, example: str) -> tuple[str, str]:
    a, sep, b = rest.partition("/")
    if not sep or not a or not b or "/" in b:
        raise UsageError(f"'{target}' needs two parts", hint=f"write it like {example}")
    return a, b


def setting_for(
    target: str,
    *,
    root: str | Path = "/",
    conf_dir: str | None = None,
    connect: Connect | None = None,
    server_unit: str | None = None,
    runner: Runner | None = None,
    persist: bool = True,
    persist_server_variables: bool = False,
) -> Setting:
    """The setting for a target URI.

    ``root``: where files live ("/" or a sysroot copy). ``conf_dir``: the conf.d directory
    (logical) for ``mycnf:``, found under ``root`` when None. ``connect``: connection factory
    for ``mysql:``. ``server_unit`` resolves ``systemd:server/...`` (found when None).
    ``persist``: also make kernel values survive a reboot (sysctl.d, tmpfiles.d).
    ``persist_server_variables``: ``SET PERSIST`` (MySQL 8) instead of ``SET GLOBAL``.
    """
    scheme, rest = _split_scheme(target)
    if scheme == "sysctl":
        return SysctlSetting(rest, root=root, persist=persist)
    if scheme == "sysfs":
        return SysfsSetting(rest, root=root, persist=persist)
    if scheme == "debugfs":
        return DebugfsSetting(rest, root=root)
    if scheme == "irq":
        return IrqAffinitySetting(rest, root=root)
    if scheme == "file":
        return FileSetting(rest, root=root)
    if scheme == "mycnf":
        group, key = _split_two(target, rest, "mycnf:mysqld/innodb_io_capacity")
        d = conf_dir if conf_dir is not None else find_conf_dir(root)
        if d is None:
            raise UsageError(
                f"no option file directory found for {target}",
                hint="pass the conf.d directory your my.cnf includes with --conf-dir "
                f"(looked for {', '.join(CONF_DIR_CANDIDATES)})",
            )
        return OptionFileSetting(group, key, root=root, conf_dir=d)
    if scheme == "mysql":
        check_variable_name(rest)
        if connect is None:
            raise UsageError(
                f"{target} needs a server connection",
                hint="pass --host/--socket/--user, or --sandbox NAME",
            )
        return ServerVariableSetting(rest, connect=connect, persist=persist_server_variables)
    if scheme == "pfs-consumer":
        if connect is None:
            raise UsageError(f"{target} needs a server connection", hint="pass --sandbox NAME")
        return ConsumerSetting(check_consumer_name(rest), connect=connect)
    if scheme == "systemd":
        unit, key = _split_two(target, rest, "systemd:mariadb.service/NUMAPolicy")
        if unit == "server":
            found = server_unit or find_server_unit(root)
            if found is None:
                raise UsageError(
                    "cannot tell which systemd unit runs the server",
                    hint=f"pass --server-unit (looked for {', '.join(SERVER_UNITS)})",
                )
            unit = found
        return SystemdDropInSetting(unit, key, root=root, runner=runner)
    return _other_scheme(scheme, target, rest, root=root, runner=runner)


def _other_scheme(
    scheme: str, target: str, rest: str, *, root: str | Path, runner: Runner | None
) -> Setting:
    """A sandbox's basedir, a unit's server binary; advisory and unknown schemes are
    refused."""
    if scheme == "sandbox":
        return _sandbox_setting(target, rest)
    if scheme == "systemd-binary":
        return ServerBinarySetting(rest, root=root, runner=runner)
    if scheme in ADVISORY_SCHEMES:
        raise UsageError(
            f"{target} is advisory: myaccel apply cannot change it",
            hint="follow the recommendation by hand (see `myaccel explain ID`)",
        )
    raise UsageError(
        f"unknown setting scheme '{scheme}' in '{target}'",
        hint=f"known schemes: {', '.join(SCHEMES)}",
    )


def _sandbox_setting(target: str, rest: str) -> Setting:
    name, key = _split_two(target, rest, "sandbox:accelerate/basedir")
    if key != "basedir":
        raise UsageError(f"{target}: a sandbox has only 'basedir'", hint="sandbox:NAME/basedir")
    from myaccel.server.sandbox.layout import sandboxes_root, validate_name

    validate_name(name)
    return SandboxBasedirSetting(name, root=sandboxes_root() / name)


def expand_target(target: str, *, root: str | Path = "/") -> list[str]:
    """One target per file for sysfs/debugfs globs (``sysfs:/sys/devices/system/cpu/cpu*/
    cpufreq/scaling_governor``), in natural order; other targets unchanged."""
    scheme, rest = _split_scheme(target)
    if scheme not in ("sysfs", "debugfs") or not (GLOB_CHARS & set(rest)):
        return [target]
    base = Path(root)
    hits = glob.glob(str(host_path(base, rest)))
    if not hits:
        raise UsageError(
            f"{target} matches no file on this machine", hint="the kernel does not offer it"
        )
    strip = len(str(base).rstrip("/"))

    def natural(s: str) -> list[Any]:
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]

    return [f"{scheme}:{h[strip:]}" for h in sorted(hits, key=natural)]


_KINDS: dict[str, type[Setting]] = {
    "sysctl": SysctlSetting,
    "sysfs": SysfsSetting,
    "debugfs": DebugfsSetting,
    "file": FileSetting,
    "mycnf": OptionFileSetting,
    "mysql": ServerVariableSetting,
    "systemd": SystemdDropInSetting,
    "pfs-consumer": ConsumerSetting,
    "sandbox": SandboxBasedirSetting,
    "systemd-binary": ServerBinarySetting,
    "irq": IrqAffinitySetting,
}


def setting_from_spec(
    kind: str,
    spec: dict[str, Any],
    *,
    connect: Connect | None = None,
    runner: Runner | None = None,
) -> Setting:
    """Rebuild a setting from a journal entry's ``kind`` and ``spec``."""
    if kind not in _KINDS:
        raise UsageError(
            f"journal entry of unknown kind '{kind}'",
            hint="it was written by another myaccel version; roll back with that version",
        )
    try:
        if kind == "sysctl":
            return SysctlSetting(spec["key"], root=spec["root"], persist=bool(spec["persist"]))
        if kind == "sysfs":
            return SysfsSetting(spec["path"], root=spec["root"], persist=bool(spec["persist"]))
        if kind == "debugfs":
            return DebugfsSetting(spec["path"], root=spec["root"], persist=bool(spec["persist"]))
        if kind == "irq":
            return IrqAffinitySetting(spec["interface"], root=spec["root"])
        if kind == "file":
            return FileSetting(spec["path"], root=spec["root"], mode=int(spec["mode"]))
        if kind == "mycnf":
            return OptionFileSetting(
                spec["group"],
                spec["key"],
                root=spec["root"],
                conf_dir=spec["conf_dir"],
                filename=spec["filename"],
            )
        if kind == "sandbox":
            return SandboxBasedirSetting(spec["name"], root=spec["root"])
        if kind == "systemd-binary":
            return ServerBinarySetting(spec["unit"], root=spec["root"], runner=runner)
        if kind == "systemd":
            return SystemdDropInSetting(
                spec["unit"], spec["key"], root=spec["root"], section=spec["section"], runner=runner
            )
    except KeyError as exc:
        raise UsageError(
            f"journal entry of kind '{kind}' lacks '{exc.args[0]}'",
            hint="the journal is damaged; restore it from a backup",
        ) from exc
    if connect is None:
        raise UsageError(
            f"rolling back mysql:{spec.get('name')} needs a server connection",
            hint="pass the same connection options as for apply (--host/--socket/--user or "
            "--sandbox NAME)",
        )
    if kind == "pfs-consumer":
        return ConsumerSetting(str(spec["name"]), connect=connect)
    return ServerVariableSetting(
        str(spec["name"]), connect=connect, persist=bool(spec.get("persist"))
    )
