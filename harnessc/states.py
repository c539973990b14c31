"""A task's states and their groups, defined once.

`TaskState` is a `StrEnum`: a member is the same string in SQLite, JSON, events and plan
output (`TaskState.FAILED == "failed"`), so rows read back as plain strings compare equal to
the members. Code names a state by its member, never by a bare string
(tests/test_layout.py checks).
"""

from __future__ import annotations

from enum import StrEnum


class TaskState(StrEnum):
    PENDING = "pending"  # not started, or sent back (a halt, a rejected review, a reset)
    READY = "ready"  # the report's name for a pending task whose dependencies are complete
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # verified
    DEGRADED = "degraded"  # on_failure fallback/partial/template: an unverified output
    FAILED = "failed"
    BLOCKED = "blocked"  # waits for a person: on_failure block, or a change that could not land
    SKIPPED = "skipped"  # a dependency failed, or the operator skipped it
    DONE = "done"  # ticked in the roadmap: never run
    REVIEW = "review"  # verified, waiting for `harnessc approve` (not complete: its dependents wait)
    # never stored: how a task's run ended when it was halted or aborted (its row goes back to
    # pending), and the reports' name for a task whose run was killed
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"  # never stored: an approach stopped because another one was verified first


S = TaskState

STORED = (S.PENDING, S.READY, S.RUNNING, S.SUCCEEDED, S.DEGRADED, S.FAILED, S.BLOCKED, S.SKIPPED, S.DONE,
          S.REVIEW)  # what tasks.state may hold
COMPLETE = (S.SUCCEEDED, S.DEGRADED, S.DONE)  # a dependent may start after these
LANDED = (S.SUCCEEDED, S.DEGRADED)  # the states whose result is written (and kept by a reset)
BROKEN = (S.FAILED, S.BLOCKED, S.SKIPPED)  # what `harnessc retry` re-runs
ENDED = (*COMPLETE, S.REVIEW, *BROKEN)  # a task this run has no more work for, in the order summaries count them
KEPT = (S.BLOCKED, S.REVIEW)  # the states whose isolated change stays on its ref

del S
