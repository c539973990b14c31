"""The run's report as one self-contained HTML page: inline CSS and inline SVG charts, no
script, and a Content-Security-Policy that lets the page fetch nothing."""

from __future__ import annotations

import datetime
import html
import json
from typing import Any

from ..package_data import read_text
from ..states import TaskState
from ..wording import duration as duration_text
from ..wording import routing_line
from . import charts, svg
from .data import FAILED_ATTEMPTS, check
from .text import shown

# Characters of task text (outputs, accept tails, errors) in the whole page: a 2,000-task
# run stays within 3 MB with its charts. Each task gets an equal share, at most TASK_CHARS.
PAGE_TEXT_CHARS = 500_000
TASK_CHARS = 12_000
MIN_SHARE = 160


def render(report: dict[str, Any]) -> str:
    """The HTML text. The plan and the timeline are SVG of our own; the cost and token chart
    needs matplotlib (the `report` extra): without it, its tables and a line saying how to
    get it."""
    colors = charts.agent_colors(list(report["agents"]))
    tasks = _task_views(report["tasks"])
    linked = {t["id"] for t in tasks if has_section(t)}
    drawn: dict[str, Any] = {"plan": svg.plan(report["tasks"], linked),
                             "timeline": svg.timeline(report, colors, linked)}
    try:
        charts.require()
    except charts.MissingLibrary:
        charts_note = f"The cost and token charts are left out: they need matplotlib ({charts.INSTALL})."
    else:
        drawn["spending"] = charts.spending(report, colors)
        charts_note = None
    from ..jinja import Environment  # Jinja: met only for an HTML page

    env = Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["text"] = _pre_text
    template = env.from_string(read_text("templates", "report.html.j2"))
    return template.render(
        run=report["run"], project=report["project"], charts=drawn, charts_note=charts_note, alerts=report["alerts"],
        tasks=tasks, counts=state_counts(report["tasks"]), priced=charts.priced(report),
        agents=[(a, colors[a]) for a in report["agents"]], agent_rows=list(report["agents"].items()),
        has_section=has_section, memory=report.get("memory") or {}, linked=linked,
        generated_at=report["generated_at"], state_class=state_class, label=svg.label,
        state_colors=list(svg.STATE_COLORS.items()), dark_states=svg.DARK_STATES,
        when=when, duration=duration, percent=percent)


def has_section(task: dict) -> bool:
    """Whether the task has its own part of the page (#task-ID): it ran, or it did not end
    done or not run."""
    return bool(task["attempts"]) or task["state"] not in (TaskState.DONE, "not run")


def state_class(state: str) -> str:
    """The CSS class of a state's badge (s-1, s-2, ... in STATE_COLORS' order)."""
    order = list(svg.STATE_COLORS)
    return f"s-{order.index(state) + 1}" if state in order else ""


def state_counts(tasks: list[dict]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t["state"]] = counts.get(t["state"], 0) + 1
    order = list(svg.STATE_COLORS)
    return sorted(counts.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))


def _task_views(tasks: list[dict]) -> list[dict]:
    """Each task with its texts clipped to its share of PAGE_TEXT_CHARS."""
    shown = [t for t in tasks if t["attempts"] or t["state"] not in (TaskState.DONE, "not run")]
    share = max(MIN_SHARE, min(TASK_CHARS, PAGE_TEXT_CHARS // max(1, len(shown))))
    views = []
    for t in tasks:
        view = {**t, "output": clip(_text(t["output"]), share // 2, t["id"]),
                "error": clip(t["error"], share // 2, t["id"], keep="middle"),
                "routing": [routing_line(ev) for ev in t["routing"]],
                "failed": _failures(t, share // 2)}
        if t["verified"]:
            checks = t["verified"]["checks"]
            view["verified"] = {**t["verified"], "checks": [
                {**c, "tail": clip(c["tail"], share // 4 // max(1, len(checks)), t["id"], keep="end")} for c in checks]}
        views.append(view)
    return views


def _failures(task: dict, limit: int) -> str | None:
    """Each failed attempt of the task: its errors, then each accept check that failed, as
    `$ command`, its exit and the end of its output (unless an error already shows them), in
    one text of about `limit` characters."""
    failed = [a for a in task["attempts"] if a["status"] in FAILED_ATTEMPTS or a.get("errors")]
    if not failed:
        return None
    each = max(MIN_SHARE // 2, limit // len(failed))
    parts = []
    for a in failed:
        errors = "\n".join(map(str, a.get("errors") or ()))
        checks = [check(c) for c in a.get("checks") or () if c.get("returncode") != 0]
        shown = [f"$ {c['command']}\n" + ("timed out" if c["timed_out"] else f"exit {c['returncode']}")
                 + (f"\n{c['tail']}" if c["tail"] else "")
                 for c in checks if c["command"] not in errors or (c["tail"] or "") not in errors]
        text = "\n".join(p for p in (errors, *shown) if p)
        parts.append(f"attempt {a['number']} ({a['agent']}, {a['status']}, iteration {a['iteration']}"
                     f"{', level ' + str(a['level']) if a['level'] else ''}):\n"
                     + (clip(text, each, task["id"], keep="middle") or "(no errors recorded)"))
    return "\n".join(parts)


def _pre_text(text: str):
    """Text for a <pre>: only & < > escaped (quotes need none there, and JSON is full of them),
    control and bidirectional characters shown (an RTL override would reorder what follows)."""
    from ..jinja import Markup

    return Markup(html.escape(shown(text), quote=False))


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def clip(text: str | None, limit: int, task: str = "TASK", keep: str = "start") -> str | None:
    """`text` cut to about `limit` characters, saying how much was left out and where it is.
    keep: start, end, or middle: the first line (what failed, which command) and the end (an
    output's last lines say why)."""
    if text is None or len(text) <= limit:
        return text
    note = f"[{len(text) - limit:,} more characters: harnessc log {task}]"
    if keep == "middle":
        head = text.split("\n", 1)[0][:limit // 2]
        return f"{head}\n{note}\n{text[len(text) - (limit - len(head)):]}"
    return f"{text[:limit]}\n{note}" if keep == "start" else f"{note}\n{text[-limit:]}"


def when(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float | None) -> str:
    return duration_text(seconds) if seconds is not None else "-"


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"
