"""Real server binaries: Debian 12's arm64 mariadbd (downloaded once per machine) and the
host's /usr/sbin/mariadbd.

The arm64 package is fetched with apt (``dpkg --add-architecture arm64`` and ``apt-get
update`` only when needed, then ``apt-get download mariadb-server-core:arm64`` and ``dpkg
-x``) into /var/cache/myaccel-tests (or .pytest_cache/myaccel-tests without root). The test
skips, saying why, only when the download is impossible. No wall-time asserts: durations
are printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from myaccel.facts.binary import collect_binary
from myaccel.model import BinaryFacts

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "mariadb-server-core"  # ships usr/sbin/mariadbd in bookworm
CACHE_DIRS = (Path("/var/cache/myaccel-tests"), REPO / ".pytest_cache" / "myaccel-tests")
FAMILY = re.compile(
    r"^(casp?(a|l|al)?[bh]?|swp(a|l|al)?[bh]?"
    r"|ld(add|clr|eor|set|smax|smin|umax|umin)(a|l|al)?[bh]?"
    r"|st(add|clr|eor|set|smax|smin|umax|umin)l?[bh]?"
    r"|ld(a)?x[rp][bh]?|st(l)?x[rp][bh]?)$"
)


def _run(argv: list[str], *, timeout_s: float = 600, cwd: Path | None = None) -> str:
    cp = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, check=False
    )
    if cp.returncode != 0:
        tail = " | ".join((cp.stderr or cp.stdout).strip().splitlines()[-3:])
        pytest.skip(f"cannot fetch Debian's arm64 {PACKAGE}: `{' '.join(argv)}` failed: {tail}")
    return cp.stdout


def _cache_dir() -> Path:
    for d in CACHE_DIRS:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(d, os.W_OK):
            return d
    pytest.skip("no writable cache directory for the arm64 package")


def _candidate() -> str | None:
    out = subprocess.run(
        ["apt-cache", "policy", f"{PACKAGE}:arm64"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    m = re.search(r"Candidate:\s*(\S+)", out)
    return m.group(1) if m and m.group(1) != "(none)" else None


def fetch_arm64_mariadbd() -> Path:
    cache = _cache_dir()
    root = cache / f"{PACKAGE}-arm64"
    target = root / "usr" / "sbin" / "mariadbd"
    if target.is_file():
        return target
    for tool in ("apt-get", "apt-cache", "dpkg"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not available: cannot fetch Debian's arm64 {PACKAGE}")
    native = _run(["dpkg", "--print-architecture"], timeout_s=30).strip()
    foreign = _run(["dpkg", "--print-foreign-architectures"], timeout_s=30).split()
    is_root = os.geteuid() == 0
    if native != "arm64" and "arm64" not in foreign:
        if not is_root:
            pytest.skip("arm64 is not a dpkg architecture here and adding it needs root")
        _run(["dpkg", "--add-architecture", "arm64"], timeout_s=60)
    if _candidate() is None:
        if not is_root:
            pytest.skip(f"apt has no {PACKAGE}:arm64 candidate and `apt-get update` needs root")
        _run(["apt-get", "update", "-q"], timeout_s=600)
        if _candidate() is None:
            pytest.skip(f"apt has no {PACKAGE}:arm64 candidate even after apt-get update")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        work = Path(tmp)
        _run(
            ["apt-get", "-q", "-o", "APT::Sandbox::User=root", "download", f"{PACKAGE}:arm64"],
            cwd=work,
        )
        debs = sorted(work.glob(f"{PACKAGE}_*_arm64.deb"))
        if not debs:
            pytest.skip(f"apt-get download left no {PACKAGE} arm64 .deb")
        extract = work / "root"
        _run(["dpkg", "-x", str(debs[0]), str(extract)], timeout_s=300)
        if not (extract / "usr" / "sbin" / "mariadbd").is_file():
            pytest.fail(f"{debs[0].name} has no usr/sbin/mariadbd")
        shutil.rmtree(root, ignore_errors=True)
        extract.rename(root)  # atomic: a half-extracted tree is never cached
    return target


@pytest.fixture(scope="module")
def arm64_mariadbd() -> Path:
    return fetch_arm64_mariadbd()


def _timed(path: Path) -> tuple[BinaryFacts, float]:
    t0 = time.perf_counter()
    facts = collect_binary(path)
    return facts, time.perf_counter() - t0


def _report(capsys: pytest.CaptureFixture[str], facts: BinaryFacts, wall_s: float) -> None:
    a = facts.atomics.value
    with capsys.disabled():
        print(
            f"\n[binary] {facts.path}: machine={facts.machine.value} "
            f"analysis_s={facts.analysis_s:.3f} wall_s={wall_s:.3f} "
            f"class={a.klass if a else None} lse={a.lse_instructions if a else None} "
            f"excl_loads={a.exclusive_loads if a else None} "
            f"helper_sites={a.helper_sites if a else None} "
            f"helper_calls={a.helper_calls if a else None}"
        )
        if a and a.detail:
            print(f"[binary] {a.detail}")


def test_debian_arm64_mariadbd_uses_outline_atomics(
    arm64_mariadbd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts, wall = _timed(arm64_mariadbd)
    _report(capsys, facts, wall)
    assert facts.machine.value == "aarch64"
    assert facts.elf_class.value == 64
    assert facts.pie.value is True
    assert facts.stripped.value is True
    assert facts.build_id.value and re.fullmatch(r"[0-9a-f]{40}", facts.build_id.value)
    a = facts.atomics.value
    assert a is not None
    # GCC 12 defaults to -moutline-atomics on aarch64: every atomic goes through libgcc's
    # __aarch64_* helpers, found structurally (the binary is stripped).
    assert a.klass == "outline", a.detail
    assert a.helper_symbols == 0
    assert 10 <= a.helper_sites <= 100
    assert a.lse_instructions == a.helper_sites  # no inline LSE outside the helpers
    assert a.exclusive_loads == a.helper_sites  # one LL/SC fallback per helper, no others
    assert a.helper_calls > 500
    assert a.instructions_scanned > 1_000_000
    # stripped, no DWARF: LTO/PGO cannot be told, and we say so instead of "no"
    assert facts.lto.known is False
    assert facts.pgo.known is False
    assert facts.instrumented.value is False
    assert facts.text_segment_align.known


def test_arm64_mariadbd_counts_equal_objdump(arm64_mariadbd: Path) -> None:
    objdump = shutil.which("aarch64-linux-gnu-objdump")
    if objdump is None:
        pytest.skip("aarch64-linux-gnu-objdump is not installed (binutils-aarch64-linux-gnu)")
    a = collect_binary(arm64_mariadbd).atomics.value
    assert a is not None
    text = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", str(arm64_mariadbd)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].rstrip().endswith(":"):
            fields = parts[1].split()
            if fields and FAMILY.match(fields[0]):
                counts[fields[0]] += 1
    assert a.by_mnemonic == dict(counts)


def test_host_x86_mariadbd(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path("/usr/sbin/mariadbd")
    if not path.is_file():
        pytest.skip("/usr/sbin/mariadbd is not installed (apt-get install mariadb-server)")
    facts, wall = _timed(path)
    _report(capsys, facts, wall)
    if facts.machine.value != "x86_64":
        pytest.skip(f"host mariadbd is {facts.machine.value}, not x86_64")
    a = facts.atomics.value
    assert a is not None
    assert a.klass == "not-applicable"
    assert "x86_64" in a.detail
    assert facts.pie.value is True
    # Debian's dh_strip removes .comment, so the compiler is only known when a separate
    # debug file (mariadb-server-core-dbgsym) is installed; never a guess.
    if facts.compiler.known:
        assert facts.compiler.value and any("GCC" in c for c in facts.compiler.value)
    else:
        assert facts.compiler.unknown and ".comment" in facts.compiler.unknown
