"""Lint for isolated tasks (compiler/gitcheck.py): HC417 where `run` would refuse the
repository, HC418 for files a worktree will not have. Real git."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harnessc.compiler import lint_project

ROADMAP = """## Tasks

- [ ] **t1**: Summarise the notes
  - isolation: worktree
  - context: notes.md
  - accept: python3 check.py
"""


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args], cwd=root,
                   check=True, capture_output=True)


def codes(root: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in lint_project(root).diags.items:
        out.setdefault(d.code, []).append(d.message)
    return out


def project(tmp: Path, roadmap: str = ROADMAP) -> Path:
    root = tmp / "p"
    root.mkdir()
    (root / "roadmap.md").write_text(roadmap)
    (root / "notes.md").write_text("notes\n")
    (root / "check.py").write_text("print('ok')\n")
    return root


def test_untracked_and_modified_files_of_an_isolated_task_are_warned_about(tmp_path):
    root = project(tmp_path)
    git(root, "init", "-q")
    git(root, "add", "roadmap.md", "notes.md")
    git(root, "commit", "-qm", "init")
    (root / "notes.md").write_text("changed\n")
    found = codes(root)
    messages = found.get("HC418", [])
    assert any("context file 'notes.md'" in m and "modified" in m for m in messages), found
    assert any("accept command's file 'check.py'" in m and "untracked" in m for m in messages), found
    git(root, "add", "-A")
    git(root, "commit", "-qm", "all")
    assert "HC418" not in codes(root)


def test_a_linked_file_and_a_task_without_isolation_are_not_warned_about(tmp_path):
    root = project(tmp_path, ROADMAP.replace("  - isolation: worktree\n", ""))
    (root / "harness.yaml").write_text("worktrees: {link: [check.py]}\n")
    git(root, "init", "-q")
    git(root, "add", "roadmap.md", "harness.yaml")
    git(root, "commit", "-qm", "init")
    assert "HC418" not in codes(root)  # not isolated: its tree is yours
    (root / "roadmap.md").write_text(ROADMAP.replace("  - context: notes.md\n", ""))
    git(root, "add", "roadmap.md")
    git(root, "commit", "-qm", "isolated")
    assert "HC418" not in codes(root)  # check.py is linked into every worktree


def test_a_detached_head_is_a_lint_error_naming_the_fix(tmp_path):
    root = project(tmp_path)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    git(root, "checkout", "-q", "--detach")
    project_ = lint_project(root)
    errors = [d for d in project_.diags.items if d.code == "HC417"]
    assert errors and "HEAD is detached" in errors[0].message and "git switch -c" in errors[0].hint
    assert errors[0].span.line == 4  # the isolation property


def test_lint_of_a_project_without_isolation_starts_no_git_and_imports_no_gitpython(tmp_path):
    root = project(tmp_path, ROADMAP.replace("  - isolation: worktree\n", ""))
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "harnessc", "-C", str(root), "lint"],
                         capture_output=True, text=True)
    assert "harnessc.gitcmd" not in out.stderr and " git\n" not in out.stderr
    (tmp_path / "iso").mkdir()
    isolated = project(tmp_path / "iso", ROADMAP)
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "harnessc", "-C", str(isolated), "lint"],
                         capture_output=True, text=True)
    assert "HC417" in out.stdout
    assert not [line for line in out.stderr.splitlines() if line.rstrip().endswith(("| git", "| gitdb"))]
