"""An A/B's arms: what each runs (option file, settings, server build, launch prefix, its
own copy of the data), the checks made before anything starts, and the durability an arm
trades for speed. Split from ``ab.py``, which runs the campaign."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from myaccel.actions.effective import durability_knobs
from myaccel.errors import UsageError
from myaccel.knobs.catalog import Catalog
from myaccel.server.option_spelling import option_file_words, option_word
from myaccel.server.sandbox import Sandbox, ServerOptions, parse_sets

SNAPSHOT = "myaccel-ab-dataset"


@dataclass(frozen=True)
class Arm:
    name: str  # "baseline" or "candidate"
    config: Path | None = None
    sets: dict[str, str] = field(default_factory=dict)
    basedir: Path | None = None
    launch: tuple[str, ...] = ()  # argv prefix the arm's server starts under (tune: taskset)
    # the snapshot holding the arm's own copy of the data (a ``DatasetMaker``'s: the dataset
    # upgraded for a newer version); None: the campaign's dataset (``SNAPSHOT``)
    dataset: str | None = None
    newer: bool = False  # basedir is a newer release line that upgraded ``dataset``

    def describe(self) -> dict[str, Any]:
        digest = None
        if self.config is not None:
            digest = hashlib.sha256(self.config.read_bytes()).hexdigest()[:16]
        trades = durability_trades(self)
        return {
            "config": str(self.config) if self.config else None,
            "config_sha256": digest,
            "sets": dict(self.sets),
            "basedir": str(self.basedir) if self.basedir else None,
            **({"launch": list(self.launch)} if self.launch else {}),
            **({"dataset": self.dataset} if self.dataset else {}),
            # the durability knobs this arm changes (what its figures trade for speed)
            **({"durability": trades} if trades else {}),
        }

    def options(self) -> ServerOptions:
        """What the sandbox starts with for this arm."""
        return ServerOptions(self.config, self.sets, self.basedir, newer=self.newer)

    @property
    def data(self) -> str:
        """The snapshot the arm's data comes from."""
        return self.dataset or SNAPSHOT

    def key(
        self,
    ) -> tuple[str | None, tuple[tuple[str, str], ...], str | None, tuple[str, ...], str]:
        return (
            str(self.config) if self.config else None,
            tuple(sorted(self.sets.items())),
            str(self.basedir) if self.basedir else None,
            self.launch,
            self.data,
        )


class DatasetMaker(Protocol):
    """An arm's own copy of the campaign's dataset, made once the dataset snapshot is
    saved (``accelerate.versions.UpgradedDataset``: the copy upgraded by a newer server)."""

    @property
    def snapshot(self) -> str:
        """The snapshot it saves (the arms that run on it name it as ``Arm.dataset``)."""
        ...

    def make(self, sb: Sandbox, base: str, note: Callable[[str], None]) -> None:
        """From snapshot ``base`` (the dataset), save ``snapshot``; the server is left
        stopped."""
        ...


def make_arm(name: str, config: str | None, sets: Sequence[str], basedir: str | None) -> Arm:
    """An arm from its options (``config`` None or "default": the sandbox's own), checked."""
    cfg = None if config in (None, "default") else Path(str(config))
    arm = Arm(
        name=name,
        config=cfg,
        sets=parse_sets(list(sets)),
        basedir=Path(basedir) if basedir else None,
    )
    check_arm(arm)
    return arm


def durability_trades(arm: Arm) -> list[str]:
    """The settings of ``arm`` (its ``--*-set`` items and its option file) that change a
    knob the catalog marks as durability-related, as given: ``innodb_flush_log_at_trx_
    commit=0``. Any spelling the server reads counts (``server/option_spelling.py``)."""
    cat = Catalog.load()
    names = {s.name for s in cat.specs}
    given = [(f"{k}={v}", option_word(k, v, names=names)) for k, v in arm.sets.items()]
    if arm.config is not None and arm.config.is_file():
        text = arm.config.read_text(errors="replace")
        given += [(w.spelt, w) for w in option_file_words(text, names=names)]
    return list(dict.fromkeys(shown for shown, w in given if durability_knobs(cat, w.name)))


def durability_warning(arm_name: str, trades: Sequence[str]) -> str | None:
    """One line saying that an arm trades crash safety for speed, or None."""
    if not trades:
        return None
    return (
        f"{arm_name} arm changes durability: {', '.join(trades)}: a crash can lose "
        "committed transactions, so its speed is not one a durable server gets"
    )


def check_arm(arm: Arm) -> None:
    if arm.config is not None and not arm.config.is_file():
        raise UsageError(
            f"{arm.name} config '{arm.config}' does not exist",
            hint="pass an option file (my.cnf style) or omit it for the sandbox's default",
        )
    if arm.basedir is not None and not arm.basedir.is_dir():
        raise UsageError(
            f"{arm.name} basedir '{arm.basedir}' is not a directory",
            hint="pass an install tree holding bin/ or sbin/ with mariadbd or mysqld",
        )
