"""Compare myaccel's plan against what MySQLTuner recommends, on one sandbox, with an
interleaved A/B (baseline: MySQLTuner's configuration, candidate: myaccel's).

Usage: .venv/bin/python scripts/vs_mysqltuner.py SANDBOX MYACCEL_TUNED_CNF [ab options...]

MySQLTuner is run against the sandbox after the workload has run (its advice reads status
counters), its advice is turned into an option file, and both files go to `myaccel ab`.
Debian 12's MySQLTuner 1.9.9 dies with "Illegal division by zero" (line 6024, in
mysql_innodb) before it prints its "Variables to adjust" list on a server without MyISAM
tables; the InnoDB advice it has printed by then ("[!!] InnoDB buffer pool / data size",
"log file size ... should be equal to 25%") is what this script translates. Any
"Variables to adjust" lines present (other versions) are used as well.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

from myaccel.errors import MyaccelError
from myaccel.server.sandbox import Sandbox

UNITS = {"B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def size(text: str) -> int:
    m = re.match(r"([\d.]+)\s*([KMGT]?)", text.strip())
    if not m:
        raise ValueError(text)
    return int(float(m.group(1)) * UNITS[m.group(2) or "B"])


def advice(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    chunk = 128 * 1024**2
    bp = None
    m = re.search(r"InnoDB buffer pool / data size: ([\d.]+[KMGT]?)/([\d.]+[KMGT]?)", text)
    if m:
        data = size(m.group(2))
        bp = max(size(m.group(1)), math.ceil(data / chunk) * chunk)
        out["innodb_buffer_pool_size"] = str(bp)
    if re.search(r"log file size .* should be equal to 25%", text) and bp:
        out["innodb_log_file_size"] = str(bp // 4)
    if "Performance_schema should be activated" in text:
        out["performance_schema"] = "ON"
    var = text.split("Variables to adjust:", 1)
    if len(var) == 2:
        for line in var[1].splitlines():
            mm = re.match(r"\s+(\w+) \((?:>=|=|>)\s*([\d.]+[KMGT]?)", line)
            if mm:
                out[mm.group(1)] = str(size(mm.group(2)))
    return out


def tuner_advice(sb: Sandbox) -> dict[str, str]:
    """Run MySQLTuner against the running sandbox and translate its advice (exits on none)."""
    r = subprocess.run(
        ["mysqltuner", "--defaults-file", str(sb.option_file), "--nocolor", "--noinfo", "--nogood"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    text = r.stdout + r.stderr
    adv = advice(text)
    print(f"MySQLTuner exit {r.returncode}; advice translated: {adv}")
    if not adv:
        sys.exit("error: no MySQLTuner advice could be read; its output:\n" + text[-2000:])
    if "division by zero" in text:
        print(
            "note: MySQLTuner died with 'Illegal division by zero' (Debian 1.9.9); used the advice printed before it"
        )
    return adv


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit("usage: vs_mysqltuner.py SANDBOX MYACCEL_TUNED_CNF [ab options...]")
    name, tuned = sys.argv[1], Path(sys.argv[2])
    rest = sys.argv[3:]
    try:
        sb = Sandbox.load(name)
    except MyaccelError as e:
        sys.exit(f"error: {e} (hint: `myaccel sandbox list` shows the sandboxes of $MYACCEL_HOME)")
    if not sb.is_running():
        sys.exit(
            f"error: sandbox {name!r} is not running; MySQLTuner reads the status counters of a "
            "server that has run the workload (hint: run `myaccel bench --sandbox NAME` or "
            "`myaccel accelerate` on it first)"
        )
    adv = tuner_advice(sb)
    cnf = tuned.with_name("mysqltuner.cnf")
    cnf.write_text(
        "# MySQLTuner's advice, translated by scripts/vs_mysqltuner.py\n[mysqld]\n"
        + "".join(f"{k} = {v}\n" for k, v in adv.items())
    )
    exe = str(Path(sys.executable).with_name("myaccel"))
    cmd = [exe, "ab", "--sandbox", name, "--baseline", str(cnf), "--candidate", str(tuned), *rest]
    print("running:", " ".join(cmd))
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
