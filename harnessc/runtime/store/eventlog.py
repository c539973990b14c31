"""The events table and its mirror, the run's events.jsonl: every event is checked against
its declaration (harnessc/events.py), recorded in the caller's transaction and handed to
the listeners (the live display, alerts, telemetry)."""

from __future__ import annotations

import json
import os
import time
from json.encoder import encode_basestring_ascii as _encode_str
from typing import Any

from ... import events
from .. import clock
from .db import Database

MIRROR_FLUSH = 0.1  # seconds events.jsonl lines may wait in the buffer (flush_mirror() too)


_INSERT = "INSERT INTO events (run_id, ts, kind, task_id, data) VALUES (?,?,?,?,?)"


def _enc(value: str | None) -> str:
    return "null" if value is None else _encode_str(value)


class EventLog(Database):
    def event(self, kind: str, task_id: str | None = None, **data: Any) -> dict:
        """Record an event (in the caller's transaction, if any) and mirror it to events.jsonl.

        The mirror is buffered: lines reach the file within MIRROR_FLUSH seconds or at
        flush_mirror()/close(). The db is the truth; a kill -9 may cut the mirror's tail.
        `kind` and the fields are those harnessc/events.py declares (else, under the test
        suite's HARNESSC_STRICT_EVENTS=1, UndeclaredEvent).
        """
        # (the environment read only for an event that is not declared: a read per event cost
        # a task more than the look-up, and the suite sets and unsets it between events)
        if not events.declared(kind, data) and os.environ.get(events.STRICT) == "1":
            events.check(kind, data)
        ts = clock.time()
        ev = {"ts": ts, "run_id": self.run_id, "kind": kind, "task": task_id, **data}
        body = self._json(data) if data else None
        row = (self.run_id, ts, kind, task_id, body)
        if self._in_tx:  # (most events are part of a write: no context manager to join it)
            self.db.execute(_INSERT, row)
        else:
            with self.tx():
                self.db.execute(_INSERT, row)
        if self.mirror:
            # One encoding for both: the mirror line is the data object with the envelope.
            head = (f'{{"kind": {_enc(kind)}, "run_id": {_enc(self.run_id)}, '
                    f'"task": {_enc(task_id)}, "ts": {ts!r}')
            line = self.redact(head) + (", " + body[1:] if body and body != "{}" else "}")
            try:  # (no context manager per event: it cost more than the write)
                self.mirror.write(line + "\n")
                now = time.monotonic()
                if now - self._mirror_flushed >= MIRROR_FLUSH:
                    self.mirror.flush()
                    self._mirror_flushed = now
            except OSError as e:
                raise self._mirror_error(e) from None
        if self.secrets and body:  # the display prints events: what it shows is redacted too
            ev.update(json.loads(body))
        for listener in self.listeners:
            listener(ev)
        return ev

    def flush_mirror(self) -> None:
        """Push buffered events.jsonl lines to the OS (the db has every event already)."""
        if self.mirror:
            try:
                self.mirror.flush()
            except OSError as e:
                raise self._mirror_error(e) from None
            self._mirror_flushed = time.monotonic()

    def _mirror_error(self, e: OSError) -> OSError:
        """An events.jsonl write error that names the file (raw, it names none)."""
        return OSError(e.errno, e.strerror, str(self.workspace.events(self.run_id)))

    def task_events(self, task_id: str, kinds: tuple[str, ...]) -> list[dict]:
        """The task's events of these kinds, oldest first: {kind, ts, **data}."""
        rows = self.db.execute(
            f"SELECT kind, ts, data FROM events WHERE task_id=? AND kind IN ({','.join('?' * len(kinds))})"
            " ORDER BY id", (task_id, *kinds)).fetchall()
        return [{"kind": k, "ts": ts, **(self._loads(d, "an event", dict) or {})} for k, ts, d in rows]

    def run_events(self, run_id: str, kinds: tuple[str, ...]) -> list[dict]:
        """The run's events of these kinds, oldest first: {kind, ts, task, **data}."""
        rows = self.db.execute(
            f"SELECT kind, ts, task_id, data FROM events WHERE run_id=? AND kind IN ({','.join('?' * len(kinds))})"
            " ORDER BY id", (run_id, *kinds)).fetchall()
        return [{"kind": k, "ts": ts, "task": t, **(self._loads(d, "an event", dict) or {})} for k, ts, t, d in rows]
