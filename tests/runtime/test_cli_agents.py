"""claude-code, codex, gemini-cli against fake executables replaying the outputs recorded from
the real CLIs (shared/research/providers.md §4 and Appendix B): argv, environment, parsed
answers, usage, cost and error kinds."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from harnessc.providers import agent_config
from harnessc.runtime.agents.base import AgentError, Request, make_agent
from harnessc.runtime.agents.cli import PERMISSIONS
from harnessc.runtime.agents.cli_output import Answer, Failure, parse_claude, parse_codex, parse_gemini
from harnessc.runtime.agents.errors import clock_reset

from . import virtual
from .helpers import SIMPLE_CONTRACT, node, write_project, env as cli_env

CLAUDE_OK = {
    "type": "result", "subtype": "success", "is_error": False, "api_error_status": None,
    "duration_ms": 1200, "num_turns": 1, "result": "Hello from Claude", "stop_reason": "end_turn",
    "terminal_reason": "completed", "session_id": "s1", "total_cost_usd": 0.000141,
    "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
              "output_tokens": 5},
    "modelUsage": {"claude-sonnet-4-6": {"inputTokens": 10, "outputTokens": 5,
                                         "cacheReadInputTokens": 100, "cacheCreationInputTokens": 20,
                                         "costUSD": 0.000141, "costBasis": "list"},
                   "claude-haiku-4-5": {"inputTokens": 3, "outputTokens": 2,
                                        "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0}},
}
CLAUDE_429 = {
    "type": "result", "subtype": "success", "is_error": True, "api_error_status": 429,
    "terminal_reason": "api_error", "total_cost_usd": 0,
    "result": "API Error: Request rejected (429) \u00b7 Rate limited",
}
CODEX_OK = "\n".join(json.dumps(e) for e in [
    {"type": "thread.started", "thread_id": "t1"},
    {"type": "item.completed", "item": {"id": "i0", "type": "error",
                                        "text": "Model metadata for `m` not found"}},
    {"type": "turn.started"},
    {"type": "error", "message": "Reconnecting... 2/5"},
    {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "first"}},
    {"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": '{"title": "t", "score": 2}'}},
    {"type": "turn.completed", "usage": {"input_tokens": 1000, "cached_input_tokens": 800,
                                         "output_tokens": 200, "reasoning_output_tokens": 50}},
]) + "\n"
CODEX_LIMIT = "\n".join(json.dumps(e) for e in [
    {"type": "thread.started", "thread_id": "t1"}, {"type": "turn.started"},
    {"type": "error", "message": "You\u2019ve hit your usage limit. Try again later."},
    {"type": "turn.failed", "error": {"message": "You\u2019ve hit your usage limit. Try again later."}},
]) + "\n"
GEMINI_OK = {"session_id": "g1", "response": "Hello from Gemini", "stats": {
    "models": {"gemini-2.5-flash": {"api": {"totalRequests": 1, "totalErrors": 0},
                                    "tokens": {"input": 40, "prompt": 50, "candidates": 7,
                                               "total": 60, "cached": 10, "thoughts": 3, "tool": 0}}},
    "tools": {}, "files": {}}}
GEMINI_429_STDERR = json.dumps({"session_id": "g1", "error": {
    "type": "Error", "message": "Resource has been exhausted (e.g. check quota).", "code": 429}}, indent=2)


# ------------------------------------------------------------------ parsers (pure)

def test_claude_success_usage_covers_every_model_and_cache_and_cost_is_the_cli_estimate():
    a = parse_claude(json.dumps(CLAUDE_OK), "", 0)
    assert isinstance(a, Answer) and a.text == "Hello from Claude"
    assert (a.input_tokens, a.output_tokens) == (10 + 100 + 20 + 3, 5 + 2)
    assert a.cost_usd == 0.000141 and "estimate" in a.notes[0]


def test_claude_structured_output_first_then_result_text():
    a = parse_claude(json.dumps({**CLAUDE_OK, "structured_output": {"title": "x", "score": 1}}), "", 0)
    assert json.loads(a.text) == {"title": "x", "score": 1}
    # --json-schema with a model that never called the StructuredOutput tool: null, JSON in result
    b = parse_claude(json.dumps({**CLAUDE_OK, "structured_output": None,
                                 "result": 'Here: {"title": "y", "score": 2}'}), "", 0)
    assert b.text == 'Here: {"title": "y", "score": 2}'


@pytest.mark.parametrize("rc", [0, 1])  # 2.1.49 exited 0 with is_error, 2.1.330 exits 1
def test_claude_is_error_429_is_rate_limited_whatever_the_exit_code(rc):
    f = parse_claude(json.dumps(CLAUDE_429), "", rc)
    assert isinstance(f, Failure) and f.kind == "rate_limited" and "429" in f.message


@pytest.mark.parametrize("status,text,kind", [
    (529, "API Error: 529 Overloaded", "overloaded"),
    (401, "Invalid API key \u00b7 Fix external API key", "auth"),
    (500, "API Error: 500 Internal server error", "server"),
    (400, "API Error: 400 prompt is too long: 250000 tokens > 200000 maximum", "context_too_long"),
    (None, "Claude AI usage limit reached|1767225600", "quota_exhausted"),
])
def test_claude_error_kinds(status, text, kind):
    f = parse_claude(json.dumps({**CLAUDE_429, "api_error_status": status, "result": text}), "", 1)
    assert f.kind == kind, f


@pytest.mark.parametrize("apostrophe", ["'", "\u2019"])
def test_usage_limit_with_either_apostrophe_is_quota_exhausted_even_on_success(apostrophe):
    text = f"You{apostrophe}ve hit your session limit \u00b7 resets 3pm (Europe/Paris)"
    f = parse_claude(json.dumps({**CLAUDE_OK, "result": text}), "", 0)  # is_error false (#38673)
    assert isinstance(f, Failure) and f.kind == "quota_exhausted" and "resets 3pm" in f.message
    g = parse_claude(json.dumps({**CLAUDE_429, "result": text}), "", 1)
    assert g.kind == "quota_exhausted"


NOW = 1795455000.0  # 2026-11-23 17:30:00 UTC


@pytest.mark.parametrize("text,reset", [
    ("You\u2019ve hit your limit \u00b7 resets 6pm (UTC)", "2026-11-23T18:00:00+00:00"),  # later today
    ("You\u2019ve hit your limit \u00b7 resets 3pm (UTC)", "2026-11-24T15:00:00+00:00"),  # passed: tomorrow
    ("Your limit will reset at 15:30 (GMT)", "2026-11-24T15:30:00+00:00"),
    ("resets 12am (UTC)", "2026-11-24T00:00:00+00:00"),
])
def test_usage_limit_clock_time_is_the_next_reset(text, reset):
    assert clock_reset(text, NOW) == datetime.datetime.fromisoformat(reset).timestamp()


@pytest.mark.parametrize("text", ["resets 3", "resets 13pm (UTC)", "resets 3pm (Mars/Olympus)",
                                  "resets Nov 24, 3pm", "Try again later."])
def test_usage_limit_without_a_readable_clock_time_has_no_reset(text):
    assert clock_reset(text, NOW) is None


def test_claude_usage_limit_with_a_clock_time_carries_its_reset(tmp_path):
    exe = fake_cli(tmp_path / "bin", "claude", rc=1, stdout=_claude_error(
        429, "rate_limit_error", "API Error: Request rejected (429) \u00b7 You\u2019ve hit your usage limit"
                                 " \u00b7 resets 3pm (UTC)"))
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == "quota_exhausted" and e.value.reset_at is not None
    assert 0 < e.value.reset_at - time.time() <= 24 * 3600


def test_claude_usage_limit_epoch_is_the_reset_time():
    f = parse_claude(json.dumps({**CLAUDE_429, "api_error_status": None,
                                 "result": "Claude AI usage limit reached|1767225600"}), "", 1)
    assert (f.kind, f.reset_at) == ("quota_exhausted", 1767225600.0)
    assert "|" not in f.message


def test_claude_root_refusal_names_the_way_out():
    f = parse_claude("", "--dangerously-skip-permissions cannot be used with root/sudo privileges "
                         "for security reasons", 1)
    assert f.kind == "invalid_request" and "IS_SANDBOX=1" in f.message


def test_claude_without_json_is_a_failure_with_stderr():
    f = parse_claude("", "Error: boom", 1)
    assert f.kind == "failed" and "boom" in f.message


def test_codex_last_agent_message_and_turn_usage_non_fatal_errors_ignored():
    a = parse_codex(CODEX_OK, "", 0)
    assert isinstance(a, Answer) and a.text == '{"title": "t", "score": 2}'
    assert (a.input_tokens, a.output_tokens, a.cost_usd) == (1000, 200, None)


def test_codex_turn_failed_usage_limit_curly_apostrophe():
    f = parse_codex(CODEX_LIMIT, "", 1)
    assert f.kind == "quota_exhausted" and "\u2019" in f.message


@pytest.mark.parametrize("message,kind", [
    ("We\u2019re currently experiencing high demand, which may cause temporary errors.", "overloaded"),
    ("exceeded retry limit, last status: 500 Internal Server Error", "server"),
    ("stream disconnected before completion: error sending request", "connection"),
    ("unexpected status 401 Unauthorized: Incorrect API key provided", "auth"),
    ("unexpected status 429 Too Many Requests: Rate limit reached", "rate_limited"),
])
def test_codex_turn_failed_kinds(message, kind):
    events = json.dumps({"type": "turn.failed", "error": {"message": message}}) + "\n"
    assert parse_codex(events, "", 1).kind == kind


def test_codex_removed_flag_is_invalid_request():
    f = parse_codex("", "error: unexpected argument '--full-auto' found", 2)
    assert f.kind == "invalid_request"


def test_gemini_success_tokens_include_cache_and_thoughts():
    a = parse_gemini(json.dumps(GEMINI_OK), "", 0)
    assert (a.text, a.input_tokens, a.output_tokens, a.cost_usd) == ("Hello from Gemini", 50, 10, None)


def test_gemini_173_with_stderr_json_is_rate_limited():
    f = parse_gemini("", "Attempt 10 failed...\n" + GEMINI_429_STDERR, 173)
    assert f.kind == "rate_limited" and "exhausted" in f.message
    assert parse_gemini("", "", 173).kind == "rate_limited"


@pytest.mark.parametrize("rc,kind", [(41, "auth"), (52, "invalid_request"), (53, "failed"),
                                     (55, "invalid_request")])
def test_gemini_exit_codes(rc, kind):
    f = parse_gemini("", "Workspace is not trusted.", rc)
    assert f.kind == kind and str(rc) in f.message


def test_gemini_daily_quota_is_quota_exhausted():
    stderr = json.dumps({"error": {"message": "Quota exceeded for quota metric 'Generate Content "
                                              "requests' and limit 'per day per user'", "code": 429}})
    assert parse_gemini("", stderr, 173).kind == "quota_exhausted"


# ------------------------------------------------------------------ agents with fake executables

def fake_cli(directory: Path, name: str, stdout: str = "", stderr: str = "", rc: int = 0) -> Path:
    """An executable `name` that logs its argv, stdin and environment, then replays an output."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    log = directory / f"{name}.log.json"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'stdin': sys.stdin.read(), 'env': dict(os.environ)}},"
        f" open({str(log)!r}, 'w'))\n"
        f"sys.stdout.write({stdout!r}); sys.stderr.write({stderr!r}); sys.exit({rc})\n",
        encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def seen(script: Path) -> dict:
    return json.loads((script.parent / f"{script.name}.log.json").read_text("utf-8"))


def call(agent, **kw):
    req = Request(task_id="t1", prompt="Do it.", system="You are careful.", **kw)
    return asyncio.run(agent.call(req))


def test_claude_code_argv_env_and_answer(tmp_path, monkeypatch):
    exe = fake_cli(tmp_path / "bin", "claude", stdout=json.dumps(
        {**CLAUDE_OK, "structured_output": {"title": "x", "score": 1}}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-123456")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-claude")
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code", "command": [str(exe)], "model": "sonnet",
                              "permissions": "edit", "base_url": "http://127.0.0.1:9"}), tmp_path)
    resp = call(agent, output_schema=SIMPLE_CONTRACT["json_schema"])
    assert json.loads(resp.text) == {"title": "x", "score": 1}
    assert resp.cost_usd == 0.000141 and resp.usage.total == 140
    got = seen(exe)
    schema = json.dumps(SIMPLE_CONTRACT["json_schema"], separators=(",", ":"))
    assert got["argv"] == ["-p", "--output-format", "json", "--model", "sonnet",
                           "--json-schema", schema, "--permission-mode", "acceptEdits"]
    assert got["stdin"] == "You are careful.\n\nDo it."
    e = got["env"]
    assert e["ANTHROPIC_API_KEY"] == "sk-ant-test-123456" and "OPENAI_API_KEY" not in e
    assert e["CLAUDE_CODE_MAX_RETRIES"] == "0" and e["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"


def test_claude_code_error_carries_its_kind(tmp_path):
    exe = fake_cli(tmp_path / "bin", "claude", stdout=json.dumps(CLAUDE_429), rc=1)
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == "rate_limited" and e.value.transient
    assert "agent 'cc' (claude-code)" in e.value.message
    assert seen(exe)["argv"][-2:] == PERMISSIONS["claude-code"]["read-only"]


def test_claude_code_usage_limit_is_final_with_reset(tmp_path):
    exe = fake_cli(tmp_path / "bin", "claude", rc=1, stdout=json.dumps(
        {**CLAUDE_429, "api_error_status": None, "result": "Claude AI usage limit reached|1767225600"}))
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert (e.value.kind, e.value.reset_at, e.value.transient) == ("quota_exhausted", 1767225600.0, False)


def test_codex_argv_schema_file_custom_provider_and_price(tmp_path, monkeypatch):
    exe = fake_cli(tmp_path / "bin", "codex", stdout=CODEX_OK)
    monkeypatch.setenv("MY_KEY", "sk-local-abcdef")
    agent = make_agent("cx", agent_config("cx", {"provider": "codex", "command": [str(exe)], "model": "gpt-5",
                              "permissions": "edit", "base_url": "http://127.0.0.1:9/v1",
                              "api_key_env": "MY_KEY", "price": {"input": 1.0, "output": 10.0}}),
                       tmp_path)
    contract = {**SIMPLE_CONTRACT, "provider_schemas": {"openai": {
        "schema": SIMPLE_CONTRACT["json_schema"], "moved": [], "strict": True}}}
    resp = call(agent, output_schema=SIMPLE_CONTRACT["json_schema"], contract=contract)
    assert resp.text == '{"title": "t", "score": 2}'
    assert resp.cost_usd == pytest.approx((1000 * 1.0 + 200 * 10.0) / 1e6)
    got = seen(exe)
    argv = got["argv"]
    assert argv[:4] == ["exec", "--json", "--skip-git-repo-check", "--ephemeral"]
    assert "--full-auto" not in argv and argv[-1] == "-"
    assert argv[argv.index("-s") + 1] == "workspace-write" and 'approval_policy="never"' in argv
    assert "model_providers.harnessc.request_max_retries=0" in argv
    assert 'model_providers.harnessc.env_key="MY_KEY"' in argv
    schema_file = argv[argv.index("--output-schema") + 1]
    assert not os.path.exists(schema_file)  # removed after the call
    assert got["env"]["MY_KEY"] == "sk-local-abcdef"


def test_codex_turn_failed_is_quota_exhausted(tmp_path):
    exe = fake_cli(tmp_path / "bin", "codex", stdout=CODEX_LIMIT, rc=1)
    agent = make_agent("cx", agent_config("cx", {"provider": "codex", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == "quota_exhausted"
    assert "--output-schema" not in seen(exe)["argv"]  # no schema without a strict subset


def test_gemini_argv_and_answer(tmp_path, monkeypatch):
    exe = fake_cli(tmp_path / "bin", "gemini", stdout=json.dumps(GEMINI_OK))
    monkeypatch.setenv("GEMINI_API_KEY", "gm-key-123456")
    agent = make_agent("gm", agent_config("gm", {"provider": "gemini-cli", "command": [str(exe)], "model": "gemini-2.5-flash",
                              "permissions": "full"}), tmp_path)
    resp = call(agent)
    assert resp.text == "Hello from Gemini" and resp.usage.total == 60 and resp.cost_usd == 0
    got = seen(exe)
    assert got["argv"] == ["-p", "You are careful.\n\nDo it.", "-o", "json", "-m", "gemini-2.5-flash",
                           "--skip-trust", "--approval-mode", "yolo"]
    assert got["env"]["GEMINI_API_KEY"] == "gm-key-123456"


@pytest.mark.parametrize("rc,stderr,kind", [(173, GEMINI_429_STDERR, "rate_limited"),
                                            (55, "Workspace is not trusted", "invalid_request")])
def test_gemini_errors(tmp_path, rc, stderr, kind):
    exe = fake_cli(tmp_path / "bin", "gemini", stderr=stderr, rc=rc)
    agent = make_agent("gm", agent_config("gm", {"provider": "gemini-cli", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == kind


def test_missing_cli_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code"}), tmp_path)
    with pytest.raises(AgentError, match="command not found: 'claude'"):
        call(agent)


# ------------------------------------------------------------------ end to end, real harnessc run

def test_harnessc_run_through_a_fake_claude_on_path(tmp_path):
    root = tmp_path / "proj"
    bindir = tmp_path / "bin"
    fake_cli(bindir, "claude", stdout=json.dumps(
        {**CLAUDE_OK, "structured_output": None, "result": '```json\n{"title": "ok", "score": 4}\n```'}))
    write_project(root, [node("t1", contract="summary", routing={"agent": "cc", "chain": ["cc"]})],
                  agents={"cc": {"provider": "claude-code", "model": "haiku"}},
                  contracts={"summary": SIMPLE_CONTRACT})
    e = cli_env(PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    r = virtual.harnessc(root, "run", env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    status = json.loads(virtual.harnessc(root, "status", "--json", env=e).stdout)
    text = json.dumps(status)
    assert '"succeeded"' in text and "0.000141" in text, text
    got = seen(bindir / "claude")
    assert got["argv"][:5] == ["-p", "--output-format", "json", "--model", "haiku"]
    assert "--json-schema" in got["argv"]


def test_gemini_error_json_after_a_javascript_stack_trace():
    # what gemini 0.61 wrote to stderr on a 429 (probe against a loopback server)
    stderr = ("Error when talking to Gemini API {\n  cause: {\n    code: 429,\n    message: 'Resource"
              " has been exhausted (e.g. check quota).',\n    details: []\n  },\n  status: 429\n}\n"
              + GEMINI_429_STDERR + "\n")
    f = parse_gemini("", stderr, 173)
    assert f.kind == "rate_limited" and f.message == "Resource has been exhausted (e.g. check quota)."


# ------------------------------------------------------------------ shapes seen from the real CLIs
# Recorded 2026-11-23 against a loopback fake server: claude 2.1.330, codex 0.169.0, gemini 0.61.0
# (docs/providers.md, "Verified against").

GEMINI_41_STDERR = ('{\n  "session_id": "c8e8cd5e",\n  "error": {\n    "type": "Error",\n'
                    '    "message": "Invalid auth method selected.",\n    "code": 41\n  }\n}\n')


def test_gemini_base_url_without_api_key_auth_says_what_to_set(tmp_path):
    exe = fake_cli(tmp_path / "bin", "gemini", stderr=GEMINI_41_STDERR, rc=41)
    agent = make_agent("gm", agent_config("gm", {"provider": "gemini-cli", "command": [str(exe)],
                              "base_url": "http://127.0.0.1:9"}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == "auth" and not e.value.transient
    assert "Invalid auth method selected." in e.value.message
    assert '"selectedType": "gemini-api-key"' in e.value.message and "settings.json" in e.value.message
    assert seen(exe)["env"]["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9"


def test_gemini_invalid_auth_without_base_url_has_no_settings_hint(tmp_path):
    exe = fake_cli(tmp_path / "bin", "gemini", stderr=GEMINI_41_STDERR, rc=41)
    agent = make_agent("gm", agent_config("gm", {"provider": "gemini-cli", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == "auth" and "settings.json" not in e.value.message


def _claude_error(status: int, etype: str, result: str) -> str:
    # claude 2.1.330 with CLAUDE_CODE_MAX_RETRIES=0: one request, exit 1, this object on stdout
    return json.dumps({"type": "result", "subtype": "success", "is_error": True, "api_error_status": status,
                       "api_error_type": etype, "terminal_reason": "api_error", "stop_reason": "stop_sequence",
                       "total_cost_usd": 0, "modelUsage": {}, "num_turns": 1, "result": result})


@pytest.mark.parametrize("status,etype,result,kind", [
    (429, "rate_limit_error", "API Error: Request rejected (429) \u00b7 Number of request tokens has exceeded"
                              " your per-minute rate limit", "rate_limited"),
    (429, "rate_limit_error", "API Error: Request rejected (429) \u00b7 You\u2019ve hit your usage limit"
                              " \u00b7 resets 3pm (UTC)", "quota_exhausted"),
    (529, "overloaded_error", "API Error: 529 Overloaded. This is a server-side issue, usually temporary \u2014"
                              " try again in a moment.", "overloaded"),
    (401, "authentication_error", "Invalid API key \u00b7 Fix external API key", "auth"),
])
def test_claude_api_errors_as_seen(tmp_path, status, etype, result, kind):
    exe = fake_cli(tmp_path / "bin", "claude", stdout=_claude_error(status, etype, result) + "\n", rc=1)
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == kind and result in e.value.message


def _codex_failed(message: str) -> str:
    return "\n".join(json.dumps(e) for e in [
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "error", "message":
                                            "Model metadata for `gpt-5.2` not found. Defaulting to fallback metadata"}},
        {"type": "turn.started"}, {"type": "error", "message": message},
        {"type": "turn.failed", "error": {"message": message}}]) + "\n"


@pytest.mark.parametrize("message,kind", [
    ("exceeded retry limit, last status: 429 Too Many Requests", "rate_limited"),
    ("You\u2019ve hit your usage limit. Try again later.", "quota_exhausted"),
    ("We\u2019re currently experiencing high demand, which may cause temporary errors.", "overloaded"),
])
def test_codex_failures_as_seen(tmp_path, message, kind):
    warning = ('WARNING: proceeding, even though we could not create PATH aliases: Refusing to create'
               ' helper binaries under temporary dir "/tmp"\n')
    exe = fake_cli(tmp_path / "bin", "codex", stdout=_codex_failed(message), stderr=warning, rc=1)
    agent = make_agent("cx", agent_config("cx", {"provider": "codex", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == kind and message in e.value.message


def test_gemini_daily_quota_as_seen_after_ten_requests(tmp_path):
    quota = ("Quota exceeded for quota metric 'Generate Content API requests per day' and limit"
             " 'GenerateContent request limit per day' of service 'generativelanguage.googleapis.com'")
    stderr = ("    at async main (file:///usr/lib/node_modules/@google/gemini-cli/bundle/gemini-3HFX2LNT.js:17627:5) {\n"
              f"  cause: {{\n    code: 429,\n    message: \"{quota}\",\n    details: []\n  }},\n"
              "  retryDelayMs: undefined,\n  status: 429\n}\n"
              + json.dumps({"session_id": "6df384a8", "error": {"type": "Error", "message": quota, "code": 429}},
                           indent=2) + "\n")
    exe = fake_cli(tmp_path / "bin", "gemini", stderr=stderr, rc=173)
    agent = make_agent("gm", agent_config("gm", {"provider": "gemini-cli", "command": [str(exe)]}), tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == "quota_exhausted" and e.value.message.endswith(quota)


# ------------------------------------------------------------------ refused tool calls (permissions)

# claude 2.1.332, `--permission-mode plan`, a model that called Write: exit 0, a "successful"
# result, and the refused call in permission_denials (probe against a loopback server)
CLAUDE_DENIED = {**CLAUDE_OK, "result": "I could not write the file. <promise>DONE</promise>",
                 "permission_denials": [
                     {"tool_name": "Write", "tool_use_id": "toolu_1",
                      "tool_input": {"file_path": "src/app.py", "content": "print('hi')\n"}},
                     {"tool_name": "Bash", "tool_use_id": "toolu_2", "tool_input": {"command": "rm -rf build"}},
                     {"tool_name": "WebFetch", "tool_use_id": "toolu_3", "tool_input": {"prompt": "x"}}]}


def test_claude_permission_denials_are_read():
    a = parse_claude(json.dumps(CLAUDE_DENIED), "", 0)
    assert isinstance(a, Answer)
    assert a.denials == [{"tool": "Write", "target": "src/app.py"}, {"tool": "Bash", "target": "rm -rf build"},
                         {"tool": "WebFetch", "target": '{"prompt":"x"}'}]
    assert parse_claude(json.dumps(CLAUDE_OK), "", 0).denials == []


def test_codex_sandbox_refusals_are_denials():
    events = [
        {"type": "item.completed", "item": {"id": "i1", "type": "file_change", "status": "failed",
                                            "changes": [{"path": "src/app.py", "kind": "update"}]}},
        {"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": "touch x",
                                            "aggregated_output": "touch: cannot touch 'x': Read-only file system",
                                            "exit_code": 1, "status": "failed"}},
        {"type": "item.completed", "item": {"id": "i3", "type": "command_execution", "command": "pytest",
                                            "aggregated_output": "1 failed", "exit_code": 1, "status": "failed"}},
        {"type": "item.completed", "item": {"id": "i4", "type": "agent_message", "text": "done"}},
    ]
    a = parse_codex("\n".join(json.dumps(e) for e in events), "", 0)
    assert a.denials == [{"tool": "apply_patch", "target": "src/app.py"}, {"tool": "shell", "target": "touch x"}]


def test_gemini_rejected_tool_decisions_are_denials():
    stats = {"tools": {"totalCalls": 3, "byName": {
        "write_file": {"count": 2, "success": 0, "fail": 2,
                       "decisions": {"accept": 0, "reject": 2, "modify": 0, "auto_accept": 0}},
        "read_file": {"count": 1, "success": 1, "fail": 0,
                      "decisions": {"accept": 0, "reject": 0, "modify": 0, "auto_accept": 1}}}}}
    a = parse_gemini(json.dumps({**GEMINI_OK, "stats": {**GEMINI_OK["stats"], **stats}}), "", 0)
    assert a.denials == [{"tool": "write_file", "target": "(2 calls)"}]


def test_a_denied_write_is_on_the_attempt_and_in_the_log(tmp_path):
    root, bindir = tmp_path / "proj", tmp_path / "bin"
    fake_cli(bindir, "claude", stdout=json.dumps(CLAUDE_DENIED))
    write_project(root, [node("t1", completion_promise="DONE", routing={"agent": "cc", "chain": ["cc"]})],
                  agents={"cc": {"provider": "claude-code", "permissions": "read-only"}})
    e = cli_env(PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    r = virtual.harnessc(root, "run", env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    log = virtual.harnessc(root, "log", "t1", env=e).stdout
    assert "--- denied: Write src/app.py\n" in log and "--- denied: Bash rm -rf build\n" in log
    [attempt] = json.loads(virtual.harnessc(root, "log", "t1", "--output", "json", env=e).stdout)
    assert attempt["denials"][0] == {"tool": "Write", "target": "src/app.py"}


def test_a_cli_whose_server_refuses_the_connection_names_its_base_url(tmp_path):
    exe = fake_cli(tmp_path / "bin", "claude", rc=1, stdout=json.dumps({
        "type": "result", "subtype": "success", "is_error": True, "terminal_reason": "api_error",
        "result": "API Error: Connection error. (connect ECONNREFUSED 127.0.0.1:9)"}))
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code", "command": [str(exe)], "base_url": "http://127.0.0.1:9"}),
                       tmp_path)
    with pytest.raises(AgentError) as e:
        call(agent)
    assert e.value.kind == "connection" and "(base_url http://127.0.0.1:9)" in e.value.message
    assert e.value.unreachable and not e.value.transient and not e.value.final


def test_recorded_denials_and_unreachable_errors_replay_as_recorded(tmp_path):
    from harnessc.runtime.agents.cassettes import Cassettes, normalized
    from harnessc.workspace import Workspace

    ws = Workspace(tmp_path)
    exe = fake_cli(tmp_path / "bin", "claude", stdout=json.dumps(CLAUDE_DENIED))
    cfg = agent_config("cc", {"provider": "claude-code", "command": [str(exe)]})
    rec = Cassettes(ws, "record")
    recorded = call(rec.agent("cc", cfg))
    req = Request(task_id="t1", prompt="Again.", system="You are careful.")
    rec.record(normalized("cc", cfg, req), "error", {
        "kind": "connection", "message": "cannot connect", "unreachable": True})
    replay = Cassettes(ws, "replay").agent("cc", cfg)
    assert call(replay).denials == recorded.denials == parse_claude(json.dumps(CLAUDE_DENIED), "", 0).denials
    with pytest.raises(AgentError) as e:
        asyncio.run(replay.call(req))
    assert e.value.unreachable and not e.value.transient and not e.value.final


def test_claude_code_schema_too_long_for_an_argument_goes_to_the_prompt(tmp_path):
    """Linux refuses one argument over 128 KiB and --json-schema takes only JSON text: a
    longer schema is given in the prompt on stdin (the answer is still checked locally)."""
    exe = fake_cli(tmp_path / "bin", "claude", stdout=json.dumps(
        {**CLAUDE_OK, "structured_output": {"title": "x", "score": 1}}))
    schema = {"type": "object", "required": ["title"],
              "properties": {f"field_{i}": {"type": "string", "description": "d" * 100} for i in range(2000)}}
    assert len(json.dumps(schema)) > 200_000
    agent = make_agent("cc", agent_config("cc", {"provider": "claude-code", "command": [str(exe)]}), tmp_path)
    resp = call(agent, output_schema=schema)
    assert json.loads(resp.text) == {"title": "x", "score": 1}
    got = seen(exe)
    assert "--json-schema" not in got["argv"] and max(len(a) for a in got["argv"]) < 100_000
    assert got["stdin"].startswith("You are careful.\n\nDo it.")
    assert json.dumps(schema, separators=(",", ":")) in got["stdin"] and "## Output schema" in got["stdin"]
    small = call(agent, output_schema=SIMPLE_CONTRACT["json_schema"])  # a short one stays an argument
    assert small.text and "--json-schema" in seen(exe)["argv"] and "## Output schema" not in seen(exe)["stdin"]
