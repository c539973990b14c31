"""memory.fit: the memory section shrinks, oldest parts first, until it fits its budget."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from harnessc.estimates import estimate_tokens
from harnessc.runtime.memory import fit

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

