#!/usr/bin/python
"""myaccel.fleet.myaccel_verify: drift of the settings an apply made."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.myaccel.fleet.plugins.module_utils.myaccel_cli import (
    SERVER_ARGS,
    run,
    server_argv,
)

DOCUMENTATION = r"""
module: myaccel_verify
short_description: Report the drift of the settings myaccel applied (a restart, a reboot, a hand edit)
description:
  - Runs C(myaccel verify --json) for the newest applied journal (or C(journal)).
  - Never reports a change; fails on drift when C(fail_on_drift) is set.
options:
  journal:
    description: The journal to check (default, the newest applied).
    type: path
  fail_on_drift:
    description: Fail when a setting drifted.
    type: bool
    default: false
extends_documentation_fragment:
  - myaccel.fleet.server
author:
  - myaccel developers
"""

EXAMPLES = r"""
- name: Nothing drifted since apply
  myaccel.fleet.myaccel_verify:
    executable: /opt/myaccel/bin/myaccel
    fail_on_drift: true
"""

RETURN = r"""
drift:
  description: Settings not at their applied value (target, expected, actual).
  returned: always
  type: list
journal:
  description: The journal checked (null when nothing was applied).
  returned: always
  type: str
"""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            journal=dict(type="path"),
            fail_on_drift=dict(type="bool", default=False),
            **SERVER_ARGS,
        ),
        supports_check_mode=True,
    )
    p = module.params
    args = ["verify", "--json", *server_argv(p)]
    if p["journal"]:
        args += ["--journal", p["journal"]]
    _rc, doc, _err = run(module, args, ok_rcs=(0, 1))
    doc = doc or {"journal": None, "drift": []}
    if doc["drift"] and p["fail_on_drift"]:
        module.fail_json(msg=f"{len(doc['drift'])} setting(s) drifted", **doc)
    module.exit_json(changed=False, **doc)


if __name__ == "__main__":
    main()
