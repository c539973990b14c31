"""The harnessc-lint pre-commit hook, run by the real `pre-commit` tool.

`pre-commit try-repo <this checkout> harnessc-lint --all-files` inside a temp git repo
holding a project: exit 0 on a copy of specs/demo, non-zero with the diagnostic code in the
output when roadmap.md is broken. try-repo builds the hook's virtualenv and pip-installs this
checkout (its committed state plus uncommitted changes to tracked files), so each run takes
tens of seconds; the test makes exactly two. try-repo always uses a fresh store of its own,
so the two runs cannot share one hook environment; pip's cache makes the second one quicker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pre_commit", reason="pre-commit is not installed")

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "specs" / "demo"
# the repository whose hook is tried: this checkout, or another clone (HARNESSC_HOOK_REPO)
HOOK_REPO = Path(os.environ.get("HARNESSC_HOOK_REPO") or REPO)

IDENTITY = {
    "GIT_AUTHOR_NAME": "harnessc test",
    "GIT_AUTHOR_EMAIL": "test@harnessc.invalid",
    "GIT_COMMITTER_NAME": "harnessc test",
    "GIT_COMMITTER_EMAIL": "test@harnessc.invalid",
}


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(IDENTITY)
    env["PRE_COMMIT_HOME"] = str(tmp / "pre-commit-home")
    env["PRE_COMMIT_COLOR"] = "never"
    env["NO_COLOR"] = "1"
    return env


def _git(args: list[str], cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
                   cwd=cwd, env=env, check=True, capture_output=True, text=True)


def _try_repo(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(HOOK_REPO), "harnessc-lint", "--all-files",
         "--color", "never"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900,
    )


def _checkout_problem() -> str | None:
    """Why this checkout cannot be tried as a pre-commit repo, or None."""
    if shutil.which("git") is None:
        return "git is not installed"
    if not (HOOK_REPO / ".pre-commit-hooks.yaml").is_file():
        return ".pre-commit-hooks.yaml is missing"
    probe = subprocess.run(["git", "ls-files", "--error-unmatch", ".pre-commit-hooks.yaml"],
                           cwd=HOOK_REPO, capture_output=True, text=True)
    if probe.returncode != 0:
        return f"{HOOK_REPO} is not a git repo with .pre-commit-hooks.yaml committed"
    # try-repo installs the committed tree plus changes to tracked files; package files that
    # exist only untracked in this working tree would be missing from the hook's install
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "--", "harnessc"],
                               cwd=HOOK_REPO, capture_output=True, text=True).stdout.split()
    if untracked:
        return ("untracked package files in this working tree would be left out of try-repo's install: "
                + ", ".join(untracked[:5]))
    return None


def test_precommit_hook_on_good_and_broken_project(tmp_path):
    problem = _checkout_problem()
    if problem:
        pytest.skip(problem)
    env = _env(tmp_path)
    project = tmp_path / "project"
    shutil.copytree(DEMO, project, ignore=shutil.ignore_patterns(".harness"))
    _git(["init", "-q"], project, env)
    _git(["add", "."], project, env)
    _git(["commit", "-q", "-m", "good project"], project, env)

    good = _try_repo(project, env)
    good_out = good.stdout + good.stderr
    assert good.returncode == 0, good_out
    assert "harnessc lint" in good_out and "Passed" in good_out, good_out

    roadmap = project / "roadmap.md"
    text = roadmap.read_text(encoding="utf-8")
    broken = text.replace("  - completion_promise: DATA_OK\n", "  - completion_promise: DATA_OK\n  - colour: blue\n", 1)
    assert broken != text, "specs/demo/roadmap.md changed: update the line this test breaks"
    roadmap.write_text(broken, encoding="utf-8")
    _git(["commit", "-q", "-am", "broken roadmap"], project, env)

    bad = _try_repo(project, env)
    bad_out = bad.stdout + bad.stderr
    assert bad.returncode != 0, bad_out
    assert "HC103" in bad_out, bad_out
    assert "Failed" in bad_out, bad_out
    assert "Traceback" not in bad_out, bad_out
