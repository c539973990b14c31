"""Periodic status summaries (loop.summary_every): one line and a `summary` event.

A long unattended run says every so often where it stands - tasks done, running and failed,
iterations, cost, elapsed time - so a log read the next morning shows the night's course.
"""

from __future__ import annotations

from typing import Callable

from ...states import COMPLETE
from ...states import TaskState as S
from ...wording import duration
from .. import clock
from ..store.state import StateStore


class Summaries:
    def __init__(self, store: StateStore, every: float, targets: Callable[[], set[str]]):
        self.store, self.every, self.targets = store, float(every or 0), targets
        self.t0 = self.last = clock.monotonic()

    def tick(self) -> None:
        """Record a summary when `every` seconds have passed since the last one."""
        now = clock.monotonic()
        if self.every <= 0 or now - self.last < self.every:
            return
        self.last = now
        ids = self.targets()
        rows = [r for tid, r in self.store.tasks().items() if tid in ids]
        count = {state: sum(r["state"] in states for r in rows)
                 for state, states in ((S.DONE, COMPLETE), (S.RUNNING, (S.RUNNING,)), (S.FAILED, (S.FAILED,)),
                                       (S.BLOCKED, (S.BLOCKED,)))}
        self.store.event("summary", tasks=len(rows), **count,
                         iterations=sum(r["iterations"] or 0 for r in rows),
                         cost_usd=round(self.store.run_spent(self.store.run_id or ""), 6),
                         elapsed=round(now - self.t0, 1))


def describe(ev: dict) -> str:
    """The summary event as the displays print it."""
    blocked = f", {ev['blocked']} blocked" if ev.get("blocked") else ""  # a human decides: worth a word
    return (f"summary: {ev['done']}/{ev['tasks']} done, {ev['running']} running, {ev['failed']} failed{blocked} · "
            f"{ev['iterations']} iterations · ${ev['cost_usd']:.4f} · {duration(ev['elapsed'])}")
