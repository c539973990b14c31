"""`harnessc report`: a run as one self-contained HTML page or as Markdown for a CI job summary.

data.py reads the run from the state; html.py and markdown.py write it; svg.py draws the
plan and the timeline (SVG of its own, no library); charts.py draws the cost and token chart
with matplotlib (the optional extra `harnessc[report]`) and is the only module that imports it. (runtime/observe/report.py is the read-only view of
`status` and `log`; this package is the run's report file.)
"""

from __future__ import annotations

from pathlib import Path

from ..nogc import no_cyclic_gc
from ..workspace import Workspace
from .charts import INSTALL, MissingLibrary
from .data import ReportError, collect, redact

__all__ = ["INSTALL", "MissingLibrary", "ReportError", "charts_available", "default_path", "render", "write"]


def charts_available() -> bool:
    """Whether the chart library (the `report` extra) can be imported."""
    from . import charts

    try:
        charts.require()
    except MissingLibrary:
        return False
    return True


def default_path(root: Path, run_id: str, fmt: str = "html") -> Path:
    """.harness/runs/<run>/report.html (report.md)."""
    return Workspace(root).run_dir(run_id) / f"report.{fmt}"


def render(root: Path, run_id: str | None = None, fmt: str = "html") -> str:
    """The report of `run_id` (default: the last run) as text. ReportError or StateError when
    there is none (without matplotlib the page leaves the cost chart out)."""
    # Reading a big run and drawing it (matplotlib's import too) allocate many long-lived
    # objects and few cycles: collections rescanning them were a sixth of a big report's time.
    with no_cyclic_gc():
        return _render(collect(root, run_id), root, fmt)


def _render(report: dict, root: Path, fmt: str) -> str:
    if fmt == "md":
        from . import markdown

        html_path = default_path(root, report["run"]["id"])
        text = markdown.render(report, Workspace(root).rel(html_path) if html_path.exists() else None)
    else:
        from . import html

        text = html.render(report)
    return redact(text, report["secrets"])


def write(root: Path, run_id: str | None = None, out: Path | None = None, fmt: str = "html") -> Path:
    """Write the report to `out` (default: default_path); the path written. As render, and
    WorkspaceError or OSError when it cannot be written."""
    with no_cyclic_gc():  # as in render
        report = collect(root, run_id)
        path = out or default_path(root, report["run"]["id"], fmt)
        text = _render(report, root, fmt)
    if out is None:
        Workspace(root).write_atomic(path, text.encode("utf-8"))
    else:
        path.write_text(text, encoding="utf-8")
    return path
