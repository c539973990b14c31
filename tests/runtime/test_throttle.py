"""Adaptive concurrency per agent (runtime/routing/throttle.py): AIMD on 429s, agents apart."""

from __future__ import annotations

import asyncio

from harnessc.providers import agent_config
from harnessc.runtime.agents.errors import AgentError
from harnessc.runtime.routing.throttle import Slots, Throttle

RATE_LIMITED = AgentError("429", kind="rate_limited")
OVERLOADED = AgentError("529", kind="overloaded")


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_429_halves_the_slots_and_answers_grow_them_back():
    async def scenario():
        slots = Slots(4)
        for _ in range(4):
            await slots.acquire()
        waiting = asyncio.ensure_future(slots.acquire())
        await settle()
        assert not waiting.done()  # 4 of 4 in flight
        slots.free(RATE_LIMITED, answered=False)
        assert slots.limit == 2
        await settle()
        assert not waiting.done()  # 3 in flight, 2 allowed now
        slots.free(None, answered=True)  # 2 + 1/2
        slots.free(None, answered=True)  # 2.5 + 1/2.5
        await settle()
        assert waiting.done() and slots.in_flight == 2 and abs(slots.limit - 2.9) < 1e-9
        for _ in range(40):  # a long run of answers: back to the ceiling, never past it
            slots.free(None, answered=True)
            await slots.acquire()
        assert slots.limit == 4
        # other failures and calls that never finished leave the limit alone
        slots.free(OVERLOADED, answered=False)
        slots.free(None, answered=False)
        assert slots.limit == 4 and slots.in_flight == 0
        for _ in range(5):
            await slots.acquire()
            slots.free(RATE_LIMITED, answered=False)
        assert slots.limit == 1  # never below one call

    asyncio.run(scenario())


def test_agents_are_throttled_apart_under_their_own_ceiling():
    async def scenario():
        agents = {"a": {}, "b": {"limits": {"concurrency": 2}}, "c": {"limits": {"concurrency": 9}}}
        throttle = Throttle({n: agent_config(n, {"provider": "simulate", **c}) for n, c in agents.items()}, jobs=4)
        assert (throttle.of("a").ceiling, throttle.of("b").ceiling, throttle.of("c").ceiling) == (4, 2, 4)
        async with throttle.slot("a") as call:
            call.error = RATE_LIMITED
        assert throttle.of("a").limit == 2 and throttle.of("b").limit == 2 and throttle.of("c").limit == 4
        async with throttle.slot("b") as call:
            call.answered = True
        assert throttle.of("b").limit == 2 and throttle.of("b").in_flight == 0

    asyncio.run(scenario())


def test_a_cancelled_call_gives_its_slot_back():
    async def scenario():
        throttle = Throttle({}, jobs=1)

        async def hold():
            async with throttle.slot("a"):
                await asyncio.sleep(3600)

        holder = asyncio.ensure_future(hold())
        await settle()
        assert throttle.of("a").in_flight == 1
        holder.cancel()
        await settle()
        assert throttle.of("a").in_flight == 0 and throttle.of("a").limit == 1

    asyncio.run(scenario())
