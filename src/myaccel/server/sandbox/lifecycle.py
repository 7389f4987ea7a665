"""Starting, stopping and restarting a sandbox's server.

A start composes the option file (base settings, the user's ``--config`` and ``--set``, the
sandbox-owned keys last), spawns the server through the subprocess gateway and waits until
it answers; a stop sends the flavor's shutdown signal and kills only after the timeout.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from myaccel.errors import ConnectionFailed, SandboxError, UsageError
from myaccel.owner import ProcessOwner
from myaccel.proc import Child
from myaccel.server.connection import ConnectParams, connect
from myaccel.server.sandbox import process
from myaccel.server.sandbox.core import (
    DEFAULT_TIMEOUT_S,
    WRAPPED_TIMEOUT_S,
    Progress,
    SandboxCore,
    noop,
)
from myaccel.server.sandbox.datadir import (
    check_compatible,
    detect_datadir,
    recover_interrupted_restore,
)
from myaccel.server.sandbox.install import ServerInstall, find_server, server_argv
from myaccel.server.sandbox.layout import port_in_use
from myaccel.server.sandbox.options import check_sets, parse_sets
from myaccel.server.sandbox.state import (
    ADMIN_USER,
    NO_OPTIONS,
    ActiveConfig,
    ServerOptions,
    StartResult,
    StopResult,
    now_iso,
)


class SandboxLifecycle(SandboxCore):
    """Start, stop and restart (``Sandbox`` adds init, destroy and snapshots)."""

    def _install_for(self, basedir: str | None) -> ServerInstall:
        if basedir is not None:
            return find_server(Path(basedir))
        if self.state.custom_basedir:
            return find_server(Path(self.state.basedir))
        install = find_server(binary=Path(self.state.binary))
        if self.state.install_db:
            install = ServerInstall(
                binary=install.binary,
                basedir=Path(self.state.basedir),
                version=install.version,
                install_db=Path(self.state.install_db),
            )
        return install

    def _compatible_install(self, basedir: str | None, *, newer: bool = False) -> ServerInstall:
        """The install to run (``_install_for``), checked against the sandbox's datadir
        (``newer``: a later release line of the flavor may upgrade it, ``ServerOptions``)."""
        install = self._install_for(basedir)
        check_compatible(
            self.name,
            self.state.flavor,
            self.state.version,
            install,
            detect_datadir(self.datadir),
            newer=newer and basedir is not None,
        )
        return install

    def start(
        self,
        options: ServerOptions = NO_OPTIONS,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        progress: Progress | None = None,
        wrapper: Sequence[str] = (),
        owner: ProcessOwner | None = None,
    ) -> StartResult:
        """Start the server with the base config plus ``options`` (none: the base config).

        ``owner``: the process starting it on this configuration only while it measures
        (an A/B arm); recorded in the state, so that when that process is killed the next
        myaccel command puts the sandbox back on its base configuration.

        ``wrapper`` is an argv prefix the server runs under, e.g. ``["valgrind",
        "--tool=callgrind"]`` (myaccel.profile.simulate); the wait for readiness is then at
        least ``WRAPPED_TIMEOUT_S``. ``restart`` and snapshot resumes start without it.

        Idempotent: a running server is left alone (``already_running``) unless another
        configuration or a wrapper is asked for, which is an error (use ``restart``, or
        ``stop`` first)."""
        cfg, set_map, bdir = self._validate_request(options)
        with self._locked():
            state, pid = self._probe()
            if state == "running" and pid is not None:
                ac = self.state.active_config
                if wrapper and list(wrapper) != ac.wrapper:
                    raise SandboxError(
                        f"sandbox '{self.name}' is already running (pid {pid}); cannot start "
                        f"it under {Path(wrapper[0]).name}",
                        hint=f"stop it first (`myaccel sandbox stop {self.name}`)",
                    )
                wanted = (cfg, set_map, bdir)
                if options.given and wanted != (
                    ac.config_file,
                    ac.sets,
                    ac.basedir,
                ):
                    raise SandboxError(
                        f"sandbox '{self.name}' is already running with config: {ac.describe()}",
                        hint=f"use `myaccel sandbox restart {self.name}` with the new options",
                    )
                return StartResult(
                    already_running=True,
                    pid=pid,
                    port=self.port,
                    socket=str(self.socket),
                    duration_s=0.0,
                    message=f"sandbox '{self.name}' is already running (pid {pid}, "
                    f"config: {ac.describe()})",
                )
            return self._start_unlocked(
                config=cfg,
                sets=set_map,
                basedir=bdir,
                timeout_s=timeout_s,
                say=progress or noop,
                wrapper=wrapper,
                owner=owner,
                newer=options.newer,
            )

    def _validate_request(
        self, options: ServerOptions
    ) -> tuple[str | None, dict[str, str], str | None]:
        config, basedir = options.config, options.basedir
        cfg: str | None = None
        if config is not None:
            p = Path(config).expanduser().resolve()
            if not p.exists():
                raise UsageError(
                    f"config file '{config}' does not exist",
                    hint="pass an existing option file (my.cnf) with a [mysqld] section",
                )
            if not p.is_file() or not os.access(p, os.R_OK):
                raise UsageError(
                    f"config file '{config}' is not a readable file",
                    hint="pass a readable option file (my.cnf) with a [mysqld] section",
                )
            cfg = str(p)
        set_map = dict(options.sets or {})
        for k, v in set_map.items():
            parse_sets([f"{k}={v}"])
        check_sets(set_map, self.dir)
        bdir = str(Path(basedir).expanduser().resolve()) if basedir is not None else None
        return cfg, set_map, bdir

    def _start_unlocked(
        self,
        *,
        config: str | None = None,
        sets: Mapping[str, str] | None = None,
        basedir: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        say: Progress = noop,
        install: ServerInstall | None = None,
        wrapper: Sequence[str] = (),
        owner: ProcessOwner | None = None,
        newer: bool = False,
    ) -> StartResult:
        t0 = time.monotonic()
        if wrapper:
            timeout_s = max(timeout_s, WRAPPED_TIMEOUT_S)
        recover_interrupted_restore(self.dir, self.datadir)
        if not self.datadir.is_dir():
            raise SandboxError(
                f"the datadir of sandbox '{self.name}' is missing: {self.datadir}",
                hint=f"restore a snapshot (`myaccel sandbox snapshot list {self.name}`) or "
                f"`myaccel sandbox destroy {self.name}` and init it again",
            )
        if install is None:
            install = self._compatible_install(basedir, newer=newer)
        composed = self._compose(install, Path(config) if config else None, sets)
        state, old_pid = self._probe()
        cleaned: list[str] = []
        if state == "crashed":
            cleaned = self._clean_stale()
            say(f"cleaned up after a crashed server (pid {old_pid}): {', '.join(cleaned)}")
        if port_in_use(self.port):
            raise SandboxError(
                f"port {self.port} on 127.0.0.1 is in use by another program",
                hint=f"find it with `ss -ltnp 'sport = :{self.port}'` and stop it, or "
                f"`myaccel sandbox destroy {self.name}` and init again with another --port",
            )
        if self.socket.exists():
            raise SandboxError(
                f"socket {self.socket} exists but no server of sandbox '{self.name}' runs",
                hint="another server may use it; stop that server or remove the file",
            )
        previous_text = self.option_file.read_text() if self.option_file.exists() else None
        self.option_file.write_text(composed.text)
        log_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
        argv = [*self.state.launch_prefix, *wrapper, *server_argv(install, self.option_file)]
        with open(self.error_log, "a") as fh:
            fh.write(f"--- {now_iso()} myaccel: {' '.join(argv)}\n")
        say(f"starting {install.label} on port {self.port}")
        child = process.spawn_server(argv, self.error_log, self.dir)
        try:
            self._wait_ready(child, timeout_s, log_offset)
        except BaseException:
            if previous_text is not None:
                self.option_file.write_text(previous_text)
            raise
        pid = process.read_pid(self.pid_file) or child.pid
        self.state.active_config = ActiveConfig(
            config_file=config,
            sets=dict(sets or {}),
            basedir=basedir,
            binary=str(install.binary) if basedir is not None else None,
            version=install.version.raw,
            overridden=[o.key for o in composed.overridden],
            started_at=now_iso(),
            wrapper=list(wrapper),
            owner=owner,
        )
        self._save_state()
        duration = time.monotonic() - t0
        return StartResult(
            already_running=False,
            pid=pid,
            port=self.port,
            socket=str(self.socket),
            duration_s=duration,
            overridden=composed.overridden,
            cleaned=tuple(cleaned),
            message=f"started sandbox '{self.name}' (pid {pid}, port {self.port}) "
            f"in {duration:.1f} s",
            config_has_server_options=config is None
            or bool(composed.user_keys)
            or bool(composed.overridden),
        )

    def _wait_ready(self, child: Child, timeout_s: float, log_offset: int) -> None:
        params = ConnectParams(
            host=None,
            port=self.port,
            socket=str(self.socket),
            user=ADMIN_USER,
            password=None,
            connect_timeout_s=2.0,
        )
        deadline = time.monotonic() + timeout_s
        delay = 0.05
        while True:
            code = child.poll()
            if code is not None:
                process.forget_child(child.pid)
                raise self._start_failure(f"the server exited with code {code}", log_offset)
            if self.socket.exists():
                try:
                    conn = connect(params)
                except ConnectionFailed:
                    pass
                else:
                    conn.close()
                    return
            if time.monotonic() > deadline:
                self._terminate(child.pid, grace_s=10.0)
                raise self._start_failure(
                    f"the server was not ready after {timeout_s:.0f} s (stopped it)",
                    log_offset,
                    extra_hint="if it needs longer (crash recovery, a huge buffer pool), "
                    "raise --timeout",
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _start_failure(self, what: str, log_offset: int, extra_hint: str = "") -> SandboxError:
        tail = process.tail(self.error_log, since=log_offset)
        # the first error is the cause; the last one is usually just "Aborting"
        errors = [ln for ln in tail if "[ERROR]" in ln] or [ln for ln in tail if "ERROR" in ln]
        err = errors[0] if errors else ""
        err = re.sub(r"^\S+\s+\S+\s+\d+\s+", "", err.strip())  # drop the timestamp prefix
        msg = f"sandbox '{self.name}' failed to start: {what}"
        if err:
            msg += f": {err[:200]}"
        hint = f"last lines of {self.error_log}:\n  " + "\n  ".join(tail or ["(empty)"])
        hint += "\nfix the option named there (--config/--set), or run `myaccel sandbox start "
        hint += f"{self.name}` without them to get the base config back"
        if extra_hint:
            hint += f"; {extra_hint}"
        return SandboxError(msg, hint=hint, context={"error_log": str(self.error_log)})

    # -------------------------------------------------------------- stop

    def _terminate(self, pid: int, grace_s: float) -> bool:
        """The flavor's shutdown signal (a clean shutdown), then SIGKILL. True if killed."""
        return process.terminate(pid, grace_s, self.adapter.shutdown_signal)

    def stop(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """Shut the server down cleanly; kill -9 only after ``timeout_s``. The message
        says what happened (including a kill)."""
        with self._locked():
            return self._stop_unlocked(timeout_s).message

    def stop_result(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> StopResult:
        with self._locked():
            return self._stop_unlocked(timeout_s)

    def _stop_unlocked(self, timeout_s: float) -> StopResult:
        state, pid = self._probe()
        if state == "crashed":
            stale = ", ".join(Path(r).name for r in self._clean_stale())
            who = f"the server (pid {pid})" if pid is not None else "the server"
            return StopResult(
                False,
                False,
                f"sandbox '{self.name}' was not running: {who} had crashed; removed stale "
                f"{stale or 'files'}",
            )
        if state == "stopped" or pid is None:
            return StopResult(False, False, f"sandbox '{self.name}' is not running")
        t0 = time.monotonic()
        killed = self._terminate(pid, grace_s=timeout_s)
        removed = self._clean_stale() if killed else []
        if killed:
            msg = (
                f"sandbox '{self.name}' did not shut down within {timeout_s:.0f} s; killed pid "
                f"{pid} with SIGKILL (kill -9). InnoDB will run crash recovery at the next start"
            )
            if removed:
                msg += f"; removed stale {', '.join(Path(r).name for r in removed)}"
        else:
            msg = f"stopped sandbox '{self.name}' (pid {pid}) in {time.monotonic() - t0:.1f} s"
        return StopResult(True, killed, msg)

    def restart(
        self,
        options: ServerOptions = NO_OPTIONS,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        reset: bool = False,
        progress: Progress | None = None,
    ) -> StartResult:
        """Stop and start. Keeps the active config, basedir and --set values unless new ones
        are given (each given one replaces its part); ``reset`` returns to the base config."""
        say = progress or noop
        cfg, set_map, bdir = self._validate_request(options)
        with self._locked():
            ac = self.state.active_config
            if not reset:
                cfg = cfg if options.config is not None else ac.config_file
                set_map = set_map if options.sets else dict(ac.sets)
                bdir = bdir if options.basedir is not None else ac.basedir
            if cfg is not None and not Path(cfg).is_file():
                raise UsageError(
                    f"the active config file '{cfg}' no longer exists",
                    hint="pass --config FILE, or restart with --base-config to drop it",
                )
            # Check the new server before stopping the running one.
            install = self._compatible_install(bdir)
            stopped = self._stop_unlocked(timeout_s)
            say(stopped.message)
            return self._start_unlocked(
                config=cfg,
                sets=set_map,
                basedir=bdir,
                timeout_s=timeout_s,
                say=say,
                install=install,
            )
