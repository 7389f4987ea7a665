"""Settings: one target each, able to read, plan, apply and revert itself.

A target is a URI (DESIGN habit 10)::

    sysctl:vm.swappiness                             /proc/sys/vm/swappiness (+ /etc/sysctl.d/99-myaccel.conf)
    sysfs:/sys/kernel/mm/transparent_hugepage/enabled  the file (+ /etc/tmpfiles.d/99-myaccel.conf)
    debugfs:/sys/kernel/debug/sched/base_slice_ns    the file (runtime only by default)
    file:/etc/security/limits.d/99-myaccel.conf      a whole file myaccel writes
    mycnf:mysqld/innodb_io_capacity                  <conf.d>/99-myaccel.cnf, group [mysqld]
    mysql:innodb_io_capacity                         SET GLOBAL (optionally SET PERSIST)
    systemd:mariadb.service/NUMAPolicy               /etc/systemd/system/<unit>.d/99-myaccel.conf
                                                     ("server" as the unit: the server's unit)
    sandbox:accelerate/basedir                       the sandbox's state.json: the build it runs
    irq:eth1                                         /proc/irq/N/smp_affinity_list of the NIC's
                                                     IRQs (runtime only)

Every setting works under a root directory (``/`` on a real machine, a copy of a fixture
sysroot in tests). Writes go only to the target itself or to a file myaccel owns (a name
with ``myaccel``, a header saying so); a user's own files are never edited.

One module a family, all on the protocol in ``base`` (``Setting``): ``kernel`` (sysctl,
sysfs, debugfs), ``whole_file`` (file), ``mycnf`` (option file), ``systemd`` (drop-in),
``mysql`` (server variables), ``irq`` (a NIC's interrupts), ``sandbox`` (a sandbox's
binary), ``server_binary`` (the server binary a systemd unit runs: an ``ExecStart``
override, ``zz-myaccel-binary.conf``); ``registry`` turns a URI or a journal entry into a
setting.
"""

from myaccel.actions.settings.base import (
    Change,
    Connect,
    Runner,
    Setting,
    normalize_value,
    values_equal,
)
from myaccel.actions.settings.kernel import (
    SYSCTL_MANAGED,
    TMPFILES_MANAGED,
    DebugfsSetting,
    SysctlSetting,
    SysfsSetting,
)
from myaccel.actions.settings.mycnf import (
    CONF_DIR_CANDIDATES,
    MYCNF_MANAGED_NAME,
    OptionFileSetting,
    find_conf_dir,
)
from myaccel.actions.settings.mysql import (
    ServerVariableSetting,
    check_variable_name,
    sql_literal,
)
from myaccel.actions.settings.registry import (
    ADVISORY_SCHEMES,
    SCHEMES,
    expand_target,
    setting_for,
    setting_from_spec,
)
from myaccel.actions.settings.systemd import (
    SERVER_UNITS,
    SYSTEMD_DROPIN_NAME,
    SYSTEMD_UNIT_DIRS,
    SystemdDropInSetting,
    find_server_unit,
)
from myaccel.actions.settings.whole_file import FileSetting

__all__ = [
    "ADVISORY_SCHEMES",
    "CONF_DIR_CANDIDATES",
    "MYCNF_MANAGED_NAME",
    "SCHEMES",
    "SERVER_UNITS",
    "SYSCTL_MANAGED",
    "SYSTEMD_DROPIN_NAME",
    "SYSTEMD_UNIT_DIRS",
    "TMPFILES_MANAGED",
    "Change",
    "Connect",
    "DebugfsSetting",
    "FileSetting",
    "OptionFileSetting",
    "Runner",
    "ServerVariableSetting",
    "Setting",
    "SysctlSetting",
    "SysfsSetting",
    "SystemdDropInSetting",
    "check_variable_name",
    "expand_target",
    "find_conf_dir",
    "find_server_unit",
    "normalize_value",
    "setting_for",
    "setting_from_spec",
    "sql_literal",
    "values_equal",
]
