"""The running summary, `.harness/memory/summary.json`: rewritten every `memory.every` tasks
that ended well and at a phase's end, by the cheap agent `memory.agent` when one is named,
else (or when its answer is unusable) from the entries, newest first.

When: after the ending task's landing. The scheduler tells `Refresher.ended()` once a task's
outcome is recorded and its change landed. From the entries, the refresh is a file write done
there and then (the next task's prompt has it). By the agent, it runs in the background, one
at a time (a refresh due while one runs is looked at again after it), never holding up a
landing or a start; the run's end waits for it (an abort cancels it: the file keeps the last
summary written). Whether one is due
is read from the files (ended tasks newer than the summary's `upto`; phases ended and not in its
`phases`), so a run that crashed before a refresh does it at its next task's end.

A refresh from the entries, between phase ends, is held (the next task's prompt reads it
from there) and reaches the file at most every WRITE_EVERY seconds and at the run's end: a
1,000-task run refreshed it 200 times, and each replace of the file cost a flush to disk.
A crash loses only that view of memory.jsonl, whose entries are all on disk: the summary on
disk is older, so the next run's first task end refreshes it (`due`). An agent's summary (a
paid call) and a phase's end are written at once.

The file is written atomically; a damaged one is said once and the summary starts empty.
An agent's answer is hostile text: control characters and markup removed, bounded to
`memory.summary_tokens`, shown to later tasks as what it is (a summary, not instructions).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable

from ...estimates import CHARS_PER_TOKEN, tokens_for_chars
from ..loop.assist import Assistant
from .store import MemoryStore, Settings, SummaryFile, now_iso

WRITE_EVERY = 1.0  # seconds a summary from the entries may wait before it is written (see above)
PURPOSE = "memory_summary"  # the call's purpose (HARNESSC_PURPOSE) and template, memory_summary.md.j2
ENTRY_CHARS = 12_000  # of the entries shown to the summary agent
FINAL = frozenset({"succeeded", "degraded", "done", "failed", "skipped", "blocked", "review"})
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
MARKUP = re.compile(r"</?\s*(?:decision|failure|constraint|promise|task|progress|system|memory)\b[^>]*>", re.I)


def clean(text: str, tokens: int) -> str:
    """An agent's summary as a prompt may carry it: no control characters, none of harnessc's
    markers (a summary must not report a decision or a promise), within `tokens`."""
    text = UNSAFE.sub("", text or "")
    while MARKUP.search(text):  # until none is left: removing one may join another ("<deci<task>sion>")
        text = MARKUP.sub("", text)
    lines = [line.rstrip() for line in text.strip().splitlines()]
    text = "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1]))
    cap = tokens * CHARS_PER_TOKEN
    return text if len(text) <= cap else text[: max(0, cap - 4)].rstrip() + " ..."


def fallback(entries: list[dict], tokens: int) -> str:
    """The deterministic summary: the entries' lines, newest first, within `tokens`: each
    ended task's line (it names the task's decisions) and each failure with its fix (the
    section lists the decisions and constraints themselves)."""
    lines: list[str] = []
    chars = -1  # the joined text's length (no newline before the first line)
    for e in reversed(entries):
        if e["kind"] == "done":
            line = "- " + e["text"]
        elif e["kind"] == "failure":
            fix = "".join(f"; {k}: {e[k]}" for k in ("cause", "fix") if e.get(k))
            line = f"- failure (task {e['task']}): {e['text']}{fix}"
        else:
            continue
        if tokens_for_chars(chars + 1 + len(line)) > tokens:
            break
        lines.append(line)
        chars += 1 + len(line)
    return "\n".join(lines)


def newer(newest: Iterable[dict], upto: str | None, n: int) -> bool:
    """Whether `len(pending(entries, upto)) >= n`, from the entries newest first (a run asks
    at every task's end: this looks at the newest few, not all)."""
    if n <= 0:
        return True
    count = 0
    for e in newest:
        if e["kind"] == "done":
            if e["id"] == upto:
                return False
            count += 1
            if count >= n:
                return True
    return False


class Refresher:
    """A run's refreshes of the summary: due after `every` ended tasks and at a phase's end,
    one at a time, in the background."""

    def __init__(self, root: Path, settings: Settings, memory: MemoryStore, say: Callable[[str], None], state: Any):
        self.root, self.settings, self.memory, self.state = root, settings, memory, state
        self.file = SummaryFile(memory, say)
        self.running: asyncio.Task | None = None
        self.again: tuple[Any, Any] | None = None  # (ctx, node) of a refresh due while one ran
        self._phases: dict[str, list[str]] | None = None  # phase -> its tasks' ids
        self._open: dict[str, deque[str]] = {}  # phase -> its tasks not yet seen final, in roadmap order
        self._written = -math.inf  # the loop time the file was last written by a held refresh
        self._later: asyncio.TimerHandle | None = None  # the held summary's write, when one waits

    def phases_ended(self, ctx: Any, node: Any) -> list[str]:
        """The phase of the task that ended, when every task of that phase is now final."""
        phase = getattr(node, "phase", None)
        if not phase:
            return []
        if self._phases is None:
            self._phases = {}
            for n in ctx.plan.nodes:
                if getattr(n, "phase", None):
                    self._phases.setdefault(n.phase, []).append(n.id)
            self._open = {p: deque(ids) for p, ids in self._phases.items()}
        # Tasks mostly end in roadmap order: the first task not yet seen final is looked at
        # (one row, not the whole phase at every task's end); none left: the whole phase is.
        left = self._open.get(phase, deque())
        while left:
            if ctx.store.tasks([left[0]]).get(left[0], {}).get("state") not in FINAL:
                return []
            left.popleft()
        same = self._phases.get(phase, [])
        rows = ctx.store.tasks(same)
        if all(rows.get(t, {}).get("state") in FINAL for t in same):
            return [phase]
        self._open[phase] = deque(t for t in same if rows.get(t, {}).get("state") not in FINAL)  # one went back
        return []

    def due(self, phases_ended: list[str]) -> list[str] | None:
        """The phases whose end a refresh now covers, or None when none is due."""
        data = self.file.read(text=False)
        covered = set(data.get("phases") or ())
        ended = [p for p in phases_ended if p not in covered]
        if ended or newer(self.memory.newest(), data.get("upto"), self.settings.every):
            return ended
        return None

    def ended(self, ctx: Any, node: Any) -> None:
        """A task's outcome is recorded (after its landing): refresh the summary when due. From
        the entries (no agent) at once: a file write, so the next task's prompt has it; by the
        agent in the background, one refresh at a time."""
        if self.running is not None and not self.running.done():
            self.again = (ctx, node)
            return
        phases = self.due(self.phases_ended(ctx, node))
        if phases is None:
            return
        if self.settings.agent:
            self.running = asyncio.get_running_loop().create_task(self._refresh(ctx, node), name="memory-summary")
            return
        try:
            self._write(self.file.read(text=False), self.memory.entries(), None, phases, node)
        except Exception as e:  # memory is advice: a refresh never fails the run
            self.state.event("memory_unwritten", node.id, message=f"could not refresh the summary: {e}"[:500])

    def cancel(self) -> None:
        self.again = None
        if self.running is not None:
            self.running.cancel()

    async def settle(self, abort: bool = False) -> None:
        """The run ends: the refresh in flight ends (an abort cancels it)."""
        if abort:
            self.cancel()
        if self.running is not None:
            try:
                await self.running
            except asyncio.CancelledError:
                if not self.running.cancelled():
                    raise  # the run itself is cancelled
            self.running = None
        self.write_held()

    async def _refresh(self, ctx: Any, node: Any) -> None:
        while True:
            try:
                await self.refresh(ctx, node)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # memory is advice: a refresh never fails the run
                self.state.event("memory_unwritten", node.id, message=f"could not refresh the summary: {e}"[:500])
            if self.again is None:
                return
            (ctx, node), self.again = self.again, None
            if self.due(self.phases_ended(ctx, node)) is None:
                return

    async def refresh(self, ctx: Any, node: Any) -> None:
        phases = self.due(self.phases_ended(ctx, node))
        if phases is None:
            return
        old, entries = self.file.read(), self.memory.entries()  # what this refresh covers (more may come meanwhile)
        text = await self._ask(ctx, node, old, entries, self.settings.summary_tokens) if self.settings.agent else None
        self._write(old, entries, text, phases, node)

    def _write(self, old: dict, entries: list[dict], text: str | None, phases: list[str], node: Any) -> None:
        """summary.json with the agent's `text`, else the entries' (atomically)."""
        by = self.settings.agent if text else "entries"
        upto = next((e["id"] for e in reversed(entries) if e["kind"] == "done"), None)
        data = {"by": by, "at": now_iso(), "run": getattr(self.state, "run_id", None), "upto": upto,
                "phases": sorted(set(old.get("phases") or ()) | set(phases))}
        if text or phases:
            # a paid answer, a phase's end: on disk at once
            self.file.write({"text": text or fallback(entries, self.settings.summary_tokens), **data})
        else:  # (its text is made when a prompt shows it, or at its write: most prompts do not)
            self._hold(data, lambda: fallback(entries, self.settings.summary_tokens))
        self.state.event("memory_summary", node.id, agent=by, phases=phases,
                         message=f"the memory summary was refreshed ({'by ' + by if text else 'from the entries'})")

    def _hold(self, data: dict, text: Callable[[], str]) -> None:
        """A summary from the entries: held, and written now when the last such write is
        WRITE_EVERY seconds old, else then (outside a run's event loop: now)."""
        self.file.hold(data, text)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.file.write_held()
            return
        wait = self._written + WRITE_EVERY - loop.time()
        if wait <= 0:
            self._written = loop.time()
            self.file.write_held()  # (an error: ended() says it)
        elif self._later is None:
            self._later = loop.call_later(wait, self.write_held)

    def write_held(self) -> None:
        """Write the held summary, if any: its time came, or the run ends (memory is advice:
        a failed write is an event)."""
        if self._later is not None:
            self._later.cancel()
            self._later = None
        with contextlib.suppress(RuntimeError):  # (outside an event loop)
            self._written = asyncio.get_running_loop().time()
        try:
            self.file.write_held()
        except Exception as e:
            self.state.event("memory_unwritten", None, message=f"could not refresh the summary: {e}"[:500])

    async def _ask(self, ctx: Any, node: Any, old: dict, entries: list[dict], tokens: int) -> str | None:
        """The summary agent's answer, cleaned; None when it gave nothing usable (the
        assist event says why)."""
        shown, size = [], 0
        for e in reversed(entries):  # newest first, within what the agent is shown
            line = (f"{e['kind']} (task {e['task']}): {e['text']}"
                    + "".join(f"; {k}: {e[k]}" for k in ("cause", "fix", "expires") if e.get(k)))
            size += len(line)
            if size > ENTRY_CHARS:
                break
            shown.append(line)
        variables = {"summary": old.get("text") or "", "entries": shown, "max_words": max(1, tokens * 3 // 4)}
        # the answer may be a little over (cleaning cuts it to the bound); far over is not a summary
        text = await Assistant(ctx, node, lambda: math.inf).ask(PURPOSE, self.settings.agent, 0,
                                                                 tokens * CHARS_PER_TOKEN * 2, tokens, variables)
        return clean(text, tokens) or None if text else None
