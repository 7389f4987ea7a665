"""`accelerate` on a sandbox decides create-or-load once and loads the sandbox once: the
A/B and the rest of the command get that one ``Sandbox`` (no server here: the probe, the
plan and the A/B are stand-ins)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from myaccel.accelerate import sandbox_mode
from myaccel.accelerate.request import AccelerateRequest, SandboxTarget
from myaccel.bench import ab
from myaccel.bench.adaptive import AdaptiveOptions
from myaccel.bench.profiles import Profile
from myaccel.server.sandbox import Sandbox


class Notes:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def note(self, msg: str) -> None:
        self.lines.append(msg)

    def step(self, msg: str) -> None:
        self.lines.append(f"== {msg}")

    def ab_done(self, result: Any) -> None:
        pass


@pytest.mark.parametrize("exists", [True, False])
def test_the_sandbox_is_made_or_loaded_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, exists: bool
) -> None:
    sb = SimpleNamespace(
        name="s1", connect_params=lambda: None, state=None, is_running=lambda: False
    )
    opened: list[str] = []

    def load(name: str, **kw: Any) -> Any:
        opened.append(f"load {name}")
        return sb

    def init(name: str, **kw: Any) -> Any:
        opened.append(f"init {name}")
        return sb

    monkeypatch.setattr(Sandbox, "exists", classmethod(lambda cls, name, **kw: exists))
    monkeypatch.setattr(Sandbox, "load", load)
    monkeypatch.setattr(Sandbox, "init", init)
    monkeypatch.setattr(ab, "restore_base_config", lambda s, note: None)
    monkeypatch.setattr(sandbox_mode, "probe_and_plan", lambda req, p, note: (None, None, tmp_path))
    rec = SimpleNamespace(id="r", target="mysql:x", current="1", proposed="2")
    (tmp_path / "tuned.cnf").write_text("[mysqld]\nx = 2\n")
    cand = SimpleNamespace(applied=[rec], not_applied=[], path=tmp_path / "tuned.cnf")
    monkeypatch.setattr(sandbox_mode, "write_candidate", lambda plan, facts, path: cand)
    given: list[Any] = []
    adaptive: list[Any] = []

    def run(abreq: ab.AbRequest, progress: Any, sandbox: Any = None) -> Any:
        given.append(sandbox)
        adaptive.append(abreq.adaptive)
        return SimpleNamespace(comparison=None, records=[], out_dir=tmp_path, more={})

    monkeypatch.setattr(ab, "run", run)
    monkeypatch.setattr(ab, "require_valid_arms", lambda records, out: None)
    req = AccelerateRequest(
        target=SandboxTarget(name="s1", explicit=False, create=False),
        profile=Profile(
            name="t",
            description="t",
            source="t",
            workloads=("oltp_read_only",),
            threads=(2,),
            tables=1,
            table_size=1000,
            duration_s=1,
            warmup_s=0,
        ),
        command=["myaccel", "accelerate"],
        adaptive=AdaptiveOptions(target_pct=7.0) if exists else None,
    )
    sandbox_mode.run_on_sandbox(req, req.target, Notes())  # type: ignore[arg-type]
    assert opened == (["load s1"] if exists else ["init s1"])
    assert given == [sb]  # the A/B got that sandbox, it did not load it again
    # accelerate --target: the A/B is the adaptive one
    assert adaptive == ([AdaptiveOptions(target_pct=7.0)] if exists else [None])
