"""The text signals of progress scoring (runtime/loop/progress.py): how different two outputs are,
in work bounded by the compared length whatever the outputs, computed off the event loop."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest

from harnessc.runtime.loop import progress
from harnessc.runtime.loop.progress import COMPARED_CHARS, ProgressMeter, Settings, output_difference

from harnessc.planfile import Limits, PlanNode, Retry, Routing


class Budget(Exception):
    pass


def python_steps(fn, *args, budget: int):
    """fn(*args), counting the Python calls and lines it runs; Budget past `budget` of them."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        count += 1
        if count > budget:
            raise Budget(f"more than {budget:,} Python steps")
        return trace

    sys.settrace(trace)
    try:
        result = fn(*args)
    finally:
        sys.settrace(None)
    return result, count


# consecutive outputs that made difflib's SequenceMatcher cubic (4 minutes at n=4,000)
REPETITIVE = [("1-" * 4000, "2-" * 4000), ("ab" * 5000, "ba" * 5000 + "x"), ("a" * 8000, "a" * 7999 + "b"),
              ("x " * 10_000, "y " * 10_000)]


@pytest.mark.parametrize("a, b", REPETITIVE)
def test_difference_work_is_bounded_by_the_compared_length(a: str, b: str) -> None:
    budget = COMPARED_CHARS  # less than a step a compared character, whatever the text
    value, _ = python_steps(output_difference, a, b, budget=budget)
    assert 0.0 < value <= 1.0


def test_difference_work_does_not_grow_with_the_output() -> None:
    _, small = python_steps(output_difference, "1-" * 2000, "2-" * 2000, budget=10**6)
    _, huge = python_steps(output_difference, "1-" * 400_000, "2-" * 400_000, budget=10**6)
    assert huge <= small * 1.1  # capped: the head and tail only


def test_difference_values() -> None:
    assert output_difference(None, "anything") == 1.0
    assert output_difference("Same  TEXT", "same text") == 0.0
    assert output_difference("abcdef", "uvwxyz") == 1.0
    assert output_difference("", "something") == 1.0
    close = output_difference("I wrote the parser and its tests", "I wrote the parser and its test")
    far = output_difference("I wrote the parser and its tests", "the lexer fails on tabs, looking")
    assert 0.0 < close < 0.1 < far <= 1.0
    assert output_difference("1-" * 4000, "2-" * 4000) == 1.0  # no shared piece at all


def loop_node() -> PlanNode:
    return PlanNode(id="t", title="t", phase=None, done=False, order=0, priority="normal", complexity="medium",
                    tags=[], depends_on=[], contract=None, goal="- [ ] parser\n- [ ] lexer", success=None,
                    completion_promise="DONE", accept=[], context=[],
                    limits=Limits(50, 3600, 3, None), retry=Retry(2, "retry", [0]), routing=Routing("s", [], ""))


def test_text_signals_of_a_long_answer_are_read_off_the_event_loop(tmp_path: Path, monkeypatch) -> None:
    """A long answer's signals are read in a worker thread; a short one's on the loop's
    thread (a hand-off costs more than reading it)."""
    threads: list[str] = []
    real = progress.TextSignals.of

    def spy(*args):
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(progress.TextSignals, "of", staticmethod(spy))
    meter = ProgressMeter(tmp_path, loop_node(), Settings(), tmp_path / "loop")
    long = "<progress>parser</progress>\n- [x] parser\n" + "x" * progress.SMALL_TEXT

    async def main():
        await meter.begin()
        first = await meter.measure(long, [])
        second = await meter.measure(long, [])
        short = await meter.measure("<progress>lexer</progress>", [])
        return first, second, short, threading.current_thread().name

    (tmp_path / "loop").mkdir()
    try:
        first, second, short, loop_thread = asyncio.run(main())
    finally:
        meter.close()
    assert len(threads) == 3 and loop_thread not in threads[:2] and threads[2] == loop_thread
    assert short.markers == ["lexer"]
    assert first.markers == ["parser"] and first.done == ["parser"] and first.signals["output"] == 1.0
    assert second.markers == [] and second.done == [] and second.signals["output"] == 0.0
