#!/usr/bin/python
"""myaccel.fleet.myaccel_apply: a journaled apply; check mode is a dry run."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.myaccel.fleet.plugins.module_utils.myaccel_cli import (
    SERVER_ARGS,
    run,
    server_argv,
)

DOCUMENTATION = r"""
module: myaccel_apply
short_description: Apply a myaccel plan with a journal; check mode is a dry run, diff mode shows option files
description:
  - Runs C(myaccel apply PLAN --yes --json) (C(--dry-run) in check mode). Every change is
    journaled before it is made; a server that does not come back healthy after a restart is
    rolled back by myaccel itself, and the task fails with C(rolled_back=true).
  - Idempotent, reports a change only when a setting was not yet at the planned value.
  - In diff mode the diff is the option files myaccel writes, before and after (predicted in
    check mode).
options:
  plan:
    description: The plan file on the host (C(myaccel_plan) C(out)).
    type: path
    required: true
  only:
    description: Apply only these recommendation ids.
    type: list
    elements: str
  layers:
    description: Apply only these layers.
    type: list
    elements: str
  conf_dir:
    description: Directory for the managed 99-myaccel.cnf (default, the one the server reads).
    type: path
  server_unit:
    description: systemd unit to restart (for restart-only options).
    type: str
  force:
    description: Apply a plan sealed for other facts.
    type: bool
    default: false
extends_documentation_fragment:
  - myaccel.fleet.server
author:
  - myaccel developers
"""

EXAMPLES = r"""
- name: Apply the plan (journaled, health-checked)
  myaccel.fleet.myaccel_apply:
    executable: /opt/myaccel/bin/myaccel
    plan: /var/lib/myaccel/plan.json
    defaults_file: /root/.my.cnf
    server_unit: mariadb.service
"""

RETURN = r"""
changes:
  description: Settings changed (or that would change), with current and desired values.
  returned: always
  type: list
journal:
  description: The journal written (null in check mode or when nothing changed).
  returned: always
  type: str
rolled_back:
  description: On failure, whether myaccel rolled the host back itself.
  returned: failure
  type: bool
"""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            plan=dict(type="path", required=True),
            only=dict(type="list", elements="str"),
            layers=dict(type="list", elements="str"),
            conf_dir=dict(type="path"),
            server_unit=dict(type="str"),
            force=dict(type="bool", default=False),
            **SERVER_ARGS,
        ),
        supports_check_mode=True,
    )
    p = module.params
    args = ["apply", p["plan"], "--json", *server_argv(p)]
    args += ["--dry-run"] if module.check_mode else ["--yes"]
    for name, flag in (("only", "--only"), ("layers", "--layers")):
        if p[name]:
            args += [flag, ",".join(p[name])]
    for name, flag in (("conf_dir", "--conf-dir"), ("server_unit", "--server-unit")):
        if p[name]:
            args += [flag, p[name]]
    if p["force"]:
        args.append("--force")
    rc, doc, err = run(module, args, ok_rcs=range(256))
    if rc != 0:
        lines = [x for x in err.splitlines() if x.startswith(("error:", "hint:"))]
        module.fail_json(
            msg=" ".join(lines) or err.strip()[-600:],
            rc=rc,
            rolled_back="rolled back" in err,
            stderr=err,
        )
    doc = doc or {}
    diff = [
        {
            "before_header": f["path"],
            "after_header": f["path"],
            "before": f["before"],
            "after": f["after"],
        }
        for f in doc.get("files", [])
    ]
    module.exit_json(
        changed=bool(doc.get("changed")),
        changes=doc.get("changes", []),
        skipped=doc.get("skipped", []),
        journal=doc.get("journal"),
        result=doc,
        diff=diff,
    )


if __name__ == "__main__":
    main()
