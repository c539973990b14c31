"""A task's limits and its agents' daily limits hold across resets and resumes; contract
constraints act; a task's end and a limit coming near are alerts as they happen.

Real CLI runs against real SQLite; kill -9 of a real `harnessc run`. Process timeouts are
generous so a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import sqlite3
import textwrap
import time

import pytest

from harnessc.runtime.agents.cli_output import parse_claude, parse_codex, parse_gemini

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, env, harnessc, node, spawn, write_project


def _task_rows(root, cli=harnessc) -> dict[str, dict]:
    r = cli(root, "status", "--json")
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
    first = virtual.harnessc(tmp_path, "run")  # in virtual time at local noon: the day goes on for hours
    assert first.returncode == 0, first.stdout + first.stderr
    r = virtual.harnessc(tmp_path, "reset", *reset)
    assert r.returncode == 0, r.stderr
    again = virtual.harnessc(tmp_path, "run")
    assert again.returncode == 1, again.stdout + again.stderr
    rows = _task_rows(tmp_path, virtual.harnessc)
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
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    row = _task_rows(tmp_path)["t"]
    assert row["state"] == "failed", row
    assert row["error"].startswith("max_iterations (6) reached without a verified result; "), row["error"]
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
    # max_time 6, killed after 3 s or more of it saved: the resumed call is cut at what is left
    # (3 s or less, with 2 s for its start under load), where a fresh 6 s would pass the bound
    max_time, before_kill = 6, 3
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    started = tmp_path / "started"
    agents = {"sleeper": {"provider": "command", "command": [PY, str(tmp_path / "sleeper.py"), str(started)]}}
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "sleeper"},
                                  limits={"max_time": max_time}, retry={"max_retries": 0})], agents=agents)
    p = spawn(tmp_path, "run")
    _wait_for(started.exists, "the agent's call")

    def running_s() -> float:
        return _db(tmp_path).execute("SELECT running_s FROM tasks WHERE id='t'").fetchone()[0] or 0

    # saved every second while it ran
    _wait_for(lambda: running_s() >= before_kill, f"{before_kill} s of the task's {max_time} saved")
    _kill_9(p)
    saved = running_s()
    assert before_kill <= saved < max_time, saved
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    row = _task_rows(tmp_path)["t"]
    assert row["state"] == "failed", row  # its call ran out of the task's time
    (resumed,) = _db(tmp_path).execute(
        "SELECT latency FROM attempts WHERE status != 'interrupted' ORDER BY id").fetchall()
    # the resumed call had what was left of the 6 s, not a fresh 6 s
    assert resumed[0] < max_time - saved + 2, (resumed, saved)


# ------------------------------------------------------------------ 10: contract constraints act

def _contract(**constraints) -> dict:
    return {**SIMPLE_CONTRACT, "constraints": {"warn_threshold": 0.8, **constraints}}


def _run_with(tmp_path, agents: dict, constraints: dict, max_retries: int = 5, **env_extra):
    write_project(tmp_path, [node("t", contract="summary", routing={"agent": next(iter(agents))},
                                  retry={"max_retries": max_retries})],
                  agents=agents, contracts={"summary": _contract(**constraints)})
    return virtual.harnessc(tmp_path, "run", env=env(**env_extra) if env_extra else None)


def test_max_total_tokens_warns_near_it_then_fails_the_task_at_it(tmp_path):
    # each call of this simulate agent uses the same tokens (found by a first run)
    probe = tmp_path / "probe"
    agents = {"sim": {"provider": "simulate", "invalid_first": 100}}  # never a valid answer
    _run_with(probe, agents, {}, max_retries=0)
    (per_call,) = [t for (t,) in _db(probe).execute("SELECT input_tokens + output_tokens FROM attempts")]
    root = tmp_path / "p"
    cap = per_call * 3 + 1
    r = _run_with(root, agents, {"max_total_tokens": cap, "warn_threshold": 0.6})
    assert r.returncode == 1, r.stdout + r.stderr
    attempts = _db(root).execute("SELECT status, input_tokens + output_tokens FROM attempts ORDER BY id").fetchall()
    totals = list(itertools.accumulate(t for _, t in attempts))
    # every call until the one that passed the limit; that one fails the task
    assert totals[-1] > cap and totals[-2] <= cap, totals
    assert [s for s, _ in attempts] == ["rejected"] * (len(attempts) - 1) + ["over_limit"]
    row = _task_rows(root)["t"]
    assert row["state"] == "failed"
    assert row["error"] == f"max_total_tokens ({cap}) exceeded: the task has used {totals[-1]} tokens (contract constraints)"
    near = [a for a in _alerts(root) if a["kind"] == "approaching_limit"]
    assert [(a["level"], a["task"]) for a in near] == [("warning", "t")]  # once, when it first passed 60%
    first = next(t for t in totals if t >= 0.6 * cap)
    assert near[0]["message"] == f"max_total_tokens: {first} of {cap} tokens used ({first / cap:.0%})"


def test_max_output_tokens_per_call_fails_the_task_naming_the_numbers(tmp_path):
    agents = {"sim": {"provider": "simulate"}}
    r = _run_with(tmp_path, agents, {"max_output_tokens": 1})
    assert r.returncode == 1, r.stdout + r.stderr
    row = _task_rows(tmp_path)["t"]
    assert row["state"] == "failed"
    assert row["error"].startswith("max_output_tokens (1) exceeded: the call used ")
    assert row["error"].endswith(" output tokens (contract constraints)")
    # the answer is kept with its attempt
    (raw,) = [r for (r,) in _db(tmp_path).execute("SELECT raw_output FROM attempts")]
    assert raw.startswith("Completed t.")


GEMINI_TOOLS = {"session_id": "g1", "response": "not the JSON asked for", "stats": {
    "models": {"m": {"tokens": {"prompt": 50, "candidates": 7}}},
    "tools": {"totalCalls": 3, "totalSuccess": 3, "totalFail": 0}}}


def test_max_tool_calls_counts_what_the_cli_reports(tmp_path):
    exe = tmp_path / "bin" / "gemini"
    exe.parent.mkdir()
    exe.write_text(f"#!{PY}\nimport sys\nsys.stdout.write({json.dumps(GEMINI_TOOLS)!r})\n")
    exe.chmod(0o755)
    agents = {"gm": {"provider": "gemini-cli", "command": [str(exe)]}}
    r = _run_with(tmp_path, agents, {"max_tool_calls": 5, "warn_threshold": 0.5}, GEMINI_API_KEY="k")
    assert r.returncode == 1, r.stdout + r.stderr
    row = _task_rows(tmp_path)["t"]
    assert row["error"] == "max_tool_calls (5) exceeded: the task has used 6 tool calls (contract constraints)"
    assert [t for (t,) in _db(tmp_path).execute("SELECT tool_calls FROM attempts ORDER BY id")] == [3, 3]
    (near,) = [a for a in _alerts(tmp_path) if a["kind"] == "approaching_limit"]
    assert near["message"] == "max_tool_calls: 3 of 5 tool calls used (60%)"


def test_max_tool_calls_on_an_agent_that_does_not_report_them_is_said(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text('print(\'{"title": "t", "score": 1}\')\n')
    agents = {"cmd": {"provider": "command", "command": [PY, str(script)]}}
    r = _run_with(tmp_path, agents, {"max_tool_calls": 5})
    assert r.returncode == 0, r.stdout + r.stderr
    (unchecked,) = [a for a in _alerts(tmp_path) if a["kind"] == "limit_unchecked"]
    assert unchecked["message"] == ("max_tool_calls (5) is not checked on agent 'cmd': it does not report "
                                    "its tool calls")


def test_the_clis_tool_calls_are_read_from_their_json():
    claude = {"type": "result", "subtype": "success", "is_error": False, "result": "ok", "num_turns": 4}
    assert parse_claude(json.dumps(claude), "", 0).tool_calls == 3  # turns after the first: a lower bound
    assert parse_claude(json.dumps({**claude, "num_turns": None}), "", 0).tool_calls is None
    codex = "\n".join(json.dumps(e) for e in [
        {"type": "item.completed", "item": {"type": "command_execution", "command": "ls"}},
        {"type": "item.completed", "item": {"type": "file_change"}},
        {"type": "item.completed", "item": {"type": "reasoning", "text": "hm"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "done"}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}])
    assert parse_codex(codex, "", 0).tool_calls == 2
    assert parse_gemini(json.dumps(GEMINI_TOOLS), "", 0).tool_calls == 3
    assert parse_gemini(json.dumps({"response": "ok", "stats": {}}), "", 0).tool_calls is None


# ------------------------------------------------------------------ 14: alerts as it happens

def test_a_task_near_its_max_iterations_then_failing_is_two_alerts_as_it_happens(tmp_path):
    agents = {"sim": {"provider": "simulate", "complete_after": 1000}}  # never claims
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "sim"},
                                  limits={"max_iterations": 5, "stuck_after": 100})], agents=agents,
                  loop={"runaway": {"min_iteration_duration": 0}})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    mine = [(a["level"], a["kind"], a["message"]) for a in _alerts(tmp_path) if a["task"] == "t"]
    assert mine == [("warning", "approaching_limit", "max_iterations: iteration 4 of 5 (80%)"),
                    ("warning", "failed", "failed: max_iterations (5) reached without a verified result; "
                                          "5 calls answered without claiming completion")]
    kinds = [a["kind"] for a in _alerts(tmp_path)]
    assert kinds.index("failed") < kinds.index("run_finished")  # when it ended, not at the run's end
    # the live output says the end once: its progress line, not an alert line as well
    assert "[1/1] t failed: max_iterations (5) reached" in r.stdout
    assert "alert warning: t: failed" not in r.stdout
    assert "alert warning: t: max_iterations: iteration 4 of 5 (80%)" in r.stdout


def test_a_degraded_task_is_an_alert(tmp_path):
    agents = {"sim": {"provider": "simulate", "invalid_first": 100}}
    write_project(tmp_path, [node("t", contract="summary", routing={"agent": "sim"},
                                  retry={"max_retries": 0, "on_failure": "fallback"})],
                  agents=agents, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    (degraded,) = [a for a in _alerts(tmp_path) if a["kind"] == "degraded"]
    assert (degraded["level"], degraded["task"]) == ("warning", "t")
    assert degraded["message"].startswith("degraded (fallback): 1 call failed verification")
    assert "alert warning: t: degraded" not in r.stdout


def test_a_task_near_its_max_time_is_an_alert(tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    agents = {"sleeper": {"provider": "command", "command": [PY, str(tmp_path / "sleeper.py"),
                                                             str(tmp_path / "started")]}}
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "sleeper"},
                                  limits={"max_time": 4}, retry={"max_retries": 0})], agents=agents)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    (near,) = [a for a in _alerts(tmp_path) if a["kind"] == "approaching_limit"]
    assert near["task"] == "t" and near["level"] == "warning"
    assert re.fullmatch(r"max_time: \d of 4 seconds used \(\d+%\)", near["message"]), near
