"""capture/demo.py's sysbench driver without a server: the Lua script issues the Python
driver's statement classes with MIX's weights, the password reaches sysbench through its
private --config-file only, and a sysbench that ends at once is reported with its output."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
from fake_runner import Recording, ReplayRunner

from myaccel.capture import demo
from myaccel.capture.normalize import normalize
from myaccel.env import Environment, using
from myaccel.errors import MyaccelError
from myaccel.server.connection import ConnectParams

TARGET = ConnectParams(
    host=None, port=3306, socket="/tmp/s.sock", user="root", password="s3cret-pw"
)


def test_the_lua_script_issues_the_mix_classes() -> None:
    lua = demo.mix_script().read_text()
    formats = re.findall(r'string\.format\(\s*"([^"]+)"', lua)
    texts = [normalize(f.replace("%d", "7")) for f in formats]
    assert texts == [text for _, text in demo.MIX]
    assert demo.mix_weights() == "500,150,150,100,100"
    assert f'items = {{ "rows of shop.items (ids 1..items)", {demo.ITEMS} }}' in lua


def test_sysbench_driver_hands_the_password_through_a_private_file() -> None:
    seen: dict[str, str] = {}

    def answer(argv: tuple[str, ...]) -> Recording:
        cfg = next(a.split("=", 1)[1] for a in argv if a.startswith("--config-file="))
        seen["cfg"] = cfg
        seen["text"] = Path(cfg).read_text()
        seen["mode"] = oct(stat.S_IMODE(os.stat(cfg).st_mode))
        return Recording(stdout="sysbench 1.0.20\n")

    fake = ReplayRunner().on(["sysbench"], answer)
    with using(Environment(runner=fake)):
        d = demo.SysbenchDriver(TARGET, threads=3, seed=5, time_s=40).start(settle_s=0)
        assert "sysbench 1.0.20" in d.output()
        d.stop()
    (argv,) = fake.argvs("spawn")
    assert argv[1] == str(demo.mix_script()) and argv[-1] == "run"
    assert "--mysql-socket=/tmp/s.sock" in argv and "--mysql-db=shop" in argv
    assert {"--threads=3", "--time=40", "--rand-seed=5", "--mix=500,150,150,100,100"} <= set(argv)
    assert not any("s3cret-pw" in a for a in argv)
    assert seen["text"] == 'mysql-password="s3cret-pw"\n' and seen["mode"] == "0o600"
    assert not Path(seen["cfg"]).exists()  # removed when the driver stopped
    assert fake.children[0].stop_calls  # sysbench was asked to end


def test_a_sysbench_that_ends_at_once_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "sysbench"
    fake.write_text("#!/bin/sh\necho 'FATAL: unable to connect'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    target = ConnectParams(host="127.0.0.1", port=1, socket=None, user="u", password=None)
    with pytest.raises(MyaccelError, match=r"exit code 1.*unable to connect"):
        demo.start_driver("sysbench", target, threads=1, settle_s=0.5)
