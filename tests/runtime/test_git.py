"""git: commit — one commit per succeeded task, a dirty tree left alone (runtime/worktree/gitops.py)."""

from __future__ import annotations

import json
import sqlite3

from . import virtual
from .helpers import PY, git, git_repo, node, write_project

AGENT = """\
import os, pathlib
task = os.environ["HARNESSC_TASK"]
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".txt").write_text("made by " + task + "\\n")
if task == "b":
    pathlib.Path("old.txt").unlink()
print("done <promise>DONE</promise>")
"""


def project(root, repo: bool = True) -> None:
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE"}
    write_project(root, [node("a", git="commit", **bot), node("b", depends_on=["a"], git="commit", **bot),
                         node("c", depends_on=["b"], **bot)],
                  agents={"bot": {"provider": "command", "command": [PY, str(root / "agent.py")]}},
                  concurrency=1)
    (root / "agent.py").write_text(AGENT)
    (root / "old.txt").write_text("to be removed by b\n")
    (root / "notes.txt").write_text("mine\n")
    if repo:
        git_repo(root)


def events(root, kind: str) -> list[dict]:
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id, data FROM events WHERE kind = ? ORDER BY id", (kind,)).fetchall()
    return [{"task": t, **json.loads(d or "{}")} for t, d in rows]


def test_each_succeeded_task_is_one_commit_and_a_dirty_tree_is_left_alone(tmp_path):
    project(tmp_path)
    (tmp_path / "notes.txt").write_text("mine, not committed yet\n")  # dirty before the run
    (tmp_path / "draft.md").write_text("untracked before the run\n")
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    log = git(tmp_path, "log", "--format=%s%n%b%n--")
    assert "harnessc: a: Task a" in log and "harnessc: b: Task b" in log
    assert "harnessc: c:" not in log  # c has no git: commit
    assert "Verified: completion promise DONE" in log
    # each commit holds its task's changes only; the dirty paths are in none
    assert git(tmp_path, "show", "--name-status", "--format=", "HEAD").split() == ["D", "old.txt", "A", "out/b.txt"]
    assert git(tmp_path, "show", "--name-status", "--format=", "HEAD~1").split() == ["A", "out/a.txt"]
    status = git(tmp_path, "status", "--porcelain")
    assert " M notes.txt" in status and "?? draft.md" in status and "out/c.txt" in status
    assert (tmp_path / "notes.txt").read_text() == "mine, not committed yet\n"
    dirty = events(tmp_path, "git_dirty_at_start")
    assert len(dirty) == 1 and dirty[0]["paths"] == ["draft.md", "notes.txt"]
    assert "alert warning: 2 uncommitted path(s) before the run (draft.md, notes.txt): left as they are" in r.stdout
    assert [e["task"] for e in events(tmp_path, "git_committed")] == ["a", "b"]


def test_without_a_repository_the_run_goes_on_and_says_why_nothing_is_committed(tmp_path):
    project(tmp_path, repo=False)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    why = events(tmp_path, "git_unavailable")
    assert len(why) == 1 and "needs the project to be a git repository" in why[0]["message"]
    assert "git: commit needs the project to be a git repository" in r.stdout  # said, not only an event
    assert not (tmp_path / ".git").exists()


# Two tasks whose calls overlap for sure: each waits until the other has started, writes,
# then waits until the other has written.
TWO_AT_ONCE = """\
import os, pathlib, time
task = os.environ["HARNESSC_TASK"]
other = {"a": "b", "b": "a"}[task]
flags = pathlib.Path(".harness")
def wait_for(name):
    deadline = time.time() + 30
    while not (flags / name).exists() and time.time() < deadline:
        time.sleep(0.02)
(flags / ("started-" + task)).write_text("")
wait_for("started-" + other)
with open("CHANGELOG.md", "a") as f:
    f.write(task + "\\n")
if task == "a":
    pathlib.Path("src_a", "impl.py").write_text("a = 1\\n")
    print("done <promise>DONE</promise>")
else:
    pathlib.Path("out").mkdir(exist_ok=True)
    pathlib.Path("out", "b.txt").write_text("b\\n")
    print("Wrote out/b.txt. <promise>DONE</promise>")
(flags / ("wrote-" + task)).write_text("")
wait_for("wrote-" + other)
"""


def test_two_tasks_at_once_each_commit_their_own_files(tmp_path):
    """a declares its context (src_a/), b names the file it wrote: each commit holds its own
    task's files although both changed the tree at the same time; a file both changed and
    neither claims (CHANGELOG.md) goes with the first to succeed, once."""
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "git": "commit"}
    write_project(tmp_path, [node("a", context=["src_a/seed.py"], **bot), node("b", **bot)],
                  agents={"bot": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")],
                                  "timeout": 60}}, concurrency=2)
    (tmp_path / "agent.py").write_text(TWO_AT_ONCE)
    (tmp_path / "src_a").mkdir()
    (tmp_path / "src_a" / "seed.py").write_text("seed = 0\n")
    (tmp_path / "CHANGELOG.md").write_text("log\n")
    git_repo(tmp_path)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    committed = {e["task"]: set(e["paths"]) for e in events(tmp_path, "git_committed")}
    assert set(committed) == {"a", "b"}
    assert committed["a"] - {"CHANGELOG.md"} == {"src_a/impl.py"}
    assert committed["b"] - {"CHANGELOG.md"} == {"out/b.txt"}
    assert ("CHANGELOG.md" in committed["a"]) != ("CHANGELOG.md" in committed["b"])
    assert git(tmp_path, "status", "--porcelain") == ""


# Each task writes the file of its own package; both files are called ops.py.
SAME_NAME = """\
import os, pathlib, time
task = os.environ["HARNESSC_TASK"]
other = {"task-a": "task-b", "task-b": "task-a"}[task]
flags = pathlib.Path(".harness")
def wait_for(name):
    deadline = time.time() + 30
    while not (flags / name).exists() and time.time() < deadline:
        time.sleep(0.02)
(flags / ("started-" + task)).write_text("")
wait_for("started-" + other)
package = pathlib.Path({"task-a": "pkga", "task-b": "pkgb"}[task])
package.mkdir(exist_ok=True)
(package / "ops.py").write_text("def op(): return " + repr(task) + "\\n")
(flags / ("wrote-" + task)).write_text("")
wait_for("wrote-" + other)
print("done <promise>DONE</promise>")
"""


def test_two_tasks_writing_files_of_the_same_name_each_commit_their_own(tmp_path):
    """Both goals name a full path ending in ops.py: the full path decides whose file it is
    (a goal's `pkgb/ops.py` does not name `pkga/ops.py`), so each task is one commit of its
    own file, not one commit of both."""
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "git": "commit"}
    write_project(tmp_path, [node("task-a", goal="Write pkga/ops.py.", **bot),
                             node("task-b", goal="Write pkgb/ops.py.", **bot)],
                  agents={"bot": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")],
                                  "timeout": 60}}, concurrency=2)
    (tmp_path / "agent.py").write_text(SAME_NAME)
    git_repo(tmp_path)
    r = virtual.harnessc(tmp_path, "run", "-j", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    committed = {e["task"]: e["paths"] for e in events(tmp_path, "git_committed")}
    assert committed == {"task-a": ["pkga/ops.py"], "task-b": ["pkgb/ops.py"]}
    assert events(tmp_path, "git_nothing_to_commit") == []
    for task, path in (("task-a", "pkga/ops.py"), ("task-b", "pkgb/ops.py")):
        sha = git(tmp_path, "log", "--format=%H", "--grep", f"^harnessc: {task}:").split()
        assert len(sha) == 1 and git(tmp_path, "show", "--name-only", "--format=", sha[0]).split() == [path]
    assert git(tmp_path, "status", "--porcelain") == ""


def test_a_stale_lock_on_the_run_s_private_index_is_removed_and_said(tmp_path):
    """A git killed while it wrote .harness/loop/run.index leaves run.index.lock: every later
    `git add` into that index failed, no change was ever seen and nothing was committed, with
    exit 0 and no alert. No git of ours runs on it between snapshots: the lock is stale."""
    project(tmp_path)
    loop = tmp_path / ".harness" / "loop"
    loop.mkdir(parents=True)
    (loop / "run.index.lock").write_bytes(b"")
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [e["task"] for e in events(tmp_path, "git_committed")] == ["a", "b"]
    assert not (loop / "run.index.lock").exists()
    alerts = [json.loads(line) for line in (tmp_path / ".harness" / "alerts.log").read_text().splitlines()]
    stale = [a for a in alerts if a["kind"] == "git_stale_lock"]
    assert len(stale) == 1 and stale[0]["level"] == "warning" and "run.index.lock" in stale[0]["message"]
