"""Token counts and costs from outside (a server's usage, a CLI's JSON, a cassette) are
believed only when they are finite numbers from 0 to a sane bound (agents.base: 10^9 tokens
per count, $10,000 per call); anything else is recorded as not reported (0), and the
attempt says which figure it was. status and stats print strict JSON whatever state.db holds."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
from pathlib import Path

import inproc
import pytest

from harnessc.providers import agent_config
from harnessc.runtime.agents.base import MAX_CALL_COST_USD, MAX_CALL_TOKENS, Request, Usage, make_agent
from harnessc.textsafe import json_text

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, env, node, write_project

ANSWER = '{"title": "a title", "score": 2}'
PRICE = {"input": 3.0, "output": 15.0}


def _strict(text: str):
    """JSON as a strict parser reads it: NaN and Infinity are not JSON."""
    def refuse(word):
        raise ValueError(f"not JSON: {word}")
    return json.loads(text, parse_constant=refuse)


def _attempts(root: Path) -> list[dict]:
    con = sqlite3.connect(root / ".harness" / "state.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute(
        "SELECT status, errors, input_tokens, output_tokens, cost_usd, cost_source FROM attempts ORDER BY id")]


def _reports_are_json(root: Path, e: dict | None = None) -> dict:
    status = virtual.harnessc(root, "status", "--json", env=e)
    stats = virtual.harnessc(root, "stats", "--output", "json", env=e)
    assert status.returncode == 0 and stats.returncode == 0, status.stderr + stats.stderr
    _strict(stats.stdout)
    return _strict(status.stdout)


@pytest.mark.parametrize("provider, value, shown", [
    ("anthropic", float("nan"), "NaN"), ("openai", float("nan"), "NaN"),
    ("anthropic", -1e8, "-1"), ("openai", 1e308, "1e+308"),
])
def test_a_servers_absurd_token_count_is_recorded_as_not_reported(tmp_path, provider, value, shown) -> None:
    pytest.importorskip("aiohttp")
    pytest.importorskip(provider)
    from .fakeapi import Reply, ThreadedFakeAPI

    e = {k: v for k, v in env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    e.update(ANTHROPIC_API_KEY="test-anthropic-key-0000", OPENAI_API_KEY="test-openai-key-0000")
    with ThreadedFakeAPI() as api:
        api.push(Reply.ok(ANSWER, usage={"input": value, "output": 5}))
        base = api.base_url if provider == "anthropic" else api.base_url + "/v1"
        agent = {"provider": provider, "model": "m-1", "base_url": base, "price": PRICE}
        write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                      agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
        r = inproc.harnessc("-C", str(tmp_path), "run", "--max-cost", "1", env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    [attempt] = _attempts(tmp_path)
    assert attempt["status"] == "succeeded"
    assert f"usage not reported: input_tokens={shown}" in attempt["errors"]
    assert attempt["input_tokens"] == 0 and attempt["output_tokens"] == 5
    assert math.isfinite(attempt["cost_usd"]) and 0 <= attempt["cost_usd"] < 1
    status = _reports_are_json(tmp_path, e)
    assert status["tasks"][0]["state"] == "succeeded"


SCRIPT = "print('```json\\n" + ANSWER + "\\n```')\n"


@pytest.mark.parametrize("cost, shown", [("NaN", "NaN"), ("Infinity", "Infinity"), ("-5", "-5"),
                                         ("1e308", "1e+308")])
def test_a_cassettes_absurd_cost_is_recorded_as_not_reported(tmp_path, cost, shown) -> None:
    (tmp_path / "agent.py").write_text(SCRIPT, encoding="utf-8")
    agent = {"provider": "command", "command": [PY, str(tmp_path / "agent.py")], "price": PRICE}
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                  agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
    assert virtual.harnessc(tmp_path, "run", "--record").returncode == 0
    tape = tmp_path / ".harness" / "cassettes" / "a.jsonl"
    [line] = tape.read_text().splitlines()
    call = json.loads(line)
    call["response"]["cost_usd"] = 0.25
    tape.write_text(json.dumps(call).replace("0.25", cost) + "\n")  # what json.dumps would never write
    (tmp_path / ".harness" / "state.db").unlink()
    r = virtual.harnessc(tmp_path, "run", "--replay", "--max-cost", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    [attempt] = _attempts(tmp_path)
    assert f"cost not reported: cost_usd={shown}" in attempt["errors"]
    assert attempt["cost_usd"] == 0 and attempt["cost_source"] == "no_response"
    status = _reports_are_json(tmp_path)
    assert status["tasks"][0]["state"] == "succeeded"


@pytest.mark.parametrize("cost", ['"NaN"', "NaN", "-1e8", "Infinity", "1e300"])
def test_a_cli_json_absurd_total_cost_is_priced_from_the_tokens_instead(tmp_path, cost) -> None:
    from .test_cli_agents import CLAUDE_OK, fake_cli

    result = json.dumps({**CLAUDE_OK, "total_cost_usd": 0.25}).replace("0.25", cost)
    exe = fake_cli(tmp_path / "bin", "claude", stdout=result)
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code", "command": [str(exe)], "price": PRICE}), tmp_path)
    resp = asyncio.run(agent.call(Request(task_id="t1", prompt="Do it.")))
    assert resp.cost_source == "price" and 0 < resp.cost_usd < 1
    assert [n for n in resp.unreported if n.startswith("cost not reported: total_cost_usd=")]


def test_the_bounds() -> None:
    from harnessc.runtime.agents.base import checked_charge

    usage, cost, source, notes = checked_charge(
        Usage(input_tokens=MAX_CALL_TOKENS, output_tokens=MAX_CALL_TOKENS + 1, cache_read_tokens=10**400),
        MAX_CALL_COST_USD, "price")
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (MAX_CALL_TOKENS, 0, 0)
    assert cost == MAX_CALL_COST_USD and source == "price" and len(notes) == 2
    assert checked_charge(None, MAX_CALL_COST_USD * 2, "cli")[1:] == (0.0, "no_response",
                                                                     ["cost not reported: cost_usd=20000.0"])
    assert checked_charge(Usage(input_tokens=True), 0.0, "none")[3] == ["usage not reported: input_tokens=True"]


def test_json_output_never_holds_nan_or_infinity() -> None:
    text = json_text({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": "\x1b]52;c;x\x07"})
    assert _strict(text) == {"a": None, "b": [None, None, 1.5], "c": "\x1b]52;c;x\x07"}


def test_a_cli_json_absurd_tool_count_is_not_believed() -> None:
    from harnessc.runtime.agents.cli_output import parse_claude, parse_gemini

    from .test_cli_agents import CLAUDE_OK, GEMINI_OK

    assert parse_claude(json.dumps({**CLAUDE_OK, "num_turns": 10**30}), "", 0).tool_calls is None
    stats = {**GEMINI_OK["stats"], "tools": {"totalCalls": -4}}
    assert parse_gemini(json.dumps({**GEMINI_OK, "stats": stats}), "", 0).tool_calls is None
    assert parse_gemini(json.dumps({**GEMINI_OK, "stats": {**stats, "tools": {"totalCalls": 3}}}), "", 0).tool_calls == 3
