"""The runtime commands, real SQLite and real agents: harnessc in this process (in virtual time,
or on the real clock where times, a server thread or a real run beside it count), and real
`harnessc` processes where a run is signalled, stopped or raced."""

from __future__ import annotations

import json
import signal
import sqlite3
import textwrap
import time
from pathlib import Path

import inproc
import pytest

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, env, node, spawn, write_project


def status(root) -> dict:
    r = virtual.harnessc(root, "status", "--output", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def states(root) -> dict:
    return {t["id"]: t["state"] for t in status(root)["tasks"]}


def test_run_succeeds_and_outputs_flow_to_dependents(tmp_path):
    write_project(tmp_path, [node("a", contract="summary"),
                             node("b", depends_on=["a"], completion_promise="DONE"),
                             node("c", accept=[{"id": "ok", "argv": ["true"], "timeout": 5}])],
                  contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "succeeded" in r.stdout and "attempts" in r.stdout  # the summary table
    data = status(tmp_path)
    assert {t["id"]: t["state"] for t in data["tasks"]} == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    assert data["run"]["status"] == "succeeded" and data["run"]["exit_code"] == 0
    log = json.loads(virtual.harnessc(tmp_path, "log", "b", "--json").stdout)
    assert '"title": "hello"' in log[0]["prompt"]  # a's validated output reached b's prompt
    run_id = data["run"]["id"]
    results = json.loads((tmp_path / ".harness" / "runs" / run_id / "run_results.json").read_text())
    assert results["exit_code"] == 0 and len(results["results"]) == 3
    events = (tmp_path / ".harness" / "runs" / run_id / "events.jsonl").read_text().splitlines()
    assert json.loads(events[0])["kind"] == "run_started"
    # Running again does nothing: succeeded tasks never re-run.
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0
    assert [len(json.loads(virtual.harnessc(tmp_path, "log", t, "--json").stdout)) for t in "abc"] == [1, 1, 1]


def test_failure_skips_dependents_then_retry_and_reset(tmp_path):
    marker = tmp_path / "ok"
    check = [PY, "-c", f"import os, sys; sys.exit(0 if os.path.exists({str(marker)!r}) else 1)"]
    write_project(tmp_path, [node("a", accept=[{"id": "gate", "argv": check, "timeout": 10}]),
                             node("b", depends_on=["a"]), node("c")])
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1
    assert states(tmp_path) == {"a": "failed", "b": "skipped", "c": "succeeded"}
    a = [t for t in status(tmp_path)["tasks"] if t["id"] == "a"][0]
    assert a["attempts"] == 3 and "gate" in a["error"]  # max_retries 2 = 3 attempts
    log = json.loads(virtual.harnessc(tmp_path, "log", "a", "--json").stdout)
    assert [x["level"] for x in log] == [0, 1, 2]  # refinement rises
    assert "not accepted" in log[1]["prompt"].lower() or "gate" in log[1]["prompt"]
    marker.write_text("")
    r = virtual.harnessc(tmp_path, "retry")
    assert r.returncode == 0, r.stdout + r.stderr
    assert states(tmp_path) == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    r = virtual.harnessc(tmp_path, "reset", "c")
    assert r.returncode == 0 and "reset 1" in r.stdout
    assert states(tmp_path)["c"] in ("pending", "ready")
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0 and states(tmp_path)["c"] == "succeeded"
    assert virtual.harnessc(tmp_path, "reset", "nope").returncode == 2
    assert virtual.harnessc(tmp_path, "reset").returncode == 2
    assert virtual.harnessc(tmp_path, "reset", "--all").returncode == 0
    assert virtual.harnessc(tmp_path, "log", "a").stdout.startswith("no attempts")


def test_fallback_strategies(tmp_path):
    agents = {"rehearsal": {"provider": "simulate"},
              "bad": {"provider": "simulate", "invalid_first": 10}}
    bad = {"routing": {"agent": "bad"}}
    write_project(tmp_path, [
        node("part", contract="summary", retry={"on_failure": "partial"}, **bad),
        node("tmpl", contract="summary", retry={"on_failure": "template"}, **bad),
        node("esc", contract="summary", retry={"on_failure": "escalate"}, **bad),
        node("after", depends_on=["part", "tmpl"], completion_promise="OK"),
        node("fixed", contract="summary", routing={"agent": "flaky"}),
    ], agents={**agents, "flaky": {"provider": "simulate", "invalid_first": 2}},
        contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1
    data = {t["id"]: t for t in status(tmp_path)["tasks"]}
    assert data["part"]["state"] == "degraded" and data["tmpl"]["state"] == "degraded"
    assert data["esc"]["state"] == "failed"
    assert "on_failure escalate: no stronger agent left after 'bad'" in data["esc"]["error"]
    assert data["after"]["state"] == "succeeded"  # degraded outputs still feed dependents
    assert data["fixed"]["state"] == "succeeded" and data["fixed"]["attempts"] == 3


def events(root, kind: str) -> list[dict]:
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id, data FROM events WHERE kind = ? ORDER BY id", (kind,)).fetchall()
    return [{"task": t, **json.loads(d or "{}")} for t, d in rows]


def test_escalation_moves_up_the_chain_with_retries_reset(tmp_path):
    # real time: `log` tells which events came between two attempts by their times
    write_project(tmp_path, [
        node("esc", contract="summary", retry={"max_retries": 1, "on_failure": "escalate"},
             routing={"agent": "weak", "chain": ["mid", "strong"]}),
    ], agents={"weak": {"provider": "simulate", "invalid_first": 10},
               "mid": {"provider": "simulate", "invalid_first": 10},
               "strong": {"provider": "simulate", "invalid_first": 1}},
        contracts={"summary": SIMPLE_CONTRACT})
    r = inproc.harnessc("-C", str(tmp_path), "run", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "weak > mid > strong" in r.stdout  # the summary shows the way up
    esc = status(tmp_path)["tasks"][0]
    # 2 on weak, 2 on mid (retries reset on each step), then strong: 1 invalid + 1 valid
    assert esc["state"] == "succeeded" and esc["attempts"] == 6 and esc["agent"] == "strong"
    moves = [(e["agent"], e["to"]) for e in events(tmp_path, "escalated")]
    assert moves == [("weak", "mid"), ("mid", "strong")]
    agents = [a for (a,) in sqlite3.connect(tmp_path / ".harness" / "state.db").execute(
        "SELECT agent FROM attempts ORDER BY id")]
    assert agents == ["weak", "weak", "mid", "mid", "strong", "strong"]
    log = inproc.harnessc("-C", str(tmp_path), "log", "esc", cwd=tmp_path).stdout
    assert log.count("--- escalated:") == 2 and "--- escalated: weak -> mid (2 failed verifications:" in log
    third = json.loads(inproc.harnessc("-C", str(tmp_path), "log", "esc", "--attempt", "3", "--output", "json", cwd=tmp_path).stdout)[0]
    assert third["agent"] == "mid" and third["routing"][0].startswith("escalated: weak -> mid")


def test_agent_errors_fall_back_to_the_next_agent_without_counting_a_failure(tmp_path):
    """A key the server rejects (401: the pre-flight sees only that it is set) is an auth
    error: final on that agent, the chain's next one serves."""
    pytest.importorskip("openai")
    pytest.importorskip("aiohttp")
    from .fakeapi import Reply, ThreadedFakeAPI

    with ThreadedFakeAPI() as api:
        api.push(*[Reply.error(401, "authentication_error", message="invalid x-api-key")] * 2)
        write_project(tmp_path, [
            node("keyless", contract="summary", retry={"max_retries": 0},
                 routing={"agent": "paid", "chain": ["rehearsal"]}),
            node("alone", contract="summary", routing={"agent": "paid"}),
        ], agents={"paid": {"provider": "openai", "model": "gpt-x", "api_key_env": "HC_TEST_BAD_KEY",
                            "base_url": api.base_url + "/v1"},
                   "rehearsal": {"provider": "simulate"}},
            contracts={"summary": SIMPLE_CONTRACT})
        r = inproc.harnessc("-C", str(tmp_path), "run", "-j", "1", env=env(HC_TEST_BAD_KEY="sk-rejected-by-the-server"), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    data = {t["id"]: t for t in status(tmp_path)["tasks"]}
    assert data["keyless"]["state"] == "succeeded" and data["keyless"]["agent"] == "rehearsal"
    assert data["alone"]["state"] == "failed" and "invalid x-api-key" in data["alone"]["error"]
    fallbacks = events(tmp_path, "fallback")
    assert [(e["task"], e["agent"], e["to"]) for e in fallbacks] == [("keyless", "paid", "rehearsal")]
    assert "invalid x-api-key" in fallbacks[0]["reason"]


def env_without(name: str) -> dict:
    e = env()
    e.pop(name, None)
    return e


def test_stuck_and_iteration_limits(tmp_path):
    write_project(tmp_path, [
        node("loop", completion_promise="DONE", routing={"agent": "slowpoke"}),
        node("stuck", completion_promise="DONE", routing={"agent": "stuckbot"}),
        node("short", completion_promise="DONE", routing={"agent": "slowpoke"},
             limits={"max_iterations": 2}),
    ], agents={"slowpoke": {"provider": "simulate", "complete_after": 4},
               "stuckbot": {"provider": "simulate", "complete_after": 99, "progress": "none"}})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1
    data = {t["id"]: t for t in status(tmp_path)["tasks"]}
    assert data["loop"]["state"] == "succeeded" and data["loop"]["iterations"] == 5
    # stuck 4 times (3 iterations each): 3 prompt mutations, no stronger agent, then a human
    assert data["stuck"]["state"] == "blocked" and data["stuck"]["error"].startswith("blocked: stuck")
    assert data["stuck"]["iterations"] == 12
    assert data["short"]["state"] == "failed" and "max_iterations (2)" in data["short"]["error"]


def test_command_agent_faults(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time
        task = os.environ["HARNESSC_TASK"]
        prompt = sys.stdin.read()
        if task == "silent":
            sys.exit(0)
        if task == "crash":
            print("boom on stderr", file=sys.stderr); sys.exit(3)
        if task == "huge":
            sys.stdout.write("y" * (3 << 20)); sys.exit(0)
        if task == "hang":
            time.sleep(60)
        if task == "prose":
            print("I did it, no JSON here"); sys.exit(0)
        print('```json\\n{"title": "t", "score": 1}\\n```')
    """))
    agents = {"cli": {"provider": "command", "command": [PY, str(script)], "timeout": 2},
              "missing": {"provider": "command", "command": ["no-such-agent-binary-xyz"]}}
    c = {"contract": "summary", "routing": {"agent": "cli"}, "retry": {"max_retries": 0}}
    write_project(tmp_path, [node(t, **c) for t in ("good", "silent", "crash", "huge", "hang", "prose")]
                  + [node("nobin", contract="summary", routing={"agent": "missing"}, retry={"max_retries": 0})],
                  agents=agents, contracts={"summary": SIMPLE_CONTRACT})
    r = inproc.harnessc("-C", str(tmp_path), "run", cwd=tmp_path)  # the pre-flight: `missing` is the only agent of nobin
    assert r.returncode == 2 and "'no-such-agent-binary-xyz' is not on PATH" in r.stderr, r.stderr
    t0 = time.monotonic()
    r = inproc.harnessc("-C", str(tmp_path), "run", "--exclude", "nobin", cwd=tmp_path)
    assert r.returncode == 1
    assert time.monotonic() - t0 < 30
    data = {t["id"]: t for t in status(tmp_path)["tasks"]}
    assert data["good"]["state"] == "succeeded"
    assert "printed nothing" in data["silent"]["error"] or "no JSON" in data["silent"]["error"]
    assert "exited with 3" in data["crash"]["error"] and "boom on stderr" in data["crash"]["error"]
    assert data["huge"]["state"] == "failed"
    assert "timed out" in data["hang"]["error"]
    assert "no JSON object" in data["prose"]["error"]
    assert data["nobin"]["state"] == "ready" and data["nobin"]["attempts"] == 0
    huge = json.loads(inproc.harnessc("-C", str(tmp_path), "log", "huge", "--json", cwd=tmp_path).stdout)
    assert len(huge[0]["raw_output"]) <= 1 << 20


def test_budget_stops_the_run_with_exit_3_and_is_kept_across_resumes(tmp_path):
    price = {"input": 1000.0, "output": 1000.0}  # about $0.1 per call
    write_project(tmp_path, [node(f"t{i}") for i in range(6)],
                  agents={"rehearsal": {"provider": "simulate", "price": price}}, concurrency=1)
    r = virtual.harnessc(tmp_path, "run", "--max-cost", "0.25")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "budget" in (r.stdout + r.stderr).lower()
    done1 = sum(s == "succeeded" for s in states(tmp_path).values())
    assert 1 <= done1 < 6
    r = virtual.harnessc(tmp_path, "run", "--max-cost", "0.25")  # the ledger remembers what was spent
    assert r.returncode == 3
    assert sum(s == "succeeded" for s in states(tmp_path).values()) == done1
    r = virtual.harnessc(tmp_path, "run", "--max-cost", "100")
    assert r.returncode == 0


def until(proc, root: Path, check, limit: float = 120) -> dict:
    """The project's status once `check(status)` holds, polled while the run `proc` goes on:
    it may take seconds to get there on a loaded machine (no timing asserted)."""
    deadline = time.monotonic() + limit
    while not check(s := status(root)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got there"
        time.sleep(0.1)
    return s


def test_stop_file_and_concurrent_run_and_status_during_run(tmp_path):
    # work for ~45 s unless stopped: a loaded machine may take seconds to start the second run
    write_project(tmp_path, [node(f"t{i}") for i in range(300)],
                  agents={"rehearsal": {"provider": "simulate", "latency": 0.3}}, concurrency=2)
    p = spawn(tmp_path, "run")
    try:
        s = until(p, tmp_path, lambda s: s["run"] and s["run"].get("active")
                  and any(t["state"] == "succeeded" for t in s["tasks"]))
        assert s["run"]["active"] and s["run"]["pid"] == p.pid
        second = inproc.harnessc("-C", str(tmp_path), "run", cwd=tmp_path)
        assert second.returncode == 2 and f"pid {p.pid}" in second.stderr
        r = inproc.harnessc("-C", str(tmp_path), "stop", cwd=tmp_path)
        assert r.returncode == 0 and str(p.pid) in r.stdout
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3, out + err
    assert "in-flight work finished and was checkpointed" in out and "stopped: stopped" not in out
    st = status(tmp_path)
    assert st["run"]["status"] == "stopped"
    assert not any(t["state"] == "running" for t in st["tasks"])
    r = virtual.harnessc(tmp_path, "run", "-j", "64")  # the rest, at once
    assert r.returncode == 0 and set(states(tmp_path).values()) == {"succeeded"}


def test_double_ctrl_c_during_accept_command_kills_its_group(tmp_path):
    pidfile = tmp_path / "accept.pid"
    slow = [PY, "-c", f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"]
    write_project(tmp_path, [node("slow", accept=[{"id": "slow", "argv": slow, "timeout": 120}])])
    p = spawn(tmp_path, "run")
    try:
        deadline = time.monotonic() + 120  # polled: the accept command may start late on a loaded machine
        while not (pidfile.exists() and pidfile.read_text()):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the accept command never started"
            time.sleep(0.1)
        p.send_signal(signal.SIGINT)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3, out + err
    from .test_procs import ends

    assert ends(int(pidfile.read_text()))
    log = json.loads(inproc.harnessc("-C", str(tmp_path), "log", "slow", "--json", cwd=tmp_path).stdout)
    assert log[-1]["status"] == "interrupted"
    assert states(tmp_path)["slow"] in ("pending", "ready")


def test_bad_state_and_plan_inputs(tmp_path):
    write_project(tmp_path, [node("a")])
    db = tmp_path / ".harness" / "state.db"
    db.write_bytes(b"this is not sqlite at all" * 100)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 2 and "not a readable harnessc state database" in r.stderr
    assert db.read_bytes().startswith(b"this is not sqlite")  # never silently reset
    db.unlink()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE other (x)")
    con.commit()
    con.close()
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 2 and "not a harnessc state database" in r.stderr
    db.unlink()
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    con.close()
    r = virtual.harnessc(tmp_path, "status")
    assert r.returncode == 2 and "newer" in r.stderr
    db.unlink()
    # An empty state.db is what `status` sees while a starting run creates it: nothing ran yet.
    db.write_bytes(b"")
    assert status(tmp_path)["run"] is None
    assert virtual.harnessc(tmp_path, "log", "a").stdout.startswith("no attempts")
    db.unlink()
    # A stale plan with --no-build is refused; a missing plan too.
    (tmp_path / "roadmap.md").write_text("# changed\n")
    r = virtual.harnessc(tmp_path, "run", "--no-build")
    assert r.returncode == 2 and "older than roadmap.md" in r.stderr
    (tmp_path / ".harness" / "build" / "plan.json").unlink()
    r = virtual.harnessc(tmp_path, "run", "--no-build")
    assert r.returncode == 2 and "no compiled plan" in r.stderr
    assert "Traceback" not in r.stderr


def test_select_and_usage_errors(tmp_path):
    write_project(tmp_path, [node("a"), node("b", depends_on=["a"]), node("c")])
    r = virtual.harnessc(tmp_path, "run", "--select", "b")
    assert r.returncode == 1  # b's dependency is neither done nor selected: skipped
    assert states(tmp_path)["b"] == "skipped"
    r = virtual.harnessc(tmp_path, "run", "--select", "+b")
    assert r.returncode == 0, r.stdout + r.stderr
    r = virtual.harnessc(tmp_path, "run", "--select", "zzz")
    assert r.returncode == 2 and "zzz" in r.stderr
    r = virtual.harnessc(tmp_path, "run", "--jobs", "0")
    assert r.returncode == 2


def test_transient_errors_are_retried_and_task_budget_fails_the_task(tmp_path):
    write_project(tmp_path, [node(f"f{i}", routing={"agent": "flaky"}) for i in range(8)]
                  + [node("pricey", routing={"agent": "pricey"}, limits={"budget_usd": 0.05},
                          accept=[{"id": "no", "argv": ["false"], "timeout": 5}])],
                  agents={"flaky": {"provider": "simulate", "fail_rate": 0.3, "seed": 7},
                          "pricey": {"provider": "simulate", "price": {"input": 1000.0, "output": 1000.0}}})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1
    data = {t["id"]: t for t in status(tmp_path)["tasks"]}
    assert all(data[f"f{i}"]["state"] == "succeeded" for i in range(8))
    assert sum(data[f"f{i}"]["attempts"] for i in range(8)) > 8  # some calls failed and were retried
    assert data["pricey"]["state"] == "failed" and "task budget too small for one call" in data["pricey"]["error"]
    errors = [a for i in range(8) for a in json.loads(virtual.harnessc(tmp_path, "log", f"f{i}", "--json").stdout)
              if a["status"] == "error"]
    assert errors and all("transient" in a["errors"][0] for a in errors)


def test_token_budget_stops_the_run_with_exit_3_and_is_kept_across_resumes(tmp_path):
    # Each simulate call uses a few dozen tokens and reserves its prompt + 100 (the node's
    # output estimate) before the call; 250 tokens let a few calls through, not six.
    write_project(tmp_path, [node(f"t{i}") for i in range(6)], concurrency=1,
                  budget={"max_cost_usd": None, "max_tokens": 250})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "token budget reached" in r.stdout + r.stderr
    data = status(tmp_path)
    done1 = sum(t["state"] == "succeeded" for t in data["tasks"])
    assert 1 <= done1 < 6
    assert sum(t["tokens"] for t in data["tasks"]) <= 250
    assert data["run"]["exit_code"] == 3
    r = virtual.harnessc(tmp_path, "run")  # the attempts remember what was used
    assert r.returncode == 3
    assert sum(s == "succeeded" for s in states(tmp_path).values()) == done1
    virtual.harnessc(tmp_path, "reset", "--all")
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 3  # a fresh ledger: as far as the budget goes again
    assert sum(s == "succeeded" for s in states(tmp_path).values()) == done1


def test_log_of_an_unknown_task_is_a_usage_error_with_a_hint(tmp_path):
    root = tmp_path / "p"
    write_project(root, [node("qualify-001")])
    r = virtual.harnessc(root, "log", "qualify-01")
    assert r.returncode == 2 and "did you mean 'qualify-001'?" in r.stderr


def test_ready_tasks_start_in_priority_then_roadmap_order(tmp_path):
    # one at a time, so the attempts' order is the start order; an unset priority is normal
    write_project(tmp_path, [node("lo", priority="low"), node("unset", priority=None),
                             node("crit", priority="critical"), node("hi", priority="high")],
                  concurrency=1)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    con = sqlite3.connect(tmp_path / ".harness" / "state.db")
    started = [row[0] for row in con.execute("SELECT task_id FROM attempts ORDER BY id")]
    con.close()
    assert started == ["crit", "hi", "unset", "lo"]


def test_log_numbers_attempts_per_task_with_last_and_attempt(tmp_path):
    # a runs first (-j 1), so b's attempts have global ids 4-6: log numbers them 1-3.
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "flaky_a"}),
                             node("b", contract="summary", routing={"agent": "flaky_b"})],
                  agents={"flaky_a": {"provider": "simulate", "invalid_first": 2},
                          "flaky_b": {"provider": "simulate", "invalid_first": 2}},
                  contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run", "-j", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "succeeded: 2 tasks succeeded (" in r.stdout
    full = json.loads(virtual.harnessc(tmp_path, "log", "b", "--output", "json").stdout)
    assert [a["attempt"] for a in full] == [1, 2, 3] and full[0]["id"] > 3
    text = virtual.harnessc(tmp_path, "log", "b").stdout
    assert [ln.split(" · ")[0] for ln in text.splitlines() if ln.startswith("===")] == [
        "=== attempt 1 of 3", "=== attempt 2 of 3", "=== attempt 3 of 3"]
    last = virtual.harnessc(tmp_path, "log", "b", "--last").stdout
    assert last.count("===") == 1 and last.startswith("=== attempt 3 of 3") and "succeeded" in last.splitlines()[0]
    second = json.loads(virtual.harnessc(tmp_path, "log", "b", "--attempt", "2", "--json").stdout)
    assert [(a["attempt"], a["id"]) for a in second] == [(2, full[1]["id"])]
    r = virtual.harnessc(tmp_path, "log", "b", "--attempt", "4")
    assert r.returncode == 2 and "'b' has 3 recorded attempts; there is no attempt 4" in r.stderr
    r = virtual.harnessc(tmp_path, "log", "b", "--attempt", "1", "--last")
    assert r.returncode == 2 and "not both" in r.stderr
    # One task: "1 task", never "1 tasks".
    virtual.harnessc(tmp_path, "reset", "a")
    r = virtual.harnessc(tmp_path, "run", "-s", "a")
    assert r.returncode == 0 and "succeeded: 1 task succeeded (" in r.stdout, r.stdout


def test_reset_checks_ids_offers_downstream_and_names_stale_dependents(tmp_path):
    write_project(tmp_path, [node("a-001"), node("b-001", depends_on=["a-001"]),
                             node("c-001", depends_on=["b-001"]), node("d-001")])
    # No state yet: a typo is still a typo (exit 2, did-you-mean); a real id has nothing to reset.
    r = virtual.harnessc(tmp_path, "reset", "a-01")
    assert r.returncode == 2 and "no task 'a-01' in the project" in r.stderr
    assert "did you mean 'a-001'?" in r.stderr
    r = virtual.harnessc(tmp_path, "reset", "a-001")
    assert r.returncode == 0 and "nothing to reset: no state yet" in r.stdout
    assert not (tmp_path / ".harness" / "state.db").exists()
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    # Resetting a task leaves its succeeded dependents stale: say which.
    r = virtual.harnessc(tmp_path, "reset", "a-001")
    assert r.returncode == 0 and "reset 1 task" in r.stdout
    assert "warning: b-001, c-001 succeeded on the output of what was reset and are now stale" in r.stderr
    assert "`harnessc reset --downstream a-001`" in r.stderr
    assert states(tmp_path) == {"a-001": "ready", "b-001": "succeeded", "c-001": "succeeded", "d-001": "succeeded"}
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    # --downstream resets the dependents too, and nothing is left stale.
    r = virtual.harnessc(tmp_path, "reset", "--downstream", "b-001")
    assert r.returncode == 0 and "reset 2 tasks (with --downstream: b-001, c-001)" in r.stdout
    assert "warning" not in r.stderr
    assert states(tmp_path) == {"a-001": "succeeded", "b-001": "ready", "c-001": "pending", "d-001": "succeeded"}
    r = virtual.harnessc(tmp_path, "reset", "d-001", "zzz")
    assert r.returncode == 2 and "no task 'zzz'" in r.stderr and states(tmp_path)["d-001"] == "succeeded"
    assert virtual.harnessc(tmp_path, "reset", "--all", "--downstream").returncode == 2


def test_status_shows_elapsed_time_of_running_tasks(tmp_path):
    write_project(tmp_path, [node("quick", routing={"agent": "fast"}), node("slow", depends_on=["quick"])],
                  agents={"rehearsal": {"provider": "simulate", "latency": 120},
                          "fast": {"provider": "simulate"}})
    p = spawn(tmp_path, "run")
    try:
        s = until(p, tmp_path, lambda s: any(t["state"] == "running" and t["id"] == "slow" for t in s["tasks"]))
        tasks = {t["id"]: t for t in s["tasks"]}
        assert tasks["slow"]["elapsed"] >= 0 and "elapsed" not in tasks["quick"]  # finished: a duration
        text = inproc.harnessc("-C", str(tmp_path), "status", cwd=tmp_path).stdout.splitlines()
        assert ": running for " in text[0]
        assert text[1].startswith("running: slow (") and text[1].endswith(", iteration 1)")
        assert [ln.split()[:2] for ln in text if ln.startswith("slow ")] == [["slow", "running"]]
        inproc.harnessc("-C", str(tmp_path), "stop", "--abort", cwd=tmp_path)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3
    assert all("elapsed" not in t for t in status(tmp_path)["tasks"])  # nothing runs now


def test_clean_keeps_the_newest_runs_and_never_follows_links(tmp_path):
    import os

    write_project(tmp_path, [node("a")])
    runs = tmp_path / ".harness" / "runs"
    r = virtual.harnessc(tmp_path, "clean")
    assert r.returncode == 0 and "nothing to clean: 0 runs" in r.stdout
    ids = []
    for _ in range(4):
        assert virtual.harnessc(tmp_path, "run", "--rerun", "all").returncode == 0
        ids.append(status(tmp_path)["run"]["id"])
    assert sorted(p.name for p in runs.iterdir()) == sorted(ids)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    os.symlink(outside, runs / "zz-link")
    r = virtual.harnessc(tmp_path, "clean", "--keep", "2", "--dry-run")
    assert r.returncode == 0 and r.stdout.splitlines()[:2] == [
        f"would remove .harness/runs/{ids[0]}/", f"would remove .harness/runs/{ids[1]}/"]
    assert len(list(runs.iterdir())) == 5
    r = virtual.harnessc(tmp_path, "clean", "--keep", "2")
    assert r.returncode == 0 and f"removed 2 runs, kept 2 runs (newest: {ids[3]})" in r.stdout
    assert "left .harness/runs/zz-link alone" in r.stderr
    assert sorted(p.name for p in runs.iterdir()) == sorted(ids[2:] + ["zz-link"])
    assert (outside / "precious").read_text() == "keep me"
    r = virtual.harnessc(tmp_path, "clean", "--keep", "1")
    assert r.returncode == 0 and "removed 1 run, kept 1 run" in r.stdout
    # A .harness/runs that is itself a link is refused, and nothing is removed.
    (runs / "zz-link").unlink()
    runs.rename(tmp_path / "real-runs")
    os.symlink(tmp_path / "real-runs", runs)
    r = virtual.harnessc(tmp_path, "clean", "--keep", "0")
    assert r.returncode == 2 and "refusing to read through a symbolic link: .harness/runs ->" in r.stderr
    assert [p.name for p in (tmp_path / "real-runs").iterdir()] == [ids[3]]


def test_clean_never_removes_the_run_in_progress(tmp_path):
    write_project(tmp_path, [node("quick", routing={"agent": "fast"}), node("slow", depends_on=["quick"])],
                  agents={"rehearsal": {"provider": "simulate", "latency": 120},
                          "fast": {"provider": "simulate"}})
    p = spawn(tmp_path, "run")
    try:
        s = until(p, tmp_path, lambda s: s["run"] and s["run"]["active"])
        loop = tmp_path / ".harness" / "loop"
        loop.mkdir(exist_ok=True)
        (loop / "old.index").write_bytes(b"DIRC")  # a task of the running run may still use it
        r = inproc.harnessc("-C", str(tmp_path), "clean", "--keep", "0", cwd=tmp_path)
        assert r.returncode == 0 and "nothing to clean: 1 run" in r.stdout
        assert (tmp_path / ".harness" / "runs" / s["run"]["id"]).is_dir()
        assert (loop / "old.index").exists()
        inproc.harnessc("-C", str(tmp_path), "stop", "--abort", cwd=tmp_path)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    r = inproc.harnessc("-C", str(tmp_path), "clean", "--keep", "0", cwd=tmp_path)
    assert r.returncode == 0 and "removed 1 run, kept 0 runs" in r.stdout
    assert "removed .harness/loop/old.index (a stale index of an earlier version)" in r.stdout
    assert not (loop / "old.index").exists()


def test_clean_removes_the_per_task_indexes_of_earlier_versions_but_not_run_index(tmp_path):
    import os

    write_project(tmp_path, [node("a")])
    loop = tmp_path / ".harness" / "loop"
    loop.mkdir(parents=True)
    for name in ("a.index", "b.index", "run.index", "notes.txt", "a.index.lock"):
        (loop / name).write_bytes(b"DIRC")
    outside = tmp_path / "outside.index"
    outside.write_text("keep me")
    os.symlink(outside, loop / "link.index")
    r = virtual.harnessc(tmp_path, "clean", "--dry-run")
    assert r.returncode == 0 and r.stdout.splitlines() == [
        "would remove .harness/loop/a.index (a stale index of an earlier version)",
        "would remove .harness/loop/b.index (a stale index of an earlier version)",
        "no run to remove: 0 runs in .harness/runs/, keeping 10"], r.stdout
    assert len(list(loop.iterdir())) == 6
    r = virtual.harnessc(tmp_path, "clean")
    assert r.returncode == 0 and "removed .harness/loop/b.index" in r.stdout
    assert sorted(p.name for p in loop.iterdir()) == ["a.index.lock", "link.index", "notes.txt", "run.index"]
    assert outside.read_text() == "keep me"
    r = virtual.harnessc(tmp_path, "clean")
    assert r.returncode == 0 and r.stdout.splitlines() == ["nothing to clean: 0 runs in .harness/runs/, keeping 10"]
