"""How long an agent call may take, as a whole: never past what its task has left of
`max_time`, and, once the run is asked to stop gracefully (`harnessc stop`, Ctrl-C once,
`run --max-time`), never more than the stop's grace after it.

An SDK's timeout is per read: a server that sends an event now and then (or a byte a second)
would hold a call, its task and a graceful stop forever. The agents bound their own calls
by `Request.timeout` (sdk.py, procs.py) so that a cut call is still charged what it reported;
`CallBounds.bound` is the run's own bound around every call, a little later, for any agent.
"""

from __future__ import annotations

import asyncio
import os

STOP_GRACE = 30.0  # seconds a call in flight may go on after a graceful stop
GRACE_ENV = "HARNESSC_STOP_GRACE"  # overrides STOP_GRACE (seconds), e.g. for a CI job's own deadline


def stop_grace() -> float:
    """The stop's grace: HARNESSC_STOP_GRACE when it is a number >= 0, else STOP_GRACE."""
    try:
        value = float(os.environ.get(GRACE_ENV, ""))
    except ValueError:
        return STOP_GRACE
    return value if 0 <= value < float("inf") else STOP_GRACE


class Bound:
    """One call's deadline (an asyncio.Timeout), and whether the stop's grace moved it."""

    def __init__(self, timeout: asyncio.Timeout):
        self.timeout = timeout
        self.by_stop = False

    def expired(self) -> bool:
        return self.timeout.expired()

    def cut_at(self, when: float) -> None:
        """Bring the deadline forward to loop time `when` (never later than it was)."""
        now = self.timeout.when()
        if now is None or when < now:
            self.timeout.reschedule(when)
            self.by_stop = True


class CallBounds:
    """The deadlines of the calls in flight, brought forward when the run stops."""

    def __init__(self) -> None:
        self._open: set[Bound] = set()
        self.grace = stop_grace()
        self._stop_at: float | None = None  # loop time past which no call may go on

    def stop(self) -> None:
        """A graceful stop was asked for: every call in flight (and any that starts) ends
        within the grace."""
        if self._stop_at is None:
            self._stop_at = asyncio.get_running_loop().time() + self.grace
            for b in self._open:
                b.cut_at(self._stop_at)

    def bound(self, seconds: float) -> "Bounding":
        """`async with bounds.bound(seconds) as b:` bound the body to `seconds` (and the
        stop's grace); raises TimeoutError past it."""
        return Bounding(self, seconds)


class Bounding:
    """CallBounds.bound's context: a class, as every call takes one and a generator-based
    context manager cost more than its own work."""

    __slots__ = ("bounds", "seconds", "timeout", "b")

    def __init__(self, bounds: CallBounds, seconds: float):
        self.bounds, self.seconds = bounds, seconds

    async def __aenter__(self) -> Bound:
        self.timeout = asyncio.timeout(max(self.seconds, 0.0))
        await self.timeout.__aenter__()
        b = self.b = Bound(self.timeout)
        if self.bounds._stop_at is not None:
            b.cut_at(self.bounds._stop_at)
        self.bounds._open.add(b)
        return b

    async def __aexit__(self, kind, exc, tb) -> bool | None:
        self.bounds._open.discard(self.b)
        return await self.timeout.__aexit__(kind, exc, tb)  # a cancel by the deadline: TimeoutError
