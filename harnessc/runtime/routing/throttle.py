"""Adaptive concurrency per agent (AIMD): a 429 halves how many calls an agent may have in
flight, each answered call grows it back by 1/limit (about one more slot per round of
calls), never above the agent's `limits.concurrency` or the run's jobs. Agents are
throttled separately: one provider's rate limit does not slow the others.
"""

from __future__ import annotations

import asyncio
from typing import Mapping

from ...providers import AgentConfig
from ..agents.errors import AgentError


class Slots:
    """The calls one agent may have in flight."""

    def __init__(self, ceiling: int):
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)
        self.in_flight = 0
        self._waiting: list[asyncio.Future] = []  # the acquire()s waiting for a slot, in their order

    async def acquire(self) -> None:
        while self.in_flight >= int(self.limit):  # woken by free(): each looks again, in turn
            woken = asyncio.get_running_loop().create_future()
            self._waiting.append(woken)
            try:
                await woken
            finally:
                if woken in self._waiting:  # (cancelled before it was woken)
                    self._waiting.remove(woken)
        self.in_flight += 1

    def free(self, error: AgentError | None, answered: bool) -> None:
        """Give a slot back and wake the acquire()s waiting: at once, with nothing to await (a
        slot's end needs no task of its own to survive a cancel, which cost every call one)."""
        self.in_flight -= 1
        if error is not None and error.kind == "rate_limited":
            self.limit = max(1.0, self.limit / 2)
        elif answered:
            self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
        waiting, self._waiting = self._waiting, []
        for woken in waiting:
            if not woken.done():
                woken.set_result(None)


class Throttle:
    def __init__(self, agents: Mapping[str, AgentConfig], jobs: int):
        self.agents, self.jobs = agents, jobs
        self.slots: dict[str, Slots] = {}

    def of(self, agent: str) -> Slots:
        if agent not in self.slots:
            config = self.agents.get(agent)
            own = config.limits.concurrency if config else None
            self.slots[agent] = Slots(min(own, self.jobs) if own else self.jobs)
        return self.slots[agent]

    def slot(self, agent: str) -> "Slot":
        """`async with throttle.slot(agent) as call:` hold one of the agent's slots for one
        call; say how it went on the Call."""
        return Slot(self.of(agent))


class Slot:
    """One call's hold on a slot (Throttle.slot): a class, as every call takes one and a
    generator-based context manager cost more than the slot's own work."""

    __slots__ = ("slots", "call")

    def __init__(self, slots: Slots):
        self.slots = slots
        self.call: Call | None = None

    async def __aenter__(self) -> "Call":
        await self.slots.acquire()
        self.call = Call()
        return self.call

    async def __aexit__(self, kind, exc, tb) -> None:
        call = self.call
        self.slots.free(call.error if call.error else None, call.answered)


class Call:
    """How a call went: answered, or failed with `error` (neither: it never finished)."""

    answered = False
    error: AgentError | None = None
