"""Generated plans against apply's guard (issue 38): a strict plan that changes a
durability knob (any target kind, any spelling the server reads, mixed with other safe
recommendations) or adds an include directive never gets past it; a strict plan that does
not touch durability always does, so the guard is not refusing everything; a sealed relaxed
plan may change durability through files and drop-ins."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from myaccel.actions.effective import HostMemory
from myaccel.actions.guard import (
    DurabilityRefused,
    IncludeRefused,
    PlanRefused,
    ServerId,
    check_plan,
)
from myaccel.knobs.catalog import Catalog
from myaccel.rules.model import Plan, Recommendation

MARIADB = ServerId("mariadb", "10.11.19-MariaDB-0+deb12u1", "server")
RAM = HostMemory(8 << 30, "/proc/meminfo")
DURABILITY = sorted(s.name for s in Catalog.load().specs if s.durability)
SERVER_GROUPS = ["mysqld", "server", "mariadb", "mariadbd", "mysqld-10.11", "mariadb-10.11",
                 "client-server", "galera"]  # fmt: skip
VALUES = {
    "innodb_flush_log_at_trx_commit": ["0", "1", "2", "3"],
    "sync_binlog": ["0", "1", "1000"],
    "innodb_flush_log_at_timeout": ["1", "2", "30"],
    "innodb_doublewrite": ["0", "1", "OFF", "ON", "false"],
    "innodb_flush_method": ["O_DIRECT_NO_FSYNC", "nosync", "littlesync", "O_DIRECT", "fsync"],
}
# (knob, values valid on MariaDB 10.11) that have nothing to do with durability
SAFE = [
    ("innodb_io_capacity", ["200", "1000", "2000"]),
    ("innodb_io_capacity_max", ["4000", "8000"]),
    ("max_connections", ["151", "500"]),
    ("innodb_buffer_pool_size", ["128M", "1G", "6G"]),
    ("table_open_cache", ["4000", "8000"]),
    ("innodb_flush_neighbors", ["0", "1"]),
]
UNIT = "mariadb.service"


def rec(n: int, target: str, proposed: str, layer: str = "os") -> Recommendation:
    return Recommendation(
        id=f"r{n}",
        layer=layer,  # type: ignore[arg-type]
        title="t",
        target=target,
        current=None,
        proposed=proposed,
        rationale="t",
        expected_effect="t",
        effect_source="t",
        risk="restart",
        verify="t",
    )


def make_plan(recs: list[Recommendation], durability: str = "strict") -> Plan:
    return Plan(
        created_at="2026-01-01T00:00:00+00:00",
        myaccel_version="test",
        facts_digest="0" * 16,
        hostname="test",
        server={"flavor": "mariadb", "version": "10.11.19"},
        durability=durability,  # type: ignore[arg-type]
        recommendations=[r.model_copy(update={"id": f"r{i}"}) for i, r in enumerate(recs)],
    ).sealed()


# ---------------------------------------------------------------- spellings


@st.composite
def spelt(draw: st.DrawFn, name: str, *, prefixes: bool = True) -> str:
    """``name`` as the server still reads it: each separator a dash or an underscore,
    each letter in either case, ``loose-`` before it (or not), and, where the server
    completes it, cut to a prefix."""
    if prefixes and draw(st.booleans()):
        name = name[: draw(st.integers(min_value=len(name) - 4, max_value=len(name)))]
    out = "".join(
        draw(st.sampled_from("-_")) if c == "_" else (c.upper() if draw(st.booleans()) else c)
        for c in name
    )
    return draw(st.sampled_from(["", "loose-", "loose_", "LOOSE-", "loose-loose-"])) + out


@st.composite
def durability_option(draw: st.DrawFn) -> tuple[str, str | None]:
    """(option as spelt, value or None for a bare flag) changing a durability knob."""
    knob = draw(st.sampled_from(DURABILITY))
    if knob == "innodb_doublewrite" and draw(st.booleans()):
        modifier = draw(st.sampled_from(["skip-", "skip_", "disable-", "enable-", "SKIP-"]))
        loose = draw(st.sampled_from(["", "loose-"]))
        return loose + modifier + draw(spelt(knob, prefixes=False)), None
    name = draw(spelt(knob))
    value = draw(st.sampled_from(VALUES[knob]))
    return name, value


def quoted(draw: st.DrawFn, value: str) -> str:
    return draw(st.sampled_from([value, f'"{value}"', f"'{value}'"]))


@st.composite
def option_line(draw: st.DrawFn, option: tuple[str, str | None]) -> str:
    """One option-file line: blanks, quotes, a trailing comment, the set-variable form."""
    name, value = option
    if value is None:
        return name + draw(st.sampled_from(["", "  # flag", "\t"]))
    if draw(st.integers(min_value=0, max_value=5)) == 0 and not name.lower().startswith("loose"):
        return f"set-variable = {name}={value}"
    eq = draw(st.sampled_from(["=", " = ", "\t=\t", "= "]))
    comment = draw(st.sampled_from(["", " # tuned", "#x", "  ; not a comment here"]))
    if comment.endswith("here"):
        comment = ""
    lead = draw(st.sampled_from(["", "--", "  "]))
    return f"{lead}{name}{eq}{quoted(draw, value)}{comment}"


@st.composite
def command_word(draw: st.DrawFn, option: tuple[str, str | None]) -> str:
    """One server argument: ``--name=value``, ``--name value``, ``--name='value'``."""
    name, value = option
    if value is None:
        return f"--{name}"
    return draw(st.sampled_from([f"--{name}={value}", f"--{name} {value}", f"--{name}='{value}'"]))


# ---------------------------------------------------------------- targets


@st.composite
def safe_option(draw: st.DrawFn) -> tuple[str, str]:
    knob, values = draw(st.sampled_from(SAFE))
    return knob, draw(st.sampled_from(values))


@st.composite
def safe_recommendation(draw: st.DrawFn) -> Recommendation:
    """Something a strict plan may do: a safe server knob by any target kind, a kernel
    value, a unit limit, a limits file."""
    knob, value = draw(safe_option())
    kind = draw(st.sampled_from(["mysql", "mycnf", "file", "systemd", "sysctl", "limits", "unit"]))
    group = draw(st.sampled_from(SERVER_GROUPS))
    other = draw(safe_option())
    if kind == "mysql":
        return rec(0, f"mysql:{knob}", value, "server")
    if kind == "mycnf":
        return rec(0, f"mycnf:{group}/{draw(spelt(knob, prefixes=False))}", value, "server")
    if kind == "file":
        text = f"# tuning\n[{group}]\n{draw(option_line((draw(spelt(knob, prefixes=False)), value)))}\n"
        text += f"[client]\nuser = app\n[mysqld]\n{other[0]}={other[1]}\n"
        return rec(
            0, f"file:/etc/mysql/conf.d/{draw(st.sampled_from(['50', '60', '70']))}-x.cnf", text
        )
    if kind == "systemd":
        return rec(0, f"systemd:{UNIT}/ExecStart", f"/usr/sbin/mariadbd --{knob}={value}")
    if kind == "sysctl":
        return rec(0, "sysctl:vm.swappiness", draw(st.sampled_from(["1", "10", "60"])))
    if kind == "limits":
        return rec(0, "file:/etc/security/limits.d/50-mysql.conf", "mysql - nofile 65535\n")
    return rec(0, f"systemd:{UNIT}/LimitNOFILE", "65535")


@st.composite
def durability_recommendation(draw: st.DrawFn) -> Recommendation:
    """A recommendation that changes a durability knob, by any target kind."""
    option = draw(durability_option())
    kind = draw(
        st.sampled_from(
            ["mysql", "mycnf", "cnf", "dropin", "execstart", "env", "envfile", "sql", "json"]
        )
    )
    name, value = option
    if kind == "mysql":
        return rec(0, f"mysql:{name}", value or "0", "server")
    if kind == "mycnf":
        group = draw(st.sampled_from(SERVER_GROUPS))
        return rec(0, f"mycnf:{group}/{name}", value or "", "server")
    if kind == "cnf":
        group = draw(
            st.sampled_from([g.upper() if draw(st.booleans()) else g for g in SERVER_GROUPS])
        )
        safe = draw(safe_option())
        text = draw(st.sampled_from(["", "# made by hand\n", "[client]\nuser=app\n"]))
        text += f"[{group}]\n{safe[0]} = {safe[1]}\n{draw(option_line(option))}\n"
        path = draw(
            st.sampled_from(
                ["/etc/mysql/conf.d/50-x.cnf", "/etc/my.cnf", "/srv/sb/conf.d/50-fast.cnf"]
            )
        )
        return rec(0, f"file:{path}", text)
    if kind in ("sql", "json"):
        return sql_or_json(draw, kind, option)
    word = draw(command_word(option))
    if kind == "dropin":
        text = f"[Service]\nExecStart=\nExecStart=/usr/sbin/mariadbd $MYSQLD_OPTS {word}\n"
        return rec(0, f"file:/etc/systemd/system/{UNIT}.d/50-x.conf", text)
    if kind == "execstart":
        return rec(0, f"systemd:{UNIT}/ExecStart", f"/usr/sbin/mariadbd {word}")
    if kind == "env":
        return rec(0, f"systemd:{UNIT}/Environment", f'"MYSQLD_OPTS=--port=3306 {word}"')
    return rec(0, "file:/etc/default/mariadb", f'# options\nMYSQLD_OPTS="{word}"\n')


def sql_or_json(draw: st.DrawFn, kind: str, option: tuple[str, str | None]) -> Recommendation:
    """SET in an init file (the variable's own name: SQL has no prefixes or modifiers), or
    a key of mysqld-auto.cnf (where SET PERSIST writes)."""
    name, value = option
    knob = next(k for k in DURABILITY if k.startswith(_bare(name)) or _bare(name).startswith(k))
    value = value or "OFF"
    if kind == "json":
        text = f'{{"Version": 2, "mysql_static_variables": {{"{knob}": {{"Value": "{value}"}}}}}}'
        return rec(0, "file:/var/lib/mysql/mysqld-auto.cnf", text)
    scope = draw(st.sampled_from(["GLOBAL ", "PERSIST ", "persist_only ", "@@global.", "@@"]))
    text = f"-- init\nSET {scope}{knob.upper() if draw(st.booleans()) else knob} = '{value}';\n"
    return rec(0, "file:/etc/mysql/init.sql", text)


def _bare(name: str) -> str:
    """The knob part of a generated spelling (prefixes and modifiers off)."""
    out = name.lower().replace("-", "_")
    while out.startswith(("loose_", "skip_", "disable_", "enable_")):
        out = out.split("_", 1)[1]
    return out


@st.composite
def include_recommendation(draw: st.DrawFn) -> Recommendation:
    directive = draw(st.sampled_from(["!include /etc/mysql/extra.cnf", "!includedir /etc/mysql/more.d",
                                      "  !INCLUDEDIR /tmp/x"]))  # fmt: skip
    text = f"[mysqld]\ninnodb_io_capacity = 2000\n{directive}\n"
    return rec(0, "file:/etc/mysql/conf.d/50-x.cnf", text)


def with_bad(draw: st.DrawFn, bad: Recommendation) -> list[Recommendation]:
    recs = draw(st.lists(safe_recommendation(), max_size=5))
    recs.insert(draw(st.integers(min_value=0, max_value=len(recs))), bad)
    return recs


def how(target: str) -> str:
    """The kind of change, for the statistics (--hypothesis-show-statistics)."""
    scheme, _, rest = target.partition(":")
    if scheme != "file":
        return f"{scheme}: target"
    for part, kind in (("/systemd/", "unit drop-in"), ("/default/", "environment file"),
                       ("auto.cnf", "mysqld-auto.cnf"), (".sql", "init file (SQL)")):  # fmt: skip
        if part in rest:
            return f"file: {kind}"
    return "file: option file"


def guard(p: Plan) -> PlanRefused | None:
    try:
        check_plan(p, MARIADB, memory=RAM)
    except PlanRefused as exc:
        return exc
    return None


PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(data=st.data())
def test_no_strict_plan_changing_durability_gets_past_the_guard(data: st.DataObject) -> None:
    bad = data.draw(durability_recommendation())
    recs = with_bad(data.draw, bad)
    event(f"changed by: {how(bad.target)}")
    err = guard(make_plan(recs))
    assert err is not None, [r.target + " = " + r.proposed for r in recs]
    assert isinstance(err, DurabilityRefused), err.message


@PROPERTY
@given(data=st.data())
def test_no_strict_plan_adding_an_include_gets_past_the_guard(data: st.DataObject) -> None:
    recs = with_bad(data.draw, data.draw(include_recommendation()))
    err = guard(make_plan(recs))
    assert isinstance(err, IncludeRefused), recs


@PROPERTY
@given(recs=st.lists(safe_recommendation(), min_size=1, max_size=6))
def test_strict_plans_that_leave_durability_alone_pass(recs: list[Recommendation]) -> None:
    event(f"{len(recs)} recommendations")
    err = guard(make_plan(recs))
    assert err is None, err.message if err else ""


@PROPERTY
@given(data=st.data())
def test_sealed_relaxed_plans_may_change_durability_by_file_and_drop_in(
    data: st.DataObject,
) -> None:
    bad = data.draw(durability_recommendation())
    if bad.target.startswith(("mysql:", "mycnf:")):
        return  # their values are checked against the catalog too (test_guard.py)
    p = make_plan(with_bad(data.draw, bad), durability="relaxed")
    err = guard(p)
    assert err is None, err.message if err else ""
    edited: dict[str, Any] = p.model_dump()
    edited["durability"] = "strict"
    err = guard(Plan.model_validate(edited))
    assert isinstance(err, DurabilityRefused)
