"""A run's ETA: the plan's estimate of each task's size, scaled by what this run measured.

A task weighs its estimated tokens in and out (plan.json's `estimate`; a task without one
weighs the scheduler's DEFAULT_TASK_WEIGHT: tasks of one size). Tokens are not seconds, so
the estimates alone give no time: once tasks of this run have ended,

    rate      = sum(measured seconds) / sum(weights)    over the tasks ended in this run that ran
    left(t)   = rate * weight(t)                         a task not started yet
              = max(rate * weight(t) - elapsed(t), 0)    a running task
    chain(t)  = rate * (weight of the longest chain of this run's tasks from t to the end)
                - elapsed(t)                             (its running time so far taken off)
    ETA       = max(sum(left) / jobs, max(chain))        over the tasks not ended

A task's measured seconds run from its first attempt in this run to its end (retries and waits
included). The ETA is None until a task has ended: before that nothing says what a token of
estimate takes on these agents.
"""

from __future__ import annotations

from typing import Iterable

from ...planfile import PlanNode
from ..schedule import longest_paths, task_weight


class Eta:
    """Kept from a run's events (`started`, `ended`); `seconds(now)` may be read from another
    thread (the live view's): it reads copies."""

    def __init__(self, nodes: dict[str, PlanNode], tasks: Iterable[str], jobs: int):
        run = {t: nodes[t] for t in tasks if t in nodes}
        children: dict[str, list[str]] = {t: [] for t in run}
        for n in run.values():
            for d in n.depends_on:
                if d in children:
                    children[d].append(n.id)
        self.weight = {t: task_weight(n) for t, n in run.items()}
        self.chain = longest_paths(run, children)
        self.jobs = max(1, jobs)
        self.unfinished = set(run)
        self.began: dict[str, float] = {}  # task -> monotonic time of its first attempt in this run
        self.measured = 0.0  # seconds the ended tasks took
        self.weighed = 0  # their weight

    def started(self, task: str, now: float) -> None:
        self.began.setdefault(task, now)

    def ended(self, task: str, now: float) -> None:
        self.unfinished.discard(task)
        began = self.began.pop(task, None)
        if began is not None and self.weight.get(task):
            self.measured += now - began
            self.weighed += self.weight[task]

    def seconds(self, now: float) -> float | None:
        """Seconds until the run's tasks have all ended; None before one has."""
        if not self.weighed:
            return None
        rate = self.measured / self.weighed
        began, unfinished = self.began.copy(), self.unfinished.copy()  # the event loop changes them
        work = chain = 0.0
        for t in unfinished:
            elapsed = now - began[t] if t in began else 0.0
            work += max(rate * self.weight[t] - elapsed, 0.0)
            chain = max(chain, rate * self.chain[t] - elapsed)
        return max(work / self.jobs, chain)
