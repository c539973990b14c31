"""An attempt's end, as StateStore.finish_attempt records it in one commit: its answer and
verdict, what the call cost, a loop task's progress and, when the attempt ends its task,
the task's end. Built where the attempt ends (runtime/iteration.py), written as it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ...states import TaskState
from ..agents.usage import Charge


@dataclass(frozen=True, slots=True)
class TaskEnd:
    """The task's end, committed with the attempt that reached it."""

    state: TaskState
    output: Any = None  # its result (a degraded task's fallback output)
    fingerprint: str | None = None  # the plan node's, for a result a later run may keep
    error: str | None = None
    filled: list | None = None  # the fields of a fallback output taken from the contract ([{field, from, was}])


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    status: str  # the attempt's: succeeded, rejected, progress, stuck, error, over_limit, interrupted
    raw: str | None = None  # the answer's text
    parsed: Any = None  # the JSON output the verdict read from it
    errors: Sequence[str] = ()
    checks: list[dict] | None = None  # the accept commands' results
    charge: Charge = Charge()  # the ledger figures (the defaults: a call that never answered)
    progress: dict | None = None  # a loop iteration's evidence and score (None: kept as it was)
    loop_state: dict | None = None  # what a loop task's next iteration carries over (runtime/loop/loop.py)
    task: TaskEnd | None = None  # the task ends with this attempt
    answered_at: float | None = None  # when the agent's answer came (a wall time), for the run's trace
