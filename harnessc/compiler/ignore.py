"""Ignoring warnings: `lint --ignore HC410` for the whole project, and a task's own
`<!-- harnessc: ignore[HC410] -->` comment for the warnings reported on its lines.

Only warnings are ever ignored: an error means there is no plan to build, and hiding it
from lint would only move the failure to `build` or `run`.
"""

from __future__ import annotations

from typing import Iterable

from ..diagnostics import Diagnostic
from .project import ROADMAP, Project


def task_ranges(project: Project) -> list[tuple[int, int, frozenset[str]]]:
    """(first line, last line, codes) of each task of roadmap.md with an ignore comment.

    A task's lines run from its task line to the line before the next line at column 0 (a
    task, a heading, prose): its properties and goal are indented.
    """
    roadmap = project.roadmap
    if roadmap is None or not roadmap.ignores:
        return []
    lines = project.sources.get(ROADMAP, "").splitlines()
    out = []
    for task in roadmap.tasks:
        codes = roadmap.ignores.get(task.id)
        if not codes:
            continue
        end = task.line
        while end < len(lines) and (not lines[end].strip() or lines[end][:1] in (" ", "\t")):
            end += 1
        out.append((task.line, end, frozenset(codes)))
    return out


def apply_ignores(project: Project, codes: Iterable[str] = ()) -> None:
    """Drop the warnings that `codes` (everywhere) or a task's ignore comment (on its lines) name."""
    everywhere = frozenset(codes)
    ranges = task_ranges(project)
    if not everywhere and not ranges:
        return

    def ignored(d: Diagnostic) -> bool:
        if d.severity != "warning":
            return False
        if d.code in everywhere:
            return True
        return d.span.path == ROADMAP and any(a <= d.span.line <= z and d.code in c for a, z, c in ranges)

    project.diags.drop(ignored)
