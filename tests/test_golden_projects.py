"""Each directory under fixtures/projects is a project; expected.txt is its lint report.

Git keeps no symbolic links that point outside a fixture, so a fixture lists its links in
links.txt, one `path -> target` per line, made by the test: a relative target is taken from
the link's directory (`../../outside.txt` is the file `outside.txt` next to the project
copy, which the test writes), an absolute one as it is (`/etc`)."""

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


def make_links(case: Path, root: Path) -> None:
    links = case / "links.txt"
    if not links.exists():
        return
    (root.parent / "outside.txt").write_text("secret\n")
    for line in links.read_text().splitlines():
        if line.strip():
            path, target = (part.strip() for part in line.split("->"))
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, root / path)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_lint_golden(case: Path, tmp_path: Path) -> None:
    root = tmp_path / case.name
    shutil.copytree(case, root, ignore=shutil.ignore_patterns("expected.txt", "links.txt"))
    make_links(case, root)
    check_golden(case / "expected.txt", lint_report(root))
