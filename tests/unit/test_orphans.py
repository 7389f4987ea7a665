"""Changes owned by a process that was killed (a capture's general log) are undone by the
next myaccel command (myaccel.actions.orphans, myaccel.cli.repair)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from myaccel.actions import Journal, apply_changes
from myaccel.actions.journal import JournalOwner, journals_dir
from myaccel.actions.orphans import find_orphans
from myaccel.actions.settings import setting_for
from myaccel.cli.main import cli
from myaccel.cli.repair import repair_orphans, warn_unrepaired


def _dead_owner() -> JournalOwner:
    """The owner record of a process that has ended (its pid is free or reused)."""
    p = subprocess.Popen(["sleep", "30"])
    owner = JournalOwner.this_process("capture").model_copy(update={"pid": p.pid})
    from myaccel.proclife import process_start_ticks

    owner = owner.model_copy(update={"started": process_start_ticks(p.pid) or ""})
    p.kill()
    p.wait()
    return owner


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MYACCEL_HOME", str(tmp_path / "home"))
    return tmp_path


def _switch_on(target: Path, owner: JournalOwner | None) -> Path:
    target.write_text("off\n")
    res = apply_changes(
        [(setting_for(f"file:{target}"), "on\n")], journals_dir(), keep_open=True, owner=owner
    )
    assert res.journal_path is not None and target.read_text() == "on\n"
    return Path(res.journal_path)


def test_only_open_journals_of_a_gone_owner_are_orphans(home: Path) -> None:
    dead = _switch_on(home / "a.conf", _dead_owner())
    assert [j.path for j in find_orphans(journals_dir())] == [dead]
    Journal.load(dead)  # still checksummed and loadable with its owner record


def test_a_live_owner_or_no_owner_is_left_alone(home: Path) -> None:
    _switch_on(home / "a.conf", JournalOwner.this_process("capture"))
    assert find_orphans(journals_dir()) == []
    for p in Journal.list_paths(journals_dir()):
        p.unlink()
    _switch_on(home / "b.conf", None)  # an apply's open journal: rollback's business
    assert find_orphans(journals_dir()) == []


def test_the_next_command_undoes_what_a_killed_command_left(home: Path) -> None:
    target = home / "general.conf"
    journal = _switch_on(target, _dead_owner())
    result = CliRunner().invoke(cli, ["sandbox", "list"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "was killed and left" in result.stderr and "switched back" in result.stderr
    assert target.read_text() == "off\n"
    assert Journal.load(journal).status == "rolled-back"
    # and only once
    again = CliRunner().invoke(cli, ["sandbox", "list"], catch_exceptions=False)
    assert "was killed" not in again.stderr


def test_a_repair_that_fails_is_one_warning_and_the_command_still_runs(home: Path) -> None:
    target = home / "general.conf"
    journal = _switch_on(target, _dead_owner())
    target.unlink()
    target.mkdir()  # the file cannot be put back now
    (target / "x").write_text("")
    result = CliRunner().invoke(cli, ["sandbox", "list"], catch_exceptions=False)
    assert result.exit_code == 0 and "was killed" not in result.stderr
    said: list[str] = []
    repair_orphans(said.append)  # the start of a command
    warn_unrepaired()  # its end (main() does this)
    (line,) = said
    assert line.startswith("warning: ") and f"myaccel rollback --journal {journal}" in line
    assert Journal.peek_status(journal) != "rolled-back"


def test_the_marker_name_is_the_clones_own() -> None:
    from myaccel.cli.repair import CLONE_MARKER
    from myaccel.clone.incomplete import MARKER

    assert CLONE_MARKER == MARKER


def test_a_finished_journal_is_judged_by_its_head_alone(home: Path) -> None:
    """Every command asks whether a killed one left something: a journal whose head says
    applied or rolled back is not parsed further (its entries hold whole old files)."""
    from myaccel.cli.repair import anything_left

    dead = _switch_on(home / "a.conf", _dead_owner())
    assert anything_left()  # open, its owner gone
    Journal.load(dead).set_status("applied")
    text = dead.read_bytes()
    head = text.index(b'"entries"')
    assert b'"status": "applied"' in text[:head]
    dead.write_bytes(text[:head] + b"not json at all" * 1000)  # the head is all it reads
    assert not anything_left()
    dead.write_bytes(text.replace(b'"status": "applied"', b'"status": "open"'))
    assert anything_left()
