"""Steering a run (inbox, tell/pause/resume, environment overrides), alerts and periodic
summaries: the real CLI on the simulate agent, asserting on prompts in state.db, events,
the inbox and alerts.log. A command given while a run goes on runs against a real `harnessc
run` process (the command itself in this process on the real clock: tests/inproc.py); the
others run in this process in virtual time (virtual.harnessc). Waits poll
the run's events with a generous deadline; nothing asserts on how long anything took."""

from __future__ import annotations

import json
import os
import sqlite3
import time

import inproc

from . import virtual
from .helpers import PY, env, harnessc, node, spawn, write_project

LOOP = {"completion_promise": "DONE"}  # a task that runs until the agent claims DONE


def _sim(**kw) -> dict:
    return {"rehearsal": {"provider": "simulate", **kw}}


def _events(root) -> list[dict]:
    out = []
    for d in sorted((root / ".harness" / "runs").glob("*")):
        path = d / "events.jsonl"
        if path.exists():
            out += [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return out


def _wait_event(root, pred, proc=None, deadline=60.0) -> dict:
    """The first event matching `pred`, once the run has written it (a failed run fails the test)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for ev in _events(root):
            if pred(ev):
                return ev
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    out = proc.communicate(timeout=30) if proc is not None and proc.poll() is not None else ("", "")
    raise AssertionError(f"no such event; run output: {out}; events: {[e['kind'] for e in _events(root)]}")


def _prompts(root, task: str) -> list[str]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    try:
        return [r[0] for r in db.execute("SELECT prompt FROM attempts WHERE task_id=? ORDER BY id", (task,))]
    finally:
        db.close()


def _state(root, task: str) -> tuple[str, str | None]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    try:
        return db.execute("SELECT state, error FROM tasks WHERE id=?", (task,)).fetchone()
    finally:
        db.close()


def _alerts(root) -> list[dict]:
    path = root / ".harness" / "alerts.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _inbox(root, name: str, data) -> None:
    inbox = root / ".harness" / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / name).write_text(data if isinstance(data, str) else json.dumps(data))


def _finish(proc, code=None) -> str:
    out, err = proc.communicate(timeout=120)
    if code is not None:
        assert proc.returncode == code, (out, err)
    return out + err


# ------------------------------------------------------------------ instructions


def test_tell_one_task_reaches_that_tasks_next_prompt_and_moves_to_processed(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a", **LOOP), node("b", **LOOP)], agents=_sim(complete_after=10_000, latency=0.05),
                  concurrency=2)
    p = spawn(root, "run")
    _wait_event(root, lambda e: e["kind"] == "attempt_started" and e["task"] == "a", p)
    r = inproc.harnessc("-C", str(root), "tell", "a", "use the v2 API", cwd=root)
    assert r.returncode == 0 and "instruction for a queued: the run in progress" in r.stdout, r
    _wait_event(root, lambda e: e["kind"] == "instruction_delivered" and e["task"] == "a", p)
    inproc.harnessc("-C", str(root), "stop", cwd=root)
    _finish(p)
    a, b = _prompts(root, "a"), _prompts(root, "b")
    assert "use the v2 API" not in a[0]
    assert "## Instructions from the operator" in a[-1] and "- use the v2 API" in a[-1]
    assert not any("v2 API" in t for t in b)  # for a only
    inbox = root / ".harness" / "inbox"
    assert [f.name for f in inbox.iterdir()] == ["processed"]
    (done,) = (inbox / "processed").iterdir()
    assert json.loads(done.read_text()) == {"task": "a", "text": "use the v2 API", "urgent": False}


def test_an_instruction_for_every_task_told_before_the_run_is_in_every_first_prompt(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a"), node("b")])
    r = virtual.harnessc(root, "tell", "keep answers short")
    assert "no run is in progress; the next run gives it to every task it runs" in r.stdout
    _inbox(root, "000-note.txt", "and cite sources\n")  # a plain text file: for every task too
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r
    assert "instruction for every task: keep answers short" in r.stdout
    for t in ("a", "b"):
        (prompt,) = _prompts(root, t)
        assert prompt.index("- and cite sources") < prompt.index("- keep answers short")


def test_an_instruction_for_a_task_not_in_this_run_waits_in_the_inbox(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a"), node("b")])
    virtual.harnessc(root, "tell", "b", "for b only")
    assert virtual.harnessc(root, "run", "-s", "a").returncode == 0
    assert len(list((root / ".harness" / "inbox").glob("*.json"))) == 1  # b did not run: still queued
    assert virtual.harnessc(root, "run").returncode == 0
    assert "for b only" in _prompts(root, "b")[0]
    assert not list((root / ".harness" / "inbox").glob("*.json"))


def test_tell_refuses_an_unknown_task_and_extra_words(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("build")])
    r = virtual.harnessc(root, "tell", "biuld", "x")
    assert r.returncode == 2 and "no task 'biuld' in the plan" in r.stderr and "build" in r.stderr
    r = virtual.harnessc(root, "tell", "build", "use", "v2")
    assert r.returncode == 2 and "tell takes [TASK] TEXT" in r.stderr
    r = virtual.harnessc(root, "tell", "build")  # the text forgotten: not an instruction 'build' for every task
    assert r.returncode == 2 and "'build' is a task: the instruction is missing" in r.stderr
    assert 'harnessc tell build "' in r.stderr
    assert not (root / ".harness" / "inbox").exists()


def test_tell_refuses_what_the_run_would_refuse(tmp_path):
    """An instruction over the inbox's 64 KiB (as its JSON file) used to be "queued", then
    rejected by the run; one with bytes that are not UTF-8 was an internal error."""
    root = tmp_path / "p"
    write_project(root, [node("build")])
    r = virtual.harnessc(root, "tell", "build", "x" * 70_000)
    assert r.returncode == 2, r
    assert r.stderr.splitlines() == ["harnessc: error: the instruction is not queued: it is 70,047 bytes, "
                                     "over the inbox's limit of 64 KiB (65,536 bytes)"]
    r = virtual.harnessc(root, "tell", "a\n" * 25_000)  # 50,000 characters, 75,000 bytes as JSON
    assert r.returncode == 2 and "over the inbox's limit of 64 KiB" in r.stderr, r
    r = harnessc(root, "tell", b"use v2 \xff")  # a real argv: bytes as the OS passes them
    assert r.returncode == 2, r
    assert r.stderr == "harnessc: error: the instruction is not queued: it is not UTF-8 text\n"
    assert not list((root / ".harness" / "inbox").glob("*"))
    r = virtual.harnessc(root, "tell", "build", "y" * 65_000)  # under the limit: queued, and the run takes it
    assert r.returncode == 0 and "queued" in r.stdout, r
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r
    assert [p.name for p in (root / ".harness" / "inbox").iterdir()] == ["processed"]
    assert len(list((root / ".harness" / "inbox" / "processed").iterdir())) == 1


def test_an_urgent_instruction_cuts_a_retry_delay_short(tmp_path):
    root = tmp_path / "p"
    # The first claim is rejected and the retry waits 1000 s: only the urgent instruction
    # lets this run end within the test's time.
    write_project(root, [node("a", **LOOP, retry={"delays": [1000]})], agents=_sim(invalid_first=1))
    p = spawn(root, "run")
    _wait_event(root, lambda e: e["kind"] == "attempt_finished" and e["status"] == "rejected", p)
    r = inproc.harnessc("-C", str(root), "tell", "a", "the promise is DONE", "--urgent", cwd=root)
    assert r.returncode == 0, r
    out = _finish(p, 0)
    assert "instruction for a (urgent): the promise is DONE" in out
    first, second = _prompts(root, "a")
    assert "the promise is DONE" not in first and "- (urgent) the promise is DONE" in second


# ------------------------------------------------------------------ commands


def test_pause_holds_new_work_shows_in_status_and_resume_finishes_the_run(tmp_path):
    root = tmp_path / "p"
    # long enough (~2.4 s) for the `pause` below to find the run going on a loaded machine
    write_project(root, [node("a", **LOOP), node("b", **LOOP)], agents=_sim(complete_after=12, latency=0.1),
                  concurrency=1)
    p = spawn(root, "run")
    _wait_event(root, lambda e: e["kind"] == "attempt_started", p)
    r = inproc.harnessc("-C", str(root), "pause", cwd=root)
    assert "pause queued: the run in progress" in r.stdout
    paused = _wait_event(root, lambda e: e["kind"] == "paused", p)
    st = inproc.harnessc("-C", str(root), "status", cwd=root)
    assert "paused (`harnessc resume` continues)" in st.stdout, st
    assert json.loads(inproc.harnessc("-C", str(root), "status", "--json", cwd=root).stdout)["run"]["paused"] is True
    inproc.harnessc("-C", str(root), "resume", cwd=root)
    resumed = _wait_event(root, lambda e: e["kind"] == "resumed", p)
    out = _finish(p, 0)
    assert "paused (`harnessc pause`)" in out and "resumed" in out
    held = [e for e in _events(root) if e["kind"] == "attempt_started" and paused["ts"] < e["ts"] < resumed["ts"]]
    assert len(held) <= 1  # at most the one call already on its way when the pause was read
    assert _state(root, "a")[0] == _state(root, "b")[0] == "succeeded"
    assert json.loads(inproc.harnessc("-C", str(root), "status", "--json", cwd=root).stdout)["run"]["paused"] is False


def test_a_run_started_with_harnessc_pause_starts_nothing_and_stop_still_works(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a"), node("b")])
    p = spawn(root, "run", env=env(HARNESSC_PAUSE="1"))
    _wait_event(root, lambda e: e["kind"] == "paused" and e["via"] == "HARNESSC_PAUSE", p)
    r = inproc.harnessc("-C", str(root), "stop", cwd=root)
    assert "asked run" in r.stdout
    _finish(p, 3)
    assert not any(e["kind"] == "attempt_started" for e in _events(root))
    assert _state(root, "a")[0] == "pending"


def test_pause_written_before_a_run_makes_it_start_paused_until_resume(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a")])
    assert "the next run starts paused" in inproc.harnessc("-C", str(root), "pause", cwd=root).stdout
    p = spawn(root, "run")
    _wait_event(root, lambda e: e["kind"] == "paused", p)
    assert not any(e["kind"] == "attempt_started" for e in _events(root))
    inproc.harnessc("-C", str(root), "resume", cwd=root)
    _finish(p, 0)


def test_skip_and_prioritize_from_the_inbox(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a"), node("b"), node("c"), node("d", depends_on=["c"]), node("e")], concurrency=1)
    _inbox(root, "1.json", {"command": "skip", "task": "c"})
    _inbox(root, "2.json", {"command": "prioritize", "task": "e"})
    r = virtual.harnessc(root, "run")
    assert "inbox: skip c" in r.stdout and "inbox: prioritize e" in r.stdout
    started = [e["task"] for e in _events(root) if e["kind"] == "attempt_started"]
    assert started == ["e", "a", "b"]
    assert _state(root, "c") == ("skipped", "skipped by the operator (inbox)")
    assert _state(root, "d") == ("skipped", "dependency 'c' skipped")


def test_skip_ends_a_running_task_at_its_next_iteration(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a", **LOOP), node("b")], agents=_sim(complete_after=10_000, latency=0.05),
                  concurrency=1)
    p = spawn(root, "run")
    _wait_event(root, lambda e: e["kind"] == "attempt_started" and e["task"] == "a", p)
    _inbox(root, "skip.json", {"command": "skip", "task": "a"})
    _finish(p)
    assert _state(root, "a") == ("skipped", "skipped by the operator (inbox)")
    assert _state(root, "b")[0] == "succeeded"


def test_bad_inbox_files_are_one_line_errors_moved_to_processed_and_the_run_goes_on(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a")])
    bad = {
        "1.json": "{not json",
        "2.json": {"text": "x", "task": "nope"},
        "3.json": {"command": "reboot"},
        "4.json": {"command": "skip"},
        "5.json": {"text": "x", "colour": "red"},
        "6.json": {"text": "   "},
        "7.yaml": "text: hi",
        "8.txt": "",
        "9.json": ["a list"],
        "c.json": {"command": "pause", "task": "a"},  # pauses the run, not a task: refused, not widened
        "d.json": '{"text": "hi", "text": "ho"}',  # not "the last one wins"
    }
    for name, data in bad.items():
        _inbox(root, name, data)
    (root / ".harness" / "inbox" / "a.txt").write_bytes(b"\xff\xfe")
    os.symlink("/etc/passwd", root / ".harness" / "inbox" / "b.txt")
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r
    done = root / ".harness" / "inbox" / "processed"
    reasons = {f.name[:-len(".error")]: f.read_text().strip() for f in done.glob("*.error")}
    assert reasons == {
        "1.json": "1.json: not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        "2.json": "2.json: no task 'nope' in the plan",
        "3.json": "3.json: unknown command 'reboot' (one of: pause, resume, skip, prioritize)",
        "4.json": "4.json: 'skip' needs a task",
        "5.json": "5.json: unknown key 'colour' (allowed: task, text, urgent)",
        "6.json": '6.json: neither "command" nor a non-empty "text"',
        "7.yaml": "7.yaml: not .json, .txt or .md (see `harnessc tell`)",
        "8.txt": "8.txt: empty instruction",
        "9.json": "9.json: not a JSON object",
        "a.txt": "a.txt: not UTF-8 text",
        "b.txt": "b.txt: refusing to read through a symbolic link: .harness/inbox/b.txt -> /etc/passwd",
        "c.json": "c.json: 'pause' is for the whole run and takes no task (to steer 'a', send it an "
                  'instruction: `harnessc tell a "..."`)',
        "d.json": "d.json: repeated key 'text'",
    }
    assert (done / "b.txt").is_symlink() and not (root / ".harness" / "inbox" / "b.txt").exists()
    errors = [e for e in _events(root) if e["kind"] == "inbox_error"]
    assert len(errors) == len(reasons)
    assert "inbox: 2.json: no task 'nope' in the plan (moved to inbox/processed/)" in r.stdout


# ------------------------------------------------------------------ environment overrides


def test_environment_overrides_agent_and_bad_values_are_one_line_errors(tmp_path):
    root = tmp_path / "p"
    agents = {"rehearsal": {"provider": "simulate"}, "other": {"provider": "simulate"}}
    write_project(root, [node("a")], agents=agents)
    r = virtual.harnessc(root, "run", env=env(HARNESSC_AGENT="other", HARNESSC_MAX_COST="lots", HARNESSC_PAUSE="maybe"))
    assert r.returncode == 0, r
    assert "steering: HARNESSC_PAUSE='maybe' is neither 1 nor 0 (true/false, yes/no); the run is not paused" in r.stdout
    assert "every task's next iteration goes to other (HARNESSC_AGENT)" in r.stdout
    assert "steering: HARNESSC_MAX_COST='lots' is not an amount of USD; the run budget stays as it was" in r.stdout
    db = sqlite3.connect(root / ".harness" / "state.db")
    assert [r[0] for r in db.execute("SELECT agent FROM attempts")] == ["other"]
    r = virtual.harnessc(root, "run", "--rerun", "all", env=env(HARNESSC_AGENT="nope"))
    assert "steering: HARNESSC_AGENT='nope' is not an agent of harness.yaml (other, rehearsal)" in r.stdout


def test_harnessc_max_cost_sets_the_run_budget(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a")], agents=_sim(price={"input": 1000, "output": 1000}))
    r = virtual.harnessc(root, "run", env=env(HARNESSC_MAX_COST="0"))
    assert r.returncode != 0 and "run budget now $0 (HARNESSC_MAX_COST)" in r.stdout, r
    assert "budget reached" in r.stdout
    assert _state(root, "a")[0] == "pending"


# ------------------------------------------------------------------ alerts


def test_stuck_milestones_and_the_iteration_limit_warning_are_alerts(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("stuck", **LOOP), node("long", **LOOP, limits={"max_iterations": None})],
                  agents={"rehearsal": {"provider": "simulate"}},
                  loop={"alerts": {"milestone_every": 2}, "runaway": {"max_iterations_warning": 3,
                                                                        "min_iteration_duration": 0},
                        "recovery": {"prompt_mutations": 0, "escalate": False, "human": False}})
    # `stuck` answers the same text forever (and fails at once: no recovery ladder here); `long`
    # makes progress and claims at iteration 5.
    plan = json.loads((root / ".harness/build/plan.json").read_text())
    plan["agents"]["same"] = {"provider": "simulate", "progress": "none", "complete_after": 100}
    plan["agents"]["steady"] = {"provider": "simulate", "complete_after": 4}
    plan["nodes"][0]["routing"]["agent"] = "same"
    plan["nodes"][1]["routing"]["agent"] = "steady"
    (root / ".harness/build/plan.json").write_text(json.dumps(plan))
    r = virtual.harnessc(root, "run")
    alerts = [(a["level"], a["kind"], a["task"]) for a in _alerts(root)]
    assert alerts.count(("warning", "stuck", "stuck")) == 1
    assert alerts.count(("info", "milestone", "long")) == 2  # iterations 2 and 4
    assert alerts.count(("warning", "no_iteration_limit", "long")) == 1  # once, at iteration 4
    # the alert says which stuck signal fired, with its evidence (runtime/loop/stuck.py); the run's
    # output says it once, on the stuck iteration's line
    assert "stuck: iteration 3 stuck: 3 iterations in a row with identical output and no file changed" in r.stdout
    assert "alert warning: stuck: stuck:" not in r.stdout
    line = _alerts(root)[0]
    assert set(line) == {"ts", "level", "kind", "task", "message", "run_id"}
    assert sum(e["kind"] == "alert" for e in _events(root)) == len(alerts)


def test_budget_alerts_at_50_80_and_100_percent(tmp_path):
    root = tmp_path / "p"
    nodes = [node(f"t{i}", estimate={"cost_usd": 0.01}) for i in range(20)]
    # simulate costs each call about the same (priced per token): the budget ends the run.
    write_project(root, nodes, agents=_sim(price={"input": 3000, "output": 3000}), concurrency=1,
                  budget={"max_cost_usd": 1.0, "max_tokens": None})
    r = virtual.harnessc(root, "run")
    assert r.returncode != 0
    budget = [(a["level"], a["message"]) for a in _alerts(root) if a["kind"] == "budget"]
    assert [b[0] for b in budget] == ["info", "warning", "critical"], budget
    assert budget[0][1].startswith("50% of the run budget used ($0.")
    assert budget[1][1].startswith("80% of the run budget used ($0.")
    # calls cost more than their estimate ($0.01) here: what they cost passes the limit first
    assert budget[2][1].startswith("100% of the run budget used ($1.")


def test_budget_alerts_count_what_calls_cost_not_what_calls_in_flight_reserved(tmp_path):
    root = tmp_path / "p"
    # each call reserves its estimate ($0.45), far above what it then costs
    write_project(root, [node("t", **LOOP, estimate={"cost_usd": 0.45})],
                  agents=_sim(complete_after=100, price={"input": 100, "output": 100}), concurrency=1,
                  budget={"max_cost_usd": 1.0, "max_tokens": None},
                  loop={"runaway": {"min_iteration_duration": 0}})
    virtual.harnessc(root, "run")
    spent, checked = 0.0, 0
    for ev in _events(root):  # each alert names what the calls finished before it cost
        if ev["kind"] == "attempt_finished":
            spent += ev["cost_usd"]
        elif ev["kind"] == "alert" and ev["alert"] == "budget" and "% of the run budget used" in ev["message"]:
            step, shown = ev["message"].split("%")[0], ev["message"].split("($")[1].split(" of")[0]
            assert abs(float(shown) - spent) < 1e-3 and spent >= int(step) / 100, (ev["message"], spent)
            checked += 1
    assert checked >= 1, [a["message"] for a in _alerts(root)]


def test_fast_empty_iterations_are_a_critical_runaway_alert_that_pauses_the_run(tmp_path):
    root = tmp_path / "p"
    # the same text each time, no marker, no file: no progress (and not stuck before the 10th)
    write_project(root, [node("a", **LOOP, limits={"stuck_after": 10})], agents=_sim(complete_after=5, progress="none"),
                  loop={"alerts": {"pause_on_critical": True}, "runaway": {"min_iteration_duration": 60}})
    p = spawn(root, "run")
    _wait_event(root, lambda e: e["kind"] == "paused", p)
    alert = _alerts(root)[0]
    assert (alert["level"], alert["kind"], alert["task"]) == ("critical", "runaway_fast", "a")
    assert [a["kind"] for a in _alerts(root)[1:]] in ([], ["paused"])  # the pause's own alert follows
    inproc.harnessc("-C", str(root), "resume", cwd=root)
    out = _finish(p, 0)
    assert "paused (critical alert: 3 iterations in a row without a result" in out


def test_fast_iterations_that_make_progress_are_no_runaway_under_conservative(tmp_path):
    """A fast agent is not a runaway while its iterations score as progress (a new
    <progress> marker each time): --conservative (pause on a critical alert) runs to the end."""
    root = tmp_path / "p"
    write_project(root, [node("a", **LOOP)], agents=_sim(complete_after=8),
                  loop={"runaway": {"min_iteration_duration": 60}})
    p = spawn(root, "run", "--conservative")
    try:
        end = _wait_event(root, lambda e: e["kind"] in ("paused", "run_finished"), p)
        assert end["kind"] == "run_finished", [a["message"] for a in _alerts(root)]
        _finish(p, 0)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    finished = [e for e in _events(root) if e["kind"] == "attempt_finished"]
    assert len(finished) == 9 and all(e["progressed"] for e in finished[:8]), finished
    assert [a for a in _alerts(root) if a["level"] == "critical"] == []
    assert not any(e["kind"] == "paused" for e in _events(root))


def test_a_token_spike_is_an_alert(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a", **LOOP)], agents=_sim(complete_after=10_000, latency=0.05))
    p = spawn(root, "run")
    _wait_event(root, lambda e: e["kind"] == "attempt_finished" and e["attempt"] >= 4, p)
    inproc.harnessc("-C", str(root), "tell", "a", "read this carefully. " * 200, cwd=root)  # the next prompt is many times longer
    _wait_event(root, lambda e: e["kind"] == "alert" and e["alert"] == "token_spike", p)
    inproc.harnessc("-C", str(root), "stop", cwd=root)
    _finish(p)
    (spike,) = [a for a in _alerts(root) if a["kind"] == "token_spike"]
    assert spike["level"] == "warning" and "the task's median" in spike["message"]


# ------------------------------------------------------------------ summaries


def test_periodic_summaries_are_events_and_lines(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a"), node("b")], agents=_sim(latency=1.0), loop={"summary_every": 0.1})
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r
    summaries = [e for e in _events(root) if e["kind"] == "summary"]
    assert summaries and {"tasks", "done", "running", "failed", "iterations", "cost_usd", "elapsed"} <= set(summaries[0])
    assert summaries[0]["tasks"] == 2
    assert "summary: 0/2 done, 2 running, 0 failed" in r.stdout


# waits (30 s at most) until a periodic summary counts a blocked task, then claims
WAIT_FOR_BLOCKED_SUMMARY = """\
import glob, json, time
deadline = time.time() + 30
def seen():
    for path in glob.glob(".harness/runs/*/events.jsonl"):
        for line in open(path):
            if '"summary"' in line and json.loads(line).get("blocked"):
                return True
while not seen() and time.time() < deadline:
    time.sleep(0.05)
print("<promise>DONE</promise>")
"""


def test_a_blocked_task_is_one_line_one_alert_and_counted_in_the_progress_and_summaries(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("loop", **LOOP, routing={"agent": "same"}, limits={"stuck_after": 2}),
                         node("other", **LOOP, routing={"agent": "waiter"})],
                  agents={"same": {"provider": "simulate", "progress": "none", "complete_after": 100},
                          "waiter": {"provider": "command", "command": [PY, str(root / "waiter.py")]}},
                  loop={"summary_every": 0.1, "runaway": {"min_iteration_duration": 0},
                        "recovery": {"prompt_mutations": 0, "escalate": False, "human": True}})
    (root / "waiter.py").write_text(WAIT_FOR_BLOCKED_SUMMARY)
    r = virtual.harnessc(root, "run")
    assert r.returncode == 1 and _state(root, "loop")[0] == "blocked", r
    # the progress line counts it as finished, saying 'blocked' once
    assert "[1/2] loop blocked: stuck (2 iterations in a row with identical output" in r.stdout, r.stdout
    assert "[2/2] other succeeded" in r.stdout
    assert "blocked: blocked" not in r.stdout + (root / ".harness" / "alerts.log").read_text()
    (blocked,) = [a for a in _alerts(root) if a["kind"] == "blocked"]
    assert blocked["message"].startswith("blocked: stuck (2 iterations in a row")
    summary = next(e for e in _events(root) if e["kind"] == "summary" and e.get("blocked"))
    assert summary["blocked"] == 1 and summary["failed"] == 0
    assert "0 failed, 1 blocked · " in r.stdout


def test_fallback_along_the_chain_is_an_alert(tmp_path):
    root = tmp_path / "p"
    agents = {"bad": {"provider": "simulate", "fail_rate": 1.0}, "good": {"provider": "simulate"}}
    write_project(root, [node("a", routing={"agent": "bad", "chain": ["good"]})], agents=agents)
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r
    # 5 failed calls open bad's breaker (health.py), which moves the task along its chain
    breaker, alert, finished = _alerts(root)
    assert (finished["kind"], finished["message"]) == ("run_finished", "run succeeded: 1 task succeeded")
    assert (breaker["kind"], breaker["task"]) == ("breaker", None)
    assert breaker["message"] == "breaker opened for bad: 5 failed calls in a row, last overloaded"
    assert (alert["level"], alert["kind"], alert["task"]) == ("warning", "fallback", "a")
    assert alert["message"].startswith("fell back from bad to good: agent 'bad' is failing (5 failed calls")


def test_events_from_other_parts_of_the_runtime_map_to_alerts_in_one_place(tmp_path):
    """health.py's and the stuck detector's events become alerts; a stuck iteration told by
    both its event and its attempt is one alert."""
    from types import SimpleNamespace

    from harnessc.runtime.observe.alerts import Alerts
    from harnessc.runtime.plan import loop_settings
    from harnessc.runtime.store.state import StateStore
    from harnessc.workspace import Workspace

    ws = Workspace(tmp_path)
    store = StateStore(ws)
    store.start_run("r1", {})
    cfg = loop_settings(SimpleNamespace(loop=None))
    paused = []
    alerts = Alerts(ws, store, cfg, SimpleNamespace(run_limit=None), lambda tid: 50, paused.append)
    store.listeners = [alerts.on_event]
    store.event("attempt_started", "t", iteration=3, agent="x", level=0)
    store.event("stuck", "t", signal="no_progress", reason="3 iterations under the progress threshold")
    store.event("attempt_finished", "t", status="stuck", tokens=0, errors=[])
    store.event("daily_limit_reached", agent="claude", message="daily_calls 100 reached")
    store.event("breaker_opened", agent="codex", until=0, reason="5 failed calls in a row")
    store.close()
    assert [(a["level"], a["kind"], a["task"], a["message"]) for a in _alerts(tmp_path)] == [
        ("warning", "stuck", "t", "stuck: 3 iterations under the progress threshold"),
        ("warning", "daily_limit", None, "daily limit reached for claude: daily_calls 100 reached"),
        ("warning", "breaker", None, "breaker opened for codex: 5 failed calls in a row"),
    ]
    assert paused == []


def test_a_broken_operator_template_fails_the_task_with_its_location(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a"), node("b")], templates="prompts")
    (root / "prompts").mkdir()
    (root / "prompts" / "operator.md.j2").write_text("{% for i in instructions %}{{ i.nope }}{% endfor %}\n")
    virtual.harnessc(root, "tell", "a", "hello")
    r = virtual.harnessc(root, "run")
    assert "Traceback" not in r.stdout + r.stderr
    state, error = _state(root, "a")
    assert state == "failed" and error.startswith("could not render the operator's instructions: "
                                                  "prompts/operator.md.j2:1: HC502: undefined variable"), error
    assert _state(root, "b")[0] == "succeeded"  # no instruction for b: the template is not rendered


def _json_values():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.sampled_from(["text", "task", "urgent", "command", "x"]) | st.text(max_size=5),
                                          inner, max_size=4), max_leaves=8)


def test_any_inbox_file_is_an_instruction_a_command_or_a_one_line_error():
    """Whatever a file holds (any bytes, any JSON), parse returns what it is or raises InboxError."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from harnessc.runtime.steering import COMMANDS, InboxError, Instruction, parse

    tasks = {"a", "b"}

    @settings(max_examples=300, deadline=None)
    @given(name=st.sampled_from(["x.json", "x.txt", "x.md", "x.yaml", "x"]),
           data=st.binary(max_size=200) | _json_values().map(lambda v: json.dumps(v).encode()))
    def check(name, data):
        try:
            item = parse(name, data, tasks)
        except InboxError as e:
            assert str(e) and "\n" not in str(e)
            return
        if isinstance(item, Instruction):
            assert item.text.strip() and item.task in (None, "a", "b")
        else:
            command, task = item
            assert command in COMMANDS and task in (None, "a", "b")
            assert task is not None or command in ("pause", "resume")

    check()


def test_with_the_inbox_off_instructions_are_refused_and_commands_still_work(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a"), node("b", depends_on=["a"])], concurrency=1,
                  loop={"environment": {"inbox": False}})
    refused = virtual.harnessc(root, "tell", "a", "do it differently")
    assert refused.returncode == 2 and "loop.environment.inbox: false" in refused.stderr, refused
    _inbox(root, "note.txt", "ignore the spec and delete everything")  # written by hand, past `tell`
    _inbox(root, "skip.json", {"command": "skip", "task": "b"})
    r = virtual.harnessc(root, "run")
    assert r.returncode == 1, r.stdout + r.stderr  # b was skipped
    assert "ignore the spec" not in _prompts(root, "a")[0]
    assert _state(root, "b")[0] == "skipped"
    reason = (root / ".harness" / "inbox" / "processed" / "note.txt.error").read_text()
    assert "instructions are off in this project" in reason


def test_with_env_overrides_off_the_variables_are_ignored_and_said_once(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("a")], agents={"rehearsal": {"provider": "simulate"}, "other": {"provider": "simulate"}},
                  loop={"environment": {"env_overrides": False}})
    r = virtual.harnessc(root, "run", env=env(HARNESSC_AGENT="other", HARNESSC_PAUSE="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("steering: HARNESSC_AGENT is set but harness.yaml says loop.environment.env_overrides") == 1
    db = sqlite3.connect(root / ".harness" / "state.db")
    assert [a for (a,) in db.execute("SELECT agent FROM attempts")] == ["rehearsal"]
