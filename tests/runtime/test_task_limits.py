"""A task's limits and its agents' daily limits hold across resets and resumes; contract
constraints act; a task's end and a limit coming near are alerts as they happen.

Real CLI runs against real SQLite; kill -9 of a real `harnessc run`. Process timeouts are
generous so a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import textwrap
import time

import pytest

from .helpers import PY, harnessc, node, spawn, write_project


def _task_rows(root) -> dict[str, dict]:
    r = harnessc(root, "status", "--json")
    assert r.returncode == 0, r.stderr
    return {t["id"]: t for t in json.loads(r.stdout)["tasks"]}


def _alerts(root) -> list[dict]:
    path = root / ".harness" / "alerts.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ------------------------------------------------------------------ 7: reset keeps the day's usage

@pytest.mark.parametrize("reset", [["--all"], ["a", "b"]])
def test_a_reset_does_not_give_back_an_agents_daily_calls(tmp_path, reset):
    agents = {"opus": {"provider": "simulate", "limits": {"daily_calls": 2}}}
    route = {"agent": "opus", "chain": ["opus"]}
    write_project(tmp_path, [node("a", routing=route, limits={"max_time": 5}),
                             node("b", routing=route, limits={"max_time": 5})], agents=agents)
    first = harnessc(tmp_path, "run")
    assert first.returncode == 0, first.stdout + first.stderr
    r = harnessc(tmp_path, "reset", *reset)
    assert r.returncode == 0, r.stderr
    again = harnessc(tmp_path, "run")
    assert again.returncode == 1, again.stdout + again.stderr
    rows = _task_rows(tmp_path)
    for tid in ("a", "b"):  # the third call of the day is refused: the agent is at its limit
        assert rows[tid]["state"] == "failed"
        assert "agent 'opus' reached its daily calls limit (2 of 2 today)" in rows[tid]["error"]
    con = sqlite3.connect(tmp_path / ".harness" / "state.db")
    assert con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 0  # no call was made


# ------------------------------------------------------------------ 8: a task's limits across a kill -9

def _db(root) -> sqlite3.Connection:
    return sqlite3.connect(root / ".harness" / "state.db", timeout=10)


def _wait_for(check, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except sqlite3.OperationalError:  # not created yet
            pass
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def _kill_9(p) -> None:
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=30)


def test_max_iterations_counts_the_iterations_before_a_kill_9(tmp_path):
    agents = {"slow": {"provider": "simulate", "latency": 0.2, "complete_after": 1000}}  # never claims
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "slow"},
                                  limits={"max_iterations": 6, "stuck_after": 100})], agents=agents)
    p = spawn(tmp_path, "run")
    _wait_for(lambda: _db(tmp_path).execute("SELECT COUNT(*) FROM attempts WHERE status='progress'").fetchone()[0] >= 3,
              "three iterations")
    _kill_9(p)
    r = harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    row = _task_rows(tmp_path)["t"]
    assert row["state"] == "failed" and row["error"] == "max_iterations (6) reached without a verified result"
    statuses = [s for (s,) in _db(tmp_path).execute("SELECT status FROM attempts ORDER BY id")]
    # an attempt the kill interrupted starts its iteration again; every other one counts
    assert len([s for s in statuses if s != "interrupted"]) == 6, statuses
    assert statuses.count("interrupted") <= 1


SLEEPER = textwrap.dedent("""
    import pathlib, sys, time
    pathlib.Path(sys.argv[1]).write_text("called")
    time.sleep(120)
""")


def test_max_time_counts_the_running_time_before_a_kill_9(tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    started = tmp_path / "started"
    agents = {"sleeper": {"provider": "command", "command": [PY, str(tmp_path / "sleeper.py"), str(started)]}}
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "sleeper"},
                                  limits={"max_time": 10}, retry={"max_retries": 0})], agents=agents)
    p = spawn(tmp_path, "run")
    _wait_for(started.exists, "the agent's call")
    time.sleep(6)  # most of the task's 10 s
    _kill_9(p)
    saved = _db(tmp_path).execute("SELECT running_s FROM tasks WHERE id='t'").fetchone()[0]
    assert saved >= 4, saved  # saved every second while it ran
    r = harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    row = _task_rows(tmp_path)["t"]
    assert row["state"] == "failed", row  # its call ran out of the task's time
    (resumed,) = _db(tmp_path).execute(
        "SELECT latency FROM attempts WHERE status != 'interrupted' ORDER BY id").fetchall()
    # the resumed call had what was left of the 10 s (about 4 s), not a fresh 10 s
    assert resumed[0] < 10 - saved + 2, (resumed, saved)
