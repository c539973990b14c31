"""`harnessc doctor` through the CLI, run in this process on the real clock (tests/inproc.py:
its checks time real commands out): a verdict per agent from the pre-flight checks and the
slower ones (a CLI's --version, base_url reachable, replay cassettes, git identity), exit 0
when all is well, 1 when something is wrong, 2 outside a project."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import inproc
from conftest import FIXTURES, check_golden

from .helpers import PY, env, git, node, write_project

SIM = {"provider": "simulate"}


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def doctor_env(**extra) -> dict:
    """Our environment with a PATH that has python and the basic tools, and no CLI agent."""
    return env(PATH=os.pathsep.join([os.path.dirname(PY), "/usr/bin", "/bin"]), **extra)


def test_doctor_table_gives_a_verdict_per_agent_and_exits_1(tmp_path):
    executable(tmp_path / "bin" / "agent.sh", "#!/bin/sh\necho '<promise>DONE</promise>'\n")
    executable(tmp_path / "bin" / "codex", "#!/bin/sh\necho 'codex-cli 0.99.0'\n")
    executable(tmp_path / "bin" / "gemini", "#!/bin/sh\necho 'gemini: cannot start' >&2\nexit 1\n")
    (tmp_path / ".harness" / "cassettes").mkdir(parents=True)
    (tmp_path / ".harness" / "cassettes" / "t1.jsonl").write_text("")
    write_project(tmp_path, [
        node("t1", routing={"agent": "tape", "chain": ["sim"]}),
        node("t2", routing={"agent": "tape"}),
        node("t3", routing={"agent": "gone"}),
        node("t4", routing={"agent": "cx"}),
        node("t5", routing={"agent": "cmd"}),
        node("t6", routing={"agent": "broken"}),
    ], agents={"sim": SIM,
               "cmd": {"provider": "command", "command": ["./bin/agent.sh"]},
               "gone": {"provider": "command", "command": ["no-such-program-hc-doctor", "{prompt}"]},
               "cx": {"provider": "codex", "command": ["./bin/codex"]},
               "broken": {"provider": "gemini-cli", "command": ["./bin/gemini"]},
               "tape": {"provider": "replay"}})
    r = inproc.harnessc("-C", str(tmp_path), "doctor", env=doctor_env())
    assert r.returncode == 1, r.stdout + r.stderr
    check_golden(FIXTURES / "cli" / "doctor-problems.txt", r.stdout)
    verdicts = {line.split()[0]: line.split()[2] for line in r.stdout.splitlines()[2:8]}
    assert verdicts == {"sim": "ok", "cmd": "ok", "gone": "unusable", "cx": "ok", "broken": "unusable",
                        "tape": "unusable"}
    assert "codex-cli 0.99.0" in r.stdout and "gemini: cannot start" in r.stdout
    # what `run` would say matches the doctor's "run would refuse" lines
    run = inproc.harnessc("-C", str(tmp_path), "run", env=doctor_env())
    assert run.returncode == 2
    assert [ln.split("(the only agent of ")[1] for ln in run.stderr.splitlines() if "cannot be used" in ln] == [
        "task 't2')", "task 't3')"]


def test_doctor_all_well_exits_0_and_json_says_the_same(tmp_path):
    executable(tmp_path / "bin" / "codex", "#!/bin/sh\necho 'codex-cli 0.99.0'\n")
    write_project(tmp_path, [node("a", routing={"agent": "cx", "chain": ["sim"]})],
                  agents={"sim": SIM, "cx": {"provider": "codex", "command": ["./bin/codex"]}})
    r = inproc.harnessc("-C", str(tmp_path), "doctor", env=doctor_env())
    assert r.returncode == 0, r.stdout + r.stderr
    check_golden(FIXTURES / "cli" / "doctor-ok.txt", r.stdout)
    r = inproc.harnessc("-C", str(tmp_path), "doctor", "--output", "json", env=doctor_env())
    assert r.returncode == 0
    data = json.loads(r.stdout)
    assert data["ok"] is True and data["refused_tasks"] == {} and data["git"] == []
    assert [(a["agent"], a["verdict"], [c["check"] for c in a["checks"]]) for a in data["agents"]] == [
        ("sim", "ok", []), ("cx", "ok", ["executable", "version"])]


def test_base_url_reachable_or_not(tmp_path):
    """A TCP connect to base_url's host and port: a closed port is unreachable, a listening
    socket is reachable (nothing is sent to it)."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(8)
    open_port = listening.getsockname()[1]
    local = {"provider": "openai", "model": "qwen3:8b", "api_key_env": None}
    try:
        write_project(tmp_path, [node("a", routing={"agent": "down", "chain": ["up"]})],
                      agents={"down": {**local, "base_url": f"http://127.0.0.1:{closed_port}/v1"},
                              "up": {**local, "base_url": f"http://127.0.0.1:{open_port}/v1"}})
        r = inproc.harnessc("-C", str(tmp_path), "doctor", "--output", "json", env=doctor_env())
    finally:
        listening.close()
    assert r.returncode == 1, r.stdout + r.stderr
    data = {a["agent"]: a for a in json.loads(r.stdout)["agents"]}
    base = {name: [c for c in a["checks"] if c["check"] == "base_url"] for name, a in data.items()}
    assert base == {
        "down": [{"check": "base_url", "ok": False, "detail": f"127.0.0.1:{closed_port} is unreachable (connection refused)"}],
        "up": [{"check": "base_url", "ok": True, "detail": f"127.0.0.1:{open_port} is reachable"}]}
    assert (data["down"]["verdict"], data["up"]["verdict"]) == ("unusable", "ok")


def test_git_identity_is_checked_when_a_task_commits(tmp_path):
    write_project(tmp_path, [node("a", git="commit")], agents={"rehearsal": SIM})
    home = tmp_path / "home"
    home.mkdir()
    no_identity = doctor_env(HOME=str(home), GIT_CONFIG_NOSYSTEM="1")
    for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        no_identity.pop(k, None)
    r = inproc.harnessc("-C", str(tmp_path), "doctor", env=no_identity)
    assert r.returncode == 1
    assert "git: the project is not a git repository (a `git: commit` task needs one: run `git init`)" in r.stdout

    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.useConfigOnly", "true")  # no guessing from the host name
    r = inproc.harnessc("-C", str(tmp_path), "doctor", env=no_identity)
    assert r.returncode == 1
    assert ("git: git does not know whom to commit as: set `git config user.name` and `git config user.email`"
            in r.stdout.splitlines())

    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "T")
    r = inproc.harnessc("-C", str(tmp_path), "doctor", env=no_identity)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "git: commits as T <t@example.com>" in r.stdout.splitlines()


def test_no_git_check_when_no_task_commits(tmp_path):
    write_project(tmp_path, [node("a")], agents={"rehearsal": SIM})
    r = inproc.harnessc("-C", str(tmp_path), "doctor", env=doctor_env())
    assert r.returncode == 0 and "git:" not in r.stdout


def test_doctor_outside_a_project_or_with_spec_errors(tmp_path):
    r = inproc.harnessc("-C", str(tmp_path / "nowhere"), "doctor")
    assert r.returncode == 2 and "does not exist" in r.stderr
    (tmp_path / "roadmap.md").write_text("# P\n\n## Tasks\n\n- [ ] **a**: A\n")
    (tmp_path / "harness.yaml").write_text("agents:\n  x: {provider: nope}\n")
    r = inproc.harnessc("-C", str(tmp_path), "doctor")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "harness.yaml:2" in r.stderr and "Traceback" not in r.stderr
