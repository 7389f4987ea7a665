"""The pieces behind the Ansible collection that run without a server: the option-file
preview of ``apply --json`` (predicted by a dry run, read back after apply) and the fleet
report drawn from per-host artifacts."""

from __future__ import annotations

import json
import os
from pathlib import Path

from test_actions import CONF_DIR, make_root

from myaccel.actions import apply_changes, preview
from myaccel.actions.applier import plan_changes
from myaccel.actions.settings import OptionFileSetting, setting_for
from myaccel.report.fleet import build_fleet, write_fleet_report


def test_predicted_option_file_is_what_apply_writes(tmp_path: Path) -> None:
    root = make_root(tmp_path / "root")
    changes = [
        (OptionFileSetting("mysqld", "innodb_io_capacity", root=root, conf_dir=CONF_DIR), "2000"),
        (
            OptionFileSetting("mysqld", "innodb_log_buffer_size", root=root, conf_dir=CONF_DIR),
            "64M",
        ),
    ]
    planned, _ = plan_changes(changes)
    paths = preview.written_paths(planned)
    assert [p.name for p in paths] == ["99-myaccel.cnf"]
    before = preview.read_texts(paths)
    predicted = preview.predict_texts(planned)
    apply_changes(changes, tmp_path / "journals")
    after = preview.read_texts(paths)
    assert predicted == after
    diffs = preview.file_diffs(before, after)
    assert len(diffs) == 1 and diffs[0]["before"] == ""
    assert "innodb_log_buffer_size = 64M" in diffs[0]["after"]
    assert preview.file_diffs(after, preview.read_texts(paths)) == []


def test_predicted_kernel_persistence_files_are_what_apply_writes(tmp_path: Path) -> None:
    """A dry run's ``files`` named no file for sysctl and THP (the lab saw "files": [])
    while the apply wrote sysctl.d and tmpfiles.d: kernel settings predict theirs too."""
    root = make_root(tmp_path / "root")
    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    changes = [
        (setting_for("sysctl:vm.swappiness", root=root), "1"),
        (setting_for(f"sysfs:{thp}", root=root), "madvise"),
    ]
    planned, _ = plan_changes(changes)
    paths = preview.written_paths(planned)
    before = preview.read_texts(paths)
    predicted = preview.predict_texts(planned)
    assert sorted(Path(p).name for p in predicted) == ["99-myaccel.conf", "99-myaccel.conf"]
    apply_changes(changes, tmp_path / "journals")
    after = preview.read_texts(paths)
    diffs = preview.file_diffs(before, predicted)
    assert diffs == preview.file_diffs(before, after)
    assert {Path(d["path"]).parent.name for d in diffs} == {"sysctl.d", "tmpfiles.d"}


def _write(path: Path, doc: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_fleet_report_from_host_artifacts(tmp_path: Path) -> None:
    klass = "x86_64__xeon__2c__24g__mariadb__10_11"
    probe = {
        "class": klass,
        "arch": "x86_64",
        "cpu_part": "Xeon",
        "logical_cpus": 2,
        "memory_gib": 24,
        "flavor": "mariadb",
        "version": "10.11.19",
    }
    change = {"target": "mycnf:mysqld/innodb_log_buffer_size", "current": None, "desired": "64M"}
    _write(
        tmp_path / "plans" / f"{klass}.json",
        {"recommendations": [{"id": "server-log-buffer", "target": "mysql:x", "proposed": "64M"}]},
    )
    _write(tmp_path / "holds" / f"{klass}.json", {"host": "db2"})
    h = tmp_path / "hosts"
    _write(h / "db1" / "probe.json", {**probe, "canary": True})
    _write(h / "db1" / "apply.json", {"changed": True, "changes": [change], "journal": "/j/1.json"})
    _write(
        h / "db1" / "canary.json",
        {
            "cells": [
                {
                    "workload": "oltp_read_write",
                    "threads": 4,
                    "verdict": "improved",
                    "delta_pct": 3.5,
                }
            ]
        },
    )
    _write(
        h / "db1" / "verify.json",
        {
            "verify": {"drift": [{"target": "mysql:x", "expected": "64M", "actual": "16M"}]},
            "journals_in_effect": ["/j/1.json"],
        },
    )
    _write(h / "db2" / "probe.json", probe)
    _write(h / "db2" / "apply.json", {"changed": True, "changes": [change], "journal": "/j/1.json"})
    _write(h / "db2" / "health.json", {"error": "site check failed", "rollback": {}})
    _write(h / "db3" / "probe.json", {**probe, "numa_nodes": 2})

    f = build_fleet(tmp_path)
    rows = {r.host: r for r in f.hosts}
    assert rows["db1"].status == "applied" and rows["db1"].canary
    assert rows["db1"].journal == "1.json (in effect)"
    assert rows["db1"].drift == ["mysql:x: expected 64M, found 16M"]
    assert rows["db2"].status == "failed health check: rolled back"
    assert rows["db3"].status == "unchanged"
    assert rows["db3"].hardware == "x86_64 Xeon, 2 CPUs, 2 NUMA nodes, 24 GiB"
    assert rows["db1"].hardware == "x86_64 Xeon, 2 CPUs, 24 GiB"
    # an option the file did not set reads "(not set)", not Python's None (seen over SSH)
    assert rows["db1"].changes == ["mycnf:mysqld/innodb_log_buffer_size: (not set) -> 64M"]
    assert f.classes[0].held_by == "db2"
    md, html = write_fleet_report(tmp_path)
    text = md.read_text()
    assert "oltp_read_write/4: improved +3.5%" in text and "held after db2" in text
    assert "site check failed" in text
    assert "<style>" in html.read_text()


def test_fleet_report_shows_each_hosts_latest_state(tmp_path: Path) -> None:
    """Files of earlier rollouts stay beside newer ones: a host whose later apply is in
    effect is "applied", not "failed health check" (issue 36); the newest record decides,
    by its recorded_at, else by the file's time."""
    klass = "x86_64__xeon__2c__24g__mariadb__10_11"
    change = {"target": "mycnf:mysqld/innodb_log_buffer_size", "current": None, "desired": "64M"}
    h = tmp_path / "hosts"

    def at(minute: int) -> str:
        return f"2026-11-25T05:{minute:02d}:00.000000Z"

    # db1: rollout 1 failed its health check (rolled back), rollout 2 applied, collected
    _write(h / "db1" / "probe.json", {"class": klass, "canary": True})
    _write(
        h / "db1" / "health.json",
        {"error": "replication lag", "rollback": {"journals": ["/j/1.json"]}, "recorded_at": at(1)},
    )
    _write(
        h / "db1" / "apply.json",
        {"changed": True, "changes": [change], "journal": "/j/2.json", "recorded_at": at(5)},
    )
    _write(
        h / "db1" / "verify.json",
        {"verify": {"drift": []}, "journals_in_effect": ["/j/2.json"], "recorded_at": at(6)},
    )
    # db2: the same without recorded_at (files of an older collection): the files' times
    _write(h / "db2" / "probe.json", {"class": klass})
    _write(h / "db2" / "health.json", {"error": "replication lag"})
    _write(h / "db2" / "apply.json", {"changed": True, "changes": [change], "journal": "/j/2.json"})
    _write(h / "db2" / "verify.json", {"journals_in_effect": ["/j/2.json"]})
    for name, t in (("health", 1000), ("apply", 2000), ("verify", 3000)):
        os.utime(h / "db2" / f"{name}.json", (t, t))
    # db3: applied, fleet rollback, applied again; not collected since the last apply
    _write(h / "db3" / "probe.json", {"class": klass})
    _write(h / "db3" / "verify.json", {"journals_in_effect": ["/j/1.json"], "recorded_at": at(2)})
    _write(
        h / "db3" / "rollback.json",
        {"changed": True, "journals": ["/j/1.json"], "recorded_at": at(3)},
    )
    _write(
        h / "db3" / "apply.json",
        {"changed": True, "changes": [change], "journal": "/j/2.json", "recorded_at": at(4)},
    )
    # db4: applied (collected), then its health check failed in a later rollout
    _write(h / "db4" / "probe.json", {"class": klass})
    _write(
        h / "db4" / "verify.json",
        {"journals_in_effect": ["/j/1.json"], "recorded_at": at(2)},
    )
    _write(
        h / "db4" / "apply.json",
        {"changed": True, "changes": [change], "journal": "/j/2.json", "recorded_at": at(3)},
    )
    _write(h / "db4" / "health.json", {"error": "lag again", "recorded_at": at(4)})

    rows = {r.host: r for r in build_fleet(tmp_path).hosts}
    assert rows["db1"].status == "applied" and rows["db1"].journal == "2.json (in effect)"
    assert rows["db1"].note == ""  # the old failure is not listed as this host's
    assert rows["db2"].status == "applied" and rows["db2"].note == ""
    assert rows["db3"].status == "applied" and rows["db3"].journal == "2.json (in effect)"
    assert rows["db4"].status == "failed health check: rolled back"
    assert rows["db4"].journal == "2.json (undone)" and rows["db4"].note == "lag again"
    text = write_fleet_report(tmp_path)[0].read_text()
    assert "replication lag" not in text and "lag again" in text
