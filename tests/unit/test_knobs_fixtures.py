"""The catalog agrees with the SHOW GLOBAL VARIABLES fixtures built from the manual.

See tests/fixtures/variables/README.md: the dumps are documented defaults for a stated
machine (16 logical CPUs, 64 GiB), not recordings of a server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from myaccel.knobs import Catalog, Machine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "variables"
STATED_MACHINE = Machine(logical_cpus=16, ram_bytes=64 << 30)
DUMPS = {"mysql-8.0.40.tsv": ("mysql", "8.0.40"), "mysql-8.4.3.tsv": ("mysql", "8.4.3")}


def read_dump(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            name, _, value = line.partition("\t")
            out[name] = value
    return out


@pytest.mark.parametrize("dump", sorted(DUMPS))
def test_catalog_matches_documented_dump(dump: str) -> None:
    flavor, version = DUMPS[dump]
    variables = read_dump(FIXTURES / dump)
    assert variables["version"] == version
    srv = Catalog.load().for_server(flavor, variables["version"])
    compared = 0
    disagreements = []
    for k in srv.knobs():
        assert k.name in variables, f"{dump} lacks {k.name}, which exists in {srv.label}"
        expected = srv.parse_value(k.name, variables[k.name])
        if k.auto is not None and k.formula is None:
            continue  # depends on OS limits or disks: not computable from the catalog
        actual = srv.default(k.name, machine=STATED_MACHINE)
        compared += 1
        if actual != expected:
            disagreements.append(f"{k.name}: catalog {actual!r}, dump {expected!r}")
    assert not disagreements, "\n".join(disagreements)
    assert compared >= 75


@pytest.mark.parametrize("dump", sorted(DUMPS))
def test_dump_has_no_knob_the_catalog_says_is_absent(dump: str) -> None:
    flavor, version = DUMPS[dump]
    variables = read_dump(FIXTURES / dump)
    cat = Catalog.load()
    srv = cat.for_server(flavor, version)
    for name in variables:
        if name in cat:
            assert srv.exists(name), f"{dump} has {name}, absent from {srv.label} per catalog"


def test_84_changes_are_exactly_the_documented_ones() -> None:
    old = read_dump(FIXTURES / "mysql-8.0.40.tsv")
    new = read_dump(FIXTURES / "mysql-8.4.3.tsv")
    changed = {n for n in old if old[n] != new.get(n)} - {"version"}
    assert changed == {
        "innodb_adaptive_hash_index",
        "innodb_change_buffering",
        "innodb_flush_method",
        "innodb_io_capacity",
        "innodb_io_capacity_max",
        "innodb_log_buffer_size",
        "innodb_numa_interleave",
        "innodb_use_fdatasync",
        "innodb_purge_threads",  # 1 with <= 16 CPUs
        "innodb_read_io_threads",  # CPUs / 2
        "temptable_max_ram",  # 3% of RAM
    }
