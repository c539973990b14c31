"""The budget ledger: what every call reserved before it was made and what it cost once it
ended (attempts and assist calls), summed for the budgets and the daily limits."""

from __future__ import annotations

import math
from typing import Any

from .eventlog import EventLog

MAX_COST_KEY = "max_cost_usd"  # meta: the last explicit --max-cost


class Ledger(EventLog):
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

    def settled(self) -> float:
        """USD of the calls that ended (what `spent` holds but the reservations of calls in
        flight), across every run until reset."""
        row = self.db.execute("SELECT COALESCE(SUM(actual), 0) FROM ledger WHERE settled").fetchone()
        return float(row[0])

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
