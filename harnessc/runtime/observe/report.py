"""Read-only views of the state for `status` and `log` (safe while a run is going on)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

from ...outcome import BROKEN, COMPLETE
from ...planfile import AutoStaging, PlanError, load_plan
from ...states import LANDED, TaskState
from ...wording import filled_text, routing_line
from ...workspace import Workspace
from ..loop.recovery import Ladder, resumed_text, rungs_for
from ..memory import recall
from ..routing.health import agent_report
from ..routing.history import History
from ..steering import paused_run
from ..store import outputs, scoreboard
from ..store.lock import holder
from ..store.state import NoState, StateStore
from ..store.tasks import task_summary
from .cachesaving import cache_figures


def _open_state(workspace: Workspace) -> StateStore | None:
    """The state for reading; None when nothing has run yet (no state.db, or one a starting
    run has not initialised yet)."""
    try:
        return StateStore(workspace, create=False)
    except NoState:
        return None


def status(root: Path) -> dict:
    """{"run": {...} | None, "tasks": [...]} in plan order when a plan exists."""
    workspace = Workspace(root)
    try:
        plan = load_plan(root)
    except PlanError:
        plan = None
    store = _open_state(workspace)
    try:
        rows = store.tasks() if store else {}
        run = store.last_run() if store else None
        spent = store.spent() if store else 0.0
        reserved = store.reserved() if store else 0.0
        totals = store.usage_totals() if store else None
        paused = bool(store and run and paused_run(store, run["id"]))
        agents = agent_report(store, plan.agents) if store and plan else {}
        active = going_on(run, workspace)
        if store and run is not None and not active and run["status"] == "running":
            run = store.last_run()  # it may have ended between the two looks (else it was killed)
            rows = store.tasks()
        loops = _loops(store, plan, rows) if store and active else {}
        boards = scoreboard.every(store) if store else {}
    finally:
        if store:
            store.close()
    now = time.time()
    tasks = []
    order = [n.id for n in plan.nodes] if plan else sorted(rows)
    nodes = {n.id: n for n in plan.nodes} if plan else {}
    for tid in order + sorted(set(rows) - set(order)):
        row = rows.get(tid)
        if row is None:
            row = {"id": tid, "state": TaskState.DONE if tid in nodes and nodes[tid].done else TaskState.PENDING,
                   "attempts": 0, "iterations": 0, "agent": None, "tokens": 0, "cost_usd": 0.0, "error": None,
                   "run_id": None}
        t = task_summary(row)
        if t["state"] == TaskState.PENDING and tid in nodes:
            if all((rows.get(d) or {}).get("state") in COMPLETE
                   or (d in nodes and nodes[d].done) for d in nodes[tid].depends_on):
                t["state"] = TaskState.READY
        if tid in nodes and row.get("state") in LANDED:
            t["stale"] = row.get("fingerprint") != nodes[tid].fingerprint
        if tid not in nodes and plan:
            t["removed"] = True
        if t["state"] == TaskState.RUNNING and not active:  # its run was killed: `harnessc run` resumes it
            t["state"] = TaskState.INTERRUPTED
        if active and t["state"] == TaskState.RUNNING and row.get("started_at"):
            t["elapsed"] = round(max(0.0, now - row["started_at"]), 3)  # so far
            if tid in loops:
                t["loop"] = loops[tid]
        if tid in boards:  # best-of-N (approaches.py)
            t["approaches"] = boards[tid]
        tasks.append(t)
    if run is not None:
        run["active"] = active
        run["paused"] = active and paused
        counts: dict[str, int] = {}
        for t in tasks:
            counts[t["state"]] = counts.get(t["state"], 0) + 1
        run["counts"] = counts
        run["cost_usd"] = round(spent, 6)  # spent, and held by calls that have not settled
        run["reserved_usd"] = round(reserved, 6)
        if not active:
            run["pid"] = None  # an ended run's process is gone (its number may be another's now)
            if run["status"] == "running":
                run["status"] = "interrupted"  # killed: nobody holds the run lock
        end = run.get("ended_at") or now
        run["elapsed"] = round(end - run["started_at"], 3)
    return {"run": run, "tasks": tasks, "totals": totals, "agents": agents}


def runs(root: Path) -> list[dict]:
    """`harnessc runs`: every recorded run, oldest first: id, started_at, ended_at, status
    (a run killed is `interrupted`), pid (while it goes on), tasks, cost_usd, exit_code, log
    (its run.log, relative to the project, when there is one)."""
    workspace = Workspace(root)
    store = _open_state(workspace)
    try:
        rows = store.runs() if store else []
    finally:
        if store:
            store.close()
    active = going_on(rows[-1], workspace) if rows else False
    out = []
    for n, run in enumerate(rows):
        going = active and n == len(rows) - 1
        status = "interrupted" if run["status"] == "running" and not going else run["status"]
        log = workspace.run_log(run["id"])
        out.append({"id": run["id"], "started_at": run["started_at"], "ended_at": run["ended_at"],
                    "status": status, "pid": run["pid"] if going else None, "tasks": run["tasks"],
                    "cost_usd": run["cost_usd"], "exit_code": run["exit_code"],
                    "log": workspace.rel(log) if log.is_file() else None})
    return out


def run_going_on(root: Path, run_id: str) -> bool:
    """Whether the run `run_id` is the one going on (recorded running, run lock held)."""
    workspace = Workspace(root)
    store = _open_state(workspace)
    try:
        run = store.last_run() if store else None
    finally:
        if store:
            store.close()
    return run is not None and run["id"] == run_id and going_on(run, workspace)


def going_on(run: dict | None, workspace: Workspace) -> bool:
    """Whether the last run (`store.last_run()`) is going on: recorded running, lock held."""
    return run is not None and run["status"] == "running" and holder(workspace) is not None


def watch_status(root: Path, interval: float) -> Iterator[dict]:
    """`status(root)` now, then every `interval` seconds while a run is going on: the last
    one yielded is the first that finds no run going on (`status --watch`)."""
    while True:
        data = status(root)
        yield data
        if not (data["run"] and data["run"]["active"]):
            return
        time.sleep(interval)


def usage_text(row: dict) -> str:
    """An attempt's or the totals' tokens by kind: `1,300 in (100 uncached, 1,000 cache read,
    200 cache write) + 50 out (20 reasoning)`; rows from before schema 3 have no split."""
    text = f"{row.get('input_tokens') or 0:,} in"
    if row.get("uncached_input_tokens") is not None:
        unsplit = row.get("unsplit_input_tokens")
        text += (f" ({row['uncached_input_tokens']:,} uncached, {row.get('cache_read_tokens') or 0:,} cache read,"
                 f" {row.get('cache_write_tokens') or 0:,} cache write"
                 + (f", {unsplit:,} not split: recorded before harnessc kept the split)" if unsplit else ")"))
    text += f" + {row.get('output_tokens') or 0:,} out"
    if row.get("reasoning_tokens"):
        text += f" ({row['reasoning_tokens']:,} reasoning)"
    return text


def _loops(store: StateStore, plan, rows: dict) -> dict[str, dict]:
    """For each running loop task: iteration N of its limit, the last-5 average progress,
    and its last <progress> marker (seed 003 §10.3; the agent and elapsed time are the task's)."""
    out = {}
    for node in plan.nodes if plan else ():
        row = rows.get(node.id)
        if row is None or row["state"] != TaskState.RUNNING or not node.completion_promise:  # a loop task (loop/progress.py's is_loop)
            continue
        scores = store.recent_progress(node.id)
        saved = store.loop_state(node.id) or {}
        out[node.id] = {"iteration": row["iterations"], "max_iterations": node.limits.max_iterations,
                        "progress": round(sum(scores) / len(scores), 2) if scores else None,
                        "last_marker": (saved.get("progress") or {}).get("last_marker"),
                        "recovery": _rung(plan, node, saved)}
    return out


def _rung(plan, node, saved: dict) -> dict | None:
    """The recovery rung a loop task is on, from its saved loop state: {"step": rungs climbed,
    "rungs": the ladder's length, "rung": the last one climbed}; None before its first."""
    if saved.get("fingerprint") != node.fingerprint or not isinstance(saved.get("recovery"), dict):
        return None
    recovery = saved["recovery"]
    step, rungs = recovery.get("step"), recovery.get("rungs")
    if type(step) is not int or step < 1:
        return None
    if not (isinstance(rungs, list) and all(isinstance(r, str) for r in rungs)):
        rungs = rungs_for(plan, node)  # saved before harnessc kept the ladder with it
    ladder = Ladder(rungs, step)
    return {"step": step, "rungs": len(ladder.rungs), "rung": ladder.reached()}


class UnknownTask(Exception):
    """Neither the plan nor the state knows the task; `known` holds the ids they know."""

    def __init__(self, known: list[str]):
        super().__init__("unknown task")
        self.known = known


def show(root: Path, task_id: str) -> dict:
    """A task's result (outputs.result) for `harnessc show`, with `file`: its
    .harness/outputs/ file when one was written, `approaches`: a best-of-N task's last
    scoreboard (scoreboard.py), and `memory_given`: the memory section its last attempt's
    prompt carried. Raises UnknownTask, StateError."""
    workspace = Workspace(root)
    try:
        plan = load_plan(root)
    except PlanError:
        plan = None
    nodes = {n.id: n for n in plan.nodes} if plan else {}
    store = _open_state(workspace)
    try:
        row = store.tasks([task_id]).get(task_id) if store else None
        final = store.final_attempt(task_id) if row else None
        prompt = store.last_prompt(task_id) if row else None
        board = scoreboard.load(store, task_id) if store else None
        known = None if row or task_id in nodes else list(nodes) + sorted(set(store.tasks() if store else ()) - set(nodes))
    finally:
        if store:
            store.close()
    if known is not None:
        raise UnknownTask(known)
    node = nodes.get(task_id)
    if row is None:
        row = {"id": task_id, "state": TaskState.DONE if node.done else TaskState.PENDING}
    rec = outputs.result(row, node, plan.contract_of(node) if node else None, final)
    path = workspace.output(task_id)
    rec["file"] = workspace.rel(path) if rec["state"] in LANDED and path.is_file() else None
    if board is not None:  # best-of-N: which approach did what, and which landed
        rec["approaches"] = board
    if node is not None and isinstance(node.context_staging, AutoStaging):
        rec["context_auto"] = node.context_staging.chosen()  # `context: auto`: what it chose, why
    given = recall.given(prompt)
    if given:  # what run memory told its last attempt (runtime/memory/recall.py)
        rec["memory_given"] = given
    return rec


def approaches(root: Path, task_id: str) -> dict | None:
    """A best-of-N task's last scoreboard (scoreboard.py), or None."""
    store = _open_state(Workspace(root))
    if store is None:
        return None
    try:
        return scoreboard.load(store, task_id)
    finally:
        store.close()


def log(root: Path, task_id: str) -> list[dict]:
    """The task's recorded attempts, oldest first, each numbered for this task in `attempt`
    (1, 2, 3, ...; `id` stays the attempt's id in the state, shared by every task)."""
    store = _open_state(Workspace(root))
    if store is None:
        return []
    try:
        return _attempts(store, task_id)
    finally:
        store.close()


def _attempts(store: StateStore, task_id: str) -> list[dict]:
    attempts = store.attempts(task_id)
    moves = store.task_events(task_id, LOG_EVENTS)
    for number, a in enumerate(attempts, 1):
        a["attempt"] = number
        # what happened to the task between the previous attempt's start and this one's:
        # routing decisions, stuck findings, recovery steps, instructions that reached it
        before = [m for m in moves if m["ts"] <= a["started_at"]]
        a["routing"] = [routing_line(m) for m in before if m["kind"] in ROUTING_EVENTS]
        a["events"] = [event_line(m) for m in before]
        moves = [m for m in moves if m["ts"] > a["started_at"]]
    if attempts:
        attempts[-1]["after"] = [event_line(m) for m in moves]  # e.g. the last rung: blocked
    return attempts


IN_FLIGHT = "started"  # an attempt's status while its call is going on
ENDED = (*COMPLETE, *BROKEN)  # task states


def follow_log(root: Path, task_id: str, interval: float) -> Iterator[tuple[str, Any]]:
    """`log` of the task as it is written (`log --follow`), until the task ends or no run is
    going on: ("started", attempt) when an attempt begins, ("finished", attempt) when it
    ends, each once and in order, then ("after", lines) for what followed the last one
    (a blocked task's last rung). An attempt announced by "started" has `announced` set."""
    workspace = Workspace(root)
    shown, announced, held = 0, None, False  # held: the last attempt's `after` lines, kept for the end
    while True:
        store = _open_state(workspace)
        try:
            attempts = _attempts(store, task_id) if store else []
            state = ((store.tasks([task_id]).get(task_id) or {}).get("state")) if store else None
            run = store.last_run() if store else None
        finally:
            if store:
                store.close()
        active = going_on(run, workspace)
        ended = not active or state in ENDED
        for a in attempts[shown:]:
            if a["status"] == IN_FLIGHT:
                if announced != a["id"]:
                    announced = a["id"]
                    yield "started", a
                break
            a["announced"] = announced == a["id"]
            held = a is attempts[-1] and not ended
            if held:
                a["after"] = []  # what follows it may turn into the next attempt's events
            shown += 1
            yield "finished", a
        if ended:
            if held and attempts and shown == len(attempts) and attempts[-1].get("after"):
                yield "after", attempts[-1]["after"]
            return
        time.sleep(interval)


_COST_SOURCES = {
    "price": "price: tokens x the agent's price",
    "cli": "cli: the CLI's own estimate",
    "none": "none: no price set",
    "no_response": "no_response: no usage reported, charged 0",
    "reserved": "reserved: the run ended during the call, charged its reservation",
    "unknown": "unknown: the run ended during the call, no usage reported; not counted in spent",
}


# The same, as counts in `status`: "3 with no usage reported"
_COST_SOURCE_COUNTS = {
    "price": "priced",
    "cli": "estimated by their CLI",
    "none": "with no price set",
    "no_response": "with no usage reported (charged 0)",
    "reserved": "charged their reservation (the run ended during the call)",
    "unknown": "cut off with cost unknown (the run ended during the call)",
    "unrecorded": "from before costs were recorded",
}


def cost_sources_text(counts: dict[str, int]) -> str:
    """How many attempts' costs came from where, in words (`status`)."""
    return ", ".join(f"{n} {_COST_SOURCE_COUNTS.get(src, src)}" for src, n in sorted(counts.items()))


def unknown_text(calls: int, estimated_usd: float) -> str:
    """Calls a killed run cut off, in words: "1 call cut off: cost unknown, ~$0.0300 estimated"."""
    return (f"{calls} call{'' if calls == 1 else 's'} cut off: cost unknown, ~${estimated_usd:.4f} estimated"
            " (not counted in spent)")


def cost_source_text(source: str | None) -> str:
    """Where an attempt's cost came from, in words (`log`)."""
    if source is None:
        return "source not recorded"
    return _COST_SOURCES.get(source, source)


ROUTING_EVENTS = ("routed", "fallback", "escalated")
ISOLATION_EVENTS = ("landed", "conflict", "worktree_kept", "approach_selected", "explored")  # isolation: worktree (runtime/worktree/)
LOG_EVENTS = (*ROUTING_EVENTS, "stuck", "recovery", "recovery_resumed", "assist", "instruction_delivered", "task_blocked",
              *ISOLATION_EVENTS, "task_degraded")


def event_line(event: dict) -> str:
    """One event of a task's story, as `log` shows it."""
    kind = event["kind"]
    if kind in ROUTING_EVENTS:
        return routing_line(event)
    if kind == "stuck":
        return f"stuck ({event.get('signal')}): {event.get('reason')}"
    if kind == "recovery":
        step = event.get("step")
        return f"recovery: {step}{' (' + event['mutation'] + ')' if event.get('mutation') else ''}"
    if kind == "recovery_resumed":
        return resumed_text(event)
    if kind == "assist":
        why = f" ({event['reason']})" if event.get("reason") else ""
        return (f"assist: {event.get('purpose')} by {event.get('agent')}: {event.get('status')}{why}"
                f" · {event.get('tokens') or 0} tokens · ${event.get('cost_usd') or 0:.4f}")
    if kind == "instruction_delivered":
        return f"instruction {event.get('file')} reached this prompt"
    if kind == "landed":
        return (f"landed {str(event.get('sha'))[:10]} on {event.get('branch')}"
                + (" (merged and checked again)" if event.get("merged") else ""))
    if kind == "conflict":
        return f"conflict: {event.get('message')}"
    if kind == "explored":
        return f"explored: {event.get('message')} (progress by branch: {event.get('progress')})"
    if kind == "approach_selected":
        return f"selected: {event.get('message')}"
    if kind == "worktree_kept":
        return f"worktree kept at {event.get('path')} (ref {event.get('ref')}; `harnessc clean` removes it)"
    if kind == "task_degraded":
        filled = filled_text(event.get("filled"))
        return (str(event.get("error") or "degraded")
                + (f"; filled from the contract, not from the agent: {filled}" if filled else ""))
    return f"blocked: {str(event.get('error') or '').removeprefix('blocked: ')}"


def stats(root: Path) -> list[dict]:
    """Each agent's record per complexity and per contract, from every run (history.py),
    then per agent what the prompt cache did: `{agent, cache: {input_tokens,
    cache_read_tokens, cache_write_tokens, share, saved_usd}}` (cachesaving.py)."""
    plan = load_plan(root)  # complexities and contracts come from the plan
    store = _open_state(Workspace(root))
    if store is None:
        return []
    try:
        rows = History(store, plan).table()
        cache = cache_figures(store, plan.agents)["agents"]
    finally:
        store.close()
    return rows + [{"agent": agent, "cache": figures} for agent, figures in cache.items()]
