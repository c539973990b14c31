"""What an agent commits is its work (runtime/worktree/worktrees.py `changes`, `commit`).

An isolated attempt's change is its base commit against its checkout's final tree, whatever
the agent did with git there: committed it all, committed some and left the rest, made
several commits and amended one, reset HEAD, started an unrelated root. It lands as one
commit whose only parent is the base, and every changed path goes through the same secret
check as uncommitted work. Commit messages go to git by file: a 140,000-character title
lands, cut in the subject and whole in the body. Real git, real worktrees, a real command
agent (`provider: command`)."""

from __future__ import annotations

import json
import subprocess

from . import virtual
from .helpers import PY, env, git, git_repo, node, write_project

SECRET = "sk-test-0123456789abcdefSECRET"

# The agent: does what argv[1] names in its checkout, then claims.
AGENT = """\
import os, pathlib, subprocess, sys
def sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
def write(path, text):
    pathlib.Path(path).write_text(text + "\\n")
how = sys.argv[1] if len(sys.argv) > 1 else os.environ["HARNESSC_TASK"]  # (the Ray test: by task)
if how == "write":  # commits nothing
    write("code.py", "print('the work')")
elif how == "secret":  # commits the key it was given (and its work), leaves more uncommitted
    write(".env", "OPENAI_API_KEY=" + os.environ["OPENAI_API_KEY"])
    write("code.py", "print('the work')")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "my work and my key")
    write("more.py", "print('more work')")
elif how == "hidden":  # commits the key, then hides that from `git add`: the file gone, its entry kept
    write("token.txt", os.environ["OPENAI_API_KEY"])
    write("code.py", "print('the work')")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "my work")
    sh("git", "update-index", "--skip-worktree", "token.txt")
    os.unlink("token.txt")
elif how == "brought":  # commits the copy harnessc brought in (git add -f: it is ignored)
    write("code.py", "print('the work')")
    sh("git", "add", "-A")
    sh("git", "add", "-f", ".env.test")
    sh("git", "commit", "-qm", "my work")
elif how == "all":  # commits everything it did
    write("code.py", "print('the work')")
    sh("git", "rm", "-q", "old.txt")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "my work")
elif how == "several":  # a branch of its own, two commits, an amend, and more left uncommitted
    sh("git", "checkout", "-q", "-b", "agent-branch")
    write("a.txt", "a")
    sh("git", "add", "a.txt")
    sh("git", "commit", "-qm", "a")
    write("b.txt", "b")
    sh("git", "add", "b.txt")
    sh("git", "commit", "-qm", "b")
    write("c.txt", "c")
    sh("git", "add", "c.txt")
    sh("git", "commit", "-q", "--amend", "-m", "b and c")
    write("d.txt", "d")
elif how == "reset":  # squashes: HEAD back past the base, the files kept, one commit of its own
    sh("git", "reset", "-q", "--soft", "HEAD~1")
    write("new.txt", "new")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "squashed")
elif how == "root":  # an unrelated root commit holding everything, its work included
    sh("git", "checkout", "-q", "--orphan", "fresh")
    write("new.txt", "new")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "a new root")
print("done <promise>DONE</promise>")
"""


def project(root, how: str, **kw) -> None:
    """A git project of two commits (old.txt, then second.txt) whose one task runs isolated
    on the agent above, given the key through pass_env."""
    write_project(root, [node("a", routing={"agent": "bot"}, completion_promise="DONE", isolation="worktree", **kw)],
                  agents={"bot": {"provider": "command", "command": [PY, str(root / "agent.py"), how],
                                  "pass_env": ["OPENAI_API_KEY"]}}, concurrency=1)
    (root / "agent.py").write_text(AGENT)
    (root / "old.txt").write_text("old\n")
    git_repo(root)
    (root / "second.txt").write_text("second\n")
    git(root, "add", "second.txt")
    git(root, "commit", "-qm", "second")


def run(root) -> subprocess.CompletedProcess:
    r = virtual.harnessc(root, "run", "--no-build", env=env(OPENAI_API_KEY=SECRET))
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return r


def landed(root) -> tuple[list[str], list[str]]:
    """(the subjects on the user's branch, newest first; the files the newest commit changes)."""
    subjects = git(root, "log", "--format=%s", "HEAD").splitlines()
    files = git(root, "show", "--name-status", "--format=", "HEAD").split("\n")
    return subjects, sorted(line.replace("\t", " ") for line in files if line)


def only_parent_is(root, base: str) -> bool:
    return git(root, "log", "-1", "--format=%P", "HEAD").split() == [base]


def tasks(root) -> dict:
    out = virtual.harnessc(root, "status", "--json")
    return {t["id"]: t for t in json.loads(out.stdout)["tasks"]}


def test_a_key_the_agent_committed_is_withheld_as_if_it_had_not(tmp_path):
    """It commits .env (the key it was given) with its work, and leaves more uncommitted: its
    work lands as one commit on the base, .env never does (an alert names it)."""
    root = tmp_path / "p"
    project(root, "secret")
    base = git(root, "rev-parse", "HEAD").strip()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert SECRET not in git(root, "log", "-p", "--all")
    subjects, files = landed(root)
    assert subjects == ["harnessc: a: Task a", "second", "start"]
    assert files == ["A code.py", "A more.py"] and only_parent_is(root, base)
    alerts = (root / ".harness" / "alerts.log").read_text()
    assert "git_secret_withheld" in alerts and ".env (it holds the value of a secret" in alerts
    assert SECRET not in alerts


def test_a_committed_key_hidden_from_git_add_is_found_in_what_would_land(tmp_path):
    """skip-worktree on its entry and the file deleted: `git add -A` does not see it, the
    final tree holds it; the check reads the tree, not the disk."""
    root = tmp_path / "p"
    project(root, "hidden")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert SECRET not in git(root, "log", "-p", "--all")
    assert landed(root)[1] == ["A code.py"]
    assert "token.txt (it holds the value of a secret" in (root / ".harness" / "alerts.log").read_text()


def test_a_brought_in_copy_the_agent_committed_stays_out_of_the_change(tmp_path):
    """harness.yaml `worktrees: copy:` brings an ignored file in; `git add -f` and a commit
    do not make it part of the change."""
    root = tmp_path / "p"
    project(root, "brought")
    (root / ".gitignore").write_text(".harness/\n.env.test\n")
    git(root, "commit", "-qam", "ignore")
    (root / ".env.test").write_text("X=1\n")
    plan_path = root / ".harness" / "build" / "plan.json"
    plan = json.loads(plan_path.read_text())
    plan["worktrees"] = {"copy": [".env.test"]}
    plan_path.write_text(json.dumps(plan))
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert landed(root)[1] == ["A code.py"]


def test_an_agent_that_commits_everything_has_its_work_landed(tmp_path):
    root = tmp_path / "p"
    project(root, "all")
    base = git(root, "rev-parse", "HEAD").strip()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    subjects, files = landed(root)
    assert subjects == ["harnessc: a: Task a", "second", "start"]
    assert files == ["A code.py", "D old.txt"] and only_parent_is(root, base)
    assert (root / "code.py").read_text() == "print('the work')\n" and not (root / "old.txt").exists()


def test_several_commits_an_amend_and_uncommitted_files_land_as_one_commit_on_the_base(tmp_path):
    root = tmp_path / "p"
    project(root, "several")
    base = git(root, "rev-parse", "HEAD").strip()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    subjects, files = landed(root)
    assert subjects == ["harnessc: a: Task a", "second", "start"]  # the agent's own commits are not history
    assert files == ["A a.txt", "A b.txt", "A c.txt", "A d.txt"] and only_parent_is(root, base)


def test_an_agent_that_resets_head_past_its_base_lands_its_files_on_the_base(tmp_path):
    """`git reset --soft HEAD~1` and a commit of its own: the change is its files against the
    base (new.txt), on the base; the user's branch follows by fast-forward."""
    root = tmp_path / "p"
    project(root, "reset")
    base = git(root, "rev-parse", "HEAD").strip()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    subjects, files = landed(root)
    assert subjects == ["harnessc: a: Task a", "second", "start"]
    assert files == ["A new.txt"] and only_parent_is(root, base)
    assert (root / "second.txt").read_text() == "second\n"


def test_an_agent_on_an_unrelated_root_commit_lands_its_files_on_the_base(tmp_path):
    root = tmp_path / "p"
    project(root, "root")
    base = git(root, "rev-parse", "HEAD").strip()
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    subjects, files = landed(root)
    assert subjects == ["harnessc: a: Task a", "second", "start"]
    assert files == ["A new.txt"] and only_parent_is(root, base)


def test_a_140000_character_title_lands_cut_in_the_subject_and_whole_in_the_body(tmp_path):
    """An argument over 128 KiB is E2BIG: the message goes to git by file."""
    root = tmp_path / "p"
    title = "Make it " + "very " * 28000 + "long"
    project(root, "write", title=title)
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    subject = git(root, "log", "-1", "--format=%s", "HEAD").rstrip("\n")
    assert subject.startswith("harnessc: a: Make it very ") and subject.endswith("\u2026") and len(subject) <= 100
    body = git(root, "log", "-1", "--format=%b", "HEAD")
    assert f"Title: {title}\n" in body and "Harnessc-Task: a" in body
    assert landed(root)[1] == ["A code.py"]


def test_a_nul_in_a_hand_edited_plan_title_fails_the_task_with_a_clear_line(tmp_path):
    """The lint refuses it (HC108); a plan.json edited by hand still never leaves the task
    `running` with an internal error."""
    root = tmp_path / "p"
    project(root, "write", title="Fix\x00it")
    r = run(root)
    assert r.returncode != 0
    assert "a failed: its title holds U+0000 (NUL) at character 4" in r.stdout + r.stderr
    assert tasks(root)["a"]["state"] == "failed"
    assert git(root, "log", "--format=%s", "HEAD").splitlines() == ["second", "start"]


def test_a_140000_character_title_is_committed_in_a_shared_tree_too(tmp_path):
    """`git: commit` without isolation: the same subject and body, by file."""
    root = tmp_path / "p"
    title = "Make it " + "very " * 28000 + "long"
    write_project(root, [node("a", routing={"agent": "bot"}, completion_promise="DONE", git="commit", title=title)],
                  agents={"bot": {"provider": "command", "command": [PY, str(root / "agent.py"), "write"]}},
                  concurrency=1)
    (root / "agent.py").write_text(AGENT)
    git_repo(root)
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    subject = git(root, "log", "-1", "--format=%s", "HEAD").rstrip("\n")
    assert subject.startswith("harnessc: a: Make it very ") and subject.endswith("\u2026") and len(subject) <= 100
    assert f"Title: {title}\n" in git(root, "log", "-1", "--format=%b", "HEAD")
    assert git(root, "show", "--name-only", "--format=", "HEAD").split() == ["code.py"]


def test_a_subject_keeps_its_prefix_and_shows_what_a_line_cannot_hold():
    from harnessc.runtime.worktree.commitmsg import SUBJECT_LIMIT, TITLE_MIN, headline

    assert headline("harnessc: a: ", "Short title") == ("harnessc: a: Short title", "")
    subject, body = headline("harnessc: a: ", "x" * 200)
    assert len(subject) == SUBJECT_LIMIT and subject.endswith("x\u2026") and body == f"Title: {'x' * 200}\n\n"
    long_id = "harnessc: " + "i" * 128 + ": "  # a prefix over the limit keeps TITLE_MIN of the title
    subject, _ = headline(long_id, "y" * 200)
    assert subject.startswith(long_id) and len(subject) == len(long_id) + TITLE_MIN
    assert headline("p: ", "a\tb\x00c\x1b[2J\u2028d") == ("p: a b\\x00c\\x1b[2J\\u2028d", "")
