"""Assist calls (runtime/loop/assist.py): a cheap agent writes a stuck task's prompt mutations and a
loop task's running summary; the deterministic text stands in when it fails. Real runs with
small command agents (scripts), and the simulate agent offline."""

from __future__ import annotations

import json
import sqlite3
import textwrap

import pytest

from harnessc.runtime.store.attempts import AttemptEnd
from harnessc.runtime.store.state import StateStore
from harnessc.workspace import Workspace

from . import virtual
from .helpers import PY, node, write_project

# The worker: a loop task's agent. "stuck" repeats itself; "steady" reports a new step each
# time and claims at its 7th call.
WORKER = textwrap.dedent("""
    import os, pathlib, sys
    task = os.environ["HARNESSC_TASK"]
    prompt = sys.stdin.read()
    calls = pathlib.Path(".harness") / f"calls-{task}"
    n = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(n))
    if task == "steady":
        print(f"<progress>step {n} of steady</progress>" + (" <promise>DONE</promise>" if n >= 7 else ""))
    else:
        print("Still thinking about it.")
""")

# The cheap agent: what it does depends on CHEAP_MODE (its `env:`); it keeps every prompt.
CHEAP = textwrap.dedent("""
    import os, pathlib, re, sys, time
    purpose = os.environ["HARNESSC_PURPOSE"]
    prompt = sys.stdin.read()
    calls = pathlib.Path(".harness") / f"cheap-{purpose}"
    n = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(n))
    pathlib.Path(".harness", f"cheap-{purpose}-{n}.md").write_text(prompt)
    mode = os.environ["CHEAP_MODE"]
    if mode == "fail":
        sys.exit("cheap: out of service")
    if mode == "slow":
        time.sleep(60)
    if mode == "verbose":
        print("x" * 5000)
    elif purpose == "mutation":
        print(f"CHEAP REWRITE {n}: list the three files you will touch, then touch only the first.")
    else:
        seen = re.findall(r"^### Iteration (\\d+)", prompt, re.M)
        print(f"- CHEAP SUMMARY {n} of iterations {','.join(seen)}")
        print("- next: keep going")
""")

PRICE = {"input": 1.0, "output": 2.0}  # USD per million tokens


def project(tmp_path, nodes, cheap_mode="ok", cheap_timeout=30, loop=None, cheap_price=PRICE):
    (tmp_path / "worker.py").write_text(WORKER)
    (tmp_path / "cheap.py").write_text(CHEAP)
    agents = {"worker": {"provider": "command", "command": [PY, str(tmp_path / "worker.py")], "timeout": 30},
              "cheap": {"provider": "command", "command": [PY, str(tmp_path / "cheap.py")],
                        "timeout": cheap_timeout, "env": {"CHEAP_MODE": cheap_mode}, "price": cheap_price}}
    return write_project(tmp_path, nodes, agents=agents, loop=loop)


def loop_node(tid, **kw):
    return node(tid, completion_promise="DONE", routing={"agent": "worker"}, **kw)


def query(root, sql: str, *args) -> list:
    return sqlite3.connect(root / ".harness" / "state.db").execute(sql, args).fetchall()


def assist_events(root) -> list[dict]:
    return [json.loads(d) for (d,) in query(root, "SELECT data FROM events WHERE kind='assist' ORDER BY id")]


def read(root, name: str) -> str:
    return (root / ".harness" / name).read_text()


def sent(root, tid: str, n: int) -> str:
    """The prompt of the task's n-th iteration, as harnessc sent it (the system prompt aside)."""
    return query(root, "SELECT prompt FROM attempts WHERE task_id=? ORDER BY id", tid)[n - 1][0]


MUTATIONS = {"recovery": {"prompt_mutations": 2, "escalate": False, "human": False, "mutation_agent": "cheap"}}


def test_the_mutation_agent_rewrites_the_head_and_the_task_stays(tmp_path):
    project(tmp_path, [loop_node("stuck", limits={"stuck_after": 2})], loop=MUTATIONS)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr  # stuck after every rung: fails (human: false)
    # the worker's prompt after the first rung: the cheap agent's instructions, the evidence, the task
    third = sent(tmp_path, "stuck", 3)
    assert third.startswith("## Recovery (rephrase)\n\nCHEAP REWRITE 1: list the three files"), third
    assert "Why: 2 iterations in a row with identical output" in third
    assert 'Your last output began: "Still thinking about it."' in third
    assert "# Task stuck: Task stuck" in third.split("---", 1)[1]  # the task's own prompt, whole
    assert "restate the goal below" not in third  # not the fixed text
    assert sent(tmp_path, "stuck", 5).startswith("## Recovery (decompose)\n\nCHEAP REWRITE 2:")
    # what the cheap agent was asked: the strategy, the evidence and the task
    asked = read(tmp_path, "cheap-mutation-1.md")
    assert "'rephrase' strategy" in asked and "Still thinking about it." in asked
    assert "# Task stuck: Task stuck" in asked and "restate the goal below" in asked  # the fallback shown
    # charged: the ledger, the event, the task's cost
    events = assist_events(tmp_path)
    assert [(e["purpose"], e["agent"], e["status"]) for e in events] == [("mutation", "cheap", "written")] * 2
    assert all(e["cost_usd"] > 0 and e["tokens"] > 0 for e in events)
    ledger = query(tmp_path, "SELECT kind, agent, actual, tokens, settled FROM ledger WHERE attempt_id IS NULL")
    assert [(k, a, s) for k, a, _, _, s in ledger] == [("mutation", "cheap", 1)] * 2
    assert [round(c, 9) for _, _, c, _, _ in ledger] == [round(e["cost_usd"], 9) for e in events]
    (task_cost,) = query(tmp_path, "SELECT cost_usd FROM tasks WHERE id='stuck'")[0]
    assert task_cost > 0 and abs(task_cost - sum(e["cost_usd"] for e in events)) < 1e-12  # the worker is free
    status = json.loads(virtual.harnessc(tmp_path, "status", "--output", "json").stdout)
    assert abs(status["tasks"][0]["cost_usd"] - task_cost) < 1e-9
    assert status["totals"]["assists"]["calls"] == 2 and abs(status["run"]["cost_usd"] - task_cost) < 1e-9
    assert "over 2 calls (prompt mutations and summaries" in virtual.harnessc(tmp_path, "status").stdout


SUMMARIES = {"context": {"raw_window_size": 2, "summary_agent": "cheap", "summarize_every": 3},
             "recovery": {"prompt_mutations": 0, "escalate": False, "human": False}}


def test_the_summary_agent_rewrites_the_summary_every_n_iterations(tmp_path):
    project(tmp_path, [loop_node("steady")], loop=SUMMARIES)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = {n: sent(tmp_path, "steady", n).split("### Summary of earlier iterations")
               for n in range(1, 8)}
    assert all(len(summary[n]) == 1 for n in (1, 2, 3))  # nothing left the window yet
    # after iteration 3, iteration 1 left the window: the agent wrote the summary
    assert "- CHEAP SUMMARY 1 of iterations 1\n" in summary[4][1] and "iteration 1 (worker" not in summary[4][1]
    assert "iteration 2 (worker, progress" in summary[5][1]  # extractive until the next rewrite
    # after iteration 6: rewritten from the old summary and iterations 2-4
    seventh = summary[7][1].split("### Most recent")[0]
    assert "- CHEAP SUMMARY 2 of iterations 2,3,4\n" in seventh and "- next: keep going" in seventh
    assert "CHEAP SUMMARY 1" not in seventh and "iteration 2 (worker" not in seventh
    asked = read(tmp_path, "cheap-summary-2.md")
    assert "- CHEAP SUMMARY 1 of iterations 1" in asked  # the old summary
    assert "<progress>step 4 of steady</progress>" in asked  # the iterations' own output
    assert [(e["purpose"], e["status"]) for e in assist_events(tmp_path)] == [("summary", "written")] * 2
    # the memory in state.db holds the agent's summary (a resumed run starts from it)
    memory = json.loads(query(tmp_path, "SELECT data FROM loop_state WHERE task_id='steady'")[0][0])["memory"]
    assert memory["summary_by"] == {"agent": "cheap", "iteration": 6}
    assert [e["n"] for e in memory["unsummarized"]] == [5]  # left the window at iteration 7: the next summary's


def test_a_failing_cheap_agent_falls_back_to_the_deterministic_text(tmp_path):
    loop = {"context": {"raw_window_size": 1, "summary_agent": "cheap", "summarize_every": 2},
            "recovery": {"prompt_mutations": 1, "escalate": False, "human": False, "mutation_agent": "cheap"}}
    project(tmp_path, [loop_node("stuck", limits={"stuck_after": 2})], cheap_mode="fail", loop=loop)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    third = sent(tmp_path, "stuck", 3)
    assert third.startswith("## Recovery (rephrase)\n\nYour last iterations made no progress. Before anything "
                            "else, restate the goal below"), third
    assert "# Task stuck: Task stuck" in third
    assert "iteration 1 (worker, progress" in third  # the extractive summary
    events = assist_events(tmp_path)
    assert {(e["purpose"], e["status"]) for e in events} == {("summary", "fallback"), ("mutation", "fallback")}
    assert all("cheap: out of service" in e["reason"] for e in events), events
    task = json.loads(virtual.harnessc(tmp_path, "status", "--output", "json").stdout)["tasks"][0]
    assert task["state"] == "failed" and task["error"].startswith("stuck: "), task  # the ladder's end, not the assist
    # the fallbacks are alerts, and `log` shows each assist call between the attempts
    alerts = [json.loads(line) for line in (tmp_path / ".harness" / "alerts.log").read_text().splitlines()]
    fell = [a["message"] for a in alerts if a["kind"] == "assist_fallback"]
    assert fell and all(m.startswith("cheap did not write the ") and "the built-in one is used" in m for m in fell)
    log = virtual.harnessc(tmp_path, "log", "stuck").stdout
    assert "--- assist: mutation by cheap: fallback (failed: agent 'cheap'" in log and "out of service" in log


def test_a_slow_or_verbose_cheap_agent_falls_back(tmp_path):
    project(tmp_path, [loop_node("stuck", limits={"stuck_after": 2})], cheap_mode="slow", cheap_timeout=1,
            loop=MUTATIONS)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "restate the goal below" in sent(tmp_path, "stuck", 3)
    events = assist_events(tmp_path)
    assert [e["status"] for e in events] == ["fallback", "fallback"] and "timed out" in events[0]["reason"], events

    verbose = tmp_path / "verbose"
    verbose.mkdir()
    project(verbose, [loop_node("stuck", limits={"stuck_after": 2})], cheap_mode="verbose", loop=MUTATIONS)
    r = virtual.harnessc(verbose, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "restate the goal below" in sent(verbose, "stuck", 3)
    assert "xxxx" not in sent(verbose, "stuck", 3)
    first = assist_events(verbose)[0]
    assert first["status"] == "fallback" and "over the 3000-character cap" in first["reason"]
    assert first["cost_usd"] > 0  # the answer was paid for


def test_a_budget_refusal_falls_back_without_calling(tmp_path):
    # the cheap agent's estimate alone is past the task's budget; the worker is free
    project(tmp_path, [loop_node("stuck", limits={"stuck_after": 2, "budget_usd": 0.001})],
            cheap_price={"input": 100.0, "output": 100.0}, loop=MUTATIONS)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "restate the goal below" in sent(tmp_path, "stuck", 3)
    assert not (tmp_path / ".harness" / "cheap-mutation").exists()  # never called
    events = assist_events(tmp_path)
    assert events[0]["status"] == "fallback" and events[0]["reason"].startswith("task budget too small for one call"), events
    assert query(tmp_path, "SELECT COUNT(*) FROM ledger WHERE attempt_id IS NULL")[0][0] == 0


def test_assist_calls_count_against_the_agents_daily_limit(tmp_path):
    plan = project(tmp_path, [loop_node("stuck", limits={"stuck_after": 2})], loop=MUTATIONS)
    path = tmp_path / ".harness" / "build" / "plan.json"
    data = json.loads(path.read_text())
    data["agents"]["cheap"]["limits"] = {"daily_calls": 1}
    path.write_text(json.dumps(data))
    assert plan.assists.mutation_agent == "cheap"
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    first, second = assist_events(tmp_path)
    assert first["status"] == "written" and second["status"] == "fallback", (first, second)
    assert "reached its daily calls limit (1 of 1 today)" in second["reason"]
    assert sent(tmp_path, "stuck", 5).startswith("## Recovery (decompose)\n\nYour last iterations made no progress.")


def test_simulate_writes_mutations_and_summaries_offline(tmp_path):
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "worker"},
                                  limits={"stuck_after": 2})],
                  agents={"worker": {"provider": "simulate", "complete_after": 8, "progress": "none"},
                          "rehearsal": {"provider": "simulate"}},
                  loop={"context": {"raw_window_size": 1, "summary_agent": "rehearsal", "summarize_every": 2},
                        "recovery": {"prompt_mutations": 2, "escalate": False, "human": False,
                                     "mutation_agent": "rehearsal"}})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr  # still stuck: the worker never changes
    prompts = [p for (p,) in query(tmp_path, "SELECT prompt FROM attempts ORDER BY id")]
    assert prompts[2].startswith("## Recovery (rephrase)\n\n(simulated rewrite 1 by rehearsal)")
    assert "(simulated summary 1 by rehearsal) Task t, up to iteration 2" in prompts[2]
    assert "# Task t: Task t" in prompts[2]
    assert {(e["purpose"], e["status"]) for e in assist_events(tmp_path)} == {("mutation", "written"),
                                                                               ("summary", "written")}


def test_projects_override_the_assist_templates(tmp_path):
    loop = {"context": {"raw_window_size": 1, "summary_agent": "cheap", "summarize_every": 2},
            "recovery": {"prompt_mutations": 1, "escalate": False, "human": False, "mutation_agent": "cheap"}}
    project(tmp_path, [loop_node("stuck", limits={"stuck_after": 2})], loop=loop)
    plan = tmp_path / ".harness" / "build" / "plan.json"
    plan.write_text(plan.read_text().replace('"templates": null', '"templates": "tpl"'))
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "mutation.md.j2").write_text("OUR OWN ASK: {{ mutation }} for {{ task.id }}\n")
    (tmp_path / "tpl" / "summary.md.j2").write_text("{{ memory.nope }}\n")  # a mistake: no `memory` here
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert read(tmp_path, "cheap-mutation-1.md").endswith("OUR OWN ASK: rephrase for stuck\n")
    assert sent(tmp_path, "stuck", 3).startswith("## Recovery (rephrase)\n\nCHEAP REWRITE 1:")
    summary = [e for e in assist_events(tmp_path) if e["purpose"] == "summary"][0]
    assert summary["status"] == "fallback", summary
    assert summary["reason"].startswith("could not render summary.md.j2: tpl/summary.md.j2:1: HC502: "), summary
    assert "iteration 1 (worker, progress" in sent(tmp_path, "stuck", 3)  # the extractive summary


# ------------------------------------------------------------------ the store


def _store(root) -> StateStore:
    store = StateStore(Workspace(root))
    store.run_id = "r1"
    store.db.execute("INSERT INTO runs (id, started_at, status) VALUES ('r1', 0, 'running')")
    store.ensure_tasks(["t"], set())
    return store


def test_an_assist_call_is_reserved_settled_and_charged_to_its_task(tmp_path):
    store = _store(tmp_path)
    try:
        lid = store.begin_assist("t", "summary", "cheap", 0.02, 700)
        assert store.spent() == pytest.approx(0.02) and store.spent("t") == pytest.approx(0.02)
        assert store.tokens_spent() == 700
        store.finish_assist(lid, "t", 0.005, 450, purpose="summary", agent="cheap", status="written")
        assert store.spent() == pytest.approx(0.005) and store.tokens_spent() == 450
        again = StateStore(Workspace(tmp_path))  # the totals read back from the file, not the caches
        try:
            assert again.spent() == pytest.approx(0.005) and again.tokens_spent() == 450
            assert again.agent_usage_since("cheap", 0) == {"calls": 1, "tokens": 450, "cost_usd": 0.005}
            assert again.usage_totals()["assists"] == {"calls": 1, "tokens": 450, "cost_usd": 0.005}
        finally:
            again.close()
        task = store.tasks()["t"]
        assert task["cost_usd"] == pytest.approx(0.005) and task["tokens"] == 450
        event = store.task_events("t", ("assist",))[0]
        assert event["status"] == "written" and event["cost_usd"] == 0.005 and event["tokens"] == 450
    finally:
        store.close()


def test_a_run_that_dies_during_an_assist_call_leaves_its_cost_unknown_and_its_estimate_apart(tmp_path):
    # as a cut-off agent call (issue 27): never charged its reservation, the estimate kept
    store = _store(tmp_path)
    store.begin_assist("t", "mutation", "cheap", 0.02, 700)
    store.close()  # killed: never settled
    store = StateStore(Workspace(tmp_path))
    try:
        store.recover()
        assert [tuple(r) for r in store.db.execute("SELECT actual, settled, reserved FROM ledger")] == [(None, 1, 0.02)]
        assert store.spent() == 0.0
        task = store.tasks()["t"]
        assert task["cost_usd"] == 0.0 and task["tokens"] == 700
    finally:
        store.close()


def test_a_summary_rewritten_between_iterations_is_saved_alone(tmp_path):
    store = _store(tmp_path)
    try:
        aid = store.begin_attempt("t", 1, 0, "w", "p", "h", 0.0, start_task=True)
        saved = {"fingerprint": "f", "iterations": 1, "progress": {"x": 1}, "memory": {"summary": ["old"]}}
        store.finish_attempt(aid, "t", AttemptEnd("progress", raw="r", loop_state=saved))
        store.save_loop_memory("t", {"summary": ["new"], "summary_by": {"agent": "cheap", "iteration": 1}})
        assert store.loop_state("t") == {**saved, "memory": {"summary": ["new"],
                                                             "summary_by": {"agent": "cheap", "iteration": 1}}}
        store.save_loop_memory("other", {"summary": []})  # no saved state: nothing
        assert store.loop_state("other") is None
    finally:
        store.close()
