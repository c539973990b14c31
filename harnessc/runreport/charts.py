"""The report's charts, drawn by matplotlib as SVG text to inline in the HTML.

matplotlib is the optional extra `harnessc[report]`, imported here only (never on the
lint/build/run paths). Why matplotlib: its SVG backend draws a 2,000-task, 6,000-attempt
timeline in a fraction of a second when the bars are one compound path per colour, with
an import cost of a few tenths of a second; Vega-Lite through vl-convert starts a
JavaScript engine per process (seconds) and took over ten times as long for the same
timeline; plotly needs its 3+ MB script in the page (bench/report.py, README there).

Each chart is drawn on its own Figure (no pyplot: no GUI backend, no global state) with
the SVG's ids salted by the chart's name, so charts inlined in one page never share an id.
Labels are a run's text (task ids, agent names): drawn as plain text, never as mathtext or
LaTeX (an agent named `$\\frac{a}$` raised), their control characters shown (text.shown).
"""

from __future__ import annotations

import functools
import heapq
import io
import re
from typing import Any

from .text import shown

INSTALL = "pip install 'harnessc[report]'"
LABELED_ROWS = 120  # timeline rows (tasks) named one by one; above, a name every few rows
LABELED_NODES = 60  # DAG nodes named; above, the graph shows states and edges only
TOP_TASKS = 25  # tasks in the cost and token bars (the task table has every one)
LABEL_CHARS = 40  # a longer row name is cut in the middle (the task table has it whole)

DARK_STATES = ("succeeded", "failed", "blocked", "running")  # shown with white text
STATE_COLORS = {
    "succeeded": "#2e9e44", "done": "#8cc99a", "degraded": "#e0a100", "failed": "#d62728",
    "blocked": "#8c1c13", "skipped": "#9e9e9e", "interrupted": "#ff7f0e", "running": "#1f77b4",
    "ready": "#c6dbef", "pending": "#d9d9d9", "not run": "#eeeeee", "review": "#9467bd",
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


# Whatever a matplotlibrc says: `$...$` is not mathtext and no label goes through LaTeX.
PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False}


def _plain_text(draw):
    """Draw a chart with PLAIN_TEXT in force: from its first text artist (tick labels, titles
    and legends read it when made) to the SVG written."""
    @functools.wraps(draw)
    def drawn(*args, **kw):
        import matplotlib

        with matplotlib.rc_context(PLAIN_TEXT):
            return draw(*args, **kw)
    return drawn


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
_DECIMALS = re.compile(r"(?<=\.\d\d)\d+")  # deleted: a literal replacement, no template per match


def _shorter_path(match: re.Match) -> str:
    return ' d="' + " ".join(_DECIMALS.sub("", match.group(1)).split()) + '"'


def _figure(width: float, height: float):
    """A white figure with no layout engine: each chart places its axes in inches from the
    widths of its longest labels (_text_width). Constrained layout measured every tick label
    of a 2,000-row chart in an extra draw (a fifth of a big report's time)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=72)
    fig.set_facecolor("white")
    return fig


def _axes(fig, left: float, bottom: float, width: float, height: float):
    """Axes at this place on the figure, in inches from its bottom left corner."""
    fig_w, fig_h = fig.get_size_inches()
    return fig.add_axes((left / fig_w, bottom / fig_h, width / fig_w, height / fig_h))


def _text_width(labels, size: float) -> float:
    """Inches the widest of `labels` takes at `size` points: the few longest measured with
    the font (one glyph run each, not a text artist per label)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    prop = FontProperties(size=size)
    longest = heapq.nlargest(5, map(_label, labels), key=len)
    return max((text_to_path.get_text_width_height_descent(s, prop, ismath=False)[0] for s in longest),
               default=0.0) / 72


def _legend_height(entries: int, columns: int) -> float:
    """Inches a legend of 9-point entries in `columns` columns takes above its axes."""
    return 0.08 + 0.22 * -(-entries // columns)


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


@_plain_text
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
    legend = [Patch(facecolor=c, label=_label(a)) for a, c in colors.items() if any(k[0] == a for k in boxes)]
    legend.append(Patch(facecolor="white", edgecolor=FAILED_EDGE, label="failed attempt"))
    legend.append(Line2D([], [], color="#777777", linestyle=(0, (2, 2)), label="wait / retry"))
    legend += [Line2D([], [], marker=m, color=c, linestyle="none", label=k)
               for k, m, c in (("fallback", "v", "#d62728"), ("escalated", "^", "#6a3d9a")) if marks[k]]
    columns = min(len(legend), 6)

    ids = [t["id"] for t in tasks]
    labeled = len(tasks) <= LABELED_ROWS
    row_h = 0.24 if labeled else 0.06
    left = 0.15 + _text_width(ids, 8 if labeled else 7)
    top, bottom = 0.1 + _legend_height(len(legend), columns), 0.55
    plot_h = 0.5 + len(tasks) * row_h
    fig = _figure(11, top + plot_h + bottom)
    ax = _axes(fig, left, bottom, 11 - left - 0.3, plot_h)
    for (agent, failed), rects in boxes.items():
        _patch(ax, _rects(rects), facecolor=colors.get(agent, "#888888"), alpha=0.5 if failed else 1.0,
               edgecolor=FAILED_EDGE if failed else "none", linewidth=0.8 if failed else 0)
    if waits:
        _patch(ax, _segments(waits), fill=False, edgecolor="#777777", linestyle=(0, (2, 2)), linewidth=0.8)
    for kind, marker, color in (("fallback", "v", "#d62728"), ("escalated", "^", "#6a3d9a")):
        if marks[kind]:
            xs, ys = zip(*marks[kind])
            ax.scatter(xs, ys, marker=marker, s=28 if labeled else 10, color=color, zorder=3)
    ax.set_xlim(0, span * 1.01)
    ax.set_ylim(len(tasks) - 0.5, -0.5)
    _task_axis(ax, ids)
    ax.set_xlabel("seconds since the run started")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.legend(handles=legend, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=columns,
              frameon=False, fontsize=9, borderaxespad=0.2)
    return _svg(fig, "timeline")


def _task_axis(ax, ids: list[str]) -> None:
    """Every task named when they are few; else a name every few rows (as many as a
    40-tick axis would show)."""
    from matplotlib.ticker import MaxNLocator

    if len(ids) <= LABELED_ROWS:
        _row_names(ax, enumerate(ids), 8)
        return
    rows = [int(v) for v in MaxNLocator(nbins=40, integer=True).tick_values(0, len(ids) - 1)]
    _row_names(ax, ((row, ids[row]) for row in rows if 0 <= row < len(ids)), 7)


def _row_names(ax, rows, size: float) -> None:
    """Each (row, name) written left of the axes at its row: one text artist each, where a
    y tick would be five (its label drawn and measured, marks and gridline built)."""
    from matplotlib.transforms import ScaledTranslation

    ax.set_yticks([])
    left_of_axes = ax.get_yaxis_transform() + ScaledTranslation(-4 / 72, 0, ax.figure.dpi_scale_trans)
    for row, name in rows:
        ax.text(0, row, _label(name), transform=left_of_axes, ha="right", va="center", fontsize=size)


def _label(name) -> str:
    """`name` shown (text.shown) in at most LABEL_CHARS characters, its start and end kept:
    ids are unbounded, and the axes are placed right of the longest."""
    name = " ".join(shown(name).split())  # one line: a row's name, a legend entry
    if len(name) <= LABEL_CHARS:
        return name
    keep = (LABEL_CHARS - 1) // 2
    return f"{name[:keep]}\u2026{name[-keep:]}"


# The cost and tokens chart, in inches: above each row of bars its title, below its tick labels.
TITLE_H, TICKS_H, AGENT_ROW_H, TASK_ROW_H = 0.3, 0.3, 0.3, 0.22


@_plain_text
def spending(report: dict, colors: dict[str, str]) -> str | None:
    """Cost and tokens by agent (top) and by task (the costliest TOP_TASKS)."""
    agents = report["agents"]
    tasks = sorted((t for t in report["tasks"] if t["attempts"]), key=lambda t: (-t["cost_usd"], -t["tokens"]))
    if not agents:
        return None
    shown = tasks[:TOP_TASKS]
    names = list(agents)
    label_w = 0.15 + _text_width([*names, *(t["id"] for t in shown)], 8)
    column_w = (11 - 0.1 - 2 * label_w - 0.4 - 0.3) / 2
    agents_h, tasks_h = AGENT_ROW_H * max(len(names), 1), TASK_ROW_H * max(len(shown), 1)
    tasks_y = 0.1 + TICKS_H  # the bottom row's axes start here
    agents_y = tasks_y + tasks_h + TITLE_H + TICKS_H + 0.1
    fig = _figure(11, agents_y + agents_h + TITLE_H + 0.05)
    more = f" (the {len(shown)} costliest of {len(tasks)})" if len(tasks) > len(shown) else ""
    for col, (key, label) in enumerate((("cost_usd", "cost (USD)"), ("tokens", "tokens"))):
        x = 0.1 + label_w + col * (column_w + 0.4 + label_w)
        _bars(_axes(fig, x, agents_y, column_w, agents_h), names, [agents[a][key] for a in names],
              [colors.get(a, "#888") for a in names], f"{label} by agent", key)
        _bars(_axes(fig, x, tasks_y, column_w, tasks_h), [t["id"] for t in shown], [t[key] for t in shown],
              [colors.get(t["agent"], "#888") for t in shown], f"{label} by task{more}", key)
    return _svg(fig, "spending")


def _bars(ax, names: list[str], values: list[float], colors: list[str], title: str, key: str) -> None:
    """Horizontal bars, the first on top; token counts as 15k, 4.5M (no offset text to place)."""
    from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator

    ax.barh(range(len(names)), values, color=colors)
    _row_names(ax, enumerate(names), 8)
    ax.set_ylim(len(names) - 0.5, -0.5)  # the first on top, no margin above or below
    ax.set_title(title, fontsize=10, loc="left")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.xaxis.set_major_formatter(EngFormatter(sep="") if key == "tokens" else FuncFormatter(lambda v, _: f"{v:g}"))
    ax.tick_params(axis="x", labelsize=8)


@_plain_text
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
    by_state: dict[str, list] = {}
    w, h = (0.8, 0.7) if labeled else (0.5, 0.8)
    for t in tasks:
        x, y = place[t["id"]]
        by_state.setdefault(t["state"], []).append((x - w / 2, y - h / 2, w, h))
    columns = min(len(by_state), 6)
    width = min(2 + waves * (2.0 if labeled else 0.25), 14)
    plot_h = min(1 + tallest * (0.45 if labeled else 0.05), 14) - 0.6
    top, bottom = 0.05 + _legend_height(len(by_state), columns), 0.35 if labeled else 0.55
    fig = _figure(width, top + plot_h + bottom)
    ax = _axes(fig, 0.2, bottom, width - 0.4, plot_h)
    edges = [((place[d][0] + w / 2, place[d][1]), (x - w / 2, y))
             for t in tasks for d in t["depends_on"] if d in place for x, y in (place[t["id"]],)]
    if edges:
        _patch(ax, _segments(edges), fill=False, edgecolor="#9a9a9a", linewidth=0.8 if labeled else 0.3)
    for state, boxes in by_state.items():
        _patch(ax, _rects(boxes), facecolor=STATE_COLORS.get(state, "#cccccc"), edgecolor="#555555",
               linewidth=0.5 if labeled else 0)
    if labeled:
        for t in tasks:
            x, y = place[t["id"]]
            ax.text(x, y, _label(t["id"]), ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_xlim(-0.6, waves - 0.4)
    ax.set_ylim(tallest - 0.4, -0.6)
    _wave_axis(ax, waves, labeled)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.legend(handles=[Patch(facecolor=STATE_COLORS.get(s, "#cccccc"), edgecolor="#555555", label=s)
                       for s in by_state], loc="lower left", bbox_to_anchor=(0, 1.0),
              ncol=columns, frameon=False, fontsize=9, borderaxespad=0.2)
    return _svg(fig, "dag")


def _wave_axis(ax, waves: int, labeled: bool) -> None:
    """'wave N' under each column when the columns are wide; else their numbers (every few
    when there are many) and 'wave' under the axis."""
    from matplotlib.ticker import MaxNLocator

    if labeled:
        ax.set_xticks(range(waves), [f"wave {i}" for i in range(waves)], fontsize=8)
        return
    ax.xaxis.set_major_locator(MaxNLocator(nbins=20, integer=True))
    ax.tick_params(axis="x", labelsize=8)
    ax.set_xlabel("wave", fontsize=8)
