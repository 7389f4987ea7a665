"""What a workload file may make a server run.

A workload file (``myaccel.workload/1``) is code: its statements go to a server as they
are written, through sysbench (``bench``, ``ab``, ``accelerate``, ``capture --check``,
``build --train``), and its DDL creates schemas on a sandbox (``accelerate --allow-ddl``).
A file can come from anywhere, so each statement a replay issues is checked here first:

- **one statement**: no ``;`` outside quotes and comments (a single trailing one is
  allowed), no executable comment (``/*! ... */``, ``/*M! ... */``: the server runs what it
  holds, where any other comment is ignored);
- **DML only**: ``SELECT`` (``WITH``, ``TABLE``, ``VALUES``), ``INSERT``, ``UPDATE``,
  ``DELETE``, ``REPLACE``, and transaction control (``BEGIN``, ``START TRANSACTION``,
  ``COMMIT``, ``ROLLBACK``, savepoints) without ``RELEASE`` (it would end the replay's
  connection) or ``BEGIN NOT ATOMIC`` (a MariaDB compound statement). No DDL, ``SET``,
  ``CALL``, ``DO``, ``HANDLER``, ``LOAD``, ``LOCK``, ``FLUSH``, ``KILL``, ``SHOW``, ...
- nothing that **writes or reads server files** (``INTO OUTFILE``/``DUMPFILE``,
  ``LOAD_FILE()``) or **blocks** the run (``SLEEP()``, ``BENCHMARK()``, ``GET_LOCK()``,
  the replication waits), or calls the command-running UDFs (``sys_exec()``, ...);
- **no system schema** named as a qualifier (``mysql.user``, ``performance_schema.x``);
  the replay's check against the server (``bench.replay.check_schemas``) also refuses a
  qualifier naming any schema of the server the capture does not hold (``sbtest.t``);
- **no trickery in the text**: NUL, control characters outside quotes, non-letters from
  outside ASCII outside quotes (a fullwidth ``;``, a zero-width space), bidirectional
  controls anywhere (text that reads differently than it runs), unpaired surrogates.

The DDL (``check_schema_ddl``) is what ``SHOW CREATE DATABASE`` and ``SHOW CREATE TABLE``
return: ``CREATE DATABASE`` of the schema itself, then ``CREATE TABLE`` of its own tables,
on engines that keep their data in the server (no ``CONNECT``, ``FEDERATED``, ``SPIDER``,
``MERGE``...), without ``DATA``/``INDEX DIRECTORY``, ``CONNECTION`` or a ``SELECT``; an
executable comment's content is checked as the code it is.

Why a lexer of its own and not a SQL library: ``sqlparse`` is not a dependency, and its
lexer follows generic SQL, not the server's: it reads ``--1`` as a comment where MySQL reads
two minus signs, knows neither ``NO_BACKSLASH_ESCAPES`` nor ``ANSI_QUOTES``, and takes
``/*! ... */`` for a comment, which the server runs. Wherever the checker and the server
disagree on where a string or a comment ends, a second statement can hide. So this lexer
follows the server's own rules (``sql/sql_lex.cc``) for the few tokens that decide that
(comments, quotes, backquotes, ``;``) and reads a statement under each quoting mode a
server can be in (backslash escapes on and off, ``"`` a string or an identifier): a
statement passes only if it passes under every one. Where the two could still differ,
it errs toward seeing code: a ``--`` not followed by a space is two minus signs, an
unterminated quote holds the rest of the text (the server then fails on it, it does not
run it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

# The longest statement a workload file may hold (a server's max_allowed_packet is larger,
# a captured statement is not: performance_schema keeps 1,024 characters by default).
MAX_STATEMENT_CHARS = 1024 * 1024
MAX_NAME_CHARS = 64  # schema and table names (the server's own limit)

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

DML = frozenset({"select", "with", "table", "values", "insert", "update", "delete", "replace"})
WRITES = frozenset({"insert", "update", "delete", "replace"})
TRANSACTION = frozenset({"begin", "start", "commit", "rollback", "savepoint", "release"})

# Statements a replay never issues, by their first word, and why (others: _NOT_DML).
_VERB_REASONS: dict[str, str] = {
    **dict.fromkeys(
        ("create", "alter", "drop", "truncate", "rename"),
        "DDL would change the schema, a replay issues DML only",
    ),
    **dict.fromkeys(("grant", "revoke"), "it changes accounts"),
    "set": "it changes settings, a replay issues no SET",
    "load": "it reads files (LOAD DATA, LOAD XML)",
    **dict.fromkeys(("lock", "unlock"), "table locks would stall the replay"),
    **dict.fromkeys(
        ("flush", "kill", "shutdown", "install", "uninstall", "reset", "purge", "restart"),
        "it administers the server",
    ),
    **dict.fromkeys(
        ("call", "do", "handler", "prepare", "execute", "deallocate"),
        "a replay issues plain DML only",
    ),
    "xa": "an XA transaction left prepared would hold its locks after the replay",
    "use": "the replay chooses each class's schema itself",
}
_NOT_DML = "a replay issues only SELECT, INSERT, UPDATE, DELETE, REPLACE and transaction control"

# Functions a replayed statement must not call, and why.
_CALLS: dict[str, str] = {
    **dict.fromkeys(("sleep", "benchmark"), "it would stall the run"),
    **dict.fromkeys(
        (
            "get_lock",
            "master_pos_wait",
            "source_pos_wait",
            "master_gtid_wait",
            "wait_for_executed_gtid_set",
            "wait_until_sql_thread_after_gtids",
        ),
        "it can wait without end",
    ),
    "load_file": "it reads a file on the server",
    **dict.fromkeys(
        ("sys_exec", "sys_eval", "sys_bineval", "sys_get", "sys_set"),
        "it runs commands on the server's host",
    ),
}
# Words that may appear nowhere in a replayed statement's code.
_WORDS = {
    "outfile": "it writes a file on the server (INTO OUTFILE)",
    "dumpfile": "it writes a file on the server (INTO DUMPFILE)",
    "recursive": "a recursive query can run without end (MariaDB allows 4 billion rounds)",
}
# The storage engines a captured CREATE TABLE may name: those keeping their data in the
# server's own files (CONNECT reads host files, FEDERATED and SPIDER reach other servers,
# MERGE other tables).
ENGINES = frozenset(
    {"innodb", "myisam", "aria", "memory", "heap", "rocksdb", "tokudb", "archive", "blackhole"}
)
_DDL_WORDS = {
    "directory": "it places files outside the datadir (DATA/INDEX DIRECTORY)",
    "connection": "it connects to another server (CONNECTION)",
    "select": "it copies data from a query (CREATE TABLE ... SELECT)",
    "union": "it merges other tables (UNION)",
}
# Characters that make text read differently from how it runs (Trojan Source).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BIDI_RE = re.compile(f"[{''.join(sorted(_BIDI))}]")


class Refused(ValueError):
    """A statement a replay must not issue; ``str()`` says why (one line)."""


# ------------------------------------------------------------------------------ lexer


@dataclass(frozen=True)
class Token:
    kind: str  # ws comment exec_open exec_close string dq ident word op
    text: str

    @property
    def name(self) -> str | None:
        """The name a word, a backquoted identifier or (ANSI_QUOTES) a double-quoted one
        stands for; None for other tokens."""
        if self.kind == "word":
            return self.text
        if self.kind == "ident":
            return self.text[1:-1].replace("``", "`") if self.text.endswith("`") else None
        if self.kind == "dq":
            return self.text[1:-1].replace('""', '"') if len(self.text) > 1 else None
        return None


def _quoted(q: str, backslash: bool) -> str:
    """A quoted token with ``q`` doubled inside (and backslash escapes when on), or the
    rest of the text when it is not closed."""
    body = rf"[^{q}\\]|\\.|\\\Z|{q}{q}" if backslash else rf"[^{q}]|{q}{q}"
    return rf"{q}(?:{body})*(?:{q}|\Z)"


def _pattern(backslash_single: bool, backslash_double: bool) -> re.Pattern[str]:
    single, double = _quoted("'", backslash_single), _quoted('"', backslash_double)
    return re.compile(
        "|".join(
            (
                r"(?P<ws>[ \t\n\r\f\v]+)",
                r"(?P<exec_open>/\*[Mm]?!\d*)",
                r"(?P<comment>/\*.*?(?:\*/|\Z)|\#[^\n]*|--(?=[\x00-\x20\x7f]|\Z)[^\n]*)",
                f"(?P<string>{single})",
                f"(?P<dq>{double})",
                r"(?P<ident>`(?:[^`]|``)*(?:`|\Z))",
                r"(?P<word>[0-9A-Za-z_$\u0080-\U0010ffff]+)",
                r"(?P<op>.)",
            )
        ),
        re.DOTALL,
    )


# The quoting modes a server can be in: (backslash escapes in '...', in "..."): the
# default; ANSI_QUOTES ("..." an identifier, no escapes in it); NO_BACKSLASH_ESCAPES.
_MODES = {
    "default": _pattern(True, True),
    "ansi_quotes": _pattern(True, False),
    "no_backslash_escapes": _pattern(False, False),
}


def tokens(sql: str, mode: str = "default") -> list[Token]:
    """``sql`` as the server's lexer splits it in quoting ``mode``. ``exec_open`` and
    ``exec_close`` mark an executable comment's ends (its content is code); a comment
    inside one, or a second one, is refused (the server does not nest them)."""
    pat = _MODES[mode]
    out: list[Token] = []
    pos, in_exec = 0, False
    while pos < len(sql):
        if in_exec and sql.startswith("*/", pos):
            out.append(Token("exec_close", "*/"))
            pos, in_exec = pos + 2, False
            continue
        m = pat.match(sql, pos)
        assert m is not None and m.lastgroup is not None  # (?P<op>.) matches any character
        kind, text = m.lastgroup, m.group(0)
        if in_exec and kind in ("exec_open", "comment"):
            raise Refused("holds a comment inside an executable comment (/*! ... */)")
        if kind == "exec_open":
            in_exec = True
        out.append(Token(kind, text))
        pos = m.end()
    return out


def _modes(sql: str) -> tuple[str, ...]:
    """The quoting modes that can split ``sql`` differently (all of them only when it
    holds a backslash or a double quote)."""
    if "\\" in sql:
        return tuple(_MODES)
    return ("default", "ansi_quotes") if '"' in sql else ("default",)


# ------------------------------------------------------------------------------ text


def _char(c: str) -> str:
    return f"U+{ord(c):04X} ({unicodedata.name(c, 'unnamed')})"


def check_text(sql: object) -> str:
    """``sql`` as a str a server can be sent: not empty, not too long, no NUL, no
    bidirectional control, no unpaired surrogate."""
    if not isinstance(sql, str):
        raise Refused("is not text")
    if not sql.strip():
        raise Refused("is empty")
    if len(sql) > MAX_STATEMENT_CHARS:
        raise Refused(f"is longer than {MAX_STATEMENT_CHARS:,} characters")
    if "\x00" in sql:
        raise Refused("holds a NUL character")
    if sql.isascii():
        return sql
    bidi = _BIDI_RE.search(sql)
    if bidi is not None:
        raise Refused(f"holds the bidirectional control {_char(bidi.group(0))}")
    try:
        sql.encode()
    except UnicodeEncodeError:
        raise Refused("holds an unpaired surrogate (not UTF-8)") from None
    return sql


def _check_code_chars(toks: Sequence[Token]) -> None:
    """Outside quotes and comments: no control character, and nothing from outside
    ASCII that is not a letter, digit or mark (a fullwidth ``;``, a zero-width space)."""
    for t in toks:
        if t.kind == "op" and (t.text < " " or t.text == "\x7f"):
            raise Refused(f"holds the control character {_char(t.text)} outside quotes")
        if t.kind == "word" and t.text.startswith("$"):
            # MySQL 9 reads $$ (and $tag$) as a quote: what follows would be a string
            raise Refused(f"holds {t.text[:20]} outside quotes (MySQL 9 reads $...$ as a quote)")
        if t.kind in ("word", "op") and not t.text.isascii():
            for c in t.text:
                if not c.isascii() and unicodedata.category(c)[0] not in "LMN":
                    raise Refused(f"holds the character {_char(c)} outside quotes")


def valid_name(name: object, what: str) -> str:
    """A schema or table name a replay may use: text, 1..64 characters, no backquote,
    NUL, control or bidirectional character, no trailing space."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        raise Refused(f"{what} {name!r} is not a name of 1 to {MAX_NAME_CHARS} characters")
    bad = next((c for c in name if c in "`\x7f" or c < " " or c in _BIDI), None)
    if bad is not None or name != name.rstrip() or not name.isprintable():
        raise Refused(f"{what} {name!r} holds a character a name may not hold")
    return name


def name_ok(name: object) -> bool:
    try:
        valid_name(name, "name")
    except Refused:
        return False
    return True


def is_system_schema(name: str) -> bool:
    return unicodedata.normalize("NFKC", name).strip().casefold() in SYSTEM_SCHEMAS


# ------------------------------------------------------------------------------ statements


@dataclass(frozen=True)
class Verdict:
    """What a permitted statement is: its first word (lower case), whether it writes,
    and the names it qualifies others with (``x`` of ``x.y``: a schema or a table)."""

    verb: str
    writes: bool
    qualifiers: frozenset[str]


def _significant(toks: Sequence[Token]) -> list[Token]:
    return [t for t in toks if t.kind not in ("ws", "comment")]


def _is_op(t: Token | None, text: str) -> bool:
    return t is not None and t.kind == "op" and t.text == text


def _one_statement(toks: Sequence[Token]) -> list[Token]:
    """The significant tokens, a single trailing ``;`` (nothing but spaces after it)
    dropped; any other ``;`` is a second statement."""
    sig = _significant(toks)
    semis = [i for i, t in enumerate(toks) if _is_op(t, ";")]
    if not semis:
        return sig
    if len(semis) == 1 and all(t.kind == "ws" for t in toks[semis[0] + 1 :]):
        return sig[:-1]
    raise Refused("holds more than one statement (a ; outside quotes and comments)")


def _qualifiers(sig: Sequence[Token]) -> set[str]:
    """``x`` of every ``x.y`` (not a number, not ``@@x.y``): a schema, or a table."""
    out: set[str] = set()
    for i, t in enumerate(sig[:-2]):
        name = t.name
        if name is None or not _is_op(sig[i + 1], "."):
            continue
        if sig[i + 2].name is None and not _is_op(sig[i + 2], "*"):
            continue
        if i > 0 and (_is_op(sig[i - 1], ".") or _is_op(sig[i - 1], "@")):
            continue
        if t.kind == "word" and re.fullmatch(r"[0-9]+(?:[eE][0-9]*)?", name):
            continue
        out.add(name)
    return out


def _check_names(sig: Sequence[Token], words: dict[str, str]) -> set[str]:
    """The calls, words and qualifiers no statement may hold; the qualifiers."""
    for i, t in enumerate(sig):
        name = t.name
        if name is None:
            continue
        low = name.lower()
        nxt = sig[i + 1] if i + 1 < len(sig) else None
        if low in _CALLS and _is_op(nxt, "("):
            raise Refused(f"calls {name.upper()}(): {_CALLS[low]}")
        if t.kind == "word" and low in words:
            raise Refused(f"holds {name.upper()}: {words[low]}")
    quals = _qualifiers(sig)
    system = sorted(q for q in quals if is_system_schema(q))
    if system:
        raise Refused(f"names the system schema '{system[0]}'")
    return quals


def _main_verb(sig: Sequence[Token]) -> str:
    """The statement's verb: its first word (past opening parentheses), and for ``WITH``
    the first DML word outside the parentheses of its common table expressions."""
    i = 0
    while i < len(sig) and _is_op(sig[i], "("):
        i += 1
    if i == len(sig) or sig[i].kind != "word":
        raise Refused("does not start with a statement keyword")
    verb = sig[i].text.lower()
    if verb != "with":
        return verb
    depth = 0
    for t in sig[i + 1 :]:
        if _is_op(t, "("):
            depth += 1
        elif _is_op(t, ")"):
            depth -= 1
        elif depth == 0 and t.kind == "word" and t.text.lower() in DML - {"with"}:
            return t.text.lower()
    raise Refused("WITH is not followed by a statement")


def _savepoint_name(rest: Sequence[Token]) -> None:
    if len(rest) != 1 or rest[0].kind not in ("word", "ident"):
        raise Refused("a savepoint statement must name one savepoint")


def _check_transaction(verb: str, rest: Sequence[Token]) -> None:
    """Transaction control, in the forms a client issues (nothing that ends the
    connection, no MariaDB compound statement)."""
    words = [t.text.lower() if t.kind == "word" else t.text for t in rest]
    if verb == "begin" and words in ([], ["work"]):
        return
    if verb == "start" and words[:1] == ["transaction"]:
        allowed = {"with", "consistent", "snapshot", "read", "write", "only", ","}
        if set(words[1:]) <= allowed:
            return
    if verb in ("commit", "rollback"):
        if any(w == "release" and words[k - 1 : k] != ["no"] for k, w in enumerate(words)):
            raise Refused(f"{verb.upper()} ... RELEASE would end the replay's connection")
        if verb == "rollback" and "to" in words:
            at = words.index("to")
            if set(words[:at]) <= {"work"}:
                tail = rest[at + 1 :]
                if tail and tail[0].kind == "word" and tail[0].text.lower() == "savepoint":
                    tail = tail[1:]
                _savepoint_name(tail)
                return
        elif set(words) <= {"work", "and", "no", "chain", "release"}:
            return
    if verb == "savepoint":
        _savepoint_name(rest)
        return
    if verb == "release" and words[:1] == ["savepoint"]:
        _savepoint_name(rest[1:])
        return
    shown = " ".join([verb.upper(), *(w.upper() for w in words[:3])])
    raise Refused(f"'{shown}' is not transaction control a replay issues")


def _check_dml(toks: Sequence[Token]) -> Verdict:
    if any(t.kind == "exec_open" for t in toks):
        raise Refused("holds an executable comment (/*! or /*M!): the server runs what it holds")
    _check_code_chars(toks)
    sig = _one_statement(toks)
    if not sig:
        raise Refused("holds no statement")
    verb = _main_verb(sig)
    if verb in TRANSACTION:
        _check_transaction(verb, sig[1:])
        return Verdict(verb, False, frozenset())
    if verb not in DML:
        raise Refused(f"{verb.upper()} is not replayed: {_VERB_REASONS.get(verb, _NOT_DML)}")
    quals = _check_names(sig, _WORDS)
    return Verdict(verb, verb in WRITES, frozenset(quals))


@lru_cache(maxsize=1 << 16)
def check_statement(sql: str) -> Verdict:
    """The verdict on a statement a replay would issue, or ``Refused`` saying why not."""
    check_text(sql)
    verdicts = [_check_dml(tokens(sql, mode)) for mode in _modes(sql)]
    return Verdict(
        verdicts[0].verb,
        any(v.writes for v in verdicts),
        frozenset().union(*(v.qualifiers for v in verdicts)),
    )


def refusal(sql: str) -> str | None:
    """Why a replay must not issue ``sql`` (None: it may)."""
    try:
        check_statement(sql)
    except Refused as exc:
        return str(exc)
    return None


def class_refusal(schema: str, statements: Iterable[str]) -> str | None:
    """Why a class run in ``schema`` (its connection's default schema, "" for none) with
    these statements is not replayed: a statement refused, a system schema, or a write
    without a schema (it would land in whatever schema the replay's connection is in)."""
    if schema and not name_ok(schema):
        return "its schema's name is not one a replay may use"
    if schema and is_system_schema(schema):
        return f"it runs in the system schema '{schema}'"
    for sql in statements:
        why = refusal(sql)
        if why is not None:
            return why
        if not schema and check_statement(sql).writes:
            return "a write without a default schema would land in the replay's own schema"
    return None


def foreign_qualifiers(statements: Iterable[str], foreign: Iterable[str]) -> str | None:
    """The first of ``foreign`` (schemas of a server the capture does not hold) that one
    of ``statements`` names as a qualifier, compared without case (None: none does)."""
    want = {f.casefold(): f for f in foreign}
    if not want:
        return None
    for sql in statements:
        for q in check_statement(sql).qualifiers:
            hit = want.get(q.casefold())
            if hit is not None:
                return hit
    return None


# ------------------------------------------------------------------------------ DDL


def _ddl_tokens(sql: str, mode: str) -> list[Token]:
    """A DDL statement's significant tokens, an executable comment's content as code."""
    toks = [t for t in tokens(sql, mode) if t.kind not in ("exec_open", "exec_close")]
    _check_code_chars(toks)
    return _one_statement(toks)


def _words(sig: Sequence[Token], n: int) -> list[str]:
    return [t.text.lower() if t.kind == "word" else "" for t in sig[:n]]


def _if_not_exists(sig: Sequence[Token], at: int) -> int:
    """The position after an ``IF NOT EXISTS`` at ``at`` (``at`` when there is none)."""
    return at + 3 if _words(sig[at:], 3) == ["if", "not", "exists"] else at


def _check_create_database(sig: Sequence[Token], schema: str) -> None:
    if _words(sig, 2) not in (["create", "database"], ["create", "schema"]):
        raise Refused("the first DDL statement of a schema must be its CREATE DATABASE")
    at = _if_not_exists(sig, 2)
    if at >= len(sig) or sig[at].name != schema:
        raise Refused(f"CREATE DATABASE does not create schema '{schema}' itself")
    options = {"default", "character", "set", "charset", "collate", "encryption", "comment"}
    for i, t in enumerate(sig[at + 1 :], start=at + 1):
        prev = sig[i - 1]
        value = _is_op(prev, "=") or (
            prev.kind == "word" and prev.text.lower() in ("set", "charset", "collate")
        )
        if t.kind in ("string", "dq") or _is_op(t, "="):
            continue
        if t.kind in ("word", "ident") and (value or t.text.lower() in options):
            continue
        raise Refused(f"CREATE DATABASE holds {t.text!r}, which is no database option")


def _check_create_table(sig: Sequence[Token], schema: str, tables: Sequence[str]) -> None:
    if _words(sig, 2) != ["create", "table"]:
        shown = " ".join(t.text for t in sig[:3])[:40]
        raise Refused(f"'{shown}' is not a CREATE TABLE (a schema's DDL creates its tables)")
    at = _if_not_exists(sig, 2)
    name = sig[at].name if at < len(sig) else None
    if at + 2 < len(sig) and _is_op(sig[at + 1], "."):
        if name != schema:
            raise Refused(f"CREATE TABLE creates a table in schema '{name}', not '{schema}'")
        at += 2
        name = sig[at].name
    if name is None or name not in tables:
        raise Refused(f"CREATE TABLE creates {name!r}, which is not a table of '{schema}'")
    if not _is_op(sig[at + 1] if at + 1 < len(sig) else None, "("):
        raise Refused("CREATE TABLE must define its columns (no LIKE, no SELECT)")
    body = sig[at + 1 :]
    quals = _check_names(body, _DDL_WORDS)
    other = sorted(q for q in quals if q != schema)
    if other:
        raise Refused(f"CREATE TABLE refers to schema '{other[0]}', not '{schema}'")
    for i, t in enumerate(body):
        if t.kind == "word" and t.text.lower() == "engine":
            j = i + 2 if _is_op(body[i + 1] if i + 1 < len(body) else None, "=") else i + 1
            engine = body[j].name if j < len(body) else None
            if engine is None and j < len(body) and body[j].kind == "string":
                engine = body[j].text.strip("'")
            if engine is None or engine.lower() not in ENGINES:
                raise Refused(f"ENGINE={engine}: the table's data would live outside the server")


def check_schema_ddl(schema: str, tables: Sequence[str], ddl: Sequence[str]) -> None:
    """A schema's captured DDL: ``CREATE DATABASE`` of ``schema`` first, then
    ``CREATE TABLE`` of tables of ``tables`` only (see the module docstring)."""
    for i, sql in enumerate(ddl):
        check_text(sql)
        for mode in _modes(sql):
            sig = _ddl_tokens(sql, mode)
            if i == 0:
                _check_create_database(sig, schema)
            else:
                _check_create_table(sig, schema, tables)
