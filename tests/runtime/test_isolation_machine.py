"""A hypothesis state machine over isolated work (runtime/worktree/): tasks start in their
worktrees, finish (landing their change), fail, conflict, and the run is killed (at any
step, a landing that moved the branch but was not recorded included) and resumed. After
every step: every verified change is on the integration branch exactly once, nothing else
is, the user's uncommitted files are as they were, and only running attempts (and the run's
pool of free checkouts, worktree/pool.py) have worktrees.

Real git, real worktrees, a real state.db; the agent's work is a file written in the
worktree (the CLI tests in test_isolation.py run real command agents)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from harnessc import planfile
from harnessc.runtime.store.state import StateStore
from harnessc.runtime.worktree.isolation import Conflict, Isolation, Landed
from harnessc.runtime.worktree.landing import message
from harnessc.workspace import Workspace

from .helpers import git, git_repo, node

TASKS = ["a", "b", "c", "d"]


def plan_nodes() -> list[planfile.PlanNode]:
    return [planfile._node(node(t, isolation="worktree", order=i)) for i, t in enumerate(TASKS)]


class IsolationMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="iso-machine-"))
        self.root = self.tmp / "p"
        self.root.mkdir()
        (self.root / "notes.txt").write_text("mine\n")
        git_repo(self.root)
        (self.root / "notes.txt").write_text("mine, uncommitted\n")
        (self.root / "draft.txt").write_text("untracked\n")
        self.nodes = {n.id: n for n in plan_nodes()}
        self.runs = 0
        self.verified: dict[str, int] = {t: 0 for t in TASKS}  # changes recorded as landed
        self.attempts: dict[str, object] = {}
        self.store = None
        self.resume()

    def teardown(self):
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ a run

    def open_run(self) -> None:
        self.runs += 1
        self.store = StateStore(Workspace(self.root))
        self.store.recover()
        self.store.ensure_tasks(TASKS, set())
        self.store.start_run(f"run{self.runs}", {})
        self.iso = Isolation(self.root, list(self.nodes.values()), self.store)
        self.iso.check()
        self.iso.start()
        self.attempts = {}

    def state(self, tid: str) -> str:
        return self.store.tasks([tid])[tid]["state"]

    def land(self, tid: str, text: str, record: bool = True) -> object:
        attempt = self.attempts.pop(tid)
        (attempt.workdir / f"{tid}.txt").write_text(text)
        n = self.nodes[tid]

        async def go():
            await self.iso.commit(attempt, message(tid, n.title, "bench", 1, "bot", self.store.run_id))

            async def recheck(_):
                return []
            return await self.iso.land(n, attempt, {"t": tid}, recheck)

        result = asyncio.run(go())
        if isinstance(result, Landed) and record:
            self.store.finish_task(tid, "succeeded", output={"t": tid})
            self.iso.landed(n, result)
            self.verified[tid] += 1
        if record:
            asyncio.run(self.iso.close(n, "succeeded" if isinstance(result, Landed) else "failed"))
        return result

    # ------------------------------------------------------------------ rules

    @rule(tid=st.sampled_from(TASKS))
    def start(self, tid):
        if tid in self.attempts or self.state(tid) == "succeeded":
            return
        self.store.set_state(tid, "running")
        self.attempts[tid] = asyncio.run(self.iso.open(self.nodes[tid]))

    @precondition(lambda self: self.attempts)
    @rule(tid=st.sampled_from(TASKS))
    def finish(self, tid):
        if tid in self.attempts:
            result = self.land(tid, f"work of {tid}\n")
            assert isinstance(result, Landed)  # separate files always merge

    @precondition(lambda self: self.attempts)
    @rule(tid=st.sampled_from(TASKS))
    def conflict(self, tid):
        """The task also writes shared.txt: it conflicts with any other that did since its base."""
        if tid not in self.attempts:
            return
        (self.attempts[tid].workdir / "shared.txt").write_text(f"{tid}'s version\n")
        result = self.land(tid, f"work of {tid}\n")
        if isinstance(result, Conflict):
            assert result.paths == ["shared.txt"]
            self.store.set_state(tid, "pending")

    @precondition(lambda self: self.attempts)
    @rule(tid=st.sampled_from(TASKS))
    def fail(self, tid):
        if tid in self.attempts:
            self.attempts.pop(tid)
            self.store.finish_task(tid, "failed", error="failed verification")
            asyncio.run(self.iso.close(self.nodes[tid], "failed"))
            self.store.set_state(tid, "pending")

    @rule(mid_landing=st.booleans(), pick=st.integers(0, 3))
    def kill(self, mid_landing, pick):
        """kill -9: nothing is closed; with mid_landing (a running attempt's) the branch moved
        but nothing was recorded."""
        if mid_landing and self.attempts:
            tid = sorted(self.attempts)[pick % len(self.attempts)]
            result = self.land(tid, f"work of {tid}\n", record=False)
            if isinstance(result, Landed):
                self.verified[tid] += 1  # the next run must count it, once
            elif isinstance(result, Conflict):
                self.store.set_state(tid, "pending")
        self.store.close()
        self.store = None
        self.resume()

    def resume(self):
        self.open_run()

    # ------------------------------------------------------------------ invariants

    @invariant()
    def each_verified_change_lands_exactly_once(self):
        branch = self.iso.integration.name
        subjects = git(self.root, "log", "--format=%s", branch).splitlines()
        for t in TASKS:
            assert subjects.count(f"harnessc: {t}: Task {t}") == min(self.verified[t], 1), (t, subjects)
            if self.verified[t]:
                assert self.state(t) == "succeeded"
        assert not any("<<<<<<<" in (self.root / f).read_text() for f in ("shared.txt",)
                       if (self.root / f).exists())

    @invariant()
    def no_user_file_changes(self):
        assert (self.root / "notes.txt").read_text() == "mine, uncommitted\n"
        assert (self.root / "draft.txt").read_text() == "untracked\n"
        status = git(self.root, "status", "--porcelain")
        assert " M notes.txt" in status and "?? draft.txt" in status
        assert ".harness" not in git(self.root, "log", "--all", "--name-only", "--format=")

    @invariant()
    def only_running_attempts_and_the_pool_have_worktrees(self):
        """Besides the user's: the running attempts' worktrees, and the free ones this run
        keeps for its next attempts (worktree/pool.py); a killed run's are gone."""
        listed = [line[len("worktree "):] for line in git(self.root, "worktree", "list", "--porcelain").splitlines()
                  if line.startswith("worktree ")]
        free = {str(k.path) for k in self.iso.trees.pool.free}
        assert all(Path(f).parent.name == self.store.run_id and Path(f).name.startswith("free-") for f in free)
        assert free <= set(listed)
        assert len(listed) == 1 + len(self.attempts) + len(free)
        refs = git(self.root, "for-each-ref", "--format=%(refname)", "refs/harnessc/").split()
        assert len(refs) == len(self.attempts)


IsolationMachine.TestCase.settings = settings(max_examples=8, stateful_step_count=10, deadline=None,
                                              suppress_health_check=list(HealthCheck))
TestIsolationMachine = IsolationMachine.TestCase


def test_git_is_there():
    assert subprocess.run(["git", "--version"], capture_output=True).returncode == 0
