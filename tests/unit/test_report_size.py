"""A report for a `standard`-profile campaign (4 workloads x 3 thread counts x 5 runs x 2
arms, 40 s series) stays self-contained and under 5 MB, with every cell in its tables.

The campaign is made from the recorded demo runs: each cell's runs are copies of the demo's
runs of the same arm with the workload, thread count and ids changed, and series stretched
to 40 one-second points.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from myaccel.bench.compare import compare_runs
from myaccel.bench.profiles import get_profile
from myaccel.bench.run_record import RunRecord
from myaccel.report import write_report

DEMO = Path(__file__).parents[1] / "fixtures" / "report" / "accelerate-demo" / "ab"


def _standard_campaign(d: Path) -> None:
    prof = get_profile("standard")
    demo = [json.loads(p.read_text()) for p in sorted(DEMO.glob("run-*.json"))]
    by_arm = {a: [r for r in demo if r["arm"] == a] for a in ("baseline", "candidate")}
    idx = json.loads((DEMO / "campaign.json").read_text())
    cid = "20261122-000000-ab-standard"
    names: list[str] = []
    runs: list[RunRecord] = []
    n = 0
    for wi, w in enumerate(prof.workloads):
        for t in prof.threads:
            for k in range(prof.runs_per_arm):
                for pool in by_arm.values():
                    n += 1
                    src = pool[(k + wi) % len(pool)]
                    series = [
                        {**src["series"][i % len(src["series"])], "t_s": float(i + 1), "threads": t}
                        for i in range(prof.duration_s + prof.warmup_s)
                    ]
                    doc = {
                        **src,
                        "run_id": f"{cid}/{n:03d}",
                        "campaign_id": cid,
                        "index": n,
                        "workload": w,
                        "threads": t,
                        "series": series,
                        "spec": {
                            **src["spec"],
                            "workload": w,
                            "threads": t,
                            "warmup_s": prof.warmup_s,
                        },
                    }
                    name = f"run-{n:03d}.json"
                    (d / name).write_text(json.dumps(doc))
                    names.append(name)
                    runs.append(RunRecord.model_validate(doc))
    idx.update(
        campaign_id=cid,
        runs=names,
        profile={
            **idx["profile"],
            "name": "standard",
            "workloads": list(prof.workloads),
            "threads": list(prof.threads),
        },
    )
    (d / "campaign.json").write_text(json.dumps(idx))
    cmp = compare_runs(
        [r for r in runs if r.arm == "baseline"], [r for r in runs if r.arm == "candidate"]
    )
    (d / "comparison.json").write_text(cmp.model_dump_json())


def test_standard_campaign_report_under_5_mb(tmp_path: Path) -> None:
    d = tmp_path / "ab"
    d.mkdir()
    _standard_campaign(d)
    t0 = time.monotonic()
    html, md = write_report([d], d, html=True, md=True)
    elapsed = time.monotonic() - t0
    size = html.stat().st_size
    print(
        f"standard campaign report: {size / 1024:.0f} KiB HTML, {md.stat().st_size / 1024:.0f} KiB Markdown, {elapsed:.1f} s"
    )
    assert size < 5 * 2**20
    text = html.read_text()
    assert "http://" not in text.replace("http://www.w3.org/", "")  # SVG namespaces only
    assert "https://" not in text
    assert text.count('data-col="workload">oltp_') == 12  # every cell in the table
    assert len(md.read_text()) < 65536
