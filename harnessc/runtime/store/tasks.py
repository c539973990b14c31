"""The tasks table (each task's state and result) and loop_state (what a loop task carries
over between iterations); `reset` forgets tasks across every table."""

from __future__ import annotations

from typing import Any, Iterable

from ...states import STORED, TaskState
from .. import clock
from .eventlog import EventLog
from .ledger import MAX_COST_KEY

DAILY_KEEP = 2 * 86400.0  # seconds of forgotten calls a reset keeps for the daily limits (a local day, and then some)


def task_summary(row: dict, agents: list[str] | None = None) -> dict:
    """A task's line in run_results.json and the summary; `agents`: the agents it moved
    through in this run, kept when there was more than one."""
    dur = None
    if row.get("started_at") and row.get("finished_at") and row["finished_at"] >= row["started_at"]:
        dur = round(row["finished_at"] - row["started_at"], 3)
    return {"id": row["id"], "state": row["state"], "attempts": row["attempts"],
            "iterations": row["iterations"], "agent": row["agent"], "tokens": row["tokens"],
            "cost_usd": round(row["cost_usd"] or 0.0, 6), "duration": dur, "error": row["error"],
            "run_id": row["run_id"], **({"agents": agents} if agents and len(agents) > 1 else {})}


class Tasks(EventLog):
    def tasks(self, ids: list[str] | None = None) -> dict[str, dict]:
        """Task rows by id (all of them, or just `ids`)."""
        out = {}
        rows = self.db.cursor()
        rows.row_factory = None  # plain tuples, zipped with the columns: sqlite3.Row's dict() cost most of a big read
        if ids is None:
            rows.execute("SELECT * FROM tasks")
        else:
            marks = ",".join("?" * len(ids))
            rows.execute(f"SELECT * FROM tasks WHERE id IN ({marks})", list(ids))
        cols = [c[0] for c in rows.description]
        for values in rows:
            d = dict(zip(cols, values))
            output, filled = d["output"], d.get("filled")
            d["output"] = self._loads(output, f"task {d['id']}'s output") if output else None
            d["filled"] = self._loads(filled, f"task {d['id']}'s filled fields") if filled else None
            out[d["id"]] = d
        return out

    def outputs(self, ids: list[str]) -> dict[str, Any]:
        """Task id -> its output (as tasks() decodes it), for the tasks of `ids` that have a
        row: read without the rest of the rows (a run's end reads every task's)."""
        marks = ",".join("?" * len(ids))
        return {tid: self._loads(output, f"task {tid}'s output") if output else None for tid, output in
                self.db.execute(f"SELECT id, output FROM tasks WHERE id IN ({marks})", list(ids))}

    def states(self, ids: list[str] | None = None) -> dict[str, str]:
        """Task id -> its state (all of them, or just `ids`): what tasks() says of each, read
        without the rest of its row."""
        rows = self.db.cursor()
        rows.row_factory = None
        if ids is None:
            return dict(rows.execute("SELECT id, state FROM tasks"))
        marks = ",".join("?" * len(ids))
        return dict(rows.execute(f"SELECT id, state FROM tasks WHERE id IN ({marks})", list(ids)))

    def ensure_tasks(self, ids: Iterable[str], done: set[str], made: bool = False) -> None:
        """Rows for tasks seen for the first time; tasks checked in roadmap.md are 'done'.
        `made`: every task of `ids` has its row already (only the checked ones are set done)."""
        now = clock.time()
        ids = list(ids)
        with self.tx():  # (executemany: a statement per task cost a 1,000-task run's start 2,000 calls)
            if not made:
                self.db.executemany(
                    "INSERT INTO tasks (id, state, updated_at) VALUES (?,?,?) ON CONFLICT(id) DO NOTHING",
                    ((tid, TaskState.DONE if tid in done else TaskState.PENDING, now) for tid in ids))
            self.db.executemany("UPDATE tasks SET state='done', updated_at=? WHERE id=? AND state!='done'",
                                ((now, tid) for tid in ids if tid in done))

    def set_state(self, task_id: str, state: str, error: str | None = None, **extra: Any) -> None:
        assert state in STORED, state
        cols = {"state": state, "error": self.redact(error), "updated_at": clock.time(), **extra}
        if "running_s" in cols:
            self._idle_time.pop(task_id, None)
        if state == TaskState.RUNNING:
            cols.setdefault("run_id", self.run_id)
            cols.setdefault("started_at", clock.time())
        sets = ", ".join(f"{k}=?" for k in cols)
        with self.tx():
            self.db.execute(f"UPDATE tasks SET {sets} WHERE id=?", (*cols.values(), task_id))
            self.event(f"task_{state}", task_id, **({"error": error} if error else {}))

    def finish_task(self, task_id: str, state: str, *, output: Any = None,
                    fingerprint: str | None = None, error: str | None = None) -> None:
        now = clock.time()
        self._idle_time.pop(task_id, None)  # (its running_s goes to 0)
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
        if task_id not in self._loop_tasks():
            return  # no loop state: nothing to leave (most tasks: no statement at their end)
        self.db.execute("UPDATE loop_state SET data=json_remove(data, '$.recovery') WHERE task_id=? AND"
                        " CASE WHEN json_valid(data) THEN json_type(data, '$.recovery') IS NOT NULL ELSE 0 END",
                        (task_id,))  # a damaged row is reported where it is read, not here

    def _loop_tasks(self) -> set[str]:
        """The tasks that have a loop_state row, read once (then the attempts' writes add to
        it; a row deleted leaves its task in it, which costs only a statement that changes
        nothing). Only this process's run writes loop_state (the run lock)."""
        if self._looped is None:
            self._looped = {tid for (tid,) in self.db.execute("SELECT task_id FROM loop_state")}
        return self._looped

    def task_round(self, task_id: str) -> dict[str, Any]:
        """What the task used in its current round of runs (runtime/routing/tasklimits.py): a round
        starts when the task starts afresh (first run, retry, rerun, reset) and goes on across
        stops, kills and resumes until it ends. `iterations`: its attempts, an interrupted one
        not counted (its iteration starts again); `tokens` (input + output) and `tool_calls`
        (as reported): of every attempt; `running_s`: its running time so far."""
        fresh = task_id in self.never_attempted()
        if fresh and (running := self._idle_time.get(task_id)) is not None:  # (no read of its row)
            return {"iterations": 0, "tokens": 0, "tool_calls": 0, "running_s": running}
        row = self.db.execute("SELECT finished_at, running_s FROM tasks WHERE id=?", (task_id,)).fetchone()
        since, running = (row[0] or 0.0, float(row[1] or 0.0)) if row else (0.0, 0.0)
        if fresh:
            return {"iterations": 0, "tokens": 0, "tool_calls": 0, "running_s": running}
        iterations, tokens, tools = self.db.execute(
            "SELECT COALESCE(SUM(status != 'interrupted'), 0),"
            " COALESCE(SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)), 0),"
            " COALESCE(SUM(COALESCE(tool_calls, 0)), 0) FROM attempts WHERE task_id=? AND started_at > ?",
            (task_id, since)).fetchone()
        return {"iterations": int(iterations), "tokens": int(tokens), "tool_calls": int(tools), "running_s": running}

    def never_attempted(self) -> set[str]:
        """The tasks with no attempt on record, read once (then begin_attempt keeps it; a reset
        reads it again): most tasks of a big run start from nothing, and their rounds need no
        count over the attempts table. Only this process's run writes attempts (the run lock).
        Their running time is read with them (`_idle_time`, which every write of a task's
        running_s drops it from: task_round reads the row again then)."""
        if self._never_attempted is None:
            rows = self.db.execute("SELECT id, running_s FROM tasks WHERE NOT EXISTS"
                                   " (SELECT 1 FROM attempts WHERE attempts.task_id = tasks.id)").fetchall()
            self._never_attempted = {tid for tid, _ in rows}
            self._idle_time = {tid: float(running or 0.0) for tid, running in rows}
        return self._never_attempted

    def save_running_time(self, task_id: str, seconds: float) -> None:
        """The running task's time so far in its round (a task no longer running keeps its own)."""
        self._idle_time.pop(task_id, None)
        with self.tx():
            self.db.execute("UPDATE tasks SET running_s=? WHERE id=? AND state='running'", (seconds, task_id))

    def reset(self, ids: list[str] | None) -> int:
        """Forget tasks (None = everything, including the budget ledger). The agents' calls of
        the last days stay counted by their daily limits (`keep_daily_usage`)."""
        self._spent = self._tokens = self._never_attempted = self._looped = None
        self._idle_time = {}
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
        since = clock.time() - DAILY_KEEP
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

    def loop_state(self, task_id: str) -> dict | None:
        """What a loop task carries over from its last iteration (runtime/loop/loop.py), or None."""
        row = self.db.execute("SELECT data FROM loop_state WHERE task_id=?", (task_id,)).fetchone()
        return self._loads(row[0], f"task {task_id}'s loop state", dict) if row else None

    def save_loop_memory(self, task_id: str, memory: dict) -> None:
        """Replace the memory in a loop task's saved state (after a summary is rewritten
        between iterations); nothing when the task has no saved state yet."""
        with self.tx():
            self.db.execute("UPDATE loop_state SET data=json_set(data, '$.memory', json(?)), updated_at=?"
                            " WHERE task_id=?", (self._json(memory), clock.time(), task_id))

    def recent_progress(self, task_id: str, n: int = 5) -> list[float]:
        """The progress scores of the task's last `n` scored attempts, oldest first."""
        rows = self.db.execute("SELECT progress FROM attempts WHERE task_id=? AND progress IS NOT NULL"
                               " ORDER BY id DESC LIMIT ?", (task_id, n)).fetchall()
        scores = [(self._loads(r[0], f"task {task_id}'s progress", dict) or {}).get("score") for r in rows]
        return [float(s) for s in reversed(scores) if isinstance(s, (int, float))]
