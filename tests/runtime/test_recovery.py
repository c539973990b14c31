"""The recovery ladder of a stuck task (runtime/recovery.py): mutations, escalation, a human."""

from __future__ import annotations

import json
import sqlite3

from .helpers import harnessc, node, write_project

STUCK = {"provider": "simulate", "complete_after": 99, "progress": "none"}  # the same text, never a claim


def rows(root, sql: str, *args) -> list:
    return sqlite3.connect(root / ".harness" / "state.db").execute(sql, args).fetchall()


def test_a_stuck_task_climbs_mutations_then_escalation_then_is_blocked_for_a_human(tmp_path):
    write_project(tmp_path, [node("loop", completion_promise="DONE", routing={"agent": "weak", "chain": ["strong"]},
                                  limits={"stuck_after": 2}),
                             node("after", depends_on=["loop"]), node("other")],
                  agents={"weak": STUCK, "strong": STUCK}, loop={"recovery": {"prompt_mutations": 2}})
    r = harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    steps = [(json.loads(d)["step"], json.loads(d)["mutation"])
             for (d,) in rows(tmp_path, "SELECT data FROM events WHERE kind='recovery' ORDER BY id")]
    assert steps == [("mutate", "rephrase"), ("mutate", "decompose"), ("escalate", None), ("human", None)]
    prompts = [p for (p,) in rows(tmp_path, "SELECT prompt FROM attempts WHERE task_id='loop' ORDER BY id")]
    assert len(prompts) == 8  # 2 iterations per rung
    assert prompts[2].startswith("## Recovery (rephrase)") and prompts[4].startswith("## Recovery (decompose)")
    assert "Why: 2 iterations in a row with identical output and no file changed" in prompts[2]
    agents = [a for (a,) in rows(tmp_path, "SELECT agent FROM attempts WHERE task_id='loop' ORDER BY id")]
    assert agents == ["weak"] * 6 + ["strong"] * 2
    tasks = {t["id"]: t for t in json.loads(harnessc(tmp_path, "status", "--output", "json").stdout)["tasks"]}
    assert tasks["loop"]["state"] == "blocked" and "harnessc tell loop" in tasks["loop"]["error"]
    assert tasks["after"]["state"] == "skipped" and tasks["other"]["state"] == "succeeded"
    assert "blocked: loop" in r.stdout and "harnessc retry" in r.stdout
    alerts = [json.loads(line) for line in (tmp_path / ".harness" / "alerts.log").read_text().splitlines()]
    kinds = [a["kind"] for a in alerts if a["task"] == "loop"]
    assert kinds.count("stuck") == 4 and kinds.count("recovery") == 4 and kinds.count("blocked") == 1
    # a human steps in: retry runs the blocked task again (here it is still stuck)
    assert harnessc(tmp_path, "tell", "loop", "stop repeating yourself").returncode == 0
    again = harnessc(tmp_path, "retry")
    assert again.returncode == 1 and "loop" in again.stdout, again.stdout + again.stderr
    retried = rows(tmp_path, "SELECT prompt FROM attempts WHERE task_id='loop' ORDER BY id")[8][0]
    assert "stop repeating yourself" in retried
    assert len(rows(tmp_path, "SELECT id FROM attempts WHERE task_id='loop'")) > 8


def test_without_a_human_rung_the_stuck_task_fails(tmp_path):
    write_project(tmp_path, [node("loop", completion_promise="DONE", routing={"agent": "weak"},
                                  limits={"stuck_after": 2})], agents={"weak": STUCK},
                  loop={"recovery": {"prompt_mutations": 0, "escalate": True, "human": False}})
    r = harnessc(tmp_path, "run")
    assert r.returncode == 1
    task = json.loads(harnessc(tmp_path, "status", "--output", "json").stdout)["tasks"][0]
    assert task["state"] == "failed" and "after every recovery step" in task["error"]
    # no chain to escalate along: escalation is passed over
    steps = [json.loads(d)["step"] for (d,) in rows(tmp_path, "SELECT data FROM events WHERE kind='recovery'")]
    assert steps == ["give_up"]
