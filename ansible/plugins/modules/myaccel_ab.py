#!/usr/bin/python
"""myaccel.fleet.myaccel_ab: measure a reviewed plan on a sandbox before it reaches servers."""

from __future__ import annotations

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.myaccel.fleet.plugins.module_utils.myaccel_cli import run

DOCUMENTATION = r"""
module: myaccel_ab
short_description: A/B a plan's server settings on a myaccel sandbox (the canary's measurement)
description:
  - Runs C(myaccel ab --sandbox NAME --create) with the plan's server settings as the
    candidate (C(--candidate-set)) against the sandbox's own configuration, interleaved runs,
    and reads the verdict per cell from C(comparison.json).
  - Fails when a cell regressed (the canary gate), unless C(fail_on_regression) is off.
  - Changes no server of the fleet (the sandbox is private); never reports a change.
options:
  sandbox:
    description: The sandbox to measure on (created with the distribution's defaults if missing).
    type: str
    required: true
  settings:
    description: Server variables of the candidate (name to value).
    type: dict
    required: true
  out:
    description: Results directory on the host.
    type: path
    required: true
  workloads:
    description: sysbench workloads.
    type: list
    elements: str
    default: [oltp_read_write]
  threads:
    description: Client threads.
    type: list
    elements: int
    default: [4]
  time:
    description: Seconds per run.
    type: int
    default: 30
  warmup:
    description: Warm-up seconds per run.
    type: int
    default: 5
  runs:
    description: Runs per arm (3 or more give a verdict).
    type: int
    default: 5
  tables:
    description: Tables in the dataset.
    type: int
    default: 4
  table_size:
    description: Rows per table.
    type: int
    default: 100000
  quiet_wait:
    description:
      - Seconds to wait for the host to be quiet before measuring (myaccel's C(--quiet-wait));
        0 measures at once and says the figures are disturbed. Unset, myaccel's default.
    type: float
  fail_on_regression:
    description: Fail when a cell's verdict is C(regressed).
    type: bool
    default: true
  destroy:
    description: Destroy the sandbox afterwards.
    type: bool
    default: false
  executable:
    description: The myaccel command.
    type: str
    default: myaccel
  home:
    description: MYACCEL_HOME on the host.
    type: path
author:
  - myaccel developers
"""

EXAMPLES = r"""
- name: Measure the class plan on the canary
  myaccel.fleet.myaccel_ab:
    executable: /opt/myaccel/bin/myaccel
    sandbox: canary
    settings:
      innodb_log_buffer_size: 64M
    out: /var/lib/myaccel/fleet/canary/20261125T053934.000000Z
"""

RETURN = r"""
cells:
  description: Per workload and thread count, delta_pct, verdict, p_adjusted and reason.
  returned: always
  type: list
geomean_delta_pct:
  description: Geometric mean of the TPS change over the cells.
  returned: always
  type: float
comparison_file:
  description: The comparison document on the host.
  returned: always
  type: str
"""

_CELL = ("workload", "threads", "delta_pct", "verdict", "p_adjusted", "reason")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sandbox=dict(type="str", required=True),
            settings=dict(type="dict", required=True),
            out=dict(type="path", required=True),
            workloads=dict(type="list", elements="str", default=["oltp_read_write"]),
            threads=dict(type="list", elements="int", default=[4]),
            time=dict(type="int", default=30),
            warmup=dict(type="int", default=5),
            runs=dict(type="int", default=5),
            tables=dict(type="int", default=4),
            table_size=dict(type="int", default=100000),
            quiet_wait=dict(type="float"),
            fail_on_regression=dict(type="bool", default=True),
            destroy=dict(type="bool", default=False),
            executable=dict(type="str", default="myaccel"),
            home=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="not measured in check mode")
    args = ["ab", "--sandbox", p["sandbox"], "--create", "--out", p["out"]]
    for k, v in sorted(p["settings"].items()):
        args += ["--candidate-set", f"{k}={v}"]
    for w in p["workloads"]:
        args += ["-w", w]
    args += ["-t", ",".join(str(t) for t in p["threads"])]
    for name in ("time", "warmup", "runs", "tables"):
        args += [f"--{name}", str(p[name])]
    args += ["--table-size", str(p["table_size"])]
    if p["quiet_wait"] is not None:
        args += ["--quiet-wait", str(p["quiet_wait"])]
    run(module, args, parse=False)
    path = os.path.join(p["out"], "comparison.json")
    with open(path, encoding="utf-8") as f:
        comparison = json.load(f)
    cells = [{k: c.get(k) for k in _CELL} for c in comparison.get("cells", [])]
    if p["destroy"]:
        run(module, ["sandbox", "destroy", p["sandbox"], "--yes"], parse=False)
    result = dict(
        changed=False,
        cells=cells,
        geomean_delta_pct=comparison.get("geomean_delta_pct"),
        comparison_file=path,
    )
    regressed = [c for c in cells if c["verdict"] == "regressed"]
    if regressed and p["fail_on_regression"]:
        module.fail_json(
            msg="the plan regressed on the canary's sandbox: "
            + ", ".join(
                f"{c['workload']}/{c['threads']} {c['delta_pct']:+.1f}%" for c in regressed
            ),
            **result,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
