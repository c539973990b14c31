"""`sandbox: true`: a command agent under real bubblewrap (runtime/children/sandbox.py).

A hostile agent tries to write outside its checkout - the user's files by absolute path,
$HOME, the shared .git/hooks and .git/config, the user's branch - and fails, while its
checkout and its private TMPDIR take its writes and the task still verifies and lands.
Skipped, with the reason, where bubblewrap is missing or cannot make its namespaces; the
refusal where it is unavailable is tested everywhere (a PATH without bwrap).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from harnessc import providers
from harnessc.runtime.agents.base import AgentError, Request
from harnessc.runtime.agents.command import CommandAgent
from harnessc.runtime.children import sandbox

from .helpers import PY, env, git, git_repo, harnessc, node, write_project

WHY_NOT = sandbox.problem()
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=f"no sandbox here: {WHY_NOT}")

# Tries every write named in the config it is given; reports what each did in
# out/report.json (in its checkout: lands with the task) and prints the promise.
HOSTILE = """\
import json, os, pathlib, subprocess, sys
cfg = json.loads(pathlib.Path(sys.argv[1]).read_text())
report = {}
def attempt(name, fn):
    try:
        fn()
        report[name] = "written"
    except OSError as e:
        report[name] = "refused: " + (e.strerror or str(e))
def append(path, text):
    with open(path, "a") as f:
        f.write(text)
attempt("users_file", lambda: append(cfg["users_file"], "agent was here\\n"))
attempt("home", lambda: append(os.path.join(os.environ["HOME"], "agent-was-here"), "x"))
attempt("hook", lambda: append(os.path.join(cfg["git"], "hooks", "post-commit"), "#!/bin/sh\\ntrue\\n"))
attempt("git_config", lambda: append(os.path.join(cfg["git"], "config"), "# agent was here\\n"))
attempt("harness_state", lambda: append(cfg["state"], "x"))
moved = subprocess.run(["git", "update-ref", cfg["branch"], "HEAD"], capture_output=True, text=True)
report["move_branch"] = "written" if moved.returncode == 0 else "refused: " + moved.stderr.strip()[-200:]
tmp = os.environ.get("TMPDIR", "/tmp")
attempt("tmpdir", lambda: append(os.path.join(tmp, "scratch"), "x"))
report["tmpdir_is_private"] = tmp not in ("/tmp", "/var/tmp") and pathlib.Path(tmp).name.startswith("harnessc-sandbox-")
pathlib.Path("out").mkdir(exist_ok=True)
attempt("checkout", lambda: pathlib.Path("out", "made.txt").write_text("made\\n"))
pathlib.Path("out", "report.json").write_text(json.dumps(report, indent=1))
print("done <promise>DONE</promise>")
"""


def hostile_project(root: Path, isolation: str | None = "worktree", sandboxed: bool = True) -> dict:
    home = root.parent / (root.name + "-home")
    home.mkdir()
    bot = {"provider": "command", "command": [PY, str(root / "agent.py"), str(root / "agent.json")]}
    if sandboxed:
        bot["sandbox"] = True
    settings = {"routing": {"agent": "bot"}, "completion_promise": "DONE",
                "accept": [{"id": "made", "argv": ["test", "-f", "out/made.txt"], "timeout": 60}]}
    if isolation:
        settings["isolation"] = isolation
    write_project(root, [node("a", **settings)], agents={"bot": bot}, concurrency=1)
    (root / "agent.py").write_text(HOSTILE)
    (root / "notes.txt").write_text("mine\n")
    git_repo(root)
    (root / "agent.json").write_text(json.dumps({
        "users_file": str(root / "notes.txt"), "git": str(root / ".git"),
        "state": str(root / ".harness" / "build" / "plan.json"),
        "branch": git(root, "symbolic-ref", "HEAD").strip()}))
    return env(HOME=str(home))


def landed_report(root: Path) -> dict:
    branch = git(root, "for-each-ref", "--format=%(refname)", "refs/heads/harnessc/run/").split()[0]
    return json.loads(git(root, "show", f"{branch}:out/report.json"))


@needs_bwrap
def test_a_sandboxed_agent_writes_its_checkout_and_tmpdir_and_nothing_of_the_users(tmp_path):
    root = tmp_path / "p"
    e = hostile_project(root)
    start = git(root, "rev-parse", "HEAD").strip()
    config = (root / ".git" / "config").read_text()
    res = harnessc(root, "run", "--no-build", env=e)
    assert res.returncode == 0, res.stdout + res.stderr
    report = landed_report(root)
    for name in ("users_file", "home", "hook", "git_config", "harness_state", "move_branch"):
        assert report[name].startswith("refused"), (name, report)
    assert "Read-only file system" in report["users_file"]
    assert report["checkout"] == report["tmpdir"] == "written" and report["tmpdir_is_private"] is True
    # nothing of the user's changed; the verified change landed and the branch followed it
    assert (root / "notes.txt").read_text() == "mine\n"
    assert not list((tmp_path / "p-home").iterdir())
    assert not (root / ".git" / "hooks" / "post-commit").exists()
    assert (root / ".git" / "config").read_text() == config
    assert git(root, "log", "--format=%s", "-1").startswith("harnessc: a:")
    assert git(root, "rev-parse", "HEAD~1").strip() == start
    assert (root / "out" / "made.txt").read_text() == "made\n"
    # its private TMPDIR went with the call
    assert not [p for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("harnessc-sandbox-*")
                if p.stat().st_mtime > root.stat().st_mtime]


def test_without_the_sandbox_the_same_agent_reaches_the_users_files(tmp_path):
    """What the sandbox stops: the same agent, `sandbox` unset, writes the user's file by its
    absolute path, $HOME and the shared .git (so the test above fails without it)."""
    root = tmp_path / "p"
    e = hostile_project(root, sandboxed=False)
    res = harnessc(root, "run", "--no-build", env=e)
    report = landed_report(root) if res.returncode == 0 else {}
    assert res.returncode == 0, res.stdout + res.stderr
    assert report["users_file"] == report["home"] == report["hook"] == report["git_config"] == "written"
    assert (root / "notes.txt").read_text() == "mine\nagent was here\n"


@needs_bwrap
def test_in_a_shared_tree_the_project_is_writable_and_its_git_directory_and_state_are_not(tmp_path):
    root = tmp_path / "p"
    e = hostile_project(root, isolation=None)
    res = harnessc(root, "run", "--no-build", env=e)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((root / "out" / "report.json").read_text())
    assert report["checkout"] == report["tmpdir"] == "written"
    assert report["users_file"] == "written"  # the project is its checkout here
    for name in ("home", "hook", "git_config", "harness_state", "move_branch"):
        assert report[name].startswith("refused"), (name, report)


def _worktree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    git_repo(root)
    work = root / ".harness" / "worktrees" / "r1" / "1-1"
    work.parent.mkdir(parents=True)
    git(root, "worktree", "add", "-q", "--detach", str(work), "HEAD")
    return root, work


def _call(agent: CommandAgent, work: Path | None, **kw) -> object:
    return asyncio.run(agent.call(Request(task_id="t", prompt="go", workdir=work, **kw)))


def _agent(root: Path, argv: list[str], **settings) -> CommandAgent:
    config = providers.agent_config("bot", {"provider": "command", "command": argv, "sandbox": True, **settings})
    return CommandAgent("bot", config, root)


@needs_bwrap
def test_a_commit_inside_the_attempts_worktree_works_and_the_users_branch_does_not_move(tmp_path):
    root, work = _worktree(tmp_path)
    branch = git(root, "symbolic-ref", "HEAD").strip()
    script = f"echo new > b.txt && git add b.txt && git commit -qm agent && git log --format=%s -1; git update-ref {branch} HEAD"
    agent = _agent(root, ["sh", "-c", script])
    with pytest.raises(AgentError) as e:  # the update-ref is refused, so the script exits 128
        _call(agent, work)
    assert "Read-only file system" in str(e.value)
    assert git(work, "log", "--format=%s", "-1").strip() == "agent"
    assert git(root, "log", "--format=%s", branch).strip() == "start"


@needs_bwrap
def test_a_timeout_kills_everything_the_sandboxed_agent_started(tmp_path):
    root, work = _worktree(tmp_path)
    tag = str(900000 + os.getpid() % 99999)
    # a child in its own session too: the marker and the PID namespace's end reach it
    agent = _agent(root, ["sh", "-c", f"setsid sleep {tag} & sleep {tag}"], timeout=1)
    with pytest.raises(AgentError) as e:
        _call(agent, work)
    assert "timed out" in str(e.value) and "'sh'" in str(e.value)
    left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).endswith(f"sleep\0{tag}\0")]
    assert left == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text("utf-8", "replace")
    except OSError:
        return ""


def _no_bwrap_path(tmp_path: Path) -> str:
    """A PATH with git and sh and no bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "sh", "test"):
        found = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_where_no_sandbox_can_start_the_run_refuses_the_agent_before_any_call(tmp_path):
    root = tmp_path / "p"
    e = hostile_project(root, isolation=None)
    e["PATH"] = _no_bwrap_path(tmp_path)
    res = harnessc(root, "run", "--no-build", env=e)
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "agent 'bot' cannot be used: it asks for the sandbox" in out and "no `bwrap` is on PATH" in out
    assert "install bubblewrap" in out and "Traceback" not in out
    assert not (root / "out").exists()  # never run without it
    assert (root / "notes.txt").read_text() == "mine\n"


def test_the_agent_itself_refuses_to_run_unconfined(tmp_path, monkeypatch):
    """Where the pre-flight did not look (a remote worker): the call fails before starting."""
    monkeypatch.setenv("PATH", _no_bwrap_path(tmp_path))
    marker = tmp_path / "ran"
    agent = _agent(tmp_path, ["sh", "-c", f"touch {marker}"])
    with pytest.raises(AgentError) as e:
        _call(agent, None)
    assert e.value.kind == "invalid_request" and "install bubblewrap" in str(e.value)
    assert not marker.exists()


def test_doctor_says_whether_the_sandbox_is_available(tmp_path):
    root = tmp_path / "p"
    e = hostile_project(root, isolation=None)
    here = json.loads(harnessc(root, "doctor", "--output", "json", env=e).stdout)
    assert here["sandbox"]["ok"] is (WHY_NOT is None)
    e["PATH"] = _no_bwrap_path(tmp_path)
    missing = harnessc(root, "doctor", env=e)
    assert "no `bwrap` is on PATH" in missing.stdout and "install bubblewrap" in missing.stdout
    assert missing.returncode != 0  # an agent that asks for it cannot be used
    assert "sandbox: not available" in missing.stdout
