import pytest

from myaccel.bench.ab import abba_order
from myaccel.bench.profiles import (
    PROFILES,
    ProfileOptions,
    build_profile,
    get_profile,
    normalize_workload,
)
from myaccel.bench.run_record import config_digest
from myaccel.bench.runner import RunSpec, mask_password, run_argv
from myaccel.errors import UsageError
from myaccel.server.connection import ConnectParams

SOCK = ConnectParams(host=None, port=3306, socket="/tmp/s.sock", user="sbtest", password="pw")


def spec(**kw: object) -> RunSpec:
    base: dict[str, object] = dict(
        workload="ro", threads=8, duration_s=10, warmup_s=3, tables=4, table_size=1000
    )
    base.update(kw)
    return RunSpec(**base)  # type: ignore[arg-type]


def test_run_argv_method() -> None:
    argv, env = run_argv(spec(seed=7), SOCK)
    assert env == {"MYACCEL_WORKLOAD": "oltp_read_only"}
    assert argv[-1] == "run" and argv[1].endswith("myaccel_wrapper.lua")
    for a in (
        "--rand-type=uniform",
        "--time=13",
        "--report-checkpoints=3",
        "--rand-seed=7",
        "--mysql-socket=/tmp/s.sock",
        "--threads=8",
    ):
        assert a in argv
    assert "--db-ps-mode=disable" not in argv
    assert not any("password" in a or a.split("=")[-1] == "pw" for a in argv)  # never on argv
    assert mask_password(argv) == argv
    argv2, _ = run_argv(spec(ps_mode="disable", warmup_s=0), SOCK)
    assert "--db-ps-mode=disable" in argv2 and not any(
        a.startswith("--report-checkpoints") for a in argv2
    )


def test_pinned_client_is_explicit() -> None:
    argv, _ = run_argv(spec(client_cpus="1"), SOCK)
    assert argv[0].endswith("taskset") and argv[1:3] == ["-c", "1"]
    assert not run_argv(spec(), SOCK)[0][0].endswith("taskset")


def test_abba() -> None:
    assert abba_order(3) == [
        "baseline",
        "candidate",
        "candidate",
        "baseline",
        "baseline",
        "candidate",
    ]


def test_profiles() -> None:
    q = get_profile("quick")
    assert q.rand_type == "uniform" and q.cells == [("oltp_read_only", 8), ("oltp_read_write", 8)]
    y = get_profile("yitian")
    assert (y.threads, y.tables, y.table_size, y.duration_s) == ((64,), 32, 25_000, 1200)
    p = get_profile("polardb-cpu")
    assert (
        p.threads == (1, 8, 32, 64, 128, 256)
        and p.table_size == 10_000_000
        and p.report_interval_s == 20
    )
    s = p.scaled(0.01)
    assert s.scale == 0.01 and s.table_size == 100_000 and s.duration_s == 10
    with pytest.raises(UsageError):
        p.scaled(2)
    with pytest.raises(UsageError):
        get_profile("nope")
    assert set(PROFILES) >= {
        "quick",
        "standard",
        "full",
        "yitian",
        "polardb-cpu",
        "polardb-io",
        "tdsql",
        "kunpeng",
    }


def test_explicit_options_win_over_scale() -> None:
    """--scale shrinks the profile's own sizes; --time/--warmup/--table-size given on the
    command line are taken as given (before, --time 2 --scale 0.05 ran 10 s runs)."""
    scaled = build_profile(ProfileOptions(name="quick", scale=0.05))
    assert (scaled.duration_s, scaled.warmup_s, scaled.table_size) == (10, 2, 5000)
    both = build_profile(
        ProfileOptions(name="quick", scale=0.05, duration_s=2, warmup_s=1, table_size=2000)
    )
    assert (both.duration_s, both.warmup_s, both.table_size, both.scale) == (2, 1, 2000, 0.05)
    assert build_profile(ProfileOptions(name="quick", warmup_s=0)).warmup_s == 0


def test_workload_names() -> None:
    assert normalize_workload("ps") == "oltp_point_select"
    assert normalize_workload("/x/custom.lua") == "/x/custom.lua"
    with pytest.raises(UsageError):
        normalize_workload("oltp_nope")


def test_config_digest_ignores_paths_and_ports() -> None:
    a = {"port": "1", "socket": "/a", "innodb_buffer_pool_size": "1"}
    b = {"port": "2", "socket": "/b", "innodb_buffer_pool_size": "1"}
    c = {"port": "2", "socket": "/b", "innodb_buffer_pool_size": "2"}
    assert config_digest(a) == config_digest(b) != config_digest(c)
