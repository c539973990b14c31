"""The openai provider with `api: responses`: the real openai SDK against the fault server's
Responses wire format (non-streamed and SSE). Every fault is one AgentError of the right
kind after exactly ONE HTTP request; `harnessc run` records one attempt per request."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("openai")

import inproc  # noqa: E402
from harnessc.runtime.agents import errors  # noqa: E402
from harnessc.runtime.agents.base import Response  # noqa: E402
from harnessc.runtime.agents.errors import AgentError  # noqa: E402
from .fakeapi import Reply, ThreadedFakeAPI  # noqa: E402
from .helpers import SIMPLE_CONTRACT, node, write_project  # noqa: E402
from .helpers import env as cli_env  # noqa: E402
from .test_providers import CONTRACT, FAULTS, KEYS, _request, call, hermetic_env  # noqa: E402,F401

STREAM = [False, True]


def responses(replies: list[Reply], stream: bool = False, request=None, **config):
    return call("openai", replies, {"api": "responses", "stream": stream, **config}, request)


@pytest.mark.parametrize("stream", STREAM)
def test_ok_answer_and_request_shape(stream) -> None:
    out, api = responses([Reply.ok('{"title": "Q3"}', usage={"input": 12, "output": 7})], stream,
                         max_tokens=500, temperature=0.2)
    assert isinstance(out, Response), out
    assert out.text == '{"title": "Q3"}'
    assert (out.usage.input_tokens, out.usage.output_tokens) == (12, 7)
    assert api.count == 1 and api.requests[0].path == "/v1/responses"
    body = api.requests[0].body
    assert body["input"] == "Summarise the report." and body["instructions"] == "You are careful."
    assert body["max_output_tokens"] == 500 and body["temperature"] == 0.2 and body["store"] is False
    assert body["text"] == {"format": {"type": "json_schema", "name": "summary", "strict": True,
                                       "schema": CONTRACT["provider_schemas"]["openai"]["schema"]}}
    assert body.get("stream", False) is stream
    assert "messages" not in body and "response_format" not in body


@pytest.mark.parametrize("structured, expected", [
    ("json_object", {"format": {"type": "json_object"}}),
    ("none", None),
])
def test_structured_modes(structured, expected) -> None:
    out, api = responses([Reply.ok('{"title": "Q3"}')], structured=structured)
    assert isinstance(out, Response), out
    assert api.requests[0].body.get("text") == expected


def test_no_contract_output_sends_no_format_and_no_empty_instructions() -> None:
    out, api = responses([Reply.ok("plain answer")], request=_request(output_schema=None, system=""))
    assert isinstance(out, Response) and out.text == "plain answer"
    body = api.requests[0].body
    assert "text" not in body and "instructions" not in body and "max_output_tokens" not in body


@pytest.mark.parametrize("stream", STREAM)
@pytest.mark.parametrize("reply, kind, retry_after", FAULTS,
                         ids=[f"{f[1]}-{f[0].fault}-{f[0].status}" for f in FAULTS])
def test_fault_kind_after_exactly_one_request(stream, reply, kind, retry_after) -> None:
    if reply.fault == "bad_body" and stream:
        pytest.skip("a streamed answer has no JSON body")
    out, api = responses([reply], stream)
    assert isinstance(out, AgentError), out
    assert out.kind == kind, out.message
    assert out.retry_after == retry_after
    assert api.count == 1
    assert out.message.startswith("agent 'a1': ")
    if kind == "auth":
        assert "OPENAI_API_KEY" in out.message
    assert KEYS["OPENAI_API_KEY"] not in out.message


@pytest.mark.parametrize("reply, kind", [
    (Reply(fault="cut"), "connection"),
    (Reply(fault="eof"), "truncated"),  # no response.completed
    (Reply(fault="stream_error", error_type="overloaded_error"), "overloaded"),
    (Reply(fault="stream_error", error_type="server_error"), "server"),
    (Reply(fault="stream_error", error_code="rate_limit_exceeded"), "rate_limited"),
    (Reply(fault="stream_error", error_code="insufficient_quota"), "quota_exhausted"),
    (Reply(fault="failed"), "server"),  # response.failed, code server_error
    (Reply(fault="failed", error_code="rate_limit_exceeded"), "rate_limited"),
    (Reply(fault="failed", error_code="invalid_prompt", message="bad prompt"), "invalid_request"),
    (Reply(fault="failed", error_code="bio_policy"), "refusal"),
], ids=lambda v: v if isinstance(v, str) else f"{v.fault}-{v.error_code or v.error_type}")
def test_stream_faults(reply, kind) -> None:
    out, api = responses([reply], stream=True)
    assert isinstance(out, AgentError) and out.kind == kind, out
    assert api.count == 1
    if reply.fault in ("failed", "stream_error"):
        assert reply.message in out.message


@pytest.mark.parametrize("code, kind", [(None, "server"), ("invalid_prompt", "invalid_request")])
def test_non_streamed_failed_response(code, kind) -> None:
    out, api = responses([Reply(fault="failed", error_code=code)])
    assert isinstance(out, AgentError) and out.kind == kind, out
    assert api.count == 1


@pytest.mark.parametrize("stream", STREAM)
def test_incomplete_at_max_output_tokens_is_truncated_and_charged(stream) -> None:
    out, _ = responses([Reply.ok('{"title": "Q', stop="max_tokens", usage={"input": 10, "output": 99})], stream,
                       max_tokens=99, price={"input": 2.0, "output": 8.0})
    assert isinstance(out, AgentError) and out.kind == "truncated", out
    assert "max_tokens (99)" in out.message
    assert out.usage.output_tokens == 99 and out.cost_usd == pytest.approx((10 * 2 + 99 * 8) / 1e6)


@pytest.mark.parametrize("stream", STREAM)
def test_refusal_item_is_a_refusal(stream) -> None:
    out, _ = responses([Reply.ok("I can't help with that.", stop="refusal")], stream)
    assert isinstance(out, AgentError) and out.kind == "refusal", out
    assert "I can't help with that." in out.message
    assert not out.transient and out.final


@pytest.mark.parametrize("stream", STREAM)
def test_cached_tokens_are_a_subset_and_costed(stream) -> None:
    out, _ = responses([Reply.ok('{"title": "Q3"}', usage={"input": 100, "cache_read": 1000, "output": 50,
                                                           "reasoning": 20})],
                       stream, price={"input": 2.0, "output": 8.0})
    u = out.usage
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) == (1100, 1000, 50, 20)
    assert out.cost_usd == pytest.approx((100 * 2.0 + 1000 * 0.2 + 50 * 8.0) / 1e6)


def test_timeout_is_a_timeout() -> None:
    out, api = responses([Reply(delay=3)], request=_request(timeout=0.3))
    assert isinstance(out, AgentError) and out.kind == "timeout", out
    assert api.count == 1


def test_run_retries_through_faults_one_attempt_per_request(tmp_path, monkeypatch) -> None:
    """`harnessc run` with api: responses: a 429, an error event, a response.failed and a cut
    stream are retried; every HTTP request is one attempt row."""
    answer = '{"title": "Q3", "score": 4}'
    with ThreadedFakeAPI() as api:
        api.push(Reply.error(429, "rate_limit_error", headers={"retry-after": "0"}),
                 Reply(fault="stream_error", error_type="server_error", headers={"retry-after": "0"}),
                 Reply(fault="failed", error_code="rate_limit_exceeded"),
                 Reply(fault="cut"),
                 Reply.ok(answer, usage={"input": 100, "output": 20}))
        agent = {"provider": "openai", "api": "responses", "model": "m-1", "base_url": api.base_url + "/v1",
                 "stream": True, "price": {"input": 3.0, "output": 15.0}}
        write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                      agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
        e = {k: v for k, v in cli_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        e.update(KEYS)
        # which faults are retried and recorded, not how long a retry waits (helpers.SHORT_BACKOFF)
        monkeypatch.setattr(errors, "BACKOFF_BASE", 0.05)
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e, cwd=tmp_path)
        requests = api.count
        paths = {s.path for s in api.requests}
    assert r.returncode == 0, r.stdout + r.stderr
    assert paths == {"/v1/responses"}
    status = json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--json", env=e).stdout)
    task = {t["id"]: t for t in status["tasks"]}["t"]
    assert task["state"] == "succeeded"
    assert requests == 5 and task["attempts"] == requests
    assert task["cost_usd"] == pytest.approx((100 * 3 + 20 * 15) / 1e6)
