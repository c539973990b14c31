"""What a run shows: a live rich view on a TTY, else one plain line per event; the summary."""

from __future__ import annotations

import sys
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

FINAL = {"task_succeeded", "task_degraded", "task_failed", "task_skipped"}


class Progress:
    """Counts kept from the event stream."""

    def __init__(self):
        self.total = 0
        self.finished = 0
        self.cost = 0.0
        self.tokens = 0
        self.runner = None

    def on_event(self, ev: dict) -> None:
        kind = ev["kind"]
        if kind in FINAL:
            self.finished += 1
        elif kind == "attempt_finished":
            self.cost += ev.get("cost_usd") or 0.0
            self.tokens += ev.get("tokens") or 0


class PlainDisplay(Progress):
    """One line per meaningful event: for logs, CI and pipes."""

    def __init__(self, stream=None):
        super().__init__()
        self.stream = stream or sys.stdout

    def start(self, runner, total: int) -> None:
        self.runner, self.total = runner, total

    def on_event(self, ev: dict) -> None:
        super().on_event(ev)
        kind, task = ev["kind"], ev.get("task")
        line = None
        if kind == "attempt_started":
            line = f"{task}: iteration {ev['iteration']} on {ev['agent']}" + (
                f" (refinement {ev['level']})" if ev.get("level") else "")
        elif kind == "attempt_finished" and ev.get("status") not in ("succeeded",):
            errs = ev.get("errors") or []
            line = f"{task}: attempt {ev['status']}" + (f": {errs[0].splitlines()[0][:200]}" if errs else "")
        elif kind in FINAL:
            line = f"[{self.finished}/{self.total}] {task} {kind[5:]}" + (
                f": {ev['error'].splitlines()[0][:300]}" if ev.get("error") else "")
        elif kind == "budget_exhausted":
            line = f"budget: {ev.get('message')}"
        elif kind == "stop_requested":
            line = ("stopping: finishing in-flight work (Ctrl-C again to abort)"
                    if ev.get("mode") == "stop" else "aborting: cancelling in-flight work")
        if line:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        pass


class LiveDisplay(Progress):
    """A rich live view: done/total, running tasks with their iteration, cost so far."""

    def __init__(self, console: Console):
        super().__init__()
        self.console = console
        self.live = None
        self.t0 = time.monotonic()
        self.notes: list[str] = []

    def start(self, runner, total: int) -> None:
        self.runner, self.total = runner, total
        self.live = Live(get_renderable=self._render, console=self.console,
                         refresh_per_second=8, transient=True)
        self.live.start()

    def on_event(self, ev: dict) -> None:
        super().on_event(ev)
        if ev["kind"] in ("task_failed", "budget_exhausted", "stop_requested"):
            msg = ev.get("error") or ev.get("message") or ev.get("mode")
            self.console.print(f"[bold]{ev['kind']}[/] {ev.get('task') or ''} {msg or ''}".strip())

    def _render(self):
        head = Text(f"{self.finished}/{self.total} done · {len(self.runner.live) if self.runner else 0} running"
                    f" · ${self.cost:.4f} · {self.tokens} tokens · {time.monotonic() - self.t0:.0f}s")
        table = Table(box=None, show_header=False, padding=(0, 1))
        for tid, info in sorted((self.runner.live if self.runner else {}).items())[:20]:
            table.add_row("…", tid, f"iteration {info['iteration']}", info["agent"])
        return Group(head, table)

    def close(self) -> None:
        if self.live:
            self.live.stop()


def make_display(console: Console):
    return LiveDisplay(console) if console.is_terminal else PlainDisplay()


def summary_table(tasks: list[dict], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False)
    for col, just in (("task", "left"), ("state", "left"), ("attempts", "right"), ("agent", "left"),
                      ("tokens", "right"), ("cost", "right"), ("time", "right")):
        table.add_column(col, justify=just)
    style = {"succeeded": "green", "done": "green", "degraded": "yellow", "failed": "red",
             "skipped": "magenta", "running": "cyan"}
    for t in tasks:
        table.add_row(
            t["id"], Text(t["state"], style=style.get(t["state"], "")), str(t.get("attempts") or 0),
            t.get("agent") or "-", str(t.get("tokens") or 0), f"${(t.get('cost_usd') or 0):.4f}",
            f"{t['duration']:.2f}s" if t.get("duration") is not None else "-")
    return table


SUMMARY_COLUMNS = (("task", "<"), ("state", "<"), ("attempts", ">"), ("agent", "<"),
                   ("tokens", ">"), ("cost", ">"), ("time", ">"))


def _summary_cells(t: dict) -> tuple[str, ...]:
    return (t["id"], t["state"], str(t.get("attempts") or 0), t.get("agent") or "-",
            str(t.get("tokens") or 0), f"${(t.get('cost_usd') or 0):.4f}",
            f"{t['duration']:.2f}s" if t.get("duration") is not None else "-")


def plain_summary(tasks: list[dict], title: str | None = None) -> str:
    """The summary table as plain aligned text: for pipes and logs (rich's table costs about
    half a millisecond a row to lay out, which a 10,000-task run's log does not need)."""
    rows = [tuple(c for c, _ in SUMMARY_COLUMNS)] + [_summary_cells(t) for t in tasks]
    widths = [max(len(r[i]) for r in rows) for i in range(len(SUMMARY_COLUMNS))]
    lines = [title] if title else []
    for n, r in enumerate(rows):
        lines.append("  ".join(f"{cell:{just}{w}}" for cell, (_, just), w in zip(r, SUMMARY_COLUMNS, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_summary(console: Console, tasks: list[dict], title: str | None = None) -> None:
    """A rich table on a terminal, plain aligned text otherwise."""
    if console.is_terminal:
        console.print(summary_table(tasks, title=title))
    else:
        print(plain_summary(tasks, title), file=console.file, flush=True)
