"""state.db's layout, and what a database must be before the store uses it.

The tables (SCHEMA, at SCHEMA_VERSION) and the migration from each older version; on open
(prepare), the checks: harnessc's database (its app id), a schema version this harnessc
knows, every table there, no damaged page, every value of its column's kind. A database
that fails one is never repaired or reset: the StateError says what to do (SET_ASIDE).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable

from ...errors import HarnesscError

SCHEMA_VERSION = 8
APP_ID = "harnessc-state"


class StateError(HarnesscError):
    """The state database cannot be used as is; the message says why and what to do."""


class NoState(StateError):
    """Nothing has run yet: no state.db, or one a starting run has not initialised yet."""


TABLES = ("meta", "runs", "tasks", "attempts", "ledger", "events")
# What to do with a state database harnessc cannot use: it never repairs or resets one itself.
SET_ASIDE = "restore it from a backup, or move it aside to start fresh — it was left untouched"


SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
  id TEXT PRIMARY KEY, started_at REAL NOT NULL, ended_at REAL, status TEXT NOT NULL,
  pid INTEGER, options TEXT, exit_code INTEGER, message TEXT);
CREATE TABLE tasks (
  id TEXT PRIMARY KEY, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
  iterations INTEGER NOT NULL DEFAULT 0, agent TEXT, tokens INTEGER NOT NULL DEFAULT 0,
  cost_usd REAL NOT NULL DEFAULT 0, error TEXT, output TEXT, fingerprint TEXT, run_id TEXT,
  started_at REAL, finished_at REAL, updated_at REAL, running_s REAL NOT NULL DEFAULT 0, filled TEXT);
CREATE TABLE attempts (
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, task_id TEXT NOT NULL,
  iteration INTEGER NOT NULL, level INTEGER NOT NULL DEFAULT 0, agent TEXT,
  prompt_hash TEXT, prompt TEXT, raw_output TEXT, parsed_output TEXT, errors TEXT, checks TEXT,
  input_tokens INTEGER, output_tokens INTEGER, cost_usd REAL, latency REAL,
  status TEXT NOT NULL, started_at REAL NOT NULL, finished_at REAL,
  proc_marker TEXT, proc_pid INTEGER, proc_start INTEGER,
  uncached_input_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,
  reasoning_tokens INTEGER, cost_source TEXT, progress TEXT, denials TEXT, tool_calls INTEGER);
CREATE INDEX attempts_task ON attempts(task_id, id);
CREATE TABLE ledger (
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, task_id TEXT NOT NULL,
  attempt_id INTEGER, reserved REAL NOT NULL, actual REAL, settled INTEGER NOT NULL DEFAULT 0,
  ts REAL NOT NULL, kind TEXT, agent TEXT, tokens INTEGER);
CREATE INDEX ledger_task ON ledger(task_id);
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, ts REAL NOT NULL, kind TEXT NOT NULL,
  task_id TEXT, data TEXT);
CREATE TABLE loop_state (task_id TEXT PRIMARY KEY, data TEXT NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE daily_usage (agent TEXT NOT NULL, ts REAL NOT NULL, calls INTEGER NOT NULL,
  tokens INTEGER NOT NULL, cost_usd REAL NOT NULL);
"""

# Each step takes the database from version N to N+1 (the key), in one transaction.
MIGRATIONS = {
    # 1 -> 2: the child process of an attempt (marker, pid, start time), so a resumed run
    # can end what a killed run left behind (see reaper.py).
    1: ("ALTER TABLE attempts ADD COLUMN proc_marker TEXT",
        "ALTER TABLE attempts ADD COLUMN proc_pid INTEGER",
        "ALTER TABLE attempts ADD COLUMN proc_start INTEGER"),
    # 2 -> 3: the usage ledger of each attempt. input_tokens stays ALL input; these split it
    # (uncached + cache read + cache write), count the reasoning part of output_tokens, and
    # say where cost_usd came from (agents.usage.COST_SOURCES). Older attempts keep NULL: their
    # split was never recorded.
    2: ("ALTER TABLE attempts ADD COLUMN uncached_input_tokens INTEGER",
        "ALTER TABLE attempts ADD COLUMN cache_read_tokens INTEGER",
        "ALTER TABLE attempts ADD COLUMN cache_write_tokens INTEGER",
        "ALTER TABLE attempts ADD COLUMN reasoning_tokens INTEGER",
        "ALTER TABLE attempts ADD COLUMN cost_source TEXT"),
    # 3 -> 4: loop tasks - each attempt's progress evidence (JSON), and per task what the
    # next iteration carries over (memory, progress history; see runtime/loop/loop.py).
    3: ("ALTER TABLE attempts ADD COLUMN progress TEXT",
        "CREATE TABLE IF NOT EXISTS loop_state (task_id TEXT PRIMARY KEY, data TEXT NOT NULL,"
        " updated_at REAL NOT NULL)"),
    # 4 -> 5: calls that are not attempts - a cheap agent writing a prompt mutation or a memory
    # summary (runtime/loop/assist.py) - charged in the ledger with their kind, agent and tokens
    # (NULL on an attempt's row: the attempt holds those).
    4: ("ALTER TABLE ledger ADD COLUMN kind TEXT",
        "ALTER TABLE ledger ADD COLUMN agent TEXT",
        "ALTER TABLE ledger ADD COLUMN tokens INTEGER"),
    # 5 -> 6: the tool calls a CLI agent's permissions refused during the attempt (JSON list
    # of {tool, target}; NULL: none, or recorded before this column).
    5: ("ALTER TABLE attempts ADD COLUMN denials TEXT",),
    # 6 -> 7: limits that hold across resets and resumes (runtime/routing/tasklimits.py) - the task's
    # running time in its current round of runs, each attempt's tool calls as its agent
    # reported them (NULL: not reported), and the agents' calls of the last days that a
    # `reset` forgot, still counted by their daily limits.
    6: ("ALTER TABLE tasks ADD COLUMN running_s REAL NOT NULL DEFAULT 0",
        "ALTER TABLE attempts ADD COLUMN tool_calls INTEGER",
        "CREATE TABLE IF NOT EXISTS daily_usage (agent TEXT NOT NULL, ts REAL NOT NULL, calls INTEGER NOT NULL,"
        " tokens INTEGER NOT NULL, cost_usd REAL NOT NULL)"),
    # 7 -> 8: a degraded task's fallback output says which fields came from the contract
    # (default, example) instead of the agent's answer: [{field, from, was}] (JSON).
    7: ("ALTER TABLE tasks ADD COLUMN filled TEXT",),
}


def prepare(db: sqlite3.Connection, rel: str, create: bool, tx: Callable[[], Any]) -> None:
    """Check the database `rel` names and bring it to SCHEMA_VERSION: the tables created in an
    empty one (when `create`), an older one migrated (each step in a `tx()` transaction).
    NoState when there is nothing yet and not `create`, StateError when it cannot be used."""
    _check_and_init(db, rel, create, tx)
    _check_pages(db, rel)
    _check_types(db, rel)


def _check_and_init(db: sqlite3.Connection, rel: str, create: bool, tx: Callable[[], Any]) -> None:
    db.execute("PRAGMA busy_timeout=10000")
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        if not create:
            raise NoState(f"{rel} is empty: nothing has run in this project")
        db.execute("PRAGMA journal_mode=WAL")
        with tx():
            for stmt in SCHEMA.strip().split(";"):
                if stmt.strip():
                    db.execute(stmt)
            db.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', ?)",
                       (APP_ID, str(SCHEMA_VERSION)))
    elif "meta" not in tables:
        raise StateError(
            f"{rel} is not a harnessc state database (no meta table); it was left untouched"
        )
    meta = {r[0]: r[1] for r in db.execute("SELECT key, value FROM meta")}
    if meta.get("app") != APP_ID:
        raise StateError(f"{rel} is not a harnessc state database; it was left untouched")
    version = meta.get("schema_version", "")
    if not (isinstance(version, str) and version.isascii() and version.isdigit() and len(version) <= 9
            and int(version) >= 1):
        raise StateError(f"{rel} has a bad schema version {version!r}; {SET_ASIDE}")
    version = int(version)
    missing = [t for t in TABLES if t not in tables] if tables else []  # [] when just created
    if missing:
        raise StateError(f"{rel} has lost its {', '.join(missing)} table(s); {SET_ASIDE}")
    if version > SCHEMA_VERSION:
        raise StateError(
            f"{rel} has schema version {version}, newer than this harnessc understands "
            f"({SCHEMA_VERSION}); upgrade harnessc"
        )
    if version < SCHEMA_VERSION:
        _migrate(db, rel, version, tx)
    db.execute("PRAGMA journal_mode=WAL")
    # WAL + synchronous=NORMAL: a commit is durable across a process crash (kill -9: the
    # WAL is in the OS page cache and replayed on open) without an fsync per commit; only
    # a power loss or OS crash can drop the last commits, never corrupt the database.
    db.execute("PRAGMA synchronous=NORMAL")


def _migrate(db: sqlite3.Connection, rel: str, version: int, tx: Callable[[], Any]) -> None:
    """Bring an older database up to SCHEMA_VERSION, one step per transaction."""
    while version < SCHEMA_VERSION:
        steps = MIGRATIONS.get(version)
        if steps is None:
            raise StateError(f"{rel} has schema version {version}, which this harnessc "
                             "cannot upgrade; move it aside to start fresh")
        with tx():
            for stmt in steps:
                db.execute(stmt)
            version += 1
            db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))


def _check_pages(db: sqlite3.Connection, rel: str) -> None:
    """PRAGMA quick_check: a damaged table or index page is found now, not as an internal
    error or a wrong answer mid-run (2-15 ms for the 1.4 MB state.db of a 1,000-task run)."""
    problems = [r[0] for r in db.execute("PRAGMA quick_check(1)")]
    if problems != ["ok"]:
        first = " ".join(problems[0].replace("*** in database main ***", "").split())
        raise StateError(f"{rel} is damaged ({first}); {SET_ASIDE}")


# What each declared column type may hold (NULL where the schema allows it: NOT NULL is
# SQLite's own check); a number is finite, as harnessc writes them.
_FINITE = "abs({c}) <= 1e300"
_TYPE_CHECKS = {
    "INTEGER": "typeof({c}) IN ('integer', 'null')",
    "REAL": f"typeof({{c}}) = 'null' OR (typeof({{c}}) IN ('integer', 'real') AND {_FINITE})",
    "TEXT": "typeof({c}) IN ('text', 'null')",
}

_KIND_WORDS = {"INTEGER": "an integer", "REAL": "a number", "TEXT": "a text"}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fits(value: Any, kind: str) -> bool:
    """The Python side of _TYPE_CHECKS, to name the column at fault."""
    if value is None:
        return True
    if kind == "INTEGER":
        return type(value) is int
    if kind == "REAL":
        return type(value) in (int, float) and abs(value) <= 1e300
    return type(value) is str


def _check_types(db: sqlite3.Connection, rel: str) -> None:
    """Every value of the kind its column holds (SQLite stores text in a REAL column as
    text): one scan a table, after quick_check read every page anyway. A value harnessc
    never writes - text in a number column, a number or bytes in a text column, an
    infinite number - is damage, reported with its row, not a TypeError in `status`."""
    for table in (*TABLES, "loop_state"):
        columns = [(r[1], r[2].upper(), r[5]) for r in db.execute(f"PRAGMA table_info({table})")]
        if not columns:
            continue
        wrong = [f"NOT ({_TYPE_CHECKS[kind].format(c=_quoted(name))})" for name, kind, _ in columns
                 if kind in _TYPE_CHECKS]
        # a TEXT PRIMARY KEY takes NULL in SQLite (a legacy quirk): no row of harnessc's has one
        wrong += [f"{_quoted(name)} IS NULL" for name, _, pk in columns if pk]
        key = next((name for name, _, pk in columns if pk == 1), "rowid")
        row = db.execute(f"SELECT rowid, * FROM {table} WHERE {' OR '.join(wrong)} LIMIT 1").fetchone()
        if row is None:
            continue
        label = row[key] if row[key] is not None else f"#{row[0]}"
        for name, kind, pk in columns:
            value = row[name]
            if value is None and pk:
                raise StateError(f"{rel}: {table} row {label!r} has no {name}; {SET_ASIDE}")
            if not _fits(value, kind):
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
                raise StateError(f"{rel}: {table} row {label!r} holds {type(value).__name__} "
                                 f"{shown} in {name}, {_KIND_WORDS[kind]} column; {SET_ASIDE}")
