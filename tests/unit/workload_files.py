"""A workload file as ``myaccel capture`` writes one (schema ``shop``, the demo's kind of
statements), and changes of it, for the tests of what a replay may issue
(test_workload_guard.py, test_bad_input_workload.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from myaccel.bench.workload import Workload
from myaccel.capture.assemble import Event, build_classes

SHOP_DDL = [
    "CREATE DATABASE `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci */",
    "CREATE TABLE `items` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `name` varchar(64) "
    "NOT NULL DEFAULT '',\n  `price` decimal(10,2) NOT NULL,\n  `stock` int(11) NOT NULL "
    "DEFAULT 0,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=2001 DEFAULT "
    "CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
    "CREATE TABLE `orders` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  `item_id` int(11) "
    "NOT NULL,\n  `qty` int(11) NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `item_id` "
    "(`item_id`),\n  CONSTRAINT `orders_ibfk_1` FOREIGN KEY (`item_id`) REFERENCES `items` "
    "(`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
]
STATEMENTS = [
    "SELECT name, price FROM items WHERE id = 7",
    "BEGIN",
    "UPDATE items SET stock = stock - 1 WHERE id = 7",
    "INSERT INTO orders (item_id, qty) VALUES (7, 1)",
    "COMMIT",
    "SET @x = 1",  # captured, not replayed
    "SELECT id, name FROM items WHERE name = 'a;b' /* ; DROP TABLE items */",
]


def legit_workload() -> Workload:
    """A capture of the demo's kind (schema ``shop``), built as ``myaccel capture`` does."""
    events = [
        Event(conn_id=c, t_s=i / 10, sql=sql, schema="shop", latency_us=100.0)
        for c in (1, 2)
        for i, sql in enumerate(STATEMENTS)
    ]
    classes, traces, truncated = build_classes(events)
    return Workload.model_validate(
        {
            "created_at": "2026-11-27T00:00:00+00:00",
            "myaccel_version": "test",
            "server": {"flavor": "mariadb", "version": "10.11.19"},
            "source": "performance_schema",
            "window_s": 1.0,
            "statements_total": len(events),
            "statements_per_s": float(len(events)),
            "classes": [c.model_dump() for c in classes],
            "connections": [t.model_dump() for t in traces],
            "connections_truncated": truncated,
            "concurrency": {"connections": 2, "sample_interval_s": 0.25},
            "schemas": [{"name": "shop", "tables": ["items", "orders"], "ddl": SHOP_DDL}],
        }
    )


def legit_doc() -> dict[str, Any]:
    """The legit workload as the JSON document a file holds."""
    doc: dict[str, Any] = json.loads(legit_workload().model_dump_json())
    return doc


def first_replayed(doc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in doc["classes"] if c["replayable"])


def with_example(sql: str, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """The legit document with ``sql`` as the first example of its first replayed class."""
    d = copy.deepcopy(doc or legit_doc())
    first_replayed(d)["examples"][0] = sql
    return d


def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path
