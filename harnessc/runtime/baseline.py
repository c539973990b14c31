"""`min_passed: base`: how many tests pass before the agent works, measured once and kept.

An isolated task's base is a commit: its `base` checks run in a fresh worktree of that
commit, once per (commit, command) for the whole project - tasks sharing a base share the
measurement, and it is kept in state.db's meta table, so a resumed run never measures again
(by then the agent may have deleted tests). A task in the shared tree has no base commit of
its own: its checks run in the tree before its first attempt, once per task.

Each measurement is an event `min_passed_base` (the count of test runs the benchmark shows).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from ..planfile import AcceptCommand, PlanNode
from .store.state import StateStore
from .verify import passed_count_of, run_accept

KEY = "min_passed.base:"  # meta: KEY + (commit | task:<id>) + ":" + the command's digest


def base_checks(node: PlanNode) -> list[AcceptCommand]:
    return [c for c in node.accept if c.min_passed == "base"]


class Baselines:
    """The run's measurements of `min_passed: base` checks (one per run, shared by its tasks)."""

    def __init__(self, store: StateStore):
        self.store = store
        self._locks: dict[str, asyncio.Lock] = {}

    async def at_commit(self, node: PlanNode, base: str, time_left: float | None,
                        checkout: Callable[[str], Any]) -> dict[str, int | None]:
        """The base counts of the task's checks at commit `base`; `checkout(base)` is an async
        context manager giving a directory holding that commit (made only when one is missing)."""
        checks = base_checks(node)
        keys = {c.id: KEY + f"{base}:{_digest(c)}" for c in checks}
        async with self._lock(base):  # K tasks on one base: one checkout, each command run once
            missing = [c for c in checks if self.store.meta_get(keys[c.id]) is None]
            if missing:
                async with checkout(base) as workdir:
                    for cmd in missing:
                        await self._measure(node, cmd, Path(workdir), time_left, keys[cmd.id], base=base)
        return self._floors(keys)

    async def in_tree(self, node: PlanNode, root: Path, time_left: float | None) -> dict[str, int | None]:
        """The base counts of a shared-tree task's checks: measured in the tree before its
        first attempt (call it then), read back on every later call and after a resume."""
        checks = base_checks(node)
        keys = {c.id: KEY + f"task:{node.id}:{_digest(c)}" for c in checks}
        async with self._lock("task:" + node.id):
            for cmd in checks:
                if self.store.meta_get(keys[cmd.id]) is None:
                    await self._measure(node, cmd, root, time_left, keys[cmd.id], base=None)
        return self._floors(keys)

    async def _measure(self, node: PlanNode, cmd: AcceptCommand, workdir: Path, time_left: float | None,
                       key: str, base: str | None) -> None:
        res = await run_accept(cmd, workdir, time_left)
        if res.error is not None or res.timed_out:  # not a measurement: tried again next time
            self.store.event("min_passed_base", node.id, check=cmd.id, base=base, passed=None,
                             message=f"the base count of '{cmd.id}' could not be measured: {res.describe()}")
            return
        count, problem = passed_count_of(cmd, res, workdir)
        self.store.meta_set(key, json.dumps({"passed": count, "exit": res.returncode}))
        where = f"at {base[:10]}" if base else "before the first attempt"
        self.store.event("min_passed_base", node.id, check=cmd.id, base=base, passed=count,
                         message=(f"'{cmd.id}' {where}: {count} passed" if count is not None
                                  else f"'{cmd.id}' {where}: {problem}; min_passed: base then asks for any count"))

    def _floors(self, keys: dict[str, str]) -> dict[str, int | None]:
        """Check id -> its base count (None: the base printed none); a check whose base could
        not be measured is left out (verify.py fails it: not known)."""
        kept = {cid: self.store.meta_get(key) for cid, key in keys.items()}
        return {cid: json.loads(value)["passed"] for cid, value in kept.items() if value is not None}

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())


def _digest(cmd: AcceptCommand) -> str:
    """The command as it runs (argv and JUnit file): a changed command is measured again."""
    return hashlib.sha256(json.dumps([cmd.argv, cmd.junit]).encode()).hexdigest()[:16]

