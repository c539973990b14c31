"""Every scenario of tests/runtime/scenarios/ (see scenario.py): its plan run in this process in
virtual time with its agents' scripted replies, its final state checked and its event trace
compared with trace.jsonl (HARNESSC_UPDATE_GOLDEN=1 rewrites it)."""

from __future__ import annotations

import pytest
from conftest import check_golden

from . import scenario


@pytest.mark.parametrize("name", scenario.names())
def test_scenario(name, tmp_path, monkeypatch):
    case = scenario.Scenario.load(name)
    root = tmp_path / "p"
    output = scenario.run(case, root, monkeypatch)
    scenario.check_state(root, case.spec.get("expect") or {}, output)
    check_golden(case.dir / scenario.TRACE, scenario.trace(root))
