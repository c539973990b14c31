"""The `explore` recovery rung (runtime/explore.py): a stuck isolated loop task runs branches
from its stuck point, each in its own worktree, and goes on from the one with the best
progress. Real git, real worktrees, a real command agent."""

from __future__ import annotations

import json
import sqlite3

from . import virtual
from .helpers import PY, git, git_repo, node, write_project

# Without an approach (the task itself): done once way.txt is there, else no progress.
# Branch 2 finds the way (a file and a progress marker); branches 1 and 3 repeat themselves.
AGENT = """\
import os, pathlib
k = os.environ.get("HARNESSC_APPROACH")
if k == "2":
    pathlib.Path("way.txt").write_text("the way\\n")
    print("<progress>found the way</progress>")
elif k is None and pathlib.Path("way.txt").exists():
    print("done <promise>DONE</promise>")
else:
    print("still thinking")
"""


def events(root, kind):
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT data FROM events WHERE kind = ? ORDER BY id", (kind,)).fetchall()
    return [json.loads(d or "{}") for (d,) in rows]


def test_a_stuck_task_explores_branches_and_goes_on_from_the_best(tmp_path):
    root = tmp_path / "p"
    bot = {"provider": "command", "command": [PY, str(root / "agent.py")]}
    task = node("t", routing={"agent": "bot"}, completion_promise="DONE", isolation="worktree",
                limits={"stuck_after": 1, "max_iterations": 10},
                loop={"progress_threshold": None, "recovery": ["explore", "human"]})
    write_project(root, [task], agents={"bot": bot}, concurrency=1)
    (root / "agent.py").write_text(AGENT)
    git_repo(root)
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 0, r.stdout + r.stderr
    explored = events(root, "explored")
    assert len(explored) == 1 and explored[0]["chosen"] == 2, explored
    # the task went on from branch 2's files and landed one commit holding them
    assert (root / "way.txt").read_text() == "the way\n"
    subjects = git(root, "log", "--format=%s").splitlines()
    assert subjects[0] == "harnessc: t: Task t" and not any("stuck point" in s or "branch" in s for s in subjects)
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["way.txt"]
    assert git(root, "for-each-ref", "refs/harnessc/") == ""
    assert len(git(root, "worktree", "list").splitlines()) == 1
    statuses = [s for (s,) in sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT status FROM attempts WHERE task_id='t' ORDER BY id")]
    assert statuses == ["stuck", "progress", "progress", "progress", "succeeded"]


def test_explore_is_passed_over_for_a_task_without_worktrees(tmp_path):
    root = tmp_path / "p"
    bot = {"provider": "command", "command": [PY, str(root / "agent.py")]}
    task = node("t", routing={"agent": "bot"}, completion_promise="DONE",
                limits={"stuck_after": 1, "max_iterations": 10},
                loop={"progress_threshold": None, "recovery": ["explore", "human"]})
    write_project(root, [task], agents={"bot": bot}, concurrency=1)
    (root / "agent.py").write_text(AGENT)
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 1, r.stdout + r.stderr
    assert events(root, "explored") == []
    row = sqlite3.connect(root / ".harness" / "state.db").execute("SELECT state FROM tasks WHERE id='t'").fetchone()
    assert row == ("blocked",)
