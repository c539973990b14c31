"""The run's report as one self-contained HTML page: inline CSS and inline SVG charts, no
script, and a Content-Security-Policy that lets the page fetch nothing."""

from __future__ import annotations

import datetime
import html
import json
from typing import Any

from ..package_data import read_text
from ..wording import duration as duration_text, routing_line
from . import charts
from .data import FAILED_ATTEMPTS

# Characters of task text (outputs, accept tails, errors) in the whole page: a 2,000-task
# run stays within 3 MB with its charts. Each task gets an equal share, at most TASK_CHARS.
PAGE_TEXT_CHARS = 500_000
TASK_CHARS = 12_000
MIN_SHARE = 160


def render(report: dict[str, Any]) -> str:
    """The HTML text; without matplotlib (the `report` extra) the page has every table and a
    line saying how to get the charts."""
    try:
        charts.require()
    except charts.MissingLibrary:
        drawn: dict[str, str | None] = {}
        charts_note = f"The charts are left out: they need matplotlib ({charts.INSTALL})."
    else:
        colors = charts.agent_colors(list(report["agents"]))
        drawn = {"dag": charts.dag(report), "timeline": charts.timeline(report, colors),
                 "spending": charts.spending(report, colors)}
        charts_note = None
    from jinja2 import Environment

    env = Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["text"] = _pre_text
    template = env.from_string(read_text("templates", "report.html.j2"))
    return template.render(
        run=report["run"], project=report["project"], charts=drawn, charts_note=charts_note, alerts=report["alerts"],
        tasks=_task_views(report["tasks"]), counts=state_counts(report["tasks"]),
        generated_at=report["generated_at"], state_class=state_class,
        state_colors=list(charts.STATE_COLORS.items()), dark_states=charts.DARK_STATES,
        when=when, duration=duration, percent=percent)


def state_class(state: str) -> str:
    """The CSS class of a state's badge (s-1, s-2, ... in STATE_COLORS' order)."""
    order = list(charts.STATE_COLORS)
    return f"s-{order.index(state) + 1}" if state in order else ""


def state_counts(tasks: list[dict]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t["state"]] = counts.get(t["state"], 0) + 1
    order = list(charts.STATE_COLORS)
    return sorted(counts.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))


def _task_views(tasks: list[dict]) -> list[dict]:
    """Each task with its texts clipped to its share of PAGE_TEXT_CHARS."""
    shown = [t for t in tasks if t["attempts"] or t["state"] not in ("done", "not run")]
    share = max(MIN_SHARE, min(TASK_CHARS, PAGE_TEXT_CHARS // max(1, len(shown))))
    views = []
    for t in tasks:
        view = {**t, "output": clip(_text(t["output"]), share // 2, t["id"]),
                "routing": [routing_line(ev) for ev in t["routing"]],
                "failed": _failures(t, share // 2)}
        if t["verified"]:
            checks = t["verified"]["checks"]
            view["verified"] = {**t["verified"], "checks": [
                {**c, "tail": clip(c["tail"], share // 4 // max(1, len(checks)), t["id"], keep="end")} for c in checks]}
        views.append(view)
    return views


def _failures(task: dict, limit: int) -> str | None:
    """Each failed attempt of the task and its errors, in one text of about `limit` characters."""
    failed = [a for a in task["attempts"] if a["status"] in FAILED_ATTEMPTS or a.get("errors")]
    if not failed:
        return None
    each = max(MIN_SHARE // 2, limit // len(failed))
    return "\n".join(
        f"attempt {a['number']} ({a['agent']}, {a['status']}, iteration {a['iteration']}"
        f"{', level ' + str(a['level']) if a['level'] else ''}):\n"
        + (clip("\n".join(map(str, a.get("errors") or ())), each, task["id"]) or "(no errors recorded)")
        for a in failed)


def _pre_text(text: str):
    """Text for a <pre>: only & < > escaped (quotes need none there, and JSON is full of them),
    control and bidirectional characters shown (an RTL override would reorder what follows)."""
    from markupsafe import Markup

    from .text import shown

    return Markup(html.escape(shown(text), quote=False))


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def clip(text: str | None, limit: int, task: str = "TASK", keep: str = "start") -> str | None:
    """`text` cut to about `limit` characters, saying how much was left out and where it is."""
    if text is None or len(text) <= limit:
        return text
    note = f"[{len(text) - limit:,} more characters: harnessc log {task}]"
    return f"{text[:limit]}\n{note}" if keep == "start" else f"{note}\n{text[-limit:]}"


def when(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float | None) -> str:
    return duration_text(seconds) if seconds is not None else "-"


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"
