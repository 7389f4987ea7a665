"""`ab` arms with different redo log sizes each run on a dense log of their own size: the
per-arm dataset snapshots, against a real MariaDB sandbox."""

from __future__ import annotations

import pytest

from myaccel.bench import ab
from myaccel.server.sandbox import Sandbox
from myaccel.server.sandbox.redo_files import unwritten_bytes

pytestmark = pytest.mark.integration

MIB = 1 << 20


def test_arm_snapshots_hold_a_dense_log_of_the_arms_size(sandbox_env: Sandbox) -> None:
    sb = sandbox_env
    if sb.state.flavor != "mariadb":
        pytest.skip("innodb_log_file_size sizes the redo log of MariaDB")
    sizes = {"baseline": 48, "candidate": 80}
    arms = {
        name: ab.make_arm(name, None, [f"innodb_log_file_size={mib}M"], None)
        for name, mib in sizes.items()
    }
    notes: list[str] = []
    sb.stop()
    snaps: dict[str, str] = {}
    try:
        if any(s.name == ab.SNAPSHOT for s in sb.snapshot_list()):
            sb.snapshot_delete(ab.SNAPSHOT)
        sb.snapshot_save(ab.SNAPSHOT)
        snaps = ab.arm_snapshots(sb, arms, notes.append)
        assert len(notes) == 2 and all("MiB written to make the log dense" in n for n in notes)
        for name, mib in sizes.items():
            sb.snapshot_restore(snaps[name])
            log = sb.datadir / "ib_logfile0"
            assert log.stat().st_size == mib * MIB
            assert unwritten_bytes(log) == 0, f"{name}: the restored log has holes"
            seen = sb.error_log.stat().st_size
            sb.start(arms[name].options())
            sb.stop()
            with sb.error_log.open("rb") as f:
                f.seek(seen)
                assert b"Resizing redo log" not in f.read(), f"{name}: resized at start"
    finally:
        for snap in [*snaps.values(), ab.SNAPSHOT]:
            if any(s.name == snap for s in sb.snapshot_list()):
                sb.snapshot_delete(snap)
        sb.start()
