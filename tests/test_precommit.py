"""The harnessc-lint pre-commit hook, run by the real `pre-commit` tool, set up as the
README says.

A temp git repo holds a copy of specs/demo and the README's `.pre-commit-config.yaml` snippet,
its `repo:` a clone of this checkout. The snippet's `rev:` must be a commit of the repository
(there are no tags to rely on); `pre-commit autoupdate --freeze` moves it to the clone's
newest commit; then `pre-commit run --all-files` passes on the demo and fails with the
diagnostic code when roadmap.md is broken. The hook's virtualenv pip-installs the clone's
committed tree once (tens of seconds); both runs share it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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
    return None


def _readme_snippet() -> str:
    """The `.pre-commit-config.yaml` the README gives."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text[text.index("Use it in pre-commit:"):].split("```yaml\n", 1)[1].split("```", 1)[0]


def _pre_commit(args: list[str], project: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", *args, "--color", "never"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900)


def test_the_readmes_snippet_installs_and_the_hook_passes_a_good_project_and_fails_a_broken_one(tmp_path):
    problem = _checkout_problem()
    if problem:
        pytest.skip(problem)
    env = _env(tmp_path)
    clone = tmp_path / "harnessc"
    _git(["clone", "-q", str(HOOK_REPO), str(clone)], tmp_path, env)
    snippet = _readme_snippet()
    rev = yaml.safe_load(snippet)["repos"][0]["rev"]
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=HOOK_REPO,
                             capture_output=True, text=True).stdout.strip()
    if shallow == "true":
        pytest.skip("a shallow clone may not hold the README's rev")
    has_hook = subprocess.run(["git", "cat-file", "-e", f"{rev}:.pre-commit-hooks.yaml"], cwd=clone)
    assert has_hook.returncode == 0, f"the README's rev {rev} is no commit of this repository with the hook"

    project = tmp_path / "project"
    shutil.copytree(DEMO, project, ignore=shutil.ignore_patterns(".harness"))
    (project / ".pre-commit-config.yaml").write_text(snippet.replace("<this repository>", str(clone)),
                                                     encoding="utf-8")
    _git(["init", "-q"], project, env)
    update = _pre_commit(["autoupdate", "--freeze"], project, env)
    assert update.returncode == 0, update.stdout + update.stderr
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    config = yaml.safe_load((project / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert config["repos"][0]["rev"] == head, update.stdout
    _git(["add", "."], project, env)
    _git(["commit", "-q", "-m", "good project"], project, env)

    good = _pre_commit(["run", "--all-files"], project, env)
    good_out = good.stdout + good.stderr
    assert good.returncode == 0, good_out
    assert "harnessc lint" in good_out and "Passed" in good_out, good_out

    roadmap = project / "roadmap.md"
    text = roadmap.read_text(encoding="utf-8")
    broken = text.replace("  - completion_promise: DATA_OK\n", "  - completion_promise: DATA_OK\n  - colour: blue\n", 1)
    assert broken != text, "specs/demo/roadmap.md changed: update the line this test breaks"
    roadmap.write_text(broken, encoding="utf-8")
    _git(["commit", "-q", "-am", "broken roadmap"], project, env)

    bad = _pre_commit(["run", "--all-files"], project, env)
    bad_out = bad.stdout + bad.stderr
    assert bad.returncode != 0, bad_out
    assert "HC103" in bad_out, bad_out
    assert "Failed" in bad_out, bad_out
    assert "Traceback" not in bad_out, bad_out
