"""The agent error taxonomy: kinds, retry-after parsing, backoff, classification by shape.

The real SDKs against a real server are in test_providers.py; here the classifier meets
stand-in exceptions shaped like the SDKs' (class names, status_code, body, headers).
"""

from __future__ import annotations

import email.utils
import json
import random

import pytest

from harnessc.runtime.agents.errors import (
    KINDS, NOT_RETRIED, RETRIED, AgentError, classify, parse_retry_after, redact, retry_delay,
)


def test_kind_decides_transient_and_old_callers_still_work() -> None:
    assert AgentError("x", transient=True).kind == "server"
    assert AgentError("x", transient=True).transient
    assert AgentError("x").kind == "failed" and not AgentError("x").transient
    for kind in RETRIED:
        assert AgentError("x", kind=kind).transient
    for kind in NOT_RETRIED:
        assert not AgentError("x", kind=kind).transient
    with pytest.raises(ValueError):
        AgentError("x", kind="flaky")


@pytest.mark.parametrize("headers, expected", [
    ({"retry-after-ms": "1500"}, 1.5),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # ms wins, as in both SDKs
    ({"retry-after": "7"}, 7.0),
    ({"retry-after": "0.5"}, 0.5),
    ({"retry-after": "-3"}, 0.0),
    ({"retry-after": "soon"}, None),
    ({}, None),
    (None, None),
])
def test_parse_retry_after(headers, expected) -> None:
    assert parse_retry_after(headers) == expected


def test_parse_retry_after_http_date() -> None:
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 42, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(42, abs=1)
    past = email.utils.formatdate(now - 100, usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now) == 0.0


def test_retry_delay_never_earlier_than_retry_after_and_capped() -> None:
    rng = random.Random(1)
    for attempt in range(1, 12):
        d = retry_delay(AgentError("x", kind="server"), attempt, rng)
        assert 0.75 * min(2 ** (attempt - 1), 30) <= d <= 30
    assert retry_delay(AgentError("x", kind="rate_limited", retry_after=95), 1, rng) == 95
    assert retry_delay(AgentError("x", kind="rate_limited", retry_after=0.1), 3, rng) == 0.1


class _Headers(dict):
    pass


class _Response:
    def __init__(self, headers):
        self.headers = _Headers(headers)


def _api_error(cls_names: list[str], status: int, body: dict | None = None, headers=None, **attrs):
    """An exception whose class hierarchy is named like the SDK's (most specific first)."""
    base = Exception
    for name in reversed(cls_names):
        base = type(name, (base,), {})
    exc = base((body or {}).get("error", {}).get("message", "boom"))
    exc.status_code = status
    exc.body = body
    exc.response = _Response(headers or {})
    for k, v in attrs.items():
        setattr(exc, k, v)
    return exc


@pytest.mark.parametrize("names, status, body, kind", [
    (["RateLimitError", "APIStatusError"], 429, {"error": {"type": "rate_limit_error"}}, "rate_limited"),
    (["ContractSpendLimitReachedError", "RateLimitError", "APIStatusError"], 429, {}, "quota_exhausted"),
    (["RateLimitError", "APIStatusError"], 429,
     {"error": {"code": "insufficient_quota", "message": "You exceeded your current quota"}}, "quota_exhausted"),
    (["OverloadedError", "InternalServerError", "APIStatusError"], 529, {}, "overloaded"),
    (["InternalServerError", "APIStatusError"], 529, {"error": {"type": "overloaded_error"}}, "overloaded"),
    (["APIStatusError"], 200, {"type": "error", "error": {"type": "overloaded_error"}}, "overloaded"),
    (["APIStatusError"], 200, {"type": "error", "error": {"type": "api_error"}}, "server"),
    (["InternalServerError", "APIStatusError"], 500, {}, "server"),
    (["ConflictError", "APIStatusError"], 409, {}, "server"),
    (["RequestTimeoutError", "APIStatusError"], 408, {}, "timeout"),
    (["APIStatusError"], 408, {}, "timeout"),
    (["AuthenticationError", "APIStatusError"], 401, {"error": {"type": "authentication_error"}}, "auth"),
    (["PermissionDeniedError", "APIStatusError"], 403, {}, "auth"),
    (["BadRequestError", "APIStatusError"], 400,
     {"error": {"message": "prompt is too long: 250000 tokens > 200000 maximum"}}, "context_too_long"),
    (["BadRequestError", "APIStatusError"], 400, {"error": {"code": "context_length_exceeded"}},
     "context_too_long"),
    (["BadRequestError", "APIStatusError"], 400,
     {"error": {"message": "Your credit balance is too low to access the Anthropic API"}}, "quota_exhausted"),
    (["BadRequestError", "APIStatusError"], 400, {"error": {"message": "max_tokens: must be > 0"}},
     "invalid_request"),
    (["NotFoundError", "APIStatusError"], 404, {}, "invalid_request"),
])
def test_classify_status_errors(names, status, body, kind) -> None:
    e = classify(_api_error(names, status, body, {"retry-after": "3"}), "a1", "ANTHROPIC_API_KEY")
    assert e.kind == kind, e.message
    assert e.message.startswith("agent 'a1': ")
    if kind == "rate_limited":
        assert e.retry_after == 3.0
    if kind == "auth":
        assert "ANTHROPIC_API_KEY" in e.message
    if kind == "quota_exhausted":
        assert e.reset_at is not None


def test_classify_transport_and_body_errors() -> None:
    cut = type("RemoteProtocolError", (type("TransportError", (Exception,), {}),), {})
    assert classify(cut("peer closed connection"), "a").kind == "connection"
    rt = type("ReadTimeout", (type("TimeoutException", (Exception,), {}),), {})
    assert classify(rt("read"), "a").kind == "timeout"
    try:
        json.loads('{"id": "msg_1", "conte')
    except json.JSONDecodeError as exc:
        assert classify(exc, "a").kind == "server"
    assert classify(RuntimeError("?"), "a").kind == "failed"
    assert classify(AgentError("x", kind="refusal"), "a").kind == "refusal"


def test_api_keys_never_reach_messages() -> None:
    body = {"error": {"message": "Incorrect API key provided: sk-proj-abcdefghijklmnop1234"}}
    e = classify(_api_error(["AuthenticationError", "APIStatusError"], 401, body), "a", "OPENAI_API_KEY")
    assert "abcdefghijklmnop1234" not in e.message and "OPENAI_API_KEY" in e.message
    assert "s3cr3t-value-xyz" not in redact("key s3cr3t-value-xyz leaked", "s3cr3t-value-xyz")


def test_every_kind_is_documented() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "providers.md").read_text("utf-8")
    for kind in KINDS:
        assert f"`{kind}`" in doc, kind
