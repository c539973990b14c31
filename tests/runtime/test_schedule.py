"""The pure scheduling core (runtime/schedule.py), driven directly by a hypothesis state
machine: no asyncio, no database, no clock, so hundreds of runs take a second.

Rules: start what is ready, end a running task in any state, decide a review, prioritize,
pause or resume, halt. A model kept here beside the schedule says what must hold: no task
starts before its dependencies completed, at most `jobs` run, ready tasks start by
(prioritized, priority, critical path, roadmap order), a task ends once per start, the
skipped tasks are exactly the pending transitive dependents of a failed one, and the run is
over exactly when nothing runs and nothing can start.
"""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from harnessc import outcome as outcomes
from harnessc.runtime.schedule import Graph, Schedule, _kahn
from harnessc.runtime.work import blocked_at_start

ENDINGS = ("succeeded", "degraded", "failed", "blocked", "skipped", "review", "interrupted")


def plan_nodes(data) -> list[SimpleNamespace]:
    n = data.draw(st.integers(1, 9), label="tasks")
    nodes = []
    for i in range(n):
        deps = sorted(data.draw(st.sets(st.integers(0, i - 1), max_size=3), label=f"deps{i}")) if i else []
        weight = data.draw(st.sampled_from([None, 10, 500, 5000]), label=f"weight{i}")
        nodes.append(SimpleNamespace(
            id=f"t{i}", depends_on=[f"t{d}" for d in deps], order=i, done=False,
            priority=data.draw(st.sampled_from([None, "critical", "high", "normal", "low"]), label=f"prio{i}"),
            estimate=None if weight is None else SimpleNamespace(input_tokens=weight, output_tokens=weight // 2)))
    return nodes


def rank(priority: str | None) -> int:
    return {"critical": 0, "high": 1, None: 2, "normal": 2, "low": 3}[priority]


class ScheduleMachine(RuleBasedStateMachine):
    @initialize(data=st.data())
    def make_run(self, data):
        nodes = plan_nodes(data)
        self.nodes = {n.id: n for n in nodes}
        states, todo = {}, []
        rerun_failed = data.draw(st.booleans(), label="rerun failed")
        for n in nodes:  # a resumed run: what earlier runs left, deps before dependents
            complete = all(states[d] in outcomes.COMPLETE for d in n.depends_on)
            s = data.draw(st.sampled_from(["pending", "failed", *(["succeeded", "review"] if complete else [])]),
                          label=f"state {n.id}")
            if s == "succeeded" and data.draw(st.booleans(), label=f"done {n.id}"):
                n.done, s = True, "done"
            states[n.id] = s
            if s == "pending" or (s == "failed" and rerun_failed):
                todo.append(n.id)
        blocked = blocked_at_start(self.nodes, {t: {"state": s} for t, s in states.items()}, todo)
        self.graph = Graph.of(nodes, rank)
        self.jobs = data.draw(st.integers(1, 3), label="jobs")
        self.fail_fast = data.draw(st.booleans(), label="fail fast")
        self.s = Schedule(self.graph, states, todo, blocked, self.jobs, fail_fast=self.fail_fast)
        # the model
        self.state = {t: ("pending" if t in todo else s) for t, s in states.items()}
        for tid, _why in self.s.opening:
            self.state[tid] = "skipped"
        assert [t for t, _ in self.s.opening] == list(blocked)
        self.pending = {t for t in todo if t not in blocked}
        self.running: set[str] = set()
        self.starts = {t: 0 for t in self.nodes}
        self.ends = {t: 0 for t in self.nodes}
        self.prioritized: set[str] = set()
        self.halted = self.paused = False

    # ------------------------------------------------------------------ the model's view

    def model_ready(self) -> set[str]:
        return {t for t in self.pending if all(self.state[d] in outcomes.COMPLETE for d in self.nodes[t].depends_on)}

    def model_key(self, tid: str) -> tuple:
        """What the scheduler did before the core was pulled out of it (scheduler._schedule's key)."""
        n = self.nodes[tid]
        return (0 if tid in self.prioritized else 1, rank(n.priority), -self.graph.path[tid], n.order, tid)

    def dependents(self, tid: str) -> set[str]:
        out, stack = set(), [tid]
        while stack:
            for c in self.graph.children[stack.pop()]:
                if c in self.pending and c not in out:
                    out.add(c)
                    stack.append(c)
        return out

    # ------------------------------------------------------------------ rules

    @rule()
    def start(self):
        ready = self.model_ready()
        started = self.s.start()
        if self.halted or self.paused:
            assert started == []
            return
        assert len(started) == min(len(ready), self.jobs - len(self.running)), (started, ready)
        assert started == sorted(started, key=self.model_key)
        rest = ready - set(started)
        for tid in started:
            assert tid in ready, f"{tid} started before its dependencies completed"
            assert all(self.model_key(tid) < self.model_key(r) for r in rest), (tid, rest)
            self.pending.discard(tid)
            self.running.add(tid)
            self.state[tid] = "running"
            self.starts[tid] += 1

    @precondition(lambda self: self.running)
    @rule(data=st.data(), outcome=st.sampled_from(ENDINGS))
    def end(self, data, outcome):
        tid = data.draw(st.sampled_from(sorted(self.running)), label="ends")
        waiting = {c for c in self.graph.children[tid] if c in self.pending}
        expect_skipped = self.dependents(tid) if outcome in outcomes.BROKEN else set()
        end = self.s.ended(tid, outcome)
        self.running.discard(tid)
        self.ends[tid] += 1
        self.state[tid] = outcome
        assert end.write_now == bool(waiting)
        assert len(end.skipped) == len({t for t, _ in end.skipped}), "a task skipped twice"
        assert {t for t, _ in end.skipped} == expect_skipped
        assert all(why == f"dependency '{tid}' {outcome}" for _, why in end.skipped)
        for t in expect_skipped:
            self.pending.discard(t)
            self.state[t] = "skipped"
        if self.fail_fast and outcome == "failed":
            assert end.halt == f"stopped after '{tid}' failed (--fail-fast)"
            self.halted = True
        else:
            assert end.halt is None

    @precondition(lambda self: any(s == "review" for s in self.state.values()))
    @rule(data=st.data(), outcome=st.sampled_from(["pending", "blocked", "succeeded"]))
    def decide_review(self, data, outcome):
        tid = data.draw(st.sampled_from(sorted(t for t, s in self.state.items() if s == "review")), label="reviewed")
        expect_skipped = self.dependents(tid) if outcome == "blocked" else set()
        skipped = self.s.reviewed(tid, outcome)
        self.state[tid] = outcome
        assert {t for t, _ in skipped} == expect_skipped
        for t in expect_skipped:
            self.pending.discard(t)
            self.state[t] = "skipped"
        if outcome == "pending":
            self.pending.add(tid)

    @rule(data=st.data())
    def prioritize(self, data):
        self.prioritized |= data.draw(st.sets(st.sampled_from(sorted(self.nodes)), max_size=2), label="prioritize")
        self.s.prioritize(self.prioritized)

    @rule(paused=st.booleans())
    def pause(self, paused):
        self.paused = paused
        self.s.pause(paused)

    @rule()
    def halt(self):
        self.halted = True
        self.s.halt()

    @rule(data=st.data(), bad=st.sampled_from([None, None, None, "known id", "unknown dependency", "cycle"]))
    def grow(self, data, bad):
        """plan.grow: auto / split: tasks added to the running plan (Schedule.grow). A bad
        addition is refused whole; a good one never gives a task of the plan a new dependency."""
        k = data.draw(st.integers(1, 3), label="new tasks")
        base = len(self.nodes)
        new = []
        for i in range(k):
            pool = sorted(self.nodes) + [n.id for n in new]
            deps = sorted(data.draw(st.sets(st.sampled_from(pool), max_size=3), label=f"new deps{i}"))
            new.append(SimpleNamespace(id=f"t{base + i}", depends_on=deps, order=base + i, done=False,
                                       priority=data.draw(st.sampled_from([None, "high"]), label=f"new prio{i}"),
                                       estimate=None))
        if bad == "known id":
            new[0].id = data.draw(st.sampled_from(sorted(self.nodes)), label="clash")
        elif bad == "unknown dependency":
            new[-1].depends_on = [*new[-1].depends_on, "ghost"]
        elif bad == "cycle":
            new[0].depends_on = [*new[0].depends_on, new[-1].id]
            new[-1].depends_on = sorted({*new[-1].depends_on, new[0].id})
        before = (dict(self.s.graph.deps), set(self.s.pending), dict(self.s.state))
        try:
            skipped = self.s.grow(Graph.of(new, rank))
        except ValueError:
            assert bad is not None
            assert (dict(self.s.graph.deps), set(self.s.pending), dict(self.s.state)) == before
            return
        assert bad is None
        assert all(self.s.graph.deps[t] == d for t, d in before[0].items()), "a task of the plan gained a dependency"
        self.graph = self.s.graph
        expect = {}
        for n in new:
            self.nodes[n.id] = n
            self.starts[n.id] = self.ends[n.id] = 0
            waits = [d for d in n.depends_on if d in self.pending or d in self.running or self.state[d] == "review"]
            stuck = [d for d in n.depends_on if d not in waits and self.state[d] not in outcomes.COMPLETE]
            if stuck:
                expect[n.id] = stuck[0]
                self.state[n.id] = "skipped"
            else:
                self.state[n.id] = "pending"
                self.pending.add(n.id)
        assert {t for t, _ in skipped} == set(expect)

    @precondition(lambda self: self.running)
    @rule(data=st.data(), bad=st.sampled_from([None, None, "depends on the parent"]))
    def split(self, data, bad):
        """split: true - a running task's answer adds its subtasks; it waits for them (Schedule.split)."""
        tid = data.draw(st.sampled_from(sorted(self.running)), label="splits")
        k = data.draw(st.integers(1, 3), label="subtasks")
        base = len(self.nodes)
        behind, stack = {tid}, [tid]
        while stack:
            for c in self.graph.children[stack.pop()]:
                if c not in behind:
                    behind.add(c)
                    stack.append(c)
        new = []
        for i in range(k):
            pool = sorted(set(self.nodes) - behind) + [n.id for n in new]
            deps = sorted(data.draw(st.sets(st.sampled_from(pool), max_size=2), label=f"sub deps{i}")) if pool else []
            new.append(SimpleNamespace(id=f"t{base + i}", depends_on=deps, order=base + i, done=False,
                                       priority=None, estimate=None))
        if bad:
            new[-1].depends_on = [*new[-1].depends_on, data.draw(st.sampled_from(sorted(behind)), label="into")]
        before = (dict(self.s.graph.deps), set(self.s.pending), set(self.s.running))
        try:
            skipped = self.s.split(tid, Graph.of(new, rank))
        except ValueError:
            assert bad
            assert (dict(self.s.graph.deps), set(self.s.pending), set(self.s.running)) == before
            return
        assert not bad
        self.graph = self.s.graph
        self.running.discard(tid)
        self.ends[tid] += 1  # its split call ended; it starts again once its subtasks are complete
        stuck = set()
        for n in new:
            self.nodes[n.id] = n
            self.starts[n.id] = self.ends[n.id] = 0
            waits = [d for d in n.depends_on if d in self.pending or d in self.running or self.state[d] == "review"]
            if any(d not in waits and self.state[d] not in outcomes.COMPLETE for d in n.depends_on):
                stuck.add(n.id)
                self.state[n.id] = "skipped"
            else:
                self.state[n.id] = "pending"
                self.pending.add(n.id)
        self.nodes[tid].depends_on = [*self.nodes[tid].depends_on, *(n.id for n in new)]
        if stuck:
            assert {t for t, _ in skipped} == stuck | {tid}
            self.state[tid] = "skipped"
        else:
            assert {t for t, _ in skipped} == set()
            self.state[tid] = "pending"
            self.pending.add(tid)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def agrees_with_the_model(self):
        assert self.s.running == self.running
        assert self.s.pending == self.pending
        assert set(self.s.ready) == self.model_ready()
        assert self.s.ready == sorted(self.model_ready(), key=self.model_key)
        assert len(self.running) <= self.jobs

    @invariant()
    def the_plan_stays_acyclic(self):
        deps = {t: tuple(n.depends_on) for t, n in self.nodes.items()}
        assert self.s.graph.deps == deps
        assert len(_kahn(deps)) == len(deps), "a cycle"

    @invariant()
    def every_start_ends_once(self):
        for t in self.nodes:
            assert self.ends[t] <= self.starts[t] <= self.ends[t] + 1
            assert (self.starts[t] > self.ends[t]) == (t in self.running)

    @invariant()
    def over_when_nothing_runs_or_can_start(self):
        assert self.s.over == (not self.running and (not self.model_ready() or self.halted))
        assert self.s.busy == bool(self.running or self.model_ready())


TestScheduleMachine = ScheduleMachine.TestCase
TestScheduleMachine.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])


def test_the_critical_path_starts_first():
    """One slot, a long chain listed after a short independent task: the chain's head starts
    first; among equal paths, priority and then roadmap order decide."""
    nodes = [SimpleNamespace(id="side", depends_on=[], order=0, done=False, priority=None, estimate=None),
             SimpleNamespace(id="head", depends_on=[], order=1, done=False, priority=None, estimate=None),
             SimpleNamespace(id="tail", depends_on=["head"], order=2, done=False, priority=None, estimate=None),
             SimpleNamespace(id="urgent", depends_on=[], order=3, done=False, priority="high", estimate=None)]
    s = Schedule(Graph.of(nodes, rank), {n.id: "pending" for n in nodes}, [n.id for n in nodes], {}, jobs=1)
    assert s.ready == ["urgent", "head", "side"]
    s.prioritize({"side"})
    assert s.start() == ["side"]
    assert s.ended("side", "succeeded").write_now is False
    assert s.start() == ["urgent"]
    s.ended("urgent", "succeeded")
    assert s.start() == ["head"]
    assert s.ended("head", "failed").skipped == [("tail", "dependency 'head' failed")]
    assert s.over and not s.busy


def test_a_run_starts_ready_tasks_in_the_schedules_order(tmp_path):
    """The driver (scheduler.Runner) over real SQLite and a simulate agent, one slot: a high
    priority task first, then the longest chain of estimated work, then roadmap order; a
    failure skips its dependents transitively, each with the failure as the reason."""
    from harnessc.runtime.scheduler import RunOptions
    from harnessc.runtime.session import execute

    from .helpers import SIMPLE_CONTRACT, node, write_project

    def est(tokens):
        return {"input_tokens": tokens, "output_tokens": tokens, "cost_usd": None}

    nodes = [node("s0", estimate=est(10)),
             node("s1", estimate=est(10), contract="summary", routing={"agent": "bad"},
                  retry={"max_retries": 0, "on_failure": "fail", "delays": [0]}),
             node("c0", estimate=est(100)), node("c1", depends_on=["c0"], estimate=est(100)),
             node("c2", depends_on=["c1"], estimate=est(100)),
             node("h", priority="high", estimate=est(10)),
             node("f", depends_on=["s1"], estimate=est(10)), node("g", depends_on=["f", "c2"], estimate=est(10)),
             node("s2", estimate=est(10))]
    plan = write_project(tmp_path, nodes, contracts={"summary": SIMPLE_CONTRACT}, concurrency=1,
                         agents={"rehearsal": {"provider": "simulate"},
                                 "bad": {"provider": "simulate", "invalid_first": 5}})
    started = []
    result = execute(tmp_path, plan, RunOptions(), listeners=[
        lambda ev: started.append(ev["task"]) if ev["kind"] == "task_running" else None])
    # s1 before s0 and s2: its dependents f and g are behind it; s0 before s2: roadmap order
    assert started == ["h", "c0", "c1", "c2", "s1", "s0", "s2"]
    states = {t["id"]: (t["state"], t["error"]) for t in result.tasks}
    assert states["f"] == ("skipped", "dependency 's1' failed")
    assert states["g"] == ("skipped", "dependency 's1' failed")
