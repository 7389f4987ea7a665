"""The common stage runner: logs, manifest records, resume by input digest, failures."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import pytest
from fake_runner import Recording, ReplayRunner

from myaccel.builder.errors import BuildFailed
from myaccel.builder.flags import BuildRequest, TargetCpu, Toolchain
from myaccel.builder.manifest import BuildManifest, load_manifest
from myaccel.builder.runner import BuildContext, Layout, Stage, run_stages, run_streamed
from myaccel.builder.tree import detect_tree
from myaccel.env import Environment, using

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


NINJA_FAILURE = """[1/3] Building CXX object CMakeFiles/srv.dir/a.cc.o
[2/3] Building CXX object CMakeFiles/srv.dir/b.cc.o
FAILED: CMakeFiles/srv.dir/b.cc.o
b.cc:3:1: error: 'nope' was not declared in this scope
b.cc:4:1: warning: unused variable 'x'
ninja: build stopped: subcommand failed.
"""


def test_run_streamed_logs_each_line_and_hands_it_on(tmp_path: Path) -> None:
    fake = ReplayRunner().on(["ninja"], Recording("[1/2] a\n[2/2] b   \n"))
    seen: list[str] = []
    with using(Environment(runner=fake)), (tmp_path / "log").open("w") as log:
        rc = run_streamed(
            ["ninja", "-C", "build"],
            log,
            cwd=tmp_path,
            env={"CCACHE_DISABLE": "1"},
            what="compile",
            timeout_s=60,
            on_line=seen.append,
        )
    assert rc == 0 and seen == ["[1/2] a", "[2/2] b"]
    assert (tmp_path / "log").read_text() == "$ ninja -C build\n[1/2] a\n[2/2] b   \n# exit 0\n"
    (call,) = fake.calls
    assert call.kind == "stream" and call.cwd == tmp_path and call.env == {"CCACHE_DISABLE": "1"}


def test_run_streamed_failure_names_the_first_error(tmp_path: Path) -> None:
    fake = ReplayRunner().on(["ninja"], Recording(NINJA_FAILURE, returncode=1))
    with using(Environment(runner=fake)), (tmp_path / "log").open("w") as log:
        with pytest.raises(BuildFailed) as exc:
            run_streamed(["ninja"], log, cwd=None, env=None, what="compile", timeout_s=60)
        assert (
            run_streamed(["ninja"], log, cwd=None, env=None, what="x", timeout_s=60, check=False)
            == 1
        )
    assert exc.value.message == "compile failed (exit 1): FAILED: CMakeFiles/srv.dir/b.cc.o"
    assert "error: 'nope' was not declared" in exc.value.hint and "warning" not in exc.value.hint


def test_run_streamed_timeout_and_missing_tool(tmp_path: Path) -> None:
    fake = ReplayRunner().on(["make"], Recording("[ 10%] x\n", returncode=-9, timed_out=True))
    with using(Environment(runner=fake)), (tmp_path / "log").open("w") as log:
        with pytest.raises(BuildFailed, match="make did not finish within 5 s"):
            run_streamed(["make"], log, cwd=None, env=None, what="make", timeout_s=5)
        with pytest.raises(BuildFailed, match="cmake: cannot execute 'cmake'"):
            run_streamed(["cmake", "."], log, cwd=None, env=None, what="cmake", timeout_s=5)
