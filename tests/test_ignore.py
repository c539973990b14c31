"""Ignoring warnings: `lint --ignore CODE` and a task's `<!-- harnessc: ignore[CODE] -->` comment."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harnessc.compiler import lint_project
from harnessc.compiler.roadmap import format_roadmap, parse_roadmap
from harnessc.diagnostics import Diagnostics
from inproc import harnessc as in_process

ROADMAP = """# P

## Tasks

- [ ] **quiet**: Write the release notes <!-- harnessc: ignore[HC410] -->

- [ ] **loud**: Write the changelog

- [ ] **hashed**: Review the docs
  - accept: true
  # harnessc: ignore[HC406]
  - context: nothing/*.md

  Goal: read what there is.

- [ ] **html**: Review the API
  - accept: true
  <!-- harnessc: ignore[hc406, HC412] -->
  - context: missing.md
  - recovery: rephrase, fail
"""


def _codes(root: Path, **kw) -> list[tuple[str, int]]:
    return sorted((d.code, d.span.line) for d in lint_project(root, **kw).diags.items)


def _project(tmp_path: Path, text: str = ROADMAP) -> Path:
    (tmp_path / "roadmap.md").write_text(text, encoding="utf-8")
    return tmp_path


def test_a_tasks_comment_ignores_its_own_warnings_only(tmp_path):
    assert _codes(_project(tmp_path)) == [("HC410", 7)]  # loud's; quiet, hashed and html ignore theirs


def test_comments_are_not_part_of_the_title_or_goal_and_properties_go_on(tmp_path):
    roadmap = parse_roadmap(ROADMAP, "roadmap.md", Diagnostics())
    tasks = {t.id: t for t in roadmap.tasks}
    assert tasks["quiet"].title == "Write the release notes"
    assert tasks["hashed"].context == ("nothing/*.md",) and tasks["hashed"].goal == "Goal: read what there is."
    assert tasks["html"].context == ("missing.md",) and tasks["html"].recovery == ("rephrase", "fail")
    assert roadmap.ignores == {"quiet": ("HC410",), "hashed": ("HC406",), "html": ("HC406", "HC412")}
    again = parse_roadmap(format_roadmap(roadmap), "roadmap.md", Diagnostics())
    assert again.ignores == roadmap.ignores and [t.title for t in again.tasks] == [t.title for t in roadmap.tasks]


def test_without_the_comments_every_warning_shows(tmp_path):
    bare = ROADMAP.replace(" <!-- harnessc: ignore[HC410] -->", "")
    bare = "\n".join(line for line in bare.splitlines() if "harnessc:" not in line) + "\n"
    codes = {c for c, _ in _codes(_project(tmp_path, bare))}
    assert codes == {"HC410", "HC406", "HC412"}


def test_ignore_option_drops_warnings_of_a_code_everywhere(tmp_path):
    assert _codes(_project(tmp_path), ignore=["HC410"]) == []


def test_unknown_code_in_a_comment_is_a_warning(tmp_path):
    text = "## Tasks\n\n- [ ] **t**: T\n  - accept: true\n  <!-- harnessc: ignore[HC4100] -->\n"
    items = lint_project(_project(tmp_path, text)).diags.items
    assert [(d.code, d.severity, d.span.line, d.span.col, d.hint) for d in items] == [
        ("HC102", "warning", 5, 25, "did you mean 'HC410'?")]


def test_errors_are_never_ignored(tmp_path):
    text = "## Tasks\n\n- [ ] **t**: T <!-- harnessc: ignore[HC103] -->\n  - accept: true\n  - max_iteration: 3\n"
    assert _codes(_project(tmp_path, text), ignore=["HC103"]) == [("HC103", 5)]


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`harnessc -C root ARGS`, in this process (tests/inproc.py)."""
    return in_process("-C", str(root), *args)


def test_cli_ignore_is_repeatable_and_takes_comma_lists(tmp_path):
    text = ("## Tasks\n\n- [ ] **a**: A\n  - context: none.md\n"
            "- [ ] **b**: B\n  - accept: true\n  - recovery: fail\n")
    root = _project(tmp_path, text)
    assert _cli(root, "lint", "--strict").returncode == 1
    r = _cli(root, "lint", "--strict", "--ignore", "HC410,hc406", "--ignore", "412")
    assert r.returncode == 0 and r.stdout == "ok: no problems found\n", r.stdout
    r = _cli(root, "build", "--strict", "--ignore", "HC410", "--ignore", "HC406,HC412")
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_unknown_ignore_code_is_a_usage_error(tmp_path):
    r = _cli(_project(tmp_path), "lint", "--ignore", "HC4100")
    assert r.returncode == 2 and "--ignore HC4100: no such code" in r.stderr and "did you mean 'HC410'?" in r.stderr
