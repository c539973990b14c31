"""Executors: where one attempt's agent call and checks run.

`local` (the default) runs them on this machine, as the rest of runtime/ does; `ray` runs
each attempt on a Ray cluster (harness.yaml `executor:`, `run --executor`). rayconfig.py
resolves the run's settings; this module holds only what the runtime may import without
importing Ray.
"""

from __future__ import annotations

from ...errors import HarnesscError


class ExecutorError(HarnesscError):
    """The executor cannot be used (Ray missing, a bad address, ...): the run refuses to
    start, nothing ran."""


class AttemptLost(Exception):
    """The worker or node running an attempt died: the attempt is interrupted (nothing known
    is charged) and its iteration runs again, elsewhere."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
