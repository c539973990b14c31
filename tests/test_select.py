"""Task selection (`ls -s`, `run -s`): phase selectors match whole words, never a longer number."""

from __future__ import annotations

import pytest

from harnessc.compiler.select import select_ids

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
    ("phase:phase-1-5", set()),
    ("phase:phase", {"t0", "t1", "t2", "t3", "t4"}),  # a whole leading word
    ("phase:phase-1*", {"t0", "t2", "t3", "t4"}),     # a glob is a glob
    ("phase:*report", {"t1"}),
    ("phase:phas", set()),                            # not a word prefix
    ("phase:foundations", set()),
    ("phase:3", set()),
])
def test_phase_selector(selector: str, expected: set[str]) -> None:
    assert select_ids(TASKS, [selector]) == expected
