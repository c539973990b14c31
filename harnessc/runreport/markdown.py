"""The run's report as Markdown for a CI job summary or a PR comment ($GITHUB_STEP_SUMMARY).

GitHub takes at most 65,536 characters: the summary and the failures always fit (each
failure's text is cut to fit), then the task table, as long as it fits; the last line says
where the full report is. Run memory (the running summary and the newest entries, each with
the task that recorded it) comes before the task table, in at most a quarter of the room.

Everything a run produced is held as text (text.py): ids, agent names and the run's message in
code spans, each failure's error in a fenced block no line of it can close; nothing of it
becomes a link, an image, HTML or a comment in a CI summary.
"""

from __future__ import annotations

from typing import Any

from ..runtime.memory.store import KINDS
from ..states import TaskState
from .charts import priced
from .html import clip, duration, percent, state_counts
from .text import code, fenced

LIMIT = 65_536
RESERVE = 600  # for the closing lines
ENTRY_CHARS = 400  # of one memory entry's text (and of its cause, its fix)
MEMORY_LEAST = 1_000  # below this room the Memory section is one line pointing to `harnessc memory`


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
    body += _memory(report.get("memory") or {}, min(budget // 4, budget - _size(body)))
    table = ["### Tasks", "", "| task | state | agent | attempts | tokens |" + (" cost |" if has_cost else ""),
             "| --- | --- | --- | ---: | ---: |" + (" ---: |" if has_cost else "")]
    rows = [f"| {code(t['id'], cell=True)} | {t['state']} | {code(t['agent'] or '-', cell=True)} "
            f"| {len(t['attempts'])} | {t['tokens']:,} |" + (f" ${t['cost_usd']:.4f} |" if has_cost else "")
            for t in report["tasks"] if t["attempts"] or t["state"] not in (TaskState.DONE, "not run")]
    kept = _fit(rows, budget - _size(body) - _size(table))
    if kept:
        body += table + kept
        if len(kept) < len(rows):
            body.append(f"\n{len(rows) - len(kept)} more tasks: see the full report.")
        body.append("")
    text = "\n".join(head + body + tail) + "\n"
    return text[:LIMIT]  # the budget above keeps it shorter; never longer


def _fit(rows: list[str], room: int) -> list[str]:
    """The first rows that fit in `room` characters, a newline after each."""
    kept = []
    for row in rows:
        room -= len(row) + 1
        if room < 0:
            break
        kept.append(row)
    return kept


def _memory(memory: dict[str, Any], room: int) -> list[str]:
    """The Memory section within `room` characters: the summary (cut to a third of it) in a
    fenced block, then a row per entry, newest first, as many as fit; [] when memory is empty."""
    if not (memory.get("summary") or memory.get("entries")):
        return []
    if room < MEMORY_LEAST:  # the failures took the room: say where memory is
        return ["Memory: `harnessc memory` lists what tasks recorded for the others.", ""]
    lines = ["### Memory", "", "What tasks recorded for the others (`harnessc memory` lists it, "
             "`harnessc memory forget ID` removes an entry), as it is now.", ""]
    if memory.get("summary"):
        by = memory.get("summary_by")
        lines += [f"Running summary ({'by ' + code(by) if by and by != 'entries' else 'from the entries'}):", "",
                  fenced(_cut(memory["summary"], room // 3)), ""]
    table = ["| id | kind | task | entry |", "| --- | --- | --- | --- |"]
    rows = [_entry_row(e) for e in memory.get("entries") or ()]
    kept = _fit(rows, room - _size(lines) - _size(table) - 80)  # 80: the line saying how many are left out
    if kept:
        lines += table + kept + [""]
    more = len(rows) - len(kept) + (memory.get("more") or 0)
    if more:
        lines += [f"{more} more entr{'y' if more == 1 else 'ies'}: `harnessc memory` lists them.", ""]
    return lines


def _entry_row(e: dict[str, Any]) -> str:
    """An entry's table row: every text a code span on one line, its pipes escaped."""
    text = code(_cut(e["text"], ENTRY_CHARS), cell=True)
    text += "".join(f"; {k}: {code(_cut(e[k], ENTRY_CHARS), cell=True)}" for k in ("cause", "fix") if e.get(k))
    if e.get("expires"):
        text += " (expired)" if e.get("expired") else (
            " (until the run ends)" if e["expires"] == "run" else f" (until {code(e['expires'], cell=True)})")
    task = code(e["task"], cell=True) + (" (this run)" if e.get("this_run") else "")
    kind = e["kind"] if e["kind"] in KINDS else code(e["kind"], cell=True)  # the store checks it; a word
    return f"| {code(e['id'], cell=True)} | {kind} | {task} | {text} |"


def _cut(text: Any, limit: int) -> str:
    """`text` to `limit` characters, saying how many more `harnessc memory` shows."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]} [{len(text) - limit:,} more characters: harnessc memory]"


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)

