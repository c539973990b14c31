"""The runtime's one clock: every read of the time and every sleep go through it, so a test can
run the runtime in virtual time (after trio's MockClock).

`monotonic()`, `time()` (wall, epoch seconds) and `await sleep(s)` read the current clock:
the real one, or a `VirtualClock` a test installed with `VirtualClock.installed()`. Under a
virtual clock the event loop runs on virtual time too (its timers, `asyncio.sleep`,
`asyncio.timeout`): time moves only when a test calls `jump`, or, with an
`autojump_threshold`, by itself to the next timer once nothing has happened for that many real
seconds (0: at once, whenever every task waits; keep it above 0 when real subprocesses or
threads do work a timer must not overtake).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time as _time
from typing import Any, Coroutine, Iterator, TypeVar

T = TypeVar("T")


class Clock:
    """The real clock. (Its readings are the time module's own functions: a run reads the
    clock a few dozen times per task, and a method around each cost a frame every time.)"""

    monotonic = staticmethod(_time.monotonic)
    time = staticmethod(_time.time)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class VirtualClock(Clock):
    """Time that moves only when told (`jump`) or, past `autojump_threshold` real seconds of
    an idle event loop, by itself to the loop's next timer. It starts at the real readings
    (`start`, `wall` to choose them: a wall time of noon keeps a day's limits from resetting)."""

    def __init__(self, autojump_threshold: float = math.inf, start: float | None = None,
                 wall: float | None = None):
        if autojump_threshold < 0:
            raise ValueError("autojump_threshold must be >= 0")
        self.autojump_threshold = autojump_threshold
        self._now = _time.monotonic() if start is None else float(start)
        self._wall_offset = (_time.time() if wall is None else float(wall)) - self._now
        self.jumped = 0.0  # virtual seconds that passed in all (what a test would have slept)

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._wall_offset + self._now

    def jump(self, seconds: float) -> None:
        """Move time on by `seconds` (timers due by then run at the loop's next turn)."""
        if seconds < 0:
            raise ValueError("time cannot go back")
        self._now += seconds
        self.jumped += seconds

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return _VirtualLoop(self)

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """asyncio.run(main) on this clock (install it first when the code reads the clock)."""
        with asyncio.Runner(loop_factory=self.new_event_loop) as runner:
            return runner.run(main)

    @contextlib.contextmanager
    def installed(self) -> Iterator["VirtualClock"]:
        """The current clock, and every event loop made meanwhile (asyncio.run's too) virtual."""
        policy = asyncio.get_event_loop_policy()
        asyncio.set_event_loop_policy(_VirtualPolicy(self))
        try:
            with using(self):
                yield self
        finally:
            asyncio.set_event_loop_policy(policy)


class _VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop whose time is its clock's: when it would wait for a timer, no thread of
    its executor is at work and no I/O comes within the clock's autojump threshold, the clock
    jumps to the timer."""

    def __init__(self, clock: VirtualClock):
        super().__init__()
        self._virtual = clock
        self._working = 0  # calls in the executor's threads (asyncio.to_thread): not waiting
        real = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> list:
            threshold = clock.autojump_threshold
            if timeout is None or timeout <= 0 or threshold == math.inf or self._working:
                return real(timeout)
            events = real(min(timeout, threshold))
            if not events:
                clock.jump(timeout)  # nothing happened: nothing will before the timer
            return events

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self._virtual.monotonic()

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future:  # type: ignore[override]
        future = super().run_in_executor(executor, func, *args)
        self._working += 1
        future.add_done_callback(self._worked)
        return future

    def _worked(self, _: asyncio.Future) -> None:
        self._working -= 1


class _VirtualPolicy(asyncio.DefaultEventLoopPolicy):  # type: ignore[misc,valid-type]
    def __init__(self, clock: VirtualClock):
        super().__init__()
        self._clock = clock

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return self._clock.new_event_loop()


_current: Clock = Clock()


def current() -> Clock:
    return _current


@contextlib.contextmanager
def using(clock: Clock) -> Iterator[Clock]:
    """Make `clock` the current clock for the block."""
    global _current
    before, _current = _current, clock
    try:
        yield clock
    finally:
        _current = before


def monotonic() -> float:
    """The current clock's monotonic seconds (for durations and deadlines)."""
    return _current.monotonic()


def time() -> float:
    """The current clock's wall time, epoch seconds (for what is recorded or shown)."""
    return _current.time()


async def sleep(seconds: float) -> None:
    await _current.sleep(seconds)
