"""git never runs an agent's code with harnessc's keys (gitcmd.py).

An agent without `pass_env` plants code that git would run - hooks, core.fsmonitor, a filter
driver, diff.external, a gpg program for signed commits - and harnessc's own git processes
(the file snapshots between iterations, the `git: commit` commits) come after it. None of
that code runs, and what runs (the user's hooks, with `git_hooks: true`) sees no key."""

from __future__ import annotations

import json

import pytest

from . import virtual
from .helpers import PY, env, git, git_repo, node, write_project

SECRET = "sk-test-0123456789abcdefSECRET"

# The agent: plants one payload (argv[1]) that writes `env` to leak-<vector>.txt, then claims.
PLANT = """\
import pathlib, subprocess, sys
root, vector = pathlib.Path.cwd(), sys.argv[1]
leak = f"env > {root / ('leak-' + vector + '.txt')}"
def script(path):
    path.write_text("#!/bin/sh\\n" + leak + "\\nexit 1\\n")
    path.chmod(0o755)
    return str(path)
def config(key, value):
    subprocess.run(["git", "config", key, value], check=True)
if vector in ("post-commit", "post-index-change", "prepare-commit-msg", "reference-transaction"):
    script(root / ".git" / "hooks" / vector)
elif vector == "fsmonitor":
    config("core.fsmonitor", leak + "; false")
elif vector == "filter":
    config("filter.evil.clean", "sh -c '" + leak + "; cat'")
elif vector == "filter-process":
    config("filter.evil.process", "sh -c '" + leak + "'")
elif vector == "diff-external":
    config("diff.external", script(root / "extdiff.sh"))
elif vector == "gpg":
    config("commit.gpgSign", "true")
    config("gpg.program", script(root / "gpg.sh"))
(root / ".gitattributes").write_text("*.dat filter=evil diff=evil\\n")
(root / "work.dat").write_text("the task's work\\n")
print("done <promise>DONE</promise>")
"""


def project(root, vector: str, git_mode: str | None) -> None:
    write_project(root, [node("a", git=git_mode, routing={"agent": "bot"}, completion_promise="DONE")],
                  agents={"bot": {"provider": "command", "command": [PY, str(root / "plant.py"), vector]}},
                  concurrency=1)
    (root / "plant.py").write_text(PLANT)
    git_repo(root)


def leaks(root) -> dict[str, str]:
    return {p.name: p.read_text(errors="replace") for p in root.glob("leak-*.txt")}


COMMIT_VECTORS = ("post-commit", "post-index-change", "prepare-commit-msg", "reference-transaction", "fsmonitor",
                  "filter", "filter-process", "diff-external", "gpg")
SNAPSHOT_VECTORS = ("post-index-change", "fsmonitor", "filter", "filter-process")


@pytest.mark.parametrize("vector, git_mode", [*((v, "commit") for v in COMMIT_VECTORS),
                                              *((v, None) for v in SNAPSHOT_VECTORS)])
def test_code_an_agent_plants_for_git_never_runs_in_harnessc_s_git(tmp_path, vector, git_mode):
    """With `git: commit` (snapshots, then the commit) and without (a loop task's snapshots):
    the payload never runs, and the task's work is committed as it is (no filter, unsigned)."""
    project(tmp_path, vector, git_mode)
    r = virtual.harnessc(tmp_path, "run", env=env(OPENAI_API_KEY=SECRET))
    assert r.returncode == 0, r.stdout + r.stderr
    found = leaks(tmp_path)
    assert not any(SECRET in text for text in found.values()), sorted(found)
    assert found == {}, sorted(found)  # none of the planted code ran at all
    if git_mode == "commit":
        assert git(tmp_path, "log", "-1", "--format=%s %G?") == "harnessc: a: Task a N\n"  # committed, unsigned
        assert git(tmp_path, "show", "HEAD:work.dat") == "the task's work\n"  # its blob is the file's bytes


def test_git_hooks_true_runs_the_user_s_hooks_without_harnessc_s_environment(tmp_path):
    """`git_hooks: true`: the repository's post-commit hook runs for harnessc's commit, with
    the child base environment (no key); fsmonitor and filters stay off."""
    write_project(tmp_path, [node("a", git="commit", routing={"agent": "bot"}, completion_promise="DONE")],
                  agents={"bot": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")]}},
                  concurrency=1)
    plan_path = tmp_path / ".harness" / "build" / "plan.json"
    plan = json.loads(plan_path.read_text())
    plan["git_hooks"] = True
    plan_path.write_text(json.dumps(plan))
    (tmp_path / "agent.py").write_text("open('out.txt', 'w').write('x')\nprint('<promise>DONE</promise>')\n")
    git_repo(tmp_path)
    hook = tmp_path / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\nenv > {tmp_path / 'hook-env.txt'}\n")
    hook.chmod(0o755)
    git(tmp_path, "config", "core.fsmonitor", f"env > {tmp_path / 'leak-fsmonitor.txt'}; false")
    r = virtual.harnessc(tmp_path, "run", env=env(OPENAI_API_KEY=SECRET, MY_OWN_VAR="kept-out"))
    assert r.returncode == 0, r.stdout + r.stderr
    seen = (tmp_path / "hook-env.txt").read_text()
    assert "PATH=" in seen and SECRET not in seen and "OPENAI_API_KEY" not in seen and "MY_OWN_VAR" not in seen
    assert leaks(tmp_path) == {}
    assert git(tmp_path, "log", "-1", "--format=%s") == "harnessc: a: Task a\n"


def test_a_driver_whose_name_holds_an_equals_sign_is_blanked_too(tmp_path):
    """`-c filter.x=y.clean=` would set `filter.x` instead: the blanks go by GIT_CONFIG_KEY_n."""
    from harnessc.gitcmd import Git

    git_repo(tmp_path)
    git(tmp_path, "config", "filter.x=y.clean", f"sh -c 'env > {tmp_path / 'leak-eq.txt'}; cat'")
    (tmp_path / ".gitattributes").write_text("*.txt filter=x=y\n")
    (tmp_path / "a.txt").write_text("a\n")
    Git(tmp_path).run("add", "-A")
    assert leaks(tmp_path) == {}
    assert "a.txt" in git(tmp_path, "diff", "--cached", "--name-only")


# An agent that was given the key writes it into the project, plain and base64-encoded.
WRITES_THE_KEY = """\
import base64, os, pathlib
key = os.environ["OPENAI_API_KEY"]
pathlib.Path(".env").write_text("OPENAI_API_KEY=" + key + "\\n")
pathlib.Path("config.b64").write_text("token: " + base64.b64encode(("x" + key).encode()).decode() + "\\n")
pathlib.Path("code.py").write_text("print('the work')\\n")
print("<promise>DONE</promise>")
"""


def test_an_autonomous_run_never_commits_a_file_holding_a_secret(tmp_path):
    """--autonomous commits every task; a file holding the key (plain or base64) stays out of
    the commit, in the working tree as it is, with an alert naming it; the rest is committed."""
    write_project(tmp_path, [node("a", routing={"agent": "bot"}, completion_promise="DONE")],
                  agents={"bot": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")],
                                  "pass_env": ["OPENAI_API_KEY"]}}, concurrency=1)
    (tmp_path / "agent.py").write_text(WRITES_THE_KEY)
    git_repo(tmp_path)
    r = virtual.harnessc(tmp_path, "run", "--autonomous", env=env(OPENAI_API_KEY=SECRET))
    assert r.returncode == 0, r.stdout + r.stderr
    assert git(tmp_path, "show", "--name-only", "--format=%s", "HEAD").split() == [
        "harnessc:", "a:", "Task", "a", "code.py"]
    assert SECRET not in git(tmp_path, "log", "-p", "--all")
    assert SECRET in (tmp_path / ".env").read_text()  # nothing the agent wrote is lost
    alerts = [json.loads(line) for line in (tmp_path / ".harness" / "alerts.log").read_text().splitlines()]
    withheld = [a for a in alerts if a["kind"] == "git_secret_withheld"]
    assert len(withheld) == 1 and withheld[0]["task"] == "a"
    assert ".env (it holds the value of a secret" in withheld[0]["message"]
    assert "config.b64 (it holds" in withheld[0]["message"]
    assert SECRET not in (tmp_path / ".harness" / "alerts.log").read_text()


def test_a_secret_split_across_two_read_chunks_is_found(tmp_path):
    from harnessc.runtime.worktree import gitops

    (tmp_path / "big.txt").write_bytes(b"x" * (gitops.SCAN_CHUNK - 5) + SECRET.encode() + b"\n")
    (tmp_path / "clean.txt").write_bytes(b"x" * (gitops.SCAN_CHUNK + 50))
    found = gitops.secret_files(tmp_path, ["big.txt", "clean.txt"], [SECRET])
    assert list(found) == ["big.txt"]


def test_drivers_configured_after_the_list_was_read_are_blanked_too(tmp_path):
    """The driver list is read again whenever a config file changes - the repository's, or
    one an include names that did not exist when the list was read."""
    from harnessc.gitcmd import Git

    git_repo(tmp_path)
    (tmp_path / ".gitattributes").write_text("*.txt filter=late\n")
    g = Git(tmp_path)
    (tmp_path / "a.txt").write_text("a\n")
    g.run("add", "-A")  # the list is read (no driver yet) and kept
    git(tmp_path, "config", "include.path", str(tmp_path / "later.cfg"))
    (tmp_path / "a.txt").write_text("b\n")
    g.run("add", "-A")
    payload = f"sh -c 'env > {tmp_path / 'leak-late.txt'}; cat'"
    (tmp_path / "later.cfg").write_text(f'[filter "late"]\n\tclean = "{payload}"\n')  # quoted: `;` starts a comment
    (tmp_path / "a.txt").write_text("c\n")
    g.run("add", "-A")
    assert leaks(tmp_path) == {}
    assert git(tmp_path, "show", ":a.txt") == "c\n"
    (tmp_path / "a.txt").write_text("d\n")
    git(tmp_path, "add", "-A")  # git itself, without the blanks, would run it: the payload is real
    assert "leak-late.txt" in leaks(tmp_path)
