"""Each directory under fixtures/projects is a project; expected.txt is its lint report."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harnessc.compiler import lint_project
from harnessc.diagnostics import render_text

from conftest import FIXTURES, check_golden

CASES = sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir())


def lint_report(root: Path) -> str:
    project = lint_project(root)
    text = render_text(project.diags.sorted(), project.sources)
    # template diagnostics point into files that are not spec sources: show those lines too
    return text + f"exit: {1 if project.diags.has_errors() else 0}\n"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_lint_golden(case: Path, tmp_path: Path) -> None:
    root = tmp_path / case.name
    shutil.copytree(case, root, ignore=shutil.ignore_patterns("expected.txt"))
    if case.name == "context-escape":
        (tmp_path / "outside.txt").write_text("secret")
        os.symlink(tmp_path / "outside.txt", root / "notes" / "link.md")
    check_golden(case / "expected.txt", lint_report(root))
