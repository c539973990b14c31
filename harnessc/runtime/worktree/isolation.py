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
removed, but the refs of blocked tasks and of tasks in review (their changes, kept and
named); stale `.git/*.lock` files nobody holds are removed. Then the tripwire (tripwire.py) records the shared git
directory; it is checked before each landing and each new checkout, when the last running
attempt ends and at the run's end, and moves with what harnessc itself changes (its worktrees, the integration
branch, the user's fast-forward). An attempt that ran while the git directory was tampered
with does not land (`Tampered`). A task in review (`review: true`) is recorded `review` with
its change's commit and base; `approve` lands it when a person approved it (the running run
does, never the `approve` command itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from ... import gitcmd
from ... import gitrepo as repomod
from ...gitrepo import IsolationError, Repo, open_repo  # noqa: F401 - IsolationError: for callers
from ...planfile import PlanNode
from ...states import KEPT, TaskState
from ...workspace import Workspace
from ..store.state import NoState, StateStore
from .landing import BRANCH_PREFIX, INTEGRATION_KEY, LANDING_KEY, Conflict, Integration, Landed, Landing
from .tripwire import Finding, Tripwire
from .worktrees import REF_ROOT, Attempt, Worktrees

WORKTREE, NONE = "worktree", "none"


@dataclass
class Tampered:
    """The attempt ran while the shared git directory was changed: it does not land."""

    files: list[str]

    @property
    def why(self) -> str:
        shown = ", ".join(self.files[:5]) + (f" and {len(self.files) - 5} more" if len(self.files) > 5 else "")
        return (f"tampered with {shown} (in the repository's shared git directory, while this attempt ran): "
                "put back, and nothing of the attempt lands; change only the files of your checkout")


def isolated(node: PlanNode, override: str | None = None) -> bool:
    """Whether the task works in its own worktree (`run --isolation` wins over the plan)."""
    return (override or getattr(node, "isolation", None) or NONE) == WORKTREE and not node.done


class Isolation:
    def __init__(self, root: Path, nodes: list[PlanNode], store: StateStore, override: str | None = None,
                 hooks: bool = False, worktrees: dict | None = None, keep_failed: bool = False):
        self.root, self.store, self.hooks, self.keep_failed = Path(root), store, hooks, keep_failed
        self.tasks = {n.id: n for n in nodes if isolated(n, override)}
        self.index = {n.id: i for i, n in enumerate(nodes, 1)}  # <n>: the task's place in the plan
        self.override = override
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
        self.tripwire: Tripwire | None = None  # the shared git directory's record (tripwire.py), once started

    @property
    def wanted(self) -> bool:
        return bool(self.tasks)

    def add(self, nodes: list[PlanNode]) -> None:
        """Tasks added to the running plan (runtime/growth/): isolated as the others are,
        when the run isolates tasks at all (it opened the repository at its start)."""
        for n in nodes:
            self.index.setdefault(n.id, len(self.index) + 1)
            if self.wanted and isolated(n, self.override):
                self.tasks[n.id] = n

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
        self._arm(run_id)

    def _arm(self, run_id: str) -> None:
        """Record the shared git directory (tripwire.py), harnessc's own changes so far made."""
        top = self.repo.toplevel
        common = self.repo.common or Path(os.path.normpath(top / self.landing.git.run(
            "rev-parse", "--git-common-dir", worktree=False).strip()))
        try:
            shown = common.relative_to(top).as_posix() + "/"
        except ValueError:
            shown = str(common) + "/"
        own = self.trees.ref(1, 1).rsplit("/", 1)[0] + "/"  # refs/harnessc/<run>/: the attempts' own
        self.tripwire = Tripwire(common, shown, own, self._put_ref, self.root / ".harness" / "tampered" / run_id)
        self.tripwire.mine = {self.integration.branch}
        self.tripwire.record()

    def _put_ref(self, ref: str, value: str | None) -> None:
        """The tripwire puts a ref back as it was (None: it was not there)."""
        git = self.landing.git
        if value is None:
            try:
                git.run("update-ref", "--no-deref", "-d", ref, worktree=False)
            except gitcmd.GitFailed:  # not a ref git reads (garbage in a loose file): the file goes
                os.unlink(self.tripwire.common / ref)
        elif value.startswith("ref: "):
            git.run("symbolic-ref", ref, value[5:].strip(), worktree=False)
        elif value.startswith("link:"):
            raise OSError("it was a symbolic link")
        else:
            git.run("update-ref", "--no-deref", ref, value, worktree=False)

    def _own(self):
        """Held while harnessc changes what the tripwire records (no check sees it half made)."""
        return self.tripwire.lock if self.tripwire is not None else contextlib.nullcontext()

    async def _check(self) -> None:
        """A check: here when no thread changes the record (a fraction of a millisecond; a
        thread's start costs more on a loaded machine), else in a thread."""
        tw = self.tripwire
        if tw is None:
            return
        if tw.lock.acquire(blocking=False):
            try:
                found = self._checked()
            finally:
                tw.lock.release()
        else:
            found = await asyncio.to_thread(self._checked)
        self._say(found)

    def _checked(self) -> Finding | str | None:
        try:
            return self.tripwire.check()
        except Exception as e:  # noqa: BLE001 - said (_say), never the run's end; the next check tries again
            return f"could not check the repository's git directory: {type(e).__name__}: {e}"[:500]

    def _say(self, found: Finding | str | None) -> None:
        """A check's finding, as an event (alerts.py: critical for tampering, else a warning)."""
        if found is None:
            return
        if isinstance(found, str):  # the check failed
            self.store.event("git_tampered", message=found)
            return
        if found.branches_removed:  # agents' own branches: deleted again, no alert
            self.store.event("git_branches_removed", refs=found.branches_removed[:200])
            if not found.tampering and found.changed == found.branches_removed:
                return
        if found.other_run:  # another harnessc run in this repository: logged, no alert
            self.store.event("git_other_run", files=[f for f in found.changed if f not in found.branches_removed][:200])
            return
        names = ", ".join(found.changed[:10]) + (f" and {len(found.changed) - 10} more" if len(found.changed) > 10 else "")
        if not found.tampering:
            self.store.event("git_changed", files=found.changed[:200], details=found.details[:200], message=(
                f"{names} changed in the repository's git directory while no agent ran: taken as its state"))
            return
        failed = f"; could not put back: {', '.join(found.not_restored[:10])}" if found.not_restored else ""
        self.store.event("git_tampered", files=found.changed[:200], details=found.details[:200],
                         attempts=found.attempts, not_restored=found.not_restored[:200], message=(
                             f"tampered with {names} while {', '.join(found.attempts)} ran "
                             f"({'; '.join(found.details[:10])}): put back{failed}; "
                             f"what ran meanwhile does not land and runs again. What was there is kept in "
                             f"{self.tripwire.aside.relative_to(self.root)}/ (a ref: the commit named above)"))

    def _blocked_refs(self) -> dict[str, str]:
        """Task -> the ref a blocked task's change is kept on (from its landing record)."""
        return {tid: rec.get("ref", "") for tid, rec in self._kept_records(KEPT)}

    def _kept_records(self, states: tuple[str, ...]):
        """(task, its landing record) for each record in one of `states` whose task is in it still."""
        rows = self.store.tasks()
        for key in self.store.meta_keys(LANDING_KEY):
            rec = _load(self.store.meta_get(key))
            tid = key.removeprefix(LANDING_KEY)
            if rec.get("state") in states and rows.get(tid, {}).get("state") == rec.get("state"):
                yield tid, rec

    def _recover_landings(self) -> None:
        """A landing a killed run began: landed when the branch holds its commit (the task
        succeeded, once), else forgotten (the task runs again)."""
        for key in self.store.meta_keys(LANDING_KEY):
            rec = _load(self.store.meta_get(key))
            if rec.get("state") != TaskState.PENDING:
                continue
            tid = key.removeprefix(LANDING_KEY)
            sha = None
            if str(rec.get("branch", "")).startswith(BRANCH_PREFIX):
                sha = self.landing.landed_since(rec["branch"], rec.get("since", ""), tid)
            if sha is None:
                self.store.meta_set(key, None)
                continue
            state = self.store.tasks([tid]).get(tid, {}).get("state")
            if state != TaskState.SUCCEEDED:
                self.store.finish_task(tid, TaskState.SUCCEEDED, output=rec.get("output"),
                                       fingerprint=rec.get("fingerprint"))
            self._record(tid, {**rec, "state": "landed", "sha": sha, "output": None})
            self.store.event("landing_recovered", tid, sha=sha, message=(
                f"{tid}'s change had landed ({sha[:10]}) when the earlier run stopped: counted once"))

    def end(self) -> list[str]:
        """Lines for the run's end: where the results are, how to take them, kept refs."""
        if not self.wanted or self.integration is None:
            self._drain()
            return []
        integ, lines = self.integration, []
        if self.tripwire is not None:
            self._say(self._checked())  # what the last attempts changed and no landing saw
        self._drain()
        integ.ended = True
        self._save()
        tip = self.landing.tip(integ.branch)
        if tip != integ.last_set or not integ.following:
            if tip and tip != self.landing.tip(integ.user_branch):
                lines.append(f"results are on branch {integ.name} ({integ.left_because or 'your branch was not moved'})"
                             f"; take them with `git merge {integ.name}`")
        held = self.held()
        for tid, ref in sorted(self.blocked_refs.items()):
            if tid in held:
                lines.append(f"review: {tid}: its change waits at {ref} (`harnessc review`, then "
                             f"`harnessc approve {tid}` or `harnessc reject {tid} \"why\"`)")
            else:
                lines.append(f"blocked: {tid}: its change is kept at {ref} (`git show {ref}`)")
        for tid, path in sorted(self.kept.items()):
            lines.append(f"kept worktree of {tid}: {path} (--keep-worktrees; `harnessc clean` removes it)")
        for line in lines:
            self.store.event("isolation_result", message=line)
        return lines

    def _drain(self) -> None:
        """The pool's free worktrees go (worktrees.Worktrees.drain); what it did, as an event."""
        pool = self.trees.pool if self.trees is not None else None
        if pool is None:
            return
        try:
            with self._own():
                names = self.trees.drain()
                for name in names if self.tripwire is not None else ():
                    self.tripwire.refresh_worktree(name)
        except Exception as e:  # noqa: BLE001 - never the run's end: the next run's start removes them
            self.store.event("worktree_remove_failed", message=f"could not empty the pool of checkouts: {e}"[:500])
        if pool.made or pool.reused:
            self.store.event("worktrees_reused", made=pool.made, reused=pool.reused,
                             discarded=len(pool.discarded), why=pool.discarded[:20])

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
        n = self.index[node.id]
        if not make:  # only its record: no git, no thread
            attempt = self.trees.create(n, k, base or self.base(node), False)
        else:
            await self._check()  # before each new checkout
            attempt = await asyncio.to_thread(self._create, n, k, base or self.base(node))
            self._warn(node.id)
        if self.tripwire is not None:
            self.tripwire.begin(str(attempt.path), node.id if k == 1 else f"{node.id} (approach {k})")
        return attempt

    def _create(self, n: int, k: int, base: str) -> Attempt:
        with self._own():
            attempt = self.trees.create(n, k, base, True)
            self._adopt(attempt)
        return attempt

    def _adopt(self, attempt: Attempt) -> None:
        if self.tripwire is not None:
            self.tripwire.forget_worktree(str(attempt.path))  # the one it replaced, if any
            self.tripwire.adopt_worktree(attempt.path)

    async def make(self, attempt: Attempt) -> None:
        if not attempt.made:
            await self._check()
            await asyncio.to_thread(self._make, attempt)
            self._warn(None)

    def _make(self, attempt: Attempt) -> None:
        with self._own():
            self.trees.make(attempt)
            self._adopt(attempt)

    def _warn(self, tid: str | None) -> None:
        while self.trees.warnings:
            self.store.event("worktree_not_brought", tid, message=self.trees.warnings.pop(0))

    async def commit(self, attempt: Attempt, message: str) -> str | None:
        """Commit the attempt's change - its base against its checkout's final tree, whatever
        the agent committed itself - (None: it changed nothing)."""
        if not attempt.made:
            return None  # never put on disk: nothing changed
        self.trees.verify(attempt)  # Tampered: the attempt is rejected, nothing of it lands
        if self.hooks:  # git_hooks: true - the commit runs the repository's hooks: none an agent planted
            await self._check()
        sha, withheld = await asyncio.to_thread(self.trees.commit, attempt, message, self.store.secrets)
        if withheld:
            shown = sorted(withheld.items())
            self.store.event("git_secret_withheld", paths=[p for p, _ in shown][:200], message=(
                "not committed: " + "; ".join(f"{p} ({why})" for p, why in shown[:5])
                + (", ..." if len(shown) > 5 else "") + " - it stays out of the attempt's change"))
        return sha

    async def land(self, node: PlanNode, attempt: Attempt, output: Any,
                   recheck: Callable[[Path], Awaitable[list[str]]]) -> Landed | Conflict | Tampered:
        """Land the attempt's committed change on the integration branch (merged and
        `recheck`ed on the merged tree when the branch moved since its base); not when the
        shared git directory was tampered with while it ran."""
        async with self._lock:
            if (tampered := await self._tampered(attempt)) is not None:
                return tampered
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
                    return await self._checks_failed(attempt.base, change, tip, errors, others)
                merged = True
                if (tampered := await self._tampered(attempt)) is not None:  # while its checks ran again
                    return tampered
            return await self._move(node.id, new, tip, merged, output, node.fingerprint)

    async def _checks_failed(self, base: str, change: str, tip: str, errors: list[str], others: list[str]) -> Conflict:
        """A change whose checks fail merged onto `tip`: named by the paths both sides changed
        (else its own)."""
        mine = set(await asyncio.to_thread(self.landing.changed, base, change))
        theirs = set(await asyncio.to_thread(self.landing.changed, base, tip))
        return Conflict(sorted(mine & theirs) or sorted(mine), "checks", tip, errors, others)

    async def _move(self, tid: str, new: str, tip: str, merged: bool, output: Any, fingerprint: str | None) -> Landed:
        """Move the integration branch from `tip` to `new` (under the landing lock): the
        landing recorded pending first, so a run killed in between finds it (_recover_landings)."""
        integ, landing = self.integration, self.landing
        self._record(tid, {"state": TaskState.PENDING, "since": tip, "branch": integ.branch,
                           "output": output, "fingerprint": fingerprint})
        if not await asyncio.to_thread(self._advance, integ, new, tip):
            self.store.meta_set(LANDING_KEY + tid, None)
            raise IsolationError(f"the integration branch {integ.name} moved under the run",
                                 "do not move harnessc/run/* branches while a run lands on them")
        paths = await asyncio.to_thread(landing.changed, tip, new)
        self.store.event("landed", tid, sha=new, merged=merged, branch=integ.name, paths=paths[:200])
        return Landed(new, merged, paths)

    async def _tampered(self, attempt: Attempt) -> Tampered | None:
        if self.tripwire is None:
            return None
        await self._check()
        files = self.tripwire.taken(str(attempt.path))
        return Tampered(files) if files else None

    def _advance(self, integ: Integration, new: str, old: str) -> bool:
        with self._own():
            moved = self.landing.advance(integ, new, old)
            if self.tripwire is not None:
                self.tripwire.refresh_refs([integ.branch])
        return moved

    def landed(self, node: PlanNode, landed: Landed) -> None:
        """After the task's success is recorded: the landing is done; the user's branch follows."""
        self._record(node.id, {"state": "landed", "sha": landed.sha, "branch": self.integration.branch})
        self._follow(landed.sha)

    def blocked(self, node: PlanNode, attempt: Attempt | None) -> str:
        """The task ends blocked: its change is kept on its (attempt's) ref (named)."""
        ref = attempt.ref if attempt is not None else self.ref(node)
        self._record(node.id, {"state": TaskState.BLOCKED, "ref": ref, "branch": self.integration.branch})
        self.blocked_refs[node.id] = ref
        return ref

    async def hold(self, node: PlanNode, attempt: Attempt, output: Any) -> Tampered | None:
        """The task's verified change waits for review: kept on its ref, not landed; not when
        the shared git directory was tampered with while it ran (as `land`)."""
        async with self._lock:
            if (tampered := await self._tampered(attempt)) is not None:
                return tampered
        self._record(node.id, {"state": TaskState.REVIEW, "ref": attempt.ref, "change": attempt.change,
                               "base": attempt.base, "branch": self.integration.branch,
                               "output": output, "fingerprint": node.fingerprint})
        self.blocked_refs[node.id] = attempt.ref
        return None

    def held(self) -> dict[str, dict]:
        """Task -> its review record, for the tasks whose change waits for review."""
        return dict(self._kept_records((TaskState.REVIEW,)))

    async def approve(self, node: PlanNode,
                      recheck: Callable[[Path], Awaitable[list[str]]] | None = None) -> Landed | Conflict:
        """Land an approved change kept for review on the integration branch (merged when the
        branch moved since its base, and `recheck`ed on the merged tree in a fresh checkout,
        as `land` does; a conflict is returned, nothing lands)."""
        rec = self.held().get(node.id) or {}
        async with self._lock:
            await self._check()  # the shared git directory, as before any landing (tripwire.py)
            integ, landing = self.integration, self.landing
            tip = landing.loose_tip(integ.branch) or await asyncio.to_thread(landing.tip, integ.branch)
            change, base = rec.get("change"), rec.get("base") or tip
            if not change:  # it changed nothing
                self._record(node.id, {"state": "landed", "sha": tip, "branch": integ.branch})
                return Landed(tip, False, [])
            new, merged = change, False
            if tip != base:
                new, paths = await asyncio.to_thread(landing.merge, tip, change, base)
                others = await asyncio.to_thread(landing.subjects, base, tip)
                if new is None:
                    return Conflict(paths, "merge", tip, others=others)
                if recheck is not None:
                    async with self.checkout(new) as workdir:
                        errors = await recheck(workdir)
                    if errors:
                        return await self._checks_failed(base, change, tip, errors, others)
                merged = True
            landed = await self._move(node.id, new, tip, merged, rec.get("output"), rec.get("fingerprint"))
            self.blocked_refs.pop(node.id, None)
            return landed

    async def close(self, node: PlanNode, outcome: str, k: int = 1) -> None:
        """The task (its approach `k`) ended: its worktree goes (kept with --keep-worktrees
        when it did not succeed), its ref too (kept when it is blocked)."""
        n = self.index[node.id]
        keep_tree = self.keep_failed and outcome not in (TaskState.SUCCEEDED, TaskState.DEGRADED, TaskState.CANCELLED)
        keep_ref = outcome in KEPT or keep_tree
        if keep_tree:
            self.kept[node.id if k == 1 else f"{node.id} (approach {k})"] = path = \
                str(self.trees.path(n, k).relative_to(self.root))
            self.store.event("worktree_kept", node.id, path=path, ref=self.trees.ref(n, k))
        key = str(self.trees.path(n, k))
        if self.tripwire is not None:
            self.tripwire.end(key)  # in the window until the next check, which finds what it changed
            if not self.tripwire.active:  # the last one: checked now, so what changes next is no agent's
                await self._check()
        if self.trees.forget_unmade(n, k):
            return  # never put on disk: neither it nor its ref exists
        try:
            await asyncio.to_thread(self._remove, n, k, keep_ref, keep_tree)
        except Exception as e:  # never lose the task's outcome to a cleanup failure
            self.store.event("worktree_remove_failed", node.id, message=str(e)[:500])

    def _remove(self, n: int, k: int, keep_ref: bool, keep_tree: bool) -> None:
        with self._own():
            try:
                self.trees.remove(None, n, k, keep_ref, keep_tree)
            finally:
                if self.tripwire is not None and not keep_tree:
                    self.tripwire.forget_worktree(str(self.trees.path(n, k)))

    @asynccontextmanager
    async def checkout(self, base: str):
        """A fresh worktree at commit `base`, removed after: its project directory (to measure
        `min_passed: base`, baseline.py; to check an approved change merged, approval.py).
        Worktree 0-<k>: plan indexes start at 1."""
        k = next(self._checkouts)
        await self._check()  # before each new checkout
        attempt = await asyncio.to_thread(self._create, 0, k, base)
        try:
            yield attempt.workdir
        finally:
            await asyncio.to_thread(self._remove, 0, k, False, False)

    # ------------------------------------------------------------------ records

    def _follow(self, tip: str) -> None:
        integ = self.integration
        was = integ.following
        with self._own():
            moved = bool(tip) and self.landing.follow(integ, tip)
            if moved and self.tripwire is not None:
                self.tripwire.refresh_refs([integ.user_branch])
        if moved:
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
    from ..store.lock import holder

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


__all__ = ["Isolation", "IsolationError", "Attempt", "Landed", "Conflict", "Tampered", "REF_ROOT", "isolated", "WORKTREE", "NONE"]
