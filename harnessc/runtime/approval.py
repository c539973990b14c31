"""An approved review change whose base moved: before it lands, its checks run again on the
integration branch merged with it (in a fresh checkout), as any landing's are (iteration.py
`recheck`), on the answer it was verified with."""

from __future__ import annotations

from pathlib import Path
from typing import Awaitable, Callable

from ..planfile import Plan, PlanNode
from .baseline import Baselines, base_checks
from .store.state import StateStore
from .verify import verify
from .worktree.isolation import Isolation


def approval_recheck(plan: Plan, store: StateStore, baselines: Baselines, isolation: Isolation,
                     node: PlanNode) -> Callable[[Path], Awaitable[list[str]]]:
    """The task's checks for `Isolation.approve`: the errors they give in a directory."""
    contract = plan.contract_of(node)
    text = (store.final_attempt(node.id) or {}).get("raw_output") or ""
    base = (isolation.held().get(node.id) or {}).get("base")
    limit = float(node.limits.max_time or 3600)  # the task's whole time: it is not running

    async def run(workdir: Path) -> list[str]:
        floors = (await baselines.at_commit(node, base, limit, isolation.checkout)
                  if base and base_checks(node) else None)
        return (await verify(node, contract, text, workdir, limit, floors=floors)).errors
    return run
