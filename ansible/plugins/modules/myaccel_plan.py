#!/usr/bin/python
"""myaccel.fleet.myaccel_plan: a sealed plan for this host, checked against a reviewed one."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.myaccel.fleet.plugins.module_utils.myaccel_cli import (
    SERVER_ARGS,
    run,
    server_argv,
)

DOCUMENTATION = r"""
module: myaccel_plan
short_description: Make this host's myaccel plan, and check it against the reviewed class plan
description:
  - Runs C(myaccel plan --json --out OUT) for the host's server. The plan is sealed with the
    digest of this host's facts, C(myaccel apply) refuses it elsewhere.
  - Returns C(review), the recommendations as people review them (no volatile fields), for
    the class plan file the fleet playbook writes once per hardware and server class.
  - With C(reviewed), fails when this host would get a change the reviewed class plan does
    not have. Its recommendations must be a subset, those already in place drop out.
  - Writes only the plan file on the host; never reports a change.
options:
  out:
    description: Where the plan is written on the host.
    type: path
    required: true
  facts:
    description: Plan from this facts file (C(myaccel_probe) C(out)) instead of probing again.
    type: path
  layers:
    description: Layers to plan (server, os, numa, nic, build, hardware).
    type: list
    elements: str
  durability:
    description: C(relaxed) allows the opt-in durability group.
    type: str
    choices: [strict, relaxed]
    default: strict
  only:
    description: Keep only these recommendation ids (the rest is not part of the review).
    type: list
    elements: str
  reviewed:
    description: The reviewed class plan (its C(recommendations) list, as C(review) returned it).
    type: dict
extends_documentation_fragment:
  - myaccel.fleet.server
author:
  - myaccel developers
"""

EXAMPLES = r"""
- name: Plan the server layer
  myaccel.fleet.myaccel_plan:
    executable: /opt/myaccel/bin/myaccel
    defaults_file: /root/.my.cnf
    layers: [server]
    out: /var/lib/myaccel/plan.json
    reviewed: "{{ lookup('ansible.builtin.file', 'plans/' ~ myaccel.class ~ '.json') | from_json }}"
"""

RETURN = r"""
review:
  description: The plan as reviewed (flavor, version, layers, recommendations without volatile fields).
  returned: always
  type: dict
ids:
  description: Recommendation ids this host would apply.
  returned: always
  type: list
settings:
  description: Server variables the recommendations set (name to proposed value), for an A/B.
  returned: always
  type: dict
plan_file:
  description: The sealed plan on the host.
  returned: always
  type: str
"""

_KEEP = ("id", "layer", "target", "proposed", "risk", "title")


def review_of(plan, only):
    recs = [
        {k: r.get(k) for k in _KEEP}
        for r in plan.get("recommendations", [])
        if not only or r.get("id") in only
    ]
    server = plan.get("server") or {}
    return {
        "flavor": server.get("flavor") if isinstance(server, dict) else server,
        "version": server.get("version") if isinstance(server, dict) else None,
        "durability": plan.get("durability"),
        "layers": plan.get("layers"),
        "recommendations": sorted(recs, key=lambda r: r["id"]),
    }


def server_settings(recs):
    """name -> proposed value of the recommendations that set server variables."""
    out = {}
    for r in recs:
        kind, _, name = str(r.get("target") or "").partition(":")
        if kind in ("mysql", "mycnf"):
            out[name.rpartition("/")[2]] = str(r.get("proposed"))
    return out


def _key(r):
    return (r.get("id"), r.get("target"), str(r.get("proposed")))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            out=dict(type="path", required=True),
            facts=dict(type="path"),
            layers=dict(type="list", elements="str"),
            durability=dict(type="str", default="strict", choices=["strict", "relaxed"]),
            only=dict(type="list", elements="str"),
            reviewed=dict(type="dict"),
            **SERVER_ARGS,
        ),
        supports_check_mode=True,
    )
    p = module.params
    args = ["plan", "--json", "--out", p["out"], "--durability", p["durability"]]
    if p["facts"]:
        args += ["--facts", p["facts"]]
    else:
        args += server_argv(p)
    if p["layers"]:
        args += ["--layers", ",".join(p["layers"])]
    _rc, plan, _err = run(module, args)
    review = review_of(plan or {}, p["only"])
    ids = [r["id"] for r in review["recommendations"]]
    if p["reviewed"] is not None:
        allowed = {_key(r) for r in p["reviewed"].get("recommendations", [])}
        extra = [r["id"] for r in review["recommendations"] if _key(r) not in allowed]
        if extra:
            module.fail_json(
                msg="this host's plan has changes the reviewed class plan does not: "
                + ", ".join(extra)
                + " (another class, or the class plan is stale: review it again)",
                review=review,
            )
    module.exit_json(
        changed=False,
        review=review,
        ids=ids,
        settings=server_settings(review["recommendations"]),
        plan_file=p["out"],
    )


if __name__ == "__main__":
    main()
