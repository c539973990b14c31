"""The attempts table: an attempt is recorded (and its cost reserved in the ledger) before the
agent is called, and completed after with its end - a typed record (AttemptEnd) built where
the attempt ends (runtime/iteration.py): its answer and verdict, what the call cost, a loop
task's progress and, when the attempt ends its task, the task's end, all in one commit
(`end_task`: the scheduler writes a task's Ending so).
Assist calls (runtime/loop/assist.py) are ledger rows of the task, without an attempt."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Sequence

from ...states import TaskState
from .. import clock
from ..agents.usage import Charge
from .ledger import Ledger
from .tasks import Tasks

CHILD_RECORD_WITHIN = 0.5  # seconds an attempt's child record may wait for another write's commit

# The ledger columns of an attempt, summed by usage_totals() (input_tokens is all input).
USAGE_COLUMNS = ("input_tokens", "uncached_input_tokens", "cache_read_tokens", "cache_write_tokens",
                 "output_tokens", "reasoning_tokens")


# An attempt that answered and was judged: a task's result comes from its latest one (SQL).
ANSWERED = "status IN ('succeeded', 'rejected')"


@dataclass(frozen=True, slots=True)
class TaskEnd:
    """The task's end, committed with the attempt that reached it."""

    state: TaskState
    output: Any = None  # its result (a degraded task's fallback output)
    fingerprint: str | None = None  # the plan node's, for a result a later run may keep
    error: str | None = None
    filled: list | None = None  # the fields of a fallback output taken from the contract ([{field, from, was}])


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    status: str  # the attempt's: succeeded, rejected, progress, stuck, error, over_limit, interrupted
    raw: str | None = None  # the answer's text
    parsed: Any = None  # the JSON output the verdict read from it
    errors: Sequence[str] = ()
    checks: list[dict] | None = None  # the accept commands' results
    charge: Charge = Charge()  # the ledger figures (the defaults: a call that never answered)
    progress: dict | None = None  # a loop iteration's evidence and score (None: kept as it was)
    loop_state: dict | None = None  # what a loop task's next iteration carries over (runtime/loop/loop.py)
    task: TaskEnd | None = None  # the task ends with this attempt
    answered_at: float | None = None  # when the agent's answer came (a wall time), for the run's trace


@dataclass(frozen=True, slots=True)
class Ending:
    """How a task's run ended: what runtime/iteration.py's TaskRun (or approaches.py's
    coordinator) returns and the scheduler writes with `end_task`, in one commit: the task's
    end (None: pending again, it runs on resume) and the last record of the attempt that
    reached it, when that attempt was still open."""

    task: TaskEnd | None
    attempt_id: int | None = None
    attempt: AttemptEnd | None = None  # its `task` is this ending's, whatever it holds
    running_s: float | None = None  # pending again: its running time so far in its round (None: kept)

    @property
    def state(self) -> TaskState:
        return self.task.state if self.task is not None else TaskState.INTERRUPTED


def _usage_counts(usage: Any) -> dict[str, int]:
    """An agents.base.Usage as the attempt's USAGE_COLUMNS (all 0 for None: nothing reported)."""
    if usage is None:
        return dict.fromkeys(USAGE_COLUMNS, 0)
    return {"input_tokens": usage.input_tokens, "uncached_input_tokens": usage.uncached_input_tokens,
            "cache_read_tokens": usage.cache_read_tokens, "cache_write_tokens": usage.cache_write_tokens,
            "output_tokens": usage.output_tokens, "reasoning_tokens": usage.reasoning_tokens}


class Attempts(Tasks, Ledger):
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
        now = clock.time()
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
        if self._never_attempted is not None:
            self._never_attempted.discard(task_id)
            self._idle_time.pop(task_id, None)
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
        self._finish_attempt(attempt_id, task_id, end, end.task)

    def _finish_attempt(self, attempt_id: int, task_id: str, end: AttemptEnd, task: TaskEnd | None) -> None:
        """finish_attempt, the task's end given apart (`end_task`: the ending's, whatever
        `end.task` holds - no copy of the record made to carry it)."""
        now = clock.time()
        if task:
            self._idle_time.pop(task_id, None)  # (its running_s goes to 0)
        charge, progress, loop_state = end.charge, end.progress, end.loop_state
        cost_usd = charge.cost_usd
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
                if self._looped is not None:  # (unread: its first read finds the row)
                    self._looped.add(task_id)
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

    def end_task(self, task_id: str, ending: Ending) -> None:
        """Write a task's ending: its attempt's last record and the task's final state (or
        pending again) in one transaction, so no crash falls between them."""
        with self.tx():
            if ending.attempt is not None:
                self._finish_attempt(ending.attempt_id, task_id, ending.attempt, ending.task)
            elif ending.task is not None:
                task = ending.task
                self.finish_task(task_id, task.state, output=task.output, fingerprint=task.fingerprint,
                                 error=task.error)
            if ending.task is None:
                extra = {} if ending.running_s is None else {"running_s": ending.running_s}
                self.set_state(task_id, TaskState.PENDING, **extra)

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
                              f" AND {ANSWERED} ORDER BY id DESC LIMIT 1", (task_id,)).fetchone()
        return None if row is None else self._final(*row)

    def _final(self, aid: int, status: str, raw: str | None, checks: str | None) -> dict:
        return {"id": aid, "status": status, "raw_output": raw,
                "checks": self._loads(checks, f"attempt {aid}'s checks", list)}

    def task_result(self, task_id: str) -> tuple[dict, dict | None]:
        """What the task's result is made of (store/outputs.py's `result`): its row's `id`,
        `state`, `run_id`, `agent`, `attempts`, `output`, `filled` and `error`, as tasks()
        gives them, and its final_attempt - one query (the run makes a result at every task's
        landing, and each read outside a transaction takes the database's read lock). KeyError
        when the task has no row."""
        row = self.db.execute(
            "SELECT t.id, t.state, t.run_id, t.agent, t.attempts, t.output, t.filled, t.error,"
            " a.id, a.status, a.raw_output, a.checks FROM tasks t LEFT JOIN attempts a ON a.id ="
            f" (SELECT id FROM attempts WHERE task_id=t.id AND {ANSWERED}"
            " ORDER BY id DESC LIMIT 1) WHERE t.id=?", (task_id,)).fetchone()
        if row is None:
            raise KeyError(task_id)
        tid, state, run_id, agent, attempts, output, filled, error, aid, status, raw, checks = row
        task = {"id": tid, "state": state, "run_id": run_id, "agent": agent, "attempts": attempts,
                "output": self._loads(output, f"task {tid}'s output") if output else None,
                "filled": self._loads(filled, f"task {tid}'s filled fields") if filled else None, "error": error}
        return task, None if aid is None else self._final(aid, status, raw, checks)

    def final_answers(self, task_ids: list[str]) -> dict[str, str | None]:
        """Task -> the raw output of its final_attempt, for the tasks that have one (one query)."""
        marks = ",".join("?" * len(task_ids))
        return dict(self.db.execute(
            "SELECT task_id, raw_output FROM attempts WHERE id IN (SELECT MAX(id) FROM attempts WHERE"
            f" task_id IN ({marks}) AND {ANSWERED} GROUP BY task_id)", list(task_ids)))

    def last_prompt(self, task_id: str) -> str | None:
        """The prompt of the task's newest attempt (None: it has none), for `show`."""
        row = self.db.execute("SELECT prompt FROM attempts WHERE task_id=? ORDER BY id DESC LIMIT 1",
                              (task_id,)).fetchone()
        return row[0] if row is not None else None

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
                               f" WHERE {ANSWERED} ORDER BY id").fetchall()

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

    def begin_assist(self, task_id: str, kind: str, agent: str, reserve_usd: float, reserve_tokens: int) -> int:
        """Reserve a cheap agent's call for a task (runtime/loop/assist.py: `mutation` or `summary`)
        in the ledger before it is made; returns the ledger row. It counts against the run's
        and the task's budgets like an attempt, and a run that dies during it is charged it."""
        with self.tx():
            lid = self.db.execute(
                "INSERT INTO ledger (run_id, task_id, attempt_id, reserved, ts, kind, agent, tokens)"
                " VALUES (?,?,NULL,?,?,?,?,?)",
                (self.run_id, task_id, reserve_usd, clock.time(), kind, agent, reserve_tokens)).lastrowid
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
                            (tokens, cost_usd, clock.time(), task_id))
            self.event("assist", task_id, cost_usd=cost_usd, tokens=tokens, **event)
        if self._spent is not None:
            self._spent += cost_usd - reserved
        if self._tokens is not None:
            self._tokens += tokens - held_tokens
