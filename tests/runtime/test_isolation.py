"""isolation: worktree - each task in its own git worktree, verified changes landing as one
commit each on harnessc/run/<id>, the user's branch following by fast-forward only
(runtime/worktree/). Real git, real worktrees, real command agents."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess

import pytest

from . import virtual
from .helpers import PY, git, git_repo, node, spawn, write_project

# Writes out/<task>.txt (and, for tasks named in SHARED, shared.txt); prints the promise.
# In agent.cfg: "mark" {task+iteration: [names]} writes those marks first (it has started);
# "wait" {task+iteration: [tasks]} then waits until their commits are on the integration
# branch; "await_mark" {task: [names]} waits for those marks.
AGENT = """\
import ast, os, pathlib, subprocess, sys, time
task, it = os.environ["HARNESSC_TASK"], os.environ["HARNESSC_ITERATION"]
cfg = {} if not pathlib.Path(sys.argv[1]).exists() else ast.literal_eval(pathlib.Path(sys.argv[1]).read_text())
def landed(t):
    out = subprocess.run(["git", "log", "--format=%s", "--branches=harnessc/run/*"], capture_output=True, text=True).stdout
    return f"harnessc: {t}:" in out
for m in cfg.get("mark", {}).get(task + it, []):
    pathlib.Path(cfg["marks"], m).write_text("x")
for t in cfg.get("wait", {}).get(task + it, []):
    for _ in range(600):
        if landed(t):
            break
        time.sleep(0.05)
for m in cfg.get("await_mark", {}).get(task, []):
    for _ in range(600):
        if pathlib.Path(cfg["marks"], m).exists():
            break
        time.sleep(0.05)
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".txt").write_text("made by " + task + "\\n")
for path, text in cfg.get("write", {}).get(task, {}).items():
    pathlib.Path(path).write_text(text + "\\n")
if task in cfg.get("kill", []) and not pathlib.Path(cfg["marks"], "killed").exists():
    pathlib.Path(cfg["marks"], "killed").write_text("x")
    os.kill(os.getppid(), 9)
    time.sleep(5)
print("done <promise>DONE</promise>")
"""


def project(root, tasks, cfg=None, concurrency=2, **kw):
    """A git project whose tasks all run isolated on the command agent above."""
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    nodes = [node(t, depends_on=list(deps), **{**bot, **kw.get(t, {})}) for t, deps in tasks.items()]
    write_project(root, nodes, agents={"bot": {"provider": "command", "command": [PY, str(root / "agent.py"),
                                                                                  str(root / "agent.cfg")]}},
                  concurrency=concurrency)
    (root / "agent.py").write_text(AGENT)
    marks = root.parent / (root.name + "-marks")
    marks.mkdir(exist_ok=True)
    (root / "agent.cfg").write_text(repr({"marks": str(marks), **(cfg or {})}))
    (root / "notes.txt").write_text("mine\n")
    git_repo(root)


def run(root, *args, **kw):
    return virtual.harnessc(root, "run", "--no-build", *args, **kw)


def worktrees(root) -> list[str]:
    return [line for line in git(root, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


def own_refs(root) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname)", "refs/harnessc/").split()


def events(root, kind):
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id, data FROM events WHERE kind = ? ORDER BY id", (kind,)).fetchall()
    return [{"task": t, **json.loads(d or "{}")} for t, d in rows]


def run_id(root) -> str:
    return sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()[0]


def commits(root, rev="HEAD") -> list[str]:
    return git(root, "log", "--format=%s", rev).splitlines()


def test_each_task_lands_one_commit_with_its_own_files_and_the_users_branch_follows(tmp_path):
    root = tmp_path / "p"
    # b waits for a to land, c for b (c, started once a landed, landed first on a loaded machine)
    project(root, {"a": [], "b": [], "c": ["a"]}, {"wait": {"b1": ["a"], "c1": ["b"]}})
    (root / "notes.txt").write_text("mine, not committed\n")  # dirty before the run
    (root / "draft.md").write_text("untracked\n")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    rid = run_id(root)
    assert commits(root) == ["harnessc: c: Task c", "harnessc: b: Task b", "harnessc: a: Task a", "start"]
    assert git(root, "rev-parse", "HEAD") == git(root, "rev-parse", f"harnessc/run/{rid}")
    assert git(root, "symbolic-ref", "HEAD").strip() in ("refs/heads/master", "refs/heads/main")
    # attribution is exact: each commit holds its own task's file, nothing of the user's
    for rev, task in (("HEAD", "c"), ("HEAD~1", "b"), ("HEAD~2", "a")):
        assert git(root, "show", "--name-only", "--format=", rev).split() == [f"out/{task}.txt"]
    assert "Verified: completion promise DONE" in git(root, "log", "-1", "--format=%B", "HEAD~1")
    # b started from the start commit and a landed meanwhile: merged, checked again, one parent
    assert [e["merged"] for e in events(root, "landed")][:2] == [False, True]
    assert len(git(root, "log", "-1", "--format=%P", "HEAD~1").split()) == 1
    # the agent ran in its worktree, and c started from where a landed
    assert (root / "notes.txt").read_text() == "mine, not committed\n"
    assert "?? draft.md" in git(root, "status", "--porcelain") and " M notes.txt" in git(root, "status", "--porcelain")
    assert worktrees(root) == [f"worktree {root}"] and own_refs(root) == []
    assert ".harness" not in git(root, "log", "--name-only", "--format=")


def test_a_landed_path_in_the_way_leaves_the_users_branch_and_tree_and_says_how_to_take_them(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": []}, concurrency=1)
    (root / "out").mkdir()
    (root / "out" / "b.txt").write_text("the user's own b\n")  # untracked, where b lands a file
    head = git(root, "rev-parse", "HEAD")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    rid = run_id(root)
    # a fast-forwarded the branch; b's landing would overwrite the user's file: left as is
    assert git(root, "rev-parse", "HEAD") != head and commits(root)[0] == "harnessc: a: Task a"
    assert commits(root, f"harnessc/run/{rid}")[0] == "harnessc: b: Task b"
    assert (root / "out" / "b.txt").read_text() == "the user's own b\n"
    assert f"take them with `git merge harnessc/run/{rid}`" in r.stdout
    assert "out/b.txt" in r.stdout


def test_an_ignored_file_in_the_way_is_not_overwritten(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": []})
    (root / ".gitignore").write_text(".harness/\nout/\n")
    git(root, "commit", "-qam", "ignore out")
    (root / "out").mkdir()
    (root / "out" / "a.txt").write_text("ignored, mine\n")
    (root / "agent.cfg").write_text(repr({"marks": str(tmp_path), "write": {"a": {"a.txt": "a"}}}))
    git(root, "commit", "-qam", "cfg")
    head = git(root, "rev-parse", "HEAD")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    # out/ is ignored in the worktree too, so a's change is a.txt only: the branch follows
    assert git(root, "rev-parse", "HEAD") != head
    assert (root / "out" / "a.txt").read_text() == "ignored, mine\n"


def test_an_ignored_file_where_a_landed_path_goes_stops_the_fast_forward(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": []}, {"write": {"a": {"gen.log": "a's"}}})
    with open(root / ".gitignore", "a") as f:
        f.write("gen.log\n")  # ignored in the user's tree (an uncommitted line), not in the worktree
    (root / "gen.log").write_text("mine\n")
    head = git(root, "rev-parse", "HEAD")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert git(root, "rev-parse", "HEAD") == head and (root / "gen.log").read_text() == "mine\n"
    assert "git merge harnessc/run/" in r.stdout


def test_a_conflicting_change_runs_again_from_the_new_commit_with_the_conflict_in_its_prompt(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": []}, {"wait": {"b1": ["a"]}, "write": {"a": {"shared.txt": "a"},
                                                                         "b": {"shared.txt": "b"}}})
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert commits(root)[:2] == ["harnessc: b: Task b", "harnessc: a: Task a"]
    assert (root / "shared.txt").read_text() == "b\n"
    assert "<<<<<<<" not in git(root, "log", "-p")
    conflict = events(root, "conflict")
    assert [(c["task"], c["paths"], c["why"]) for c in conflict] == [("b", ["shared.txt"], "merge")]
    prompts = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT prompt FROM attempts WHERE task_id='b' ORDER BY id").fetchall()
    assert len(prompts) == 2 and "Conflicting paths: shared.txt" in prompts[1][0]
    assert "harnessc: a: Task a" in prompts[1][0]
    assert own_refs(root) == [] and worktrees(root) == [f"worktree {root}"]


def test_a_second_conflict_blocks_the_task_names_the_paths_and_keeps_its_ref(tmp_path):
    root = tmp_path / "p"
    # b conflicts with a (shared.txt), runs again on top of a, and meanwhile c lands other.txt
    project(root, {"a": [], "b": [], "c": [], "d": ["b"]},
            {"wait": {"b1": ["a"], "b2": ["c"]}, "mark": {"b2": ["b2"]}, "await_mark": {"c": ["b2"]},
             "write": {"a": {"shared.txt": "a"}, "b": {"shared.txt": "b", "other.txt": "b"},
                       "c": {"other.txt": "c"}}},
            concurrency=3)
    r = run(root)
    assert r.returncode == 1, r.stdout + r.stderr
    db = sqlite3.connect(root / ".harness" / "state.db")
    states = dict(db.execute("SELECT id, state FROM tasks").fetchall())
    assert states == {"a": "succeeded", "b": "blocked", "c": "succeeded", "d": "skipped"}
    error = db.execute("SELECT error FROM tasks WHERE id='b'").fetchone()[0]
    rid = run_id(root)
    ref = f"refs/harnessc/{rid}/2-1"
    assert "other.txt" in error and ref in error
    assert own_refs(root) == [ref]
    assert "other.txt" in git(root, "show", "--name-only", "--format=", ref).split()
    assert f"its change is kept at {ref}" in r.stdout
    assert worktrees(root) == [f"worktree {root}"]
    assert "harnessc: b:" not in "\n".join(commits(root))
    assert "<<<<<<<" not in git(root, "log", "-p", f"harnessc/run/{rid}")


@pytest.mark.parametrize("setup, words", [
    ("none", "needs a git repository"),
    ("empty", "needs a commit"),
    ("detached", "HEAD is detached"),
    ("branch", "a branch named 'harnessc'"),
    ("submodule", "does not support submodules"),
    ("lfs", "Git LFS"),
])
def test_a_repository_isolation_cannot_use_is_a_clear_error(tmp_path, setup, words):
    root = tmp_path / "p"
    project(root, {"a": []})
    if setup == "none":
        subprocess.run(["rm", "-rf", str(root / ".git")], check=True)
    elif setup == "empty":
        subprocess.run(["rm", "-rf", str(root / ".git")], check=True)
        git_repo(root, commit=False)
    elif setup == "detached":
        git(root, "checkout", "-q", "--detach")
    elif setup == "branch":
        git(root, "branch", "harnessc")
    elif setup == "submodule":
        (root / ".gitmodules").write_text('[submodule "x"]\n\tpath = x\n\turl = ../x\n')
        git(root, "add", ".gitmodules")
        git(root, "commit", "-qm", "sub")
    elif setup == "lfs":
        (root / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
        git(root, "add", ".gitattributes")
        git(root, "commit", "-qm", "lfs")
    r = run(root)
    assert r.returncode == 2, r.stdout + r.stderr
    assert words in r.stderr and "Traceback" not in r.stderr
    assert "hint:" in r.stderr


def test_no_hook_of_the_repository_runs_unless_git_hooks_is_true(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": []}, {"wait": {"b1": ["a"]}})
    fired = tmp_path / "fired"
    for hook in ("post-checkout", "post-commit", "post-merge", "reference-transaction", "pre-commit"):
        path = root / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\necho {hook} >> {fired}\n")
        path.chmod(0o755)
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not fired.exists(), fired.read_text()
    assert commits(root)[0] == "harnessc: b: Task b"


def test_a_killed_run_resumes_reconciles_its_worktrees_and_lands_nothing_twice(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": ["a"], "c": []}, {"kill": ["b"], "wait": {"c1": ["a"]}}, concurrency=2)
    out, err = (p := spawn(root, "run", "--no-build")).communicate(timeout=120)  # b's agent kills harnessc (-9)
    assert p.returncode == -signal.SIGKILL, out + err
    assert len(worktrees(root)) >= 2  # b's worktree left behind
    first = run_id(root)
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(commits(root)) == ["harnessc: a: Task a", "harnessc: b: Task b", "harnessc: c: Task c", "start"]
    assert worktrees(root) == [f"worktree {root}"] and own_refs(root) == []
    rec = events(root, "worktrees_reconciled")
    assert rec and any(first in w for w in rec[0]["worktrees"])
    # the resumed run went on on the killed run's integration branch
    assert git(root, "rev-parse", "HEAD") == git(root, "rev-parse", f"harnessc/run/{first}")


def test_a_landing_that_committed_before_a_crash_counts_once(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": []}, concurrency=1)
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    db = sqlite3.connect(root / ".harness" / "state.db")
    # as if harnessc died between moving the branch and recording a's success
    rec = json.loads(db.execute("SELECT value FROM meta WHERE key='isolation.landing.a'").fetchone()[0])
    start = git(root, "rev-parse", "HEAD~2").strip()
    db.execute("UPDATE meta SET value=? WHERE key='isolation.landing.a'",
               (json.dumps({**rec, "state": "pending", "since": start, "output": None}),))
    db.execute("UPDATE tasks SET state='pending' WHERE id='a'")
    db.commit()
    db.close()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert commits(root).count("harnessc: a: Task a") == 1
    attempts = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT COUNT(*) FROM attempts WHERE task_id='a'").fetchone()[0]
    assert attempts == 1
    assert [e["task"] for e in events(root, "landing_recovered")] == ["a"]


def test_a_fast_forward_the_killed_run_did_not_record_keeps_the_users_branch_following(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": []}, concurrency=1)
    assert run(root, "-s", "a").returncode == 0
    db = sqlite3.connect(root / ".harness" / "state.db")
    # as if harnessc died after fast-forwarding your branch to a's landing, before recording it
    rec = json.loads(db.execute("SELECT value FROM meta WHERE key='isolation.integration'").fetchone()[0])
    start = git(root, "rev-parse", "HEAD~1").strip()
    db.execute("UPDATE meta SET value=? WHERE key='isolation.integration'",
               (json.dumps({**rec, "last_set": start, "ended": False}),))
    db.commit()
    db.close()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "results are on branch" not in r.stdout  # your branch followed b's landing too
    assert commits(root) == ["harnessc: b: Task b", "harnessc: a: Task a", "start"]


def test_stale_git_locks_nobody_holds_are_removed(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": []})
    lock = root / ".git" / "refs" / "heads" / "x.lock"
    lock.write_text("")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not lock.exists()
    assert str(lock) in events(root, "git_locks")[0]["removed"]


def test_keep_worktrees_keeps_a_failed_tasks_worktree_and_says_where(tmp_path):
    root = tmp_path / "p"
    fail = {"accept": [{"id": "no", "argv": [PY, "-c", "raise SystemExit(1)"], "timeout": 60}],
            "retry": {"max_retries": 0}}
    project(root, {"a": []}, a=fail)
    r = run(root, "--keep-worktrees")
    assert r.returncode == 1, r.stdout + r.stderr
    rid = run_id(root)
    kept = root / ".harness" / "worktrees" / rid / "1-1"
    assert (kept / "out" / "a.txt").is_file()
    assert f".harness/worktrees/{rid}/1-1" in r.stdout
    log = virtual.harnessc(root, "log", "a")
    assert f"worktree kept at .harness/worktrees/{rid}/1-1" in log.stdout, log.stdout + log.stderr
    r = virtual.harnessc(root, "clean")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not kept.exists() and worktrees(root) == [f"worktree {root}"] and own_refs(root) == []


def test_links_and_copies_bring_untracked_things_into_each_worktree_and_stay_out_of_the_change(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": []})
    (root / ".gitignore").write_text(".harness/\n.venv/\n.env.test\n")
    git(root, "commit", "-qam", "ignore")
    (root / ".venv").mkdir()
    (root / ".venv" / "tool").write_text("tool\n")
    (root / ".env.test").write_text("X=1\n")
    plan_path = root / ".harness" / "build" / "plan.json"
    plan = json.loads(plan_path.read_text())
    plan["worktrees"] = {"link": [".venv"], "copy": [".env.test"]}
    plan["nodes"][0]["accept"] = [{"id": "sees", "argv": [PY, "-c", "import pathlib; assert pathlib.Path('.venv/tool')"
                                                                    ".read_text() and pathlib.Path('.env.test').read_text()"],
                                   "timeout": 60}]
    plan_path.write_text(json.dumps(plan))
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["out/a.txt"]


def test_the_landing_reads_a_branch_tip_from_its_loose_ref_and_from_git_when_it_is_packed(tmp_path):
    from harnessc.runtime.worktree.landing import Landing
    from harnessc.gitrepo import open_repo

    root = tmp_path / "p"
    root.mkdir()
    (root / "f.txt").write_text("x\n")
    git_repo(root)
    head = git(root, "rev-parse", "HEAD").strip()
    git(root, "branch", "harnessc-x/one")
    landing = Landing(open_repo(root))
    assert landing.loose_tip("refs/heads/harnessc-x/one") is None  # its git directory is not known yet
    assert landing.tip("refs/heads/harnessc-x/one") == head
    assert landing.loose_tip("refs/heads/harnessc-x/one") == head  # from .git/refs/heads/harnessc-x/one
    assert landing.tip("refs/heads/none") == ""
    (root / "f.txt").write_text("y\n")
    git(root, "commit", "-qam", "second")
    git(root, "update-ref", "refs/heads/harnessc-x/one", "HEAD")
    git(root, "pack-refs", "--all")  # no loose file left: git reads packed-refs
    assert not (root / ".git" / "refs" / "heads" / "harnessc-x" / "one").exists()
    assert landing.loose_tip("refs/heads/harnessc-x/one") is None
    assert landing.tip("refs/heads/harnessc-x/one") == git(root, "rev-parse", "HEAD").strip() != head
    assert landing.loose_tip("refs/heads/../../config") is None  # a name outside refs/ is git's to read
