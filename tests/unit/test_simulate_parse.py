"""Parsing valgrind's outputs for the simulation fallback (myaccel.profile.simulate).

The fixtures in tests/fixtures/valgrind/ were recorded on this VM (valgrind 3.19.0,
MariaDB 10.11.19 from Debian 12) with ``simulate()``: a callgrind run of 200
oltp_point_select events and the two cachegrind runs of 10 and 10 + 20 oltp_read_only
events, plus what callgrind_annotate/cg_annotate printed for them (README.md there).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from myaccel import proc
from myaccel.errors import UsageError
from myaccel.profile.records import (
    Recording,
    build_profile,
    load_profile,
    save_profile,
)
from myaccel.profile.simulate import (
    SIMULATION_LABEL,
    SimulationResult,
    compare_simulations,
    derive_metrics,
    format_simulation,
    function_table,
    parse_annotate,
    parse_out_file,
    read_out_file,
    valgrind_argv,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "valgrind"


def _text(name: str) -> str:
    path = FIX / name
    if name.endswith(".gz"):
        return gzip.decompress(path.read_bytes()).decode()
    return path.read_text()


def _unpacked(name: str, tmp_path: Path) -> Path:
    out = tmp_path / name.removesuffix(".gz")
    out.write_text(_text(name))
    return out


# ---------------------------------------------------------------- out files


def test_callgrind_out_file_uses_totals_not_the_broken_summary() -> None:
    s = parse_out_file(_text("callgrind.point_select.out.gz"))
    assert s.creator == "callgrind-3.19.0"
    assert s.events[:3] == ("Ir", "Dr", "Dw")
    assert set(s.events) >= {"I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm"}
    # summary: is garbage after --toggle-collect and zeroing; totals: is the window
    totals_line = next(
        ln for ln in _text("callgrind.point_select.out.gz").splitlines() if ln.startswith("totals:")
    )
    assert s.totals["Ir"] == int(totals_line.split()[1])
    assert 1_000_000 < s.totals["Ir"] < 100_000_000
    assert s.totals["I1mr"] > 0 and s.totals["D1mr"] > 0
    assert [c.name for c in s.caches] == ["I1", "D1", "LL"]
    assert all(c.line_bytes == 64 and c.size_bytes > 0 and c.ways > 0 for c in s.caches)


def test_cachegrind_out_files_summary_and_order() -> None:
    base = parse_out_file(_text("cachegrind.base.out.gz"))
    run = parse_out_file(_text("cachegrind.run.out.gz"))
    assert base.events[:3] == ("Ir", "I1mr", "ILmr")  # cachegrind's own order
    assert base.command is not None and "mariadbd" in base.command
    # the run has 20 more transactions than the baseline: more of everything that counts
    assert run.totals["Ir"] > base.totals["Ir"] > 0
    assert run.totals["Dr"] > base.totals["Dr"]


def test_read_out_file_streams_header_and_summary(tmp_path: Path) -> None:
    path = _unpacked("cachegrind.run.out.gz", tmp_path)
    assert read_out_file(path) == parse_out_file(path.read_text())


@pytest.mark.parametrize(
    "text",
    [
        "",
        "events: Ir Dr\nfl=x.c\nfn=f\n1 2 3\n",  # cut short before summary
        "summary: 1 2\n",  # no events line
    ],
)
def test_incomplete_out_file_is_a_clear_error(text: str) -> None:
    with pytest.raises(UsageError, match="incomplete"):
        parse_out_file(text)


def test_missing_out_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read valgrind output") as exc:
        read_out_file(tmp_path / "nope.out")
    assert "shut down cleanly" in exc.value.hint


def test_short_count_lines_pad_with_zeros() -> None:
    s = parse_out_file("events: Ir Dr Dw\nsummary: 10 4\n")
    assert s.totals == {"Ir": 10, "Dr": 4, "Dw": 0}


# ---------------------------------------------------------------- annotate text


def test_callgrind_annotate_self_table() -> None:
    shown, _, rows = parse_annotate(_text("callgrind.point_select.self.txt.gz"))
    assert shown[0] == "Ir" and "I1mr" in shown
    assert len(rows) > 50
    irs = [r.counts["Ir"] for r in rows]
    assert irs == sorted(irs, reverse=True)
    total = parse_out_file(_text("callgrind.point_select.out.gz")).totals["Ir"]
    assert sum(irs) == pytest.approx(total, rel=0.01)  # the whole window, by function
    # C++ names with spaces and the object in brackets
    named = [r for r in rows if "(" in r.function]
    assert named and all(r.location and r.location.endswith("]") for r in named)
    assert any(r.location == "??? [/usr/sbin/mariadbd]" for r in rows)


def test_callgrind_annotate_inclusive_table_starts_at_do_command() -> None:
    shown, _, rows = parse_annotate(_text("callgrind.point_select.inclusive.txt.gz"))
    assert shown == ("Ir",)
    total = parse_out_file(_text("callgrind.point_select.out.gz")).totals["Ir"]
    top = rows[0]
    assert top.function.startswith("do_command(")
    # callgrind's call graph loses ~1% of the window (returns it never saw a call for)
    assert 0.95 * total < top.counts["Ir"] <= total


def test_cg_annotate_diff_table() -> None:
    shown, totals, rows = parse_annotate(_text("cachegrind.diff.annotate.txt"))
    assert shown[:3] == ("Ir", "I1mr", "ILmr")
    base = parse_out_file(_text("cachegrind.base.out.gz")).totals
    run = parse_out_file(_text("cachegrind.run.out.gz")).totals
    assert totals["Ir"] == run["Ir"] - base["Ir"]  # cg_diff: run minus base
    assert rows and rows[0].counts["Ir"] >= rows[-1].counts["Ir"]
    # glibc functions carry their source path; unknown ones are ???
    assert any(r.location and r.location.startswith("./string/") for r in rows)


def test_annotate_dots_negatives_and_noise() -> None:
    text = "\n".join(
        [
            "Events shown:     Ir D1mr",
            "-" * 20,
            "Ir D1mr",
            "-" * 20,
            "1,000   10  PROGRAM TOTALS",
            "",
            "Ir D1mr  file:function",
            "-" * 20,
            "  900    .  src/a.c:f(int, char const*) [/bin/x]",
            " -100    5  ???:g",
            "",
            "-- Auto-annotated source: src/a.c",
            "  900    .  int f(...) {",
        ]
    )
    shown, totals, rows = parse_annotate(text)
    assert shown == ("Ir", "D1mr")
    assert totals == {"Ir": 1000, "D1mr": 10}
    assert [(r.location, r.function, r.counts) for r in rows] == [
        ("src/a.c [/bin/x]", "f(int, char const*)", {"Ir": 900, "D1mr": 0}),
        ("???", "g", {"Ir": -100, "D1mr": 5}),
    ]


@pytest.mark.skipif(proc.which("callgrind_annotate") is None, reason="valgrind not installed")
def test_function_table_with_the_real_annotate_tool(tmp_path: Path) -> None:
    out = _unpacked("callgrind.point_select.out.gz", tmp_path)
    total = read_out_file(out).totals["Ir"]
    top_self, top_incl = function_table("callgrind", out, total, top_n=10)
    assert len(top_self) == 10 and len(top_incl) == 10
    assert [f.ir_self for f in top_self] == sorted((f.ir_self for f in top_self), reverse=True)
    assert top_incl[0].function.startswith("do_command(")
    assert top_incl[0].inclusive_pct is not None and 95.0 < top_incl[0].inclusive_pct <= 100.0
    assert all(f.ir_inclusive is None or f.ir_inclusive >= f.ir_self for f in top_self)
    assert sum(f.self_pct for f in top_self) < 100.0


@pytest.mark.skipif(shutil.which("cg_annotate") is None, reason="valgrind not installed")
def test_function_table_cachegrind(tmp_path: Path) -> None:
    base = _unpacked("cachegrind.base.out.gz", tmp_path)
    run = _unpacked("cachegrind.run.out.gz", tmp_path)
    done = proc.run(["cg_diff", str(base), str(run)], check=True)
    diff = tmp_path / "diff.out"
    diff.write_text(done.stdout)
    total = read_out_file(run).totals["Ir"] - read_out_file(base).totals["Ir"]
    top_self, top_incl = function_table("cachegrind", diff, total, top_n=5)
    assert top_incl == [] and len(top_self) == 5
    assert top_self[0].ir_self > 0 and top_self[0].events["Ir"] == top_self[0].ir_self


# ---------------------------------------------------------------- metrics and results

TOTALS = {
    "Ir": 2_000_000,
    "Dr": 600_000,
    "Dw": 400_000,
    "I1mr": 40_000,
    "D1mr": 10_000,
    "D1mw": 5_000,
    "ILmr": 200,
    "DLmr": 100,
    "DLmw": 50,
    "Bc": 300_000,
    "Bcm": 9_000,
    "Bi": 20_000,
    "Bim": 1_000,
}


def test_derive_metrics_known_values() -> None:
    m = derive_metrics(TOTALS, transactions=10, queries=160)
    assert m["ir_per_transaction"] == 200_000
    assert m["ir_per_query"] == 12_500
    assert m["l1i_mpki"] == 20.0
    assert m["l1d_mpki"] == 7.5
    assert m["lli_mpki"] == 0.1
    assert m["lld_mpki"] == 0.075
    assert m["ll_mpki"] == 0.175
    assert m["branch_mpki"] == 5.0
    assert m["l1i_miss_pct"] == 2.0
    assert m["l1d_miss_pct"] == 1.5
    assert m["branch_mispredict_pct"] == pytest.approx(100 * 10_000 / 320_000, abs=1e-4)
    assert m["ll_miss_pct"] == pytest.approx(100 * 350 / 3_000_000, abs=1e-4)


def test_derive_metrics_without_simulated_events() -> None:
    m = derive_metrics({"Ir": 1000}, transactions=0, queries=0)
    assert m == {"ir": 1000.0}
    assert derive_metrics({}, 1, 1) == {}


def _result(**over: object) -> SimulationResult:
    base: dict[str, object] = {
        "created_at": "2026-11-22T07:00:00+00:00",
        "tool": "callgrind",
        "valgrind_version": "3.19.0",
        "valgrind_argv": valgrind_argv("callgrind", Path("c.out"), Path("v.log")),
        "window": "test",
        "cache_sim": True,
        "branch_sim": True,
        "server_binary": "/usr/sbin/mariadbd",
        "server_binary_sha256": "0" * 64,
        "server_version": "MariaDB 10.11.19",
        "workload": "oltp_read_only",
        "events": 10,
        "threads": 1,
        "tables": 2,
        "table_size": 10_000,
        "rand_seed": 1,
        "server_settings": {"innodb_use_native_aio": "0"},
        "transactions": 10,
        "queries": 160,
        "totals": TOTALS,
        "metrics": derive_metrics(TOTALS, 10, 160),
        "duration_s": 12.0,
    }
    base.update(over)
    return SimulationResult.model_validate(base)


def test_compare_simulations_normalizes_to_baseline() -> None:
    before = _result()
    faster = {**TOTALS, "Ir": 1_500_000, "I1mr": 15_000}
    after = _result(events=20, totals=faster, metrics=derive_metrics(faster, 10, 160))
    rows = {r.name: r for r in compare_simulations(before, after)}
    assert rows["ir_per_transaction"].after_pct_of_before == pytest.approx(75.0)
    assert rows["ir_per_transaction"].unit == "instructions"
    assert rows["l1i_mpki"].after_pct_of_before == pytest.approx(50.0)  # 10 vs 20 MPKI
    assert rows["l1i_mpki"].unit == "MPKI"
    same = compare_simulations(before, before)
    assert all(r.after_pct_of_before == pytest.approx(100.0) for r in same)


@pytest.mark.parametrize(
    ("field", "value"),
    [("workload", "oltp_point_select"), ("tool", "cachegrind"), ("table_size", 5)],
)
def test_compare_refuses_different_work(field: str, value: object) -> None:
    with pytest.raises(UsageError, match="cannot compare"):
        compare_simulations(_result(), _result(**{field: value}))


def test_result_is_labelled_and_round_trips_in_a_profile(tmp_path: Path) -> None:
    r = _result()
    assert r.label == SIMULATION_LABEL and "SIMULATION" in r.label
    assert r.instructions == 2_000_000
    text = format_simulation(r)
    assert text.startswith("**SIMULATION (valgrind)")
    assert "| l1i_mpki (MPKI) | 20 |" in text
    prof = build_profile(Recording(tool="valgrind", duration_s=12.0), simulation=r)
    path = save_profile(prof, tmp_path / "profile.json")
    loaded = load_profile(path)
    assert loaded.simulation == r
    assert loaded.microarch == {}  # simulated figures never pose as hardware counters


def test_valgrind_argv_per_tool() -> None:
    cg = valgrind_argv("callgrind", Path("/o/c.out"), Path("/o/v.log"), extra=["--LL=8M"])
    assert cg[:2] == ["valgrind", "--tool=callgrind"]
    assert "--instr-atstart=no" in cg and "--collect-atstart=no" in cg
    assert "--toggle-collect=do_command*" in cg and "--callgrind-out-file=/o/c.out" in cg
    assert cg[-1] == "--LL=8M"
    cc = valgrind_argv("cachegrind", Path("/o/c.out"), Path("/o/v.log"), branch_sim=False)
    assert "--cachegrind-out-file=/o/c.out" in cc and "--branch-sim=no" in cc
    assert not any(a.startswith(("--instr-atstart", "--toggle-collect")) for a in cc)
