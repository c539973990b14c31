"""Lint finds what would fail every attempt before an agent is called: a command agent's
script an isolated task's worktree will not have (HC456), an accept or score program that
is not on PATH (HC455). Real git, real files."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harnessc.compiler import lint_project

ROADMAP = """## Tasks

- [ ] **t1**: Add the endpoint
  - isolation: worktree
  - agent: bot
  - accept: {accept}
"""
CONFIG = "agents:\n  bot: {provider: command, command: [python3, scripts/agent.py, '{prompt}']}\n"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args], cwd=root,
                   check=True, capture_output=True)


def codes(root: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in lint_project(root).diags.items:
        out.setdefault(d.code, []).append(d.message + " | " + (d.hint or ""))
    return out


def project(tmp: Path, accept: str = "python3 -c pass", roadmap: str = ROADMAP) -> Path:
    root = tmp / "p"
    (root / "scripts").mkdir(parents=True)
    (root / "roadmap.md").write_text(roadmap.format(accept=accept))
    (root / "harness.yaml").write_text(CONFIG)
    (root / "scripts" / "agent.py").write_text("print('<promise>DONE</promise>')\n")
    git(root, "init", "-q")
    git(root, "add", "roadmap.md", "harness.yaml")
    git(root, "commit", "-qm", "init")
    return root


def test_an_untracked_command_agent_script_of_an_isolated_task_is_warned_about_until_committed(tmp_path):
    root = project(tmp_path)
    found = codes(root).get("HC456", [])
    assert len(found) == 1 and "command agent 'bot' runs 'scripts/agent.py', which is untracked" in found[0]
    assert "worktrees: {link: [scripts/agent.py]}" in found[0]
    git(root, "add", "scripts/agent.py")
    git(root, "commit", "-qm", "the agent")
    assert "HC456" not in codes(root)


def test_a_linked_agent_script_or_no_isolated_task_is_not_warned_about(tmp_path):
    root = project(tmp_path)
    (root / "harness.yaml").write_text(CONFIG + "worktrees: {link: [scripts/agent.py]}\n")
    assert "HC456" not in codes(root)
    other = project(tmp_path / "o", roadmap=ROADMAP.replace("  - isolation: worktree\n", ""))
    assert "HC456" not in codes(other)


def test_an_accept_program_not_on_path_is_warned_about_with_the_likely_one(tmp_path):
    root = project(tmp_path, accept="pytset -q")
    found = codes(root).get("HC455", [])
    assert len(found) == 1 and "runs 'pytset', which is not on PATH" in found[0], found
    ok = project(tmp_path / "ok", accept="python3 -c pass")
    assert "HC455" not in codes(ok)
