"""What an agent does in its checkout never reaches the user's repository through harnessc's
own git (gitcmd.py, runtime/worktree/worktrees.py).

Each test runs a real command agent in `isolation: worktree` that attacks the way a hostile
or careless agent would: it writes a filter, a gpg program or `core.worktree` into the shared
git configuration, deletes its checkout's `.git` file, plants a link where harnessc removes
worktrees, lands a link that `worktrees: copy:` would write through, or shares the
repository with a second harnessc project. After each, the user's branch (but for landed
commits), index, other worktree and files are exactly as they were, nothing the agent
planted ran, and the run says what happened in a line, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from . import virtual
from .helpers import PY, env, git, git_repo, node, write_project

# The agent: does the steps agent.json lists for its task ([kind, args...]), then writes
# out/<task>.txt and claims.
AGENT = r"""
import json, os, pathlib, shutil, subprocess, sys, time
task = os.environ["HARNESSC_TASK"]
cfg = json.loads(pathlib.Path(sys.argv[1]).read_text())
def git(*args, **kw):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True, **kw).stdout
def landed(t):
    out = subprocess.run(["git", "-c", "log.showSignature=false", "log", "--format=%s", "--branches=harnessc/run/*"],
                         capture_output=True, text=True)
    return f"harnessc: {t}:" in out.stdout
for step in cfg.get(task, []):
    kind, args = step[0], step[1:]
    if kind == "config":
        git("config", *args)
    elif kind == "write":
        pathlib.Path(args[0]).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args[0]).write_text(args[1])
    elif kind == "unlink":
        os.unlink(args[0])
    elif kind == "rmtree":
        shutil.rmtree(args[0])
    elif kind == "symlink":
        os.symlink(args[1], args[0])
    elif kind == "wait_landed":
        for _ in range(1200):
            if landed(args[0]):
                break
            time.sleep(0.05)
    elif kind == "signed_commit":  # a commit carrying a (fake) signature: log.showSignature runs gpg on it
        git("add", "-A")
        tree, parent = git("write-tree").strip(), git("rev-parse", "HEAD").strip()
        body = (f"tree {tree}\nparent {parent}\nauthor A <a@example.com> 1700000000 +0000\n"
                f"committer A <a@example.com> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n"
                f" iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned by the agent\n")
        sha = git("hash-object", "-t", "commit", "-w", "--stdin", input=body).strip()
        git("update-ref", "HEAD", sha)
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".txt").write_text("made by " + task + "\n")
print("done <promise>DONE</promise>")
"""

SECRET_ENV = "API_TOKEN=sk-user-secret-0123456789\n"


def project(root, tasks: dict, steps: dict, concurrency: int = 1, worktrees: dict | None = None, **kw) -> None:
    """A project (in `root`, a directory of an existing repository or a new one) whose tasks
    run isolated on the agent above, doing `steps`."""
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    nodes = [node(t, depends_on=list(deps), **{**bot, **kw.get(t, {})}) for t, deps in tasks.items()]
    agent = root.parent / (root.name + "-agent.py")
    agent.write_text(AGENT)
    (root.parent / (root.name + "-agent.json")).write_text(json.dumps(steps))
    write_project(root, nodes, agents={"bot": {"provider": "command", "command": [
        PY, str(agent), str(root.parent / (root.name + "-agent.json"))]}}, concurrency=concurrency)
    if worktrees:
        plan_path = root / ".harness" / "build" / "plan.json"
        plan = json.loads(plan_path.read_text())
        plan["worktrees"] = worktrees
        plan_path.write_text(json.dumps(plan))


class User:
    """The user's repository around a project: a staged file, an uncommitted edit, an
    untracked `.env` with a secret, and another worktree of theirs; `same()` asserts all of
    it is as it was (the user's branch may only have gained harnessc's landed commits)."""

    def __init__(self, top, tmp_path, ignore: str = ""):
        self.top = top
        (top / "notes.txt").write_text("mine\n")
        (top / "conf").mkdir(exist_ok=True)
        (top / "conf" / "settings").write_text("debug = false\n")
        git_repo(top)
        if ignore:
            (top / ".gitignore").write_text(".harness/\n" + ignore)
            git(top, "commit", "-qm", "ignore", "--", ".gitignore")
        (top / "notes.txt").write_text("mine, edited and not committed\n")
        (top / "staged.txt").write_text("staged, not committed\n")
        git(top, "add", "staged.txt")
        (top / ".env").write_text(SECRET_ENV)
        self.other = tmp_path / "other"
        git(top, "worktree", "add", "-q", "-b", "other", str(self.other))
        (self.other / "keep.txt").write_text("the user's other worktree\n")
        self.branch = git(top, "symbolic-ref", "HEAD").strip()
        self.state = self.read()

    def read(self) -> dict:
        top = self.top
        refs = [r for r in git(top, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
                if not r.startswith(("refs/harnessc/", "refs/heads/harnessc/", self.branch + " "))]
        files = {p.relative_to(top).as_posix(): p.read_bytes() for p in top.rglob("*")
                 if p.is_file() and ".git" not in p.parts and ".harness" not in p.parts and "out" not in p.parts}
        return {"refs": refs, "head": git(top, "rev-parse", "HEAD").strip(), "files": files,
                "status": git(top, "status", "--porcelain", "--untracked-files=all"),
                "index": git(top, "diff", "--cached", "--name-status"),
                "other": {p.name: p.read_bytes() for p in self.other.iterdir() if p.is_file()},
                "other_head": git(self.other, "rev-parse", "HEAD").strip(),
                "worktrees": [w for w in git(top, "worktree", "list", "--porcelain").splitlines()
                              if w.startswith("worktree ") and ".harness" not in w]}

    def same(self) -> None:
        now, was = self.read(), self.state
        assert git(self.top, "merge-base", "--is-ancestor", was["head"], now["head"]) == ""
        for key in ("refs", "status", "index", "other", "other_head", "worktrees"):
            assert now[key] == was[key], key
        landed = set(git(self.top, "diff", "--name-only", was["head"], now["head"]).split())
        assert {p: b for p, b in now["files"].items() if p not in landed} == was["files"]
        for rev in [now["head"], *git(self.top, "rev-list", "--all").split()]:
            names = git(self.top, "ls-tree", "-r", "--name-only", rev).split()
            assert ".env" not in names and "staged.txt" not in names, rev  # never committed


def run(root, *args):
    home = next(p / "home" for p in root.parents if (p / "home").is_dir())  # its .gitconfig: an identity
    r = virtual.harnessc(root, "run", "--no-build", *args, env=env(HOME=str(home)))
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r


@pytest.fixture
def user(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".gitconfig").write_text("[user]\n\tname = Global Person\n\temail = global@example.com\n")
    top = tmp_path / "p"
    top.mkdir()
    return top


def marks(tmp_path):
    found = sorted(p.name for p in tmp_path.glob("MARK-*"))
    return found


def test_a_filter_the_agent_puts_in_the_shared_config_never_runs_and_the_config_is_put_back(tmp_path, user):
    """clean and smudge, named in the shared config: the tripwire puts the config back before
    harnessc's git reads it again, and no attempt of that agent lands; no filter ever ran."""
    steps = [["config", "filter.evil.clean", f"sh -c 'touch {tmp_path}/MARK-clean; cat'"],
             ["config", "filter.evil.smudge", f"sh -c 'touch {tmp_path}/MARK-smudge; cat'"],
             ["write", ".gitattributes", "*.txt filter=evil\n"], ["write", "data.txt", "the agent's data\n"]]
    project(user, {"a": [], "b": ["a"]}, {"a": steps})
    u = User(user, tmp_path)
    config = (user / ".git" / "config").read_text()
    r = run(user)
    assert r.returncode == 1 and "tampered with .git/config" in r.stdout + r.stderr, r.stdout + r.stderr
    assert marks(tmp_path) == []  # neither clean nor smudge ran
    assert (user / ".git" / "config").read_text() == config
    u.same()


def test_a_filter_in_a_file_the_users_config_includes_never_runs_in_harnessc_s_git(tmp_path, user):
    """The user's config includes a file outside .git (the tripwire does not watch it); the
    agent writes clean and smudge there. harnessc's `git add` in the checkout, the landing,
    the user's fast-forward and the next task's checkout all leave them blank."""
    evil = tmp_path / "included.cfg"
    evil.write_text("")
    driver = (f'[filter "evil"]\n\tclean = "sh -c \'touch {tmp_path}/MARK-clean; cat\'"\n'
              f'\tsmudge = "sh -c \'touch {tmp_path}/MARK-smudge; cat\'"\n')
    steps = [["write", str(evil), driver], ["write", ".gitattributes", "*.txt filter=evil\n"],
             ["write", "data.txt", "the agent's data\n"]]
    project(user, {"a": [], "b": ["a"]}, {"a": steps})
    u = User(user, tmp_path)
    git(user, "config", "include.path", str(evil))  # the user's own include, before the run
    u.state = u.read()
    r = run(user)
    assert r.returncode == 0, r.stdout + r.stderr
    assert marks(tmp_path) == []  # neither clean nor smudge ran
    assert git(user, "show", "HEAD:out/b.txt") == "made by b\n"  # both landed, the user's branch followed
    assert git(user, "show", "HEAD:data.txt") == "the agent's data\n"
    evil.write_text("")
    u.same()


def test_a_gpg_program_with_log_show_signature_never_runs(tmp_path, user):
    """The agent signs a commit (a fake signature) and sets gpg.program + log.showSignature:
    no git of harnessc's verifies it, and the config is put back (tripwire)."""
    gpg = tmp_path / "gpg.sh"
    gpg.write_text(f"#!/bin/sh\ntouch {tmp_path}/MARK-gpg\nexit 1\n")
    gpg.chmod(0o755)
    project(user, {"a": [], "b": []}, {
        "a": [["config", "gpg.program", str(gpg)], ["config", "log.showSignature", "true"],
              ["write", "signed.txt", "signed\n"], ["signed_commit"]]})  # b after a
    u = User(user, tmp_path)
    r = run(user)
    assert r.returncode == 1 and "tampered with .git/config" in r.stdout + r.stderr, r.stdout + r.stderr
    assert marks(tmp_path) == []
    assert git(user, "show", "HEAD:out/b.txt") == "made by b\n"  # b landed
    u.same()


def test_core_worktree_cannot_send_harnessc_s_checkouts_outside_the_project(tmp_path, user):
    """core.worktree in the shared config: put back by the tripwire, and harnessc's explicit
    work tree wins meanwhile - nothing is ever checked out in the other directory."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project(user, {"a": [], "b": []}, {"a": [["config", "core.worktree", str(elsewhere)]]})  # b after a
    u = User(user, tmp_path)
    r = run(user)
    assert r.returncode == 1 and "tampered with .git/config" in r.stdout + r.stderr, r.stdout + r.stderr
    assert list(elsewhere.iterdir()) == []
    assert (user / "out" / "b.txt").read_text() == "made by b\n", r.stdout  # checked out in the user's tree
    assert "core.worktree" not in (user / ".git" / "config").read_text()
    u.same()


def test_a_deleted_git_file_rejects_the_attempt_and_never_commits_the_user_s_tree(tmp_path, user):
    """Without its checkout's `.git` file, git would find the user's repository above it:
    harnessc's git names the attempt's git directory, and the attempt is rejected."""
    fail_fast = {"retry": {"max_retries": 0, "on_failure": "retry", "delays": [0]}}
    project(user, {"a": []}, {"a": [["unlink", ".git"]]}, a=fail_fast)
    u = User(user, tmp_path)
    r = run(user)
    u.same()
    assert git(user, "rev-parse", "HEAD").strip() == u.state["head"]  # nothing landed
    assert r.returncode != 0, r.stdout + r.stderr
    assert "tampered with .git" in r.stdout + r.stderr
    assert "the checkout's .git file was deleted" in virtual.harnessc(user, "log", "a").stdout


def test_a_rewritten_git_file_is_rejected_too(tmp_path, user):
    fail_fast = {"retry": {"max_retries": 0, "on_failure": "retry", "delays": [0]}}
    project(user, {"a": []}, {"a": [["unlink", ".git"], ["write", ".git", f"gitdir: {user / '.git'}\n"]]},
            a=fail_fast)
    u = User(user, tmp_path)
    r = run(user)
    u.same()
    assert r.returncode != 0 and "tampered with .git" in r.stdout + r.stderr, r.stdout + r.stderr


def test_a_link_planted_where_the_next_worktree_goes_is_removed_as_a_link(tmp_path, user):
    project(user, {"a": [], "b": ["a"]}, {"a": [["symlink", "../2-1", str(tmp_path / "other")]]})
    u = User(user, tmp_path)
    r = run(user)
    assert (u.other / "keep.txt").is_file()
    u.same()
    assert r.returncode == 0, r.stdout + r.stderr
    assert git(user, "show", "HEAD:out/b.txt") == "made by b\n"


def test_a_link_left_in_harness_worktrees_is_removed_as_a_link_by_clean(tmp_path, user):
    project(user, {"a": []}, {"a": [["symlink", "../zz", str(tmp_path / "other")], ["symlink", "../../zz-run", str(tmp_path / "other")]]})
    u = User(user, tmp_path)
    r = run(user)
    assert r.returncode == 0, r.stdout + r.stderr
    left = list((user / ".harness" / "worktrees").rglob("zz*"))
    assert left and all(p.is_symlink() for p in left)
    r = virtual.harnessc(user, "clean")
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert not any(os.path.lexists(p) for p in left)  # the links are gone, not what they point at
    assert (u.other / "keep.txt").is_file()
    u.same()


def test_worktrees_copy_never_writes_through_a_link_the_agent_landed(tmp_path, user):
    """a lands `conf` as a link out of the project; b's worktree would get `conf/.env` copied
    through it: skipped, with a warning."""
    outside = tmp_path / "outside"
    outside.mkdir()
    project(user, {"a": [], "b": ["a"]}, {"a": [["rmtree", "conf"], ["symlink", "conf", str(outside)]]},
            worktrees={"copy": ["conf/.env"]})
    u = User(user, tmp_path, ignore="conf/.env\n")
    (user / "conf" / ".env").write_text(SECRET_ENV)
    u.state = u.read()
    r = run(user)
    assert list(outside.iterdir()) == []  # the secret was not written out of the project
    assert r.returncode == 0, r.stdout + r.stderr
    assert "never writes through one" in r.stdout + r.stderr + virtual.harnessc(user, "log").stdout
    u.same()


def test_two_projects_in_one_repository_keep_each_other_s_refs_and_worktrees(tmp_path, user):
    """Project a keeps a failed task's worktree and ref (--keep-worktrees); project b, in the
    same repository, runs and cleans: a's are still there; a's own clean removes them."""
    a, b = user / "a", user / "b"
    fail = {"accept": [{"id": "no", "argv": [PY, "-c", "raise SystemExit(1)"], "timeout": 60}],
            "retry": {"max_retries": 0, "on_failure": "retry", "delays": [0]}}
    a.mkdir()
    b.mkdir()
    project(a, {"t": []}, {}, t=fail)
    project(b, {"t": []}, {})
    u = User(user, tmp_path)
    r = run(a, "--keep-worktrees")
    assert r.returncode == 1, r.stdout + r.stderr
    kept = git(user, "for-each-ref", "--format=%(refname)", "refs/harnessc/").split()
    assert len(kept) == 1, kept
    trees = list((a / ".harness" / "worktrees").glob("*/1-1"))
    assert len(trees) == 1
    # b's run a minute after a's: in this process both have its pid, and a run's id is its
    # start time and pid (two processes' runs never share one)
    virtual.clock_of(b, wall=virtual.noon_today() + 60)
    r = run(b)
    assert r.returncode == 0, r.stdout + r.stderr
    assert virtual.harnessc(b, "clean").returncode == 0
    assert git(user, "for-each-ref", "--format=%(refname)", "refs/harnessc/").split() == kept
    assert (trees[0] / "a" / "out" / "t.txt").is_file()  # the worktree holds the repository, a/ in it
    assert kept[0].startswith("refs/harnessc/projects/a-"), kept  # a's namespace
    assert virtual.harnessc(a, "clean").returncode == 0
    assert git(user, "for-each-ref", "--format=%(refname)", "refs/harnessc/").split() == []
    assert not trees[0].exists()
    u.same()


def test_commits_are_made_as_the_identity_read_once_from_the_user_s_configuration(tmp_path, user):
    """The global config is read once, for the identity only: the landed commit is the
    user's (no repository identity here)."""
    project(user, {"a": []}, {})
    subprocess.run(["git", "init", "-q"], cwd=user, check=True)
    (user / ".gitignore").write_text(".harness/\n")
    git(user, "add", "-A")
    subprocess.run(["git", "-c", "user.name=S", "-c", "user.email=s@example.com", "commit", "-qm", "start"],
                   cwd=user, check=True)
    r = run(user)
    assert r.returncode == 0, r.stdout + r.stderr
    assert git(user, "log", "-1", "--format=%an <%ae>|%cn <%ce>") == \
        "Global Person <global@example.com>|Global Person <global@example.com>\n"


def test_harnessc_s_git_reads_no_global_config_and_ignores_replace_refs(tmp_path):
    """A global excludesFile (or anything else there) does not change what harnessc's git
    sees; a `refs/replace/` ref an agent adds replaces no object for it."""
    from harnessc import gitcmd

    top = tmp_path / "r"
    top.mkdir()
    (top / "a.txt").write_text("a\n")
    git_repo(top)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\texcludesFile = {home / 'ignore'}\n")
    (home / "ignore").write_text("*.txt\n")
    place = gitcmd.locate(top)
    g = gitcmd.Git(place.top, git_dir=place.git_dir)
    old = dict(os.environ)
    try:
        os.environ["HOME"] = str(home)
        (top / "b.txt").write_text("b\n")
        assert g.run("status", "--porcelain") == "?? b.txt\n"  # the global excludesFile was not read
        head = g.run("rev-parse", "HEAD", worktree=False).strip()
        fake = g.run("commit-tree", "-m", "fake", g.run("rev-parse", "HEAD^{tree}", worktree=False).strip(),
                     worktree=False, env={"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x",
                                          "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x"}).strip()
        git(top, "replace", head, fake)
        assert g.run("log", "-1", "--format=%s", head, worktree=False) == "start\n"
    finally:
        os.environ.clear()
        os.environ.update(old)
