"""What a run's report shows, read from the state (runtime/store/state.py's readers) and the plan.

Plain dicts and lists, no chart library: the HTML and the Markdown writers both start here.
Everything read from the state was redacted as it was written; what our own environment
holds as secret is redacted again from the written text (`redact`), as it appears in HTML too.
"""

from __future__ import annotations

import html
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..errors import HarnesscError
from ..events import EVENTS
from ..providers import key_envs
from ..runtime import plan as planmod
from ..runtime.children.procs import scrubbed, secret_values
from ..runtime.memory.view import memory_view
from ..runtime.store import scoreboard
from ..runtime.store.state import USAGE_COLUMNS, NoState, StateStore
from ..states import TaskState
from ..wording import accept_name, command_text
from ..workspace import Workspace

FAILED_ATTEMPTS = ("rejected", "error", "over_limit", "stuck", "interrupted")
ROUTING = ("routed", "fallback", "escalated")
TASK_EVENTS = tuple(e.name for e in EVENTS.values() if e.state is not None)
OUTPUT_CHARS = 4000  # of one task's verified output shown (the report stays small at 2,000 tasks)
MEMORY_ENTRIES = 200  # the newest memory entries shown (the report stays small)


class ReportError(HarnesscError):
    """No report can be written; the message says why (one line)."""


def collect(root: Path, run_id: str | None = None) -> dict[str, Any]:
    """The report's data for `run_id` (default: the last run)."""
    workspace = Workspace(root)
    try:
        store = StateStore(workspace, create=False)
    except NoState:
        raise ReportError("nothing has run in this project yet: no run to report on") from None
    try:
        run = store.run(run_id) if run_id else store.last_run()
        if run is None:
            raise ReportError(f"no run '{run_id}' in {workspace.rel(store.path)}" if run_id
                              else "nothing has run in this project yet: no run to report on")
        attempts = store.run_attempts(run["id"])
        events = store.run_events(run["id"], (*TASK_EVENTS, *ROUTING, "alert"))
        rows = store.tasks()
        boards = scoreboard.every(store)  # best-of-N tasks (runtime/approaches.py)
    finally:
        store.close()
    try:
        plan = planmod.load_plan(root)
    except planmod.PlanError:
        plan = None  # the report still shows what ran, without the plan's graph
    report = _assemble(run, attempts, events, rows, plan, boards)
    report["memory"] = memory_view(root, run["id"], MEMORY_ENTRIES)  # run memory as it is now
    report["secrets"] = secret_values(names=_key_envs(plan))  # for redact(), on the written text
    return report


def _key_envs(plan) -> set[str]:
    return key_envs(plan.agents) if plan else set()


def _assemble(run: dict, attempts: list[dict], events: list[dict], rows: dict, plan,
              boards: dict[str, dict] | None = None) -> dict[str, Any]:
    nodes = {n.id: n for n in plan.nodes} if plan else {}
    by_task: dict[str, list[dict]] = defaultdict(list)
    for a in attempts:
        by_task[a["task_id"]].append(a)
        a["number"] = len(by_task[a["task_id"]])  # the task's attempt N in this run
    final: dict[str, str] = {}
    routing: dict[str, list[dict]] = defaultdict(list)
    alerts = []
    for ev in events:
        if ev["kind"] == "alert":
            alerts.append({k: ev.get(k) for k in ("ts", "level", "alert", "task", "message")})
        elif ev["kind"] in ROUTING:
            routing[ev["task"]].append(ev)
        else:
            final[ev["task"]] = ev["kind"].removeprefix("task_")
    active = run["status"] == "running"
    order = [n.id for n in plan.nodes] if plan else []
    order += sorted((set(by_task) | set(final)) - set(order))
    tasks = [_task(tid, nodes.get(tid), rows.get(tid), by_task.get(tid, []), final.get(tid),
                   routing.get(tid, []), run["id"], active, (boards or {}).get(tid)) for tid in order]
    return {"run": _run(run, attempts), "project": (plan.project or {}).get("title") if plan else None,
            "tasks": tasks, "attempts": attempts, "alerts": alerts,
            "agents": _by_agent(attempts), "generated_at": time.time()}


def _run(run: dict, attempts: list[dict]) -> dict[str, Any]:
    usage = {c: sum(a.get(c) or 0 for a in attempts if a["status"] != "started") for c in USAGE_COLUMNS}
    end = run.get("ended_at") or time.time()
    inputs = usage["input_tokens"]
    return {**{k: run.get(k) for k in ("id", "status", "exit_code", "message", "started_at", "ended_at", "options")},
            "duration": max(0.0, end - run["started_at"]), "attempts": len(attempts),
            "cost_usd": round(sum(a.get("cost_usd") or 0 for a in attempts), 6),
            "tokens": usage["input_tokens"] + usage["output_tokens"], **usage,
            # the share of input tokens read from a prompt cache (None: no input recorded)
            "cache_share": usage["cache_read_tokens"] / inputs if inputs else None}


def _task(tid: str, node, row: dict | None, attempts: list[dict], final: str | None,
          routing: list[dict], run_id: str, active: bool, board: dict | None = None) -> dict[str, Any]:
    state = final
    if state == TaskState.RUNNING and not active:
        state = TaskState.INTERRUPTED
    if state is None:
        state = TaskState.DONE if node is not None and node.done else "not run"
    verified = next((a for a in reversed(attempts) if a["status"] == "succeeded"), None)
    output = None
    if verified is not None:
        output = verified["parsed_output"] if verified["parsed_output"] is not None else verified["raw_output"]
    elif state == TaskState.DEGRADED and row and row.get("run_id") == run_id:
        output = row.get("output")  # the fallback's partial output
    return {
        "id": tid, "title": node.title if node else tid, "state": state, "phase": node.phase if node else None,
        "wave": node.wave if node else None, "depends_on": list(node.depends_on) if node else [],
        "contract": node.contract if node else None,
        "promise": node.completion_promise if node else None,
        "accept": [c.id or c.argv for c in node.accept] if node else [],
        "attempts": attempts, "routing": routing,
        "agent": attempts[-1]["agent"] if attempts else (row or {}).get("agent"),
        "cost_usd": round(sum(a.get("cost_usd") or 0 for a in attempts), 6),
        "tokens": sum((a.get("input_tokens") or 0) + (a.get("output_tokens") or 0) for a in attempts),
        "error": (row or {}).get("error") if state not in (TaskState.SUCCEEDED, TaskState.DONE, "not run") else None,
        "verified": _verification(verified) if verified else None,
        "output": output,
        # best-of-N: the scoreboard of this run's approaches (an older run's is not this one's)
        "approaches": board if board and board.get("run_id") == run_id else None,
    }


def _verification(attempt: dict) -> dict[str, Any]:
    """How the verified attempt passed: its accept commands and loop score."""
    checks = [check(c) for c in attempt.get("checks") or ()]
    progress = attempt.get("progress") or {}
    return {"attempt": attempt["number"], "agent": attempt["agent"], "checks": checks,
            "score": progress.get("score")}


def check(c: dict) -> dict[str, Any]:
    """An accept check's result: its name (its own id, else its command), the command as a
    shell takes it, exit code, time and output tail (None: recorded before harnessc kept it)."""
    return {"name": accept_name(c), "command": command_text(c.get("argv"), 2000), "returncode": c.get("returncode"),
            "timed_out": bool(c.get("timed_out")), "duration": c.get("duration"), "tail": c.get("tail")}


def _by_agent(attempts: list[dict]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for a in attempts:
        agent = out.setdefault(a["agent"] or "-", {"attempts": 0, "succeeded": 0, "cost_usd": 0.0, "tokens": 0})
        agent["attempts"] += 1
        agent["succeeded"] += a["status"] == "succeeded"
        agent["cost_usd"] += a.get("cost_usd") or 0
        agent["tokens"] += (a.get("input_tokens") or 0) + (a.get("output_tokens") or 0)
    return out


def redact(text: str, secrets: list[str]) -> str:
    """`text` without any of `secrets`, plain or HTML-escaped."""
    return scrubbed(text, [form for secret in secrets for form in dict.fromkeys((secret, html.escape(secret)))])
