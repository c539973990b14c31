"""A task's limits and its agents' daily limits hold across resets and resumes; contract
constraints act; a task's end and a limit coming near are alerts as they happen.

Real CLI runs against real SQLite; kill -9 of a real `harnessc run`. Process timeouts are
generous so a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from .helpers import harnessc, node, write_project


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
