"""memory.fit: the memory section shrinks, oldest parts first, until it fits its budget; and what
a summary agent is offered (memory.Memory.unsummarized)."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from harnessc.estimates import estimate_tokens
from harnessc.runtime.loop.memory import Memory, Settings, fit
from harnessc.runtime.loop.progress import Evidence

TEXT = st.text(alphabet="abc xyz\n", max_size=3000)
ENTRY = st.builds(lambda n, out: {"n": n, "agent": "a", "score": "0.50", "output": out, "markers": [],
                                  "first_line": "", "files": "", "errors": []}, st.integers(1, 99), TEXT)
VIEW = st.fixed_dictionaries({
    "window": st.lists(ENTRY, max_size=6),
    "summary": st.lists(st.text(max_size=400), max_size=30),
    "omitted": st.just(0),
    "decisions": st.lists(st.text(max_size=200), max_size=20),
    "failures": st.lists(st.fixed_dictionaries({"error": st.text(max_size=200), "count": st.integers(1, 9),
                                                "iterations": st.just([1]), "tried": st.just([])}), max_size=10),
})


def render(view: dict) -> str:
    return json.dumps(view)


def floor(view: dict) -> bool:
    """Nothing left to drop: at most one of each, the last entry's output short."""
    w = view["window"]
    return (len(w) <= 1 and (not w or len(w[0]["output"]) <= 200) and not view["summary"]
            and len(view["failures"]) <= 1 and len(view["decisions"]) <= 1)


@settings(max_examples=200, deadline=None)
@given(VIEW, st.integers(100, 3000))
def test_fit_stays_in_budget_or_keeps_only_the_floor(view, budget):
    newest = view["window"][-1]["n"] if view["window"] else None
    text = fit(view, render, budget)
    assert estimate_tokens(text) <= budget or floor(view)
    if newest is not None:
        assert view["window"][-1]["n"] == newest  # the latest iteration is the last to go
    dropped = view["omitted"]
    assert dropped >= 0 and text == render(view)



# ------------------------------------------------------------------ agent summaries (assist.py)

STEPS = st.lists(st.tuples(st.text(alphabet="ab <>/progres\n", max_size=300),
                           st.sampled_from(["written", "failed", "not asked"])), max_size=40)


@settings(max_examples=150, deadline=None)
@given(STEPS, st.integers(0, 4), st.integers(1, 6), st.integers(50, 300))
def test_every_iteration_leaving_the_window_reaches_the_summary_agent_or_the_extractive_lines(
        steps, window, every, max_summary):
    """Driven like TaskRun drives it: record an iteration, then (when due) the summary agent
    writes, fails or is not reached (a stopping run). The agent is offered the iterations that
    left the window since it was last asked, in order (the last `summarize_every` of them: the
    older ones stay as extractive lines); the saved data is the same memory; the summary stays
    under its budget."""
    memory = Memory(Settings(raw_window_size=window, max_summary_tokens=max_summary, summarize_every=every,
                             agent_summary=True))
    evidence = Evidence(0.5, {}, None, [], [], None, False)
    asked = 0  # iterations 1..asked were offered to the agent (or its failure kept them extractive)
    for n, (text, outcome) in enumerate(steps, 1):
        memory.record(n, "a", text, evidence, [])
        left = max(0, n - window)  # iterations 1..left have left the window
        assert [e["n"] for e in memory.unsummarized] == list(range(max(asked + 1, left - every + 1), left + 1))
        due = memory.summary_due(n)
        assert due == (n % every == 0 and bool(memory.unsummarized))
        if due and outcome != "not asked":
            if outcome == "written":
                memory.rewrite_summary(["- said by the agent"], n, "cheap")
                assert memory.summary_by == {"agent": "cheap", "iteration": n}
            else:
                memory.keep_extractive()
            assert memory.unsummarized == []
            asked = left
        assert estimate_tokens("\n".join(memory.summary)) <= max_summary or len(memory.summary) == 1
        again = Memory(memory.settings, json.loads(json.dumps(memory.data())))
        assert again.data() == memory.data()
