"""Reused checkouts (runtime/worktree/pool.py): an attempt's worktree, once it is done, is
moved to the next attempt's place and put back to what a fresh `git worktree add` makes.

Real git, real command agents. An attacking agent leaves everything it can in its checkout
and its git directory; the next task's agent, in the same checkout, takes a fingerprint of
what it sees (files, modes, links, its index, refs, reflog and git directory), which must
equal a fresh worktree's at the same commit."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from harnessc.gitrepo import open_repo
from harnessc.runtime.children import sandbox
from harnessc.runtime.worktree.pool import _umask
from harnessc.runtime.worktree.worktrees import Worktrees

from . import virtual
from .helpers import PY, git, git_repo, node, spawn, write_project

# What an agent sees of its checkout: paths, types, modes, contents, link targets; its
# index, HEAD, per-worktree refs, reflog and the files of its git directory (times and the
# checkout's own path left out).
FINGERPRINT = r'''
import hashlib, os, re, stat, subprocess
def _git(top, *args):
    return subprocess.run(["git", *args], cwd=top, capture_output=True, text=True).stdout
def fingerprint(top):
    files = {}
    for here, dirs, names in os.walk(top):
        for name in dirs + names:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, top)
            st = os.lstat(path)
            mode = oct(st.st_mode)
            if rel == ".git":
                files[rel] = (mode,)  # it names the checkout's git directory, whose name differs
            elif stat.S_ISLNK(st.st_mode):
                files[rel] = (mode, "link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                files[rel] = (mode, hashlib.sha256(open(path, "rb").read()).hexdigest())
            else:
                files[rel] = (mode,)
    git_dir = _git(top, "rev-parse", "--absolute-git-dir").strip()
    admin = {}
    for here, dirs, names in os.walk(git_dir):
        for name in names:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, git_dir)
            data = open(path, "rb").read().decode("utf-8", "replace") if rel not in ("index", "gitdir") else ""
            admin[rel] = re.sub(r" \d{9,} ", " <time> ", data)
    return {"files": files, "admin": admin,
            "index": _git(top, "ls-files", "-s"), "flags": _git(top, "ls-files", "-v"),
            "status": _git(top, "status", "--porcelain", "--ignored", "-uall"),
            "head": _git(top, "rev-parse", "HEAD"), "branch": _git(top, "symbolic-ref", "-q", "HEAD"),
            "refs": _git(top, "for-each-ref", "--format=%(refname)", "refs/worktree", "refs/bisect"),
            "reflog": _git(top, "reflog", "--format=%H %gs"),
            "config": _git(top, "config", "--worktree", "--list")}
'''

# Task `a` attacks its checkout every way below; a task whose name starts with `obs` writes
# the fingerprint of its checkout to <marks>/<task>.json; every task writes out/<task>.txt.
AGENT = FINGERPRINT + r'''
import json, pathlib, sys, time
task = os.environ["HARNESSC_TASK"]
cfg = json.loads(pathlib.Path(sys.argv[1]).read_text())
def sh(*args):
    subprocess.run(args, capture_output=True)
def spoof(index, rel):
    """Give `rel`'s entry in the index (version 2) the stat data of the file as it is now."""
    import hashlib, struct
    data = bytearray(open(index, "rb").read())
    at, count = 12, struct.unpack(">I", data[8:12])[0]
    for _ in range(count):
        flags = struct.unpack(">H", data[at + 60:at + 62])[0]
        name = bytes(data[at + 62:at + 62 + (flags & 0xFFF)]).decode()
        if name == rel:
            st = os.lstat(rel)
            mode, uid, gid = struct.unpack(">III", data[at + 24:at + 36])
            data[at:at + 40] = struct.pack(">10I", int(st.st_ctime), st.st_ctime_ns % 10**9, int(st.st_mtime),
                                           st.st_mtime_ns % 10**9, st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF,
                                           mode, uid, gid, st.st_size)
        at += (62 + (flags & 0xFFF) + 8) & ~7
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    open(index, "wb").write(bytes(data))
if task.startswith("t"):  # base: the start commit, which has neither
    if os.path.lexists("out") or os.path.lexists("build"):
        sys.exit("found another attempt's files")
    pathlib.Path("build").mkdir()
    pathlib.Path("build", task + ".o").write_text("ignored\n")
if task.startswith("obs"):
    pathlib.Path(cfg["marks"], task + ".json").write_text(json.dumps(fingerprint(os.getcwd())))
if task == "a":
    git_dir = _git(".", "rev-parse", "--absolute-git-dir").strip()
    sh("git", "-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-qam", "agent's own",
       "--allow-empty")
    sh("git", "update-ref", "refs/worktree/mine", "HEAD")
    sh("git", "update-ref", "refs/bisect/bad", "HEAD")
    for name, text in (("MERGE_HEAD", "0" * 40), ("MERGE_MSG", "x"), ("config.worktree", "[core]\n\thooksPath = /tmp\n"),
                       ("info/sparse-checkout", "/nothing\n"), ("rebase-merge/head-name", "refs/heads/x")):
        pathlib.Path(git_dir, name).parent.mkdir(exist_ok=True)
        pathlib.Path(git_dir, name).write_text(text)
    # tracked files: changed with the same size and times, deleted, made executable, read-only
    st = os.stat("src/a.py")
    pathlib.Path("src/a.py").write_text("A = 2\n")
    os.utime("src/a.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    os.unlink("docs/readme.md")
    os.chmod("src/b.py", 0o755)
    os.chmod("src/c.py", 0o400)
    # the index: flags that hide a change from git, and an entry whose stat data is the
    # changed file's (git would take the file as the base's; harnessc's own index does not)
    pathlib.Path("src/d.py").write_text("D = 9\n")
    spoof(git_dir + "/index", "src/d.py")
    pathlib.Path("src/f.py").write_text("F = 'changed'\n")
    sh("git", "update-index", "--skip-worktree", "src/f.py")
    pathlib.Path("src/e.py").write_text("E = 'changed'\n")
    sh("git", "update-index", "--assume-unchanged", "src/e.py")
    # untracked, ignored, tool files, a nested repository, odd file types
    pathlib.Path("leftover.txt").write_text("left\n")
    pathlib.Path("build").mkdir()
    pathlib.Path("build/out.o").write_text("obj\n")
    pathlib.Path("src/__pycache__").mkdir()
    pathlib.Path("src/__pycache__/a.cpython.pyc").write_text("pyc\n")
    pathlib.Path("nested").mkdir()
    sh("git", "init", "-q", "nested")
    pathlib.Path("nested/inner.txt").write_text("nested\n")
    os.mkfifo("fifo")
    pathlib.Path("empty/deeper").mkdir(parents=True)
    # links: out of the checkout, and a tracked directory replaced by one
    os.symlink(cfg["outside"], "escape")
    os.rename("conf", "conf.moved")
    os.symlink(cfg["outside"], "conf")
    # permissions: a read-only directory, an unreadable one, a tracked one made read-only
    pathlib.Path("ro").mkdir()
    pathlib.Path("ro/f").write_text("r\n")
    os.chmod("ro", 0o555)
    pathlib.Path("locked/inner").mkdir(parents=True)
    pathlib.Path("locked/inner/x").write_text("x\n")
    os.chmod("locked/inner", 0)
    os.chmod("locked", 0o300)
    os.chmod("docs", 0o500)
    os.chmod("src", 0o700)
    os.chmod(".git", 0o600)
    # worktrees: link/copy - one link pointed elsewhere, the read-only copy made writable and changed
    os.unlink("venv")
    os.symlink(cfg["outside"], "venv")
    os.chmod(".env.test", 0o644)
    pathlib.Path(".env.test").write_text("TOKEN=changed by the agent\n")
    pathlib.Path(cfg["marks"], "a.done").write_text("x")
if task == "s":  # a repository cloned where the base has a submodule entry (a gitlink)
    subprocess.run(["git", "clone", "-q", cfg["root"] + "/../subrepo", "vendor/lib"], check=True)
    assert pathlib.Path("vendor", "lib", "lib.txt").exists()
if task == "g" and os.environ["HARNESSC_ITERATION"] == "1":  # the .git file pointed elsewhere
    pathlib.Path(".git").write_text("gitdir: " + cfg["root"] + "/.git\n")
if task.startswith("c"):  # a commit in its checkout: its own git directory must be writable (sandbox)
    pathlib.Path("out").mkdir(exist_ok=True)
    pathlib.Path("out", task + ".txt").write_text("committed by " + task + "\n")
    subprocess.run(["git", "add", "-A"], check=True)
    subprocess.run(["git", "-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-qm", task], check=True)
if task == "k" and not pathlib.Path(cfg["marks"], "killed").exists():  # once p2 landed: harnessc killed (-9)
    for _ in range(1200):
        out = subprocess.run(["git", "log", "--format=%s", "--branches=harnessc/run/*"], capture_output=True, text=True)
        if "harnessc: p2:" in out.stdout:
            break
        time.sleep(0.05)
    for _ in range(1200):  # p2's checkout given back to the pool, beside this one
        if list(pathlib.Path("..").glob("free-*")):
            break
        time.sleep(0.05)
    pathlib.Path(cfg["marks"], "killed").write_text("x")
    os.kill(os.getppid(), 9)
    time.sleep(5)
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".txt").write_text("made by " + task + "\n")
print("done <promise>DONE</promise>")
'''


def fingerprint(top) -> dict:
    """FINGERPRINT of `top`, taken as the agent takes it (a process of its own), as JSON has it."""
    code = FINGERPRINT + "import json, sys\nprint(json.dumps(fingerprint(sys.argv[1])))\n"
    return json.loads(subprocess.run([PY, "-c", code, str(top)], check=True, capture_output=True, text=True).stdout)


def project(root, tasks: list[str], concurrency: int, outside, worktrees: dict | None = None,
            sandboxed: bool = False, **kw) -> None:
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree",
           "retry": {"max_retries": 0, "on_failure": "retry", "delays": [0]}}
    nodes = [node(t, **{**bot, **kw.get(t, {})}) for t in tasks]
    agent = root.parent / "agent.py"
    agent.write_text(AGENT)
    marks = root.parent / "marks"
    marks.mkdir()
    (root.parent / "agent.json").write_text(json.dumps({"marks": str(marks), "outside": str(outside),
                                                        "root": str(root)}))
    bot = {"provider": "command", "command": [PY, str(agent), str(root.parent / "agent.json")]}
    write_project(root, nodes, agents={"bot": {**bot, "sandbox": True} if sandboxed else bot}, concurrency=concurrency)
    for rel, text in (("src/a.py", "A = 1\n"), ("src/b.py", "B = 1\n"), ("src/c.py", "C = 1\n"),
                      ("src/d.py", "D = 1\n"), ("src/e.py", "E = 1\n"), ("src/f.py", "F = 1\n"), ("docs/readme.md", "# read me\n"),
                      ("conf/settings", "debug = false\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git_repo(root, commit=False)
    (root / ".gitignore").write_text(".harness/\nbuild/\nnode_modules\nvenv\n.env.test\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    if worktrees:
        plan_path = root / ".harness" / "build" / "plan.json"
        plan = json.loads(plan_path.read_text())
        plan["worktrees"] = worktrees
        plan_path.write_text(json.dumps(plan))


def events(root, kind) -> list[dict]:
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id, data FROM events WHERE kind = ? ORDER BY id", (kind,)).fetchall()
    return [{"task": t, **json.loads(d or "{}")} for t, d in rows]


@pytest.fixture
def outside(tmp_path):
    out = tmp_path / "outside"
    out.mkdir()
    (out / "precious").write_text("the user's\n")
    return out


def test_the_next_agent_in_a_reused_checkout_sees_what_a_fresh_checkout_holds(tmp_path, outside):
    """a leaves every kind of leftover; obs runs next in the same checkout (-j 1: the only
    one) and sees exactly what a fresh `git worktree add --detach` at the same commit holds."""
    root = tmp_path / "p"
    project(root, ["a", "obs"], 1, outside, worktrees={"link": ["node_modules", "venv"], "copy": [".env.test"]})
    for rel in ("node_modules", "venv"):
        (root / rel).mkdir()
        (root / rel / "installed.txt").write_text(rel + "\n")
    (root / ".env.test").write_text("TOKEN=test\n")
    start = git(root, "rev-parse", "HEAD").strip()
    r = virtual.harnessc(root, "run", "--no-build")
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    pool = events(root, "worktrees_reused")
    assert [(e["made"], e["reused"], e["discarded"]) for e in pool] == [(1, 1, 0)], pool
    seen = json.loads((tmp_path / "marks" / "obs.json").read_text())
    git(root, "worktree", "add", "-q", "--detach", str(tmp_path / "fresh"), start)
    fresh = fingerprint(tmp_path / "fresh")
    assert (tmp_path / "marks" / "a.done").exists()  # a's every attack ran
    # what worktrees: brings in is there as in a fresh one's: the links, the copy as it was
    brought = {rel: seen["files"].pop(rel) for rel in ("node_modules", "venv", ".env.test")}
    assert brought["node_modules"][1:] == ["link", str(root / "node_modules")]
    assert brought["venv"][1:] == ["link", str(root / "venv")]
    assert brought[".env.test"][0] == "0o100444" and (root / ".env.test").read_text() == "TOKEN=test\n"
    assert brought[".env.test"][1] == fingerprint(root)["files"][".env.test"][1]
    seen["status"] = "".join(line for line in seen["status"].splitlines(True)
                             if line[3:].strip() not in brought)
    for key in fresh:
        assert seen[key] == fresh[key], key
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]  # nothing removed through a link
    assert (outside / "precious").read_text() == "the user's\n"
    # obs's change is its own file only, whatever a left in the checkout
    obs = [e for e in events(root, "landed") if e["task"] == "obs"]
    assert obs and obs[0]["paths"] == ["out/obs.txt"]
    assert list((root / ".harness" / "worktrees").glob("*/*")) == []  # the pool emptied
    assert [w for w in git(root, "worktree", "list", "--porcelain").splitlines() if w.startswith("worktree ")] \
        == [f"worktree {root}", f"worktree {tmp_path / 'fresh'}"]


def test_many_tasks_at_j2_reuse_checkouts_and_land_what_fresh_ones_would(tmp_path, outside):
    """14 tasks at -j 2: at most a few checkouts are made, the rest reused; every task lands
    its own file and nothing else (an agent that found another's file, or a leftover, would
    have landed it too), and nothing is left after the run."""
    root = tmp_path / "p"
    tasks = [f"t{i:02d}" for i in range(14)]
    project(root, tasks, 2, outside)
    r = virtual.harnessc(root, "run", "--no-build", "-j", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    pool = events(root, "worktrees_reused")
    assert len(pool) == 1 and pool[0]["made"] + pool[0]["reused"] == 14 and pool[0]["reused"] >= 10, pool
    landed = {e["task"]: e["paths"] for e in events(root, "landed")}
    assert landed == {t: [f"out/{t}.txt"] for t in tasks}
    # moving checkouts is harnessc's own doing: the tripwire saw no change of the git directory
    assert [events(root, kind) for kind in ("git_tampered", "git_changed", "git_other_run")] == [[], [], []]
    assert sorted(git(root, "ls-tree", "--name-only", "HEAD", "out/").split()) == [f"out/{t}.txt" for t in tasks]
    assert [w for w in git(root, "worktree", "list", "--porcelain").splitlines() if w.startswith("worktree ")] \
        == [f"worktree {root}"]
    assert list((root / ".harness" / "worktrees").glob("*/*")) == []


def test_a_filled_submodule_directory_and_a_rewritten_git_file_leave_nothing_for_the_next_agent(tmp_path, outside):
    """s clones a repository where the base has a submodule entry (a gitlink: git clean
    leaves a tracked path alone): obs1, next in that checkout, finds vendor/lib empty as in a
    fresh worktree (isolation refuses a repository with .gitmodules; a bare gitlink is
    enough to hold one). g points its .git file
    at the user's repository: that checkout is never reused (it is removed); obs2 sees a
    fresh one's files all the same."""
    sub = tmp_path / "subrepo"
    sub.mkdir()
    (sub / "lib.txt").write_text("library\n")
    git_repo(sub)
    root = tmp_path / "p"
    project(root, ["s", "obs1", "g", "obs2"], 1, outside)
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{git(sub, 'rev-parse', 'HEAD').strip()},vendor/lib")
    git(root, "commit", "-qm", "with a gitlink")
    start = git(root, "rev-parse", "HEAD").strip()
    r = virtual.harnessc(root, "run", "--no-build")
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    git(root, "worktree", "add", "-q", "--detach", str(tmp_path / "fresh"), start)
    fresh = fingerprint(tmp_path / "fresh")
    assert fresh["files"]["vendor/lib"] and not [f for f in fresh["files"] if f.startswith("vendor/lib/")]
    for name in ("obs1", "obs2"):
        seen = json.loads((tmp_path / "marks" / f"{name}.json").read_text())
        for key in fresh:
            assert seen[key] == fresh[key], (name, key)
    pool = events(root, "worktrees_reused")
    assert len(pool) == 1 and pool[0]["reused"] >= 2, pool
    assert [w for w in git(root, "worktree", "list", "--porcelain").splitlines() if w.startswith("worktree ")] \
        == [f"worktree {root}", f"worktree {tmp_path / 'fresh'}"]
    assert list((root / ".harness" / "worktrees").glob("*/*")) == []


def test_a_killed_runs_pool_is_emptied_by_the_next_run(tmp_path, outside):
    """p1 and p2 run at once; k takes p1's checkout, waits until p2's is free in the pool and
    kills harnessc (-9): the next run removes both (the free one too) before anything else,
    and nothing is left after it."""
    root = tmp_path / "p"
    project(root, ["p1", "p2", "k"], 2, outside)
    out, err = (p := spawn(root, "run", "--no-build")).communicate(timeout=300)
    assert p.returncode == -signal.SIGKILL, out + err
    left = sorted(p.name for p in (root / ".harness" / "worktrees").glob("*/*"))
    assert left == ["3-1", "free-2"] or left == ["3-1", "free-1"], left
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 0, r.stdout + r.stderr
    rec = events(root, "worktrees_reconciled")
    assert rec and sorted(w.rsplit("/", 1)[1] for w in rec[0]["worktrees"]) == left
    assert [w for w in git(root, "worktree", "list", "--porcelain").splitlines() if w.startswith("worktree ")] \
        == [f"worktree {root}"]
    assert list((root / ".harness" / "worktrees").glob("*/*")) == []


@pytest.mark.skipif(sandbox.problem() is not None, reason=f"no sandbox here: {sandbox.problem()}")
def test_sandboxed_agents_commit_in_reused_checkouts(tmp_path, outside):
    """Under bubblewrap an agent can write its own worktree's git directory only: in a
    reused checkout that is the one its .git names (its record moved with it), so its own
    `git commit` works there, task after task."""
    root = tmp_path / "p"
    project(root, ["c1", "c2", "c3"], 1, outside, sandboxed=True)
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [(e["made"], e["reused"]) for e in events(root, "worktrees_reused")] == [(1, 2)]
    assert {e["task"]: e["paths"] for e in events(root, "landed")} == {t: [f"out/{t}.txt"] for t in ("c1", "c2", "c3")}


def test_the_sandbox_lets_a_reused_checkout_write_its_own_git_directory_not_the_one_before(tmp_path):
    """The same place (1-1) holds another checkout after reuse: the sandbox's writable git
    directory is the one that checkout's .git names, never the one it found there before."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    git_repo(root)
    repo = open_repo(root)
    trees = Worktrees(repo, root, "r1")
    one, two = trees.create(1, 1, repo.head), trees.create(2, 1, repo.head)
    assert one.git.git_dir in sandbox.layout(root, one.workdir).git_writable
    trees.remove(one, 1, 1)
    trees.remove(two, 2, 1)  # both free; the last given is the first taken
    again = trees.create(1, 1, repo.head)
    assert again.path == one.path and again.git.git_dir == two.git.git_dir
    layout = sandbox.layout(root, again.workdir)
    assert two.git.git_dir in layout.git_writable and one.git.git_dir not in layout.git_writable
    trees.remove(again, 1, 1)
    assert len(trees.drain()) == 2
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1


@pytest.mark.parametrize("reflogs", ["true", "false"])
def test_a_reused_checkouts_git_directory_holds_what_a_fresh_ones_does(tmp_path, reflogs):
    """HEAD, ORIG_HEAD, a reflog only where git writes one (core.logAllRefUpdates), nothing more."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    git_repo(root)
    git(root, "config", "core.logAllRefUpdates", reflogs)
    repo = open_repo(root)
    trees = Worktrees(repo, root, "r1")
    first = trees.create(1, 1, repo.head)
    git(first.path, "commit", "-q", "--allow-empty", "-m", "the agent's")
    trees.remove(first, 1, 1)
    again = trees.create(2, 1, repo.head)
    assert trees.pool.reused == 1
    git(root, "worktree", "add", "-q", "--detach", str(tmp_path / "fresh"), repo.head)
    fresh_dir = git(tmp_path / "fresh", "rev-parse", "--absolute-git-dir").strip()

    def shape(git_dir):
        return sorted(str(p.relative_to(git_dir)) for p in Path(git_dir).rglob("*"))
    assert shape(again.git.git_dir) == shape(fresh_dir)
    for name in ("HEAD", "ORIG_HEAD", "commondir"):
        assert (again.git.git_dir / name).read_text() == (Path(fresh_dir) / name).read_text()
    assert git(again.path, "reflog").count("\n") == git(tmp_path / "fresh", "reflog").count("\n")
    trees.remove(again, 2, 1)
    trees.drain()


def test_a_free_checkout_changed_while_it_waits_is_discarded_and_a_fresh_one_made(tmp_path):
    """An agent (unsandboxed, so it reaches beside its own checkout) rewrites a free
    checkout's .git file and plants a file in another's git directory: neither is handed
    out; both are removed and fresh ones made, and what the .git file named is untouched."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    git_repo(root)
    repo = open_repo(root)
    trees = Worktrees(repo, root, "r1")
    one, two = trees.create(1, 1, repo.head), trees.create(2, 1, repo.head)
    trees.remove(one, 1, 1)
    trees.remove(two, 2, 1)
    free = {k.git_dir.name: k for k in trees.pool.free}
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (free[one.git.git_dir.name].path / ".git").write_text(f"gitdir: {decoy}\n")
    (free[two.git.git_dir.name].git_dir / "commondir").write_text("../../../elsewhere\n")
    again = trees.create(3, 1, repo.head)
    assert (trees.pool.made, trees.pool.reused, len(trees.pool.discarded)) == (3, 0, 2), trees.pool.discarded
    assert again.git.git_dir.name not in free and (again.path / "a.txt").read_text() == "a\n"
    assert list(decoy.iterdir()) == []
    assert sorted(p.name for p in (root / ".harness" / "worktrees" / "r1").iterdir()) == ["3-1"]
    trees.remove(again, 3, 1)
    trees.drain()
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1


def _same_second(index: bytes, rel: str, ctime: int) -> bytes:
    """`index` (version 2, SHA-1) with `rel`'s entry recording ctime second `ctime` (its
    nanoseconds as they were): as if the file had changed within the second git wrote it."""
    import hashlib
    import struct
    data, at = bytearray(index), 12
    for _ in range(struct.unpack_from(">I", index, 8)[0]):
        end = index.index(b"\0", at + 62)
        if index[at + 62:end].decode() == rel:
            struct.pack_into(">I", data, at, ctime)
        at += (end - at + 8) & ~7
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    return bytes(data)


def test_a_file_changed_in_the_second_it_was_written_is_written_again(tmp_path):
    """git compares a file's times with its index entry to the second: a.txt changed (same
    size, its mtime put back) and b.txt made read-only within the second the checkout wrote
    them look unchanged to git. harnessc compares to the nanosecond and writes both again."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    git_repo(root)
    repo = open_repo(root)
    trees = Worktrees(repo, root, "r1")
    first = trees.create(1, 1, repo.head)
    a, b = first.path / "a.txt", first.path / "b.txt"
    st = os.lstat(a)
    a.write_text("x\n")
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.chmod(b, 0o400)
    kept = trees.pool.held[first.path]
    for f in (a, b):
        kept.index = _same_second(kept.index, f.name, int(os.lstat(f).st_ctime))
    trees.remove(first, 1, 1)
    again = trees.create(2, 1, repo.head)
    assert trees.pool.reused == 1
    assert (again.path / "a.txt").read_text() == "a\n"
    assert oct(os.lstat(again.path / "b.txt").st_mode & 0o777) == oct(0o666 & ~_umask())
    trees.remove(again, 2, 1)
    trees.drain()


def test_harnessc_clean_removes_the_free_checkouts_a_dead_run_left(tmp_path):
    """A run that died with checkouts in its pool: `harnessc clean` removes them (and their
    git directories), as every worktree a crashed run left."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    git_repo(root)
    repo = open_repo(root)
    trees = Worktrees(repo, root, "r1")
    one = trees.create(1, 1, repo.head)
    trees.remove(one, 1, 1)  # into the pool; never drained: the run died
    assert [p.name for p in (root / ".harness" / "worktrees" / "r1").iterdir()] == ["free-1"]
    r = virtual.harnessc(root, "clean")
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert list((root / ".harness" / "worktrees").glob("*/*")) == []
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not (one.git.git_dir).exists()
