"""report.html / report.md from recorded artifacts: golden numbers, partial input, bad input,
self-containment and size."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.cli.main import cli
from myaccel.report import write_report
from myaccel.report.content import median_ci

FIX = Path(__file__).parents[1] / "fixtures" / "report"
DEMO = FIX / "accelerate-demo"
JOURNAL = FIX / "journal" / "00001-20261122T050802Z.json"


# ---------------------------------------------------------------- HTML parsing helpers


class Cell:
    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text = ""


class Page(HTMLParser):
    """Tables by id (rows of cells with attributes and text), every tag's attributes,
    and the text of <style> and <script> elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[Cell]]] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.raw_text: dict[str, list[str]] = {"style": [], "script": []}
        self._table: str | None = None
        self._row: list[Cell] | None = None
        self._cell: Cell | None = None
        self._raw: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self._table = a.get("id") or f"table-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = []
            self.tables[self._table].append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = Cell(tag, a)
            self._row.append(self._cell)
        elif tag in ("style", "script"):
            self._raw = tag

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag in ("style", "script"):
            self._raw = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.text += data
        if self._raw is not None:
            self.raw_text[self._raw].append(data)


def parse_page(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text())
    p.close()
    return p


def num(text: str) -> float:
    return float(text.strip().replace(",", "").replace("%", "").replace("+", ""))


def ci_parts(text: str) -> tuple[float, float]:
    m = re.fullmatch(r"\[([-+\d.]+)%, ([-+\d.]+)%\]", text.strip())
    assert m, text
    return float(m.group(1)), float(m.group(2))


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("demo-report")
    written = write_report([DEMO], out, html=True, md=True)
    assert [p.name for p in written] == ["report.html", "report.md"]
    return out / "report.html", out / "report.md"


def comparison() -> dict:  # type: ignore[type-arg]
    return json.loads((DEMO / "ab" / "comparison.json").read_text())


# ---------------------------------------------------------------- golden numbers


def test_html_table_numbers_equal_comparison_json(demo_report: tuple[Path, Path]) -> None:
    page = parse_page(demo_report[0])
    rows = [r for r in page.tables["results-table-0"] if r and r[0].tag == "td"]
    cells = comparison()["cells"]
    assert len(rows) == len(cells) == 2
    for row, c in zip(rows, cells, strict=True):
        by = {cell.attrs["data-col"]: cell for cell in row}
        assert by["workload"].text == c["workload"]
        assert int(by["threads"].text) == c["threads"]
        for col, key, tol in (
            ("baseline_tps", "baseline_tps_median", 0.05),
            ("candidate_tps", "candidate_tps_median", 0.05),
            ("gain", "delta_pct", 0.05),
            ("baseline_p95", "baseline_p95_ms_median", 0.005),
            ("candidate_p95", "candidate_p95_ms_median", 0.005),
        ):
            assert abs(num(by[col].text) - c[key]) <= tol + 1e-9, (col, by[col].text, c[key])
            # the sort key carries the exact value
            assert float(by[col].attrs["data-value"] or "nan") == pytest.approx(c[key], rel=1e-12)
        lo, hi = ci_parts(by["ci"].text)
        assert abs(lo - c["ci_low_pct"]) <= 0.05 and abs(hi - c["ci_high_pct"]) <= 0.05
        assert num(by["p"].text) == pytest.approx(c["p_adjusted"], rel=5e-3)
        assert by["n"].text.strip() == f"{c['n_baseline']}+{c['n_candidate']}"
        assert by["verdict"].text.strip() == c["verdict"]


def test_markdown_table_numbers_equal_comparison_json(demo_report: tuple[Path, Path]) -> None:
    md = demo_report[1].read_text()
    lines = md.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| workload | threads |"))
    header = [h.strip() for h in lines[head].strip("|").split("|")]
    assert lines[head + 1].startswith("|---")
    body = []
    for line in lines[head + 2 :]:
        if not line.startswith("|"):
            break
        body.append([x.strip() for x in line.strip("|").split("|")])
    cells = comparison()["cells"]
    assert len(body) == len(cells)
    for row, c in zip(body, cells, strict=True):
        by = dict(zip(header, row, strict=True))
        assert by["workload"] == c["workload"]
        assert int(by["threads"]) == c["threads"]
        assert abs(num(by["baseline TPS"]) - c["baseline_tps_median"]) <= 0.05
        assert abs(num(by["candidate TPS"]) - c["candidate_tps_median"]) <= 0.05
        assert abs(num(by["gain %"]) - c["delta_pct"]) <= 0.05
        lo, hi = ci_parts(by["95% CI"])
        assert abs(lo - c["ci_low_pct"]) <= 0.05 and abs(hi - c["ci_high_pct"]) <= 0.05
        assert num(by["p (Holm)"]) == pytest.approx(c["p_adjusted"], rel=5e-3)
        assert by["n"] == f"{c['n_baseline']}+{c['n_candidate']}"
        assert by["verdict"] == c["verdict"]
    g = comparison()
    assert f"**{g['geomean_delta_pct']:+.1f}%**" in md


def test_summary_and_sections_in_order(demo_report: tuple[Path, Path]) -> None:
    html = demo_report[0].read_text()
    order = [
        'id="summary"',
        'id="results"',
        'id="plots"',
        'id="plan"',
        'id="environment"',
        'id="warnings"',
    ]
    pos = [html.index(s) for s in order]
    assert pos == sorted(pos)
    page = parse_page(demo_report[0])
    # the reproduction command from campaign.json
    assert "myaccel accelerate --sandbox demo --profile quick" in html
    # four figures for the A/B (threads, strip, forest, series), each an inline SVG
    labels = [a.get("aria-label") for t, a in page.tags if t == "svg"]
    for want in ("TPS and p95", "Every run", "Forest plot", "Per-second TPS"):
        assert any(want in (x or "") for x in labels), (want, labels)
    # every applied server change is in the plan table as measured in the A/B
    plan_rows = [r for tid, rows in page.tables.items() for r in rows if tid.startswith("table-")]
    measured = {r[1].text.split()[0] for r in plan_rows if r and r[0].text.strip() == "measured"}
    tuned_ids = {
        line[2:].split(":")[0]
        for line in (DEMO / "tuned.cnf").read_text().splitlines()
        if line.startswith("# ") and ": " in line and " " not in line[2:].split(": ")[0]
    }
    assert measured == tuned_ids and len(measured) == 4
    # the oversubscribed region: 8 threads on 2 CPUs
    assert "threads &gt; 2 CPUs" in html or "threads > 2 CPUs" in html


def test_html_is_self_contained_and_small(demo_report: tuple[Path, Path]) -> None:
    path = demo_report[0]
    assert path.stat().st_size < 5 * 2**20
    page = parse_page(path)
    for tag, attrs in page.tags:
        for name in ("src", "href", "xlink:href", "data", "action", "poster"):
            v = attrs.get(name) or ""
            assert not re.match(r"\s*(https?:)?//", v), (tag, name, v)
        if tag == "link":
            pytest.fail(f"external resource link: {attrs}")
        if tag == "script":
            assert "src" not in attrs
    css = "".join(page.raw_text["style"])
    js = "".join(page.raw_text["script"])
    assert css and js
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", css)
    assert "@import" not in css
    assert "@media print" in css
    assert not re.search(r"https?://", js)


def test_markdown_fits_an_issue_comment(demo_report: tuple[Path, Path]) -> None:
    md = demo_report[1].read_text()
    assert len(md) < 65536
    assert "![" not in md  # no images
    assert "## Results" in md and "## Plan" in md and "## Environment" in md


# ---------------------------------------------------------------- partial artifacts


def test_unfinished_campaign_renders_and_says_what_is_missing(tmp_path: Path) -> None:
    d = tmp_path / "ab"
    shutil.copytree(DEMO / "ab", d)
    (d / "comparison.json").unlink()
    idx = json.loads((d / "campaign.json").read_text())
    keep = idx["runs"][:9]
    for name in idx["runs"][9:]:
        (d / name).unlink()
    idx.update(runs=keep, finished=False)
    (d / "campaign.json").write_text(json.dumps(idx))
    # the run that was being written when it stopped, and a damaged file
    (d / "run-010.json.tmp").write_text('{"schema_version": "myaccel.run/1", "run_')
    (d / "run-011.json").write_text('{"schema_version": "myaccel.run/1", "run_')
    # and one run whose server went away
    r = json.loads((d / "run-009.json").read_text())
    r["summary"] = None
    r["validity"].update(valid=False, reasons=["sysbench exit 1: lost connection"], failure="error")
    (d / "run-009.json").write_text(json.dumps(r))
    out = tmp_path / "out"
    write_report([d], out, html=True, md=True)
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    for text in (html, md):
        assert "did not finish: 9 of 20 run(s) recorded" in text
        assert "no comparison.json" in text
        assert "lost connection" in text
        assert "run-011.json: not readable JSON" in text
    # the provisional comparison still has the first cell (both arms have runs there)
    page = parse_page(out / "report.html")
    rows = [r for r in page.tables["results-table-0"] if r and r[0].tag == "td"]
    assert rows and rows[0][0].text == "oltp_read_only"


def _profile(tmp_path: Path, name: str, microarch: bool) -> Path:
    """A profile.json (+ folded stacks) built from a synthesized profile fixture."""
    from myaccel.profile.folded import parse_folded, summarize
    from myaccel.profile.records import NodeCpus, Recording, build_profile, save_profile

    src = Path(__file__).parents[1] / "fixtures" / "profiles"
    doc = json.loads((src / f"{name}.capture.json").read_text())
    folded_text = (src / f"{name}.folded").read_text()
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "stacks.folded").write_text(folded_text)
    rec = Recording(**{**doc["recording"], "folded_path": "stacks.folded"})
    p = build_profile(
        rec,
        stacks=summarize(parse_folded(folded_text)),
        proc_stat=[(s["t_s"], s["text"]) for s in doc["proc_stat"]],
        numa_nodes=[NodeCpus(**n) for n in doc["numa_nodes"]],
        microarch=doc["microarch"] if microarch else None,
        created_at="2026-11-20T10:00:00+00:00",
    )
    return save_profile(p, d / "profile.json")


def test_profile_without_pmu_metrics(tmp_path: Path) -> None:
    prof = _profile(tmp_path, "seed002-ahi-kunpeng920-4n", microarch=False)
    out = tmp_path / "out"
    write_report([prof], out, html=True, md=True)
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert "no micro-architecture metrics" in html and "no micro-architecture metrics" in md
    page = parse_page(out / "report.html")
    flames = [a for t, a in page.tags if t == "svg" and "flame" in (a.get("class") or "")]
    assert len(flames) == 1
    frames = [a for t, a in page.tags if t == "g" and a.get("class") == "fg"]
    assert len(frames) > 20
    root = [a for a in frames if a.get("data-d") == "0"]
    assert len(root) == 1 and float(root[0]["data-w"] or 0) == 1.0
    assert "btr_search_guess_on_hash" in html  # the seed 002 hot spot, in the top-N table
    assert "no benchmark runs" in html


def test_two_profiles_normalize_microarch_to_baseline(tmp_path: Path) -> None:
    base = _profile(tmp_path / "baseline", "frontend-yitian710-mysql80", microarch=True)
    tuned_dir = tmp_path / "tuned"
    tuned = _profile(tuned_dir, "frontend-yitian710-mysql80", microarch=True)
    doc = json.loads(tuned.read_text())
    doc["microarch"] = {k: v * 0.5 for k, v in doc["microarch"].items()}
    tuned.write_text(json.dumps(doc))
    out = tmp_path / "out"
    write_report([base, tuned], out, html=True, md=True)
    page = parse_page(out / "report.html")
    assert any("normalized" in (a.get("aria-label") or "") for t, a in page.tags if t == "svg")
    md = (out / "report.md").read_text()
    assert "50.0%" in md  # every metric halved: 50% of the baseline


def test_plan_never_applied(tmp_path: Path) -> None:
    d = tmp_path / "plan-only"
    d.mkdir()
    shutil.copy(DEMO / "facts.json", d)
    shutil.copy(DEMO / "plan.json", d)
    write_report([d], d, html=True, md=True)
    html = (d / "report.html").read_text()
    md = (d / "report.md").read_text()
    assert "never applied" in html and "never applied" in md
    page = parse_page(d / "report.html")
    statuses = {
        r[0].text.strip()
        for tid, rows in page.tables.items()
        for r in rows
        if r and r[0].tag == "td"
    }
    assert "measured" not in statuses and "not applied" in statuses


def test_journal_changes_and_statuses(tmp_path: Path) -> None:
    d = tmp_path / "applied"
    d.mkdir()
    plan = json.loads((DEMO / "plan.json").read_text())
    j = json.loads(JOURNAL.read_text())
    j["plan_id"] = plan["created_at"]
    (d / "plan.json").write_text(json.dumps(plan))
    (d / "journal.json").write_text(json.dumps(j))
    write_report([d], d, html=True, md=False)
    html = (d / "report.html").read_text()
    assert "SET GLOBAL innodb_buffer_pool_size = 18048M" in html
    assert "[mysqld] innodb_log_buffer_size = 64M" in html
    assert "rolled back" in html  # the journal was rolled back
    # the option file grew between entries: a diff is shown
    assert "+innodb_log_file_size" in html.replace(" ", "").replace("=", "")


def test_build_manifest_shown_generically(tmp_path: Path) -> None:
    m = {
        "schema": "myaccel.build/1",
        "flavor": "mariadb",
        "flags": {"CMAKE_C_FLAGS": "-O2 -flto", "CPU_LEVEL1_DCACHE_LINESIZE": "128"},
        "stages": [{"name": "configure", "status": "ok", "duration_s": 12}],
        "verification": {"missing_profile_warnings": 0, "gcov_symbols": False},
    }
    (tmp_path / "build.json").write_text(json.dumps(m))
    write_report([tmp_path], tmp_path, html=True, md=True)
    html = (tmp_path / "report.html").read_text()
    for s in ("CPU_LEVEL1_DCACHE_LINESIZE", "configure", "missing_profile_warnings", "mariadb"):
        assert s in html
    assert "myaccel.build/1" in (tmp_path / "report.md").read_text()


def test_build_manifest_of_myaccel_build_is_structured(tmp_path: Path) -> None:
    """A real manifest (kvlab fixture, PGO+LTO with --compare-with): flags, checks, stages
    and the callgrind figures appear as tables whose numbers are the manifest's."""
    src = FIX / "build-kvlab" / "manifest.json"
    m = json.loads(src.read_text())
    write_report([src], tmp_path, html=True, md=True)
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    cg = m["measurements"]["callgrind"]
    for doc in (md, html):
        assert "kvlab fixture 1.2.0: lto, pgo" in doc
        assert f"{cg['baseline']['ir_total']:,}" in doc
        assert f"{cg['this_build']['ir_total']:,}" in doc
        assert f"{cg['delta_pct']:+.2f}%" in doc
        assert "-fprofile-use=" in doc and "CMAKE_INTERPROCEDURAL_OPTIMIZATION=ON" in doc
    rows = {
        line.split("|")[1].strip(" `"): line.split("|")[2].strip()
        for line in md.splitlines()
        if line.startswith("| `")
    }
    assert rows == {c["id"]: c["status"] for c in m["verification"]}
    stage_rows = [line.split("|")[1].strip() for line in md.splitlines() if "(resumed)" in line]
    assert stage_rows == [s["name"] for s in m["stages"] if s["resumed"]]
    assert "build of kvlab fixture 1.2.0 (lto, pgo): complete" in md
    assert "no plan.json" not in md  # a build needs no plan; the report does not ask for one


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("kind", ["empty-dir", "unknown-schema", "foreign-json", "missing"])
def test_bad_input_one_line_error_and_exit_code(tmp_path: Path, kind: str) -> None:
    if kind == "empty-dir":
        arg = tmp_path / "empty"
        arg.mkdir()
        (arg / "notes.txt").write_text("hello")
        (arg / "other.json").write_text('{"name": "not ours"}')
    elif kind == "unknown-schema":
        arg = tmp_path / "x.json"
        arg.write_text('{"schema_version": "myaccel.run/9"}')
    elif kind == "foreign-json":
        arg = tmp_path / "x.json"
        arg.write_text("[1, 2]")
    else:
        arg = tmp_path / "nope"
    res = CliRunner().invoke(cli, ["report", str(arg), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x]
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert len(lines) == 2
    assert not (tmp_path / "o").exists()


def test_unknown_myaccel_schema_inside_a_directory_is_refused(tmp_path: Path) -> None:
    shutil.copytree(DEMO / "ab", tmp_path / "ab")
    (tmp_path / "ab" / "future.json").write_text('{"schema_version": "myaccel.comparison/2"}')
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "ab")])
    assert res.exit_code == 2
    assert "myaccel.comparison/2" in res.output


def test_cli_writes_only_what_is_asked(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["report", str(DEMO / "ab"), "--md", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "report.md").exists() and not (tmp_path / "report.html").exists()
    assert f"report: {tmp_path / 'report.md'}" in res.output


# ---------------------------------------------------------------- statistics helper


def test_median_ci_order_statistics() -> None:
    lo, hi, cov = median_ci([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (lo, hi) == (1.0, 5.0) and cov == pytest.approx(0.9375)
    lo, hi, cov = median_ci([float(x) for x in range(1, 11)])
    assert (lo, hi) == (2.0, 9.0) and cov == pytest.approx(1 - 2 * 11 / 1024)
    assert median_ci([7.0]) == (7.0, 7.0, 0.0)


def test_report_after_run_warns_and_does_not_raise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from myaccel.cli.report import report_after_run

    report_after_run([tmp_path], tmp_path)  # nothing to report on: a warning, no exception
    err = capsys.readouterr().err
    assert err.startswith("warning: the report was not written: no myaccel artifacts")
    assert f"hint: try again with: myaccel report {tmp_path}" in err
    assert not (tmp_path / "report.html").exists()


def test_two_valgrind_simulations_normalized_and_labelled(tmp_path: Path) -> None:
    """No PMU (any VM): the simulated figures of two profiles are compared instead, and
    the report says they are a simulation."""
    sim_mod = pytest.importorskip("myaccel.profile.simulate")
    paths = []
    for role, l1i in (("baseline", 20.0), ("tuned", 15.0)):
        prof = _profile(tmp_path / role, "healthy-kunpeng920-4n", microarch=False)
        doc = json.loads(prof.read_text())
        sim = {
            "created_at": "2026-11-22T07:00:00+00:00",
            "tool": "cachegrind",
            "valgrind_version": "3.19.0",
            "valgrind_argv": ["valgrind", "--tool=cachegrind"],
            "window": "client thread only",
            "cache_sim": True,
            "branch_sim": True,
            "server_binary": "/usr/sbin/mariadbd",
            "server_version": "10.11.19",
            "workload": "oltp_read_only",
            "events": 2000,
            "threads": 1,
            "tables": 1,
            "table_size": 10000,
            "rand_seed": 1,
            "server_settings": {},
            "transactions": 2000,
            "queries": 32000,
            "totals": {"Ir": 10_000_000},
            "metrics": {"l1i_mpki": l1i, "branch_mpki": 4.0},
            "duration_s": 30.0,
        }
        model = sim_mod.SimulationResult
        for name, info in model.model_fields.items():  # fields added since: neutral values
            if info.is_required() and name not in sim:
                ann = str(info.annotation)
                sim[name] = (
                    0
                    if "int" in ann
                    else 0.0
                    if "float" in ann
                    else {}
                    if "dict" in ann
                    else []
                    if "list" in ann
                    else "-"
                )
        doc["simulation"] = model.model_validate(sim).model_dump()
        prof.write_text(json.dumps(doc))
        paths.append(prof)
    out = tmp_path / "out"
    write_report(paths, out, html=True, md=True)
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert "SIMULATION (valgrind" in html and "SIMULATION (valgrind" in md
    assert "| l1i_mpki | 20 | 15 | 75.0% |" in md
    assert "| branch_mpki | 4 | 4 | 100.0% |" in md
