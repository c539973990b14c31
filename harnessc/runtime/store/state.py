"""The state store: .harness/state.db (SQLite, WAL, BEGIN IMMEDIATE for every write).

Holds runs, task states, every attempt, the budget ledger and events. An attempt row is
written before the agent is called ('started') and completed after; a task's result and its
final state commit in one transaction. Nothing is ever reset silently: a foreign, corrupt or
newer database is an error (schema.py: the tables, their migrations and the checks on open).

StateStore is the transaction and group-commit layer (db.py) with each table's methods:
eventlog.py (events and events.jsonl), runs.py, tasks.py (and loop_state), attempts.py
(and the attempt's end record), ledger.py (the budget).
"""

from __future__ import annotations

from .attempts import USAGE_COLUMNS, AttemptEnd, Attempts, TaskEnd  # noqa: F401 (callers import them here)
from .runs import Runs, pid_alive  # noqa: F401
from .schema import SCHEMA_VERSION, SET_ASIDE, NoState, StateError  # noqa: F401

REVIEW_KEY = "review."  # meta: review.<task> = {"decision": "approved" | "rejected", "why": ...} (`harnessc approve/reject`)


class StateStore(Attempts, Runs):
    """One project's state.db, open (see the module's docstring)."""
