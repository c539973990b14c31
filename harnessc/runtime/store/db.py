"""The state database's connection and its write discipline: one BEGIN IMMEDIATE transaction
per write (nested uses join it), the group commit (writes queued in one loop turn share one
transaction, each in its savepoint), JSON columns written through one encoder with secrets
redacted and read back checked, and the meta table. The tables' own methods build on it
(runs.py, tasks.py, attempts.py, ledger.py, eventlog.py); state.py's StateStore is all of them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterable

from ...workspace import Workspace, storage_reason
from ..children.procs import secret_values
from .schema import SET_ASIDE, NoState, StateError, prepare

# json.dumps(value, sort_keys=True, default=str), with one encoder for every write (dumps
# makes one per call: a third of the time of a task's small records)
_encode = json.JSONEncoder(sort_keys=True, default=str).encode

# SQLite's codes for a database it cannot write or open where it is (not a corrupt one)
_STORAGE_ERRORS = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN")


class _Tx:
    """Database.tx's context manager (a class: a task's records take several, and a
    generator-based one cost more than their statements)."""

    __slots__ = ("owner", "outer")

    def __init__(self, owner: "Database"):
        self.owner = owner
        self.outer = False

    def __enter__(self) -> sqlite3.Connection:
        owner = self.owner
        if not owner._in_tx:
            owner.db.execute("BEGIN IMMEDIATE")
            owner._in_tx = self.outer = True
        return owner.db

    def __exit__(self, kind, exc, tb) -> None:
        if self.outer:
            self.owner._in_tx = False
            self.owner.db.execute("COMMIT" if kind is None else "ROLLBACK")


class Database:
    def __init__(self, workspace: Workspace, create: bool = True, secret_names: Iterable[str] = ()):
        self.workspace = workspace
        self.path = workspace.state_db
        self.secrets = secret_values(names=secret_names)  # a run adds its agents' key variables
        self._in_tx = False
        self.mirror = None  # file object of .harness/runs/<id>/events.jsonl, when running
        self._mirror_flushed = 0.0
        self._spent: float | None = None  # the run-wide ledger total, kept after the first read
        self._tokens: int | None = None  # the run-wide token total (see tokens_spent)
        self._reserved: dict[int, tuple[int, float, int]] = {}  # attempt id -> (ledger row, USD, tokens)
        self._never_attempted: set[str] | None = None  # tasks.py: never_attempted
        self._idle_time: dict[str, float] = {}  # tasks.py: never_attempted (their running_s)
        self._looped: set[str] | None = None  # tasks.py: _end_recovery (the tasks with a loop_state row)
        self._queue: list[tuple[Callable[[], Any], asyncio.Future]] = []  # group commit
        self._flush_loop = None
        self._flush_handle = None
        self._flush_due = 0.0  # the loop time the scheduled flush runs at
        self.run_id: str | None = None
        self.listeners: list = []  # callables given every event (the live display)
        if not self.path.exists() and not create:
            raise NoState(f"no state yet ({self._rel()}): nothing has run in this project")
        name = workspace.sqlite_path(self.path, create=create)  # refuses links; raises WorkspaceError
        try:
            self.db = sqlite3.connect(name, isolation_level=None, timeout=10.0)
            self.db.row_factory = sqlite3.Row
            prepare(self.db, self._rel(), create, self.tx)
        except sqlite3.DatabaseError as e:
            if getattr(e, "sqlite_errorname", "").startswith(_STORAGE_ERRORS):
                raise StateError(f"cannot open {self._rel()}: {storage_reason(self.path.parent, e)}") from None
            raise StateError(f"{self._rel()} is not a readable harnessc state database ({e}); {SET_ASIDE}") from None
        self._identity = self._file_identity()

    def _rel(self) -> str:
        parts = self.path.parts
        return str(Path(*parts[-2:])) if len(parts) >= 2 else str(self.path)

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def check_file(self) -> None:
        """StateError when state.db was removed or replaced since it was opened: whatever the
        run writes from then on goes to a file nobody will read."""
        now = self._file_identity()
        if now != self._identity:
            how = "removed" if now is None else "replaced by another file"
            raise StateError(f"{self._rel()} was {how} during the run; this run's results since then are lost")

    def close(self) -> None:
        if self.mirror:
            mirror, self.mirror = self.mirror, None
            try:
                mirror.close()
            except OSError:  # a full disk, already reported by the write that failed first
                pass
        self.db.close()

    def tx(self) -> "_Tx":
        """One write transaction, taken with BEGIN IMMEDIATE (nested uses join the outer one):
        `with store.tx() as db:`; an error rolls it back."""
        return _Tx(self)

    def defer(self, fn: Callable[[], Any], within: float = 0.0) -> asyncio.Future:
        """Run the write `fn()` in the next group commit; the future has its result once committed.

        Writes queued by every task during one turn of the event loop share one transaction
        (each in its own savepoint, so one failing write fails only its own future): a task
        awaiting the future knows its write is durable, exactly as with a commit of its own.
        A cancelled future's write is dropped, never half done. `within`: seconds the write
        may wait to ride along with another write's commit (a record nobody awaits: it saves
        a commit of its own); the commit comes then at the latest.
        """
        loop = asyncio.get_running_loop()
        if self._flush_loop is not loop:  # leftovers of an event loop that ended (a crash)
            self._queue, self._flush_loop, self._flush_handle = [], loop, None
        fut = loop.create_future()
        self._queue.append((fn, fut))
        due = loop.time() + within
        if self._flush_handle is None or due < self._flush_due:
            if self._flush_handle is not None:
                self._flush_handle.cancel()
            self._flush_handle = loop.call_later(within, self.flush) if within else loop.call_soon(self.flush)
            self._flush_due = due
        return fut

    def flush(self) -> None:
        """Commit the queued writes now, in one transaction, and settle their futures."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()  # (when called directly: the scheduled one has nothing left)
            self._flush_handle = None
        batch = [(fn, fut) for fn, fut in self._queue if not fut.done()]
        self._queue = []
        if not batch:
            return
        outcomes: list[tuple[asyncio.Future, Any, BaseException | None]] = []
        alone = len(batch) == 1  # its transaction is its savepoint
        try:
            with self.tx():
                for fn, fut in batch:
                    if not alone:
                        self.db.execute("SAVEPOINT item")
                    try:
                        value = fn()
                    except Exception as e:
                        if alone:
                            raise
                        self.db.execute("ROLLBACK TO item")
                        self.db.execute("RELEASE item")
                        self._spent = self._tokens = None
                        outcomes.append((fut, None, e))
                        continue
                    if not alone:
                        self.db.execute("RELEASE item")
                    outcomes.append((fut, value, None))
        except BaseException as e:  # the commit failed (or the process is going down): nothing held
            self._spent = self._tokens = None
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            return
        for fut, value, err in outcomes:
            if fut.done():
                continue
            if err is not None:
                fut.set_exception(err)
            else:
                fut.set_result(value)

    def redact(self, value: Any) -> Any:
        """Secret values from our environment never reach the disk."""
        if isinstance(value, str) and self.secrets:
            for s in self.secrets:
                if s in value:
                    value = value.replace(s, "[redacted]")
        return value

    def _loads(self, text: str | None, what: str, shape: type | None = None) -> Any:
        """A JSON column's value (of `shape`, dict or list, when given); StateError (not a
        traceback) when the row was tampered with."""
        if not text:
            return None
        try:
            value = json.loads(text)
        except (ValueError, RecursionError, TypeError):
            raise StateError(f"{self._rel()}: {what} is not valid JSON; {SET_ASIDE}") from None
        if shape is not None and not isinstance(value, shape):
            kind = "a JSON object" if shape is dict else "a JSON list"
            raise StateError(f"{self._rel()}: {what} is not {kind}; {SET_ASIDE}")
        return value

    def _json(self, value: Any) -> str | None:
        if value is None:
            return None
        if value.__class__ is list and not value:  # (an attempt's errors and checks, mostly)
            return self.redact("[]")
        return self.redact(_encode(value))

    def meta_get(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def meta_keys(self, prefix: str) -> list[str]:
        """The meta keys that start with `prefix`."""
        return [k for (k,) in self.db.execute("SELECT key FROM meta WHERE substr(key, 1, ?) = ?",
                                              (len(prefix), prefix))]

    def meta_set(self, key: str, value: str | None) -> None:
        """Set (or, with None, remove) one meta entry, committed at once."""
        with self.tx():
            if value is None:
                self.db.execute("DELETE FROM meta WHERE key=?", (key,))
            else:
                self.db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                                (key, value))

    def integrity(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]
