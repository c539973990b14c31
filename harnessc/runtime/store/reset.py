"""What `harnessc reset` forgets: which ids are tasks, their dependents, and which succeeded
dependents a reset leaves stale. The state itself is changed by StateStore.reset."""

from __future__ import annotations

from pathlib import Path

from ...states import LANDED
from .. import plan as planmod


def project_tasks(root: Path) -> list[dict] | None:
    """Each task's {"id", "depends_on", ...}: from plan.json when it is up to date with the
    specs, else from the roadmap as lint reads it; None when neither can be read."""
    try:
        plan = planmod.load_plan(root)
    except planmod.PlanError:
        plan = None
    if plan is not None and not planmod.stale_sources(plan, root):
        return plan["nodes"]
    linted = planmod.linted_tasks(root)
    if linted:
        return linted
    return plan["nodes"] if plan is not None else None


def downstream(tasks: list[dict], ids: list[str]) -> list[str]:
    """`ids` and every task that depends on one of them, transitively, in roadmap order."""
    known = {t["id"] for t in tasks}
    chosen = planmod.select_in(tasks, [f"{i}+" for i in ids if i in known]) | set(ids)
    return [t["id"] for t in tasks if t["id"] in chosen] + [i for i in ids if i not in known]


def stale_dependents(tasks: list[dict], rows: dict[str, dict], reset_ids: list[str]) -> list[str]:
    """Tasks that depend (transitively) on a reset task, are not reset themselves, and
    succeeded: their output was built on what the reset discards, and nothing re-runs them."""
    gone = set(reset_ids)
    return [t for t in downstream(tasks, reset_ids)
            if t not in gone and (rows.get(t) or {}).get("state") in LANDED]
