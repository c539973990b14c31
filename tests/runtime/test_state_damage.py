"""A damaged, tampered-with, removed or replaced state.db is a clear one-line error and exit 2,
never an internal error, and harnessc leaves the file as it found it (issue 7). Real SQLite,
real CLI."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from . import virtual
from .helpers import SIMPLE_CONTRACT, node, spawn, write_project


def run_project(root: Path, n: int = 60) -> Path:
    """A project whose run finished: state.db holds n tasks and their attempts. The db path."""
    write_project(root, [node(f"t{i}", contract="summary") for i in range(n)],
                  contracts={"summary": SIMPLE_CONTRACT}, concurrency=8)
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 0, r.stdout + r.stderr
    db = root / ".harness" / "state.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    con.close()
    return db


@pytest.fixture(scope="module")
def ran_project(tmp_path_factory):
    """run_project(root, n) for each test, run once per size in this module and copied."""
    made: dict[int, Path] = {}

    def copy(root: Path, n: int = 60) -> Path:
        if n not in made:
            made[n] = tmp_path_factory.mktemp(f"ran{n}") / "p"
            run_project(made[n], n)
        shutil.copytree(made[n], root, dirs_exist_ok=True)
        return root / ".harness" / "state.db"

    return copy


def overwrite_page(db: Path, name: str, seed: int) -> None:
    """Random bytes over one leaf page of table or index `name`."""
    con = sqlite3.connect(db)
    pages = [r[0] for r in con.execute("SELECT pageno FROM dbstat WHERE name=? AND pagetype='leaf'", (name,))]
    size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    assert pages, f"no leaf page for {name}"
    rng = random.Random(seed)
    with open(db, "r+b") as f:
        f.seek((rng.choice(pages) - 1) * size)
        f.write(rng.randbytes(size))


def assert_clear_error(r, *words: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith("harnessc: error: .harness/state.db"), r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


# an index page went unnoticed (answers silently wrong), a table page was an internal error
@pytest.mark.parametrize("name", ["tasks", "attempts", "attempts_task", "sqlite_autoindex_tasks_1"])
def test_random_bytes_over_a_page(ran_project, tmp_path: Path, name: str) -> None:
    db = ran_project(tmp_path)
    overwrite_page(db, name, seed=7)
    damaged = db.read_bytes()
    for cmd in (["status"], ["log", "t1"], ["run", "--no-build"], ["reset", "--all"]):
        assert_clear_error(virtual.harnessc(tmp_path, *cmd), "move it aside")
    assert db.read_bytes() == damaged  # never repaired or reset behind the user's back


@pytest.mark.parametrize("version, words", [
    ("abc", "bad schema version 'abc'"), ("0", "bad schema version '0'"), ("-1", "bad schema version"),
    ("99", "newer than this harnessc"),
])
def test_wrong_schema_version(ran_project, tmp_path: Path, version: str, words: str) -> None:
    db = ran_project(tmp_path, n=3)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (version,))
    assert_clear_error(virtual.harnessc(tmp_path, "status"), words)


def test_dropped_table(ran_project, tmp_path: Path) -> None:
    db = ran_project(tmp_path, n=3)
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE ledger")
    assert_clear_error(virtual.harnessc(tmp_path, "run", "--no-build"), "lost its ledger table")
    assert_clear_error(virtual.harnessc(tmp_path, "status"), "lost its ledger table")


@pytest.mark.parametrize("sql, cmd, words", [
    ("UPDATE tasks SET output='{\"title\": ' WHERE id='t1'", ["status"], "task t1's output is not valid JSON"),
    ("UPDATE attempts SET errors='[' WHERE task_id='t1'", ["log", "t1"], "'s errors is not valid JSON"),
    ("UPDATE runs SET options='{nope'", ["status"], "'s options is not valid JSON"),
])
def test_bad_json_in_a_row(ran_project, tmp_path: Path, sql: str, cmd: list[str], words: str) -> None:
    db = ran_project(tmp_path, n=3)
    with sqlite3.connect(db) as con:
        con.execute(sql)
    assert_clear_error(virtual.harnessc(tmp_path, *cmd), words)


# Values of the wrong kind were a TypeError or ValueError in status, log, stats or retry (issue 17).
# A number or text column is checked when state.db is opened; a JSON column where it is read.
EVERY = ("status", "log", "stats", "retry", "run")


@pytest.mark.parametrize("sql, words, readers", [
    ("UPDATE tasks SET cost_usd='abc' WHERE id='t1'", "tasks row 't1' holds str 'abc' in cost_usd, a number column",
     EVERY),
    ("UPDATE tasks SET attempts='x' WHERE id='t2'", "tasks row 't2' holds str 'x' in attempts, an integer column",
     EVERY),
    ("UPDATE runs SET started_at='yesterday'", "holds str 'yesterday' in started_at", EVERY),
    ("UPDATE attempts SET latency=9e999 WHERE task_id='t1'", "holds float inf in latency", EVERY),
    ("UPDATE attempts SET agent=x'00ff' WHERE task_id='t1'", "holds bytes b'\\x00\\xff' in agent, a text column",
     EVERY),
    ("UPDATE meta SET value='" + "9" * 5000 + "' WHERE key='schema_version'", "bad schema version '99999", EVERY),
    ("UPDATE runs SET options='NaN'", "'s options is not a JSON object", ("status", "retry")),
    ("UPDATE attempts SET errors='3' WHERE task_id='t1'", "'s errors is not a JSON list", ("log",)),
])
def test_a_value_of_the_wrong_kind_is_damage_named_by_its_row(ran_project, tmp_path: Path, sql: str, words: str,
                                                               readers: tuple) -> None:
    db = ran_project(tmp_path, n=3)
    con = sqlite3.connect(db)
    with con:
        con.execute(sql)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    damaged = db.read_bytes()
    for cmd in (["status"], ["log", "t1"], ["stats"], ["retry", "--no-build"], ["run", "--no-build"]):
        r = virtual.harnessc(tmp_path, *cmd)
        if cmd[0] in readers:
            assert_clear_error(r, words, "move it aside")
            assert len(r.stderr.splitlines()) == 1, r.stderr
        else:  # a command that does not read the damaged value works as usual
            assert r.returncode == 0 and not r.stderr, r
    assert db.read_bytes() == damaged


def _succeeded(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM tasks WHERE state='succeeded'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_state_db_removed_or_replaced_mid_run(tmp_path: Path, how: str) -> None:
    # the run used to go on writing into the unlinked file and report success
    write_project(tmp_path, [node(f"t{i}") for i in range(30)], concurrency=1,
                  agents={"rehearsal": {"provider": "simulate", "latency": 0.2}})
    db = tmp_path / ".harness" / "state.db"
    p = spawn(tmp_path, "run", "--no-build")
    try:
        deadline = time.monotonic() + 60
        while _succeeded(db) < 2:
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        if how == "removed":
            db.unlink()
        else:
            shutil.copy(db, tmp_path / "copy.db")
            os.replace(tmp_path / "copy.db", db)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2, out + err
    last = out.strip().splitlines()[-1]
    assert last.startswith("error: ") and f".harness/state.db was {how}" in last, out + err
    assert "internal error" not in err and "Traceback" not in err


# ------------------------------------------------------------------ fuzzing every column

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

# what a tampered or damaged row may hold: every SQLite kind, and text that is nearly JSON
JSONISH = ["{}", "[]", "3", "NaN", "-Infinity", '"x"', "null", '{"a": 1}', "[1]", '{"score": "x"}',
           '[{"id": 3}]', '{"error": [1]}', "9" * 5000, "-1", "1e999", ""]
VALUES = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.floats(), st.text(max_size=20),
                   st.binary(max_size=8), st.sampled_from(JSONISH))
COMMANDS = (["status"], ["status", "--output", "json"], ["log", "t1"], ["log", "t1", "--output", "json"],
            ["stats"], ["retry", "--no-build"])


@pytest.fixture(scope="module")
def ran_once(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz") / "p"
    run_project(root, n=3)
    return root


def _columns(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'"
                                            " AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return [(t, r[1]) for t in tables for r in con.execute(f"PRAGMA table_info({t})")]
    finally:
        con.close()


def _in_process(root: Path, *args: str) -> tuple[int, str]:
    """harnessc's main() in this process: (exit code, stderr)."""
    import contextlib
    import io
    import sys

    from harnessc.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["harnessc", "-C", str(root), *args]
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv = argv
    return (code if isinstance(code, int) else 2 if code else 0), err.getvalue()


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_in_any_column_is_output_or_the_damaged_store_error(ran_once: Path, data, tmp_path: Path) -> None:
    """Random values in random columns of every table: status, log, stats and retry give
    their normal output or the one-line damaged-store error, never an internal error."""
    import tempfile

    root = Path(tempfile.mkdtemp(dir=tmp_path)) / "p"
    shutil.copytree(ran_once, root)
    db = root / ".harness" / "state.db"
    columns = _columns(db)
    con = sqlite3.connect(db)
    changed = 0
    for table, column in data.draw(st.lists(st.sampled_from(columns), min_size=1, max_size=3), label="columns"):
        value = data.draw(VALUES, label=f"{table}.{column}")
        every = data.draw(st.booleans(), label="every row")
        try:
            with con:
                where = "" if every else f" WHERE rowid=(SELECT min(rowid) FROM {table})"
                changed += con.execute(f'UPDATE {table} SET "{column}"=?{where}', (value,)).rowcount
        except sqlite3.IntegrityError:  # NOT NULL, a repeated primary key: SQLite's own checks hold
            pass
    con.close()
    for cmd in COMMANDS:
        code, err = _in_process(root, *cmd)
        assert "internal error" not in err and "Traceback" not in err, (cmd, err)
        if code == 2:
            assert err.startswith("harnessc: error: ") and len(err.strip().splitlines()) <= 2, (cmd, err)
        else:
            assert code in (0, 1, 3), (cmd, code, err)
