"""Limits hold while an agent's answer is verified: hostile regexes and costly rules end
within their bounds, and max_time, `harnessc stop` and SIGTERM work during verification.

Real runs in `harnessc` processes, real SQLite, a command agent (a tiny script); status, log
and stop run in this process (tests/inproc.py). Process timeouts are generous so a
regression fails the test instead of hanging CI; nothing asserts a duration.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import textwrap
import time

import inproc

from .helpers import PY, harnessc, node, spawn, write_project
from .test_procs import ends


def _agent(tmp_path, output: dict) -> dict:
    """A command agent that notes each call in `called` (its pid) and prints `output` as JSON."""
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(f"""
        import json, os, pathlib
        pathlib.Path({str(tmp_path / 'called')!r}).write_text(str(os.getpid()))
        print(json.dumps({output!r}))
    """))
    return {"bot": {"provider": "command", "command": [PY, str(script)]}}


def _contract(output: dict) -> dict:
    props = {name: {"type": "array" if d["type"] == "list" else "string"} for name, d in output.items()}
    return {"name": "hostile", "description": "", "output": output, "output_rules": [], "accept": [],
            "json_schema": {"type": "object", "required": list(output), "properties": props},
            "on_failure": "retry", "max_retries": 0, "constraints": None}


# Verifying this answer takes minutes: each of the 1,000 rows costs a full rule budget.
COSTLY = {"rows": {"type": "list", "description": "", "required": True, "rules": [],
                   "items": {"type": "list", "rules": ["value * 999 + [2] in [value * 1000] * 1000"]}}}
COSTLY_ANSWER = {"rows": [[1] * 100] * 1000}


def _task(tmp_path, max_time: float, contract_output: dict, answer: dict) -> None:
    write_project(tmp_path, [node("t", contract="hostile", routing={"agent": "bot", "chain": ["bot"]},
                                  limits={"max_time": max_time}, retry={"max_retries": 0})],
                  agents=_agent(tmp_path, answer), contracts={"hostile": _contract(contract_output)})


def _task_row(tmp_path) -> dict:
    r = inproc.harnessc("-C", str(tmp_path), "status", "--json")
    assert r.returncode == 0, r.stderr
    return [t for t in json.loads(r.stdout)["tasks"] if t["id"] == "t"][0]


def _attempt_errors(tmp_path) -> list[str]:
    log = json.loads(inproc.harnessc("-C", str(tmp_path), "log", "t", "--json").stdout)
    return [e for attempt in log for e in (attempt.get("errors") or [])]


def test_a_backtracking_regex_against_a_long_answer_is_just_a_broken_rule(tmp_path):
    output = {"text": {"type": "str", "description": "", "required": True,
                       "rules": ["matches(value, '^(a|aa)*c$')", "matches(value, 'a*a*a*a*a*b')"]}}
    _task(tmp_path, 3600, output, {"text": "a" * 200_000})
    r = harnessc(tmp_path, "run", timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    row = _task_row(tmp_path)
    assert row["state"] == "failed"
    errors = _attempt_errors(tmp_path)
    assert any("breaks rule 'matches(value, '^(a|aa)*c$')'" in e for e in errors), errors
    assert any("breaks rule 'matches(value, 'a*a*a*a*a*b')'" in e for e in errors), errors


def test_max_time_ends_a_task_whose_verification_runs_long(tmp_path):
    _task(tmp_path, 3, COSTLY, COSTLY_ANSWER)
    r = harnessc(tmp_path, "run", timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    row = _task_row(tmp_path)
    assert row["state"] == "failed" and "max_time" in row["error"], row
    assert any("did not finish within the task's max_time" in e for e in _attempt_errors(tmp_path))


def _start_verifying(tmp_path):
    """A run whose only task is (very likely) verifying COSTLY_ANSWER when this returns."""
    _task(tmp_path, 3600, COSTLY, COSTLY_ANSWER)
    p = spawn(tmp_path, "run")
    called = tmp_path / "called"
    deadline = time.monotonic() + 120  # polled: the call may start late on a loaded machine
    while not (called.exists() and called.read_text() and ends(int(called.read_text()), 0.1)):
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the agent never answered"
    time.sleep(1.0)  # the agent has answered (its process ended); verification takes minutes from here
    return p


def _ends(p, timeout: float = 60) -> tuple[str, str]:
    try:
        return p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


def test_sigterm_aborts_a_run_during_verification(tmp_path):
    p = _start_verifying(tmp_path)
    p.send_signal(signal.SIGTERM)
    out, err = _ends(p)
    assert p.returncode == 3, out + err
    assert _task_row(tmp_path)["state"] == "ready"  # back to pending, nothing blocks it
    with sqlite3.connect(tmp_path / ".harness" / "state.db") as db:
        assert db.execute("SELECT status FROM runs").fetchone()[0] == "aborted"


def test_stop_abort_ends_a_run_during_verification(tmp_path):
    p = _start_verifying(tmp_path)
    r = inproc.harnessc("-C", str(tmp_path), "stop", "--abort")
    assert r.returncode == 0, r.stdout + r.stderr
    out, err = _ends(p)
    assert p.returncode == 3, out + err
    assert _task_row(tmp_path)["state"] == "ready"  # back to pending, nothing blocks it
    status = json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--json").stdout)
    assert status["run"]["status"] == "aborted"
    # the call had answered: the interrupted attempt keeps its answer's usage (no price: cost 0)
    attempt = json.loads(inproc.harnessc("-C", str(tmp_path), "log", "t", "--json").stdout)[-1]
    assert attempt["status"] == "interrupted" and attempt["input_tokens"] > 0, attempt
    assert attempt["cost_source"] == "none"
    assert status["tasks"][0]["tokens"] == attempt["input_tokens"] + attempt["output_tokens"]


def test_stop_finishes_a_long_verification_within_max_time(tmp_path):
    # A graceful stop lets in-flight work finish; a verification is bounded by max_time.
    _task(tmp_path, 5, COSTLY, COSTLY_ANSWER)  # time enough to hear the stop first, even under load
    p = spawn(tmp_path, "run")
    deadline = time.monotonic() + 120  # polled: the call may start late on a loaded machine
    while not (tmp_path / "called").exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the agent was never called"
        time.sleep(0.1)
    r = inproc.harnessc("-C", str(tmp_path), "stop")
    assert r.returncode == 0, r.stdout + r.stderr
    out, err = _ends(p)
    assert "stopping: finishing in-flight work" in out + err  # heard while verifying
    # the stop came after the last task started, so the run is judged by its task
    assert p.returncode == 1, out + err
    assert json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--json").stdout)["run"]["status"] == "failed"
    row = _task_row(tmp_path)
    assert row["state"] == "failed" and "max_time" in row["error"], row


# A retry prompt template past its bounds: the scenario retry-template-past-its-bounds
# (tests/runtime/scenarios/).
