"""The `explore` recovery rung (seed 003 §3.2E): branch exploration for a stuck loop task.

From the stuck point - the task's worktree as it is, committed as a snapshot - a few branches
(harness.yaml `loop.recovery.explore_approaches`, 2 or 3) each make one call of the task's
current prompt at once, each in its own worktree at the snapshot (a `Branch`: an approach
of runtime/approaches.py that stops after one iteration). Each is verified and measured as
a loop iteration is (progress.py); the task goes on from the branch with the best progress
score - a branch that verified wins - with that branch's files in its own worktree (the
snapshot undone: what lands is still one commit on the task's base). When no branch made
progress, the task goes on from the stuck point as it was. Every branch's call is an
attempt of the task (charged, logged); the branches' worktrees are removed.

An isolated task only (the branches need worktrees): elsewhere the rung is passed over.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Any

from ..gitrepo import IsolationError
from ..providers import AgentConfig
from ..states import TaskState
from .agents.base import AgentError
from .approaches import ApproachRun
from .iteration import Done, answer_end
from .routing.router import Route
from .verify import Verdict, verify

DEFAULT_BRANCHES = 3


class Branch(ApproachRun):
    """Branch j of m: one call of the task's current prompt in its own worktree."""

    def __init__(self, parent: Any, k: int, j: int, m: int):
        super().__init__(parent.ctx, parent.node, Route(list(parent.route.agents), parent.route.index), k, m)
        self.j = j
        self.original, self.shared_ends = parent.original, parent.shared_ends
        self.base = self.prompt = parent.prompt + branch_line(j, m)
        self.p.iteration = parent.p.iteration
        self.progress = -1.0  # its iteration's progress score; inf: it verified
        self.task_floors = parent.floors

    async def floors(self):
        """min_passed: base counts at the task's base, not at the snapshot (the agent's own work)."""
        return await self.task_floors()

    def request(self, cfg: AgentConfig):
        return dataclasses.replace(super().request(cfg), approach=self.j)  # HARNESSC_APPROACH=j

    async def explore(self, snapshot: str) -> None:
        self.attempt = await self.iso.open(self.node, base=snapshot, k=self.k)  # made: verified here
        self.measure_in(self.attempt)
        try:
            name, agent, cfg = await self.choose_agent()
            cost, tokens = await self.reserve(cfg)
            resp = await self.call(name, agent, cfg, cost, tokens)
            if isinstance(resp, AgentError):
                return
            errors = await self.guarded()  # a protected file changed: put back, never verified (protect.py)
            verdict = Verdict(claim=True, errors=errors) if errors else \
                await verify(self.node, self.contract, resp.text, self.workdir, max(0.1, self.time_left()),
                             floors=await self.floors())
            seen = await self.loop.observe(name, resp.text, verdict.errors, verdict.checks, succeeded=verdict.ok)
            self.progress = math.inf if verdict.ok else seen.evidence.score
            end = answer_end("progress", resp, errors=verdict.errors, checks=verdict.checks, seen=seen)
            await self.log.finish(dataclasses.replace(end, loop_state=None))  # the branch's progress only
            await self.iso.commit(self.attempt, f"harnessc: {self.tid}: exploration branch {self.j}")
        except Done:
            return  # refused by a budget: this branch made no progress
        except IsolationError as e:  # tampered with its checkout: this branch counts for nothing
            self.progress = -math.inf
            self.store.event("exploration_rejected", self.tid, message=str(e)[:500])
        except asyncio.CancelledError:
            self.log.interrupted()
            raise


def branch_line(j: int, m: int) -> str:
    return (f"\n\nExploration branch {j} of {m}: the task is stuck; {m} branches try different ways forward "
            f"from here at once. Try a way forward of your own.\n")


async def explore_from(run: Any, why: str) -> None:
    """Run the branches from `run`'s stuck point and go on from the best one (see above)."""
    cfg = (run.ctx.plan.loop or {}).get("recovery") or {}
    m = max(2, min(3, int(cfg.get("explore_approaches") or DEFAULT_BRANCHES)))
    iso, attempt = run.iso, run.attempt
    await iso.make(attempt)  # executor ray makes it only when a change came back: at its base then
    await iso.commit(attempt, f"harnessc: {run.tid}: the stuck point")
    snapshot = await asyncio.to_thread(lambda: attempt.git.run("rev-parse", "HEAD", worktree=False).strip())
    offset = 100 * getattr(run, "k", 1)  # worktrees <n>-<offset + j>, apart from approaches' <n>-<k>
    branches = [Branch(run, offset + j, j, m) for j in range(1, m + 1)]
    try:
        await asyncio.gather(*(b.explore(snapshot) for b in branches))
        best = max(branches, key=lambda b: (b.progress, -b.j))
        chosen = best if best.progress > 0 and best.attempt is not None and best.attempt.change else None
        await asyncio.to_thread(_go_on_from, iso, attempt, chosen.attempt.change if chosen else None)
        if run.remote is not None:  # executor ray: the task's next call starts from these files
            await run.remote.took_over()
        run.store.event("explored", run.tid, chosen=chosen.j if chosen else None,
                        progress={b.j: (None if b.progress < 0 else
                                        ("verified" if math.isinf(b.progress) else round(b.progress, 3)))
                                  for b in branches},
                        message=(f"branch {chosen.j} of {m} chosen" if chosen else
                                 f"no branch of {m} made progress: going on from the stuck point"))
    finally:
        for b in branches:
            if b.attempt is not None:
                await iso.close(run.node, TaskState.CANCELLED, k=b.k)


def _go_on_from(iso: Any, attempt: Any, sha: str | None) -> None:
    """The task's worktree holds `sha`'s files (None: its own) on its base commit, with
    nothing committed: its change is still made in one commit when it verifies."""
    if sha is not None:
        iso.trees.checkout(attempt, sha)
    attempt.git.run("reset", "-q", "--soft", attempt.base)
    iso.trees.git.run("update-ref", attempt.ref, attempt.base, worktree=False)
    attempt.change = None
