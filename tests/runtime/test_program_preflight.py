"""Before any agent call: `run` refuses a task whose accept program is not on PATH, and
`doctor` says so, and says when a command agent's script is untracked where isolated tasks
run it (runtime/preflight.py missing_programs, runtime/doctor.py). Real CLI, real git."""

from __future__ import annotations

import inproc

from . import virtual
from .helpers import PY, git, git_repo, node, write_project

AGENT = "import pathlib, sys\npathlib.Path(sys.argv[1]).write_text('called')\nprint('<promise>DONE</promise>')\n"


def project(root, calls, accept_program="pytset", isolation=None):
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE",
           "accept": [{"id": "accept-1", "argv": [accept_program, "-q"], "timeout": 60}]}
    if isolation:
        bot["isolation"] = isolation
    write_project(root, [node("a", **bot)],
                  agents={"bot": {"provider": "command", "command": [PY, "agent.py", str(calls)]}})
    (root / "agent.py").write_text(AGENT)
    git_repo(root, commit=False)
    (root / ".gitignore").write_text(".harness/\n")
    git(root, "add", "roadmap.md", ".gitignore")
    git(root, "commit", "-qm", "start")  # agent.py left untracked


def test_run_refuses_a_task_whose_accept_program_is_not_on_path_before_calling_the_agent(tmp_path):
    root, calls = tmp_path / "p", tmp_path / "calls"
    project(root, calls)
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "task 'a': accept command `pytset -q` runs 'pytset', which is not on PATH" in r.stderr
    assert not calls.exists()
    d = inproc.harnessc("-C", str(root), "doctor", cwd=root)
    assert d.returncode == 1 and "run would refuse: task 'a': accept command `pytset -q` runs 'pytset'" in d.stdout


def test_doctor_says_an_isolated_tasks_command_agent_script_is_untracked(tmp_path):
    root, calls = tmp_path / "p", tmp_path / "calls"
    project(root, calls, accept_program="true", isolation="worktree")
    d = inproc.harnessc("-C", str(root), "doctor", cwd=root)
    assert d.returncode == 1, d.stdout + d.stderr
    assert "worktree: agent bot runs 'agent.py', which is untracked" in d.stdout
    assert "list it under harness.yaml `worktrees: link`" in d.stdout
    git(root, "add", "agent.py")
    git(root, "commit", "-qm", "the agent")
    d = inproc.harnessc("-C", str(root), "doctor", cwd=root)
    assert d.returncode == 0 and "worktree:" not in d.stdout, d.stdout
