"""A task's own limits, counted over its current round of runs: `max_iterations`, `max_time`
and its contract's constraints (`max_input_tokens` and `max_output_tokens` per call,
`max_total_tokens` and `max_tool_calls` across the round, `warn_threshold`).

A round starts when the task starts afresh - its first run, `harnessc retry`, `run --rerun`,
`harnessc reset` - and goes on across stops, kills and resumes until the task ends, so a
resumed task has what is left of its limits, not a new set (state.task_round counts what the
round used; the running time is saved every CLOCK_EVERY seconds while the task runs).

Near a limit - APPROACHING of `max_iterations` or `max_time`, `warn_threshold` of a
constraint - a `limit_near` event, once per limit and run (alerts.py: `approaching_limit`).
Past one the task fails with an error naming the limit and the numbers. A task with
`max_tool_calls` on an agent that does not report its tool calls gets a `limit_unchecked`
event instead, once.
"""

from __future__ import annotations

import math
from typing import Any

from ...planfile import Contract, PlanNode
from ..store.state import StateStore

APPROACHING = 0.8  # of max_iterations and max_time: an `approaching_limit` alert (seed 003 §5.1)
CLOCK_EVERY = 1.0  # seconds between saves of a running task's time (what a kill -9 can lose)
PER_CALL = (("max_input_tokens", "input tokens"), ("max_output_tokens", "output tokens"))


class TaskLimits:
    def __init__(self, store: StateStore, node: PlanNode, contract: Contract | None):
        self.store, self.tid = store, node.id
        self.max_iterations = node.limits.max_iterations
        self.max_time = float(node.limits.max_time or 3600)
        declared = (contract.constraints if contract else None) or {}
        self.constraints = {k: v for k, v in declared.items() if k.startswith("max_") and v is not None}
        self.warn_at = float(declared.get("warn_threshold", 0.8))
        earlier = store.task_round(node.id)
        self.iterations_before, self.time_before = earlier["iterations"], earlier["running_s"]
        self.tokens, self.tool_calls = earlier["tokens"], earlier["tool_calls"]
        self.said: set[str] = set()  # limits already said near (or unchecked) in this run

    # ------------------------------------------------------------------ before a call

    def reached(self, iteration: int, used_s: float) -> str | None:
        """Why the task may not make another call (`iteration` calls made in the round,
        `used_s` seconds run), or None; near a limit, says so once."""
        cap = self.max_iterations
        if cap is not None:
            if iteration >= int(cap):
                return f"max_iterations ({cap}) reached without a verified result"
            self.near("max_iterations", iteration + 1, int(cap), APPROACHING, "iterations")
        if used_s >= self.max_time:
            return f"max_time ({self.max_time:g}s) reached" + self._earlier()
        self.near_time(used_s)
        cap = self.constraints.get("max_total_tokens")
        if cap is not None and self.tokens >= cap:
            return f"max_total_tokens ({cap}) reached: the task has used {self.tokens} tokens (contract constraints)"
        return None

    def near_time(self, used_s: float) -> None:
        self.near("max_time", used_s, self.max_time, APPROACHING, "seconds")

    def _earlier(self) -> str:
        return f" ({self.time_before:.1f}s of it before this run)" if self.time_before >= 0.05 else ""

    # ------------------------------------------------------------------ after a call

    def count(self, usage: Any, tool_calls: int | None, agent: str) -> str | None:
        """Add one call's usage to the round; why it passed a constraint, or None."""
        used_in = int(getattr(usage, "input_tokens", 0) or 0)
        used_out = int(getattr(usage, "output_tokens", 0) or 0)
        self.tokens += used_in + used_out
        if tool_calls is not None:
            self.tool_calls += tool_calls
        elif "max_tool_calls" in self.constraints and "unchecked" not in self.said:
            self.said.add("unchecked")
            self.store.event("limit_unchecked", self.tid, limit="max_tool_calls", agent=agent,
                             reason=f"max_tool_calls ({self.constraints['max_tool_calls']}) is not checked on "
                                    f"agent '{agent}': it does not report its tool calls")
        for (key, what), used in zip(PER_CALL, (used_in, used_out)):
            cap = self.constraints.get(key)
            if cap is not None:
                if used > cap:
                    return f"{key} ({cap}) exceeded: the call used {used} {what} (contract constraints)"
                self.near(key, used, cap, self.warn_at, what)
        for key, used, what in (("max_total_tokens", self.tokens, "tokens"),
                                ("max_tool_calls", self.tool_calls, "tool calls")):
            cap = self.constraints.get(key)
            if cap is not None:
                if used > cap:
                    return f"{key} ({cap}) exceeded: the task has used {used} {what} (contract constraints)"
                self.near(key, used, cap, self.warn_at, what)
        return None

    # ------------------------------------------------------------------ saying it

    def near(self, limit: str, used: float, cap: float, fraction: float, what: str) -> None:
        """A `limit_near` event the first time `used` passes `fraction` of `cap` in this run."""
        if limit in self.said or not cap or used < fraction * cap:
            return
        if limit == "max_iterations" and used < max(2, math.ceil(fraction * cap)):
            return  # a task limited to one or two iterations is not near its limit at its first
        self.said.add(limit)
        share = f"{used / cap:.0%}"
        if what == "iterations":
            text = f"{limit}: iteration {used:g} of {cap:g} ({share})"
        else:
            text = f"{limit}: {used:.0f} of {cap:g} {what} used ({share})"
        self.store.event("limit_near", self.tid, limit=limit, used=used, max=cap, reason=text)
