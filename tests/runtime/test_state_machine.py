"""A hypothesis state machine over the scheduler and the state store.

Rules: run to the end, crash mid-run (every later write is lost, as with kill -9), reopen
the store, reset. Invariants: dependencies respected, attempts per claim cycle bounded,
states valid, and the reopened state equals the model.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import logging

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from harnessc.runtime.scheduler import RunOptions, Runner, new_run_id
from harnessc.runtime.session import new_runner
from harnessc.runtime.store.state import StateStore
from harnessc.states import STORED
from harnessc.workspace import Workspace

from .helpers import SIMPLE_CONTRACT, node, write_project


logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # crashed tasks are never retrieved


class Crash(BaseException):
    """Stands for the process dying: raised from inside a write, so that write is lost too."""


class SchedulerMachine(RuleBasedStateMachine):
    @initialize(data=st.data())
    def make_plan(self, data):
        self.tmp = Path(tempfile.mkdtemp(prefix="hc-sm-"))
        n = data.draw(st.integers(2, 6), label="tasks")
        nodes, self.expect_ok = [], {}
        agents = {}
        for i in range(n):
            deps = sorted(data.draw(st.sets(st.integers(0, i - 1), max_size=2), label=f"deps{i}")) if i else []
            invalid = data.draw(st.integers(0, 3), label=f"invalid{i}")
            retries = data.draw(st.integers(0, 2), label=f"retries{i}")
            done = data.draw(st.booleans(), label=f"done{i}") if i == 0 else False
            # priced, so reservations (estimates) differ from the settled costs
            agents[f"a{i}"] = {"provider": "simulate", "invalid_first": invalid,
                               "price": {"input": 1.0, "output": 2.0}}
            nodes.append(node(f"t{i}", depends_on=[f"t{d}" for d in deps], contract="summary",
                              done=done, routing={"agent": f"a{i}"},
                              retry={"max_retries": retries, "on_failure": "fail", "delays": [0]}))
            self.expect_ok[f"t{i}"] = done or invalid <= retries
        self.plan = write_project(self.tmp, nodes, agents=agents, contracts={"summary": SIMPLE_CONTRACT})
        self.nodes = {x["id"]: x for x in nodes}
        self.model: dict[str, str] = {}  # task -> terminal state we know was committed
        self.store = StateStore(Workspace(self.tmp))

    def teardown(self):
        if getattr(self, "store", None):
            self.store.close()
        if getattr(self, "tmp", None):
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _runner(self, listeners=None) -> Runner:
        self.store.recover()
        self.runs = getattr(self, "runs", 0) + 1
        self.store.run_id = f"{new_run_id()}-{self.runs}"
        self.store.db.execute("INSERT INTO runs (id, started_at, status) VALUES (?, 0, 'running')",
                              (self.store.run_id,))
        return new_runner(self.tmp, self.plan, self.store, RunOptions(jobs=2), listeners)

    def _expected_final(self) -> dict[str, str]:
        out = {}
        for tid, n in self.nodes.items():  # nodes are in topological (roadmap) order
            if n["done"]:
                out[tid] = "done"
            elif self.model.get(tid) in ("succeeded", "failed"):
                out[tid] = self.model[tid]
            elif any(out[d] in ("failed", "skipped") for d in n["depends_on"]):
                out[tid] = "skipped"
            else:
                out[tid] = "succeeded" if self.expect_ok[tid] else "failed"
        return out

    @rule()
    def run_to_end(self):
        result = asyncio.run(self._runner().run())
        expected = self._expected_final()
        got = {t: r["state"] for t, r in self.store.tasks().items()}
        assert got == expected, (got, expected)
        for tid, s in got.items():
            if s in ("succeeded", "failed"):
                self.model[tid] = s
        assert result.exit_code == (1 if any(s in ("failed", "skipped") for s in got.values()) else 0)

    @rule(after=st.integers(1, 25))
    def crash_mid_run(self, after):
        seen = {"n": 0}

        def listener(ev):
            seen["n"] += 1
            if seen["n"] >= after:
                raise Crash()

        runner = self._runner([listener])
        try:
            asyncio.run(runner.run())
        except Crash:
            pass
        self.store.listeners = []
        # What did commit is in the model now: terminal states survive a crash.
        for tid, r in self.store.tasks().items():
            if r["state"] in ("succeeded", "failed"):
                self.model[tid] = r["state"]

    @rule()
    def reopen(self):
        self.store.close()
        self.store = StateStore(Workspace(self.tmp))
        self.store.recover()
        rows = self.store.tasks()
        for tid, s in self.model.items():
            assert rows[tid]["state"] == s, (tid, rows[tid]["state"], s)
        assert not any(r["state"] == "running" for r in rows.values())
        assert self.store.db.execute(
            "SELECT COUNT(*) FROM attempts WHERE status='started'").fetchone()[0] == 0

    @rule()
    def reset_all(self):
        self.store.reset(None)
        self.model.clear()

    @invariant()
    def states_are_valid(self):
        if not getattr(self, "store", None):
            return
        for tid, r in self.store.tasks().items():
            assert r["state"] in STORED
            assert (r["state"] == "done") == bool(self.nodes[tid]["done"])

    @invariant()
    def ledger_balances(self):
        """Each task's tokens and cost are the sums of its finished attempts' (one commit each,
        crash or not), and the ledger settled exactly those costs."""
        if not getattr(self, "store", None):
            return
        db = self.store.db
        for tid, tokens, cost in db.execute("SELECT id, tokens, cost_usd FROM tasks"):
            a_tokens, a_cost = db.execute(
                "SELECT COALESCE(SUM(input_tokens + output_tokens), 0), COALESCE(SUM(cost_usd), 0)"
                " FROM attempts WHERE task_id=? AND status != 'started'", (tid,)).fetchone()
            settled = db.execute("SELECT COALESCE(SUM(actual), 0) FROM ledger WHERE task_id=? AND settled",
                                 (tid,)).fetchone()[0]
            assert tokens == a_tokens and cost == pytest.approx(a_cost, abs=1e-12), (tid, tokens, a_tokens)
            assert settled == pytest.approx(cost, abs=1e-12), (tid, settled, cost)

    @invariant()
    def attempts_bounded_and_deps_respected(self):
        if not getattr(self, "store", None):
            return
        db = self.store.db
        for tid, n in self.nodes.items():
            limit = n["retry"]["max_retries"] + 1
            for run_id, count in db.execute(
                    "SELECT run_id, COUNT(*) FROM attempts WHERE task_id=? GROUP BY run_id", (tid,)):
                assert count <= limit, (tid, run_id, count, limit)
            for (started,) in db.execute("SELECT started_at FROM attempts WHERE task_id=?", (tid,)):
                for d in n["depends_on"]:
                    if self.nodes[d]["done"]:
                        continue
                    ok = db.execute(
                        "SELECT COUNT(*) FROM events WHERE kind='task_succeeded' AND task_id=? AND ts<=?",
                        (d, started)).fetchone()[0]
                    assert ok, f"{tid} started before its dependency {d} succeeded"


TestSchedulerMachine = SchedulerMachine.TestCase
TestSchedulerMachine.settings = settings(
    max_examples=25, stateful_step_count=8, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
