"""Shell completion through click's protocol (`_HARNESSC_COMPLETE=bash_complete`): task ids,
selectors, agents, contracts, codes, answered in this process (tests/inproc.py); the console
script's shell scripts and the imports a completion costs through real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inproc import harnessc

ROADMAP = """# P

## Tasks

### Phase 1: Foundations

- [x] **setup-001**: Scaffold
  - tags: infra

- [ ] **auth-001**: Login
  - depends_on: setup-001
  - accept: true
  - tags: backend, auth

### Phase 2: Polish

- [ ] **auth-002**: Refresh tokens
  - after: auth-001
  - accept: true
  - max_iteration: 3
"""
HARNESS = "agents:\n  fast: {provider: simulate}\n  careful: {provider: simulate}\n"
CONTRACTS = "contracts:\n  lead_score: {extends: lead_qualification}\n"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "roadmap.md").write_text(ROADMAP)
    (tmp_path / "harness.yaml").write_text(HARNESS)
    (tmp_path / "contracts.yaml").write_text(CONTRACTS)
    return tmp_path


def complete(cwd: Path, line: str, shell: str = "bash") -> list[str]:
    """What the shell would offer for `line` (the word being completed is its last), read
    back from each shell's format in click.shell_completion."""
    words = line.split(" ")
    env = {**os.environ, "_HARNESSC_COMPLETE": f"{shell}_complete", "COMP_WORDS": line,
           "COMP_CWORD": words[-1] if shell == "fish" else str(len(words) - 1)}
    r = harnessc(cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    if shell == "zsh":  # type, value, help: three lines an item
        return [lines[i + 1] for i in range(0, len(lines) - 2, 3)]
    return [item.split(",", 1)[1].split("\t")[0] for item in lines if item]


def test_task_arguments_complete_task_ids(project):
    assert complete(project, "harnessc log ") == ["setup-001", "auth-001", "auth-002"]
    assert complete(project, "harnessc reset auth") == ["auth-001", "auth-002"]
    assert complete(project, "harnessc retry auth-00") == ["auth-001", "auth-002"]
    assert complete(project, "harnessc tell a") == ["auth-001", "auth-002"]


def test_selectors_complete_ids_tags_and_phases(project):
    assert complete(project, "harnessc run -s tag:") == ["tag:infra", "tag:backend", "tag:auth"]
    assert complete(project, "harnessc run --select phase:") == ["phase:phase-1-foundations", "phase:phase-2-polish"]
    assert complete(project, "harnessc ls --exclude +auth") == ["+auth-001", "+auth-002"]
    assert complete(project, "harnessc run -s auth-001") == ["auth-001", "auth-001+"]
    assert complete(project, "harnessc ls -s tag:backend,a") == ["tag:backend,auth-001", "tag:backend,auth-002"]
    assert complete(project, "harnessc run -s ") == ["setup-001", "auth-001", "auth-002", "tag:", "phase:"]


def test_agents_and_contracts(project):
    assert complete(project, "harnessc run --agent ") == ["fast", "careful", "rehearsal"]
    assert complete(project, "harnessc run --agents fast,") == ["fast,careful", "fast,rehearsal"]
    contracts = complete(project, "harnessc validate --contract ")
    assert contracts[0] == "lead_score" and "lead_qualification" in contracts and "code_change" in contracts
    from harnessc.diagnostics import CODES

    assert complete(project, "harnessc explain hc41") == sorted(c for c in CODES if c.startswith("HC41"))
    assert complete(project, "harnessc explain hc41")[:3] == ["HC410", "HC411", "HC412"]


def test_the_project_of_dash_c_and_broken_files(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("elsewhere")  # not inside the project
    assert complete(other, f"harnessc -C {project} log setup") == ["setup-001"]
    (project / "harness.yaml").write_text("agents: {fast: [\n")  # does not load: only the built-in agent
    assert complete(project, "harnessc run --agent ") == ["rehearsal"]
    # read as lint reads it: an alias is refused, not expanded
    (project / "harness.yaml").write_text("base: &b {provider: simulate}\nagents: {fast: *b, slow: *b}\n")
    assert complete(project, "harnessc run --agent ") == ["rehearsal"]
    assert complete(other, "harnessc log ") == []  # no project here


def test_zsh_and_fish_get_the_same_names(project):
    assert complete(project, "harnessc log auth", shell="zsh") == ["auth-001", "auth-002"]
    assert complete(project, "harnessc log auth", shell="fish") == ["auth-001", "auth-002"]


def test_completion_imports_no_sdk_and_no_pydantic(project):
    code = ("import sys\nfrom harnessc.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('anthropic', 'openai', 'pydantic') if m in sys.modules), file=sys.stderr)")
    env = {**os.environ, "_HARNESSC_COMPLETE": "bash_complete", "COMP_WORDS": "harnessc run -s ", "COMP_CWORD": "3"}
    r = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert "auth-001" in r.stdout and r.stderr.strip() == "[]", r.stderr


def test_the_shell_scripts_name_harnessc(project):
    script = Path(sys.executable).parent / "harnessc"
    if not script.exists():
        pytest.skip("no harnessc console script next to this python")
    for shell, needle in (("bash", "complete -o nosort -F _harnessc_completion harnessc"),
                          ("zsh", "#compdef harnessc"), ("fish", "complete --no-files --command harnessc")):
        r = subprocess.run([str(script)], env={**os.environ, "_HARNESSC_COMPLETE": f"{shell}_source"},
                           capture_output=True, text=True, timeout=60)
        assert needle in r.stdout, (shell, r.stdout[:300])
