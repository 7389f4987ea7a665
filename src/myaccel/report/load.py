"""Find and read the artifacts a report is made from.

Any mix of directories and files is accepted. JSON documents are recognised by their
``schema_version``, looked up in the artifact registry (``myaccel.artifacts``: facts, plan,
journal, run, campaign, comparison, profile, workload (``capture``), and the older schemas
they migrate from), or
by a ``schema`` starting with ``myaccel.build`` (build manifests, shown generically).
Inside a directory, JSON of other programs is ignored and a damaged artifact becomes a note
in the report (a crash may have left it half written); a file named on the command line
must be an artifact this version reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from myaccel.actions.journal import JournalData
from myaccel.artifacts import Source, model_for, read_json, validate
from myaccel.bench.compare import Comparison
from myaccel.bench.run_record import CampaignIndex, RunRecord
from myaccel.bench.workload import Workload
from myaccel.errors import UsageError
from myaccel.model import Facts
from myaccel.paths import entries
from myaccel.profile.records import Profile
from myaccel.rules.model import Plan
from myaccel.tune.result import TuneResult

# Where each kind of artifact goes in ``Artifacts``; its schemas come from the registry.
_LISTS: dict[type[BaseModel], str] = {
    Facts: "facts",
    Plan: "plans",
    JournalData: "journals",
    RunRecord: "runs",
    CampaignIndex: "campaigns",
    Comparison: "comparisons",
    Profile: "profiles",
    Workload: "workloads",
    TuneResult: "tunes",
}
# Documents shown as they are, unvalidated (a manifest cut short still shows what it has).
GENERIC_PREFIXES = ("myaccel.build",)
_DAMAGED_HINT = "the file is damaged or from another myaccel version; write it again"
MAX_DEPTH = 4  # results/<campaign>/ab/run-001.json is depth 2; leave room
MAX_FILE_BYTES = 64 * 2**20


T = TypeVar("T")


@dataclass
class Loaded(Generic[T]):
    path: Path
    doc: T


@dataclass
class Artifacts:
    """Everything found, by kind, each with the file it came from."""

    roots: list[Path] = field(default_factory=list)
    facts: list[Loaded[Facts]] = field(default_factory=list)
    plans: list[Loaded[Plan]] = field(default_factory=list)
    journals: list[Loaded[JournalData]] = field(default_factory=list)
    runs: list[Loaded[RunRecord]] = field(default_factory=list)
    campaigns: list[Loaded[CampaignIndex]] = field(default_factory=list)
    comparisons: list[Loaded[Comparison]] = field(default_factory=list)
    profiles: list[Loaded[Profile]] = field(default_factory=list)
    workloads: list[Loaded[Workload]] = field(default_factory=list)  # captures
    tunes: list[Loaded[TuneResult]] = field(default_factory=list)  # tune.json of `tune`
    builds: list[Loaded[dict[str, Any]]] = field(default_factory=list)
    candidate_configs: list[Path] = field(default_factory=list)  # tuned.cnf of accelerate
    notes: list[str] = field(default_factory=list)  # unreadable or damaged files

    @property
    def count(self) -> int:
        return sum(
            len(x)
            for x in (
                self.facts,
                self.plans,
                self.journals,
                self.runs,
                self.campaigns,
                self.comparisons,
                self.profiles,
                self.workloads,
                self.tunes,
                self.builds,
            )
        )


def schema_of(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    for key in ("schema_version", "schema"):
        val = doc.get(key)
        if isinstance(val, str):
            return val
    return None


def _is_ours(schema: str | None) -> bool:
    return schema is not None and schema.startswith("myaccel.")


def _unknown_schema(path: Path, schema: str | None) -> UsageError:
    return UsageError(
        f"'{path}' has schema {schema!r}, which this myaccel cannot report on",
        hint="pass files written by myaccel (facts, plan, journal, runs, comparison, profile, "
        "build manifest); an artifact of a newer myaccel needs that version",
    )


def _load_file(arts: Artifacts, path: Path, *, explicit: bool) -> None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            if explicit:
                raise UsageError(
                    f"'{path}' is larger than {MAX_FILE_BYTES // 2**20} MiB",
                    hint="pass the artifact JSON files myaccel wrote",
                )
            return
        doc = read_json(path, max_bytes=MAX_FILE_BYTES)  # bounded nesting too
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JsonLimitError included
        if explicit:
            raise UsageError(
                f"'{path}' is not readable JSON: {str(exc).splitlines()[0]}",
                hint="pass a results directory or the JSON artifacts myaccel wrote",
            ) from None
        arts.notes.append(f"{path}: not readable JSON ({str(exc).splitlines()[0]}): left out")
        return
    schema = schema_of(doc)
    if not _is_ours(schema):
        if explicit:
            raise _unknown_schema(path, schema)
        return  # another program's JSON next to ours
    assert schema is not None and isinstance(doc, dict)
    if schema.startswith(GENERIC_PREFIXES):
        arts.builds.append(Loaded(path, doc))
        return
    model = model_for(schema)
    if model is None or model not in _LISTS:
        raise _unknown_schema(path, schema)
    try:
        loaded = validate(doc, model, Source(path, "artifact", _DAMAGED_HINT, UsageError))
    except UsageError as exc:
        if explicit:
            raise
        arts.notes.append(f"{exc.message}: left out")
        return
    getattr(arts, _LISTS[model]).append(Loaded(path, loaded))


def _walk(root: Path, depth: int = 0) -> list[Path]:
    out: list[Path] = []
    for p in entries(root):
        if p.name.startswith("."):
            continue
        if p.is_dir() and not p.is_symlink():
            if depth < MAX_DEPTH:
                out += _walk(p, depth + 1)
        elif p.suffix == ".json" and p.is_file():
            out.append(p)
    return out


def load_artifacts(paths: Sequence[Path]) -> Artifacts:
    """Read every artifact under ``paths``; raise UsageError when there is none."""
    if not paths:
        raise UsageError(
            "no results directory given", hint="myaccel report RESULTS_DIR (e.g. from accelerate)"
        )
    arts = Artifacts()
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise UsageError(
                f"'{p}' does not exist",
                hint="pass a results directory written by accelerate, ab, bench, profile or build",
            )
        arts.roots.append(p)
        if p.is_dir():
            for f in _walk(p):
                _load_file(arts, f, explicit=False)
            arts.candidate_configs += sorted(p.glob("tuned.cnf"))
        else:
            _load_file(arts, p, explicit=True)
            cnf = p.parent / "tuned.cnf"
            if cnf.is_file() and cnf not in arts.candidate_configs:
                arts.candidate_configs.append(cnf)
    if arts.count == 0:
        where = ", ".join(f"'{p}'" for p in paths)
        raise UsageError(
            f"no myaccel artifacts in {where}",
            hint="pass a directory written by `myaccel accelerate`, `ab`, `bench`, `profile` or "
            "`build` (it holds facts.json, plan.json, run-*.json, comparison.json, ...)",
        )
    _dedupe(arts)
    _tune_studies(arts)
    return arts


def _tune_studies(arts: Artifacts) -> None:
    """A `tune` results directory holds a campaign per trial (OUT/trials/trial-NNN) and the
    rules' plan it started from: the report shows the study (its own section), the final
    A/B as an experiment and the plan to apply; the other trials stay in the study."""
    if not arts.tunes:
        return
    finals = {
        Path(t.doc.final.comparison).parent.resolve()
        for t in arts.tunes
        if t.doc.final and t.doc.final.comparison
    }
    trial_dirs = [t.path.parent.resolve() / "trials" for t in arts.tunes]

    def keep(path: Path) -> bool:
        p = path.resolve()
        if not any(p.is_relative_to(d) for d in trial_dirs):
            return True
        return any(p.is_relative_to(f) for f in finals)

    for name in ("runs", "campaigns", "comparisons"):
        setattr(arts, name, [x for x in getattr(arts, name) if keep(x.path)])
    rules_plans = {t.path.parent.resolve() / "rules-plan.json" for t in arts.tunes}
    arts.plans = [p for p in arts.plans if p.path.resolve() not in rules_plans]
    for t in arts.tunes:  # the option file the plan to apply was measured with
        cnf = _measured_config(t)
        if cnf.is_file() and cnf not in arts.candidate_configs:
            arts.candidate_configs.append(cnf)


def _measured_config(t: Loaded[TuneResult]) -> Path:
    """The winner's option file when it won the final A/B (plan.json is the plan with its
    changes), else the plan's (plan.json is the rules' plan)."""
    configs = t.path.parent / "configs"
    f = t.doc.final
    if t.doc.improved and f is not None and f.comparison:
        return configs / f"{Path(f.comparison).parent.name}.cnf"
    return configs / "plan.cnf"


def _dedupe(arts: Artifacts) -> None:
    """The same file reached twice (a directory and a file in it) counts once."""
    for name in (
        "facts",
        "plans",
        "journals",
        "runs",
        "campaigns",
        "comparisons",
        "profiles",
        "workloads",
        "tunes",
        "builds",
    ):
        items: list[Loaded[Any]] = getattr(arts, name)
        seen: set[Path] = set()
        keep = []
        for it in items:
            key = it.path.resolve()
            if key not in seen:
                seen.add(key)
                keep.append(it)
        setattr(arts, name, keep)
