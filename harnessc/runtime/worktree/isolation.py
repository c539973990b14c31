"""A run's isolation: which tasks work in worktrees, where each starts, and what lands.

The Runner holds one `Isolation`; a task's iterations (iteration.py) ask it for their
attempt's worktree (`open`), hand it their verified change (`land`) and give the worktree
back when they end (`close`). Everything durable is in state.db's meta table:

* `isolation.integration`: the integration branch, where it started, the user's branch and
  the commit harnessc last set it to;
* `isolation.landing.<task>`: a landing, written `pending` (with the task's output) just
  before the branch moves and `landed` after, so a run killed in between finds the commit
  on the branch (its `Harnessc-Task` trailer) and counts it once, never landing it twice.

At the start of a run (under the run lock) every worktree and ref a killed run left is
removed, but the refs of blocked tasks (their changes, kept and named); stale `.git/*.lock`
files nobody holds are removed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable

from ...planfile import PlanNode
from ..store.state import StateStore
from .landing import BRANCH_PREFIX, INTEGRATION_KEY, LANDING_KEY, Conflict, Integration, Landed, Landing
from . import repo as repomod
from .repo import IsolationError, Repo, open_repo  # noqa: F401 - IsolationError: for callers
from .worktrees import REF_ROOT, Attempt, Worktrees

WORKTREE, NONE = "worktree", "none"


def isolated(node: PlanNode, override: str | None = None) -> bool:
    """Whether the task works in its own worktree (`run --isolation` wins over the plan)."""
    return (override or getattr(node, "isolation", None) or NONE) == WORKTREE and not node.done


class Isolation:
    def __init__(self, root: Path, nodes: list[PlanNode], store: StateStore, override: str | None = None,
                 hooks: bool = False, worktrees: dict | None = None, keep_failed: bool = False):
        self.root, self.store, self.hooks, self.keep_failed = Path(root), store, hooks, keep_failed
        self.tasks = {n.id: n for n in nodes if isolated(n, override)}
        self.index = {n.id: i for i, n in enumerate(nodes, 1)}  # <n>: the task's place in the plan
        self.settings = worktrees or {}
        self.repo: Repo | None = None
        self.trees: Worktrees | None = None
        self.landing: Landing | None = None
        self.integration: Integration | None = None
        self._lock = asyncio.Lock()  # one landing at a time
        self.blocked_refs: dict[str, str] = {}  # task -> its kept ref
        self.kept: dict[str, str] = {}  # task -> its worktree kept by --keep-worktrees
        self._seq: int | None = None  # the last landing's number (meta isolation.seq), once read
        self._saved = ""  # the integration record as last written
        self._checkouts = itertools.count(1)  # worktrees 0-<k>: checkouts of a base (checkout())

    @property
    def wanted(self) -> bool:
        return bool(self.tasks)

    def is_isolated(self, node: PlanNode) -> bool:
        return node.id in self.tasks

    def check(self) -> None:
        """Before the run is recorded: raises IsolationError (the run refuses to start)."""
        if self.wanted:
            self.repo = open_repo(self.root, self.hooks)

    def workdir(self, node: PlanNode, k: int = 1) -> Path:
        """Where approach `k` of the task works (its worktree's project directory)."""
        return self.trees.workdir(self.index[node.id], k) if self.trees else self.root

    def ref(self, node: PlanNode, k: int = 1) -> str:
        return self.trees.ref(self.index[node.id], k) if self.trees else ""

    # ------------------------------------------------------------------ the run's start and end

    def start(self) -> None:
        """Reconcile what an earlier run left, open the integration branch, finish the
        landings a killed run committed, and catch the user's branch up."""
        if not self.wanted:
            return
        if self.repo is None:
            self.repo = open_repo(self.root, self.hooks)
        run_id = self.store.run_id or "run"
        self.trees = Worktrees(self.repo, self.root, run_id, self.hooks,
                               self.settings.get("link"), self.settings.get("copy"))
        removed, left = self.trees.stale_locks()
        if removed or left:
            self.store.event("git_locks", removed=removed, left=left, message=(
                (f"removed stale git lock(s) no process held: {', '.join(removed)}" if removed else "")
                + ("; " if removed and left else "")
                + (f"git lock(s) in use or not checkable, left: {', '.join(left)}" if left else "")))
        keep = self._blocked_refs()
        done = self.trees.reconcile(set(keep.values()))
        self.blocked_refs = {t: r for t, r in keep.items() if r in done.kept_refs}
        if done.removed_worktrees or done.removed_refs:
            self.store.event("worktrees_reconciled", worktrees=done.removed_worktrees[:100],
                             refs=done.removed_refs[:100], kept=done.kept_refs[:100])
        self.landing = Landing(self.repo, self.hooks)
        self.integration, resumed = self.landing.open(run_id, self.store.meta_get(INTEGRATION_KEY))
        self._save()
        self.store.event("integration_branch", branch=self.integration.name, start=self.integration.start,
                         resumed=resumed, user_branch=self.integration.user_branch)
        self._recover_landings()
        self._follow(self.landing.tip(self.integration.branch))

    def _blocked_refs(self) -> dict[str, str]:
        """Task -> the ref a blocked task's change is kept on (from its landing record)."""
        rows = self.store.tasks()
        out = {}
        for key in self.store.meta_keys(LANDING_KEY):
            rec = _load(self.store.meta_get(key))
            tid = key.removeprefix(LANDING_KEY)
            if rec.get("state") == "blocked" and rows.get(tid, {}).get("state") == "blocked":
                out[tid] = rec.get("ref", "")
        return out

    def _recover_landings(self) -> None:
        """A landing a killed run began: landed when the branch holds its commit (the task
        succeeded, once), else forgotten (the task runs again)."""
        for key in self.store.meta_keys(LANDING_KEY):
            rec = _load(self.store.meta_get(key))
            if rec.get("state") != "pending":
                continue
            tid = key.removeprefix(LANDING_KEY)
            sha = None
            if str(rec.get("branch", "")).startswith(BRANCH_PREFIX):
                sha = self.landing.landed_since(rec["branch"], rec.get("since", ""), tid)
            if sha is None:
                self.store.meta_set(key, None)
                continue
            state = self.store.tasks([tid]).get(tid, {}).get("state")
            if state != "succeeded":
                self.store.finish_task(tid, "succeeded", output=rec.get("output"), fingerprint=rec.get("fingerprint"))
            self._record(tid, {**rec, "state": "landed", "sha": sha, "output": None})
            self.store.event("landing_recovered", tid, sha=sha, message=(
                f"{tid}'s change had landed ({sha[:10]}) when the earlier run stopped: counted once"))

    def end(self) -> list[str]:
        """Lines for the run's end: where the results are, how to take them, kept refs."""
        if not self.wanted or self.integration is None:
            return []
        integ, lines = self.integration, []
        integ.ended = True
        self._save()
        tip = self.landing.tip(integ.branch)
        if tip != integ.last_set or not integ.following:
            if tip and tip != self.landing.tip(integ.user_branch):
                lines.append(f"results are on branch {integ.name} ({integ.left_because or 'your branch was not moved'})"
                             f"; take them with `git merge {integ.name}`")
        for tid, ref in sorted(self.blocked_refs.items()):
            lines.append(f"blocked: {tid}: its change is kept at {ref} (`git show {ref}`)")
        for tid, path in sorted(self.kept.items()):
            lines.append(f"kept worktree of {tid}: {path} (--keep-worktrees; `harnessc clean` removes it)")
        for line in lines:
            self.store.event("isolation_result", message=line)
        return lines

    # ------------------------------------------------------------------ one task

    def base(self, node: PlanNode) -> str:
        """The commit the task starts from: where its last dependency landed, else the start."""
        best, sha = -1, self.integration.start
        for dep in node.depends_on:
            rec = _load(self.store.meta_get(LANDING_KEY + dep))
            if rec.get("state") == "landed" and rec.get("branch") == self.integration.branch \
                    and int(rec.get("seq", 0)) > best:
                best, sha = int(rec.get("seq", 0)), rec["sha"]
        return sha

    async def open(self, node: PlanNode, base: str | None = None, k: int = 1, make: bool = True) -> Attempt:
        """A fresh worktree for the task's approach `k` (at its base, or at `base`);
        make=False: put on disk only when `make` is called (worktrees.Worktrees.create)."""
        if not make:  # only its record: no git, no thread
            return self.trees.create(self.index[node.id], k, base or self.base(node), False)
        attempt = await asyncio.to_thread(self.trees.create, self.index[node.id], k, base or self.base(node), make)
        self._warn(node.id)
        return attempt

    async def make(self, attempt: Attempt) -> None:
        if not attempt.made:
            await asyncio.to_thread(self.trees.make, attempt)
            self._warn(None)

    def _warn(self, tid: str | None) -> None:
        while self.trees.warnings:
            self.store.event("worktree_not_brought", tid, message=self.trees.warnings.pop(0))

    async def commit(self, attempt: Attempt, message: str) -> str | None:
        """Commit the attempt's change - its base against its checkout's final tree, whatever
        the agent committed itself - (None: it changed nothing)."""
        if not attempt.made:
            return None  # never put on disk: nothing changed
        self.trees.verify(attempt)  # Tampered: the attempt is rejected, nothing of it lands
        sha, withheld = await asyncio.to_thread(self.trees.commit, attempt, message, self.store.secrets)
        if withheld:
            shown = sorted(withheld.items())
            self.store.event("git_secret_withheld", paths=[p for p, _ in shown][:200], message=(
                "not committed: " + "; ".join(f"{p} ({why})" for p, why in shown[:5])
                + (", ..." if len(shown) > 5 else "") + " - it stays out of the attempt's change"))
        return sha

    async def land(self, node: PlanNode, attempt: Attempt, output: Any,
                   recheck: Callable[[Path], Awaitable[list[str]]]) -> Landed | Conflict:
        """Land the attempt's committed change on the integration branch (merged and
        `recheck`ed on the merged tree when the branch moved since its base)."""
        async with self._lock:
            integ, landing = self.integration, self.landing
            tip = landing.loose_tip(integ.branch) or await asyncio.to_thread(landing.tip, integ.branch)
            change, merged = attempt.change, False
            if change is None:  # nothing to land: the task succeeded where the branch is
                self._record(node.id, {"state": "landed", "sha": tip, "branch": integ.branch})
                return Landed(tip, False, [])
            new = change
            if tip != attempt.base:
                new, paths = await asyncio.to_thread(landing.merge, tip, change, attempt.base)
                others = await asyncio.to_thread(landing.subjects, attempt.base, tip)
                if new is None:
                    return Conflict(paths, "merge", tip, others=others)
                await asyncio.to_thread(self.trees.checkout, attempt, new)
                errors = await recheck(attempt.workdir)
                if errors:
                    mine = set(await asyncio.to_thread(landing.changed, attempt.base, change))
                    theirs = set(await asyncio.to_thread(landing.changed, attempt.base, tip))
                    return Conflict(sorted(mine & theirs) or sorted(mine), "checks", tip, errors, others)
                merged = True
            self._record(node.id, {"state": "pending", "since": tip, "branch": integ.branch,
                                   "output": output, "fingerprint": node.fingerprint})
            if not await asyncio.to_thread(landing.advance, integ, new, tip):
                self.store.meta_set(LANDING_KEY + node.id, None)
                raise IsolationError(f"the integration branch {integ.name} moved under the run",
                                     "do not move harnessc/run/* branches while a run lands on them")
            paths = await asyncio.to_thread(landing.changed, tip, new)
            self.store.event("landed", node.id, sha=new, merged=merged, branch=integ.name, paths=paths[:200])
            return Landed(new, merged, paths)

    def landed(self, node: PlanNode, landed: Landed) -> None:
        """After the task's success is recorded: the landing is done; the user's branch follows."""
        self._record(node.id, {"state": "landed", "sha": landed.sha, "branch": self.integration.branch})
        self._follow(landed.sha)

    def blocked(self, node: PlanNode, attempt: Attempt | None) -> str:
        """The task ends blocked: its change is kept on its (attempt's) ref (named)."""
        ref = attempt.ref if attempt is not None else self.ref(node)
        self._record(node.id, {"state": "blocked", "ref": ref, "branch": self.integration.branch})
        self.blocked_refs[node.id] = ref
        return ref

    async def close(self, node: PlanNode, outcome: str, k: int = 1) -> None:
        """The task (its approach `k`) ended: its worktree goes (kept with --keep-worktrees
        when it did not succeed), its ref too (kept when it is blocked)."""
        n = self.index[node.id]
        keep_tree = self.keep_failed and outcome not in ("succeeded", "degraded", "cancelled")
        keep_ref = outcome == "blocked" or keep_tree
        if keep_tree:
            self.kept[node.id if k == 1 else f"{node.id} (approach {k})"] = path = \
                str(self.trees.path(n, k).relative_to(self.root))
            self.store.event("worktree_kept", node.id, path=path, ref=self.trees.ref(n, k))
        if self.trees.forget_unmade(n, k):
            return  # never put on disk: neither it nor its ref exists
        try:
            await asyncio.to_thread(self.trees.remove, None, n, k, keep_ref, keep_tree)
        except Exception as e:  # never lose the task's outcome to a cleanup failure
            self.store.event("worktree_remove_failed", node.id, message=str(e)[:500])

    @asynccontextmanager
    async def checkout(self, base: str):
        """A fresh worktree at commit `base`, removed after: its project directory (to measure
        `min_passed: base`, baseline.py). Worktree 0-<k>: plan indexes start at 1."""
        k = next(self._checkouts)
        attempt = await asyncio.to_thread(self.trees.create, 0, k, base)
        try:
            yield attempt.workdir
        finally:
            await asyncio.to_thread(self.trees.remove, attempt, 0, k)

    # ------------------------------------------------------------------ records

    def _follow(self, tip: str) -> None:
        integ = self.integration
        was = integ.following
        if tip and self.landing.follow(integ, tip):
            self.store.event("user_branch_followed", sha=tip, branch=integ.user_branch)
        elif was and not integ.following:
            self.store.event("user_branch_left", message=(
                f"your branch was left as it is ({integ.left_because}); results go on landing on {integ.name}"))
        self._save()

    def _save(self) -> None:
        """Write the integration record when it changed (a landing that moved nothing did not)."""
        saved = self.integration.to_json()
        if saved != self._saved:
            self.store.meta_set(INTEGRATION_KEY, saved)
            self._saved = saved

    def _record(self, tid: str, rec: dict) -> None:
        """Write the task's landing record; a landed one takes the next landing number, in the same commit."""
        with self.store.tx():
            if rec.get("state") == "landed":
                rec["seq"] = self._next_seq()
            self.store.meta_set(LANDING_KEY + tid, json.dumps(rec, sort_keys=True, default=str))

    def _next_seq(self) -> int:
        """The next landing number (read once from state.db: only this run lands, under the run lock)."""
        if self._seq is None:
            self._seq = int(self.store.meta_get("isolation.seq") or 0)
        self.store.meta_set("isolation.seq", str(self._seq + 1))
        self._seq += 1
        return self._seq


def clean_leftovers(root: Path, dry_run: bool = False) -> list[str]:
    """`harnessc clean`: remove the worktrees and refs a crashed (or --keep-worktrees) run
    left, keeping blocked tasks' refs; what was (or would be) removed. Nothing while a run
    holds the lock, or outside a git repository."""
    from ...workspace import Workspace
    from ..store.lock import holder
    from ..store.state import NoState

    workspace = Workspace(root)
    there = (workspace.harness / "worktrees").is_dir()
    try:
        trees = Worktrees(repomod.find(Path(root)), root, "clean")
        refs = trees.own_refs()
    except Exception:  # not a repository: nothing of ours in git
        return []
    if holder(workspace) or not (there or refs):
        return []
    keep: set[str] = set()
    try:
        store = StateStore(workspace, create=False)
    except NoState:
        store = None
    if store is not None:
        try:
            keep = set(Isolation(root, [], store)._blocked_refs().values())
        finally:
            store.close()
    if dry_run:
        listed = [str(p.relative_to(root)) for d in trees.root.iterdir() if d.is_dir() and not d.is_symlink()
                  for p in d.iterdir()] if there and not trees.root.is_symlink() else []
        return listed + [r for r in refs if r not in keep]
    done = trees.reconcile(keep)
    return done.removed_worktrees + done.removed_refs


def _load(text: str | None) -> dict:
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


__all__ = ["Isolation", "IsolationError", "Attempt", "Landed", "Conflict", "REF_ROOT", "isolated", "WORKTREE", "NONE"]
