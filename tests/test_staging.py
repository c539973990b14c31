"""Context staging: priorities and the token budget (compiler/staging.py), through a build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessc.compiler import compile_project
from harnessc.compiler.staging import split_priority, stage


@pytest.mark.parametrize("entry, expected", [
    ("src/core.py (critical)", ("src/core.py", "critical")),
    ("docs/*.md  (low) ", ("docs/*.md", "low")),
    ("notes (draft).md", ("notes (draft).md", "medium")),  # not a priority: part of the path
    ("(high)", ("(high)", "medium")),
    ("plain.txt", ("plain.txt", "medium")),
])
def test_split_priority(entry, expected):
    assert split_priority(entry) == expected


def write(root: Path, files: dict[str, int]) -> None:
    for rel, chars in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x" * chars)


def test_priorities_go_in_first_a_critical_file_is_cut_others_are_left_out(tmp_path):
    write(tmp_path, {"a.md": 400, "b.md": 4000, "c.md": 800, "d.md": 40})  # 100, 1000, 200, 10 tokens
    kept, record = stage(["a.md", "b.md", "c.md", "d.md"],
                         {"a.md": "low", "b.md": "critical", "c.md": "high"}, 700, str(tmp_path))
    fate = {f["path"]: (f["kept"], f["allowed"]) for f in record["files"]}
    # critical b (1000) does not fit 700: cut to 700; nothing is left for the rest
    assert fate == {"b.md": ("cut", 700), "c.md": ("left out", 0), "d.md": ("left out", 0),
                    "a.md": ("left out", 0)}
    assert kept == ["b.md"] and record["used"] == 700
    kept, record = stage(["a.md", "b.md", "c.md", "d.md"], {"a.md": "low", "c.md": "high"}, 320, str(tmp_path))
    # high c (200), then medium b (1000: out) and d (10), then low a (100: fits 110 left)
    assert kept == ["a.md", "c.md", "d.md"] and record["used"] == 310
    assert [f["path"] for f in record["files"]] == ["a.md", "b.md", "c.md", "d.md"]  # in the order written


def test_a_build_stages_the_context_and_the_prompt_names_what_was_left_out(tmp_path):
    write(tmp_path, {"src/core.py": 12000, "docs/big.md": 20000, "docs/small.md": 8})
    (tmp_path / "roadmap.md").write_text(
        "# P\n\n## Tasks\n\n- [ ] **t1**: Use the context\n  - context: src/core.py (critical), docs/*.md (low)\n"
        "  - context_tokens: 4000\n  - completion_promise: DONE\n")
    project = compile_project(tmp_path, write_prompts=True)
    assert project.plan is not None, project.diags.items
    node = project.plan.nodes[0]
    assert list(node.context) == ["src/core.py", "docs/small.md"]
    assert node.context_staging["budget"] == 4000 and node.context_staging["used"] == 3002
    prompt = (tmp_path / ".harness" / "build" / "prompts" / "t1.md").read_text()
    assert "## Context left out" in prompt and "- docs/big.md (low, ~5000 tokens)" in prompt
    assert "### docs/big.md" not in prompt and "### src/core.py" in prompt
    # the default budget comes from harness.yaml
    (tmp_path / "harness.yaml").write_text("defaults: {context_tokens: 100000}\n")
    (tmp_path / "roadmap.md").write_text((tmp_path / "roadmap.md").read_text().replace("  - context_tokens: 4000\n", ""))
    project = compile_project(tmp_path)
    assert project.plan.nodes[0].context_staging["budget"] == 100000
    assert all(f["kept"] == "whole" for f in project.plan.nodes[0].context_staging["files"])
    assert json.loads(json.dumps(project.plan.nodes[0].context_staging))  # plain JSON in plan.json
