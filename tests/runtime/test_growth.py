"""A plan that grows while it runs (runtime/growth.py): `plan.grow: auto` runs the tasks an
agent proposes in the same run, within plan.max_new_tasks and plan.max_depth; `split: true`
asks a task's first call for subtasks and ends it with them; a run killed after growing
resumes with the grown tasks. A real command agent (a Python script) that prints `<task>`
markers, real files, real SQLite; harnessc runs in-process in virtual time (virtual.harnessc)
but for the runs that are killed, which are real processes."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import textwrap
import time
from pathlib import Path

import pytest

from . import virtual
from .helpers import PY, env, git, harnessc, spawn

# Appends its task to ran.log, writes done/<task>; prints says/<task> when there is one.
# With hold/<task> present, it writes its pid to started/<task> (the file appears whole: a
# test that sees it reads the pid) and waits for hold/<task> to go away.
AGENT = """\
import os, pathlib, sys, time
task = os.environ["HARNESSC_TASK"]
with open("ran.log", "a") as f:
    f.write(task + "\\n")
if pathlib.Path("fail", task).exists():
    sys.exit(3)
hold = pathlib.Path("hold", task)
if hold.exists():
    pathlib.Path("started").mkdir(exist_ok=True)
    pathlib.Path("started", "." + task).write_text(str(os.getpid()))
    os.replace(pathlib.Path("started", "." + task), pathlib.Path("started", task))  # there with its pid
    while hold.exists():
        time.sleep(0.05)
pathlib.Path("done").mkdir(exist_ok=True)
pathlib.Path("done", task).write_text("ok")
says = pathlib.Path("says", task)
print(says.read_text() if says.exists() else "done")
"""

TASKS = """\
# Growing

## Tasks

- [ ] **impl**: Implement the feature

  Goal: implement it.

## Notes

Written by hand.
"""


def project(root, says: dict[str, str], plan: str = "plan: {grow: auto}", tasks: str = TASKS):
    root.mkdir(exist_ok=True)
    (root / "agent.py").write_text(AGENT)
    for d in ("says", "hold", "fail"):
        (root / d).mkdir()
    for task, text in says.items():
        (root / "says" / task).write_text(text)
    (root / "harness.yaml").write_text(textwrap.dedent(f"""\
        agents:
          bot: {{provider: command, command: [{PY}, agent.py]}}
        routing: {{default: bot}}
        {plan}
        """))
    (root / "roadmap.md").write_text(tasks)
    return root


def ran(root) -> list[str]:
    path = root / "ran.log"
    return path.read_text().split() if path.exists() else []


def proposed(root, task: str) -> dict[str, dict]:
    data = json.loads((root / ".harness" / "proposals" / f"{task}.json").read_text())
    return {p["id"]: p for p in data["proposals"]}


def states(root) -> dict[str, str]:
    r = virtual.harnessc(root, "status", "--output", "json")
    assert r.returncode == 0, r.stderr
    return {t["id"]: t["state"] for t in json.loads(r.stdout)["tasks"]}


def marker(tid: str, deps: str = "", goal: str | None = None) -> str:
    return f'<task id="{tid}" depends_on="{deps}">{goal or f"Do {tid}."}</task>'


def test_grow_auto_runs_the_proposed_tasks_in_the_same_run(tmp_path):
    root = project(tmp_path / "p", {
        "impl": "Done. " + marker("migrate", "impl", "Add a migration for the new column.") + marker("docs"),
        "migrate": marker("backfill", "migrate"),  # generation 2: still within max_depth 2
    })
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(ran(root)) == ["backfill", "docs", "impl", "migrate"]
    assert ran(root)[0] == "impl" and ran(root).index("migrate") < ran(root).index("backfill")
    assert "3 proposed tasks added to the plan" in r.stdout
    roadmap = (root / "roadmap.md").read_text()
    assert "- [ ] **migrate**: Add a migration for the new column\n  - depends_on: impl" in roadmap
    assert roadmap.index("**backfill**") < roadmap.index("## Notes") and roadmap.rstrip().endswith("Written by hand.")
    assert {p["status"] for p in proposed(root, "impl").values()} == {"added"}
    assert states(root) == {"impl": "succeeded", "migrate": "succeeded", "docs": "succeeded", "backfill": "succeeded"}
    r = virtual.harnessc(root, "show", "backfill")
    assert r.returncode == 0, r.stderr
    assert "proposed by: migrate (generation 2; added by the run)" in r.stdout, r.stdout
    assert "it proposed, now in the plan: migrate, docs" in virtual.harnessc(root, "show", "impl").stdout
    assert "migrate" not in virtual.harnessc(root, "review").stdout  # added, not waiting
    r = virtual.harnessc(root, "run")  # nothing left: the grown tasks are tasks of the plan, complete
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(ran(root)) == 4


def test_grow_auto_limits_reject_extras_with_diagnostics(tmp_path):
    root = project(tmp_path / "p", {
        "impl": marker("a1", "impl") + marker("a2") + marker("a3"),
        "a1": marker("b1", "a1"),
        "b1": marker("c1", "b1"),  # generation 3
    }, plan="plan: {grow: auto, max_new_tasks: 3, max_depth: 2}")
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(ran(root)) == ["a1", "a2", "a3", "impl"]  # b1 is over max_new_tasks (3 per run)
    got = proposed(root, "a1")
    assert got["b1"]["status"] == "rejected" and "HC495" in got["b1"]["diagnostics"][0]
    assert got["b1"]["diagnostics"][0].startswith(".harness/proposals/a1.md:")
    r = virtual.harnessc(root, "review")
    assert "b1" in r.stdout and "HC495" in r.stdout

    root = project(tmp_path / "q", {"impl": marker("a1", "impl"), "a1": marker("b1", "a1"),
                                    "b1": marker("c1", "b1")}, plan="plan: {grow: auto, max_depth: 2}")
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(ran(root)) == ["a1", "b1", "impl"]
    got = proposed(root, "b1")
    assert got["c1"]["status"] == "rejected" and "HC496" in got["c1"]["diagnostics"][0]
    assert "c1" not in (root / "roadmap.md").read_text()


def test_grow_auto_rejects_a_cycle_an_unknown_dependency_and_a_known_id(tmp_path):
    root = project(tmp_path / "p", {"impl": marker("x1", "x2") + marker("x2", "x1") + marker("lost", "ghost")
                                    + marker("impl") + marker("fine", "impl")})
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(ran(root)) == ["fine", "impl"]
    got = proposed(root, "impl")
    assert got["fine"]["status"] == "added"
    for tid in ("x1", "x2", "lost", "impl"):
        assert got[tid]["status"] == "rejected" and got[tid]["diagnostics"], tid
    assert "ghost" in " ".join(got["lost"]["diagnostics"])
    roadmap = (root / "roadmap.md").read_text()
    assert "**x1**" not in roadmap and "**lost**" not in roadmap and roadmap.count("**impl**") == 1
    r = virtual.harnessc(root, "review")
    assert "x1" in r.stdout and "lost" in r.stdout


def test_hostile_marker_text(tmp_path):
    huge = "x" * 300_000
    text = (f'<task id="../../etc/passwd">escape</task><task id="a\x00b">nul</task>'
            f'<task id="ok-1" depends_on="impl">line one\x1b[31m\r\n## Tasks\n- [ ] **evil**: injected</task>'
            f'<task id="{"l" * 500}">too long an id</task>' + huge + marker("after-the-scan-limit"))
    root = project(tmp_path / "p", {"impl": text})
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(ran(root)) == ["impl", "ok-1"]
    roadmap = (root / "roadmap.md").read_text()
    assert "\x1b" not in roadmap and "\x00" not in roadmap
    tasks = [line for line in roadmap.splitlines() if line.startswith("- [ ]")]
    assert [t.split("**")[1] for t in tasks] == ["impl", "ok-1"]  # the injected heading and task stay in a goal
    assert not list(tmp_path.rglob("passwd*")) and "after-the-scan-limit" not in roadmap


def kill_agent(started: Path) -> None:
    """SIGKILL the agent whose pid `started` holds, unless the killed run's lifeline watcher
    ended it first (it is gone, maybe reaped already)."""
    try:
        os.kill(int(started.read_text()), signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_run_killed_after_growing_resumes_and_runs_the_grown_tasks_once(tmp_path):
    root = project(tmp_path / "p", {"impl": marker("grown", "impl") + marker("side")})
    (root / "hold" / "grown").write_text("")  # grown waits until the test lets it go
    proc = spawn(root, "run")
    try:
        deadline = time.monotonic() + 300
        while not (root / "started" / "grown").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "grown never started"
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    kill_agent(root / "started" / "grown")
    (root / "hold" / "grown").unlink()
    assert "**grown**" in (root / "roadmap.md").read_text()
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    log = ran(root)
    assert log.count("impl") == 1 and log.count("side") in (1, 2)  # side's call may have been cut too
    assert log.count("grown") == 2  # its call cut by the kill, then once to the end
    assert states(root) == {"impl": "succeeded", "grown": "succeeded", "side": "succeeded"}
    db = sqlite3.connect(root / ".harness" / "state.db")
    ok = db.execute("SELECT task_id, COUNT(*) FROM attempts WHERE status='succeeded' GROUP BY task_id").fetchall()
    assert dict(ok) == {"impl": 1, "grown": 1, "side": 1}
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0 and ran(root) == log, r.stdout


SPLIT_TASKS = """\
# Splitting

## Tasks

- [ ] **setup**: Set things up

  Goal: set up.

- [ ] **big**: A big piece of work
  - depends_on: setup
  - split: true

  Goal: build the whole thing.

- [ ] **ship**: Ship it
  - depends_on: big

  Goal: ship.
"""


def test_a_split_task_is_done_when_its_subtasks_are(tmp_path):
    root = project(tmp_path / "p", {"big": marker("big-a", "setup") + marker("big-b", "big-a")},
                   plan="", tasks=SPLIT_TASKS)
    r = virtual.harnessc(root, "lint")
    assert "nothing verifies task 'big'" not in r.stdout + r.stderr  # its subtasks verify a split task
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ran(root) == ["setup", "big", "big-a", "big-b", "ship"]  # big's one call, then its subtasks, then ship
    roadmap = (root / "roadmap.md").read_text()
    assert "- [ ] **big-b**: Do big-b\n  - depends_on: big-a" in roadmap
    assert "**big**: A big piece of work\n  - depends_on: setup\n" in roadmap  # big's own lines unchanged
    prompts = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT prompt FROM attempts WHERE task_id='big'").fetchall()
    assert len(prompts) == 1 and "## Split this task into subtasks (`split: true`)" in prompts[0][0]
    assert states(root) == {"setup": "succeeded", "big": "succeeded", "big-a": "succeeded",
                            "big-b": "succeeded", "ship": "succeeded"}
    assert {p["status"] for p in proposed(root, "big").values()} == {"added"}
    r = virtual.harnessc(root, "show", "big")
    assert "verified by: its subtasks (split: true)" in r.stdout, r.stdout


def test_a_split_task_fails_when_a_subtask_fails_or_nothing_usable_is_proposed(tmp_path):
    root = project(tmp_path / "p", {"big": marker("big-a", "setup") + marker("big-b", "big-a")
                                    + marker("loop", "ship")},  # ship waits for big: a cycle (HC498)
                   plan="", tasks=SPLIT_TASKS.replace("Goal: build", "- max_retries: 0\n\n  Goal: build"))
    (root / "fail" / "big-a").write_text("")
    r = virtual.harnessc(root, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    got = proposed(root, "big")
    assert got["loop"]["status"] == "rejected" and "HC498" in got["loop"]["diagnostics"][0]
    assert [got["big-a"]["status"], got["big-b"]["status"]] == ["added", "added"]
    st = states(root)
    assert (st["big-a"], st["big-b"], st["big"], st["ship"]) == ("failed", "skipped", "failed", "skipped")
    r = virtual.harnessc(root, "show", "big")
    assert "its subtask 'big-a' failed" in r.stdout, r.stdout
    (root / "fail" / "big-a").unlink()
    r = virtual.harnessc(root, "retry", "big-a", "big-b", "big", "ship")
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(states(root).values()) == {"succeeded"}
    assert ran(root).count("big") == 1  # split once: its second turn needs no call

    root = project(tmp_path / "q", {"big": "I would rather just do it."}, plan="", tasks=SPLIT_TASKS.replace(
        "Goal: build", "- max_retries: 0\n\n  Goal: build"))
    r = virtual.harnessc(root, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    st = states(root)
    assert st["big"] == "failed" and st["ship"] == "skipped"
    r = virtual.harnessc(root, "show", "big")
    assert "proposed no subtask" in r.stdout, r.stdout


def test_reject_proposal_takes_it_out_of_review_and_keeps_it_on_disk(tmp_path):
    root = project(tmp_path / "p", {"impl": marker("keep", "impl") + marker("drop", "impl") + marker("bad", "ghost")},
                   plan="")  # plan.grow: review (the default)
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ran(root) == ["impl"]  # waiting proposals are not work of the run
    r = virtual.harnessc(root, "reject-proposal", "drop", "bad")  # a waiting one, and one lint rejected
    assert r.returncode == 0, r.stdout + r.stderr
    assert "drop: rejected (proposed by impl); .harness/proposals/impl.md keeps it" in r.stdout
    r = virtual.harnessc(root, "review")
    assert "keep" in r.stdout and "drop" not in r.stdout and "bad" not in r.stdout, r.stdout
    got = proposed(root, "impl")
    assert (got["drop"]["status"], got["drop"]["dismissed"]) == ("rejected", True)
    assert got["bad"]["dismissed"] and got["bad"]["diagnostics"]  # its diagnostics are kept
    md = (root / ".harness" / "proposals" / "impl.md").read_text()
    assert "<!-- rejected by `harnessc reject-proposal` -->\n- [ ] **drop**" in md
    r = virtual.harnessc(root, "accept-proposal", "drop")
    assert r.returncode == 2 and "was rejected" in r.stderr
    r = virtual.harnessc(root, "reject-proposal", "drop")
    assert r.returncode == 2 and "no proposed task 'drop' in review" in r.stderr
    r = virtual.harnessc(root, "reject-proposal", "kep")
    assert r.returncode == 2 and "keep" in r.stderr  # did you mean
    assert virtual.harnessc(root, "accept-proposal", "keep").returncode == 0
    r = virtual.harnessc(root, "reject-proposal", "keep")
    assert r.returncode == 2 and "was accepted" in r.stderr


def test_a_split_task_killed_while_its_subtasks_run_is_not_split_again(tmp_path):
    root = project(tmp_path / "p", {"big": marker("big-a", "setup") + marker("big-b", "big-a")},
                   plan="", tasks=SPLIT_TASKS)
    (root / "hold" / "big-b").write_text("")
    proc = spawn(root, "run")
    try:
        deadline = time.monotonic() + 300
        while not (root / "started" / "big-b").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "big-b never started"
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    kill_agent(root / "started" / "big-b")
    (root / "hold" / "big-b").unlink()
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ran(root) == ["setup", "big", "big-a", "big-b", "big-b", "ship"]  # big asked once; ship after big
    assert set(states(root).values()) == {"succeeded"}


# Kills the run (SIGKILL, as a crash would) right after it writes the file named by
# HARNESSC_TEST_KILL_AFTER (the n-th such write with HARNESSC_TEST_KILL_NTH): a crash at
# that exact point of adding a split task's subtasks.
KILL_AFTER_WRITE = """
import os, signal
from pathlib import Path
import harnessc.workspace as _ws
_write, _seen = _ws.Workspace.write_atomic, []
def _killing(self, path, *a, **k):
    out = _write(self, path, *a, **k)
    if Path(path).name == os.environ["HARNESSC_TEST_KILL_AFTER"]:
        _seen.append(path)
        if len(_seen) == int(os.environ.get("HARNESSC_TEST_KILL_NTH", "1")):
            os.kill(os.getpid(), signal.SIGKILL)
    return out
_ws.Workspace.write_atomic = _killing
"""


@pytest.mark.parametrize("after, nth, asked", [
    ("roadmap.md", 1, 1),  # the subtasks are in roadmap.md, their record still says "adding"
    ("big.json", 2, 1),  # after the record says "added", before the task's ending is written
    ("big.json", 1, 2),  # only the record of what is being added: roadmap.md never had them
])
def test_a_split_killed_while_adding_its_subtasks_resumes_with_them(tmp_path, after, nth, asked):
    root = project(tmp_path / "p", {"big": marker("big-a", "setup") + marker("big-b", "big-a")},
                   plan="", tasks=SPLIT_TASKS)
    r = harnessc(root, "run", prelude=KILL_AFTER_WRITE,
                 env=env(HARNESSC_TEST_KILL_AFTER=after, HARNESSC_TEST_KILL_NTH=str(nth)))
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    assert ran(root) == ["setup", "big"]
    r = virtual.harnessc(root, "run", "--dry-run")  # says what the run will do with big (and writes nothing)
    assert r.returncode == 0, r.stdout + r.stderr
    if asked == 1:
        assert "split: big is done when its subtasks are (big-a, big-b; added by an earlier run)" in r.stdout
        assert re.search(r"^  big +- +no call +0$", r.stdout, re.M), r.stdout
        assert re.search(r"^  big-b +bot ", r.stdout, re.M), r.stdout  # a task of the plan, to run
    else:
        assert "split: big's first call asks bot for its subtasks" in r.stdout, r.stdout
    before = {p["status"] for p in proposed(root, "big").values()}
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert before == {"added" if nth == 2 else "adding"}  # (the dry run settled nothing)
    assert ran(root) == ["setup", *["big"] * asked, "big-a", "big-b", "ship"]  # each subtask once
    assert set(states(root).values()) == {"succeeded"}
    roadmap = (root / "roadmap.md").read_text()
    assert roadmap.count("**big-a**") == 1 and roadmap.count("**big-b**") == 1
    assert {p["status"] for p in proposed(root, "big").values()} == {"added"}


def git_repo(root) -> None:
    """`root` a git repository with everything in it committed (.harness and the logs ignored)."""
    (root / ".gitignore").write_text(".harness/\nran.log\n")
    for args in (("init", "-q", "-b", "main"), ("add", "-A"),
                 ("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "start")):
        git(root, *args)


def test_grown_tasks_needing_a_setting_the_run_lacks_wait_for_the_next_run(tmp_path):
    """defaults.isolation: worktree, and every task the run starts with says isolation: none:
    the run opens no repository, so big's subtasks (isolation: worktree from the defaults)
    wait in roadmap.md for the next run (HC716), which isolates them."""
    tasks = SPLIT_TASKS.replace("Goal:", "- isolation: none\n\n  Goal:")
    root = project(tmp_path / "p", {"big": marker("big-a", "setup") + marker("big-b", "big-a")},
                   plan="defaults: {isolation: worktree}", tasks=tasks)
    (root / "agent.py").write_text(AGENT.replace('"ran.log"', repr(str(root / "ran.log"))))
    git_repo(root)
    r = virtual.harnessc(root, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    assert ran(root) == ["setup", "big"]  # big asked once; its subtasks not run in the shared tree
    assert "big-a, big-b added to roadmap.md for the next run (HC716)" in r.stdout, r.stdout
    st = states(root)
    assert (st["big"], st["ship"], st["big-a"], st["big-b"]) == ("skipped", "skipped", "ready", "pending"), st
    assert "isolation: worktree, which this run did not start with" in virtual.harnessc(root, "show", "big").stdout
    assert "**big-b**" in (root / "roadmap.md").read_text()
    r = virtual.harnessc(root, "run")  # the plan now has isolated tasks: the run sets isolation up
    assert r.returncode == 0, r.stdout + r.stderr
    assert ran(root) == ["setup", "big", "big-a", "big-b", "ship"]
    assert set(states(root).values()) == {"succeeded"}
    log = git(root, "log", "--format=%s", "--all")
    assert "Do big-a" in log and "Do big-b" in log, log  # landed as commits: they were isolated


def test_grow_auto_tasks_needing_git_commit_the_run_lacks_wait_for_the_next_run(tmp_path):
    """defaults.git: commit, and impl (the one task) says git: off: the run does not commit,
    so what impl proposes (git: commit from the defaults) waits for the next run (HC716); the
    run ends as it would without them (exit 0)."""
    root = project(tmp_path / "p", {"impl": marker("migrate", "impl") + marker("docs", "migrate")},
                   plan="plan: {grow: auto}\n        defaults: {git: commit}",  # (dedented with the rest)
                   tasks=TASKS.replace("Goal: implement", "- git: off\n\n  Goal: implement"))
    git_repo(root)
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ran(root) == ["impl"]
    assert "migrate, docs added to roadmap.md for the next run (HC716)" in r.stdout, r.stdout
    assert "3 proposed tasks" not in r.stdout and "added to the plan" not in r.stdout
    assert {p["status"] for p in proposed(root, "impl").values()} == {"added"}
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ran(root) == ["impl", "migrate", "docs"]
    log = git(root, "log", "--format=%s")
    assert "Do migrate" in log and "Do docs" in log, log  # committed: git: commit, as their specs say


def test_a_split_tasks_done_ending_is_returned_for_the_driver_to_write(tmp_path):
    """issue 29: growth decides the ending of a split task whose subtasks are complete; the
    driver writes it (store.end_task), as every task's. It writes no task state itself."""
    from types import SimpleNamespace

    from harnessc.runtime.growth import PlanGrowth
    from harnessc.runtime.store.attempts import Ending
    from harnessc.states import TaskState

    written = []

    class Store:
        def event(self, kind, task=None, **fields):
            written.append(("event", kind))

        def __getattr__(self, name):  # set_state, finish_task, end_task...: none may be called
            return lambda *a, **k: written.append(("write", name))

    node = SimpleNamespace(id="big", split=True, fingerprint="f1", depends_on=[])
    runner = SimpleNamespace(root=tmp_path, plan=SimpleNamespace(growth=None, nodes=[node]),
                             nodes={"big": node}, store=Store())
    growth = PlanGrowth(runner)
    assert growth.split_done(node) is None  # no subtasks yet: its call asks for them
    growth.subtasks["big"] = ["big-a", "big-b"]
    ending = growth.split_done(node)
    assert isinstance(ending, Ending) and ending.attempt is None
    assert (ending.state, ending.task.fingerprint) == (TaskState.SUCCEEDED, "f1")
    assert written == [("event", "split_done")]


@pytest.mark.parametrize("after", ["roadmap.md", "impl.json"])
def test_grow_auto_killed_while_adding_loses_nothing_and_adds_nothing_twice(tmp_path, after):
    """plan.grow: auto, the run killed right after roadmap.md got impl's proposal (its record
    still says adding), or right after that record, before roadmap.md had it: the next run
    runs the task once and knows who proposed it, or files it for review."""
    root = project(tmp_path / "p", {"impl": marker("migrate", "impl")})
    r = harnessc(root, "run", prelude=KILL_AFTER_WRITE, env=env(HARNESSC_TEST_KILL_AFTER=after))
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    if after == "roadmap.md":
        assert ran(root) == ["impl", "migrate"]
        assert proposed(root, "impl")["migrate"]["status"] == "added"
        assert "proposed by: impl (generation 1; added by the run)" in virtual.harnessc(root, "show", "migrate").stdout
    else:
        assert ran(root) == ["impl"] and "**migrate**" not in (root / "roadmap.md").read_text()
        assert proposed(root, "impl")["migrate"]["status"] == "waiting"
        assert "migrate" in virtual.harnessc(root, "review").stdout
        assert virtual.harnessc(root, "accept-proposal", "migrate").returncode == 0
    assert (root / "roadmap.md").read_text().count("**migrate**") == 1


def test_grown_tasks_get_the_runs_flags_as_the_tasks_it_started_with(tmp_path):
    """`run --autonomous` commits each succeeded task (where nothing says `git:`): a task
    grown in the run too, as if it had been in roadmap.md when the run started."""
    root = project(tmp_path / "p", {"impl": marker("migrate", "impl")})
    git_repo(root)
    r = virtual.harnessc(root, "run", "--autonomous")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ran(root) == ["impl", "migrate"]
    log = git(root, "log", "--format=%s")
    assert "Implement the feature" in log and "Do migrate" in log, log
