"""Golden files for what the runtime hands the agent after a failed claim, and for fallbacks.

HARNESSC_UPDATE_GOLDEN=1 rewrites them.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from harnessc.runtime import plan as planmod
from harnessc.runtime.verify import verify

from .helpers import SIMPLE_CONTRACT, node, write_project

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("HARNESSC_UPDATE_GOLDEN") == "1"


def check(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing; run with HARNESSC_UPDATE_GOLDEN=1"
    assert actual == path.read_text(encoding="utf-8"), f"{path} differs (HARNESSC_UPDATE_GOLDEN=1 to accept)"


@pytest.fixture
def project(tmp_path):
    plan = write_project(tmp_path, [node("sum-001", title="Summarise the notes", contract="summary",
                                         completion_promise="DONE")],
                         contracts={"summary": SIMPLE_CONTRACT})
    return tmp_path, plan


BAD_ANSWER = 'Here you go:\n```json\n{"title": "", "score": -2, "extra": 1}\n```\n<promise>DONE</promise>\n'


@pytest.mark.parametrize("level", [1, 2, 3])
def test_refinement_prompts(project, level):
    root, plan = project
    n = plan["nodes"][0]
    verdict = asyncio.run(verify(n, plan["contracts"]["summary"], BAD_ANSWER, root, None))
    assert verdict.claim and not verdict.ok and verdict.errors
    base = planmod.render_prompt(plan, "sum-001", {}, root)
    text = planmod.render_refinement(plan, "sum-001", base, level, verdict.errors, BAD_ANSWER, root)
    check(f"refine_level{level}.md", text)


def test_missing_json_error_is_clear(project):
    root, plan = project
    n = plan["nodes"][0]
    verdict = asyncio.run(verify(n, plan["contracts"]["summary"], "all done <promise>DONE</promise>", root, None))
    assert verdict.claim and any("no JSON object found" in e for e in verdict.errors)


def test_fallback_outputs(project):
    _, plan = project
    contract = plan["contracts"]["summary"]
    out = {
        "template": planmod.template_filled(contract),
        "partial_from_bad": planmod.partial_output(contract, {"title": "kept", "score": -2}),
        "partial_from_nothing": planmod.partial_output(contract, None),
    }
    for output, _filled in out.values():
        assert planmod.validate_output(contract, output) == []
    assert out["template"][0] == planmod.template_output(contract)
    check("fallback_outputs.json", json.dumps({k: {"output": o, "filled": f} for k, (o, f) in out.items()},
                                              indent=2, sort_keys=True) + "\n")


def test_a_degraded_dependency_is_marked_unverified_in_the_prompt(tmp_path):
    plan = write_project(tmp_path, [node("list-001", title="List the items", contract="summary"),
                                    node("use-001", title="Use the items", depends_on=["list-001", "ok-001"]),
                                    node("ok-001", title="A verified result")],
                         contracts={"summary": SIMPLE_CONTRACT})
    deps = {"list-001": {"state": "degraded", "output": {"title": "", "score": 0},
                         "error": "degraded (template): 3 attempts failed verification; last: $.title: ''"
                                  " is shorter than 1 character"},
            "ok-001": {"state": "succeeded", "output": {"title": "fine", "score": 2}, "error": None}}
    check("prompt_after_degraded.md", planmod.render_prompt(plan, "use-001", deps, tmp_path))
