#!/usr/bin/python
"""myaccel.fleet.myaccel_probe: facts about a host and its server, as Ansible facts."""

from __future__ import annotations

import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.myaccel.fleet.plugins.module_utils.myaccel_cli import (
    SERVER_ARGS,
    run,
    server_argv,
)

DOCUMENTATION = r"""
module: myaccel_probe
short_description: Collect myaccel facts (CPU, memory, storage, server) as Ansible facts
description:
  - Runs C(myaccel probe --json) on the host and returns a summary as the C(myaccel) fact,
    with the hardware and server class the fleet playbooks group hosts by.
  - Reads only; never reports a change.
options:
  out:
    description: Also write the full facts document (C(myaccel.facts/1)) to this file on the host.
    type: path
extends_documentation_fragment:
  - myaccel.fleet.server
author:
  - myaccel developers
"""

EXAMPLES = r"""
- name: Probe the server of a sandbox
  myaccel.fleet.myaccel_probe:
    executable: /opt/myaccel/bin/myaccel
    sandbox: prod1
    out: /var/lib/myaccel/facts.json
"""

RETURN = r"""
ansible_facts:
  description: C(myaccel), a summary of the facts, with C(class) (the group key).
  returned: always
  type: dict
"""


def _v(fact):
    return fact.get("value") if isinstance(fact, dict) else fact


def _slug(text):
    return re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_")[:40] or "unknown"


def summarize(facts):
    """The facts a fleet is grouped and reported by, and the class key."""
    cpu = facts.get("cpu") or {}
    mem = facts.get("memory") or {}
    srv = facts.get("server") or {}
    part = _v(cpu.get("part"))
    implementer = _v(cpu.get("implementer"))
    model = _v(cpu.get("model_name")) or _v(cpu.get("model"))
    cpu_part = f"{implementer}:{part}" if part else model
    version = str(_v(srv.get("version")) or "none")
    series = ".".join(version.split(".")[:2])
    total = _v(mem.get("total_bytes")) or 0
    nodes = _v(cpu.get("numa_nodes"))
    out = {
        "hostname": _v(facts.get("hostname")),
        "arch": _v(cpu.get("arch")),
        "cpu_part": cpu_part,
        "logical_cpus": _v(cpu.get("logical_cpus")),
        "numa_nodes": len(nodes) if isinstance(nodes, list) and nodes else 1,
        "memory_bytes": total,
        "memory_gib": round(total / 2**30),
        "flavor": _v(srv.get("flavor")) or "none",
        "version": version,
        "datadir": _v(srv.get("datadir")),
        "collected_at": facts.get("collected_at"),
        "myaccel_version": facts.get("myaccel_version"),
    }
    out["class"] = "__".join(
        [
            _slug(out["arch"]),
            _slug(cpu_part),
            f"{out['logical_cpus']}c",
            # NUMA nodes only when more than one: the NUMA layer plans differ by node count,
            # and a one-node host keeps the key it had before the nodes were counted
            *([f"{out['numa_nodes']}n"] if out["numa_nodes"] > 1 else []),
            f"{out['memory_gib']}g",
            _slug(out["flavor"]),
            _slug(series),
        ]
    )
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(out=dict(type="path"), **SERVER_ARGS),
        supports_check_mode=True,
    )
    args = ["probe", "--json", *server_argv(module.params)]
    if module.params["out"]:
        args += ["--out", module.params["out"]]
    _rc, facts, _err = run(module, args)
    summary = summarize(facts or {})
    summary["facts_file"] = module.params["out"]
    module.exit_json(changed=False, ansible_facts={"myaccel": summary})


if __name__ == "__main__":
    main()
