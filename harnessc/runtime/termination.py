"""When a run ends by itself, though its tasks could go on (seed 003 §1): a wall-clock
limit (`run --max-time`, harness.yaml `loop.termination.max_time`, the `--autonomous`
preset's day) and a limit on the iterations of the whole run
(`loop.termination.max_iterations`). Reaching one ends the run as `harnessc stop` does:
calls in flight finish, nothing new starts, the run's outcome is a stop (exit 3), and the
next `harnessc run` goes on from there.
"""

from __future__ import annotations

from . import clock


class RunLimits:
    def __init__(self, max_time: float | None, time_source: str, max_iterations: int | None):
        """time_source: where max_time came from, as the stop's reason names it."""
        self.max_time, self.time_source, self.max_iterations = max_time, time_source, max_iterations
        self.started = clock.monotonic()
        self.iterations = 0  # begun in this run

    @classmethod
    def of(cls, flag_time: float | None, preset_time: float | None, cfg) -> "RunLimits":
        """An explicit --max-time wins over harness.yaml, which wins over the preset's."""
        configured = cfg.termination.max_time
        if flag_time is not None:
            max_time, source = flag_time, "--max-time"
        elif configured is not None:
            max_time, source = float(configured), "loop.termination.max_time"
        else:
            max_time, source = preset_time, "--max-time"
        return cls(max_time, source, cfg.termination.max_iterations)

    def on_event(self, ev: dict) -> None:
        if ev["kind"] == "attempt_started":
            self.iterations += 1

    def reached(self) -> str | None:
        """Why the run must stop now, or None."""
        if self.max_time is not None and clock.monotonic() - self.started >= self.max_time:
            return f"{self.time_source} ({self.max_time:g}s) reached; `harnessc run` goes on"
        if self.max_iterations is not None and self.iterations >= self.max_iterations:
            return (f"loop.termination.max_iterations ({self.max_iterations}) reached: that many iterations "
                    f"in this run; `harnessc run` goes on")
        return None
