"""Prompt caching: shared text first in every prompt, anthropic `cache_control` breakpoints at
the ends of the shared parts, openai `prompt_cache_key`, 1-hour writes priced as billed, and
the cache's share and savings in the run summary and `stats`. Real SDKs against the
in-process fake server (tests/runtime/fakeapi.py); keys are fake."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("anthropic")
pytest.importorskip("openai")

import inproc  # noqa: E402
from harnessc.compiler import compile_project  # noqa: E402
from harnessc.compiler.prompts import render_prompt_parts  # noqa: E402
from harnessc.providers import agent_config  # noqa: E402
from harnessc.runtime.agents.base import Request, Response, make_agent  # noqa: E402
from .fakeapi import FakeAPI, Reply, ThreadedFakeAPI  # noqa: E402
from .helpers import env as cli_env  # noqa: E402

KEYS = {"ANTHROPIC_API_KEY": "test-anthropic-key-0000", "OPENAI_API_KEY": "test-openai-key-0000"}
SYSTEM = "You are careful."


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch):
    for var in list(os.environ):
        if var.startswith(("ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(var)
    for var, value in KEYS.items():
        monkeypatch.setenv(var, value)


def send(provider: str, requests: list[Request], config: dict | None = None,
         replies: list[Reply] = ()) -> tuple[list, FakeAPI]:
    """Each request through one agent of `provider` against a fresh fake server."""
    async def go():
        api = FakeAPI()
        base = await api.start()
        api.push(*replies)
        cfg = {"provider": provider, "model": "claude-sonnet-4-6",
               "base_url": base if provider == "anthropic" else base + "/v1", **(config or {})}
        agent = make_agent("a1", agent_config("a1", cfg), Path("."))
        try:
            return [await agent.call(r) for r in requests], api
        finally:
            await api.close()

    return asyncio.run(go())


def request(parts: list[str], task: str = "t1", system: str = SYSTEM) -> Request:
    """A request whose prompt is `parts` joined, all but the last part shared."""
    ends, at = [], 0
    for p in parts[:-1]:
        at += len(p)
        ends.append(at)
    return Request(task_id=task, prompt="".join(parts), system=system, timeout=10.0, cache_breaks=tuple(ends))


OVERVIEW = "# Project\n\n" + "The overview every task shares. " * 300 + "\n\n"  # ~2,400 tokens
CONTEXT = "## Context files\n\n" + "shared context line\n" * 300  # ~1,500 tokens
FORMAT = "## Required Output Format\n\nA JSON object.\n\n"


@pytest.mark.parametrize("ttl, control", [(None, {"type": "ephemeral"}),
                                          ("1h", {"type": "ephemeral", "ttl": "1h"})])
def test_anthropic_breakpoints_end_each_shared_part(ttl, control) -> None:
    parts = [OVERVIEW, CONTEXT, FORMAT, "# Task t1: its own text\n"]
    _, api = send("anthropic", [request(parts)], {"cache_ttl": ttl} if ttl else {})
    body = api.requests[0].body
    blocks = body["messages"][0]["content"]
    assert [b["text"] for b in blocks] == parts  # the prompt, cut where the shared parts end
    assert [b.get("cache_control") for b in blocks] == [control, control, control, None]
    assert "cache_control" not in body["system"][0]  # 4 tokens: under the minimum on its own


def test_anthropic_no_breakpoint_where_the_prefix_is_under_the_models_minimum() -> None:
    parts = [OVERVIEW, "# Task t1\n"]  # ~2,400 tokens: enough for Sonnet 4.6 (2,048), not for Haiku 4.5 (4,096)
    _, api = send("anthropic", [request(parts)], {"model": "claude-haiku-4-5-20251001"})
    assert api.requests[0].body["messages"] == [{"role": "user", "content": "".join(parts)}]
    _, api = send("anthropic", [request(["# Project\n\nshort\n\n", "# Task t1\n"])])
    assert api.requests[0].body["messages"][0]["content"] == "# Project\n\nshort\n\n# Task t1\n"


def test_anthropic_at_most_four_breakpoints_the_longest_prefixes_kept() -> None:
    long_system = "Be careful. " * 800  # ~2,400 tokens: cacheable by itself
    parts = [OVERVIEW, CONTEXT, CONTEXT, CONTEXT, FORMAT, "# Task t1\n"]
    _, api = send("anthropic", [request(parts, system=long_system)])
    body = api.requests[0].body
    blocks = body["messages"][0]["content"]
    marked = [b for b in blocks if "cache_control" in b]
    assert "".join(b["text"] for b in blocks) == "".join(parts)
    assert len(marked) == 4 and "cache_control" not in body["system"][0]
    assert "cache_control" not in blocks[-1] and blocks[-1]["text"] == "# Task t1\n"


def test_openai_prompt_cache_key_is_shared_by_requests_with_the_same_prefix() -> None:
    one, two = request([OVERVIEW, "# Task t1\n"], "t1"), request([OVERVIEW, "# Task t2\n"], "t2")
    other = request([OVERVIEW + "another project's overview\n", "# Task t3\n"], "t3")
    for api_kind in ("chat", "responses"):
        _, api = send("openai", [one, two, other], {"model": "gpt-5.2", "api": api_kind})
        keys = [r.body.get("prompt_cache_key") for r in api.requests]
        assert keys[0] and keys[0] == keys[1] and keys[2] != keys[0], api_kind
    _, api = send("openai", [one], {"model": "qwen3:8b", "api_key_env": None})  # a keyless local server
    assert "prompt_cache_key" not in api.requests[0].body


@pytest.mark.parametrize("price, expected", [
    ({"input": 3.0, "output": 15.0}, (100 * 3 + 400 * 3.75 + 600 * 6 + 1000 * 0.3) / 1e6),
    ({"input": 3.0, "output": 15.0, "cache_write_1h": 5.0}, (100 * 3 + 400 * 3.75 + 600 * 5 + 1000 * 0.3) / 1e6),
])
def test_one_hour_cache_writes_are_priced_as_billed(price, expected) -> None:
    reply = Reply.ok('{"title": "Q3"}', usage={"input": 100, "output": 0, "cache_write": 1000,
                                               "cache_write_1h": 600, "cache_read": 1000})
    (out,), _ = send("anthropic", [request(["x", "y"])], {"price": price, "cache_ttl": "1h"}, [reply])
    assert isinstance(out, Response)
    assert out.usage.cache_write_tokens == 1000 and out.usage.cache_write_1h_tokens == 600
    assert out.cost_usd == pytest.approx(expected)


# ---------------------------------------------------------------- the prompts' order


NOTE_CONTRACTS = textwrap.dedent("""\
    contracts:
      note:
        description: A note
        output:
          title: {type: str, description: The note's title, example: hello}
    """)


def write_spec(root: Path, agents: str, tasks: int = 3, overview: str = "", concurrency: int = 4) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "shared.md").write_text("The guide every task reads.\n" * 200, encoding="utf-8")
    (root / "docs" / "a.md").write_text("A's notes\n", encoding="utf-8")
    (root / "docs" / "z.md").write_text("Z's notes\n", encoding="utf-8")
    (root / "docs" / "own.md").write_text("only t0 reads this\n", encoding="utf-8")
    lines = [f"# Cached\n\n{overview}\n\n## Tasks\n"]
    for i in range(tasks):
        context = "docs/z.md, docs/shared.md, docs/a.md (high)" + (", docs/own.md" if i == 0 else "")
        lines.append(f"- [ ] **t{i}**: Task number {i}\n  - contract: note\n  - context: {context}\n\n"
                     f"  Goal: Write note {i}.\n")
    (root / "roadmap.md").write_text("\n".join(lines), encoding="utf-8")
    (root / "contracts.yaml").write_text(NOTE_CONTRACTS, encoding="utf-8")
    (root / "harness.yaml").write_text(f"agents:\n{agents}\nconcurrency: {concurrency}\n", encoding="utf-8")


def test_shared_parts_come_first_and_the_tasks_own_text_last(tmp_path) -> None:
    write_spec(tmp_path, "  sim: {provider: simulate}", overview="The project in a few words.")
    project = compile_project(tmp_path)
    assert project.plan is not None, project.diags.items
    p0, p1 = (render_prompt_parts(project.plan, t, None, tmp_path) for t in ("t0", "t1"))
    assert p0[:-1] == p1[:-1] and len(p0) == 4  # overview, shared context, format: byte-identical
    overview, context, fmt, tail = p0
    assert overview.startswith("# Project") and fmt.startswith("## Required Output Format")
    # shared context by priority (a.md is high), then path; t0's own file is in its tail
    assert [context.index(f"### docs/{n}") for n in ("a.md", "shared.md", "z.md")] == sorted(
        context.index(f"### docs/{n}") for n in ("a.md", "shared.md", "z.md"))
    assert context.index("### docs/a.md") < context.index("### docs/shared.md")
    assert "docs/own.md" not in context and "### docs/own.md" in tail and "docs/own.md" not in p1[-1]
    assert tail.startswith("# Task t0: Task number 0") and "t0" not in "".join(p0[:-1])
    assert "".join(p0) == project.prompts["t0"]


# ---------------------------------------------------------------- a run, end to end


def test_a_run_caches_the_shared_prefix_and_reports_the_share_and_savings(tmp_path) -> None:
    with ThreadedFakeAPI() as api:
        # the first call writes the cache, the others read it (as the API reports it)
        api.push(Reply.ok('{"title": "n0"}', usage={"input": 50, "output": 10, "cache_write": 2000}),
                 *(Reply.ok(f'{{"title": "n{i}"}}', usage={"input": 50, "output": 10, "cache_read": 3000})
                   for i in (1, 2)))
        agent = (f"  claude: {{provider: anthropic, model: claude-sonnet-4-6, base_url: '{api.base_url}',"
                 " price: {input: 3.0, output: 15.0}}")
        write_spec(tmp_path, agent, overview="The overview every task shares. " * 300, concurrency=1)
        e = {k: v for k, v in cli_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        e.update(KEYS)
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e)  # the real clock: the server is a thread
        bodies = [q.body for q in api.requests]
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(bodies) == 3
    cached = []
    for body in bodies:
        blocks = body["messages"][0]["content"]
        marked = [i for i, b in enumerate(blocks) if "cache_control" in b]
        assert 1 <= len(marked) <= 4 and "cache_control" not in blocks[-1]
        cached.append("".join(b["text"] for b in blocks[:marked[-1] + 1]))
        task = blocks[-1]["text"].split(":")[0]
        prompt = (tmp_path / ".harness/build/prompts" / f"{task.removeprefix('# Task ')}.md").read_text()
        assert "".join(b["text"] for b in blocks) == prompt
    assert cached[0] == cached[1] == cached[2] and "# Task" not in cached[0]
    # 6,000 of 8,150 input tokens read; saved 6,000 x (3 - 0.3) - 2,000 x (3.75 - 3) per million
    assert "prompt cache: 74% of input tokens read from the cache (6,000 of 8,150; 2,000 written)" in r.stdout
    assert "saving $0.0147" in r.stdout
    rows = json.loads(inproc.harnessc("-C", str(tmp_path), "stats", "--output", "json", env=e).stdout)
    cache = next(row["cache"] for row in rows if "cache" in row)
    assert cache == {"input_tokens": 8150, "cache_read_tokens": 6000, "cache_write_tokens": 2000,
                     "share": 0.7362, "saved_usd": 0.0147}
    text = inproc.harnessc("-C", str(tmp_path), "stats", env=e).stdout
    assert "prompt cache" in text and "74%" in text and "$0.0147" in text


def test_the_cache_bench_finds_the_shared_text_cacheable_in_all_four_cases() -> None:
    """bench/cache.py, small: each case's cacheable share is near its best, (tasks - 1) / tasks
    (the first request writes the cache; each task's own text is never cached)."""
    import subprocess
    import sys

    from .helpers import REPO

    run = subprocess.run([sys.executable, str(REPO / "bench" / "cache.py"), "--tasks", "12", "--jobs", "4",
                          "--json"], capture_output=True, text=True, timeout=600, env=cli_env())
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    assert {(r["provider"], r["shared text in"]) for r in results} == {
        (p, w) for p in ("anthropic", "openai") for w in ("overview", "context")}
    for r in results:
        assert r["requests"] == 12 and 0.85 < r["share"] <= 11 / 12, r
