"""The state store: .harness/state.db (SQLite, WAL, BEGIN IMMEDIATE for every write).

Holds runs, task states, every attempt, the budget ledger and events. An attempt row is
written before the agent is called ('started') and completed after; a task's result and its
final state commit in one transaction. Nothing is ever reset silently: a foreign, corrupt or
newer database is an error (schema.py: the tables, their migrations and the checks on open).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sqlite3
import time
from contextlib import contextmanager
from json.encoder import encode_basestring_ascii as _encode_str
from pathlib import Path
from typing import Any, Callable, Iterable

from ... import events
from ...states import STORED, TaskState
from ...workspace import Workspace, storage_reason
from ..children.procs import secret_values
from .attempts import AttemptEnd
from .schema import SCHEMA_VERSION, SET_ASIDE, NoState, StateError, prepare  # noqa: F401 (callers import them here)

MAX_COST_KEY = "max_cost_usd"  # meta: the last explicit --max-cost
DAILY_KEEP = 2 * 86400.0  # seconds of forgotten calls a reset keeps for the daily limits (a local day, and then some)
REVIEW_KEY = "review."  # meta: review.<task> = {"decision": "approved" | "rejected", "why": ...} (`harnessc approve/reject`)

# The ledger columns of an attempt, summed by usage_totals() (input_tokens is all input).
USAGE_COLUMNS = ("input_tokens", "uncached_input_tokens", "cache_read_tokens", "cache_write_tokens",
                 "output_tokens", "reasoning_tokens")


# json.dumps(value, sort_keys=True, default=str), with one encoder for every write (dumps
# makes one per call: a third of the time of a task's small records)
_encode = json.JSONEncoder(sort_keys=True, default=str).encode


def _enc(value: str | None) -> str:
    return "null" if value is None else _encode_str(value)


# SQLite's codes for a database it cannot write or open where it is (not a corrupt one)
_STORAGE_ERRORS = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_CANTOPEN")


def _usage_counts(usage: Any) -> dict[str, int]:
    """An agents.base.Usage as the attempt's USAGE_COLUMNS (all 0 for None: nothing reported)."""
    if usage is None:
        return dict.fromkeys(USAGE_COLUMNS, 0)
    return {"input_tokens": usage.input_tokens, "uncached_input_tokens": usage.uncached_input_tokens,
            "cache_read_tokens": usage.cache_read_tokens, "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens, "reasoning_tokens": usage.reasoning_tokens}


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


MIRROR_FLUSH = 0.1  # seconds events.jsonl lines may wait in the buffer (flush_mirror() too)
CHILD_RECORD_WITHIN = 0.5  # seconds an attempt's child record may wait for another write's commit


class StateStore:
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

    def flush_mirror(self) -> None:
        """Push buffered events.jsonl lines to the OS (the db has every event already)."""
        if self.mirror:
            with self._mirror_io():
                self.mirror.flush()
            self._mirror_flushed = time.monotonic()

    @contextmanager
    def _mirror_io(self):
        """An events.jsonl write error names the file (raw, it names none)."""
        try:
            yield
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(self.workspace.events(self.run_id))) from None

    # ------------------------------------------------------------------ plumbing

    @contextmanager
    def tx(self):
        """One write transaction, taken with BEGIN IMMEDIATE (nested uses join the outer one)."""
        if self._in_tx:
            yield self.db
            return
        self.db.execute("BEGIN IMMEDIATE")
        self._in_tx = True
        try:
            yield self.db
        except BaseException:
            self._in_tx = False
            self.db.execute("ROLLBACK")
            raise
        self._in_tx = False
        self.db.execute("COMMIT")

    # ------------------------------------------------------------------ group commit

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
        return None if value is None else self.redact(_encode(value))

    def event(self, kind: str, task_id: str | None = None, **data: Any) -> dict:
        """Record an event (in the caller's transaction, if any) and mirror it to events.jsonl.

        The mirror is buffered: lines reach the file within MIRROR_FLUSH seconds or at
        flush_mirror()/close(). The db is the truth; a kill -9 may cut the mirror's tail.
        `kind` and the fields are those harnessc/events.py declares (else UndeclaredEvent).
        """
        events.check(kind, data)
        ts = time.time()
        ev = {"ts": ts, "run_id": self.run_id, "kind": kind, "task": task_id, **data}
        body = self._json(data) if data else None
        with self.tx():
            self.db.execute(
                "INSERT INTO events (run_id, ts, kind, task_id, data) VALUES (?,?,?,?,?)",
                (self.run_id, ts, kind, task_id, body),
            )
        if self.mirror:
            # One encoding for both: the mirror line is the data object with the envelope.
            head = (f'{{"kind": {_enc(kind)}, "run_id": {_enc(self.run_id)}, '
                    f'"task": {_enc(task_id)}, "ts": {ts!r}')
            line = self.redact(head) + (", " + body[1:] if body and body != "{}" else "}")
            with self._mirror_io():
                self.mirror.write(line + "\n")
                now = time.monotonic()
                if now - self._mirror_flushed >= MIRROR_FLUSH:
                    self.mirror.flush()
                    self._mirror_flushed = now
        if self.secrets and body:  # the display prints events: what it shows is redacted too
            ev.update(json.loads(body))
        for listener in self.listeners:
            listener(ev)
        return ev

    # ------------------------------------------------------------------ runs

    def start_run(self, run_id: str, options: dict) -> None:
        self.run_id = run_id
        self.mirror = self.workspace.open_write(self.workspace.events(run_id), "a")
        with self.tx():
            self.db.execute(
                "INSERT INTO runs (id, started_at, status, pid, options) VALUES (?,?,?,?,?)",
                (run_id, time.time(), "running", os.getpid(), self._json(options)),
            )
            self.event("run_started", options=options)

    def end_run(self, status: str, exit_code: int, message: str = "") -> None:
        with self.tx():
            self.db.execute(
                "UPDATE runs SET ended_at=?, status=?, exit_code=?, message=? WHERE id=?",
                (time.time(), status, exit_code, self.redact(message), self.run_id),
            )
            self.event("run_finished", status=status, exit_code=exit_code, message=message)

    def recover(self) -> dict:
        """Clean up after a run that died: called under the run lock, before a new run.

        Attempts left 'started' become 'interrupted' with cost_source 'unknown': no provider
        reported the call's usage, so nothing is charged for it; its ledger row is settled with
        actual NULL (sums leave it out) and keeps its estimate in `reserved` (`unknown_calls`).
        Tasks left running go back to pending. "leftovers" are their child processes' records
        (marker, pid, start time) for reaper.end_leftovers.
        """
        now = time.time()
        self._spent = self._tokens = None
        with self.tx():
            rows = self.db.execute(
                "SELECT id, proc_marker, proc_pid, proc_start FROM attempts WHERE status='started'"
            ).fetchall()
            stuck = [r[0] for r in rows]
            # The tokens reserved stay counted (the token budget errs on the safe side; an
            # assist call in flight, runtime/loop/assist.py, likewise: its ledger row holds
            # its tokens); the cost does not: it is unknown, never a guess added to spent.
            self.db.execute(
                "UPDATE tasks SET tokens=tokens+(SELECT COALESCE(SUM(COALESCE(input_tokens, 0)"
                " + COALESCE(output_tokens, 0)), 0) FROM attempts WHERE task_id=tasks.id AND status='started')"
                " + (SELECT COALESCE(SUM(tokens), 0) FROM ledger WHERE task_id=tasks.id AND settled=0"
                " AND attempt_id IS NULL)"
                " WHERE id IN (SELECT task_id FROM ledger WHERE settled=0)")
            self.db.execute(
                "UPDATE attempts SET status='interrupted', finished_at=?, cost_source='unknown',"
                " uncached_input_tokens=input_tokens, cache_read_tokens=0, cache_write_tokens=0,"
                " reasoning_tokens=0, cost_usd=0 WHERE status='started'", (now,))
            self.db.execute("UPDATE ledger SET actual=NULL, settled=1 WHERE settled=0")
            running = [r[0] for r in self.db.execute("SELECT id FROM tasks WHERE state='running'")]
            self.db.execute("UPDATE tasks SET state='pending', updated_at=? WHERE state='running'", (now,))
            self.db.execute(
                "UPDATE runs SET status='interrupted', ended_at=COALESCE(ended_at, ?) WHERE status='running'",
                (now,))
        leftovers = [{"attempt": r[0], "marker": r[1], "pid": r[2], "start": r[3]} for r in rows]
        return {"interrupted_attempts": stuck, "interrupted_tasks": running, "leftovers": leftovers}

    def last_run(self) -> dict | None:
        row = self.db.execute("SELECT * FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1").fetchone()
        return self._run_row(row) if row is not None else None

    def _run_row(self, row: sqlite3.Row) -> dict:
        run = dict(row)
        run["options"] = self._loads(run["options"], f"run {run['id']}'s options", dict) or {}
        if run["status"] == "running" and not pid_alive(run["pid"]):
            run["status"] = "interrupted"
        return run

    def run(self, run_id: str) -> dict | None:
        """One recorded run (as last_run gives it), or None."""
        row = self.db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return self._run_row(row) if row is not None else None

    def runs(self) -> list[dict]:
        """Every recorded run, oldest first (as last_run gives them), with `tasks` (the tasks
        it made an attempt at) and `cost_usd` (settled or reserved by its calls)."""
        rows = self.db.execute("SELECT * FROM runs ORDER BY started_at, rowid").fetchall()
        tasks = dict(self.db.execute("SELECT run_id, COUNT(DISTINCT task_id) FROM attempts GROUP BY run_id"))
        costs = dict(self.db.execute(
            "SELECT run_id, COALESCE(SUM(CASE WHEN settled THEN actual ELSE reserved END), 0) FROM ledger"
            " GROUP BY run_id"))
        out = []
        for row in rows:
            run = self._run_row(row)
            run["tasks"] = tasks.get(run["id"], 0)
            run["cost_usd"] = round(float(costs.get(run["id"]) or 0.0), 6)
            out.append(run)
        return out

    def run_starts(self) -> dict[str, float]:
        """Every recorded run's id -> its start time."""
        return {r[0]: r[1] for r in self.db.execute("SELECT id, started_at FROM runs")}

    # ------------------------------------------------------------------ tasks

    def tasks(self, ids: list[str] | None = None) -> dict[str, dict]:
        """Task rows by id (all of them, or just `ids`)."""
        out = {}
        if ids is None:
            rows = self.db.execute("SELECT * FROM tasks")
        else:
            marks = ",".join("?" * len(ids))
            rows = self.db.execute(f"SELECT * FROM tasks WHERE id IN ({marks})", list(ids))
        for row in rows:
            d = dict(row)
            d["output"] = self._loads(d["output"], f"task {d['id']}'s output")
            d["filled"] = self._loads(d.get("filled"), f"task {d['id']}'s filled fields")
            out[d["id"]] = d
        return out

    def ensure_tasks(self, ids: Iterable[str], done: set[str]) -> None:
        """Rows for tasks seen for the first time; tasks checked in roadmap.md are 'done'."""
        now = time.time()
        with self.tx():
            for tid in ids:
                state = TaskState.DONE if tid in done else TaskState.PENDING
                self.db.execute(
                    "INSERT INTO tasks (id, state, updated_at) VALUES (?,?,?) ON CONFLICT(id) DO NOTHING",
                    (tid, state, now))
                if tid in done:
                    self.db.execute(
                        "UPDATE tasks SET state='done', updated_at=? WHERE id=? AND state!='done'", (now, tid))

    def set_state(self, task_id: str, state: str, error: str | None = None, **extra: Any) -> None:
        assert state in STORED, state
        cols = {"state": state, "error": self.redact(error), "updated_at": time.time(), **extra}
        if state == TaskState.RUNNING:
            cols.setdefault("run_id", self.run_id)
            cols.setdefault("started_at", time.time())
        sets = ", ".join(f"{k}=?" for k in cols)
        with self.tx():
            self.db.execute(f"UPDATE tasks SET {sets} WHERE id=?", (*cols.values(), task_id))
            self.event(f"task_{state}", task_id, **({"error": error} if error else {}))

    def reset(self, ids: list[str] | None) -> int:
        """Forget tasks (None = everything, including the budget ledger). The agents' calls of
        the last days stay counted by their daily limits (`keep_daily_usage`)."""
        self._spent = self._tokens = None
        with self.tx():
            self.keep_daily_usage(ids)
            if ids is None:
                n = self.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
                for table in ("tasks", "attempts", "ledger", "events", "loop_state"):
                    self.db.execute(f"DELETE FROM {table}")
                self.db.execute("DELETE FROM meta WHERE key=?", (MAX_COST_KEY,))
                return n
            n = 0
            for tid in ids:
                n += self.db.execute("DELETE FROM tasks WHERE id=?", (tid,)).rowcount
                self.db.execute("DELETE FROM attempts WHERE task_id=?", (tid,))
                self.db.execute("DELETE FROM ledger WHERE task_id=?", (tid,))
                self.db.execute("DELETE FROM loop_state WHERE task_id=?", (tid,))
            return n

    def forget_loop_state(self, ids: list[str]) -> None:
        """Drop what these loop tasks carried over (memory, progress, ladder): they start a
        new round from nothing. Inside the caller's transaction."""
        self.db.executemany("DELETE FROM loop_state WHERE task_id=?", [(tid,) for tid in ids])

    def keep_daily_usage(self, ids: list[str] | None) -> None:
        """Copy the calls of the attempts and assist calls about to be forgotten (of tasks
        `ids`; None: all) from the last DAILY_KEEP seconds into daily_usage, which no reset
        deletes: a call made today counts against its agent's daily limits today (health.py)."""
        since = time.time() - DAILY_KEEP
        self.db.execute("DELETE FROM daily_usage WHERE ts < ?", (since,))
        which, args = ("", ()) if ids is None else (f" AND task_id IN ({','.join('?' * len(ids))})", tuple(ids))
        self.db.execute(
            "INSERT INTO daily_usage (agent, ts, calls, tokens, cost_usd) SELECT agent, started_at, 1,"
            " COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0), COALESCE(cost_usd, 0) FROM attempts"
            f" WHERE agent IS NOT NULL AND started_at >= ?{which}", (since, *args))
        self.db.execute(
            "INSERT INTO daily_usage (agent, ts, calls, tokens, cost_usd) SELECT agent, ts, 1, COALESCE(tokens, 0),"
            " CASE WHEN settled THEN COALESCE(actual, 0) ELSE reserved END FROM ledger"
            f" WHERE attempt_id IS NULL AND agent IS NOT NULL AND ts >= ?{which}", (since, *args))

    # ------------------------------------------------------------------ attempts

    def begin_attempt(self, task_id: str, iteration: int, level: int, agent: str,
                      prompt: str, prompt_hash: str, reserve_usd: float,
                      start_task: bool = False, reserve_tokens: tuple[int, int] = (0, 0),
                      steps: dict[str, list[float]] | None = None) -> int:
        """Record the attempt and reserve its estimated cost, before the agent is called.

        start_task: the task's first attempt in this run; it turns 'running' in the same commit.
        reserve_tokens: estimated (input, output) tokens, held in the attempt's token columns
        until it finishes with the real counts (an interrupted attempt keeps them: charged).
        steps: the timed steps before it ({"prompt"|"route": [start, end]}, wall times), told
        in its event for the run's trace (telemetry.py).
        """
        now = time.time()
        with self.tx():
            if start_task:  # what set_state(task_id, "running") does, in the same UPDATE
                self.db.execute(
                    "UPDATE tasks SET state='running', error=NULL, run_id=?, started_at=?,"
                    " attempts=attempts+1, iterations=?, agent=?, updated_at=? WHERE id=?",
                    (self.run_id, now, iteration, agent, now, task_id))
                self.event("task_running", task_id)
            else:
                self.db.execute(
                    "UPDATE tasks SET attempts=attempts+1, iterations=?, agent=?, updated_at=? WHERE id=?",
                    (iteration, agent, now, task_id))
            cur = self.db.execute(
                "INSERT INTO attempts (run_id, task_id, iteration, level, agent, prompt_hash, prompt,"
                " status, started_at, input_tokens, output_tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (self.run_id, task_id, iteration, level, agent, prompt_hash, self.redact(prompt),
                 "started", now, reserve_tokens[0], reserve_tokens[1]))
            aid = cur.lastrowid
            # Durable before any child exists: a resumed run finds what carries the marker.
            self.db.execute("UPDATE attempts SET proc_marker=? WHERE id=?", (self.proc_marker(aid), aid))
            lid = self.db.execute(
                "INSERT INTO ledger (run_id, task_id, attempt_id, reserved, ts) VALUES (?,?,?,?,?)",
                (self.run_id, task_id, aid, reserve_usd, now)).lastrowid
            self.event("attempt_started", task_id, attempt=aid, iteration=iteration, level=level,
                       agent=agent, reserved_usd=reserve_usd, **({"steps": steps} if steps else {}))
        self._reserved[aid] = (lid, reserve_usd, sum(reserve_tokens))
        if self._spent is not None:
            self._spent += reserve_usd
        if self._tokens is not None:
            self._tokens += sum(reserve_tokens)
        return aid

    def proc_marker(self, attempt_id: int) -> str:
        """What the attempt's child processes carry in HARNESSC_PROC (as <marker>.<n>)."""
        return f"{self.run_id}.{attempt_id}"

    def record_child(self, attempt_id: int, pid: int, start: int | None) -> None:
        """Remember the attempt's latest child (pid and start time) in the next group commit,
        within CHILD_RECORD_WITHIN seconds."""
        def write() -> None:
            self.db.execute("UPDATE attempts SET proc_pid=?, proc_start=? WHERE id=?",
                            (pid, start, attempt_id))

        # Best effort, so it rides along with another write's commit (with tasks running at
        # once, one comes within milliseconds): the marker, committed with the attempt before
        # the child started, finds the child anyway, and the run's watcher ends its group if
        # harnessc dies (children/lifeline.py).
        self.defer(write, within=CHILD_RECORD_WITHIN).add_done_callback(lambda f: f.cancelled() or f.exception())

    def finish_attempt(self, attempt_id: int, task_id: str, end: AttemptEnd) -> None:
        """Complete an attempt with its ledger, settle its reservation to the real cost and,
        when `end.task` says so, finish the task: one commit (store/attempts.py: the record)."""
        now = time.time()
        charge, progress, loop_state = end.charge, end.progress, end.loop_state
        cost_usd, task = charge.cost_usd, end.task
        errors = [*end.errors, *charge.unreported]
        held = self._reserved.get(attempt_id)
        counts = _usage_counts(charge.usage)
        tokens = counts["input_tokens"] + counts["output_tokens"]
        if task and loop_state is not None:  # the task's end leaves its ladder (_end_recovery)
            loop_state = {k: v for k, v in loop_state.items() if k != "recovery"}
        with self.tx():
            # progress, denials, tool_calls: kept as they were when not given
            self.db.execute(
                "UPDATE attempts SET status=?, raw_output=?, parsed_output=?, errors=?, checks=?,"
                " input_tokens=?, uncached_input_tokens=?, cache_read_tokens=?, cache_write_tokens=?,"
                " output_tokens=?, reasoning_tokens=?, cost_usd=?, cost_source=?, latency=?,"
                " finished_at=?, progress=COALESCE(?, progress), denials=COALESCE(?, denials),"
                " tool_calls=COALESCE(?, tool_calls) WHERE id=?",
                (end.status, self.redact(end.raw), self._json(end.parsed), self._json(errors),
                 self._json(end.checks or []), *(counts[c] for c in USAGE_COLUMNS), cost_usd, charge.cost_source,
                 charge.latency, now, self._json(progress), self._json(charge.denials) if charge.denials else None,
                 charge.tool_calls, attempt_id))
            if loop_state is not None:
                self.db.execute(
                    "INSERT INTO loop_state (task_id, data, updated_at) VALUES (?,?,?) ON CONFLICT(task_id)"
                    " DO UPDATE SET data=excluded.data, updated_at=excluded.updated_at",
                    (task_id, self._json(loop_state), now))
            if held:  # by rowid: the ledger has no index on attempt_id
                self.db.execute("UPDATE ledger SET actual=?, settled=1 WHERE id=?", (cost_usd, held[0]))
            else:
                self.db.execute("UPDATE ledger SET actual=?, settled=1 WHERE attempt_id=?",
                                (cost_usd, attempt_id))
            if task:  # usage and the task's result in one UPDATE (see finish_task)
                self.db.execute(
                    "UPDATE tasks SET tokens=tokens+?, cost_usd=cost_usd+?, state=?, output=?, filled=?,"
                    " fingerprint=?, error=?, finished_at=?, updated_at=?, run_id=COALESCE(?, run_id),"
                    " running_s=0 WHERE id=?",
                    (tokens, cost_usd, task.state, self._json(task.output), self._json(task.filled), task.fingerprint,
                     self.redact(task.error), now, now, self.run_id, task_id))
            else:
                self.db.execute(
                    "UPDATE tasks SET tokens=tokens+?, cost_usd=cost_usd+?, updated_at=? WHERE id=?",
                    (tokens, cost_usd, now, task_id))
            self.event("attempt_finished", task_id, attempt=attempt_id, status=end.status,
                       tokens=tokens, cost_usd=cost_usd, cost_source=charge.cost_source,
                       latency=round(charge.latency, 4), errors=errors[:5],
                       **({"answered_at": end.answered_at} if end.answered_at else {}),
                       **({"progress": progress.get("score"), "progressed": bool(progress.get("progressed"))}
                          if progress else {}))
            if task:
                if loop_state is None:  # else it was just written without its ladder
                    self._end_recovery(task_id)
                self.event(f"task_{task.state}", task_id, **({"error": task.error} if task.error else {}),
                           **({"filled": task.filled} if task.filled else {}))
        self._reserved.pop(attempt_id, None)
        if held is None:  # not reserved by this store: read the totals again when asked
            self._spent = self._tokens = None
        else:
            if self._spent is not None:
                self._spent += cost_usd - held[1]
            if self._tokens is not None:
                self._tokens += tokens - held[2]

    def finish_task(self, task_id: str, state: str, *, output: Any = None,
                    fingerprint: str | None = None, error: str | None = None) -> None:
        now = time.time()
        with self.tx():
            self.db.execute(
                "UPDATE tasks SET state=?, output=?, filled=NULL, fingerprint=?, error=?, finished_at=?,"
                " updated_at=?, run_id=COALESCE(?, run_id), running_s=0 WHERE id=?",
                (state, self._json(output), fingerprint, self.redact(error), now, now,
                 self.run_id, task_id))
            self._end_recovery(task_id)
            self.event(f"task_{state}", task_id, **({"error": error} if error else {}))

    def _end_recovery(self, task_id: str) -> None:
        """A task that ends leaves its recovery ladder (runtime/loop/loop.py's `recovery` entry): run
        again - `harnessc retry` after a human stepped in, a rerun - it climbs from the first
        rung on its first agent. Its memory and progress stay. (Part of the ending's commit.)"""
        self.db.execute("UPDATE loop_state SET data=json_remove(data, '$.recovery') WHERE task_id=? AND"
                        " CASE WHEN json_valid(data) THEN json_type(data, '$.recovery') IS NOT NULL ELSE 0 END",
                        (task_id,))  # a damaged row is reported where it is read, not here

    def task_round(self, task_id: str) -> dict[str, Any]:
        """What the task used in its current round of runs (runtime/routing/tasklimits.py): a round
        starts when the task starts afresh (first run, retry, rerun, reset) and goes on across
        stops, kills and resumes until it ends. `iterations`: its attempts, an interrupted one
        not counted (its iteration starts again); `tokens` (input + output) and `tool_calls`
        (as reported): of every attempt; `running_s`: its running time so far."""
        row = self.db.execute("SELECT finished_at, running_s FROM tasks WHERE id=?", (task_id,)).fetchone()
        since, running = (row[0] or 0.0, float(row[1] or 0.0)) if row else (0.0, 0.0)
        iterations, tokens, tools = self.db.execute(
            "SELECT COALESCE(SUM(status != 'interrupted'), 0),"
            " COALESCE(SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)), 0),"
            " COALESCE(SUM(COALESCE(tool_calls, 0)), 0) FROM attempts WHERE task_id=? AND started_at > ?",
            (task_id, since)).fetchone()
        return {"iterations": int(iterations), "tokens": int(tokens), "tool_calls": int(tools), "running_s": running}

    def save_running_time(self, task_id: str, seconds: float) -> None:
        """The running task's time so far in its round (a task no longer running keeps its own)."""
        with self.tx():
            self.db.execute("UPDATE tasks SET running_s=? WHERE id=? AND state='running'", (seconds, task_id))

    def attempts(self, task_id: str) -> list[dict]:
        """The task's attempts in order; `estimated_usd`: what was reserved for the call."""
        rows = []
        for row in self.db.execute("SELECT *, (SELECT reserved FROM ledger WHERE ledger.attempt_id=attempts.id)"
                                   " AS estimated_usd FROM attempts WHERE task_id=? ORDER BY id", (task_id,)):
            rows.append(self._attempt(row))
        return rows

    def attempt(self, attempt_id: int) -> dict | None:
        """One attempt's row (as `attempts` gives them), or None."""
        row = self.db.execute("SELECT * FROM attempts WHERE id=?", (attempt_id,)).fetchone()
        return self._attempt(row) if row is not None else None

    def _attempt(self, row: sqlite3.Row) -> dict:
        d = dict(row)
        for k, shape in (("parsed_output", None), ("errors", list), ("checks", list), ("progress", dict),
                         ("denials", list)):
            d[k] = self._loads(d[k], f"attempt {d['id']}'s {k}", shape)
        return d

    def final_attempt(self, task_id: str) -> dict | None:
        """The task's latest answered attempt (succeeded or rejected): the one its result came
        from - {id, status, raw_output, checks}. None when it has none."""
        row = self.db.execute("SELECT id, status, raw_output, checks FROM attempts WHERE task_id=?"
                              " AND status IN ('succeeded', 'rejected') ORDER BY id DESC LIMIT 1", (task_id,)).fetchone()
        if row is None:
            return None
        d = dict(row)
        d["checks"] = self._loads(d["checks"], f"attempt {d['id']}'s checks", list)
        return d

    def usage_totals(self) -> dict[str, Any]:
        """The finished attempts' ledger summed (every run until reset): the USAGE_COLUMNS,
        `tokens` (all input + output), `cost_usd`, `attempts`, `cost_sources` (source ->
        attempts) and `unsplit_input_tokens` (input of attempts from before schema 3, whose
        split was not recorded); `assists`: {calls, tokens, cost_usd} of the finished assist
        calls. Calls in flight are left out: theirs are reservations."""
        sums = ", ".join(f"COALESCE(SUM({c}), 0)" for c in USAGE_COLUMNS)
        row = self.db.execute(f"SELECT COUNT(*), {sums}, COALESCE(SUM(cost_usd), 0) FROM attempts"
                              " WHERE status != 'started'").fetchone()
        totals: dict[str, Any] = {"attempts": row[0], **dict(zip(USAGE_COLUMNS, row[1:-1])),
                                  "cost_usd": round(row[-1], 6)}
        totals["tokens"] = totals["input_tokens"] + totals["output_tokens"]
        # Attempts recorded before schema 3 have all input but no split of it.
        totals["unsplit_input_tokens"] = self.db.execute(
            "SELECT COALESCE(SUM(input_tokens), 0) FROM attempts WHERE status != 'started'"
            " AND uncached_input_tokens IS NULL").fetchone()[0]
        totals["cost_sources"] = {src or "unrecorded": n for src, n in self.db.execute(
            "SELECT cost_source, COUNT(*) FROM attempts WHERE status != 'started' GROUP BY cost_source")}
        calls, tokens, cost = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(tokens), 0), COALESCE(SUM(actual), 0) FROM ledger"
            " WHERE attempt_id IS NULL AND settled").fetchone()
        totals["assists"] = {"calls": calls, "tokens": tokens, "cost_usd": round(cost, 6)}  # runtime/loop/assist.py
        calls, usd = self.unknown_calls()
        totals["unknown"] = {"calls": calls, "estimated_usd": round(usd, 6)}  # cut off by a killed run
        return totals

    def cache_usage(self, run_id: str | None = None) -> dict[str, dict[str, int]]:
        """Per agent, the finished attempts' input tokens and the cache's part of them
        ({input_tokens, cache_read_tokens, cache_write_tokens}), of one run or of all."""
        where = "status != 'started'" + (" AND run_id=?" if run_id else "")
        rows = self.db.execute(
            "SELECT agent, COALESCE(SUM(input_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),"
            f" COALESCE(SUM(cache_write_tokens), 0) FROM attempts WHERE {where} GROUP BY agent",
            (run_id,) if run_id else ())
        return {agent: {"input_tokens": i, "cache_read_tokens": r, "cache_write_tokens": w}
                for agent, i, r, w in rows if agent is not None}

    # ------------------------------------------------------------------ assist calls

    def begin_assist(self, task_id: str, kind: str, agent: str, reserve_usd: float, reserve_tokens: int) -> int:
        """Reserve a cheap agent's call for a task (runtime/loop/assist.py: `mutation` or `summary`)
        in the ledger before it is made; returns the ledger row. It counts against the run's
        and the task's budgets like an attempt, and a run that dies during it is charged it."""
        with self.tx():
            lid = self.db.execute(
                "INSERT INTO ledger (run_id, task_id, attempt_id, reserved, ts, kind, agent, tokens)"
                " VALUES (?,?,NULL,?,?,?,?,?)",
                (self.run_id, task_id, reserve_usd, time.time(), kind, agent, reserve_tokens)).lastrowid
        if self._spent is not None:
            self._spent += reserve_usd
        if self._tokens is not None:
            self._tokens += reserve_tokens
        return lid

    def finish_assist(self, ledger_id: int, task_id: str, cost_usd: float, tokens: int, **event: Any) -> None:
        """Settle an assist call's reservation to what it cost, add that to its task's usage
        and record the `assist` event (`event`: kind, agent, status, ...): one commit."""
        reserved, held_tokens = self.db.execute("SELECT reserved, COALESCE(tokens, 0) FROM ledger WHERE id=?",
                                                (ledger_id,)).fetchone()
        with self.tx():
            self.db.execute("UPDATE ledger SET actual=?, tokens=?, settled=1 WHERE id=?", (cost_usd, tokens, ledger_id))
            self.db.execute("UPDATE tasks SET tokens=tokens+?, cost_usd=cost_usd+?, updated_at=? WHERE id=?",
                            (tokens, cost_usd, time.time(), task_id))
            self.event("assist", task_id, cost_usd=cost_usd, tokens=tokens, **event)
        if self._spent is not None:
            self._spent += cost_usd - reserved
        if self._tokens is not None:
            self._tokens += tokens - held_tokens

    # ------------------------------------------------------------------ loop tasks

    def loop_state(self, task_id: str) -> dict | None:
        """What a loop task carries over from its last iteration (runtime/loop/loop.py), or None."""
        row = self.db.execute("SELECT data FROM loop_state WHERE task_id=?", (task_id,)).fetchone()
        return self._loads(row[0], f"task {task_id}'s loop state", dict) if row else None

    def save_loop_memory(self, task_id: str, memory: dict) -> None:
        """Replace the memory in a loop task's saved state (after a summary is rewritten
        between iterations); nothing when the task has no saved state yet."""
        with self.tx():
            self.db.execute("UPDATE loop_state SET data=json_set(data, '$.memory', json(?)), updated_at=?"
                            " WHERE task_id=?", (self._json(memory), time.time(), task_id))

    def recent_progress(self, task_id: str, n: int = 5) -> list[float]:
        """The progress scores of the task's last `n` scored attempts, oldest first."""
        rows = self.db.execute("SELECT progress FROM attempts WHERE task_id=? AND progress IS NOT NULL"
                               " ORDER BY id DESC LIMIT ?", (task_id, n)).fetchall()
        scores = [(self._loads(r[0], f"task {task_id}'s progress", dict) or {}).get("score") for r in rows]
        return [float(s) for s in reversed(scores) if isinstance(s, (int, float))]

    # ------------------------------------------------------------------ budget

    def spent(self, task_id: str | None = None) -> float:
        """USD settled plus USD reserved by calls in flight, across every run until reset."""
        if task_id is None and self._spent is not None and self.run_id is not None:
            return self._spent  # kept in step by begin/finish_attempt (one run holds the lock)
        q = "SELECT COALESCE(SUM(CASE WHEN settled THEN actual ELSE reserved END), 0) FROM ledger"
        args: tuple = ()
        if task_id is not None:
            q += " WHERE task_id=?"
            args = (task_id,)
        total = float(self.db.execute(q, args).fetchone()[0])
        if task_id is None and self.run_id is not None:
            self._spent = total
        return total

    def spent_this_round(self, task_id: str) -> float:
        """USD settled or reserved by the task since it last started afresh (`task_round`)."""
        row = self.db.execute(
            "SELECT COALESCE(SUM(CASE WHEN settled THEN actual ELSE reserved END), 0) FROM ledger"
            " WHERE task_id=? AND ts > COALESCE((SELECT finished_at FROM tasks WHERE id=?), 0)",
            (task_id, task_id)).fetchone()
        return float(row[0])

    def unknown_calls(self, task_id: str | None = None) -> tuple[int, float]:
        """(calls, USD estimated) of the calls a killed run cut off: their cost is unknown and
        counts in no sum; the estimate reserved for them is shown apart (`status`, `log`)."""
        q = "SELECT COUNT(*), COALESCE(SUM(reserved), 0) FROM ledger WHERE settled AND actual IS NULL"
        calls, usd = self.db.execute(q + (" AND task_id=?" if task_id else ""),
                                     (task_id,) if task_id else ()).fetchone()
        return int(calls), float(usd)

    def reserved(self) -> float:
        """USD held by calls that have not settled (in flight, or cut off by a kill)."""
        return float(self.db.execute("SELECT COALESCE(SUM(reserved), 0) FROM ledger WHERE NOT settled").fetchone()[0])

    def remembered_max_cost(self) -> float | None:
        """The last --max-cost given to run or retry, kept for later runs until reset --all.
        Raises ValueError when what is kept is not an amount of USD (a NaN or an infinity an
        older harnessc accepted would disable every later run's budget)."""
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (MAX_COST_KEY,)).fetchone()
        if row is None:
            return None
        usd = float(row[0])
        if not (math.isfinite(usd) and usd >= 0):
            shown = row[0] if len(row[0]) <= 40 else row[0][:37] + "..."  # not 5,000 digits in a notice
            raise ValueError(f"{shown!r} is not an amount of USD")
        return usd

    def forget_max_cost(self) -> None:
        self.meta_set(MAX_COST_KEY, None)

    def remember_max_cost(self, usd: float) -> None:
        with self.tx():
            self.db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                            (MAX_COST_KEY, repr(float(usd))))

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

    def run_attempts(self, run_id: str) -> list[dict]:
        """The run's attempts, oldest first, JSON columns decoded; prompts are left out (large,
        and `harnessc log` shows them)."""
        columns = ", ".join(r[1] for r in self.db.execute("PRAGMA table_info(attempts)") if r[1] != "prompt")
        return [self._attempt(row) for row in
                self.db.execute(f"SELECT {columns} FROM attempts WHERE run_id=? ORDER BY id", (run_id,))]

    def agent_paths(self, run_id: str) -> dict[str, list[str]]:
        """task -> the agents its attempts in this run used, in order of first use."""
        paths: dict[str, list[str]] = {}
        for task_id, agent in self.db.execute("SELECT task_id, agent FROM attempts WHERE run_id=? ORDER BY id",
                                              (run_id,)):
            path = paths.setdefault(task_id, [])
            if agent not in path:
                path.append(agent)
        return paths

    def claims(self) -> list[tuple[str, str, str, float | None]]:
        """(agent, task, succeeded|rejected, cost) of every attempt that made a claim, oldest first."""
        return self.db.execute("SELECT agent, task_id, status, cost_usd FROM attempts"
                               " WHERE status IN ('succeeded', 'rejected') ORDER BY id").fetchall()

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

    def agent_usage_since(self, agent: str, since: float) -> dict[str, Any]:
        """An agent's calls, tokens and settled cost since `since` (epoch), across every run."""
        calls, tokens, cost = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)), 0),"
            " COALESCE(SUM(COALESCE(cost_usd, 0)), 0) FROM attempts WHERE agent=? AND started_at >= ?",
            (agent, since)).fetchone()
        # its assist calls (runtime/loop/assist.py) count too
        more = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(COALESCE(tokens, 0)), 0),"
            " COALESCE(SUM(CASE WHEN settled THEN actual ELSE reserved END), 0) FROM ledger"
            " WHERE attempt_id IS NULL AND agent=? AND ts >= ?", (agent, since)).fetchone()
        # and the calls a reset forgot (keep_daily_usage)
        kept = self.db.execute(
            "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(tokens), 0), COALESCE(SUM(cost_usd), 0) FROM daily_usage"
            " WHERE agent=? AND ts >= ?", (agent, since)).fetchone()
        return {"calls": int(calls + more[0] + kept[0]), "tokens": int(tokens + more[1] + kept[1]),
                "cost_usd": round(float(cost + more[2] + kept[2]), 6)}

    def settled_spent(self) -> float:
        """USD settled (calls that ended), across every run until reset: no reservations."""
        return float(self.db.execute(
            "SELECT COALESCE(SUM(actual), 0) FROM ledger WHERE settled").fetchone()[0])

    def run_spent(self, run_id: str) -> float:
        """USD settled or reserved by one run's calls."""
        return float(self.db.execute(
            "SELECT COALESCE(SUM(CASE WHEN settled THEN actual ELSE reserved END), 0) FROM ledger"
            " WHERE run_id=?", (run_id,)).fetchone()[0])

    def tokens_spent(self) -> int:
        """Tokens used plus tokens reserved by calls in flight (attempts and assist calls),
        across every run until reset."""
        if self._tokens is not None and self.run_id is not None:
            return self._tokens
        total = int(self.db.execute(
            "SELECT COALESCE(SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)), 0)"
            " FROM attempts").fetchone()[0]) + int(self.db.execute(
            "SELECT COALESCE(SUM(tokens), 0) FROM ledger WHERE attempt_id IS NULL").fetchone()[0])
        if self.run_id is not None:
            self._tokens = total
        return total

    def integrity(self) -> str:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0]
