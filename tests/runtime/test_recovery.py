"""The recovery ladder of a stuck task (runtime/loop/recovery.py): mutations, escalation, a human.
The scenarios stuck-without-a-human-rung-fails and a-tasks-own-recovery-steps
(tests/runtime/scenarios/) hold two more ladders."""

from __future__ import annotations

import json
import sqlite3

from harnessc.runtime.loop.recovery import Ladder, rungs_for, switched

from . import virtual
from .helpers import PY, harnessc, node, write_project

STUCK = {"provider": "simulate", "complete_after": 99, "progress": "none"}  # the same text, never a claim


def rows(root, sql: str, *args) -> list:
    return sqlite3.connect(root / ".harness" / "state.db").execute(sql, args).fetchall()


def test_a_stuck_task_climbs_mutations_then_escalation_then_is_blocked_for_a_human(tmp_path):
    write_project(tmp_path, [node("loop", completion_promise="DONE", routing={"agent": "weak", "chain": ["strong"]},
                                  limits={"stuck_after": 2}),
                             node("after", depends_on=["loop"]), node("other")],
                  agents={"weak": STUCK, "strong": STUCK}, loop={"recovery": {"prompt_mutations": 2}})
    r = virtual.harnessc(tmp_path, "run")
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
    tasks = {t["id"]: t for t in json.loads(virtual.harnessc(tmp_path, "status", "--output", "json").stdout)["tasks"]}
    assert tasks["loop"]["state"] == "blocked" and "harnessc tell loop" in tasks["loop"]["error"]
    assert tasks["after"]["state"] == "skipped" and tasks["other"]["state"] == "succeeded"
    assert "blocked: loop" in r.stdout and "harnessc retry" in r.stdout
    # `log` tells the task's story between its attempts, and how it ended
    story = [line for line in virtual.harnessc(tmp_path, "log", "loop").stdout.splitlines()
             if line.startswith(("--- stuck", "--- recovery", "--- escalated", "--- blocked"))]
    assert [line.split(":")[0] for line in story] == [
        "--- stuck (identical_output)", "--- recovery", "--- stuck (identical_output)", "--- recovery",
        "--- stuck (identical_output)", "--- recovery", "--- escalated", "--- stuck (identical_output)", "--- recovery",
        "--- blocked"], story
    assert story[1] == "--- recovery: mutate (rephrase)" and story[-2] == "--- recovery: human"
    alerts = [json.loads(line) for line in (tmp_path / ".harness" / "alerts.log").read_text().splitlines()]
    kinds = [a["kind"] for a in alerts if a["task"] == "loop"]
    assert kinds.count("stuck") == 4 and kinds.count("recovery") == 4 and kinds.count("blocked") == 1
    assert "alert warning: loop: recovery step mutate (rephrase): 2 iterations in a row" in r.stdout
    assert "alert info: loop: escalated from weak to strong: stuck: 2 iterations in a row" in r.stdout
    # a human steps in: retry runs the blocked task again (here it is still stuck)
    assert virtual.harnessc(tmp_path, "tell", "loop", "stop repeating yourself").returncode == 0
    again = virtual.harnessc(tmp_path, "retry")
    assert again.returncode == 1 and "loop" in again.stdout, again.stdout + again.stderr
    retried = rows(tmp_path, "SELECT prompt FROM attempts WHERE task_id='loop' ORDER BY id")[8][0]
    assert "stop repeating yourself" in retried
    assert len(rows(tmp_path, "SELECT id FROM attempts WHERE task_id='loop'")) > 8


def recovery_steps(root) -> list[tuple[str, str | None]]:
    return [(json.loads(d)["step"], json.loads(d)["mutation"])
            for (d,) in rows(root, "SELECT data FROM events WHERE kind='recovery' ORDER BY id")]


# Says the same thing every call, changes nothing; the first call on `strong` hangs (the run
# is killed there). Every prompt is kept, numbered by call.
LADDER_AGENT = """
import os, pathlib, sys, time
agent, task = sys.argv[1], os.environ["HARNESSC_TASK"]
prompt = sys.stdin.read()
calls = pathlib.Path(".harness") / "calls"
n = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(n))
pathlib.Path(".harness", f"prompt-{n}-{agent}.md").write_text(prompt)
if agent == "strong" and not pathlib.Path(".harness", "hung").exists():
    pathlib.Path(".harness", "hung").write_text("")
    time.sleep(120)
print("I am thinking about it.")
"""


def test_a_run_killed_mid_ladder_resumes_on_the_next_rung_with_its_prompt_and_agent(tmp_path):
    import os
    import signal
    import sys

    from .helpers import spawn
    from .test_loop_progress import wait_for

    (tmp_path / "agent.py").write_text(LADDER_AGENT)
    agents = {name: {"provider": "command", "command": [sys.executable, str(tmp_path / "agent.py"), name],
                     "timeout": 300} for name in ("weak", "strong")}
    write_project(tmp_path, [node("loop", completion_promise="DONE", routing={"agent": "weak", "chain": ["strong"]},
                                  limits={"stuck_after": 2},
                                  loop={"progress_threshold": None,
                                        "recovery": ["rephrase", "escalate", "constrain", "human"]})],
                  agents=agents)
    proc = spawn(tmp_path, "run", start_new_session=True)
    try:
        wait_for(tmp_path / ".harness" / "hung", proc)  # call 5: the first on strong, after rephrase and escalate
        # `status` while it runs: the rung it is on, read from the saved loop state
        live = harnessc(tmp_path, "status")
        data = json.loads(harnessc(tmp_path, "status", "--output", "json").stdout)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert " · strong · " in live.stdout and " · recovery 2/4 (escalate)" in live.stdout, live.stdout
    running = {t["id"]: t for t in data["tasks"]}["loop"]
    assert running["loop"]["recovery"] == {"step": 2, "rungs": 4, "rung": "escalate"}
    assert recovery_steps(tmp_path) == [("mutate", "rephrase"), ("escalate", None)]
    r = harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    # the resumed run says where on the ladder it goes on: an event, an info alert, a log line
    resumed = [json.loads(d) for (d,) in rows(tmp_path, "SELECT data FROM events WHERE kind='recovery_resumed'")]
    assert [(e["step"], e["rungs"], e["rung"], e["agent"], e["rewritten_prompt"]) for e in resumed] == [
        (2, 4, "escalate", "strong", True)]
    alerts = [json.loads(line) for line in (tmp_path / ".harness" / "alerts.log").read_text().splitlines()]
    said = [a for a in alerts if a["kind"] == "recovery_resumed"]
    assert [(a["level"], a["task"]) for a in said] == [("info", "loop")]
    assert said[0]["message"] == ("resumed mid-ladder: recovery 2/4 (escalate) reached, on strong, "
                                  "from the rewritten prompt")
    log = harnessc(tmp_path, "log", "loop").stdout
    assert "--- resumed mid-ladder: recovery 2/4 (escalate) reached, on strong" in log, log
    # the resumed run goes on where the killed one was: on strong, from the rephrased prompt,
    # and its next rung is constrain, not rephrase again
    assert recovery_steps(tmp_path) == [("mutate", "rephrase"), ("escalate", None), ("mutate", "constrain"),
                                        ("human", None)]
    agents_used = [a for (a,) in rows(tmp_path, "SELECT agent FROM attempts WHERE task_id='loop' ORDER BY id")]
    assert agents_used == ["weak"] * 4 + ["strong"] * 5  # the killed call, then 2 per rung
    prompts = [p for (p,) in rows(tmp_path, "SELECT prompt FROM attempts WHERE task_id='loop' ORDER BY id")]
    assert prompts[5].startswith("## Recovery (rephrase)")  # the first after the resume
    assert prompts[7].startswith("## Recovery (constrain)")
    tasks = {t["id"]: t for t in json.loads(harnessc(tmp_path, "status", "--output", "json").stdout)["tasks"]}
    assert tasks["loop"]["state"] == "blocked"
    # a human stepped in: `retry` climbs the ladder from its first rung, on the first agent
    again = harnessc(tmp_path, "retry")
    assert again.returncode == 1, again.stdout + again.stderr
    assert recovery_steps(tmp_path)[4:] == [("mutate", "rephrase"), ("escalate", None), ("mutate", "constrain"),
                                            ("human", None)]
    prompts = [p for (p,) in rows(tmp_path, "SELECT prompt FROM attempts WHERE task_id='loop' ORDER BY id")]
    agents_used = [a for (a,) in rows(tmp_path, "SELECT agent FROM attempts WHERE task_id='loop' ORDER BY id")]
    assert agents_used[9:] == ["weak"] * 4 + ["strong"] * 4
    # a retried task starts from the bottom rung: nothing to resume
    assert len(rows(tmp_path, "SELECT id FROM events WHERE kind='recovery_resumed'")) == 1
    assert not prompts[9].startswith("## Recovery") and prompts[11].startswith("## Recovery (rephrase)")


def test_harness_yaml_recovery_and_a_tasks_rungs_make_one_ladder(tmp_path):
    plan = write_project(tmp_path, [node("a"), node("b", loop={"progress_threshold": None, "recovery": ["negative", "fail"]})],
                         loop={"recovery": {"prompt_mutations": 2, "escalate": True, "human": False}})
    assert rungs_for(plan, plan.nodes[0]) == ("rephrase", "decompose", "escalate", "fail")
    assert rungs_for(plan, plan.nodes[1]) == ("negative", "fail")
    ladder = Ladder(rungs_for(plan, plan.nodes[1]), step=1)  # a resumed ladder
    assert [(r.kind, r.mutation) for r in (ladder.climb(), ladder.climb())] == [("give_up", None)] * 2
    assert [r.kind for r in (Ladder(["escalate"]).climb(), Ladder([]).climb())] == ["escalate", "human"]
    assert switched(["negative", "fail"], escalate=True, human=True) == ["negative", "escalate", "human"]
    assert switched(["escalate", "human"], escalate=False, human=None) == ["human"]


HEEDS = """\
import sys, time
prompt = sys.stdin.read()
print("<promise>DONE</promise>" if "use plan B" in prompt else f"thinking ({time.monotonic_ns()})")
"""


def test_retry_task_reruns_that_blocked_task_and_what_was_skipped_because_of_it(tmp_path):
    (tmp_path / "heeds.py").write_text(HEEDS)
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "limits": {"stuck_after": 2}}
    write_project(tmp_path, [node("a", **bot), node("b", **bot), node("c", depends_on=["a"]), node("d")],
                  agents={"bot": {"provider": "command", "command": [PY, str(tmp_path / "heeds.py")]},
                          "rehearsal": {"provider": "simulate"}},
                  loop={"recovery": {"prompt_mutations": 1}})
    assert virtual.harnessc(tmp_path, "run").returncode == 1
    states = dict(rows(tmp_path, "SELECT id, state FROM tasks"))
    assert states == {"a": "blocked", "b": "blocked", "c": "skipped", "d": "succeeded"}
    wrong = virtual.harnessc(tmp_path, "retry", "aa")
    assert wrong.returncode == 2 and "no task 'aa' in the plan" in wrong.stderr, wrong.stderr
    done = virtual.harnessc(tmp_path, "retry", "d")
    assert done.returncode == 2 and "'d' is succeeded" in done.stderr and "harnessc reset d" in done.stderr
    assert virtual.harnessc(tmp_path, "tell", "a", "use plan B").returncode == 0
    r = virtual.harnessc(tmp_path, "retry", "a")
    assert r.returncode == 0, r.stdout + r.stderr
    states = dict(rows(tmp_path, "SELECT id, state FROM tasks"))
    assert states == {"a": "succeeded", "b": "blocked", "c": "succeeded", "d": "succeeded"}
    # b was not retried: its attempts are those of the first run
    assert len(rows(tmp_path, "SELECT id FROM attempts WHERE task_id='b'")) == 4
