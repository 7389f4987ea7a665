"""The common stage runner: logs, manifest records, resume by input digest, failures."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import pytest

from myaccel.build.errors import BuildFailed
from myaccel.build.flags import BuildRequest, TargetCpu, Toolchain
from myaccel.build.manifest import BuildManifest, load_manifest
from myaccel.build.runner import BuildContext, Layout, Stage, run_stages
from myaccel.build.tree import detect_tree

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "buildproj"


class Step(Stage):
    def __init__(self, name: str, value: str, calls: list[str], fail: bool = False) -> None:
        self.name, self.title = name, f"step {name}"
        self.value, self.calls, self.fail = value, calls, fail

    def inputs(self, ctx: BuildContext) -> dict[str, Any]:
        return {"value": self.value}

    def run(self, ctx: BuildContext, log: IO[str]) -> dict[str, Any]:
        self.calls.append(self.name)
        log.write(f"running {self.name}\n")
        if self.fail:
            raise BuildFailed(f"{self.name} broke", hint="fix it")
        return {"summary": self.value}


class Skipper(Step):
    def skip_reason(self, ctx: BuildContext) -> str | None:
        return "tool not installed"


def context(out: Path, resume: bool) -> BuildContext:
    tc = Toolchain("gcc", "g++", "12", "x86_64", False, "x86_64-linux-gnu", "Ninja")
    man = (
        load_manifest(out / "manifest.json")
        if (out / "manifest.json").exists()
        else BuildManifest()
    )
    out.mkdir(parents=True, exist_ok=True)
    return BuildContext(
        tree=detect_tree(FIXTURE),
        request=BuildRequest(),
        toolchain=tc,
        target=TargetCpu("x86_64", None, None, "test"),
        layout=Layout(out),
        manifest=man,
        phases={},
        resume=resume,
    )


def test_resume_and_input_chain(tmp_path: Path) -> None:
    calls: list[str] = []
    run_stages(
        context(tmp_path, False),
        [Step("a", "1", calls), Step("b", "1", calls), Skipper("c", "1", calls)],
    )
    assert calls == ["a", "b"]
    man = load_manifest(tmp_path / "manifest.json")
    assert [(s.name, s.status) for s in man.stages] == [
        ("a", "done"),
        ("b", "done"),
        ("c", "skipped"),
    ]
    assert man.stages[2].reason == "tool not installed"
    assert "running a" in (tmp_path / "logs" / "a.log").read_text()
    # same inputs: everything resumed
    calls.clear()
    run_stages(context(tmp_path, True), [Step("a", "1", calls), Step("b", "1", calls)])
    assert calls == []
    assert all(s.resumed for s in load_manifest(tmp_path / "manifest.json").stages[:2])
    # a changed input re-runs that stage and every stage after it
    calls.clear()
    run_stages(context(tmp_path, True), [Step("a", "2", calls), Step("b", "1", calls)])
    assert calls == ["a", "b"]


def test_failure_is_recorded(tmp_path: Path) -> None:
    calls: list[str] = []
    with pytest.raises(BuildFailed, match="b broke"):
        run_stages(
            context(tmp_path, False),
            [Step("a", "1", calls), Step("b", "1", calls, fail=True), Step("c", "1", calls)],
        )
    assert calls == ["a", "b"]
    man = load_manifest(tmp_path / "manifest.json")
    assert man.status == "failed" and man.error == "b: b broke"
    assert [(s.name, s.status) for s in man.stages] == [("a", "done"), ("b", "failed")]
    assert "# FAILED: b broke" in (tmp_path / "logs" / "b.log").read_text()
    # resume retries the failed stage only
    calls.clear()
    run_stages(
        context(tmp_path, True),
        [Step("a", "1", calls), Step("b", "1", calls), Step("c", "1", calls)],
    )
    assert calls == ["b", "c"]
