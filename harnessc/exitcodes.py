"""The exit codes of every harnessc command, and the verdict on diagnostics (lint, build).

The codes are a user contract (docs/cli.md#exit-codes):

  0  clean; every task succeeded, degraded or done
  1  spec errors (warnings too with --strict), invalid output, or a task failed
  2  usage or internal error, or a state.db that cannot be used (also: removed during a run)
  3  stopped, or a limit or budget reached before the end

A run's code and summary lines are decided by outcome.py, which lint does not import.
"""

from __future__ import annotations

from enum import IntEnum

from .wording import plural


class Exit(IntEnum):
    OK = 0
    PROBLEMS = 1
    USAGE = 2
    STOPPED = 3


def diagnostics_exit(errors: int, warnings: int, strict: bool) -> Exit:
    return Exit.PROBLEMS if errors or (strict and warnings) else Exit.OK


def diagnostics_summary(errors: int, warnings: int, strict: bool) -> str | None:
    """'2 errors, 1 warning' (None when there is nothing to count)."""
    if not errors and not warnings:
        return None
    return (f"{plural(errors, 'error')}, {plural(warnings, 'warning')}"
            + (" (warnings fail with --strict)" if warnings and strict and not errors else ""))
