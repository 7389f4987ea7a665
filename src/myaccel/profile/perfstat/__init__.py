"""Counting with ``perf stat``: which events to ask for, the argv, the CSV parser, errors.

What this module relies on (facts checked while writing it, see
``tests/fixtures/perfstat/README.md`` for the sources):

* ``perf stat -x SEP`` prints one line per counter, fields in this order: optional
  time stamp (``-I``), optional aggregation id (CPU, core, socket, die, node or
  ``comm-pid`` with ``--per-thread``), optional number of CPUs aggregated, the counter
  value, its unit (often empty), the event name, optional variance (``-r``), the counter's
  run time, the percentage of the measurement time it ran, optional metric value and
  metric unit. A line holding only a metric value and unit continues the previous counter
  (perf's ``new_line_csv``). Separators are not quoted: an event such as
  ``cpu/event=0x3c,umask=0/`` contains the separator itself.
* The value column holds ``<not supported>`` when the PMU cannot count an event and
  ``<not counted>`` when it was never scheduled; perf still exits 0.
* perf scales counts by enabled/running time by default: a percentage below 100 means the
  counter was multiplexed and the printed value is an estimate. We keep the value as
  printed plus the percentage and flag the row.
* Empty metric columns are printed as two separators by perf 5.x and 6.x and as four by
  older releases; some lines carry no metric columns at all. The parser therefore anchors
  on the value/unit/event triple instead of counting columns.
* ``perf stat`` exits 129 with ``event syntax error`` for an event it cannot parse, 255
  with an ``Access to performance monitoring ... is limited`` banner when
  ``kernel.perf_event_paranoid`` forbids the request, and 255 with ``The <event> event is
  not supported.`` when the leader of a *group* is an event the PMU lacks (measured on
  this VM, perf 6.1: the same events ungrouped print ``<not supported>`` and exit 0).

The argv never uses ``--topdown``: in the perf 4.x source read for this work the flag
forces ``--metric-only`` output (a header line plus value lines, another layout) with
per-core aggregation and demands ``-a``; on CPUs without the events it exits with
"System does not support topdown" (measured here, exit code 234). We request the events it uses
(``slots`` + ``topdown-*`` on Ice Lake and later, ``topdown-total-slots``... before) as
one group and compute level 1 with perf's own formulas in :mod:`myaccel.profile.metrics`.

The package: ``names`` (event names), ``events`` (what to count and the argv), ``parse``
(the CSV output), ``errors`` (what a failure means), ``run`` (all of it for one window).
"""

from __future__ import annotations

from myaccel.facts.perfcap import PMU_DIR
from myaccel.profile.perfstat.errors import (
    PerfPermissionDenied,
    PerfStatError,
    PerfUnknownEvent,
    PerfUnsupported,
    perf_stat_error,
)
from myaccel.profile.perfstat.events import (
    FAMILY_GROUPS,
    EventInventory,
    EventPlan,
    build_perf_stat_argv,
    collect_event_inventory,
    family_groups,
    format_event_list,
    inventory_from_facts,
    select_events,
)
from myaccel.profile.perfstat.names import (
    GENERIC_EVENTS,
    RAW_EVENTS,
    SOFTWARE_EVENTS,
    canonical_event,
    perf_event_spelling,
)
from myaccel.profile.perfstat.parse import (
    NOT_COUNTED,
    NOT_SUPPORTED,
    PerfCount,
    PerfMetricColumn,
    PerfStatResult,
    counts_mapping,
    parse_perf_stat_csv,
)
from myaccel.profile.perfstat.run import run_perf_stat

__all__ = [
    "FAMILY_GROUPS",
    "GENERIC_EVENTS",
    "NOT_COUNTED",
    "NOT_SUPPORTED",
    "PMU_DIR",
    "RAW_EVENTS",
    "SOFTWARE_EVENTS",
    "EventInventory",
    "EventPlan",
    "PerfCount",
    "PerfMetricColumn",
    "PerfPermissionDenied",
    "PerfStatError",
    "PerfStatResult",
    "PerfUnknownEvent",
    "PerfUnsupported",
    "build_perf_stat_argv",
    "canonical_event",
    "collect_event_inventory",
    "counts_mapping",
    "family_groups",
    "format_event_list",
    "inventory_from_facts",
    "parse_perf_stat_csv",
    "perf_event_spelling",
    "perf_stat_error",
    "run_perf_stat",
    "select_events",
]
