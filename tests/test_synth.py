"""The value synthesizer (compiler/synth.py) and the simulate agent that answers with it.

Every synthesized value is checked here with validate.py, the validator the runtime applies.
"""

from __future__ import annotations

import asyncio
import json
import copy
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from harnessc.compiler.contract_schema import contract_plan_entry, load_builtin_contracts
from harnessc.compiler.ir import Contract
from harnessc.providers import agent_config
from harnessc.compiler.rules.regexgen import RegexTooHard, generate
from harnessc.compiler.synth import synthesize, synthesize_output
from harnessc.compiler.validate import deliverable_errors, extract_json, template_output, validate_output
from harnessc.planfile import load_contract
from harnessc.runtime.agents.base import Request
from harnessc.runtime.agents.simulate import SimulateAgent

BUILTINS = {n: contract_plan_entry(n, c) for n, c in load_builtin_contracts().items()}
WITH_OUTPUT = sorted(n for n, e in BUILTINS.items() if e["output"])


def entry(spec: dict) -> dict:
    return contract_plan_entry("t", Contract.model_validate(spec))


def without_examples(d: dict) -> dict:
    """A deliverable (or contract entry) with every example and default removed, recursively."""
    d = {k: v for k, v in d.items() if k not in ("example", "default")}
    if isinstance(d.get("fields"), dict):
        d["fields"] = {k: without_examples(v) for k, v in d["fields"].items()}
    if isinstance(d.get("items"), dict):
        d["items"] = without_examples(d["items"])
    if isinstance(d.get("output"), dict):
        d["output"] = {k: without_examples(v) for k, v in d["output"].items()}
    return d


def simulate(contract: dict) -> dict:
    """The JSON the simulate agent answers for a task under `contract`."""
    agent = SimulateAgent("rehearsal", agent_config("rehearsal", {"provider": "simulate"}), Path("."))
    request = Request(task_id="t1", prompt="do it", contract=load_contract(contract))
    response = asyncio.run(agent.call(request))
    data, why = extract_json(response.text)
    assert why is None, why
    return data


# ------------------------------------------------------------------ the built-in templates


@pytest.mark.parametrize("name", WITH_OUTPUT)
def test_simulate_answers_each_builtin_template_validly(name):
    contract = BUILTINS[name]
    assert validate_output(contract, simulate(contract)) == []


@pytest.mark.parametrize("name", WITH_OUTPUT)
def test_simulate_satisfies_builtin_rules_without_any_example(name):
    """The examples are not what makes it pass: with none left, the rules alone suffice."""
    contract = without_examples(BUILTINS[name])
    assert "example" not in str(contract["output"])
    out = simulate(contract)
    assert validate_output(contract, out) == []
    # template_output is what simulate answered before: it breaks these rules
    if name in ("research_report", "appointment_booking", "market_analysis"):
        assert validate_output(contract, template_output(contract)) != []


def test_valid_examples_and_defaults_win():
    c = entry({"output": {
        "a": {"type": "int", "rules": ["value >= 10"], "example": 42, "default": 11},
        "b": {"type": "str", "rules": ["len(value) >= 3"], "default": "dflt"},
        "c": {"type": "str", "enum": ["x", "y"], "rules": ["value != 'x'"]},
    }})
    synth = synthesize_output(c)
    assert synth.value == {"a": 42, "b": "dflt", "c": "y"}
    assert synth.unsatisfied == []


def test_an_invalid_example_is_replaced_by_a_synthesized_value():
    d = {"type": "int", "rules": ["value >= 10"], "example": 3}
    synth = synthesize(d)
    assert synth.value >= 10 and synth.unsatisfied == []


# ------------------------------------------------------------------ rule shapes


@pytest.mark.parametrize("typ, rules", [
    ("str", ["matches(value, '^[A-Z]{2,3}-\\\\d{4}$')"]),
    ("str", ["matches(value, '^(foo|bar)_[a-z0-9]+\\\\.json$')", "len(value) >= 20"]),
    ("str", ["matches(value, '[^a-z]{3}')"]),
    ("str", ["is_email(value)", "len(value) >= 40"]),
    ("str", ["is_url(value)", "endswith(value, '.html')"]),
    ("str", ["is_datetime(value)"]),
    ("str", ["startswith(value, 'PR-')", "endswith(value, '!')", "len(value) == 12"]),
    ("str", ["value in ['low', 'high']", "value != 'low'"]),
    ("str", ["len(value) > 0 and len(value) < 5"]),
    ("str", ["value not in ['Simulated value']"]),
    ("int", ["0 < value < 3"]),
    ("int", ["value > 5", "value <= 6.5"]),
    ("int", ["-10 <= value", "value < -3"]),
    ("int", ["value in [7, 9]", "value != 7"]),
    ("float", ["value > 0.25", "value < 0.5"]),
    ("float", ["value >= 1e6"]),
    ("bool", ["value == true"]),
    ("list", ["len(value) >= 3", "unique(value)"]),
])
def test_rule_shapes_are_synthesized(typ, rules):
    d = {"type": typ, "rules": rules}
    if typ == "list":
        d["items"] = {"type": "int", "rules": ["value >= 0", "value <= 10"]}
    synth = synthesize(d)
    assert synth.unsatisfied == []
    assert deliverable_errors(d, synth.value) == []


def test_nested_fields_and_items():
    d = {"type": "list", "rules": ["len(value) >= 2", "unique(value)"], "items": {
        "type": "dict", "fields": {
            "who": {"type": "str", "rules": ["is_email(value)"]},
            "tags": {"type": "list", "items": "str", "rules": ["len(value) == 2", "unique(value)"]},
            "score": {"type": "float", "rules": ["value >= 0.5", "value <= 1"]},
            "note": {"type": "str", "required": False},
        }}}
    synth = synthesize(d)
    assert synth.unsatisfied == []
    assert deliverable_errors(d, synth.value) == []
    assert all("note" not in item for item in synth.value)


def test_what_cannot_be_satisfied_is_reported_not_hidden():
    c = entry({
        "output": {
            "odd": {"type": "int", "rules": ["value >= 10", "value % 5 == 3"]},
            "span": {"type": "dict", "fields": {"a": {"type": "int"}, "b": {"type": "int"}},
                     "rules": ["value.a < value.b"]},
            "fine": {"type": "str", "rules": ["len(value) >= 5"]},
        },
    })
    synth = synthesize_output(c)
    assert [(u.loc, u.index, u.rule) for u in synth.unsatisfied] == [
        (("odd",), 1, "value % 5 == 3"), (("span",), 0, "value.a < value.b"),
    ]
    # the answer is still a best effort that the validator rejects for exactly those rules
    assert {e["rule"] for e in validate_output(c, synth.value)} == {"value % 5 == 3", "value.a < value.b"}


def test_a_list_longer_than_the_cap_is_reported():
    d = {"type": "list", "items": "int", "rules": ["len(value) >= 500"]}
    synth = synthesize(d)
    assert len(synth.value) == 200
    assert [u.rule for u in synth.unsatisfied] == ["len(value) >= 500"]


def test_whole_output_rules_are_checked():
    c = entry({"output": {"n": {"type": "int"}}, "output_rules": ["output.n == 4"]})
    assert [u.rule for u in synthesize_output(c).unsatisfied] == ["output.n == 4"]
    ok = entry({"output": {"n": {"type": "int", "rules": ["value >= 4"]}}, "output_rules": ["output.n >= 4"]})
    assert synthesize_output(ok).unsatisfied == []


def test_synthesis_does_not_share_state_with_the_contract():
    c = BUILTINS["research_report"]
    before = copy.deepcopy(c)
    synthesize_output(c).value["findings"].append("mutated")
    assert c == before


def test_regex_generator_refuses_what_it_cannot_write():
    with pytest.raises(RegexTooHard):
        generate("(?=abc)abc")
    assert generate("ab+c", extra=2) == "abbbc"


# ------------------------------------------------------------------ random satisfiable bounds

_num = st.integers(-1000, 1000)


@st.composite
def numeric_deliverable(draw):
    typ = draw(st.sampled_from(["int", "float"]))
    lo = draw(_num)
    width = draw(st.integers(2, 500))  # >= 2: strict bounds on both sides still leave an int
    hi = lo + width
    rules = []
    for bound, ops in ((lo, (">=", ">")), (hi, ("<=", "<"))):
        if draw(st.booleans()):
            op = draw(st.sampled_from(ops))
            rules.append(draw(st.sampled_from([f"value {op} {bound}", f"{bound} {_flip(op)} value"])))
    if draw(st.booleans()):  # a looser, redundant bound too
        rules.append(f"value >= {lo - draw(st.integers(0, 50))}")
    if draw(st.booleans()) and rules:
        rules = [" and ".join(rules)]
    return {"type": typ, "rules": rules}


def _flip(op: str) -> str:
    return {">=": "<=", ">": "<", "<=": ">=", "<": ">"}[op]


@st.composite
def sized_deliverable(draw):
    typ = draw(st.sampled_from(["str", "list"]))
    lo = draw(st.integers(0, 300 if typ == "str" else 150))  # lists: below the 200-item cap
    hi = lo + draw(st.integers(0, 100))
    rules = []
    if draw(st.booleans()):
        rules.append(draw(st.sampled_from([f"len(value) >= {lo}", f"len(value) > {lo - 1}"])))
    if draw(st.booleans()):
        rules.append(draw(st.sampled_from([f"len(value) <= {hi}", f"len(value) < {hi + 1}"])))
    if draw(st.booleans()):
        rules, hi = [f"len(value) == {lo}"], lo
    d = {"type": typ, "rules": rules}
    if typ == "str" and draw(st.booleans()) and hi >= 8:
        d["rules"] = rules + ["startswith(value, 'ab')", "endswith(value, 'yz')"]
    if typ == "list":
        d["items"] = draw(st.sampled_from(["str", "int", {"type": "int", "rules": ["value >= 1"]}]))
        if draw(st.booleans()):
            d["rules"] = d["rules"] + ["unique(value)"]
    return d


@settings(max_examples=150, deadline=None)
@given(st.one_of(numeric_deliverable(), sized_deliverable()))
def test_random_satisfiable_bounds_are_synthesized(d):
    synth = synthesize(d)
    assert synth.unsatisfied == []
    assert deliverable_errors(d, synth.value) == []


# ------------------------------------------------------------------ a real rehearsal


def test_a_real_run_rehearses_contracts_without_examples(tmp_path):
    """The five templates with every example stripped, and the demo's: lint is quiet about
    them (no HC306) and `harnessc run` on the built-in rehearsal agent succeeds."""
    import yaml

    from conftest import REPO
    from inproc import harnessc

    builtin = yaml.safe_load((REPO / "harnessc" / "compiler" / "builtin_contracts.yaml").read_text())
    demo = yaml.safe_load((REPO / "specs" / "demo" / "contracts.yaml").read_text())
    contracts = {}
    for name in WITH_OUTPUT:
        contracts[f"bare_{name}"] = without_examples(builtin["contracts"][name])
    for name, c in demo["contracts"].items():
        c = without_examples(c)
        c["extends"] = f"bare_{c['extends']}" if "extends" in c else None
        contracts[f"bare_{name}"] = {k: v for k, v in c.items() if v is not None}
    (tmp_path / "contracts.yaml").write_text(yaml.safe_dump({"contracts": contracts}), encoding="utf-8")
    tasks = "".join(f"- [ ] **t{i}**: Rehearse {n}\n  - contract: {n}\n" for i, n in enumerate(contracts))
    (tmp_path / "roadmap.md").write_text(f"# Rehearsal\n\n## Tasks\n\n{tasks}", encoding="utf-8")
    assert "example" not in (tmp_path / "contracts.yaml").read_text()

    def cli(*args):
        return harnessc("-C", str(tmp_path), *args, cwd=REPO)

    lint = cli("lint")
    assert lint.returncode == 0 and "HC306" not in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    run = cli("run")
    assert run.returncode == 0, run.stdout + run.stderr
    status = json.loads(cli("status", "--json").stdout)
    states = {t["id"]: t["state"] for t in status["tasks"]}
    assert states == {f"t{i}": "succeeded" for i in range(len(contracts))}
