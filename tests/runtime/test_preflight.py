"""The pre-flight of `harnessc run` (runtime/preflight.py), through the real CLI and SQLite:
a task whose every agent is unusable (no key, no executable, no cassette) refuses the run
before anything is called or charged; an unusable agent on a chain with a usable one is
passed over with one warning line."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys

from harnessc.providers import agent_config
from harnessc.runtime.preflight import agent_checks

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, env, node, write_project

UNSET = "HC_PREFLIGHT_UNSET_KEY"
PAID = {"provider": "anthropic", "model": "claude-sonnet-4-6", "api_key_env": UNSET}
SIM = {"provider": "simulate"}


def run_env(**extra) -> dict:
    e = env(**extra)
    e.pop(UNSET, None)
    return e


def rows(root, table: str) -> int:
    db = root / ".harness" / "state.db"
    if not db.exists():
        return 0
    return sqlite3.connect(db).execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def events(root, kind: str) -> list[dict]:
    found = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT data FROM events WHERE kind = ? ORDER BY id", (kind,)).fetchall()
    return [json.loads(d or "{}") for (d,) in found]


def attempts_by_agent(root) -> list[tuple[str, str]]:
    return sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id, agent FROM attempts ORDER BY id").fetchall()


def test_a_task_whose_only_agent_has_no_key_refuses_the_run_and_nothing_is_charged(tmp_path):
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "paid"})],
                  agents={"paid": PAID}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run", env=run_env())
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("harnessc: error:")]
    assert errors == [f"harnessc: error: agent 'paid' cannot be used: {UNSET} is not set (the only agent of task 'a')"]
    assert "`harnessc doctor`" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""
    assert (rows(tmp_path, "attempts"), rows(tmp_path, "ledger"), rows(tmp_path, "runs")) == (0, 0, 0)
    assert not (tmp_path / ".harness" / "runs").exists()


def test_an_unusable_agent_on_a_chain_is_passed_over_with_one_warning(tmp_path):
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "paid", "chain": ["rehearsal"]}),
                             node("b", contract="summary", routing={"agent": "rehearsal"})],
                  agents={"paid": PAID, "rehearsal": SIM}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run", env=run_env())
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == [f"warning: passing over unusable agents: paid ({UNSET} is not set) "
                        "(`harnessc doctor` checks the setup)"]
    # the chain without it: no call to it, so no fallback either
    assert attempts_by_agent(tmp_path) == [("a", "rehearsal"), ("b", "rehearsal")]
    assert events(tmp_path, "fallback") == []
    assert [e["agents"] for e in events(tmp_path, "agents_passed_over")] == [{"paid": [f"{UNSET} is not set"]}]


def test_only_the_tasks_this_run_starts_count(tmp_path):
    """A done task, a task left out by -s, and an --agents override keep an unusable agent
    out of the run: it starts, without a warning."""
    write_project(tmp_path, [node("old", done=True, routing={"agent": "paid"}),
                             node("a", contract="summary", routing={"agent": "rehearsal"}),
                             node("b", contract="summary", routing={"agent": "paid"})],
                  agents={"paid": PAID, "rehearsal": SIM}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run", "-s", "a", env=run_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning:" not in r.stderr
    r = virtual.harnessc(tmp_path, "run", "--agent", "paid", "-s", "b", env=run_env())  # forced onto it: refused
    assert r.returncode == 2 and "agent 'paid' cannot be used" in r.stderr
    r = virtual.harnessc(tmp_path, "run", "--agents", "rehearsal", env=run_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert attempts_by_agent(tmp_path) == [("a", "rehearsal"), ("b", "rehearsal")]


def test_a_missing_executable_refuses_and_a_present_one_runs(tmp_path):
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho '<promise>DONE</promise>'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    write_project(tmp_path, [node("cli", completion_promise="DONE", routing={"agent": "cc"}),
                             node("gone", completion_promise="DONE", routing={"agent": "gone"}),
                             node("here", completion_promise="DONE", routing={"agent": "here"})],
                  agents={"cc": {"provider": "claude-code"},
                          "gone": {"provider": "command", "command": ["./no-such-agent.sh", "{prompt}"]},
                          "here": {"provider": "command", "command": ["./agent.sh"]}})
    bare = run_env(PATH=os.path.dirname(PY))  # python, but no `claude`
    r = virtual.harnessc(tmp_path, "run", env=bare)
    assert r.returncode == 2, r.stdout + r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("harnessc: error:")] == [
        "harnessc: error: agent 'cc' cannot be used: 'claude' is not on PATH (the only agent of task 'cli')",
        "harnessc: error: agent 'gone' cannot be used: './no-such-agent.sh' is not an executable file "
        "(the only agent of task 'gone')"]
    assert rows(tmp_path, "attempts") == 0
    r = virtual.harnessc(tmp_path, "run", "-s", "here", env=bare)
    assert r.returncode == 0, r.stdout + r.stderr
    assert attempts_by_agent(tmp_path) == [("here", "here")]


def test_a_replay_agent_without_the_tasks_cassette_is_passed_over(tmp_path):
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "tape", "chain": ["rehearsal"]})],
                  agents={"tape": {"provider": "replay"}, "rehearsal": SIM}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")] == [
        "warning: passing over unusable agents: tape (.harness/cassettes/a.jsonl does not exist (record it "
        "with `harnessc run --record`)) (`harnessc doctor` checks the setup)"]
    assert attempts_by_agent(tmp_path) == [("a", "rehearsal")]


def test_dry_run_says_what_the_run_would_refuse_and_exits_2(tmp_path):
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "paid"}),
                             node("b", contract="summary", routing={"agent": "paid", "chain": ["rehearsal"]})],
                  agents={"paid": PAID, "rehearsal": SIM}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run", "--dry-run", env=run_env())
    assert r.returncode == 2, r.stdout + r.stderr
    assert (f"would refuse to start: agent 'paid' cannot be used: {UNSET} is not set (the only agent of task 'a')"
            in r.stdout.splitlines())
    r = virtual.harnessc(tmp_path, "run", "--dry-run", "-s", "b", env=run_env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  b     rehearsal" in r.stdout and f"would warn: passing over unusable agents: paid ({UNSET}" in r.stdout


def test_an_sdk_that_is_not_installed_makes_its_agents_unusable(tmp_path, monkeypatch):
    monkeypatch.setenv("HC_PREFLIGHT_KEY", "sk-test")
    config = {"provider": "openai", "model": "m", "api_key_env": "HC_PREFLIGHT_KEY"}
    assert all(c.ok for c in agent_checks(agent_config("o", config), tmp_path))
    monkeypatch.setitem(sys.modules, "openai", None)  # find_spec: not importable
    assert [(c.what, c.ok, c.detail) for c in agent_checks(agent_config("o", config), tmp_path) if not c.ok] == [
        ("sdk", False, "the openai SDK is not installed (pip install 'harnessc[llm]')")]


def test_an_agent_without_a_key_variable_needs_none(tmp_path, monkeypatch):
    monkeypatch.delenv(UNSET, raising=False)
    local = {"provider": "openai", "model": "qwen3:8b", "api_key_env": None, "base_url": "http://127.0.0.1:1/v1"}
    assert [c.what for c in agent_checks(agent_config("local", local), tmp_path)] == ["sdk"]
    assert [c.ok for c in agent_checks(agent_config("paid", PAID), tmp_path) if c.what == "key"] == [False]
    # `run --replay` answers from the cassettes: no key, SDK or program is needed
    assert agent_checks(agent_config("paid", PAID), tmp_path, replaying=True) == []
