"""The runtime's clock seam (runtime/clock.py): a VirtualClock moves only when told, or jumps to
the next timer when every task waits; the event loop's timers follow it."""

from __future__ import annotations

import asyncio
import time

import pytest

from harnessc.runtime import clock


def test_virtual_time_moves_only_when_told():
    c = clock.VirtualClock(start=100.0, wall=1_000_000.0)
    assert (c.monotonic(), c.time()) == (100.0, 1_000_000.0)
    c.jump(2.5)
    assert (c.monotonic(), c.time(), c.jumped) == (102.5, 1_000_002.5, 2.5)
    with pytest.raises(ValueError):
        c.jump(-1)
    with c.installed():
        assert clock.current() is c and clock.monotonic() == 102.5 and clock.time() == 1_000_002.5
    assert type(clock.current()) is clock.Clock  # the real one again


def test_autojump_runs_an_hour_of_sleeps_and_timeouts_at_once_in_order():
    c = clock.VirtualClock(autojump_threshold=0, start=0.0)
    seen = []

    async def sleeper(name, seconds):
        await clock.sleep(seconds)
        seen.append((name, clock.monotonic()))

    async def main():
        await asyncio.gather(sleeper("late", 3600), sleeper("early", 60), sleeper("mid", 600))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(30):
                await asyncio.sleep(31)
        return asyncio.get_running_loop().time()

    real = time.monotonic()
    with c.installed():
        end = asyncio.run(main())  # asyncio.run's loop is virtual while the clock is installed
    assert time.monotonic() - real < 30  # (no timed assertion of speed: an hour did not pass)
    assert seen == [("early", 60.0), ("mid", 600.0), ("late", 3600.0)]
    assert end == 3630.0 and c.jumped == 3630.0


def test_without_autojump_a_sleeper_wakes_only_when_time_is_moved_on():
    c = clock.VirtualClock(start=0.0)

    async def main():
        woke = asyncio.ensure_future(clock.sleep(10))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not woke.done()
        c.jump(9.9)
        for _ in range(5):
            await asyncio.sleep(0)
        assert not woke.done()
        c.jump(0.1)
        await woke
        return clock.monotonic()

    with clock.using(c):
        assert c.run(main()) == 10.0


def test_real_io_wakes_a_virtual_loop_before_the_threshold():
    # a thread's result arrives in real time; with a threshold the timer does not overtake it
    c = clock.VirtualClock(autojump_threshold=5, start=0.0)

    async def main():
        timer = asyncio.ensure_future(asyncio.sleep(1000))
        value = await asyncio.to_thread(lambda: (time.sleep(0.01), "done")[1])
        moved = clock.monotonic()
        timer.cancel()
        return value, moved

    with c.installed():
        assert asyncio.run(main()) == ("done", 0.0)
