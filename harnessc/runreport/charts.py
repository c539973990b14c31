"""The report's charts, drawn by matplotlib as SVG text to inline in the HTML.

matplotlib is the optional extra `harnessc[report]`, imported here only (never on the
lint/build/run paths). Why matplotlib: its SVG backend draws a 2,000-task, 6,000-attempt
timeline in a fraction of a second when the bars are one compound path per colour, with
an import cost of a few tenths of a second; Vega-Lite through vl-convert starts a
JavaScript engine per process (seconds) and took over ten times as long for the same
timeline; plotly needs its 3+ MB script in the page (bench/report.py, README there).

Each chart is drawn on its own Figure (no pyplot: no GUI backend, no global state) with
the SVG's ids salted by the chart's name, so charts inlined in one page never share an id.
"""

from __future__ import annotations

import io
import re
from typing import Any

INSTALL = "pip install 'harnessc[report]'"
LABELED_ROWS = 120  # timeline rows (tasks) named one by one; above, a name every few rows
LABELED_NODES = 60  # DAG nodes named; above, the graph shows states and edges only
TOP_TASKS = 25  # tasks in the cost and token bars (the task table has every one)

DARK_STATES = ("succeeded", "failed", "blocked", "running")  # shown with white text
STATE_COLORS = {
    "succeeded": "#2e9e44", "done": "#8cc99a", "degraded": "#e0a100", "failed": "#d62728",
    "blocked": "#8c1c13", "skipped": "#9e9e9e", "interrupted": "#ff7f0e", "running": "#1f77b4",
    "ready": "#c6dbef", "pending": "#d9d9d9", "not run": "#eeeeee",
}
FAILED_EDGE = "#d62728"
AGENT_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#72b7b2", "#eeca3b", "#9d755d",
                 "#ff9da6", "#bab0ac", "#e45756")


class MissingLibrary(Exception):
    """The chart library is not installed."""


def require() -> Any:
    """matplotlib, set up for SVG; MissingLibrary says how to install it."""
    try:
        import matplotlib
        from matplotlib.backends import backend_svg  # noqa: F401  (the only backend used)
    except ImportError:
        raise MissingLibrary(f"the report's charts need matplotlib: {INSTALL}") from None
    return matplotlib


def agent_colors(agents: list[str]) -> dict[str, str]:
    return {a: AGENT_PALETTE[i % len(AGENT_PALETTE)] for i, a in enumerate(agents)}


def _svg(fig, name: str) -> str:
    """The figure as SVG text (no XML header: it is inlined), ids salted with `name`."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return _PATH_DATA.sub(_shorter_path, text[text.index("<svg"):])


# matplotlib writes path coordinates with six decimals, one segment a line; two decimals of
# a point on one line keep the picture and halve a 6,000-bar timeline's size.
_PATH_DATA = re.compile(r' d="([^"]*)"')
_DECIMALS = re.compile(r"(\.\d\d)\d+")


def _shorter_path(match: re.Match) -> str:
    return ' d="' + " ".join(_DECIMALS.sub(r"\1", match.group(1)).split()) + '"'


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=72, layout="constrained")
    fig.set_facecolor("white")
    return fig


def _rects(boxes: list[tuple[float, float, float, float]]):
    """One compound path of rectangles (x, y, width, height): one SVG element for all."""
    from matplotlib.path import Path

    verts, codes = [], []
    for x, y, w, h in boxes:
        verts += [(x, y), (x + w, y), (x + w, y + h), (x, y + h), (x, y)]
        codes += [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY]
    return Path(verts, codes)


def _segments(lines: list[tuple[tuple[float, float], tuple[float, float]]]):
    from matplotlib.path import Path

    verts, codes = [], []
    for a, b in lines:
        verts += [a, b]
        codes += [Path.MOVETO, Path.LINETO]
    return Path(verts, codes)


def _patch(ax, path, **style) -> None:
    """Add a compound path; add_artist, not add_patch: the limits are set by hand, and
    add_patch would walk every segment of thousands of rectangles to find them."""
    from matplotlib.patches import PathPatch

    ax.add_artist(PathPatch(path, **style))


def timeline(report: dict, colors: dict[str, str]) -> str | None:
    """Every attempt of the run per task, coloured by agent: failed attempts outlined red,
    waits between a task's attempts dashed, fallbacks and escalations marked."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    tasks = [t for t in report["tasks"] if t["attempts"]]
    if not tasks:
        return None
    start = report["run"]["started_at"]
    end = max(a["finished_at"] or a["started_at"] for t in tasks for a in t["attempts"])
    span = max(end - start, 1e-3)
    row_h = 0.24 if len(tasks) <= LABELED_ROWS else 0.06
    fig = _figure(11, 1.4 + len(tasks) * row_h)
    ax = fig.add_subplot()
    boxes: dict[tuple[str, bool], list] = {}
    waits, marks = [], {"fallback": [], "escalated": []}
    for row, t in enumerate(tasks):
        previous = None
        for a in t["attempts"]:
            x0 = a["started_at"] - start
            x1 = (a["finished_at"] or end) - start
            failed = a["status"] not in ("succeeded", "progress")
            boxes.setdefault((a["agent"] or "-", failed), []).append((x0, row - 0.35, max(x1 - x0, span / 2000), 0.7))
            if previous is not None and x0 > previous:
                waits.append(((previous, row), (x0, row)))
            previous = x1
        for ev in t["routing"]:
            if ev["kind"] in marks:
                marks[ev["kind"]].append((ev["ts"] - start, row - 0.45))
    for (agent, failed), rects in boxes.items():
        _patch(ax, _rects(rects), facecolor=colors.get(agent, "#888888"), alpha=0.5 if failed else 1.0,
               edgecolor=FAILED_EDGE if failed else "none", linewidth=0.8 if failed else 0)
    if waits:
        _patch(ax, _segments(waits), fill=False, edgecolor="#777777", linestyle=(0, (2, 2)), linewidth=0.8)
    for kind, marker, color in (("fallback", "v", "#d62728"), ("escalated", "^", "#6a3d9a")):
        if marks[kind]:
            xs, ys = zip(*marks[kind])
            ax.scatter(xs, ys, marker=marker, s=28 if row_h > 0.1 else 10, color=color, zorder=3)
    ax.set_xlim(0, span * 1.01)
    ax.set_ylim(len(tasks) - 0.5, -0.5)
    _task_axis(ax, [t["id"] for t in tasks])
    ax.set_xlabel("seconds since the run started")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    legend = [Patch(facecolor=c, label=a) for a, c in colors.items() if any(k[0] == a for k in boxes)]
    legend.append(Patch(facecolor="white", edgecolor=FAILED_EDGE, label="failed attempt"))
    legend.append(Line2D([], [], color="#777777", linestyle=(0, (2, 2)), label="wait / retry"))
    legend += [Line2D([], [], marker=m, color=c, linestyle="none", label=k)
               for k, m, c in (("fallback", "v", "#d62728"), ("escalated", "^", "#6a3d9a")) if marks[k]]
    ax.legend(handles=legend, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=min(len(legend), 6),
              frameon=False, fontsize=9)
    return _svg(fig, "timeline")


def _task_axis(ax, ids: list[str]) -> None:
    """Every task named when they are few; else a name every few rows (a FuncFormatter)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    if len(ids) <= LABELED_ROWS:
        ax.set_yticks(range(len(ids)), ids, fontsize=8)
        return
    ax.yaxis.set_major_locator(MaxNLocator(nbins=40, integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: ids[int(v)] if 0 <= int(v) < len(ids) else ""))
    ax.tick_params(axis="y", labelsize=7)


def spending(report: dict, colors: dict[str, str]) -> str | None:
    """Cost and tokens by agent (top) and by task (the costliest TOP_TASKS)."""
    agents = report["agents"]
    tasks = sorted((t for t in report["tasks"] if t["attempts"]), key=lambda t: (-t["cost_usd"], -t["tokens"]))
    if not agents:
        return None
    shown = tasks[:TOP_TASKS]
    fig = _figure(11, 1.2 + 0.3 * len(agents) + 0.22 * len(shown))
    grid = fig.add_gridspec(2, 2, height_ratios=[max(len(agents), 1), max(len(shown), 1) * 0.75])
    names = list(agents)
    for col, (key, label) in enumerate((("cost_usd", "cost (USD)"), ("tokens", "tokens"))):
        ax = fig.add_subplot(grid[0, col])
        ax.barh(range(len(names)), [agents[a][key] for a in names], color=[colors.get(a, "#888") for a in names])
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"{label} by agent", fontsize=10, loc="left")
        _value_axis(ax)
        ax = fig.add_subplot(grid[1, col])
        ax.barh(range(len(shown)), [t[key] for t in shown], color=[colors.get(t["agent"], "#888") for t in shown])
        ax.set_yticks(range(len(shown)), [t["id"] for t in shown], fontsize=8)
        ax.invert_yaxis()
        more = f" (the {len(shown)} costliest of {len(tasks)})" if len(tasks) > len(shown) else ""
        ax.set_title(f"{label} by task{more}", fontsize=10, loc="left")
        _value_axis(ax)
    return _svg(fig, "spending")


def _value_axis(ax) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.tick_params(axis="x", labelsize=8)


def dag(report: dict) -> str | None:
    """The plan's graph by waves (left to right), each task coloured by its state in the run."""
    from matplotlib.patches import Patch

    tasks = [t for t in report["tasks"] if t["wave"] is not None]
    if not tasks:
        return None
    place: dict[str, tuple[float, float]] = {}
    per_wave: dict[int, int] = {}
    for t in tasks:
        slot = per_wave.get(t["wave"], 0)
        per_wave[t["wave"]] = slot + 1
        place[t["id"]] = (t["wave"], slot)
    waves, tallest = max(per_wave) + 1, max(per_wave.values())
    labeled = len(tasks) <= LABELED_NODES
    fig = _figure(min(2 + waves * (2.0 if labeled else 0.25), 14),
                  min(1 + tallest * (0.45 if labeled else 0.05), 14))
    ax = fig.add_subplot()
    w, h = (0.8, 0.7) if labeled else (0.5, 0.8)
    edges = [((place[d][0] + w / 2, place[d][1]), (x - w / 2, y))
             for t in tasks for d in t["depends_on"] if d in place for x, y in (place[t["id"]],)]
    if edges:
        _patch(ax, _segments(edges), fill=False, edgecolor="#9a9a9a", linewidth=0.8 if labeled else 0.3)
    by_state: dict[str, list] = {}
    for t in tasks:
        x, y = place[t["id"]]
        by_state.setdefault(t["state"], []).append((x - w / 2, y - h / 2, w, h))
    for state, boxes in by_state.items():
        _patch(ax, _rects(boxes), facecolor=STATE_COLORS.get(state, "#cccccc"), edgecolor="#555555",
               linewidth=0.5 if labeled else 0)
    if labeled:
        for t in tasks:
            x, y = place[t["id"]]
            ax.text(x, y, t["id"], ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_xlim(-0.6, waves - 0.4)
    ax.set_ylim(tallest - 0.4, -0.6)
    ax.set_xticks(range(waves), [f"wave {i}" for i in range(waves)] if waves <= 20 else None, fontsize=8)
    if waves > 20:
        ax.tick_params(axis="x", labelsize=7)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.legend(handles=[Patch(facecolor=STATE_COLORS.get(s, "#cccccc"), edgecolor="#555555", label=s)
                       for s in by_state], loc="lower left", bbox_to_anchor=(0, 1.0),
              ncol=min(len(by_state), 6), frameon=False, fontsize=9)
    return _svg(fig, "dag")
