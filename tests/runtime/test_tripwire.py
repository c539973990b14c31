"""The tripwire (runtime/worktree/tripwire.py): what an agent changes in the repository's shared
git directory while it runs in its worktree is put back, its attempt does not land and runs
again, and a critical alert names the file; a change made while no agent ran is taken as the
repository's state, with a warning. Real git, real worktrees, real command agents; the unit
tests at the end drive the record/compare/restore directly."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

from harnessc.runtime.worktree.tripwire import Tripwire

from . import virtual
from .helpers import PY, git, git_repo, node, write_project

# Saves its prompt; on the iteration `cfg["attack"]` names (task + iteration, e.g. "a1"; an
# approach's + its number, "a12"), runs that attack's code (`common`: the shared git directory,
# `git()`, `marks`) - first writing the marks `cfg["mark"]` names for it and waiting for those
# `cfg["await"]` names; then writes out/<task>.txt and claims done.
AGENT = """\
import ast, os, pathlib, subprocess, sys, time
task, it = os.environ["HARNESSC_TASK"], os.environ["HARNESSC_ITERATION"]
key = task + it + os.environ.get("HARNESSC_APPROACH", "")
cfg = ast.literal_eval(pathlib.Path(sys.argv[1]).read_text())
marks = pathlib.Path(cfg["marks"])
(marks / f"prompt-{task}-{it}.txt").write_text(sys.stdin.read())
def git(*args, **kw):
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True, **kw).stdout.strip()
common = pathlib.Path(git("rev-parse", "--path-format=absolute", "--git-common-dir"))
if key in cfg.get("mark", {}):
    (marks / cfg["mark"][key]).write_text("x")
for _ in range(1200):
    if key not in cfg.get("await", {}) or (marks / cfg["await"][key]).exists():
        break
    time.sleep(0.05)
if key in cfg.get("attack", {}):
    exec(cfg["attack"][key])
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".txt").write_text("made by " + task + "\\n")
print("done <promise>DONE</promise>")
"""


def project(root: Path, attack: dict[str, str], tasks: dict | None = None, concurrency: int = 1,
            **cfg) -> Path:
    """A git project (a user's worktree `side` beside it) whose tasks run isolated on the agent above."""
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    tasks = tasks or {"a": {}}
    nodes = [node(t, **{**bot, **kw}) for t, kw in tasks.items()]
    write_project(root, nodes, agents={"bot": {"provider": "command", "command": [
        PY, str(root / "agent.py"), str(root / "agent.cfg")]}}, concurrency=concurrency)
    (root / "agent.py").write_text(AGENT)
    marks = root.parent / "marks"
    marks.mkdir()
    (root / "agent.cfg").write_text(repr({"marks": str(marks), "attack": attack, **cfg}))
    (root / "notes.txt").write_text("mine\n")
    git_repo(root)
    git(root, "worktree", "add", "-q", str(root.parent / "side"), "-b", "side")
    (root / "notes.txt").write_text("mine, not committed\n")  # the user's uncommitted edit
    git(root, "add", "notes.txt")  # ... staged, even
    return marks


def user_state(root: Path) -> dict:
    """What the user has that a run must not touch (but the landed commits)."""
    common = root / ".git"
    return {"head": git(root, "symbolic-ref", "HEAD"), "status": git(root, "status", "--porcelain"),
            "index": git(root, "diff", "--cached"), "notes": (root / "notes.txt").read_text(),
            "worktrees": [line for line in git(root, "worktree", "list", "--porcelain").splitlines()
                          if not line.startswith("HEAD ")],
            "side": git(root.parent / "side", "rev-parse", "HEAD"),
            "refs": git(root, "for-each-ref", "--format=%(refname) %(objectname)"),
            "config": (common / "config").read_bytes(), "hooks": sorted(os.listdir(common / "hooks")),
            "info": {p.name: p.read_bytes() for p in (common / "info").iterdir()}}


def run(root: Path) -> subprocess.CompletedProcess:
    return virtual.harnessc(root, "run", "--no-build")


def rows(root: Path, sql: str) -> list:
    return sqlite3.connect(root / ".harness" / "state.db").execute(sql).fetchall()


def alerts(root: Path, kind: str) -> list[dict]:
    log = root / ".harness" / "alerts.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [a for a in map(json.loads, lines) if a["kind"] == kind]


def run_id(root: Path) -> str:
    return rows(root, "SELECT id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0]


def assert_tampered_then_landed(root: Path, marks: Path, r: subprocess.CompletedProcess, before: dict,
                                name: str) -> None:
    """The attempt that changed `name` was rejected, run again and landed; the user's things
    are as they were but for the landed commit; a line and a critical alert say it."""
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Traceback" not in out
    assert f"tampered with {name}" in out  # the line naming what happened
    assert rows(root, "SELECT state FROM tasks WHERE id='a'") == [("succeeded",)]
    first, second = rows(root, "SELECT status, errors FROM attempts WHERE task_id='a' ORDER BY id")
    assert first[0] == "rejected" and f"tampered with {name}" in first[1]
    assert second[0] == "succeeded"
    assert f"tampered with {name}" in (marks / "prompt-a-2.txt").read_text()  # the next prompt says why
    critical = alerts(root, "git_tampered")
    assert critical and critical[0]["level"] == "critical" and name in critical[0]["message"]
    # one commit landed, from the second attempt; the user's branch followed it
    assert git(root, "log", "--format=%s", before["start"] + "..HEAD").splitlines() == ["harnessc: a: Task a"]
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["out/a.txt"]
    after = user_state(root)
    landed = git(root, "rev-parse", "HEAD").strip()
    before_refs = before.pop("refs").replace(before["start"], landed, 1)  # the user's branch: moved by the landing
    before.pop("start")
    refs = after.pop("refs")
    assert [line for line in refs.splitlines() if not line.startswith("refs/heads/harnessc/")] == \
        before_refs.splitlines()
    assert after == before


def start(root: Path) -> dict:
    state = user_state(root)
    state["start"] = git(root, "rev-parse", "HEAD").strip()
    return state


MOVE_BRANCH = """
branch = git("for-each-ref", "--format=%(refname)", "refs/heads/ma*")
git("update-ref", branch, git("commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "evil"))
"""


def test_a_hook_planted_in_the_shared_git_directory_is_removed_and_never_runs(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"a1": """
for name in ("post-checkout", "pre-commit", "post-merge"):
    hook = common / "hooks" / name
    hook.write_text("#!/bin/sh\\necho ran >> " + str(marks / "hook-ran") + "\\n")
    hook.chmod(0o755)
"""})
    before = start(root)
    r = run(root)
    assert_tampered_then_landed(root, marks, r, before, ".git/hooks/")
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    git(root, "commit", "-q", "--allow-empty", "-m", "the user's next commit")  # would run pre-commit
    git(root, "checkout", "-q", "--detach", "HEAD~1")  # ... and post-checkout
    assert not (marks / "hook-ran").exists()
    kept = list((root / ".harness" / "tampered").rglob("pre-commit"))  # nothing is lost: kept aside
    assert kept and "hook-ran" in kept[0].read_text()


def test_with_git_hooks_true_a_planted_hook_never_runs_for_harnessc_s_commit_checkout_or_merge(tmp_path):
    """`git_hooks: true` runs the repository's hooks for harnessc's git: the tripwire looks
    before each commit and checkout, so what an agent planted is gone before any of them."""
    root = tmp_path / "p"
    marks = project(root, {"a1": """
for name in ("post-checkout", "post-commit", "post-merge", "reference-transaction"):
    hook = common / "hooks" / name
    hook.write_text("#!/bin/sh\\necho " + name + " >> " + str(marks / "hook-ran") + "\\n")
    hook.chmod(0o755)
"""}, tasks={"a": {}, "b": {"depends_on": ["a"]}})
    plan_path = root / ".harness" / "build" / "plan.json"
    plan_path.write_text(json.dumps({**json.loads(plan_path.read_text()), "git_hooks": True}))
    r = run(root)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert rows(root, "SELECT id, state FROM tasks ORDER BY id") == [("a", "succeeded"), ("b", "succeeded")]
    assert not (marks / "hook-ran").exists(), (marks / "hook-ran").read_text()
    assert alerts(root, "git_tampered")


def test_the_users_branch_moved_with_update_ref_is_put_back(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"a1": MOVE_BRANCH})
    before = start(root)
    r = run(root)
    branch = before["head"].strip()
    assert_tampered_then_landed(root, marks, r, before, branch)
    assert "evil" not in git(root, "log", "--all", "--format=%s")


def test_a_replace_ref_is_removed_and_no_replaced_object_is_used(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"a1": """
env = dict(os.environ, GIT_INDEX_FILE=str(marks / "evil-index"))
blob = git("hash-object", "-w", "--stdin", input="evil\\n")
git("read-tree", "HEAD", env=env)
git("update-index", "--add", "--cacheinfo", f"100644,{blob},evil.txt", env=env)
evil = git("commit-tree", git("write-tree", env=env), "-m", "start")
git("replace", git("rev-parse", "HEAD"), evil)
"""})
    before = start(root)
    first = before["start"]
    r = run(root)
    assert_tampered_then_landed(root, marks, r, before, "refs/replace/" + first)
    assert git(root, "for-each-ref", "refs/replace/") == ""
    assert git(root, "rev-parse", "HEAD~1").strip() == first  # landed on the real start commit
    assert "evil.txt" not in git(root, "ls-tree", "-r", "--name-only", "HEAD")
    assert not (root / "evil.txt").exists()


def test_the_common_config_edited_is_restored(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"a1": """
cfg = str(common / "config")
git("config", "--file", cfg, "filter.evil.clean", "sh -c 'touch " + str(marks / "filter-ran") + "; cat'")
git("config", "--file", cfg, "filter.evil.smudge", "sh -c 'touch " + str(marks / "filter-ran") + "; cat'")
git("config", "--file", cfg, "core.worktree", str(marks / "elsewhere"))
"""})
    (root / ".gitattributes").write_text("* filter=evil\n")
    git(root, "add", ".gitattributes")
    git(root, "commit", "-q", "-m", "attributes", ".gitattributes")
    before = start(root)
    r = run(root)
    assert_tampered_then_landed(root, marks, r, before, ".git/config")
    (root / "new.txt").write_text("x\n")
    git(root, "add", "new.txt")  # the user's git: no clean filter left to run
    assert not (marks / "filter-ran").exists() and not (marks / "elsewhere").exists()


def test_info_attributes_edited_is_restored(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"a1": """
with open(common / "info" / "attributes", "a") as f:
    f.write("* diff=evil\\n")
"""})
    (root / ".git" / "info" / "attributes").write_text("*.bin binary\n")  # the user's
    before = start(root)
    r = run(root)
    assert_tampered_then_landed(root, marks, r, before, ".git/info/attributes")
    assert (root / ".git" / "info" / "attributes").read_text() == "*.bin binary\n"


def test_every_attempt_running_while_the_git_directory_was_tampered_with_is_rejected_and_runs_again(tmp_path):
    """-j 2: a moves the user's branch while b runs (b started first, and ends after): neither
    lands what it made then; both run again and land."""
    root = tmp_path / "p"
    marks = project(root, {"a1": MOVE_BRANCH}, tasks={"a": {}, "b": {}}, concurrency=2,
                    mark={"b1": "b-started", "a1": "attacked"}, **{"await": {"a1": "b-started", "b1": "attacked"}})
    first = git(root, "rev-parse", "HEAD").strip()
    r = run(root)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    assert rows(root, "SELECT id, state FROM tasks ORDER BY id") == [("a", "succeeded"), ("b", "succeeded")]
    for task in "ab":
        tried = rows(root, f"SELECT status, errors FROM attempts WHERE task_id='{task}' ORDER BY id")
        assert [s for s, _ in tried] == ["rejected", "succeeded"], tried
        assert "tampered with refs/heads/ma" in tried[0][1]
    assert sorted(git(root, "log", "--format=%s", first + "..HEAD").splitlines()) == [
        "harnessc: a: Task a", "harnessc: b: Task b"]
    assert "evil" not in git(root, "log", "--all", "--format=%s")
    assert len(alerts(root, "git_tampered")) == 1


def test_a_tampered_approach_never_lands(tmp_path):
    """approaches: 2 - approach 1 moves the user's branch while approach 2 runs: both ran in
    that time, neither lands; the task fails saying why (`harnessc retry` runs it again)."""
    root = tmp_path / "p"
    approaches = {"n": 2, "select": "best", "score": None, "min_score": None, "agents": ["bot"]}
    marks = project(root, {"a11": MOVE_BRANCH}, tasks={"a": {"approaches": approaches}}, concurrency=2,
                    mark={"a12": "2-started", "a11": "attacked"},
                    **{"await": {"a11": "2-started", "a12": "attacked"}})
    before = start(root)
    r = run(root)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "tampered with refs/heads/ma" in out, out
    (state, error), = rows(root, "SELECT state, error FROM tasks WHERE id='a'")
    assert state == "failed" and "tampered with refs/heads/ma" in error
    assert git(root, "rev-parse", "HEAD").strip() == before["start"]  # put back; nothing landed
    after = user_state(root)
    assert [line for line in after.pop("refs").splitlines() if not line.startswith("refs/heads/harnessc/")] == \
        before.pop("refs").splitlines()
    before.pop("start")
    assert after == before and alerts(root, "git_tampered")


def test_a_change_made_while_no_attempt_ran_is_taken_with_a_warning(tmp_path):
    """Task u works in the shared tree (isolation: none): no isolated attempt runs meanwhile, so
    what it does to the git directory (as a user would: `git config`, `git worktree add`) is the
    repository's new state - kept, with a warning - and b, isolated, lands after it."""
    root = tmp_path / "p"
    project(root, {"u1": """
git("config", "--local", "user.mine", "yes")
git("worktree", "add", "-q", "--detach", str(marks / "users-other"))
"""}, tasks={"u": {"isolation": "none"}, "b": {"depends_on": ["u"]}})
    r = run(root)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Traceback" not in out, out
    assert rows(root, "SELECT id, state FROM tasks ORDER BY id") == [("b", "succeeded"), ("u", "succeeded")]
    assert alerts(root, "git_tampered") == []
    warned = alerts(root, "git_changed")
    assert warned and warned[0]["level"] == "warning" and ".git/config" in warned[0]["message"]
    assert git(root, "config", "--get", "user.mine").strip() == "yes"  # kept
    assert str(root.parent / "marks" / "users-other") in git(root, "worktree", "list")
    assert "harnessc: b: Task b" in git(root, "log", "--format=%s", "HEAD")


# ---------------------------------------------------------------------- the module itself


def wire(tmp_path: Path) -> tuple[Tripwire, Path, list]:
    root = tmp_path / "r"
    root.mkdir()
    git_repo(root)
    common = root / ".git"
    done: list = []

    def put_ref(ref, value):
        done.append((ref, value))
        if value is None:
            git(root, "update-ref", "-d", ref)
        else:
            git(root, "update-ref", ref, value)
    tw = Tripwire(common, ".git/", "refs/harnessc/run1/", put_ref, root / ".harness" / "tampered")
    tw.record()
    return tw, root, done


def test_nothing_changed_finds_nothing_and_the_attempts_own_refs_are_not_recorded(tmp_path):
    tw, root, _ = wire(tmp_path)
    assert tw.check() is None
    git(root, "update-ref", "refs/harnessc/run1/1-1", "HEAD")
    os.utime(root / ".git" / "config")  # touched, same bytes
    assert tw.check() is None
    assert not any(r.startswith("refs/harnessc/run1/") for r in tw.refs)


def test_a_change_while_an_attempt_ran_is_put_back_and_taints_every_attempt_of_the_window(tmp_path):
    tw, root, done = wire(tmp_path)
    common = root / ".git"
    config = (common / "config").read_bytes()
    head = git(root, "rev-parse", "HEAD").strip()
    tw.begin("/w/1-1", "a")
    tw.begin("/w/2-1", "b")
    tw.end("/w/2-1")  # ended before the check: it still ran in the window
    (common / "config").write_bytes(config + b"[core]\n\tworktree = /elsewhere\n")
    (common / "hooks" / "pre-push").write_text("#!/bin/sh\n")
    git(root, "update-ref", "refs/tags/planted", head)
    found = tw.check()
    assert found.tampering and found.attempts == ["a", "b"]
    assert found.changed == [".git/config", ".git/hooks/pre-push", "refs/tags/planted"]
    assert (common / "config").read_bytes() == config
    assert not (common / "hooks" / "pre-push").exists()
    assert done == [("refs/tags/planted", None)]
    assert tw.taken("/w/1-1") == found.changed and tw.taken("/w/1-1") == []  # asked once
    assert tw.taken("/w/2-1") == found.changed
    assert tw.check() is None  # put back: nothing to find again
    # the window moved on: b ended, a runs on; a change now taints a only
    (common / "info" / "exclude").write_text("x\n")
    assert tw.check().attempts == ["a"]


def test_a_change_while_no_attempt_ran_becomes_the_record(tmp_path):
    tw, root, done = wire(tmp_path)
    tw.begin("/w/1-1", "a")
    tw.end("/w/1-1")
    assert tw.check() is None  # closes a's window
    git(root, "config", "user.mine", "yes")
    git(root, "branch", "feature")
    found = tw.check()
    assert not found.tampering and found.changed == [".git/config", "refs/heads/feature"]
    assert git(root, "config", "--get", "user.mine").strip() == "yes" and done == []
    assert tw.check() is None


def test_harnessc_own_ref_changes_are_not_tampering(tmp_path):
    tw, root, done = wire(tmp_path)
    tw.begin("/w/1-1", "a")
    with tw.lock:
        git(root, "branch", "harnessc-run")
        tw.refresh_refs(["refs/heads/harnessc-run"])
    assert tw.check() is None and done == []


def test_a_removed_file_and_a_packed_ref_are_put_back(tmp_path):
    tw, root, done = wire(tmp_path)
    common = root / ".git"
    head = git(root, "rev-parse", "HEAD").strip()
    git(root, "tag", "v1")
    git(root, "pack-refs", "--all")
    tw.record()
    tw.begin("/w/1-1", "a")
    (common / "hooks" / "pre-commit.sample").unlink()
    git(root, "update-ref", "-d", "refs/tags/v1")
    found = tw.check()
    assert found.tampering and ".git/hooks/pre-commit.sample" in found.changed
    assert (common / "hooks" / "pre-commit.sample").exists()
    assert os.access(common / "hooks" / "pre-commit.sample", os.X_OK)
    assert git(root, "rev-parse", "v1").strip() == head and done == [("refs/tags/v1", head)]


def test_an_attempts_own_head_is_its_own_but_a_worktree_it_adds_is_moved_aside(tmp_path):
    tw, root, _ = wire(tmp_path)
    mine = tmp_path / "attempt"
    with tw.lock:  # harnessc adds the attempt's worktree
        git(root, "worktree", "add", "-q", "--detach", str(mine))
        name = tw.adopt_worktree(mine)
    tw.begin(str(mine), "a")
    git(mine, "commit", "-q", "--allow-empty", "-m", "the agent's own commit")  # moves its own HEAD only
    assert tw.check() is None
    git(mine, "worktree", "add", "-q", "--detach", str(tmp_path / "planted"))
    found = tw.check()
    assert found.tampering and all(n.startswith(".git/worktrees/planted/") for n in found.changed)
    assert not (root / ".git" / "worktrees" / "planted").exists()
    assert list((root / ".harness" / "tampered").glob("*/worktrees/planted/gitdir"))  # kept aside, whole
    assert str(tmp_path / "planted") not in git(root, "worktree", "list")
    with tw.lock:  # harnessc removes its worktree
        git(root, "worktree", "remove", "--force", str(mine))
        tw.forget_worktree(str(mine))
    assert name and tw.check() is None


def test_a_file_replaced_by_a_link_is_written_back_as_the_file(tmp_path):
    tw, root, _ = wire(tmp_path)
    exclude = root / ".git" / "info" / "exclude"
    text = exclude.read_bytes()
    tw.begin("/w/1-1", "a")
    exclude.unlink()
    exclude.symlink_to("/etc/passwd")
    assert tw.check().changed == [".git/info/exclude"]
    assert not exclude.is_symlink() and exclude.read_bytes() == text


def test_another_harnessc_runs_branches_refs_and_worktrees_are_taken_as_they_are(tmp_path):
    """Another project's run in the same repository, at the same time: its integration branch,
    its attempts' refs and worktrees come and go while this run's attempts run - never put back."""
    tw, root, done = wire(tmp_path)
    tw.mine = {"refs/heads/harnessc/run/mine"}
    git(root, "update-ref", "refs/heads/harnessc/run/mine", "HEAD")
    tw.record()
    tw.begin("/w/1-1", "a")
    other = root / "sub" / ".harness" / "worktrees" / "r2" / "1-1"
    git(root, "worktree", "add", "-q", "--detach", str(other))
    git(root, "update-ref", "refs/heads/harnessc/run/r2", "HEAD")
    git(root, "update-ref", "refs/harnessc/r2/1-1", "HEAD")
    found = tw.check()
    assert found.other_run and not found.tampering and done == []
    assert other.exists() and str(other) in git(root, "worktree", "list")
    git(root, "worktree", "remove", "--force", str(other))
    git(root, "update-ref", "-d", "refs/heads/harnessc/run/r2")
    assert tw.check().other_run and done == []
    # this run's own integration branch, moved by someone else, is put back
    git(root, "update-ref", "refs/heads/harnessc/run/mine", git(root, "commit-tree", "HEAD^{tree}", "-m", "x").strip())
    found = tw.check()
    assert found.tampering and found.changed == ["refs/heads/harnessc/run/mine"]
