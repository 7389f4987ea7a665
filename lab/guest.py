"""A booted guest: a daemonized qemu on a qcow2 overlay of the cached image (the cache is
never written), reached by ssh on a free 127.0.0.1 port; stopped by poweroff (then the
pid), crashed with sysrq, and booted again from the same overlay."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.image import Image
from lab.netns import delete_namespace, namespace_for, open_tap_queues
from lab.timing import Timings
from lab.topology import Topology, qemu_argv

# Measured: about 4 minutes to ssh on a busy 2-CPU host under TCG; twice that is a hang.
BOOT_TIMEOUT = float(os.environ.get("MYACCEL_LAB_BOOT_TIMEOUT", "600"))
POWEROFF_GRACE = 120.0


@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check(self, what: str) -> Result:
        if self.returncode != 0:
            last = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:]
            raise LabError(
                f"lab: {what} failed in the guest (exit {self.returncode}): {' '.join(last)}"
            )
        return self


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Guest:
    """One guest; `workdir` holds its overlay, extra disks, console log and pidfile."""

    image: Image
    topology: Topology
    workdir: Path
    timings: Timings
    port: int = 0
    # a qcow2 layer over the image to start from (lab/layers.py), else the image itself
    backing: Path | None = None
    pid: int | None = field(default=None, init=False)
    boots: int = field(default=0, init=False)

    def console_log(self, boot: int) -> Path:
        """The serial console of one boot (qemu truncates its file: one file per boot)."""
        return self.workdir / f"console-{boot}.log"

    @property
    def console(self) -> Path:
        return self.console_log(self.boots)

    @property
    def pidfile(self) -> Path:
        return self.workdir / "qemu.pid"

    def _disks(self) -> list[Path]:
        root = self.workdir / "vda.qcow2"
        disks = [root]
        if not root.exists():
            _host(
                [
                    "qemu-img",
                    "create",
                    "-q",
                    "-f",
                    "qcow2",
                    "-b",
                    str(self.backing or self.image.raw),
                    "-F",
                    "qcow2" if self.backing else "raw",
                    str(root),
                ],
                "qemu-img create (overlay)",
            )
        for i, gib in enumerate(self.topology.extra_disks_gib):
            disk = self.workdir / f"vd{chr(ord('b') + i)}.qcow2"
            if not disk.exists():
                _host(
                    ["qemu-img", "create", "-q", "-f", "qcow2", str(disk), f"{gib}G"],
                    "qemu-img create (disk)",
                )
            disks.append(disk)
        return disks

    def boot(self, timeout: float = BOOT_TIMEOUT) -> None:
        """Start qemu (same overlay on a second boot) and wait until ssh answers."""
        if self.running():
            raise LabError(f"lab: the guest is already running (pid {self.pid})")
        self.workdir.mkdir(parents=True, exist_ok=True)
        disks = self._disks()
        self.boots += 1
        with self.timings.step(f"boot {self.boots} to ssh"):
            self._start(disks)
            self.wait_for_ssh(timeout)

    @property
    def namespace(self) -> str:
        """The network namespace of the multiqueue NIC's tap (when the topology has one)."""
        return namespace_for(self.workdir)

    def _start(self, disks: list[Path]) -> None:
        self.pidfile.unlink(missing_ok=True)
        self.port = free_port()
        taps = (
            open_tap_queues(self.namespace, self.topology.nic_queues)
            if self.topology.nic_queues
            else []
        )
        try:
            argv = qemu_argv(
                self.topology,
                kernel=self.image.kernel,
                initrd=self.image.initrd,
                disks=disks,
                ssh_port=self.port,
                console=self.console,
                pidfile=self.pidfile,
                arch=self.image.arch,
                tap_fds=tuple(taps),
            )
            (self.workdir / "qemu.argv").write_text(shlex.join(argv) + "\n")
            _host(argv, self.image.arch.qemu_system, pass_fds=tuple(taps))
        finally:
            for fd in taps:  # qemu holds its own copies
                os.close(fd)
        self.pid = int(self.pidfile.read_text().strip())

    def running(self) -> bool:
        if self.pid is None:
            return False
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        return b"qemu-system" in cmdline  # empty for a zombie, another name for a reused pid

    def wait_for_ssh(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise LabError(f"lab: qemu exited during boot: {self._console_tail()}")
            if self.ssh("true", timeout=30, connect_timeout=10).returncode == 0:
                return
            time.sleep(5)
        raise LabError(
            f"lab: no ssh after {timeout:.0f} s on port {self.port}: {self._console_tail()}"
        )

    def _console_tail(self) -> str:
        try:
            lines = self.console.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no console log"
        return f"console ({self.console}) ends: {lines[-1] if lines else '(empty)'}"

    def _ssh_options(self, connect_timeout: int) -> list[str]:
        return [
            "-i", str(self.image.key),
            "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR",
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={connect_timeout}",
            "-o", "ServerAliveInterval=15",
        ]  # fmt: skip

    def ssh_argv(self, command: str, connect_timeout: int = 30) -> list[str]:
        """ssh as root on the forwarded port; an empty command is a login shell."""
        argv = ["ssh", *self._ssh_options(connect_timeout), "-p", str(self.port), "root@127.0.0.1"]
        return [*argv, command] if command else argv

    def ssh(self, command: str, timeout: float = 600, connect_timeout: int = 30) -> Result:
        """Run a shell command in the guest as root; a timeout is exit 124."""
        argv = self.ssh_argv(command, connect_timeout)
        try:
            r = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out = (
                e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
            )
            return Result(argv, 124, out, f"timed out after {timeout:.0f} s")
        return Result(argv, r.returncode, r.stdout, r.stderr)

    def run(self, command: str, timeout: float = 600) -> str:
        """The command's stdout; a LabError on a non-zero exit."""
        return self.ssh(command, timeout=timeout).check(command).stdout

    def copy_in(self, sources: list[Path], destination: str, timeout: float = 900) -> None:
        argv = ["scp", "-q", "-r", *self._ssh_options(30), "-P", str(self.port)]
        argv += [str(s) for s in sources] + [f"root@127.0.0.1:{destination}"]
        r = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise LabError(
                f"lab: scp to {destination} failed (exit {r.returncode}): {r.stderr.strip()}"
            )

    def wait_exit(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not self.running():
                return True
            time.sleep(1)
        return not self.running()

    def kill(self) -> None:
        """SIGTERM (qemu closes its disks), then SIGKILL."""
        if self.pid is None or not self.running():
            self.pid = None
            return
        for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
            os.kill(self.pid, sig)
            if self.wait_exit(wait):
                break
        self.pid = None

    def stop(self, grace: float = POWEROFF_GRACE) -> None:
        """Power off from inside; kill qemu when it has not exited after `grace` seconds.
        The NIC's namespace goes too (a later boot makes it again)."""
        if not self.running():
            self.pid = None
            delete_namespace(self.namespace)
            return
        with self.timings.step("poweroff"):
            self.ssh("systemctl poweroff", timeout=30)
            if not self.wait_exit(grace):
                self.timings.say(f"lab: no poweroff after {grace:.0f} s, killing qemu {self.pid}")
            self.kill()
        delete_namespace(self.namespace)

    def crash(self, grace: float = 60) -> None:
        """Panic the guest kernel without a sync (sysrq c); qemu exits (panic=1, -no-reboot)."""
        self.ssh(
            "nohup sh -c 'sleep 1; echo c > /proc/sysrq-trigger' >/dev/null 2>&1 &", timeout=30
        ).check("sysrq crash")
        if not self.wait_exit(grace):
            raise LabError(f"lab: the guest did not go down within {grace:.0f} s of sysrq c")
        self.pid = None


def _host(argv: list[str], what: str, pass_fds: tuple[int, ...] = ()) -> None:
    r = subprocess.run(argv, check=False, capture_output=True, text=True, pass_fds=pass_fds)
    if r.returncode != 0:
        raise LabError(
            f"lab: {what} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()}"
        )
