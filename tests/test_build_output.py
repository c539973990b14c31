"""Build output: plan.json as json.dumps(indent=2, ensure_ascii=False) writes it, prompts/ updated, argv as shlex splits."""

from __future__ import annotations

import enum
import json
import math
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings, strategies as st

from conftest import REPO
from harnessc.compiler import build_project, compile_project, write_build
from harnessc.argv import split_command
from harnessc.compiler.planjson import plan_json
from harnessc.estimates import estimate_tokens
from harnessc.providers import agent_config
from harnessc.runtime.agents.base import Usage, price_cost

# What plans hold: JSON data with string keys and 64-bit integers (floats are left to the
# read-back test: orjson may write 6.103515625e-05 where json writes 0.00006103515625).
plain_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
)
plain_values = st.recursive(
    plain_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)),
    max_leaves=40,
)
# Anything else json.dumps(default=str) accepts: odd keys, huge integers, NaN, lone surrogates, tuples.
odd_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
keys = st.one_of(st.text(max_size=8), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
odd_values = st.recursive(
    odd_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(keys, inner, max_size=5),
        st.tuples(inner, inner),
    ),
    max_leaves=40,
)


def without_nan(value):
    """NaN and Infinity as null, as plan.json writes them (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [without_nan(v) for v in value]
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    return value


def plain(value):
    """A plan as plain JSON data (plan nodes are mappings, not dicts)."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, Sequence)) and not isinstance(value, str):
        return [plain(v) for v in value]
    return value


class Color(str, enum.Enum):
    RED = "red"


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), plain_values, max_size=6))
def test_same_text_as_json_dumps(plan):
    assert plan_json(plan) == json.dumps(plan, indent=2, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), odd_values, max_size=6))
def test_odd_plans_read_back_as_json_would(plan):
    expected = without_nan(json.loads(json.dumps(plan, default=str)))
    assert json.loads(plan_json(plan)) == expected


def test_odd_values():
    value = {
        "a": [Color.RED, {"x": Color.RED}, (1, 2), [], {}, [[]], {"k": {}}],
        "b": {1: [1], None: {"n": None}, 2.5: [], True: "t"},
        "c": [math.inf, -math.inf, math.nan, 1e300, -0.0, 2**70],
        "e": {"path": PurePosixPath("a/b")},  # default=str
        "f": "é\u2028\"\\\n\t\x00\udfff",
        "g": [],
        "h": [2**70, "\udfff", {1: 2}],
    }
    text = plan_json(value)
    assert json.loads(text) == without_nan(json.loads(json.dumps(value, default=str)))
    assert plan_json({}) == "{}"


def test_rebuild_replaces_prompts_and_plan(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))
    project = compile_project(root)
    assert project.plan is not None
    out = write_build(project)
    assert (out / "plan.json").read_text("utf-8") == json.dumps(plain(project.plan), indent=2, ensure_ascii=False) + "\n"
    names = {f"{tid}.md" for tid in project.prompts} | {"_system.md"}
    assert {p.name for p in (out / "prompts").iterdir()} == names
    (out / "prompts" / "stale.md").write_text("from an older build")
    (out / "prompts" / "notes.txt").write_text("not ours")
    gone, changed, same = list(project.prompts)[:3]
    del project.prompts[gone]
    project.prompts[changed] += "more\n"
    inode = {tid: (out / "prompts" / f"{tid}.md").stat().st_ino for tid in (changed, same)}
    write_build(project)
    assert {p.name for p in (out / "prompts").iterdir()} == names - {f"{gone}.md"} | {"notes.txt"}
    assert sorted(p.name for p in out.iterdir()) == ["plan.json", "prompts"]  # no temporary left
    for tid, text in project.prompts.items():
        assert (out / "prompts" / f"{tid}.md").read_text("utf-8") == text
    assert (out / "prompts" / f"{same}.md").stat().st_ino == inode[same]  # unchanged: not rewritten
    assert (out / "prompts" / f"{changed}.md").stat().st_ino != inode[changed]  # replaced whole


def test_build_writes_prompts_as_it_renders_them(tmp_path: Path) -> None:
    """build_project (what `harnessc build` does) keeps no prompt text in memory; a rebuild
    after a task is removed drops its prompt and leaves the unchanged ones alone."""
    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))
    in_memory = compile_project(root)
    project = compile_project(root, write_prompts=True)
    assert project.prompts == {}
    assert [n["prompt"] for n in project.plan["nodes"]] == [n["prompt"] for n in in_memory.plan["nodes"]]
    out = write_build(project)
    for tid, text in in_memory.prompts.items():
        assert (out / "prompts" / f"{tid}.md").read_text("utf-8") == text
    assert json.loads((out / "plan.json").read_text("utf-8")) == plain(in_memory.plan)
    roadmap = (root / "roadmap.md").read_text("utf-8")
    last = in_memory.plan["nodes"][-1]["id"]
    inode = (out / "prompts" / "setup-001.md").stat().st_ino
    (root / "roadmap.md").write_text(roadmap[: roadmap.index(f"- [ ] **{last}**")], "utf-8")
    plan, diags = build_project(root)
    assert plan is not None, diags.items
    assert not (out / "prompts" / f"{last}.md").exists()
    assert (out / "prompts" / "setup-001.md").stat().st_ino == inode


def test_plan_estimates_use_the_runtime_token_rule(tmp_path: Path) -> None:
    """plan.json's estimates count a prompt's tokens and price them as the runtime does
    (one rule, harnessc/estimates.py), so budgets reserve what the plan announced."""
    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))
    project = compile_project(root)
    plan = plain(project.plan)
    assert project.system_prompt and plan["nodes"]
    for node in plan["nodes"]:
        est = node["estimate"]
        assert est["input_tokens"] == estimate_tokens(project.system_prompt + project.prompts[node["id"]])
        usage = Usage(est["input_tokens"], est["output_tokens"])
        agent = node["routing"]["agent"]
        assert est["cost_usd"] == round(price_cost(agent_config(agent, plan["agents"][agent]), usage), 6)


def test_token_rule_is_about_four_characters_per_token() -> None:
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "x" * 41)] == [0, 1, 1, 10]


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab -=/.#$*~é\t\r\n\x0b\x0c\xa0\u2028'\"\\")), max_size=20))
def test_split_command_is_shlex_split(cmd):
    try:
        expected = shlex.split(cmd)
    except ValueError:
        with pytest.raises(ValueError):
            split_command(cmd)
        return
    assert split_command(cmd) == expected
    assert split_command(expected) == expected  # an argv list is taken as written


def test_split_command_takes_an_argv_list_as_written():
    assert split_command(["echo", "a b", 3]) == ["echo", "a b", "3"]
    assert split_command(("true",)) == ["true"]
