"""The anthropic and openai providers: the real SDKs against the in-process fault server (and
the runs against it in this process too, on the real clock: tests/inproc.py).

Each fault must come back as one AgentError of the right kind, with retry_after when the
server sent one, after exactly ONE HTTP request (harnessc's loop owns retries). Nothing
reaches the internet; the keys are fake.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("anthropic")
pytest.importorskip("openai")

import inproc  # noqa: E402
from harnessc.providers import agent_config  # noqa: E402
from harnessc.runtime.agents import errors  # noqa: E402
from harnessc.runtime.agents.base import Request, Response, make_agent  # noqa: E402
from harnessc.runtime.agents.errors import AgentError  # noqa: E402
from .fakeapi import FakeAPI, Reply, ThreadedFakeAPI  # noqa: E402
from .helpers import SIMPLE_CONTRACT, node, write_project  # noqa: E402
from .helpers import env as cli_env  # noqa: E402

KEYS = {"ANTHROPIC_API_KEY": "test-anthropic-key-0000", "OPENAI_API_KEY": "test-openai-key-0000"}
CONTRACT = {
    "name": "summary",
    "output": {"title": {"type": "str"}},
    "json_schema": {"type": "object", "properties": {"title": {"type": "string", "minLength": 3}},
                    "required": ["title"], "additionalProperties": False},
    "provider_schemas": {
        "anthropic": {"schema": {"type": "object", "properties": {"title": {"type": "string"}},
                                 "required": ["title"], "additionalProperties": False},
                      "moved": [], "strict": True},
        "openai": {"schema": {"type": "object", "properties": {"title": {"type": "string"}},
                              "required": ["title"], "additionalProperties": False},
                   "moved": [], "strict": True},
    },
}


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch):
    for var in list(os.environ):
        if var.startswith(("ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(var)
    for var, value in KEYS.items():
        monkeypatch.setenv(var, value)


def _request(**kw) -> Request:
    base = dict(task_id="t1", prompt="Summarise the report.", system="You are careful.", timeout=10.0,
                output_schema=CONTRACT["json_schema"], contract=CONTRACT)
    return Request(**{**base, **kw})


def call(provider: str, replies: list[Reply], config: dict | None = None,
         request: Request | None = None) -> tuple[Response | AgentError, FakeAPI]:
    async def go():
        api = FakeAPI()
        base = await api.start()
        api.push(*replies)
        cfg = {"provider": provider, "model": "m-1",
               "base_url": base if provider == "anthropic" else base + "/v1", **(config or {})}
        agent = make_agent("a1", agent_config("a1", cfg), Path("."))
        try:
            return await agent.call(request or _request()), api
        except AgentError as e:
            return e, api
        finally:
            await api.close()

    return asyncio.run(go())


BOTH = [("anthropic", False), ("anthropic", True), ("openai", False), ("openai", True)]


@pytest.mark.parametrize("provider, stream", BOTH)
def test_ok_answer_one_request(provider, stream) -> None:
    out, api = call(provider, [Reply.ok('{"title": "Q3"}', usage={"input": 12, "output": 7})],
                    {"stream": stream})
    assert isinstance(out, Response), out
    assert out.text == '{"title": "Q3"}'
    assert (out.usage.input_tokens, out.usage.output_tokens) == (12, 7)
    assert api.count == 1
    assert api.requests[0].body.get("stream", False) is stream


FAULTS = [
    (Reply.error(429, "rate_limit_error", headers={"retry-after": "3"}), "rate_limited", 3.0),
    (Reply.error(429, "rate_limit_error", headers={"retry-after-ms": "1500", "retry-after": "2"}),
     "rate_limited", 1.5),
    (Reply.error(408, "timeout_error"), "timeout", None),
    (Reply.error(409, "conflict_error"), "server", None),
    (Reply.error(500, "api_error"), "server", None),
    (Reply.error(503, "api_error", headers={"retry-after": "4"}), "server", 4.0),
    (Reply.error(529, "overloaded_error"), "overloaded", None),
    (Reply.error(401, "authentication_error", message="invalid x-api-key"), "auth", None),
    (Reply.error(403, "permission_error"), "auth", None),
    (Reply.error(400, "invalid_request_error", message="prompt is too long: 210000 tokens > 200000 maximum"),
     "context_too_long", None),
    (Reply.error(400, "invalid_request_error", message="max_tokens: field required"), "invalid_request", None),
    (Reply.error(404, "not_found_error", message="model: m-1"), "invalid_request", None),
    (Reply(fault="bad_body"), "server", None),
    (Reply.ok('{"title": "Q', stop="max_tokens"), "truncated", None),
]


@pytest.mark.parametrize("provider, stream", BOTH)
@pytest.mark.parametrize("reply, kind, retry_after", FAULTS,
                         ids=[f"{f[1]}-{f[0].fault}-{f[0].status}" for f in FAULTS])
def test_fault_kind_after_exactly_one_request(provider, stream, reply, kind, retry_after) -> None:
    if reply.fault == "bad_body" and stream:
        pytest.skip("a streamed answer has no JSON body")
    out, api = call(provider, [reply], {"stream": stream})
    assert isinstance(out, AgentError), out
    assert out.kind == kind, out.message
    assert out.retry_after == retry_after
    assert api.count == 1
    assert out.message.startswith("agent 'a1': ")
    if kind == "auth":
        assert f"{provider.upper()}_API_KEY" in out.message
    assert KEYS["ANTHROPIC_API_KEY"] not in out.message and KEYS["OPENAI_API_KEY"] not in out.message


@pytest.mark.parametrize("provider, stream", BOTH)
def test_stream_faults(provider, stream) -> None:
    if not stream:
        pytest.skip("stream faults")
    cases = [(Reply(fault="cut"), "connection"), (Reply(fault="eof"), "truncated"),
             (Reply(fault="stream_error", error_type="overloaded_error"), "overloaded"),
             (Reply(fault="stream_error", error_type="api_error"), "server")]
    for reply, kind in cases:
        out, api = call(provider, [reply], {"stream": True})
        assert isinstance(out, AgentError) and out.kind == kind, (reply.fault, out)
        assert api.count == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_timeout_is_a_timeout(provider) -> None:
    out, api = call(provider, [Reply(delay=3)], request=_request(timeout=0.3))
    assert isinstance(out, AgentError) and out.kind == "timeout", out
    assert api.count == 1


def test_quota_is_not_a_rate_limit() -> None:
    out, _ = call("anthropic", [Reply.error(429, "rate_limit_error", error_code="contract_spend_limit_reached",
                                            headers={"retry-after": "3600"})])
    assert out.kind == "quota_exhausted" and out.reset_at is not None
    out, _ = call("openai", [Reply.error(429, "insufficient_quota", error_code="insufficient_quota")])
    assert out.kind == "quota_exhausted"
    assert not out.transient and out.final


def test_missing_key_names_the_variable_and_sends_nothing(monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    out, api = call("anthropic", [], {"api_key_env": ""})
    assert out.kind == "auth" and "ANTHROPIC_API_KEY" in out.message
    monkeypatch.setenv("MY_KEY", "")
    out, api = call("openai", [], {"api_key_env": "MY_KEY"})
    assert out.kind == "auth" and "MY_KEY" in out.message and api.count == 0


def test_openai_local_server_gets_a_placeholder_key(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    out, api = call("openai", [Reply.ok('{"title": "ok"}')], {"api_key_env": None})
    assert isinstance(out, Response), out
    assert api.requests[0].auth == "Bearer not-needed"


def test_anthropic_request_shape_structured_and_cached_prefix() -> None:
    out, api = call("anthropic", [Reply.ok('{"title": "Q3"}')], {"max_tokens": 1000})
    body = api.requests[0].body
    assert body["output_config"] == {"format": {"type": "json_schema",
                                                "schema": CONTRACT["provider_schemas"]["anthropic"]["schema"]}}
    # a prefix this short is below every model's cache minimum: no breakpoint (test_caching.py)
    assert body["system"] == [{"type": "text", "text": "You are careful."}]
    assert body["messages"] == [{"role": "user", "content": "Summarise the report."}]
    assert body["max_tokens"] == 1000
    assert "x-stainless-retry-count" not in api.requests[0].headers or \
        api.requests[0].headers["x-stainless-retry-count"] == "0"


def test_anthropic_streams_by_default_when_max_tokens_is_large() -> None:
    out, api = call("anthropic", [Reply.ok('{"title": "Q3"}')], {"max_tokens": 64000})
    assert isinstance(out, Response), out
    assert api.requests[0].body["stream"] is True


@pytest.mark.parametrize("structured, expected", [
    ("json_schema", {"type": "json_schema", "json_schema": {
        "name": "summary", "schema": CONTRACT["provider_schemas"]["openai"]["schema"], "strict": True}}),
    ("json_object", {"type": "json_object"}),
    ("none", None),
])
def test_openai_structured_modes(structured, expected) -> None:
    out, api = call("openai", [Reply.ok('{"title": "Q3"}')], {"structured": structured, "stream": True})
    body = api.requests[0].body
    assert body.get("response_format") == expected
    assert body["stream_options"] == {"include_usage": True}


def test_anthropic_cache_counters_are_additive_and_costed() -> None:
    price = {"input": 3.0, "output": 15.0}
    out, _ = call("anthropic", [Reply.ok('{"title": "Q3"}', usage={"input": 100, "cache_read": 1000,
                                                                   "cache_write": 200, "output": 50})],
                  {"price": price})
    u = out.usage
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens) == (1300, 1000, 200, 50)
    assert out.cost_usd == pytest.approx((100 * 3 + 1000 * 0.3 + 200 * 3.75 + 50 * 15) / 1e6)
    out, _ = call("anthropic", [Reply.ok('{"title": "Q3"}', usage={"input": 100, "cache_read": 1000, "output": 50})],
                  {"price": {**price, "cache_read": 1.0}})
    assert out.cost_usd == pytest.approx((100 * 3 + 1000 * 1.0 + 50 * 15) / 1e6)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_cached_tokens_are_a_subset_and_costed(stream) -> None:
    out, _ = call("openai", [Reply.ok('{"title": "Q3"}', usage={"input": 100, "cache_read": 1000, "output": 50,
                                                                "reasoning": 20})],
                  {"price": {"input": 2.0, "output": 8.0}, "stream": stream})
    u = out.usage
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens) == (1100, 1000, 50, 20)
    assert out.cost_usd == pytest.approx((100 * 2.0 + 1000 * 0.2 + 50 * 8.0) / 1e6)


def test_truncated_answer_still_reports_its_usage() -> None:
    out, _ = call("anthropic", [Reply.ok('{"title": "Q', stop="max_tokens", usage={"input": 10, "output": 99})],
                  {"price": {"input": 3.0, "output": 15.0}})
    assert out.kind == "truncated" and out.usage.output_tokens == 99 and out.cost_usd > 0


def test_sdks_are_imported_only_by_the_agents_that_call() -> None:
    """make_agent imports no SDK; the first call imports its own SDK and not the other one."""
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from harnessc.providers import agent_config\n"
        "from harnessc.runtime.agents.base import Request, make_agent\n"
        "from harnessc.runtime.agents.errors import AgentError\n"
        "a = make_agent('a', agent_config('a', {'provider': 'anthropic', 'model': 'm', 'base_url': 'http://127.0.0.1:9'}), Path('.'))\n"
        "o = make_agent('o', agent_config('o', {'provider': 'openai', 'model': 'm'}), Path('.'))\n"
        "print('BUILT', sorted(m for m in ('anthropic', 'openai') if m in sys.modules))\n"
        "try:\n    asyncio.run(a.call(Request(task_id='t', prompt='p', timeout=5)))\n"
        "except AgentError as e:\n    print('KIND', e.kind)\n"
        "print('CALLED', sorted(m for m in ('anthropic', 'openai') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env["ANTHROPIC_API_KEY"] = "test-key"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "BUILT []" in r.stdout
    assert "KIND connection" in r.stdout
    assert "CALLED ['anthropic']" in r.stdout


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_run_retries_through_faults_one_attempt_per_request(tmp_path, provider, monkeypatch) -> None:
    """`harnessc run` against the fault server: a 429, a 529 and a cut stream are retried,
    quota ends the task; every HTTP request is one attempt row."""
    answer = '{"title": "Q3", "score": 4}'
    with ThreadedFakeAPI() as api:
        api.push(Reply.error(429, "rate_limit_error", headers={"retry-after": "0"}),
                 Reply.error(529, "overloaded_error", headers={"retry-after-ms": "10"}),
                 Reply(fault="cut", headers={"retry-after": "0"}),
                 Reply.ok(answer, usage={"input": 100, "output": 20}))
        base = api.base_url if provider == "anthropic" else api.base_url + "/v1"
        agent = {"provider": provider, "model": "m-1", "base_url": base, "stream": True,
                 "price": {"input": 3.0, "output": 15.0}}
        write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                      agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
        e = {k: v for k, v in cli_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        e.update(KEYS)
        # which faults are retried and recorded, not how long a retry waits (helpers.SHORT_BACKOFF)
        monkeypatch.setattr(errors, "BACKOFF_BASE", 0.05)
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e, cwd=tmp_path)
        requests = api.count
    assert r.returncode == 0, r.stdout + r.stderr
    status = json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--json", env=e).stdout)
    task = {t["id"]: t for t in status["tasks"]}["t"]
    assert task["state"] == "succeeded"
    assert requests == 4 and task["attempts"] == requests
    # The cut stream is charged what it reported: anthropic's message_start said 10 input and
    # 1 output token; openai's usage chunk comes last, so its cut stream reported nothing.
    cut = (10 * 3 + 1 * 15) if provider == "anthropic" else 0
    assert task["cost_usd"] == pytest.approx((100 * 3 + 20 * 15 + cut) / 1e6)
    state = (tmp_path / ".harness" / "state.db").read_bytes()
    assert KEYS["ANTHROPIC_API_KEY"].encode() not in state and KEYS["OPENAI_API_KEY"].encode() not in state


def test_run_quota_fails_the_task_without_retrying(tmp_path) -> None:
    with ThreadedFakeAPI() as api:
        api.push(Reply.error(429, "insufficient_quota", error_code="insufficient_quota",
                             message="You exceeded your current quota"))
        agent = {"provider": "openai", "model": "m-1", "base_url": api.base_url + "/v1"}
        write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                      agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
        e = {k: v for k, v in cli_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        e.update(KEYS)
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e, cwd=tmp_path)
        requests = api.count
    assert r.returncode == 1
    status = json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--json", env=e).stdout)
    task = {t["id"]: t for t in status["tasks"]}["t"]
    assert task["state"] == "failed" and requests == 1 and task["attempts"] == 1
    assert "quota" in task["error"] and "agent 'llm'" in task["error"]


# ------------------------------------------------------------------ structured output for every contract

def _compiled(name: str, spec) -> dict:
    from harnessc.compiler.contract_schema import contract_plan_entry
    from harnessc.compiler.ir import Contract

    return contract_plan_entry(name, spec if isinstance(spec, Contract) else Contract.model_validate(spec))


# A contract strict structured output cannot express: a list without an item type, a free-form object.
LOOSE = {"output": {"title": {"type": "str", "rules": ["len(value) >= 3"]},
                    "findings": {"type": "list", "rules": ["len(value) >= 1"]},
                    "meta": {"type": "dict", "required": False}}}


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_asks_for_a_loose_contract_through_a_forced_tool(stream) -> None:
    entry = _compiled("report", LOOSE)
    assert not entry.provider_schemas["anthropic"]["strict"]
    answer = {"title": "Q3 report", "findings": ["up", {"k": 1}], "meta": {"any": ["thing"]}}
    req = _request(contract=entry, output_schema=entry.output_schema)
    out, api = call("anthropic", [Reply.ok(json.dumps(answer))], {"stream": stream}, request=req)
    assert isinstance(out, Response), out
    body = api.requests[0].body
    assert "output_config" not in body
    assert body["tool_choice"] == {"type": "tool", "name": "report", "disable_parallel_tool_use": True}
    [tool] = body["tools"]
    full = {k: v for k, v in entry.json_schema.items() if k != "$schema"}
    full["properties"]["title"] = {k: v for k, v in full["properties"]["title"].items() if k != "x-from-rules"}
    full["properties"]["findings"] = {k: v for k, v in full["properties"]["findings"].items() if k != "x-from-rules"}
    assert tool["name"] == "report" and tool["input_schema"] == full  # the whole contract, rules included
    assert tool["input_schema"]["properties"]["findings"] == {"type": "array", "minItems": 1}
    assert "strict" not in tool
    assert json.loads(out.text) == answer  # the tool call's input is the answer


def test_anthropic_tool_answer_cut_at_max_tokens_is_truncated() -> None:
    entry = _compiled("report", LOOSE)
    req = _request(contract=entry, output_schema=entry.output_schema)
    out, api = call("anthropic", [Reply.ok('{"title": "Q', stop="max_tokens")], request=req)
    assert isinstance(out, AgentError) and out.kind == "truncated", out


def _loosened(contract):
    """A built-in contract as seed 002 writes it: lists without an item type, dicts without fields."""
    data = contract.model_dump(mode="json", by_alias=True, exclude_none=True)
    for field in data["output"].values():
        field.pop("items", None)
        field.pop("fields", None)
    return data


def _seed_templates():
    from harnessc.compiler.contract_schema import load_builtin_contracts

    for name, contract in load_builtin_contracts().items():
        if contract.output:
            yield name, contract
            yield name + "_seed", _loosened(contract)


@pytest.mark.parametrize("name, spec", [pytest.param(n, s, id=n) for n, s in _seed_templates()])
def test_every_seed_template_gets_structured_output_on_both_apis(name, spec) -> None:
    entry = _compiled(name, spec)
    req = _request(contract=entry, output_schema=entry.output_schema)
    anthropic = make_agent("a", agent_config("a", {"provider": "anthropic", "model": "m"}), Path(".")).params(req)
    assert "output_config" in anthropic or anthropic["tool_choice"]["type"] == "tool", name
    for api in ("chat", "responses"):
        params = make_agent("o", agent_config("o", {"provider": "openai", "model": "m", "api": api}), Path(".")).params(req)
        fmt = params["response_format"]["json_schema"] if api == "chat" else params["text"]["format"]
        assert fmt["schema"]["type"] == "object" and fmt["name"] == name, (name, api)


# ------------------------------------------------------------------ nothing listening at base_url

def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # bound, then closed: connecting to it is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("provider, path", [("anthropic", ""), ("openai", "/v1")])
def test_refused_connection_names_the_url_and_is_left_to_the_task_retry_policy(provider, path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}{path}"

    async def go():
        agent = make_agent("a1", agent_config("a1", {"provider": provider, "model": "m-1", "base_url": url}), Path("."))
        try:
            await agent.call(_request())
        except AgentError as e:
            return e

    err = asyncio.run(go())
    assert err.kind == "connection" and f"cannot connect to {url} (connection refused)" in err.message
    # not backed off as transient (minutes) nor final: the task's max_retries decide
    assert err.unreachable and not err.transient and not err.final


def test_run_gives_up_on_a_refused_connection_within_the_task_retry_policy(tmp_path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]},
                                  retry={"max_retries": 1, "delays": [0]})],
                  agents={"llm": {"provider": "anthropic", "model": "m-1", "base_url": url}},
                  contracts={"summary": SIMPLE_CONTRACT})
    e = {k: v for k, v in cli_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    e.update(KEYS)
    r = inproc.harnessc("-C", str(tmp_path), "run", env=e, cwd=tmp_path)
    assert r.returncode == 1
    task = {t["id"]: t for t in json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--json", env=e).stdout)["tasks"]}["t"]
    assert task["state"] == "failed" and task["attempts"] == 2  # the first call and max_retries: 1
    assert f"cannot connect to {url}" in task["error"]
