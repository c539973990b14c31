"""The agent error taxonomy: kinds, retry-after parsing, backoff, classification by shape.

The real SDKs against a real server are in test_providers.py; here the classifier meets
stand-in exceptions shaped like the SDKs' (class names, status_code, body, headers).
"""

from __future__ import annotations

import datetime
import email.utils
import json
import random
import time

import pytest

from harnessc.runtime.agents.errors import (
    KINDS, NOT_RETRIED, RETRIED, AgentError, classify, parse_reset, parse_retry_after, redact, retry_delay,
    text_reset,
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
    ({"retry-after": "inf"}, None),  # never an endless wait
    ({"retry-after-ms": "nan", "retry-after": "2"}, 2.0),
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


# ------------------------------------------------------------------ reset headers, x-should-retry


@pytest.mark.parametrize("headers, expected", [
    ({"x-ratelimit-reset-requests": "20ms", "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "5000"}, 0.02),  # the exhausted one
    ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-remaining-requests": "9",
      "x-ratelimit-reset-tokens": "1m30.5s", "x-ratelimit-remaining-tokens": "120"}, 90.5),  # none at 0: tokens
    ({"x-ratelimit-reset-requests": "2s"}, 2.0),
    ({"x-ratelimit-reset-tokens": "1h2m3s"}, 3723.0),
    ({"x-ratelimit-reset-tokens": "0.5"}, 0.5),  # plain seconds (some compatible servers)
    ({"anthropic-ratelimit-requests-reset": "2027-01-15T08:00:30Z", "anthropic-ratelimit-requests-remaining": "0",
      "anthropic-ratelimit-tokens-reset": "2027-01-15T08:00:05Z", "anthropic-ratelimit-tokens-remaining": "100"}, 30),
    ({"anthropic-ratelimit-input-tokens-reset": "2027-01-15T08:00:12+00:00",
      "anthropic-ratelimit-output-tokens-reset": "2027-01-15T08:00:07Z"}, 12),
    ({"anthropic-ratelimit-tokens-reset": "2027-01-15T07:59:00Z"}, 0.0),  # already past
    ({"x-ratelimit-reset-tokens": "soon", "anthropic-ratelimit-tokens-reset": "tomorrow"}, None),
    ({"x-ratelimit-reset-tokens": "1x2s"}, None),
    ({"x-ratelimit-reset-tokens": "inf", "x-ratelimit-reset-requests": "3s"}, 3.0),
    ({}, None),
])
def test_parse_reset(headers, expected) -> None:
    now = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    got = parse_reset(headers, now=now)
    assert got == (pytest.approx(expected) if expected is not None else None)


def _sdk_exception(provider: str, reply) -> tuple[BaseException, int]:
    """The exception the real SDK (max_retries=0) raises for `reply` from the fault server,
    and the number of requests it made."""
    import asyncio

    pytest.importorskip("aiohttp")
    sdk = pytest.importorskip(provider)
    from .fakeapi import FakeAPI

    async def go():
        api = FakeAPI()
        base = await api.start()
        api.push(reply)
        if provider == "anthropic":
            client = sdk.AsyncAnthropic(api_key="test-key-0000", base_url=base, max_retries=0)
            request = client.messages.create(model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
        else:
            client = sdk.AsyncOpenAI(api_key="test-key-0000", base_url=base + "/v1", max_retries=0)
            request = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        try:
            await request
        except Exception as exc:  # noqa: BLE001 - the SDK's exception is what the test is about
            return exc, api.count
        finally:
            await client.close()
            await api.close()
        raise AssertionError("the SDK raised nothing")

    return asyncio.run(go())


def _in(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(time.time() + seconds, datetime.timezone.utc).isoformat()


def test_anthropic_429_without_retry_after_waits_for_the_exhausted_limit() -> None:
    from .fakeapi import Reply

    headers = {"anthropic-ratelimit-requests-reset": _in(3600), "anthropic-ratelimit-requests-remaining": "0",
               "anthropic-ratelimit-tokens-reset": _in(5), "anthropic-ratelimit-tokens-remaining": "9000"}
    exc, count = _sdk_exception("anthropic", Reply.error(429, "rate_limit_error", headers=headers))
    e = classify(exc, "a1", "ANTHROPIC_API_KEY")
    assert type(exc).__name__ == "RateLimitError" and count == 1
    assert e.kind == "rate_limited" and 3000 < e.retry_after <= 3600  # the requests limit, not the tokens'
    assert "x-should-retry" not in e.message


def test_openai_429_without_retry_after_waits_for_the_token_reset() -> None:
    from .fakeapi import Reply

    headers = {"x-ratelimit-reset-requests": "120ms", "x-ratelimit-remaining-requests": "59",
               "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}
    exc, count = _sdk_exception("openai", Reply.error(429, "tokens", error_code="rate_limit_exceeded",
                                                     headers=headers))
    e = classify(exc, "a1", "OPENAI_API_KEY")
    assert count == 1 and e.kind == "rate_limited" and e.retry_after == 360.0
    assert retry_delay(e, 1) == 360.0


@pytest.mark.parametrize("provider, headers", [
    ("openai", {"retry-after": "2", "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "0"}),
    ("anthropic", {"retry-after-ms": "2000", "anthropic-ratelimit-tokens-reset": "2020-01-01T00:00:00Z"}),
])
def test_retry_after_wins_over_reset_headers(provider, headers) -> None:
    from .fakeapi import Reply

    exc, _ = _sdk_exception(provider, Reply.error(429, "rate_limit_error", headers=headers))
    assert classify(exc, "a1").retry_after == 2.0


def test_reset_headers_give_a_quota_its_reset_time_and_do_not_time_other_errors() -> None:
    from .fakeapi import Reply

    exc, _ = _sdk_exception("openai", Reply.error(429, "insufficient_quota", error_code="insufficient_quota",
                                                  headers={"x-ratelimit-reset-requests": "1h0m0s"}))
    before = time.time()
    e = classify(exc, "a1")
    assert e.kind == "quota_exhausted" and before + 3600 <= e.reset_at <= time.time() + 3600
    # a 500 or a 529 is not about the rate limit: its reset headers are no retry time
    for provider, status in (("openai", 500), ("anthropic", 529)):
        exc, _ = _sdk_exception(provider, Reply.error(status, "overloaded_error", headers={
            "x-ratelimit-reset-tokens": "30s", "anthropic-ratelimit-tokens-reset": _in(30)}))
        assert classify(exc, "a1").retry_after is None


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("status, error_type, value, kind, transient", [
    (500, "api_error", "false", "server", False),  # otherwise retried: not retried
    (529, "overloaded_error", "false", "overloaded", False),
    (429, "rate_limit_error", "false", "rate_limited", False),
    (400, "invalid_request_error", "true", "invalid_request", True),  # otherwise final: retried
    (409, "conflict_error", "true", "server", True),  # agrees with the kind: no note
    (400, "invalid_request_error", "maybe", "invalid_request", False),  # neither: the kind decides
])
def test_x_should_retry_overrules_the_kind(provider, status, error_type, value, kind, transient) -> None:
    from .fakeapi import Reply

    exc, count = _sdk_exception(provider, Reply.error(status, error_type, headers={"x-should-retry": value}))
    e = classify(exc, "a1")
    assert count == 1 and e.kind == kind and e.transient is transient, e.message
    assert e.final is (not transient)
    assert ("x-should-retry" in e.message) is ((kind in RETRIED) != transient)


def test_run_stops_at_once_when_the_server_says_do_not_retry(tmp_path) -> None:
    """A 500 is retried unless the server says x-should-retry: false: then one attempt, one
    request, and the task fails naming the header."""
    pytest.importorskip("aiohttp")
    pytest.importorskip("openai")
    from .fakeapi import Reply, ThreadedFakeAPI
    import inproc

    from .helpers import SIMPLE_CONTRACT, env, node, write_project

    with ThreadedFakeAPI() as api:
        api.push(Reply.error(500, "api_error", headers={"x-should-retry": "false"}))
        agent = {"provider": "openai", "model": "m-1", "base_url": api.base_url + "/v1"}
        write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                      agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
        e = {k: v for k, v in env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        e["OPENAI_API_KEY"] = "test-openai-key-0000"
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e)  # the real clock: the server is a thread
        requests = api.count
    assert r.returncode == 1
    status = json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--json", env=e).stdout)
    task = {t["id"]: t for t in status["tasks"]}["t"]
    assert task["state"] == "failed" and requests == 1 and task["attempts"] == 1
    assert "x-should-retry: false" in task["error"]


# ------------------------------------------------------------------ reset times in messages

NOW = 1795455000.0  # 2026-11-23 17:30:00 UTC


def _utc(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


@pytest.mark.parametrize("text, reset", [
    ("Claude AI usage limit reached|1767225600", 1767225600.0),
    ('{"type": "usage_limit_reached", "resets_at": 1795460000}', 1795460000.0),
    ('rate_limit_info: {"status": "rejected", "resetsAt": 1795460000}', 1795460000.0),
    ('{"type": "usage_limit_reached", "resets_in_seconds": 3600}', NOW + 3600),
    ("Usage limit reached. Try again at 2026-11-25 15:00 UTC.", _utc("2026-11-25T15:00:00+00:00")),
    ("The limit resets at 2026-11-25T15:00:30Z", _utc("2026-11-25T15:00:30+00:00")),
    ("try again after 2026-11-25 15:00 +02:00", _utc("2026-11-25T13:00:00+00:00")),
    ("try again at 2026-11-25 15:00 (Europe/Paris)", _utc("2026-11-25T14:00:00+00:00")),
    ("You've hit your limit \u00b7 resets Nov 24, 3pm (UTC)", _utc("2026-11-24T15:00:00+00:00")),
    ("resets November 24th, 2027 at 3:30 PM UTC", _utc("2027-11-24T15:30:00+00:00")),
    ("resets Jan 2, 3pm (UTC)", _utc("2027-01-02T15:00:00+00:00")),  # seen in November: next January
    ("You've hit your usage limit. Try again at 6pm UTC.", _utc("2026-11-23T18:00:00+00:00")),
    ("You've hit your limit \u00b7 resets 3pm (UTC)", _utc("2026-11-24T15:00:00+00:00")),  # passed: tomorrow
])
def test_a_reset_time_is_read_from_a_message(text, reset) -> None:
    assert text_reset(text, now=NOW) == reset


@pytest.mark.parametrize("text", [
    "You've hit your usage limit. Try again later.", "resets 3", "try again at 2026-13-40 15:00 UTC",
    "try again at 2026-11-25 25:00 UTC", "resets Nov 24, 3pm (Mars/Olympus)", "resets Foo 24, 3pm (UTC)",
    "resets Nov 31, 3pm (UTC)", "", None,
])
def test_a_message_without_a_readable_reset_time_has_none(text) -> None:
    assert text_reset(text, now=NOW) is None


def test_a_quota_error_without_reset_headers_takes_the_reset_from_its_message() -> None:
    body = {"error": {"code": "usage_limit_reached",
                      "message": "You've hit your usage limit. Try again at 2099-01-01 00:00 UTC."}}
    e = classify(_api_error(["RateLimitError", "APIStatusError"], 429, body), "a1")
    assert e.kind == "quota_exhausted" and e.reset_at == _utc("2099-01-01T00:00:00+00:00")


def test_an_error_rebuilt_from_its_attributes_is_the_same_error() -> None:
    """A remote attempt (executor/remote.py) sends an error back as `vars(e)` and the driver
    rebuilds it with `AgentError(**...)`: every attribute must be a constructor argument."""
    e = AgentError("quota", kind="quota_exhausted", retry_after=3.0, stderr="s", reset_at=1e9, cost_usd=0.5,
                   retry=False, cost_source="reported", unreported=["cost"], deprecated="November 30th, 2026")
    again = AgentError(**vars(e))
    assert vars(again) == vars(e)
