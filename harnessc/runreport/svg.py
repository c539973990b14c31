"""The plan graph and the timeline as SVG written by hand: no chart library, every label at
FONT px in the page's own font (the SVG is never scaled: a wide or tall one scrolls in its
panel), so they read the same at 6 tasks and at 2,000.

* The plan: tasks in layers, dependencies left to right (the compiler's waves), ordered in
  each layer to cross fewer edges. Above COLLAPSE tasks, one box per phase (per wave when
  the plan has no phases) with its counts per state; each box links to its phase's own
  graph further down the page (shown by CSS `:target`, no script).
* The timeline: every attempt per task, a labelled row per task, grouped by phase.

Every run text (ids, titles, phase names, agent names) is shown (text.shown) and escaped.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any

from ..states import BROKEN, TaskState
from ..wording import duration
from .text import shown

FONT = 12  # px: every label (readable: the report's test holds it at >= 11 px on screen)
CHAR_W = 7.2  # px a character of FONT takes at most on average (ids: letters, digits, dashes)
COLLAPSE = 60  # tasks: above, the plan is drawn by phase
GROUP_GRAPH = 150  # tasks: a phase with more is listed by wave, not drawn
LABEL_CHARS = 40

STATE_COLORS = {
    "succeeded": "#2e9e44", "done": "#8cc99a", "degraded": "#e0a100", "failed": "#d62728",
    "blocked": "#8c1c13", "skipped": "#9e9e9e", "interrupted": "#ff7f0e", "running": "#1f77b4",
    "ready": "#c6dbef", "pending": "#d9d9d9", "not run": "#eeeeee", "review": "#9467bd",
}
DARK_STATES = (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.BLOCKED, TaskState.RUNNING)  # shown with white text
FAILED = (*BROKEN, TaskState.INTERRUPTED)  # an edge out of one is drawn red
FAILED_EDGE = "#d62728"


def esc(text: Any) -> str:
    return html.escape(shown(text))


def label(name: Any, chars: int = LABEL_CHARS) -> str:
    """`name` on one line in at most `chars` characters, its start and end kept."""
    name = " ".join(shown(name).split())
    if len(name) <= chars:
        return name
    keep = (chars - 1) // 2
    return f"{name[:keep]}\u2026{name[-(chars - 1 - keep):]}"


def _svg(width: float, height: float, body: list[str], name: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="{name}" width="{width:.0f}" height="{height:.0f}"'
            f' viewBox="0 0 {width:.0f} {height:.0f}" font-size="{FONT}" font-family="system-ui, sans-serif"'
            f' role="img">{"".join(body)}</svg>')


# ------------------------------------------------------------------ the plan


def groups(tasks: list[dict]) -> list[tuple[str, list[dict]]]:
    """The plan's tasks by phase, in plan order; by wave when the plan has fewer than two phases."""
    by: dict[str, list[dict]] = {}
    phases = {t.get("phase") for t in tasks}
    for t in tasks:
        key = (t.get("phase") or "(no phase)") if len(phases) > 1 else f"wave {t['wave']}"
        by.setdefault(key, []).append(t)
    if len(phases) <= 1:
        return sorted(by.items(), key=lambda kv: kv[1][0]["wave"])
    return list(by.items())


def plan(tasks: list[dict], linked: set[str]) -> dict[str, Any] | None:
    """{"svg": the graph, "tasks": N, "by": "phase" | "wave", "groups": [...]} where groups
    (above COLLAPSE tasks) holds each phase: {"anchor", "name", "tasks", "counts", "svg" |
    "waves"}. `linked`: ids with a section of their own (#task-ID) on the page."""
    tasks = [t for t in tasks if t["wave"] is not None]
    if not tasks:
        return None
    if len(tasks) <= COLLAPSE:
        return {"svg": task_graph(tasks, linked), "tasks": len(tasks), "by": None, "groups": []}
    parts = groups(tasks)
    out = []
    for n, (name, members) in enumerate(parts, 1):
        counts: dict[str, int] = {}
        for t in members:
            counts[t["state"]] = counts.get(t["state"], 0) + 1
        group = {"anchor": f"plan-{n}", "name": name, "tasks": len(members), "counts": _ordered(counts)}
        if len(members) <= GROUP_GRAPH:
            group["svg"] = task_graph(members, linked)
        else:
            waves: dict[int, list[dict]] = defaultdict(list)
            for t in members:
                waves[t["wave"]].append(t)
            group["waves"] = sorted(waves.items())
        out.append(group)
    by = "phase" if len({t.get("phase") for t in tasks}) > 1 else "wave"
    return {"svg": group_graph(parts, out), "tasks": len(tasks), "by": by, "groups": out}


def _ordered(counts: dict[str, int]) -> list[tuple[str, int]]:
    order = list(STATE_COLORS)
    return sorted(counts.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))


def _layers(ids: list[str], layer_of: dict[str, int], deps: dict[str, list[str]]) -> list[list[str]]:
    """The ids in their layers, each layer ordered by the mean place of its neighbours (a few
    sweeps each way: fewer crossing edges), plan order first."""
    layers: list[list[str]] = [[] for _ in range(max(layer_of.values()) + 1)]
    for i in ids:
        layers[layer_of[i]].append(i)
    users: dict[str, list[str]] = defaultdict(list)
    for i in ids:
        for d in deps[i]:
            users[d].append(i)
    for _ in range(3):
        for sweep, near in ((range(1, len(layers)), deps), (range(len(layers) - 2, -1, -1), users)):
            for n in sweep:
                place = {i: k for layer in layers for k, i in enumerate(layer)}
                def key(i, k, near=near, place=place):
                    seen = [place[j] for j in near[i] if j in place]
                    return sum(seen) / len(seen) if seen else k
                layers[n] = [i for k, i in sorted(enumerate(layers[n]), key=lambda ki: (key(ki[1], ki[0]), ki[0]))]
    return layers


BOX_W, BOX_H, COL_W, ROW_H, TOP = 176, 26, 228, 36, 26


def task_graph(tasks: list[dict], linked: set[str]) -> str:
    """The tasks as boxes in layers by wave (dependencies left to right), edges between them."""
    by_id = {t["id"]: t for t in tasks}
    first = min(t["wave"] for t in tasks)
    layer_of = {t["id"]: t["wave"] - first for t in tasks}
    deps = {t["id"]: [d for d in t["depends_on"] if d in by_id] for t in tasks}
    layers = _layers(list(by_id), layer_of, deps)
    tallest = max(len(layer) for layer in layers)
    at: dict[str, tuple[float, float]] = {}
    for n, layer in enumerate(layers):
        offset = (tallest - len(layer)) * ROW_H / 2
        for k, i in enumerate(layer):
            at[i] = (8 + n * COL_W, TOP + offset + k * ROW_H)
    width, height = 16 + (len(layers) - 1) * COL_W + BOX_W, TOP + tallest * ROW_H + 4
    body = [f'<text x="{8 + n * COL_W}" y="16" fill="#555">wave {n + first}</text>' for n in range(len(layers))]
    edges: dict[bool, list[str]] = {False: [], True: []}
    for i, (x, y) in at.items():
        for d in deps[i]:
            dx, dy = at[d]
            x1, y1, x2, y2 = dx + BOX_W, dy + BOX_H / 2, x, y + BOX_H / 2
            mid = (x1 + x2) / 2
            edges[by_id[d]["state"] in FAILED].append(f"M{x1:.0f} {y1:.0f}C{mid:.0f} {y1:.0f} {mid:.0f} {y2:.0f} {x2:.0f} {y2:.0f}")
    for failed, paths in edges.items():
        if paths:
            body.append(f'<path d="{"".join(paths)}" fill="none" stroke="{FAILED_EDGE if failed else "#8a8f98"}"'
                        f' stroke-width="{1.4 if failed else 1}"/>')
    chars = int((BOX_W - 12) / CHAR_W)
    for i, (x, y) in at.items():
        t = by_id[i]
        color = STATE_COLORS.get(t["state"], "#cccccc")
        ink = "#fff" if t["state"] in DARK_STATES else "#111"
        tip = f"{i}: {t['title']} ({t['state']})" if t["title"] != i else f"{i} ({t['state']})"
        box = (f'<g><title>{esc(tip)}</title><rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="4"'
               f' fill="{color}" stroke="#5f6368" stroke-width="0.6"/><text x="{x + 6:.0f}" y="{y + 17:.0f}"'
               f' fill="{ink}">{html.escape(label(i, chars))}</text></g>')
        body.append(f'<a href="#task-{html.escape(i)}">{box}</a>' if i in linked else box)
    return _svg(width, height, body, "plan-graph")


GROUP_W, GROUP_H, GROUP_COL, GROUP_ROW = 300, 84, 360, 100


def group_graph(parts: list[tuple[str, list[dict]]], views: list[dict]) -> str:
    """One box per phase: its name, its tasks and their states (a bar and the counts), in
    layers by what depends on what; each links to the phase's own graph."""
    group_of = {t["id"]: n for n, (_, members) in enumerate(parts) for t in members}
    deps: dict[int, set[int]] = defaultdict(set)
    for n, (_, members) in enumerate(parts):
        for t in members:
            deps[n] |= {group_of[d] for d in t["depends_on"] if d in group_of and group_of[d] != n}
    layer_of: dict[str, int] = {}
    for n in range(len(parts)):  # an edge back to a later phase does not place it (no cycle)
        layer_of[str(n)] = 1 + max((layer_of[str(d)] for d in deps[n] if d < n), default=-1)
    ids = [str(n) for n in range(len(parts))]
    layers = _layers(ids, layer_of, {str(n): [str(d) for d in deps[n]] for n in range(len(parts))})
    tallest = max(len(layer) for layer in layers)
    at: dict[int, tuple[float, float]] = {}
    for c, layer in enumerate(layers):
        offset = (tallest - len(layer)) * GROUP_ROW / 2
        for k, i in enumerate(layer):
            at[int(i)] = (8 + c * GROUP_COL, 8 + offset + k * GROUP_ROW)
    width, height = 16 + (len(layers) - 1) * GROUP_COL + GROUP_W, 8 + tallest * GROUP_ROW
    edges = []
    for n, (x, y) in at.items():
        for d in deps[n]:
            dx, dy = at[d]
            x1, y1, x2, y2 = dx + GROUP_W, dy + GROUP_H / 2, x, y + GROUP_H / 2
            if x2 <= x1:  # a dependency on a later phase: around, not through the boxes
                x1, x2 = dx + GROUP_W / 2, x + GROUP_W / 2
                y1, y2 = (dy + GROUP_H, y) if dy < y else (dy, y + GROUP_H)
            mid = (x1 + x2) / 2
            edges.append(f"M{x1:.0f} {y1:.0f}C{mid:.0f} {y1:.0f} {mid:.0f} {y2:.0f} {x2:.0f} {y2:.0f}")
    body = [f'<path d="{"".join(edges)}" fill="none" stroke="#8a8f98" stroke-width="1.2"/>'] if edges else []
    chars = int((GROUP_W - 16) / CHAR_W)
    for n, (x, y) in at.items():
        view = views[n]
        total = view["tasks"]
        counts = ", ".join(f"{c} {s}" for s, c in view["counts"])
        bar, left = [], x + 8
        for state, c in view["counts"]:
            w = (GROUP_W - 16) * c / total
            bar.append(f'<rect x="{left:.1f}" y="{y + 64:.0f}" width="{w:.1f}" height="12"'
                       f' fill="{STATE_COLORS.get(state, "#cccccc")}"/>')
            left += w
        body.append(
            f'<a href="#{view["anchor"]}"><g><title>{esc(view["name"])}: {total} tasks ({esc(counts)})</title>'
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{GROUP_W}" height="{GROUP_H}" rx="6" fill="#fff" stroke="#5f6368"/>'
            f'<text x="{x + 8:.0f}" y="{y + 18:.0f}" font-weight="600" fill="#1d1d1f">{html.escape(label(view["name"], chars))}</text>'
            f'<text x="{x + 8:.0f}" y="{y + 36:.0f}" fill="#333">{total} tasks</text>'
            f'<text x="{x + 8:.0f}" y="{y + 54:.0f}" fill="#333">{html.escape(label(counts, chars))}</text>'
            f'{"".join(bar)}</g></a>')
    return _svg(width, height, body, "plan-groups")


# ------------------------------------------------------------------ the timeline

TL_ROW, TL_WIDTH = 18, 1080
WAIT = "#777777"
MARKS = {"fallback": ("#d62728", 1), "escalated": ("#6a3d9a", -1)}  # colour, direction (down, up)


def _ticks(span: float, room: float) -> list[float]:
    """Round seconds along `span`, about one per 110 px of `room`."""
    want = max(2, int(room // 110))
    raw = span / want
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600,
                 43200, 86400, 172800, 604800):
        if step >= raw:
            break
    n = int(span // step)
    return [k * step for k in range(n + 1)]


def _seconds(v: float) -> str:
    if v < 60:
        return f"{v:g}s"

    return duration(v)


def timeline(report: dict, colors: dict[str, str], linked: set[str]) -> dict[str, str] | None:
    """{"axis": the time axis (kept in view), "rows": a row per task with attempts, grouped by
    phase}: each attempt a bar coloured by agent, failed ones pale with a red edge, the wait
    before a retry dashed, fallbacks (down) and escalations (up) marked."""
    tasks = [t for t in report["tasks"] if t["attempts"]]
    if not tasks:
        return None
    start = report["run"]["started_at"]
    end = max(a["finished_at"] or a["started_at"] for t in tasks for a in t["attempts"])
    span = max(end - start, 1e-3)
    phased = len({t.get("phase") for t in tasks}) > 1
    rows: list[tuple[str, Any]] = []  # ("phase", name) or ("task", task)
    by_phase: dict[str, list[dict]] = {}
    for t in tasks:
        by_phase.setdefault(t.get("phase") or "(no phase)", []).append(t)
    for name, members in by_phase.items():
        if phased:
            rows.append(("phase", f"{name} ({len(members)})"))
        rows += [("task", t) for t in members]
    label_w = max(120, min(LABEL_CHARS, max(len(label(t["id"])) for t in tasks)) * CHAR_W + 20)
    left, plot_w = label_w, TL_WIDTH - label_w - 16
    scale = plot_w / (span * 1.01)
    ticks = _ticks(span, plot_w)
    height = len(rows) * TL_ROW + 6
    body = [f'<path d="{"".join(f"M{left + v * scale:.1f} 0V{height}" for v in ticks)}" stroke="#e5e5e5"/>']
    bars: dict[tuple[str, bool], list[str]] = defaultdict(list)
    waits, marks, names = [], {k: [] for k in MARKS}, []
    for r, (kind, item) in enumerate(rows):
        y = r * TL_ROW + 3
        if kind == "phase":
            names.append(f'<rect x="0" y="{y - 1}" width="{TL_WIDTH}" height="{TL_ROW}" fill="#f0f2f5"/>'
                         f'<text x="4" y="{y + 12}" font-weight="600">{esc(label(item, 120))}</text>')
            continue
        t, previous = item, None
        text = f'<text x="{label_w - 8:.0f}" y="{y + 12}" text-anchor="end">{html.escape(label(t["id"]))}</text>'
        names.append(f'<a href="#task-{html.escape(t["id"])}">{text}</a>' if t["id"] in linked else text)
        for a in t["attempts"]:
            x0 = left + (a["started_at"] - start) * scale
            x1 = left + ((a["finished_at"] or end) - start) * scale
            failed = a["status"] not in ("succeeded", "progress")
            bars[(a["agent"] or "-", failed)].append(f"M{x0:.1f} {y + 2}h{max(x1 - x0, 1.5):.1f}v11h{-max(x1 - x0, 1.5):.1f}z")
            if previous is not None and x0 > previous + 1:
                waits.append(f"M{previous:.1f} {y + 7.5}H{x0:.1f}")
            previous = x1
        for ev in t["routing"]:
            if ev["kind"] in marks:
                marks[ev["kind"]].append((left + (ev["ts"] - start) * scale, y))
    for (agent, failed), paths in bars.items():
        style = (f'fill="{colors.get(agent, "#888888")}" fill-opacity="0.45" stroke="{FAILED_EDGE}" stroke-width="1"'
                 if failed else f'fill="{colors.get(agent, "#888888")}"')
        body.append(f'<path d="{"".join(paths)}" {style}/>')
    if waits:
        body.append(f'<path d="{"".join(waits)}" stroke="{WAIT}" stroke-dasharray="3 3"/>')
    for kind, points in marks.items():
        if points:
            color, way = MARKS[kind]
            tri = "".join(f"M{x - 4:.1f} {y + 7.5 - 5 * way:.1f}h8l-4 {10 * way}z" for x, y in points)
            body.append(f'<path d="{tri}" fill="{color}"/>')
    body += names
    axis = [f'<text x="{left + v * scale:.1f}" y="14" text-anchor="middle">{_seconds(v)}</text>' for v in ticks]
    axis.append(f'<path d="M{left} 20H{TL_WIDTH - 16}{"".join(f"M{left + v * scale:.1f} 20v5" for v in ticks)}" stroke="#555"/>')
    return {"axis": _svg(TL_WIDTH, 26, axis, "timeline-axis"), "rows": _svg(TL_WIDTH, height, body, "timeline-rows")}
