#!/usr/bin/python
"""myaccel.fleet.myaccel_rollback: undo applies, byte for byte, newest first."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.myaccel.fleet.plugins.module_utils.myaccel_cli import (
    SERVER_ARGS,
    run,
    server_argv,
)

DOCUMENTATION = r"""
module: myaccel_rollback
short_description: Undo myaccel applies on a host, newest first, restoring files byte for byte
description:
  - Runs C(myaccel rollback --json) until no journal is in effect (or once for C(journal)),
    restarting the server on its restored option files when needed.
  - Idempotent, nothing in effect is no change. Check mode lists what would be undone.
options:
  journal:
    description: Undo only this journal.
    type: path
extends_documentation_fragment:
  - myaccel.fleet.server
author:
  - myaccel developers
"""

EXAMPLES = r"""
- name: Undo everything myaccel applied on the host
  myaccel.fleet.myaccel_rollback:
    executable: /opt/myaccel/bin/myaccel
"""

RETURN = r"""
journals:
  description: The journals undone (or that would be, in check mode).
  returned: always
  type: list
reverted:
  description: Targets reverted, in order.
  returned: always
  type: list
"""

_IN_EFFECT = ("applied", "open", "failed", "corrupt")


def main():
    module = AnsibleModule(
        argument_spec=dict(journal=dict(type="path"), **SERVER_ARGS),
        supports_check_mode=True,
    )
    p = module.params
    base = ["rollback", "--json", *server_argv(p)]
    if module.check_mode:
        _rc, doc, _err = run(module, [*base, "--list"])
        pending = [
            j["path"]
            for j in (doc or {}).get("journals", [])
            if j["status"] in _IN_EFFECT and (not p["journal"] or j["path"] == p["journal"])
        ]
        module.exit_json(changed=bool(pending), journals=pending, reverted=[])
    journals, reverted = [], []
    for _ in range(1000):  # one journal per round; bounded against a loop that never ends
        args = [*base, "--journal", p["journal"]] if p["journal"] else base
        _rc, doc, _err = run(module, args)
        doc = doc or {}
        if not doc.get("journal"):
            break
        journals.append(doc["journal"])
        reverted += doc.get("reverted", [])
        for warning in doc.get("warnings", []):
            # module.warn, not exit_json(warnings=...): deprecated in ansible-core 2.19
            module.warn(str(warning))
        if p["journal"]:
            break
    module.exit_json(changed=bool(journals), journals=journals, reverted=reverted)


if __name__ == "__main__":
    main()
