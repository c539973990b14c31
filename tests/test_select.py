"""Task selection (`ls -s`, `run -s`): phase selectors match whole words, never a longer number."""

from __future__ import annotations

import pytest

from harnessc.compiler.select import SelectionError, select_ids

PHASES = ["Phase 1: Foundations", "Phase 2: Report", "Phase 10: Polish", "Phase 11: Launch", "Phase 1.5: Fixes"]
TASKS = [{"id": f"t{i}", "phase": phase} for i, phase in enumerate(PHASES)] + [{"id": "loose", "phase": None}]


@pytest.mark.parametrize("selector, expected", [
    ("phase:phase-1", {"t0"}),                      # not Phase 10, 11 or 1.5 (issue 11, bug 6)
    ("phase:Phase-1", {"t0"}),
    ("phase:phase-1-foundations", {"t0"}),
    ("phase:1", {"t0"}),
    ("phase:10", {"t2"}),
    ("phase:1.5", {"t4"}),
    ("phase:phase-1.5", {"t4"}),
    ("phase:phase", {"t0", "t1", "t2", "t3", "t4"}),  # a whole leading word
    ("phase:phase-1*", {"t0", "t2", "t3", "t4"}),     # a glob is a glob
    ("phase:*report", {"t1"}),
])
def test_phase_selector(selector: str, expected: set[str]) -> None:
    assert select_ids(TASKS, [selector]) == expected


@pytest.mark.parametrize("selector", ["phase:phase-1-5", "phase:phas", "phase:foundations", "phase:3"])
def test_a_phase_selector_that_matches_nothing_says_so(selector: str) -> None:
    # not a word prefix, not the leading words, no such number: nothing, and an error says so
    with pytest.raises(SelectionError, match=f"no phase matches '{selector[6:]}'") as e:
        select_ids(TASKS, [selector])
    assert "phases: phase-1-foundations, phase-2-report, phase-10-polish" in e.value.hint


TAGGED = [{"id": "api-1", "tags": ["backend", "docs"], "phase": "Phase 1: Core"},
          {"id": "ui-1", "tags": ["frontend"], "phase": "Phase 2: Screens"}]


@pytest.mark.parametrize("selector, message, hint", [
    ("tag:nosuch", "no task has a tag matching 'nosuch'",
     "tags: backend, docs, frontend; phases: phase-1-core, phase-2-screens"),
    ("tag:backnd", "no task has a tag matching 'backnd'",
     "did you mean 'tag:backend'? tags: backend, docs, frontend; phases: phase-1-core, phase-2-screens"),
    ("tag:back*,tag:nosuch", "no task has a tag matching 'nosuch'", None),  # each part of an intersection
    ("+phase:launch", "no phase matches 'launch'", "tags: backend, docs, frontend; phases: phase-1-core, "
                                                      "phase-2-screens"),
    ("api-2", "no task matches 'api-2'", "did you mean 'api-1'? tags: backend"),
])
def test_a_selector_that_matches_nothing_names_what_there_is(selector, message, hint) -> None:
    with pytest.raises(SelectionError) as e:
        select_ids(TAGGED, [selector])
    assert str(e.value) == message
    assert hint is None or e.value.hint.startswith(hint), e.value.hint
    with pytest.raises(SelectionError):  # --exclude too: a typo there would leave in what was meant out
        select_ids(TAGGED, [], [selector])


PUT_OFF = [{"id": "a"}, {"id": "later", "tags": ["deferred"]}, {"id": "after", "depends_on": ["later"]},
           {"id": "then", "depends_on": ["after", "a"]},
           {"id": "old", "tags": ["deferred"], "done": True}, {"id": "next", "depends_on": ["old"]},
           {"id": "wrap", "depends_on": ["later"], "done": True}, {"id": "on", "depends_on": ["wrap"]}]


def test_deferred_work_and_what_waits_for_it_are_chosen_only_when_selected() -> None:
    # a checked task is complete whatever it depends on: what waits for it is chosen
    assert select_ids(PUT_OFF, []) == {"a", "old", "next", "wrap", "on"}
    assert select_ids(PUT_OFF, [], ["a"]) == {"old", "next", "wrap", "on"}
    assert select_ids(PUT_OFF, ["tag:deferred"]) == {"later", "old"}
    assert select_ids(PUT_OFF, ["tag:deferred+"]) == {"later", "after", "then", "old", "next", "wrap", "on"}
    assert select_ids(PUT_OFF, ["then"]) == {"then"}
    assert select_ids(TAGGED, []) == {"api-1", "ui-1"}  # no deferred tag: every task
