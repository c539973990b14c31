"""The report's cost and token chart, drawn by matplotlib as SVG text to inline in the HTML
(the plan and the timeline are SVG written by hand: svg.py).

matplotlib is the optional extra `harnessc[report]`, imported here only (never on the
lint/build/run paths); without it the page has its tables and no chart. Why matplotlib for
bars with axes and ticks: an import of a few tenths of a second and a fast SVG backend;
Vega-Lite through vl-convert starts a JavaScript engine per process (seconds); plotly needs
its 3+ MB script in the page (bench/report.py, README there). The plan and the timeline
are boxes, lines and a label per row: written directly they take ~0.03 s of CPU at 2,000
tasks with every row named (bench/report.py), and a label stays the size it was written at.

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
TOP_TASKS = 25  # tasks in the cost and token bars (the task table has every one)
LABEL_CHARS = 40  # a longer row name is cut in the middle (the task table has it whole)

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


def _label(name) -> str:
    """`name` shown (text.shown) in at most LABEL_CHARS characters, its start and end kept:
    ids are unbounded, and the axes are placed right of the longest."""
    name = " ".join(shown(name).split())  # one line: a row's name, a legend entry
    if len(name) <= LABEL_CHARS:
        return name
    keep = (LABEL_CHARS - 1) // 2
    return f"{name[:keep]}\u2026{name[-keep:]}"


# The cost and tokens chart, in inches: above each row of bars its title, below its tick labels.
TITLE_H, TICKS_H, AGENT_ROW_H, TASK_ROW_H = 0.32, 0.3, 0.3, 0.24
SIZE = 9  # points (12 px) of every label: the page is read at 1:1, labels stay >= 11 px


def priced(report: dict) -> bool:
    """Whether any attempt of the run has a cost (no agent with a price: tokens only)."""
    return any(a["cost_usd"] for a in report["agents"].values())


@_plain_text
def spending(report: dict, colors: dict[str, str]) -> str | None:
    """Cost and tokens by agent (top) and by task (the costliest TOP_TASKS); with no price
    set, tokens only, the tasks with the most."""
    agents = report["agents"]
    if not agents:
        return None
    columns = (("cost_usd", "cost (USD)"), ("tokens", "tokens")) if priced(report) else (("tokens", "tokens"),)
    first = columns[0][0]
    tasks = sorted((t for t in report["tasks"] if t["attempts"]), key=lambda t: (-t[first], -t["tokens"]))
    top = tasks[:TOP_TASKS]
    names = list(agents)
    label_w = 0.15 + _text_width([*names, *(t["id"] for t in top)], SIZE)
    column_w = (11 - 0.1 - len(columns) * label_w - 0.4 * (len(columns) - 1) - 0.3) / len(columns)
    agents_h, tasks_h = AGENT_ROW_H * max(len(names), 1), TASK_ROW_H * max(len(top), 1)
    tasks_y = 0.1 + TICKS_H  # the bottom row's axes start here
    agents_y = tasks_y + tasks_h + TITLE_H + TICKS_H + 0.1
    fig = _figure(11, agents_y + agents_h + TITLE_H + 0.05)
    most = "costliest" if first == "cost_usd" else "with the most tokens"
    more = f" (the {len(top)} {most} of {len(tasks)})" if len(tasks) > len(top) else ""
    for col, (key, label) in enumerate(columns):
        x = 0.1 + label_w + col * (column_w + 0.4 + label_w)
        _bars(_axes(fig, x, agents_y, column_w, agents_h), names, [agents[a][key] for a in names],
              [colors.get(a, "#888") for a in names], f"{label} by agent", key)
        _bars(_axes(fig, x, tasks_y, column_w, tasks_h), [t["id"] for t in top], [t[key] for t in top],
              [colors.get(t["agent"], "#888") for t in top], f"{label} by task{more}", key)
    return _svg(fig, "spending")


def _bars(ax, names: list[str], values: list[float], colors: list[str], title: str, key: str) -> None:
    """Horizontal bars, the first on top, from 0 (all zero: an axis to 1, never below 0);
    token counts as 15k, 4.5M (no offset text to place)."""
    from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator

    ax.barh(range(len(names)), values, color=colors)
    _row_names(ax, enumerate(names), SIZE)
    ax.set_ylim(len(names) - 0.5, -0.5)  # the first on top, no margin above or below
    ax.set_xlim(0, max(values, default=0) * 1.05 or 1)
    ax.set_title(title, fontsize=SIZE + 1, loc="left")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.xaxis.set_major_formatter(EngFormatter(sep="") if key == "tokens" else FuncFormatter(lambda v, _: f"{v:g}"))
    ax.tick_params(axis="x", labelsize=SIZE)


def _row_names(ax, rows, size: float) -> None:
    """Each (row, name) written left of the axes at its row: one text artist each, where a
    y tick would be five (its label drawn and measured, marks and gridline built)."""
    from matplotlib.transforms import ScaledTranslation

    ax.set_yticks([])
    left_of_axes = ax.get_yaxis_transform() + ScaledTranslation(-4 / 72, 0, ax.figure.dpi_scale_trans)
    for row, name in rows:
        ax.text(0, row, _label(name), transform=left_of_axes, ha="right", va="center", fontsize=size)
