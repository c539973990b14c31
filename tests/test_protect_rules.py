"""What a task's agent may not change (protectrules.py) and how plan.json says it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harnessc.protectrules import command_paths, glob_problem, matches
from inproc import harnessc

REPO = Path(__file__).resolve().parents[1]


def test_globs_match_paths_and_a_directory_stands_for_what_is_below_it():
    assert matches("tests/", "tests/unit/test_a.py") and matches("tests", "tests/test_a.py")
    assert matches("docs/**", "docs/a/b.md") and matches("**/*.yml", ".github/workflows/ci.yml")
    assert matches("*.py", "setup.py") and not matches("*.py", "src/a.py")
    assert matches(".github/", ".github/workflows/ci.yml") and not matches(".github/", ".githubx")
    assert not matches("tests/test_a.py", "tests/test_ab.py")


def test_a_glob_outside_the_project_is_refused():
    assert glob_problem("../x") == "leaves the project" and glob_problem("a/../../x") == "leaves the project"
    assert glob_problem("/etc") == "is absolute" and glob_problem("~/x") == "is absolute"
    assert glob_problem("a\0b") == "has a NUL byte" and glob_problem(" ") == "is empty"
    assert glob_problem("tests/**") is None


def test_the_files_and_directories_a_command_names(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    (tmp_path / "check.py").write_text("")
    argv = ["python", "check.py", "-q", "tests/test_a.py::test_x", "tests", ".", "missing.py", "--junitxml=x.xml",
            "/etc/passwd", "../outside", ".harness/build"]
    assert command_paths(argv, tmp_path) == ["check.py", "tests/test_a.py", "tests/"]


def test_plan_json_lists_each_tasks_protected_files_with_the_reason(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_auth.py").write_text("")
    (tmp_path / "bench.py").write_text("")
    (tmp_path / "roadmap.md").write_text(
        "## Tasks\n\n- [ ] **t1**: Fix login\n  - accept: pytest -q tests/test_auth.py\n  - accept: ruff check tests\n"
        "  - score: python bench.py\n  - protect: docs/**\n  - allow_edit: tests/test_new.py\n  - write_scope: src/**, tests/\n")
    (tmp_path / "harness.yaml").write_text("templates: prompts/\ndefaults:\n  protect: [migrations/**]\n"
                                          "  allow_edit: [.ci/notes.md]\n")
    (tmp_path / "prompts").mkdir()
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "s"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    r = harnessc("-C", str(tmp_path), "build", env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads((tmp_path / ".harness" / "build" / "plan.json").read_text())
    assert [(e["path"], e["why"]) for e in plan["protect"]] == [
        ("roadmap.md", "a spec file"), ("contracts.yaml", "a spec file"), ("harness.yaml", "a spec file"),
        ("prompts/", "the prompt templates"), (".harness/", "harnessc's own directory"),
        (".github/", "CI configuration"), (".ci/", "CI configuration"), (".pre-commit-config.yaml", "CI configuration"),
        ("migrations/**", "defaults.protect in harness.yaml")]
    node = plan["nodes"][0]
    assert node["protect"] == [
        {"path": "docs/**", "why": "protect: in roadmap.md", "new": True},
        {"path": "tests/test_auth.py", "why": "named in the accept command", "new": True},
        {"path": "tests/", "why": "named in the accept command", "new": False},
        {"path": "bench.py", "why": "named in the score command", "new": True}]
    assert node["allow_edit"] == [".ci/notes.md", "tests/test_new.py"]
    assert node["write_scope"] == ["src/**", "tests/"]
