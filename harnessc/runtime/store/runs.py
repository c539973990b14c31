"""The runs table: a run's start and end, and the clean-up after one that died."""

from __future__ import annotations

import os
import sqlite3

from .. import clock
from .eventlog import EventLog


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


class Runs(EventLog):
    def start_run(self, run_id: str, options: dict) -> None:
        self.run_id = run_id
        self.mirror = self.workspace.open_write(self.workspace.events(run_id), "a")
        with self.tx():
            self.db.execute(
                "INSERT INTO runs (id, started_at, status, pid, options) VALUES (?,?,?,?,?)",
                (run_id, clock.time(), "running", os.getpid(), self._json(options)),
            )
            self.event("run_started", options=options)

    def end_run(self, status: str, exit_code: int, message: str = "") -> None:
        with self.tx():
            self.db.execute(
                "UPDATE runs SET ended_at=?, status=?, exit_code=?, message=? WHERE id=?",
                (clock.time(), status, exit_code, self.redact(message), self.run_id),
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
        now = clock.time()
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
