"""The live view's ETA (runtime/observe/eta.py, display.py) in virtual time: the display stamps
each task's start and end with the runtime's clock, and counts the ETA down between two
computations, without a run or a terminal and without waiting."""

from __future__ import annotations

import io

from rich.console import Console

from harnessc.runtime import clock
from harnessc.runtime.observe.display import LiveDisplay
from harnessc.runtime.observe.eta import Eta
from harnessc.wording import duration

from .helpers import node, write_project


def test_the_eta_is_measured_on_the_runtime_clock_and_counts_down(tmp_path):
    plan = write_project(tmp_path, [node("a"), node("b"), node("c")])  # alike: the same weight
    virtual = clock.VirtualClock(start=1000.0)
    with virtual.installed():
        view = LiveDisplay(Console(file=io.StringIO()))
        view.eta = Eta({n.id: n for n in plan.nodes}, ["a", "b", "c"], jobs=1)
        view.on_event({"kind": "run_planned", "tasks": 3})
        view.on_event({"kind": "attempt_started", "task": "a", "iteration": 1, "agent": "bot"})
        virtual.jump(30)
        assert view.eta_text(clock.monotonic()) == "ETA unknown"  # no task has ended yet
        view.on_event({"kind": "task_succeeded", "task": "a"})
        view.on_event({"kind": "attempt_started", "task": "b", "iteration": 1, "agent": "bot"})
        virtual.jump(10)
        # a took 30 s: b has 20 s left and c 30 s, one at a time
        assert view.eta_text(clock.monotonic()) == f"ETA ~{duration(50)}"
        virtual.jump(0.5)  # within ETA_EVERY: the last estimate counted down, not computed again
        assert view.eta_text(clock.monotonic()) == f"ETA ~{duration(49.5)}"
        virtual.jump(30)  # b runs long: it is not taken as done, c is still to come
        assert view.eta_text(clock.monotonic()) == f"ETA ~{duration(30)}"
        view.on_event({"kind": "task_succeeded", "task": "b"})
        view.on_event({"kind": "attempt_started", "task": "c", "iteration": 1, "agent": "bot"})
        virtual.jump(5)
        # two tasks took 30 and 40.5 s: c is expected to take their mean, 35.25 s
        assert view.eta_text(clock.monotonic()) == f"ETA ~{duration(30.25)}"
    assert view.eta.measured == 70.5 and view.finished == 2
