"""Task analysis: complexity and tier from what the task says (compiler/analysis.py)."""

from __future__ import annotations

import pytest

from harnessc.compiler.analysis import analyse, contract_size

FIELDS = {"output": {f"f{i}": {"type": "str", "rules": ["len(value) >= 1"]} for i in range(10)},
          "output_rules": ["len(f0) > 0"]}
LONG = " ".join(["words"] * 130)

CASES = [
    # (title, goal, contract, accept, fan_in, expected complexity)
    ("Fix a typo", "Rename the heading.", None, 0, 0, "trivial"),
    ("Write the loader", "Implement a CSV loader and test it.", None, 1, 0, "simple"),
    ("Summarise findings", "Analyse the survey and compare vendors.", FIELDS, 0, 1, "medium"),
    ("Design the sync protocol", "Design a distributed architecture for sync and implement it. "
     + " ".join(["words"] * 40), None, 2, 3, "complex"),
    ("Re-architect storage", "Redesign and migrate the storage architecture; research options, "
     "implement the migration, benchmark performance. " + LONG * 2, FIELDS, 3, 6, "epic"),
]


@pytest.mark.parametrize("title, goal, contract, accept, fan_in, expected", CASES, ids=[c[5] for c in CASES])
def test_scored_complexity(title, goal, contract, accept, fan_in, expected):
    a = analyse(title, goal, None, None, contract_size(contract), accept, fan_in)
    assert a.complexity == expected, a.reasons
    assert a.tier == {"trivial": "fast", "simple": "fast", "medium": "balanced", "complex": "powerful",
                      "epic": "powerful"}[expected]
    assert a.score is not None and a.reasons  # every point has its reason


def test_written_complexity_wins_and_says_so():
    a = analyse("Design the sync protocol", "Design a distributed architecture. " + LONG, None, "trivial",
                contract_size(FIELDS), 5, 5)
    assert (a.complexity, a.tier, a.score) == ("trivial", "fast", None)
    assert a.reasons == ["complexity trivial: written in the roadmap"]


def test_reasons_name_the_wording_and_sizes():
    a = analyse("Write the report", "Research and compare three vendors.", None, None, contract_size(FIELDS), 1, 2)
    assert "+1 research wording (compare, research)" in a.reasons
    assert "+1 implementation wording (write)" in a.reasons
    assert "+2 10 contract fields" in a.reasons and "+1 1 accept command" in a.reasons
    assert "+1 2 dependencies" in a.reasons


def test_contract_size_counts_nested_fields_items_and_rules():
    nested = {"output": {"a": {"type": "object", "rules": ["x"], "fields": {"b": {"type": "str"}}},
                         "c": {"type": "list", "items": {"type": "str", "rules": ["y", "z"]}}},
              "output_rules": ["w"]}
    assert contract_size(nested) == (4, 4)
    assert contract_size(None) == contract_size({"output": {}}) == (0, 0)


def test_a_build_sizes_each_contract_once_however_many_tasks_share_it(tmp_path, monkeypatch):
    """A 10k-task build walked the same few contracts once per task (~5% of its time)."""
    from harnessc.compiler import compile_project
    from harnessc.compiler import plan as planmod

    measured = []
    monkeypatch.setattr(planmod, "contract_size", lambda c: measured.append(c) or contract_size(c))
    tasks = "".join(f"- [ ] **t-{i:03d}**: Write part {i}\n  - contract: {'research_report' if i % 2 else 'code_change'}\n"
                    for i in range(20))
    (tmp_path / "roadmap.md").write_text(f"# P\n\n## Tasks\n\n{tasks}")
    project = compile_project(tmp_path)
    assert not project.diags.has_errors(), [d.message for d in project.diags.errors]
    assert len(measured) == 2
    fields = {n.contract: n.analysis.reasons for n in project.plan.nodes}
    assert any("contract field" in r for r in fields["research_report"])  # the size still counts
