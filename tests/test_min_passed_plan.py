"""min_passed and junit from the specs to plan.json: resolved into each accept entry (the
entry's own, else the task's, else the contract's; 0 asks for nothing), and plan.json as
before where they are absent."""

from __future__ import annotations

import json
from pathlib import Path

from harnessc.compiler import build_project
from harnessc.planfile import AcceptCommand, CountedAccept, load_contract

ROADMAP = """\
## Tasks

- [ ] **plain**: No count
  - accept: pytest -q
- [ ] **own**: Its own
  - accept: pytest -q
  - min_passed: base
- [ ] **contract**: From its contract
  - contract: tested
- [ ] **over**: Its own over the contract's
  - contract: tested
  - min_passed: 7
"""
CONTRACTS = """\
contracts:
  tested:
    min_passed: 3
    accept:
      - {run: pytest -q --junitxml=build/j.xml, junit: build/j.xml}
      - {run: ruff check ., min_passed: 0}
      - {run: python -m unittest, min_passed: base}
"""


def accepts(tmp_path: Path) -> dict:
    (tmp_path / "roadmap.md").write_text(ROADMAP)
    (tmp_path / "contracts.yaml").write_text(CONTRACTS)
    plan, diags = build_project(tmp_path)
    assert plan is not None and not diags.has_errors(), diags.sorted()
    text = (tmp_path / ".harness" / "build" / "plan.json").read_text()
    data = json.loads(text)
    return {n["id"]: [(a.get("min_passed"), a.get("junit")) for a in n["accept"]] for n in data["nodes"]} | {
        "@contract": [(a.get("min_passed"), a.get("junit")) for a in data["contracts"]["tested"]["accept"]],
        "@keys": [sorted(a) for a in data["nodes"][0]["accept"]]}


def test_min_passed_is_resolved_into_each_accept_entry(tmp_path: Path) -> None:
    got = accepts(tmp_path)
    assert got["plain"] == [(None, None)]
    assert got["@keys"] == [["argv", "id", "timeout"]]  # no new keys where nothing is counted
    assert got["own"] == [("base", None)]
    assert got["contract"] == got["@contract"] == [(3, "build/j.xml"), (None, None), ("base", None)]
    assert got["over"] == [(7, "build/j.xml"), (None, None), ("base", None)]


def test_plan_entries_read_back_as_the_records_they_were() -> None:
    counted = {"id": "a", "argv": ["pytest"], "timeout": None, "min_passed": "base", "junit": "j.xml"}
    entry = load_contract({"name": "c", "accept": [counted, {"id": "b", "argv": ["ruff"], "timeout": None}],
                           "on_failure": "retry", "max_retries": 1})
    a, b = entry.accept
    assert type(a) is CountedAccept and dict(a) == counted
    assert type(b) is AcceptCommand and b.min_passed is None and b.junit is None
