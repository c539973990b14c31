"""Context staging: priorities and the token budget (compiler/staging.py), through a build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessc import planfile, providers
from harnessc.compiler import build_project, compile_project
from harnessc.compiler.contextentry import split_priority
from harnessc.compiler.staging import stage


@pytest.mark.parametrize("entry, expected", [
    ("src/core.py (critical)", ("src/core.py", "critical")),
    ("docs/*.md  (low) ", ("docs/*.md", "low")),
    ("notes (draft).md", ("notes (draft).md", "medium")),  # not a priority: part of the path
    ("(high)", ("(high)", "medium")),
    ("plain.txt", ("plain.txt", "medium")),
    ("src/core.py (Critical)", ("src/core.py", "critical")),  # enum values are case-insensitive
    ("todo (draft)", ("todo (draft)", "medium")),  # a file named so; lint says when none is
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
    assert node.context_staging.budget_from == {"source": "task", "agent": None, "window": None}
    prompt = (tmp_path / ".harness" / "build" / "prompts" / "t1.md").read_text()
    assert "## Context left out" in prompt and "- docs/big.md (low, ~5000 tokens)" in prompt
    assert "### docs/big.md" not in prompt and "### src/core.py" in prompt
    # the default budget comes from harness.yaml
    (tmp_path / "harness.yaml").write_text("defaults: {context_tokens: 100000}\n")
    (tmp_path / "roadmap.md").write_text((tmp_path / "roadmap.md").read_text().replace("  - context_tokens: 4000\n", ""))
    project = compile_project(tmp_path)
    build_project(tmp_path)
    assert project.plan.nodes[0].context_staging["budget"] == 100000
    assert project.plan.nodes[0].context_staging.budget_from.source == "defaults"
    assert all(f["kept"] == "whole" for f in project.plan.nodes[0].context_staging["files"])
    # plan.json holds it as plain JSON, and reads back as the same typed record
    text = (tmp_path / ".harness" / "build" / "plan.json").read_text()
    written = json.loads(text)["nodes"][0]["context_staging"]
    assert written["budget_from"] == {"source": "defaults", "agent": None, "window": None}
    loaded = planfile.loads(text).nodes[0].context_staging
    assert isinstance(loaded.budget_from, planfile.BudgetSource) and isinstance(loaded.files[0], planfile.StagedFile)
    assert loaded == written == project.plan.nodes[0].context_staging


@pytest.mark.parametrize("provider, config, window", [
    ("anthropic", {"model": "claude-sonnet-4-6"}, 200_000),
    ("anthropic", {"model": "claude-opus-5-5"}, 1_000_000),
    ("openai", {"model": "gpt-4o-mini"}, 128_000),
    ("openai", {"model": "gpt-4.1-nano"}, 1_047_576),
    ("openai", {"model": "gpt-4-0613"}, 8_192),  # gpt-4's prefix, not gpt-4o's
    ("openai", {"model": "gpt-5.2"}, 400_000),
    ("openai", {"model": "gpt-5.1-chat-latest"}, 128_000),
    ("openai", {"model": "o1-mini"}, 128_000),
    ("openai", {"model": "openai/gpt-4o"}, 128_000),  # a gateway's vendor/model id
    ("openai", {"model": "qwen3:8b"}, None),  # a local server's name: unknown
    ("openai", {"model": "claude-sonnet-4-6"}, 200_000),  # a gateway serving another vendor's model
    ("openai", {"model": "qwen3:8b", "context_window": 32_768}, 32_768),
    ("anthropic", {"model": "claude-sonnet-4-6", "context_window": 1_000_000}, 1_000_000),
    ("claude-code", {}, 200_000),
    ("claude-code", {"model": "opus[1m]"}, 1_000_000),
    ("codex", {}, 400_000),
    ("codex", {"model": "gpt-4.1"}, 1_047_576),
    ("gemini-cli", {}, 1_048_576),
    ("gemini-cli", {"model": "gemini-2.5-flash"}, 1_048_576),
    ("gemini-cli", {"model": "my-tuned-model"}, None),
    ("command", {"command": ["x"], "model": "gpt-4o"}, None),
    ("simulate", {}, None),
    ("replay", {}, None),
])
def test_context_window_of_an_agent(provider, config, window):
    assert providers.context_window(providers.get(provider), config) == window


HARNESS = """\
agents:
  small: {provider: openai, model: gpt-4o}
  large: {provider: anthropic, model: claude-sonnet-4-6}
  local: {provider: openai, model: "qwen3:8b", base_url: "http://127.0.0.1:11434/v1", api_key_env: null}
  sized: {provider: openai, model: "qwen3:8b", base_url: "http://127.0.0.1:11434/v1", api_key_env: null,
          context_window: 400}
  sim: {provider: simulate}
routing:
  default: large
"""


def budget_of(tmp_path: Path, task: str, harness: str = HARNESS) -> tuple[int, dict, list]:
    """Build a one-task project whose context is a 100-token file: (budget, budget_from, fates)."""
    write(tmp_path, {"notes.md": 400})
    (tmp_path / "harness.yaml").write_text(harness)
    (tmp_path / "roadmap.md").write_text(
        f"# P\n\n## Tasks\n\n- [ ] **t1**: Use the context\n  - context: notes.md\n{task}"
        "  - completion_promise: DONE\n")
    plan, diags = build_project(tmp_path)
    assert plan is not None, diags.items
    staging = planfile.loads((tmp_path / ".harness" / "build" / "plan.json").read_text()).nodes[0].context_staging
    return staging.budget, dict(staging.budget_from), [(f.kept, f.allowed) for f in staging.files]


def test_the_default_budget_is_half_the_smallest_window_of_the_agent_chain(tmp_path):
    # routing.default: the anthropic agent alone
    assert budget_of(tmp_path, "")[:2] == (100_000, {"source": "window", "agent": "large", "window": 200_000})
    # a fallback to a smaller window: the smaller one counts, whichever comes first
    assert budget_of(tmp_path, "  - agent: large, small\n")[:2] == (
        64_000, {"source": "window", "agent": "small", "window": 128_000})
    assert budget_of(tmp_path, "  - agent: small, large\n")[:2] == (
        64_000, {"source": "window", "agent": "small", "window": 128_000})
    # an agent of unknown window does not count; the known one does
    assert budget_of(tmp_path, "  - agent: local, large\n")[:2] == (
        100_000, {"source": "window", "agent": "large", "window": 200_000})
    # `model:` makes an implicit agent (on the default agent's provider), whose model the table knows
    assert budget_of(tmp_path, "  - model: gpt-4.1\n", HARNESS.replace("default: large", "default: small"))[:2] == (
        523_788, {"source": "window", "agent": "openai:gpt-4.1", "window": 1_047_576})


def test_an_explicit_budget_wins_over_the_window(tmp_path):
    assert budget_of(tmp_path, "  - agent: small\n  - context_tokens: 500\n")[:2] == (
        500, {"source": "task", "agent": None, "window": None})
    # defaults.context_tokens written in harness.yaml, even at its default value
    harness = HARNESS + "defaults: {context_tokens: 32000}\n"
    assert budget_of(tmp_path, "  - agent: small\n", harness)[:2] == (
        32_000, {"source": "defaults", "agent": None, "window": None})
    assert budget_of(tmp_path, "  - agent: small\n  - context_tokens: 500\n", harness)[0] == 500


def test_no_known_window_falls_back_to_the_built_in_budget(tmp_path):
    for task in ("  - agent: local\n", "  - agent: sim\n", "  - agent: local, sim\n"):
        assert budget_of(tmp_path, task)[:2] == (32_000, {"source": "built-in", "agent": None, "window": None})
    # no harness.yaml at all: the built-in simulate agent
    assert budget_of(tmp_path, "", harness="")[:2] == (32_000, {"source": "built-in", "agent": None, "window": None})


def test_context_that_does_not_fit_even_the_window_is_staged_as_usual(tmp_path):
    # context_window: 400 -> a budget of 200 tokens; the 100-token file fits, a 1000-token one not
    assert budget_of(tmp_path, "  - agent: sized\n") == (
        200, {"source": "window", "agent": "sized", "window": 400}, [("whole", 100)])
    write(tmp_path, {"notes.md": 4000})
    (tmp_path / "roadmap.md").write_text((tmp_path / "roadmap.md").read_text().replace(
        "context: notes.md", "context: notes.md (critical)"))
    plan, _ = build_project(tmp_path)
    staging = plan.nodes[0].context_staging
    assert (staging.budget, [(f.kept, f.allowed) for f in staging.files]) == (200, [("cut", 200)])
    assert "cut to ~200 of ~1,000 tokens: the context budget" in (
        tmp_path / ".harness" / "build" / "prompts" / "t1.md").read_text()
