"""What `harnessc run` tells its user: exit codes, summaries, next steps, clean stops (issue 11).
Summaries, budgets and dry runs run in this process in virtual time (virtual.harnessc); the
runs that are stopped, signalled or killed, and the one whose heartbeats come by the real
clock, are real `harnessc` processes, and the commands beside or after them run in this
process on the real clock (tests/inproc.py)."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import textwrap
import time

import inproc
import pytest

from . import virtual
from .helpers import PY, node, spawn, write_project

SLOW_AGENT = textwrap.dedent("""
    import os, sys, time
    open(os.environ["STARTED"], "a").write(os.environ["HARNESSC_TASK"] + "\\n")
    sys.stdin.read()
    time.sleep(60)
""")


def _wait_for(path, proc, timeout=300.0):
    """Poll until `path` has been written, as long as `proc` goes on (its start-up takes a
    while on a busy machine; a process that ended without writing it fails at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return
        assert proc.poll() is None, f"the run ended (exit {proc.returncode}) before {path.name} was written"
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _slow_project(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(SLOW_AGENT)
    root = tmp_path / "p"
    write_project(root, [node("slow", routing={"agent": "cli"}, completion_promise="DONE")],
                  agents={"cli": {"provider": "command", "command": [PY, str(script)],
                                  "env": {"STARTED": str(tmp_path / "started")}}})
    return root


def _wait_for_event(root, kind, proc, timeout=300.0):
    """Poll the run's events.jsonl until an event of `kind` is there, while the run goes on."""
    deadline = time.monotonic() + timeout
    while not any(f'"{kind}"' in f.read_text() for f in (root / ".harness" / "runs").glob("*/events.jsonl")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no {kind} event"
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["stop --abort", "ctrl-c twice", "sigterm"])
def test_aborting_a_command_agent_leaves_stderr_clean(tmp_path, how):
    root = _slow_project(tmp_path)
    p = spawn(root, "run")
    try:
        _wait_for(tmp_path / "started", p)
        if how == "stop --abort":
            assert inproc.harnessc("-C", str(root), "stop", "--abort").returncode == 0
        elif how == "ctrl-c twice":
            p.send_signal(signal.SIGINT)
            # the second once the first was taken: two sent before the run is scheduled again
            # are one pending signal to the kernel (a graceful stop, waiting on the agent)
            _wait_for_event(root, "stop_requested", p)
            p.send_signal(signal.SIGINT)
        else:
            p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3, out + err
    assert "never retrieved" not in err and "CancelledError" not in err, err
    assert "Traceback" not in err, err
    assert "slow: started on cli" in out and "aborting: cancelling in-flight work" in out, out
    # Only a Ctrl-C can be followed by another Ctrl-C.
    assert ("stopping: finishing in-flight work (Ctrl-C again to abort)" in out) == (how == "ctrl-c twice"), out
    log = json.loads(inproc.harnessc("-C", str(root), "log", "slow", "--json").stdout)
    assert log[-1]["status"] == "interrupted"


def _run_dirs(root):
    d = root / ".harness" / "runs"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def _status(root) -> dict:
    r = virtual.harnessc(root, "status", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_failed_run_ends_with_next_steps_and_a_second_run_has_nothing_to_do(tmp_path):
    write_project(tmp_path, [node("a", accept=[{"id": "gate", "argv": ["false"], "timeout": 5}],
                                  retry={"max_retries": 0, "on_failure": "fail", "delays": [0]}),
                             node("b", depends_on=["a"]), node("c")])
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    i = next(n for n, x in enumerate(lines) if x.startswith("failed: 1 task failed, 1 skipped, 1 succeeded ("))
    assert lines[i + 1:] == [
        "  failed:  a",
        "  skipped: b (dependency 'a' failed)",
        "next steps:",
        "  harnessc log a  every attempt of a: prompt, output, errors",
        "  harnessc retry  re-run the failed and skipped tasks",
        f"report: `harnessc report` writes .harness/runs/{_run_dirs(tmp_path)[0]}/report.html",
    ], r.stdout
    assert "1 call failed verification" in _status(tmp_path)["tasks"][0]["error"]
    runs = _run_dirs(tmp_path)
    assert len(runs) == 1
    r = virtual.harnessc(tmp_path, "run")  # a waits for retry, b for a: nothing to run, no run made
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("nothing to run: 1 task failed, 1 skipped, 1 succeeded"
                               " — failed tasks wait for `harnessc retry`"), r.stdout
    assert "harnessc retry" in r.stdout and "task  state" not in r.stdout
    assert _run_dirs(tmp_path) == runs and _status(tmp_path)["run"]["id"] == runs[0]


def test_hints_work_where_the_run_was_started(tmp_path):
    # `harnessc -C specs/demo run` from the repository's top (as the README runs the demo):
    # every command the run suggests works pasted there, and the report's path opens from there.
    root = tmp_path / "proj"
    root.mkdir()
    write_project(root, [node("a", accept=[{"id": "gate", "argv": ["false"], "timeout": 5}],
                              retry={"max_retries": 0, "on_failure": "fail", "delays": [0]}), node("b")])
    r = inproc.harnessc("-C", "proj", "run", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert "  harnessc -C proj log a  every attempt of a: prompt, output, errors" in lines, r.stdout
    assert "  harnessc -C proj retry  re-run the failed and skipped tasks" in lines, r.stdout
    assert "`harnessc -C proj show TASK` prints one" in r.stdout
    report = f"proj/.harness/runs/{_run_dirs(root)[0]}/report.html"
    assert lines[-1] == f"report: `harnessc -C proj report` writes {report}", r.stdout
    r = inproc.harnessc("-C", "proj", "report", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / report).is_file(), r.stdout + r.stderr


def test_the_summary_keeps_each_skipped_tasks_reason(tmp_path):
    # An operator's skip is not "a dependency failed"; each reason gets its own line.
    write_project(tmp_path, [node("a", accept=[{"id": "gate", "argv": ["false"], "timeout": 5}],
                                  retry={"max_retries": 0, "on_failure": "fail", "delays": [0]}),
                             node("b", depends_on=["a"]), node("c"), node("d", depends_on=["c"]),
                             node("e", depends_on=["a"])], concurrency=1)
    inbox = tmp_path / ".harness" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "skip.json").write_text(json.dumps({"command": "skip", "task": "c"}))
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    i = lines.index("  failed:  a")
    assert lines[i + 1:i + 4] == [
        "  skipped: b, e (dependency 'a' failed)",
        "  skipped: c (by the operator (inbox))",
        "  skipped: d (dependency 'c' skipped)",
    ], r.stdout


def test_a_complete_project_has_nothing_to_run_and_makes_no_run(tmp_path):
    write_project(tmp_path, [node("a"), node("b", depends_on=["a"])])
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    runs = _run_dirs(tmp_path)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0 and r.stdout == "nothing to run: 2 tasks succeeded\n", r.stdout + r.stderr
    assert _run_dirs(tmp_path) == runs


def test_max_cost_is_kept_across_resumes_and_the_summary_shows_this_runs_cost(tmp_path):
    price = {"input": 1000.0, "output": 1000.0}  # about $0.1 per call
    write_project(tmp_path, [node(f"t{i}") for i in range(6)],
                  agents={"rehearsal": {"provider": "simulate", "price": price}}, concurrency=1)
    r = virtual.harnessc(tmp_path, "run", "--max-cost", "0.25")
    assert r.returncode == 3, r.stdout + r.stderr
    # the next step is a higher budget: a plain `harnessc run` would stop again at once
    step = "  harnessc run --max-cost 0.5  go on with a higher budget (the $0.25 one is used up"
    assert step in r.stdout and "go on where this run stopped" not in r.stdout, r.stdout
    done1 = sum(t["state"] == "succeeded" for t in _status(tmp_path)["tasks"])
    r = virtual.harnessc(tmp_path, "run")  # no flag: the last --max-cost still holds
    assert r.returncode == 3, r.stdout + r.stderr
    assert "budget: $0.25 from an earlier --max-cost" in r.stderr and step in r.stdout
    assert sum(t["state"] == "succeeded" for t in _status(tmp_path)["tasks"]) == done1
    r = virtual.harnessc(tmp_path, "run", "--max-cost", "100")
    assert r.returncode == 0, r.stdout + r.stderr
    import re

    m = re.search(r"^succeeded: .* \(\$(\d+\.\d+) this run, \$(\d+\.\d+) in total, ", r.stdout, re.M)
    assert m, r.stdout
    this_run, total = float(m[1]), float(m[2])
    assert 0 < this_run < total  # the earlier runs' calls are in the total only
    virtual.harnessc(tmp_path, "reset", "--all")
    r = virtual.harnessc(tmp_path, "run")  # reset --all forgets the kept limit with the ledger
    assert r.returncode == 0 and "earlier --max-cost" not in r.stderr, r.stdout + r.stderr


WAITS_FOR_THE_STOP = textwrap.dedent("""
    import glob, time
    open(0).read()  # the prompt
    # Answer only once the run has taken the stop request: the task is the last one in
    # flight when the stop comes, and it finishes after it.
    while not any("stop_requested" in open(f).read() for f in glob.glob(".harness/runs/*/events.jsonl")):
        time.sleep(0.05)
    print("<promise>DONE</promise>")
""")


def test_a_run_stopped_after_its_last_task_finished_exits_0(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(WAITS_FOR_THE_STOP)
    root = tmp_path / "p"
    write_project(root, [node("only", routing={"agent": "cli"}, completion_promise="DONE")],
                  agents={"cli": {"provider": "command", "command": [PY, str(script)], "timeout": 60}})
    p = spawn(root, "run")
    try:
        deadline = time.monotonic() + 120  # polled: the task may start late on a loaded machine
        while not any(t["state"] == "running" for t in _status(root)["tasks"]):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.05)
        assert inproc.harnessc("-C", str(root), "stop").returncode == 0
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, out + err
    assert "succeeded: 1 task succeeded" in out
    assert "stopping: finishing in-flight work (`harnessc stop --abort` cancels it)" in out, out
    assert "Ctrl-C" not in out
    assert _status(root)["run"]["status"] == "succeeded"


def test_a_degraded_output_that_breaks_its_contract_is_marked_unverified_for_dependents(tmp_path):
    contract = {"name": "listing", "description": "a list",
                "json_schema": {"type": "object", "required": ["items"],
                                "properties": {"items": {"type": "array", "items": {"type": "string"}}}},
                "output": {"items": {"type": "list[str]", "description": "", "required": True,
                                     "rules": ["len(value) >= 1"], "example": []}},
                "output_rules": [], "accept": [], "on_failure": "template", "max_retries": 0,
                "constraints": None}
    write_project(tmp_path, [node("a", contract="listing", routing={"agent": "bad"},
                                  retry={"max_retries": 0, "on_failure": "template", "delays": [0]}),
                             node("b", depends_on=["a"]), node("c"), node("d")],
                  agents={"rehearsal": {"provider": "simulate"},
                          "bad": {"provider": "simulate", "invalid_first": 10}},
                  contracts={"listing": contract})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "succeeded: 3 tasks succeeded, 1 degraded (" in r.stdout, r.stdout
    a = json.loads(virtual.harnessc(tmp_path, "log", "a", "--json").stdout)
    assert a[-1]["status"] == "rejected"
    prompt = json.loads(virtual.harnessc(tmp_path, "log", "b", "--json").stdout)[0]["prompt"]
    head, _, rest = prompt.partition("### a: Task a (degraded)\n\nUnverified output: task a failed"
                                     " verification and this is its fallback (degraded (template):")
    assert rest, prompt
    assert ("It may break its contract; check it before you rely on it. Not from the agent (filled from the"
            " contract): items (example).\n\n{\n  \"items\": []\n}") in rest


def test_dry_run_shows_tasks_agents_and_estimates_and_calls_nothing(tmp_path):
    script = tmp_path / "agent.py"
    called = tmp_path / "called"
    script.write_text(f"open({str(called)!r}, 'a').write('x')\nprint('<promise>OK</promise>')\n")
    root = tmp_path / "p"
    write_project(root, [node("a", routing={"agent": "cli"}, completion_promise="OK",
                              estimate={"cost_usd": 0.25}),
                         node("b", depends_on=["a"], estimate={"cost_usd": 0.5},
                              retry={"max_retries": 1}),
                         node("c", estimate={"cost_usd": None})],
                  agents={"cli": {"provider": "command", "command": [PY, str(script)]},
                          "rehearsal": {"provider": "simulate"}})
    r = virtual.harnessc(root, "run", "--dry-run", "--max-cost", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "dry run: 3 tasks would run (no agent is called, no run is recorded)",
        "  task  agent      estimate  max attempts",
        "  a     cli         $0.2500             3",
        "  b     rehearsal   $0.5000             2",
        "  c     rehearsal   unknown             3",
        "estimated cost: $0.7500 for one attempt each, up to $1.7500 if every retry is used"
        " (1 task without a price not counted: set price: on the agent)",
        "budget: $2.0000 (--max-cost), $0.0000 spent so far",
    ], r.stdout
    assert not called.exists()
    assert not (root / ".harness" / "state.db").exists() and not (root / ".harness" / "runs").exists()
    # After a run: only what is left, and a selector is honoured.
    assert virtual.harnessc(root, "run", "-s", "c").returncode == 0
    r = virtual.harnessc(root, "run", "--dry-run")
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "dry run: 2 tasks would run (no agent is called, no run is recorded)"
    assert "  c " not in r.stdout
    runs = _run_dirs(root)
    assert virtual.harnessc(root, "run", "--dry-run", "-s", "c").stdout == "dry run: nothing to run: 1 task succeeded\n"
    assert _run_dirs(root) == runs and not called.exists()


def test_without_a_terminal_each_task_start_and_end_is_a_line_and_long_calls_get_heartbeats(tmp_path):
    from .helpers import env, harnessc

    write_project(tmp_path, [node("slow", completion_promise="DONE"),
                             node("bad", accept=[{"id": "gate", "argv": ["false"], "timeout": 5}],
                                  retry={"max_retries": 1, "on_failure": "fail", "delays": [0]})],
                  agents={"rehearsal": {"provider": "simulate", "latency": 1.5}})
    r = harnessc(tmp_path, "run", env=env(HARNESSC_HEARTBEAT="0.1"))  # heartbeats come by the real clock
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for expected in ("slow: started on rehearsal", "bad: started on rehearsal",
                     "bad: iteration 1 rejected: accept check 'gate' failed: `false` exited with 1",
                     "bad: iteration 2 on rehearsal, refinement 1",
                     "[1/2] slow succeeded"):
        assert expected in lines, r.stdout
    assert any(x.startswith("[2/2] bad failed: 2 calls failed verification") for x in lines), r.stdout
    # The call takes 1.5 s and the heartbeat was lowered to 0.1 s: at least one beat per task.
    assert any(x.startswith("slow: still running (iteration 1 on rehearsal, ") for x in lines), r.stdout
    assert any(x.startswith("bad: still running (iteration 2 on rehearsal, ") for x in lines), r.stdout
    # The default period is 30 s: a short run prints no heartbeat.
    virtual.harnessc(tmp_path, "reset", "--all")
    r = virtual.harnessc(tmp_path, "run", "-s", "slow")
    assert r.returncode == 0 and "still running" not in r.stdout, r.stdout


def test_a_state_db_failure_during_a_run_is_one_clear_error(tmp_path, caplog):
    import gc
    import sqlite3

    from harnessc.runtime.scheduler import RunOptions
    from harnessc.runtime.session import execute
    from harnessc.runtime.store.state import StateError

    plan = write_project(tmp_path, [node("a"), node("b")])

    def disk_full(ev):
        if ev["kind"] == "attempt_started":
            raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(StateError, match=r"^\.harness/state\.db failed during the run \(database or disk"
                                         r" is full\); the run stopped"):
        execute(tmp_path, plan, RunOptions(), listeners=[disk_full])
    gc.collect()  # a task left with an exception nobody retrieved would be logged now
    assert "never retrieved" not in caplog.text
    r = virtual.harnessc(tmp_path, "run")  # the next run recovers and finishes
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("flag", ["nan", "NaN", "inf", "-inf", "-1", "lots"])
def test_max_cost_that_is_no_amount_of_usd_is_a_usage_error_and_never_remembered(tmp_path, flag):
    """`--max-cost nan` was accepted and kept: every later run had no budget at all."""
    write_project(tmp_path, [node("a")], budget={"max_cost_usd": 0.01, "max_tokens": None},
                  agents={"rehearsal": {"provider": "simulate", "price": {"input": 1000.0, "output": 1000.0}}})
    for command in ("run", "retry"):
        r = virtual.harnessc(tmp_path, command, f"--max-cost={flag}")
        assert r.returncode == 2, r.stdout + r.stderr
        assert "is not an amount of USD" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / ".harness" / "state.db").exists() or not sqlite3.connect(
        tmp_path / ".harness" / "state.db").execute("SELECT * FROM meta WHERE key='max_cost_usd'").fetchall()


def test_a_non_finite_max_cost_kept_by_an_older_harnessc_is_forgotten_and_the_budget_holds(tmp_path):
    write_project(tmp_path, [node(f"t{i}") for i in range(3)], budget={"max_cost_usd": 0.15, "max_tokens": None},
                  agents={"rehearsal": {"provider": "simulate", "price": {"input": 1000.0, "output": 1000.0}}},
                  concurrency=1)
    from harnessc.runtime.store.state import StateStore
    from harnessc.workspace import Workspace

    store = StateStore(Workspace(tmp_path))
    store.db.execute("INSERT INTO meta VALUES ('max_cost_usd', 'nan')")  # as `remember_max_cost(nan)` wrote it
    store.db.commit()
    store.close()
    assert "budget" in virtual.harnessc(tmp_path, "run", "--dry-run").stdout
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 3, r.stdout + r.stderr  # harness.yaml's budget stopped it
    assert "the --max-cost kept from an earlier run was ignored and forgotten ('nan' is not an amount of USD)" in r.stderr
    assert not sqlite3.connect(tmp_path / ".harness" / "state.db").execute(
        "SELECT * FROM meta WHERE key='max_cost_usd'").fetchall()


SLEEPER = textwrap.dedent("""
    import pathlib, sys, time
    sys.stdin.read()
    pathlib.Path(".harness", "in-call").write_text("")
    time.sleep(300)
""")


def test_status_labels_reservations_and_shows_a_killed_runs_tasks_as_interrupted(tmp_path):
    import os

    (tmp_path / "agent.py").write_text(SLEEPER)
    write_project(tmp_path, [node("a", routing={"agent": "script"}, estimate={"cost_usd": 0.25})],
                  agents={"script": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")],
                                     "timeout": 600, "price": {"input": 1000.0, "output": 1000.0}}})
    proc = spawn(tmp_path, "run", start_new_session=True)
    try:
        end = time.monotonic() + 120
        while not (tmp_path / ".harness" / "in-call").exists():
            assert proc.poll() is None and time.monotonic() < end, proc.communicate()
            time.sleep(0.05)
        during = inproc.harnessc("-C", str(tmp_path), "status")
        assert during.returncode == 0, during.stderr
        first = during.stdout.splitlines()[0]
        assert re.match(r"run \S+: running for \d+s \(pid \d+\) — 1 running; \$0\.0000 spent \+ \$\d+\.\d{4} "
                        r"reserved by unsettled calls$", first), during.stdout
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # harnessc and its agent, mid-call
        proc.communicate()
    after = inproc.harnessc("-C", str(tmp_path), "status")
    first = after.stdout.splitlines()[0]
    assert "pid" not in first and ": interrupted (harnessc is not running; `harnessc run` goes on) — 1 interrupted;" \
        in first, after.stdout
    data = json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--output", "json").stdout)
    assert data["run"]["pid"] is None and data["run"]["status"] == "interrupted"
    assert data["tasks"][0]["state"] == "interrupted"


def test_a_task_budget_counts_from_its_retry_and_one_too_small_for_a_call_says_so(tmp_path):
    # each call costs $0.02 (100 in + 100 out at $100/M); two failed calls spend $0.04 of 0.05
    agents = {"pricey": {"provider": "simulate", "price": {"input": 100.0, "output": 100.0}}}
    gate = [{"id": "gate", "argv": ["false"], "timeout": 5}]
    write_project(tmp_path, [node("a", routing={"agent": "pricey"}, limits={"budget_usd": 0.05}, accept=gate,
                                  estimate={"cost_usd": 0.02},
                                  retry={"max_retries": 1, "on_failure": "fail", "delays": [0]}),
                             node("tiny", routing={"agent": "pricey"}, limits={"budget_usd": 0.01},
                                  estimate={"cost_usd": 0.02})], agents=agents)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    tasks = {t["id"]: t for t in _status(tmp_path)["tasks"]}
    assert tasks["a"]["attempts"] == 2 and tasks["a"]["state"] == "failed"
    assert tasks["tiny"]["attempts"] == 0 and tasks["tiny"]["error"].startswith(
        "task budget too small for one call: ~$0.0200 needed, the task's budget is $0.0100"), tasks["tiny"]
    r = virtual.harnessc(tmp_path, "retry", "a")  # a new round: the $0.04 spent before does not count
    assert r.returncode == 1, r.stdout + r.stderr
    a = {t["id"]: t for t in _status(tmp_path)["tasks"]}["a"]
    assert a["attempts"] == 4 and "accept" in a["error"] and "budget" not in a["error"], a
