"""The run's report as Markdown for a CI job summary or a PR comment ($GITHUB_STEP_SUMMARY).

GitHub takes at most 65,536 characters: the summary and the failures always fit (each
failure's text is cut to fit), then the task table, as long as it fits; the last line says
where the full report is.

Everything a run produced is held as text (text.py): ids, agent names and the run's message in
code spans, each failure's error in a fenced block no line of it can close; nothing of it
becomes a link, an image, HTML or a comment in a CI summary.
"""

from __future__ import annotations

from typing import Any

from ..states import TaskState
from .charts import priced
from .html import clip, duration, percent, state_counts
from .text import code, fenced

LIMIT = 65_536
RESERVE = 600  # for the closing lines


def render(report: dict[str, Any], full_report: str | None) -> str:
    run = report["run"]
    exit_code = run["exit_code"] if run["exit_code"] is not None else "-"
    has_cost = priced(report)  # no agent with a price: tokens only, and the summary says so
    run_cost = f"${run['cost_usd']:.4f}" if has_cost else "no price set"
    head = [f"## harnessc run {code(run['id'])}: {run['status']}", "",
            f"{code(run.get('message') or '')} (exit {exit_code})".strip(), "",
            "| states | cost | tokens | cache share | attempts | duration |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            f"| {', '.join(f'{n} {s}' for s, n in state_counts(report['tasks']))} | {run_cost} "
            f"| {run['tokens']:,} | {percent(run['cache_share'])} | {run['attempts']} | {duration(run['duration'])} |", ""]
    failures = [t for t in report["tasks"]
                if t["state"] in (TaskState.FAILED, TaskState.BLOCKED, TaskState.DEGRADED, TaskState.INTERRUPTED)]
    tail = [f"Full report: {code(full_report)}" if full_report
            else f"Full report: {code('harnessc report --run ' + run['id'])} writes it"]
    budget = LIMIT - RESERVE - _size(head) - _size(tail)
    body: list[str] = []
    if failures:
        body += [f"### Failures ({len(failures)})", ""]
        each = max(80, (budget // 2) // len(failures) - 60)
        for t in failures:
            body += [f"{code(t['id'])} {t['state']}:", "",
                     fenced(clip(t["error"] or "no error recorded", each, t["id"])), ""]
    table = ["### Tasks", "", "| task | state | agent | attempts | tokens |" + (" cost |" if has_cost else ""),
             "| --- | --- | --- | ---: | ---: |" + (" ---: |" if has_cost else "")]
    rows = [f"| {code(t['id'], cell=True)} | {t['state']} | {code(t['agent'] or '-', cell=True)} "
            f"| {len(t['attempts'])} | {t['tokens']:,} |" + (f" ${t['cost_usd']:.4f} |" if has_cost else "")
            for t in report["tasks"] if t["attempts"] or t["state"] not in (TaskState.DONE, "not run")]
    room = budget - _size(body) - _size(table)
    kept = []
    for row in rows:
        if room - len(row) - 1 < 0:
            break
        kept.append(row)
        room -= len(row) + 1
    if kept:
        body += table + kept
        if len(kept) < len(rows):
            body.append(f"\n{len(rows) - len(kept)} more tasks: see the full report.")
        body.append("")
    text = "\n".join(head + body + tail) + "\n"
    return text[:LIMIT]  # the budget above keeps it shorter; never longer


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)

