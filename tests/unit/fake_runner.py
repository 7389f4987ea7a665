"""A ``proc.Runner`` for tests that answers from recorded tool outputs.

``ReplayRunner`` never starts a process: each command is matched against the argv prefixes
it was given (``on``), longest first, the program compared by its base name, and answered
with a ``Recording`` (what the tool printed and its exit code; the recorded outputs live in
``tests/fixtures``). It remembers every call, so a test can check the argv, environment and
working directory the code under test asked for. Use it with ``myaccel.env.using``::

    fake = ReplayRunner().on(["sysbench"], Recording.sysbench("run_oltp_read_only_t4"))
    with using(Environment(runner=fake)):
        ...
    assert fake.argvs("stream")[0][0] == "/usr/bin/sysbench"

A command without a recording raises ``ToolMissing``, as a program that is not installed
does; ``which`` finds exactly the programs that have a recording (``missing`` hides some).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from myaccel import proc
from myaccel.errors import ToolMissing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass(frozen=True)
class Recording:
    """What a tool printed and how it ended."""

    stdout: str = ""
    stderr: str = ""
    returncode: int = 0
    timed_out: bool = False  # ``stream`` only: the gateway killed it at its timeout
    duration_s: float = 0.01

    @classmethod
    def sysbench(cls, name: str) -> Recording:
        """A recording of tests/fixtures/sysbench (``NAME.txt``: stdout and stderr merged)."""
        d = FIXTURES / "sysbench"
        return cls(
            stdout=(d / f"{name}.txt").read_text(),
            returncode=int((d / f"{name}.rc").read_text().strip()),
        )

    @classmethod
    def perfstat_stderr(cls, name: str, returncode: int) -> Recording:
        """A ``perf stat`` error recorded in tests/fixtures/perfstat (its README gives the
        exit code of each)."""
        return cls(stderr=(FIXTURES / "perfstat" / name).read_text(), returncode=returncode)


# An answer is a recording, or a function of the argv returning one (it may also do what
# the tool would have done to files, e.g. write the ``-o`` file of ``perf stat``).
Answer = Recording | Callable[[tuple[str, ...]], Recording]


@dataclass(frozen=True)
class Call:
    kind: str  # "run", "stream" or "spawn"
    argv: tuple[str, ...]
    env: Mapping[str, str | None] | None
    cwd: str | Path | None
    input_text: str | None = None
    pass_fds: tuple[int, ...] = ()
    die_with_parent: bool = False


class ReplayChild:
    """A spawned child that runs until it is signalled or waited for."""

    def __init__(self, argv: tuple[str, ...], rec: Recording, pid: int) -> None:
        self.argv = argv
        self.recording = rec
        self.signals: list[int] = []
        self.stop_calls: list[tuple[float, int]] = []
        self._pid = pid
        self._ended = False

    @property
    def pid(self) -> int:
        return self._pid

    def poll(self) -> int | None:
        return self.recording.returncode if self._ended else None

    def wait(self, timeout_s: float | None = None) -> int | None:
        if timeout_s is None:
            self._ended = True
        return self.poll()

    def send_signal(self, sig: int) -> None:
        if not self._ended:
            self.signals.append(sig)
            self._ended = True

    def stop(self, grace_s: float = 10.0, sig: int = signal.SIGTERM) -> int:
        self.stop_calls.append((grace_s, sig))
        self.send_signal(sig)
        return self.recording.returncode


class ReplayRunner:
    """Answers ``run``/``stream``/``spawn`` from recordings and records the calls."""

    def __init__(self, *, missing: Iterable[str] = ()) -> None:
        self.calls: list[Call] = []
        self.children: list[ReplayChild] = []
        self._answers: list[tuple[tuple[str, ...], Answer]] = []
        self._missing = set(missing)

    def on(self, prefix: Sequence[str], answer: Answer) -> ReplayRunner:
        """Answer commands starting with ``prefix`` (``prefix[0]`` a program name or path)."""
        self._answers.append((tuple(prefix), answer))
        return self

    def argvs(self, kind: str | None = None) -> list[tuple[str, ...]]:
        return [c.argv for c in self.calls if kind is None or c.kind == kind]

    # ------------------------------------------------------------ proc.Runner

    def which(self, name: str) -> str | None:
        if name in self._missing:
            return None
        if any(Path(p[0]).name == name for p, _ in self._answers):
            return f"/usr/bin/{name}"
        return None

    def run(self, req: proc.RunRequest) -> proc.Completed:
        args = tuple(req.argv)
        self.calls.append(
            Call("run", args, req.env, req.cwd, req.input_text, req.pass_fds, req.die_with_parent)
        )
        rec = self._answer(args)
        return proc.Completed(args, rec.returncode, rec.stdout, rec.stderr, rec.duration_s)

    def stream(self, req: proc.StreamRequest) -> proc.Streamed:
        args = tuple(req.argv)
        self.calls.append(
            Call("stream", args, req.env, req.cwd, None, req.pass_fds, req.die_with_parent)
        )
        rec = self._answer(args)
        for line in (rec.stdout + rec.stderr).splitlines():
            req.on_line(line)
        return proc.Streamed(args, rec.returncode, rec.timed_out, rec.duration_s)

    def spawn(self, req: proc.SpawnRequest) -> proc.Child:
        args = tuple(req.argv)
        self.calls.append(
            Call("spawn", args, req.env, req.cwd, None, req.pass_fds, req.die_with_parent)
        )
        rec = self._answer(args)
        text = rec.stdout + rec.stderr
        output = req.output
        if output is not None and text:
            if "b" in getattr(output, "mode", ""):
                output.write(text.encode())  # type: ignore[arg-type]
            else:
                output.write(text)  # type: ignore[arg-type]
        child = ReplayChild(args, rec, pid=40000 + len(self.children))
        self.children.append(child)
        return child

    # ------------------------------------------------------------ matching

    def _answer(self, argv: tuple[str, ...]) -> Recording:
        best: tuple[int, Answer] | None = None
        for prefix, answer in self._answers:
            if self._matches(prefix, argv) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), answer)
        if best is None or Path(argv[0]).name in self._missing:
            raise ToolMissing(
                f"cannot execute '{argv[0]}': not found (no recording)",
                hint=f"give the ReplayRunner a recording for {' '.join(argv[:3])} ...",
            )
        answer = best[1]
        return answer if isinstance(answer, Recording) else answer(argv)

    @staticmethod
    def _matches(prefix: tuple[str, ...], argv: tuple[str, ...]) -> bool:
        if len(argv) < len(prefix) or not prefix:
            return False
        head, want = argv[0], prefix[0]
        same_program = head == want if "/" in want else Path(head).name == want
        return same_program and argv[1 : len(prefix)] == prefix[1:]
