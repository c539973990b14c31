"""What a run shows: a live rich view on a TTY, else one plain line per event; the summary.

Both views name events in words (`describe`), count each final state on its own (a failed
task is not "done") and show rejected attempts. Without a terminal, a call that runs longer
than the heartbeat period prints a "still running" line every period, so a CI log shows the
run is alive.
"""

from __future__ import annotations

import os
import sys
import threading

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ...events import EVENTS
from ...states import TaskState
from ...textsafe import visible
from ...wording import duration, shorten
from .. import clock
from . import summaries
from .eta import Eta

# the events that end a task in the display, and the state each names
FINAL = {e.name: e.state for e in EVENTS.values()
         if e.state in (TaskState.SUCCEEDED, TaskState.DEGRADED, TaskState.FAILED, TaskState.BLOCKED, TaskState.SKIPPED,
                        TaskState.REVIEW)}
HEARTBEAT_SECONDS = 30.0  # a call running longer than this gets a "still running" line
HEARTBEAT_ENV = "HARNESSC_HEARTBEAT"  # overrides it, in seconds (tests lower it)
ATTEMPT_WORDS = {"rejected": "rejected", "error": "agent call failed", "progress": "no claim yet",
                 "stuck": "stuck", "interrupted": "interrupted", "over_limit": "over a limit"}
STOP_HINTS = {  # what stops harder, by where the stop came from
    "signal": "Ctrl-C again to abort",
    "file": "`harnessc stop --abort` cancels it",
    "max-time": "run --max-time reached; `harnessc stop --abort` cancels it",
    "limit": "a run limit reached (loop.termination); `harnessc stop --abort` cancels it",
}


def _paused(ev: dict) -> str:
    why = ev.get("reason") or {"inbox": "`harnessc pause`", "HARNESSC_PAUSE": "HARNESSC_PAUSE=1"}.get(ev.get("via"), "")
    return f"paused{f' ({why})' if why else ''}: in-flight calls finish, nothing new starts; `harnessc resume` continues"


# Alerts for alerts.log that the display already says in a line of its own (the pause, the
# resume, the run's last line, a task's stuck iteration and its end - `[n/m] T failed`,
# `degraded`, `blocked`): not printed twice.
SAID_ELSEWHERE = ("paused", "resumed", "run_finished", "stuck", "failed", "degraded", "blocked")

# What the operator's side of a run says (steering.py, alerts.py, summaries.py), in words.
OPERATOR_WORDS = {
    "alert": lambda ev: None if ev.get("alert") in SAID_ELSEWHERE else (
        f"alert {ev['level']}: " + (f"{ev['task']}: " if ev.get("task") else "") + ev["message"]),
    "summary": lambda ev: summaries.describe(ev),
    "paused": _paused,
    "resumed": lambda ev: "resumed",
    "instruction_received": lambda ev: (f"instruction for {ev.get('task') or 'every task'}"
                                        f"{' (urgent)' if ev.get('urgent') else ''}: {_first_line(ev.get('text'), 200)}"),
    "inbox_command": lambda ev: f"inbox: {ev['command']}" + (f" {ev['task']}" if ev.get("task") else ""),
    "inbox_error": lambda ev: f"inbox: {ev.get('file')}: {ev.get('reason')} (moved to inbox/processed/)",
    "steering_error": lambda ev: f"steering: {ev.get('reason')}",
    "budget_changed": lambda ev: f"run budget now ${ev['max_cost_usd']:g} ({ev.get('via')})",
    "agent_forced": lambda ev: (f"every task's next iteration goes to {ev['agent']}" if ev.get("agent")
                                else "routing back to the plan's agents") + f" ({ev.get('via')})",
    "output_not_written": lambda ev: f"warning: {ev['task'] + ': ' if ev.get('task') else ''}{ev.get('reason')}",
}


def heartbeat_seconds() -> float:
    try:
        value = float(os.environ.get(HEARTBEAT_ENV) or HEARTBEAT_SECONDS)
    except ValueError:
        return HEARTBEAT_SECONDS
    return value if value > 0 else HEARTBEAT_SECONDS


def _first_line(text: str | None, limit: int = 300) -> str:
    """The first line of `text`, shortened between words, its `commands` kept whole."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return shorten(line, limit)


class Progress:
    """Counts and per-task attempt numbers kept from the event stream."""

    def __init__(self):
        self.total = 0
        self.counts = dict.fromkeys(FINAL.values(), 0)
        self.cost = 0.0
        self.tokens = 0
        self.runner = None
        self.iteration: dict[str, int] = {}  # task -> its iteration in flight (or last)
        self.stuck_why: dict[str, str] = {}  # task -> why its iteration in flight was found stuck

    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    def on_event(self, ev: dict) -> None:
        kind = ev["kind"]
        if kind in FINAL:
            self.counts[FINAL[kind]] += 1
        elif kind == "run_planned":
            self.total = ev.get("tasks", 0)  # the tasks this run set out to finish
        elif kind == "attempt_started":
            self.iteration[ev["task"]] = ev["iteration"]
        elif kind == "stuck":  # comes before its attempt's end, which says it
            self.stuck_why[ev["task"]] = ev.get("reason") or ""
        elif kind == "attempt_finished":
            self.cost += ev.get("cost_usd") or 0.0
            self.tokens += ev.get("tokens") or 0

    def describe(self, ev: dict) -> str | None:
        """The event in words, or None for events not worth a line. What agents, servers and
        the operator wrote in it (errors, instructions) is shown, its control characters
        never obeyed (no clipboard write, title change or erase from an agent's output)."""
        line = self._words(ev)
        return visible(line) if line else None

    def _words(self, ev: dict) -> str | None:
        kind, task = ev["kind"], ev.get("task")
        if kind == "attempt_started":
            on = f"on {ev['agent']}" + (f", refinement {ev['level']}" if ev.get("level") else "")
            return f"{task}: started {on}" if ev["iteration"] == 1 else f"{task}: iteration {ev['iteration']} {on}"
        if kind == "attempt_finished" and ev.get("status") in ATTEMPT_WORDS:
            why = self.stuck_why.pop(task, None) if ev["status"] == "stuck" else None
            errs = ev.get("errors") or ([why] if why else [])
            return (f"{task}: iteration {self.iteration.get(task, '?')} {ATTEMPT_WORDS[ev['status']]}"
                    + (f": {_first_line(errs[0], 200)}" if errs else ""))
        if kind in FINAL:
            state, error = FINAL[kind], _first_line(ev.get("error")).removeprefix(f"{FINAL[kind]}: ")  # "blocked: stuck ..."
            if error.startswith(f"{state} ("):  # "degraded (fallback): ...": the state once
                return f"[{self.finished}/{self.total}] {task} {error}"
            return f"[{self.finished}/{self.total}] {task} {state}" + (f": {error}" if error else "")
        if kind in OPERATOR_WORDS:
            return OPERATOR_WORDS[kind](ev)
        if kind == "budget_exhausted":
            return f"budget reached: {_first_line(ev.get('message'))}"
        if kind == "stop_requested":
            if ev.get("mode") == "abort":
                return "aborting: cancelling in-flight work"
            hint = STOP_HINTS.get(ev.get("via") or "")
            return "stopping: finishing in-flight work" + (f" ({hint})" if hint else "")
        return None

    def tally(self) -> str:
        """'2 succeeded · 1 failed' (the states seen so far)."""
        return " · ".join(f"{n} {state}" for state, n in self.counts.items() if n) or "0 finished"


class PlainDisplay(Progress):
    """One line per meaningful event, and heartbeats for long calls: for logs, CI and pipes."""

    def __init__(self, stream=None, heartbeat: float | None = None):
        super().__init__()
        self.stream = stream or sys.stdout
        self.heartbeat = heartbeat or heartbeat_seconds()
        self.calls: dict[str, list] = {}  # task -> [call start, last line] (monotonic)
        self.lock = threading.Lock()  # the event loop and the heartbeat thread both print
        self.done = threading.Event()
        self.beats: threading.Thread | None = None
        self.copy = None  # also given each line, under the lock: the run's log (runlog.py), made once for both

    def start(self, runner, total: int) -> None:
        self.runner = runner
        self.beats = threading.Thread(target=self._beat, name="harnessc-heartbeat", daemon=True)
        self.beats.start()

    def on_event(self, ev: dict) -> None:
        with self.lock:
            super().on_event(ev)
            kind, task = ev["kind"], ev.get("task")
            if kind == "attempt_started":
                now = clock.monotonic()
                self.calls[task] = [now, now, ev["agent"]]
            elif kind == "attempt_finished" or kind in FINAL:
                self.calls.pop(task, None)
            line = self.describe(ev)
            if line:
                self._print(line)

    def _beat(self) -> None:
        while not self.done.wait(min(1.0, self.heartbeat / 4)):
            now = clock.monotonic()
            with self.lock:
                for task, call in sorted(self.calls.items()):
                    if now - call[1] >= self.heartbeat:
                        call[1] = now
                        self._print(f"{task}: still running (iteration {self.iteration.get(task, '?')}"
                                    f" on {call[2]}, {now - call[0]:.0f}s)")

    def _print(self, line: str) -> None:
        # one write, not print's two (the line, then its end): on an unbuffered stream
        # (PYTHONUNBUFFERED, a pipe read line by line) each is a system call
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        finally:
            if self.copy is not None:
                self.copy(line)

    def close(self) -> None:
        self.done.set()
        if self.beats is not None:
            self.beats.join()


class LiveDisplay(Progress):
    """A rich live view: a progress bar with the ETA (eta.py), counts by state, cost against
    the budget; each running task with its iteration, agent, time so far and the last line
    its agent printed. Failures, rejected attempts, budget and stops are printed above it
    in words."""

    SHOWN = ("attempt_finished", "task_failed", "task_blocked", "task_degraded", "budget_exhausted", "stop_requested",
             *OPERATOR_WORDS)
    QUIET_ATTEMPTS = ("succeeded", "progress", "interrupted")  # the live table shows these
    REFRESH = 4  # redraws a second
    ROWS = 20  # running tasks listed; the rest are counted
    ETA_EVERY = 1.0  # seconds between two computations of the ETA (a pass over the tasks left)

    def __init__(self, console: Console):
        super().__init__()
        self.console = console
        self.live: Live | None = None
        self.t0 = clock.monotonic()
        self.eta = Eta({}, (), 1)
        self.eta_at: tuple[float, float | None] = (float("-inf"), None)  # (when, seconds left then)
        self.spent_before = 0.0  # what earlier runs spent of the budget (it is kept across resumes)

    def start(self, runner, total: int) -> None:
        self.runner = runner
        runner.show_lines = True  # the agents' last lines reach runner.live
        self.eta = Eta(runner.nodes, runner.planned.todo if runner.planned else (), runner.jobs)
        self.spent_before = runner.store.spent()
        self.live = Live(get_renderable=self._render, console=self.console,
                         refresh_per_second=self.REFRESH, transient=True)
        self.live.start()

    def on_event(self, ev: dict) -> None:
        super().on_event(ev)
        kind = ev["kind"]
        if kind == "attempt_started":
            self.eta.started(ev["task"], clock.monotonic())
        elif kind in FINAL:
            self.eta.ended(ev["task"], clock.monotonic())
        if kind in self.SHOWN and ev.get("status") not in self.QUIET_ATTEMPTS:
            line = self.describe(ev)
            if line:  # one line, wrapped by the terminal: a command in it is never broken in two
                self.console.print(escape(line), soft_wrap=True)

    def _render(self):
        # Text lines laid out here: a rich Table of 16 rows took 8x longer to draw (bench/display.py)
        now = clock.monotonic()
        began = self.eta.began.copy()  # the event loop changes these: copies
        # a task is running from its first attempt's start to its end
        running = {t: info for t, info in (self.runner.live.copy() if self.runner else {}).items() if t in began}
        paused = "paused · " if self.runner and self.runner.steering.paused else ""
        done = round(BAR * self.finished / self.total) if self.total else 0
        bar = Text.assemble(("━" * done, "green"), ("━" * (BAR - done), "grey35"),
                            f" {self.finished}/{self.total} · {self.eta_text(now)} · {duration(now - self.t0)}")
        head = Text(f"{paused}{self.finished}/{self.total} finished: {self.tally()} · {len(running)} running"
                    f" · {self.cost_text()} · {self.tokens} tokens")
        shown = sorted(running.items())[:self.ROWS]
        rows = [(tid, f"iteration {info['iteration']}", info["agent"],
                 duration(now - began[tid])) for tid, info in shown]
        widths = [max((len(r[i]) for r in rows), default=0) for i in range(4)]
        lines = [bar, head]
        for row, (_, info) in zip(rows, shown):
            line = Text("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths)), no_wrap=True, overflow="ellipsis")
            line.append("  " + visible((info.get("line") or "")[:LINE_CHARS]), style="dim")  # shown, not obeyed
            lines.append(line)
        if len(running) > self.ROWS:
            lines.append(Text(f"and {len(running) - self.ROWS} more running"))
        return Group(*lines)

    def eta_text(self, now: float) -> str:
        """'ETA ~3m' (counting down between two computations), 'ETA unknown' before a task ended."""
        when, left = self.eta_at
        if now - when >= self.ETA_EVERY:
            self.eta_at = (when, left) = (now, self.eta.seconds(now))
        if left is None:
            return "ETA unknown"
        return f"ETA ~{duration(max(left - (now - when), 0.0))}"

    def cost_text(self) -> str:
        """This run's cost, against the run budget when there is one."""
        limit = self.runner.budget.run_limit if self.runner else None
        cost = f"${self.cost:.4f}"
        if limit is None:
            return cost
        if self.spent_before:
            return f"{cost} this run · ${self.spent_before + self.cost:.4f} of ${limit:.2f} budget"
        return f"{cost} of ${limit:.2f} budget"

    def close(self) -> None:
        if self.live:
            self.live.stop()


BAR = 40  # characters of the live view's progress bar
LINE_CHARS = 300  # shown of an agent's last line; the terminal's width cuts it further


def make_display(console: Console):
    return LiveDisplay(console) if console.is_terminal else PlainDisplay()


def summary_table(tasks: list[dict], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False)
    for col, just in (("task", "left"), ("state", "left"), ("attempts", "right"), ("agent", "left"),
                      ("tokens", "right"), ("cost", "right"), ("time", "right")):
        table.add_column(col, justify=just)
    style = {"succeeded": "green", "done": "green", "degraded": "yellow", "failed": "red", "blocked": "red",
             "skipped": "magenta", "running": "cyan", "interrupted": "yellow", "review": "blue"}
    for t in tasks:
        table.add_row(
            t["id"], Text(t["state"], style=style.get(t["state"], "")), str(t.get("attempts") or 0),
            agent_cell(t), str(t.get("tokens") or 0), f"${(t.get('cost_usd') or 0):.4f}",
            f"{t['duration']:.2f}s" if t.get("duration") is not None else "-")
    return table


SUMMARY_COLUMNS = (("task", "<"), ("state", "<"), ("attempts", ">"), ("agent", "<"),
                   ("tokens", ">"), ("cost", ">"), ("time", ">"))


def agent_cell(t: dict) -> str:
    """The agent, or the agents a task moved through (fallback, escalation): `weak > strong`."""
    return " > ".join(t["agents"]) if t.get("agents") else (t.get("agent") or "-")


def _summary_cells(t: dict) -> tuple[str, ...]:
    return (t["id"], t["state"], str(t.get("attempts") or 0), agent_cell(t),
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


def print_summary(console: Console, tasks: list[dict], title: str | None = None, plain: str | None = None) -> None:
    """A rich table on a terminal, plain aligned text otherwise (`plain`: that text, made already)."""
    if console.is_terminal:
        console.print(summary_table(tasks, title=title))
    else:
        print(plain if plain is not None else plain_summary(tasks, title), file=console.file, flush=True)
