"""What the Claude Code, Codex and Gemini CLIs print, read into an answer or a failure.

Pure functions (stdout, stderr, exit code) -> `Answer` or `Failure`; no processes here. The
shapes and quirks they handle are those recorded in shared/research/providers.md §4 and
Appendix B: Claude's result object (exit 1 *or* 0 with `is_error: true`), Codex's JSONL
events (only `turn.failed` and the exit code are authoritative), Gemini's `{response, stats}`
and its error JSON on stderr with exit codes 41/52/53/55/173 (= 429 mod 256).

An answer also lists the tool calls its permissions refused (`denials`, {tool, target}):
Claude's `permission_denials`, Codex's failed patches and sandbox-refused commands, Gemini's
rejected tool decisions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ...providers.subset import compact
from .base import MAX_CALL_COST_USD, MAX_CALL_TOKENS, reported, shown
from .errors import text_reset


@dataclass
class Answer:
    text: str  # the answer; for structured output, the JSON text of the object
    input_tokens: int = 0  # all input: uncached + cache read + cache write
    output_tokens: int = 0  # including reasoning / thinking tokens
    cost_usd: float | None = None  # only when the CLI reports one (Claude's estimate)
    notes: list[str] = field(default_factory=list)
    cache_read_tokens: int = 0  # of input_tokens
    cache_write_tokens: int = 0  # of input_tokens
    reasoning_tokens: int = 0  # of output_tokens
    denials: list[dict] = field(default_factory=list)  # tool calls the CLI refused: {tool, target}
    tool_calls: int | None = None  # tools called, as the CLI reports them (None: it does not)
    unreported: list[str] = field(default_factory=list)  # figures not believed (base.checked_charge)


@dataclass
class Failure:
    kind: str  # one of errors.KINDS
    message: str
    retry_after: float | None = None
    reset_at: float | None = None  # epoch seconds when a usage limit resets, when given
    spent: Answer | None = None  # what a failed run still reported using (Claude's error result)


# -------------------------------------------------------------------- shared classification

# "You've hit your usage limit" with a straight or a curly (U+2019) apostrophe, Claude's older
# "Claude AI usage limit reached|<epoch>", "... limit · resets 3pm".
_LIMIT = re.compile(
    r"you[\u2019']ve hit your (?:\w+ )*limit|usage limit reached|usage_limit_reached"
    r"|out of (?:extra )?usage|quota exceeded for quota metric .*per ?day",
    re.IGNORECASE,
)
_LIMIT_EPOCH = re.compile(r"limit reached\|(\d{9,11})")

_TEXT_KINDS = (  # first match wins; checked after the usage-limit pattern
    ("context_too_long", r"prompt is too long|context[_ ](?:length|window)|too many tokens|maximum context"),
    ("auth", r"invalid api key|authentication|unauthori[sz]ed|not logged in|please run /login|\b401\b|\b403\b|invalid auth method|oauth token"),
    ("rate_limited", r"rate[_ ]limit|\b429\b|too many requests|resource has been exhausted|resource_exhausted"),
    ("overloaded", r"overloaded|high demand|\b529\b|\b503\b"),
    ("timeout", r"timed out|timeout"),
    ("connection", r"connection (?:error|refused|reset)|stream disconnected|error sending request|econnrefused|network"),
    ("server", r"\b50[0-9]\b|internal server error|server error"),
    ("invalid_request", r"\b400\b|invalid[_ ]request|model[_ ]not[_ ]found|\b404\b"),
)


def limit_failure(text: str) -> Failure | None:
    """A usage-limit message (any apostrophe) as quota_exhausted, with its reset time if it
    gives one (errors.text_reset: an epoch, a date and time, or a clock time)."""
    if not text or not _LIMIT.search(text):
        return None
    message = _LIMIT_EPOCH.sub("limit reached", text.strip())  # "...limit reached|1767225600" is no sentence
    return Failure("quota_exhausted", message, reset_at=text_reset(text))


def kind_from_status(status: int | None) -> str | None:
    """The kind an HTTP status means (the CLIs pass them through), None when it says nothing."""
    if not status:
        return None
    if status == 429:
        return "rate_limited"
    if status in (401, 403):
        return "auth"
    if status == 413:
        return "context_too_long"
    if status == 408:
        return "timeout"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server"
    if 400 <= status < 500:
        return "invalid_request"
    return None


def failure_from_text(text: str, status: int | None = None, default: str = "failed") -> Failure:
    """Classify an error message: usage limit first, then the status, then the words."""
    text = (text or "").strip()
    limit = limit_failure(text)
    if limit:
        return limit
    kind = kind_from_status(status)
    if kind is None or kind == "invalid_request":  # a 400 may still say "prompt is too long"
        lowered = text.lower()
        for candidate, pattern in _TEXT_KINDS:
            if re.search(pattern, lowered):
                kind = candidate if kind is None or candidate == "context_too_long" else kind
                break
    return Failure(kind or default, text or "no error message")


def _tail(text: str, limit: int = 2000) -> str:
    return text.strip()[-limit:]


_TAIL_SCAN = 256 * 1024  # a CLI's JSON is at the end of its output; don't rescan megabytes
_MAX_STARTS = 64  # lines starting with "{" tried, from the end


def _json_objects(text: str) -> list[dict]:
    """Every line of `text` that is a JSON object (CLIs mix logs and JSON)."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def _one_json_object(text: str) -> dict | None:
    """The last JSON object that ends `text` (pretty-printed allowed, after any log lines or
    a JavaScript stack trace, as Gemini writes stderr), else its last one-line JSON object."""
    text = text.strip()[-_TAIL_SCAN:]
    decoder = json.JSONDecoder()
    starts = [i for i, c in enumerate(text) if c == "{" and (i == 0 or text[i - 1] == "\n")]
    for start in reversed(starts[-_MAX_STARTS:]):
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and not text[end:].strip():
            return value
    found = _json_objects(text)
    return found[-1] if found else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _no_output(cli: str, rc: int | None, stderr: str) -> Failure:
    msg = f"{cli} exited with {rc} without a JSON result"
    tail = _tail(stderr)
    if tail:
        msg += f"; stderr: {tail}"
    return failure_from_text(msg)


# -------------------------------------------------------------------- Claude Code

_ROOT_REFUSAL = "cannot be used with root/sudo privileges"
_CLAUDE_SUBTYPES = {  # result subtypes that are failures whatever is_error says
    "error_max_turns": ("failed", "Claude Code stopped at its turn limit"),
    "error_max_budget_usd": ("quota_exhausted", "Claude Code stopped at its --max-budget-usd"),
    "error_max_structured_output_retries": ("bad_output", "Claude Code never produced the structured output"),
    "error_during_execution": ("failed", "Claude Code failed during execution"),
}


def parse_claude(stdout: str, stderr: str, rc: int | None) -> Answer | Failure:
    """`claude -p --output-format json`: one result object on stdout."""
    result = _one_json_object(stdout)
    if result is None or result.get("type", "result") != "result":
        if _ROOT_REFUSAL in stderr:
            return Failure("invalid_request",
                           "claude refuses permissions: full as root; run harnessc as another user, "
                           "or export IS_SANDBOX=1 if this machine is a disposable sandbox")
        return _no_output("claude", rc, stderr)
    text = result.get("result")
    text = text if isinstance(text, str) else ""
    status = result.get("api_error_status")
    status = status if isinstance(status, int) else None
    subtype = result.get("subtype")
    if result.get("is_error") or (rc not in (0, None)) or status:
        why = text or _tail(stderr) or f"claude exited with {rc}"
        failure = failure_from_text(why, status)
        if result.get("terminal_reason") and result["terminal_reason"] != "api_error":
            failure.message += f" (terminal_reason: {result['terminal_reason']})"
        return _claude_spent(result, failure)
    if subtype in _CLAUDE_SUBTYPES:
        kind, what = _CLAUDE_SUBTYPES[subtype]
        return _claude_spent(result, Failure(kind, what + (f": {text}" if text else "")))
    # A usage limit can arrive as a "successful" run whose result is the limit text (#38673).
    limit = limit_failure(text) if len(text) < 300 else None
    if limit:
        return limit
    answer = Answer(text=text, denials=claude_denials(result))
    structured = result.get("structured_output")
    if structured is not None:
        answer.text = json.dumps(structured, ensure_ascii=False)
    _claude_usage(result, answer)
    return answer


# Where a tool call's input names what it acts on (Write/Edit: file_path, Bash: command, ...).
_TARGET_KEYS = ("file_path", "notebook_path", "path", "command", "url", "pattern")


def claude_denials(result: dict) -> list[dict]:
    """`permission_denials`: [{tool_name, tool_use_id, tool_input}] (seen with 2.1.332 in
    plan, default and dontAsk modes) as [{tool, target}]."""
    found = []
    for d in result.get("permission_denials") or []:
        if not isinstance(d, dict):
            continue
        given = d.get("tool_input") if isinstance(d.get("tool_input"), dict) else {}
        target = next((given[k] for k in _TARGET_KEYS if isinstance(given.get(k), str)), None)
        found.append(_denial(d.get("tool_name"), target if target is not None else compact(given) if given else ""))
    return found


def _denial(tool: Any, target: Any) -> dict:
    return {"tool": str(tool or "tool")[:100], "target": str(target or "")[:500]}


def _claude_spent(result: dict, failure: Failure) -> Failure:
    """A failed run is charged what its result object reports (it may have made calls)."""
    spent = Answer(text="")
    _claude_usage(result, spent)
    if spent.cost_usd or spent.input_tokens or spent.output_tokens:
        failure.spent = spent
    return failure


def _claude_usage(result: dict, answer: Answer) -> None:
    # modelUsage covers subagents too ("the correct field for token/cost accounting");
    # usage is the main loop only, the fallback. Cache counters are additive (Anthropic's).
    per_model = result.get("modelUsage")
    if isinstance(per_model, dict) and per_model:
        counters = [(u.get("inputTokens"), u.get("cacheReadInputTokens"), u.get("cacheCreationInputTokens"),
                     u.get("outputTokens")) for u in per_model.values() if isinstance(u, dict)]
    elif isinstance(result.get("usage"), dict):
        u = result["usage"]
        counters = [(u.get("input_tokens"), u.get("cache_read_input_tokens"),
                     u.get("cache_creation_input_tokens"), u.get("output_tokens"))]
    else:
        counters = []
    for uncached, read, write, output in counters:
        answer.cache_read_tokens += _int(read)
        answer.cache_write_tokens += _int(write)
        answer.input_tokens += _int(uncached) + _int(read) + _int(write)
        answer.output_tokens += _int(output)
    # No tool count in the result: each turn after the first answers tool results, so
    # num_turns - 1 is a lower bound (tools called in parallel share a turn).
    turns = result.get("num_turns")
    if type(turns) is int and reported(turns, MAX_CALL_TOKENS) and turns >= 1:
        answer.tool_calls = turns - 1
    cost = result.get("total_cost_usd")
    believed = reported(cost, MAX_CALL_COST_USD)
    if believed is not None:
        answer.cost_usd = float(believed)
        answer.notes.append("cost is Claude Code's own estimate at list prices (total_cost_usd)")
    elif cost is not None:  # NaN, a string, a negative or absurd figure: priced from the tokens instead
        answer.unreported.append(f"cost not reported: total_cost_usd={shown(cost)}")


# -------------------------------------------------------------------- Codex

# the item types of `codex exec --json` that are a tool the agent called
_CODEX_TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search")


def parse_codex(stdout: str, stderr: str, rc: int | None) -> Answer | Failure:
    """`codex exec --json`: JSONL events; the last agent_message is the answer."""
    text = None
    used = Answer(text="", tool_calls=0)
    failed = None
    for event in _json_objects(stdout):
        kind = event.get("type")
        item = event.get("item")
        if kind == "item.completed" and isinstance(item, dict) and item.get("type") in _CODEX_TOOL_ITEMS:
            used.tool_calls += 1
        if kind == "item.completed" and isinstance(item, dict) and item.get("type") == "agent_message":
            text = item.get("text") if isinstance(item.get("text"), str) else ""
        elif kind == "item.completed" and isinstance(item, dict):
            used.denials += codex_denials(item)
        elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
            u = event["usage"]
            # OpenAI counts cached input inside input_tokens, reasoning inside output_tokens.
            used.input_tokens += _int(u.get("input_tokens"))
            used.cache_read_tokens += _int(u.get("cached_input_tokens"))
            used.cache_write_tokens += _int(u.get("cache_write_input_tokens"))
            used.output_tokens += _int(u.get("output_tokens"))
            used.reasoning_tokens += _int(u.get("reasoning_output_tokens"))
        elif kind == "turn.failed":
            err = event.get("error")
            failed = (err.get("message") if isinstance(err, dict) else None) or "turn failed"
        # `error` events ("Reconnecting... 2/5") also appear on successful runs: not authoritative.
    if failed is not None:
        failure = failure_from_text(failed)
        if used.input_tokens or used.output_tokens:  # turns that completed before it failed
            failure.spent = used
        return failure
    if rc != 0:
        if "unexpected argument" in stderr or rc == 2:
            return Failure("invalid_request",
                           f"codex rejected its arguments (exit {rc}; is it older or newer than "
                           f"0.147?): {_tail(stderr, 500)}")
        return _no_output("codex", rc, stderr)
    if text is None:
        return Failure("bad_output", "codex ended without an agent_message")
    used.text = text
    return used


# What a command run in Codex's sandbox prints when the sandbox refuses it (Linux Landlock:
# EACCES / EROFS; macOS Seatbelt: EPERM).
_SANDBOX_REFUSAL = re.compile(r"read-only file system|permission denied|operation not permitted", re.IGNORECASE)


def codex_denials(item: dict) -> list[dict]:
    """A completed item the sandbox refused: a failed patch (each file it would change), or a
    failed command whose output is the sandbox's refusal."""
    if item.get("status") != "failed":
        return []
    if item.get("type") == "file_change":
        changes = item.get("changes") if isinstance(item.get("changes"), list) else []
        return [_denial("apply_patch", c.get("path")) for c in changes if isinstance(c, dict)] or \
            [_denial("apply_patch", "")]
    output = item.get("aggregated_output")
    if item.get("type") == "command_execution" and isinstance(output, str) and _SANDBOX_REFUSAL.search(output):
        return [_denial("shell", item.get("command"))]
    return []


# -------------------------------------------------------------------- Gemini CLI

_GEMINI_EXITS = {
    41: ("auth", "gemini could not authenticate (exit 41): set GEMINI_API_KEY"),
    42: ("invalid_request", "gemini rejected its input (exit 42)"),
    52: ("invalid_request", "gemini's configuration is invalid (exit 52)"),
    53: ("failed", "gemini stopped at its turn limit (exit 53)"),
    54: ("failed", "a gemini tool failed (exit 54)"),
    55: ("invalid_request", "gemini refuses an untrusted workspace (exit 55); this gemini may "
                            "predate --skip-trust: set GEMINI_CLI_TRUST_WORKSPACE=true in env:"),
    130: ("failed", "gemini was interrupted (exit 130)"),
    173: ("rate_limited", "gemini was rate limited (exit 173 = HTTP 429)"),
}


def gemini_denials(stats: Any) -> list[dict]:
    """`stats.tools.byName.<tool>.decisions.reject`: the calls of each tool that were refused
    (gemini reports no path)."""
    tools = stats.get("tools") if isinstance(stats, dict) else None
    by_name = tools.get("byName") if isinstance(tools, dict) else None
    found = []
    for name, tool in (by_name or {}).items():
        decisions = tool.get("decisions") if isinstance(tool, dict) else None
        rejected = _int(decisions.get("reject")) if isinstance(decisions, dict) else 0
        if rejected:
            found.append(_denial(name, f"({rejected} call{'s' if rejected > 1 else ''})"))
    return found


def parse_gemini(stdout: str, stderr: str, rc: int | None) -> Answer | Failure:
    """`gemini -p ... -o json`: {response, stats} on stdout; errors as JSON on stderr."""
    out = _one_json_object(stdout)
    if rc == 0 and out is not None and "error" not in out:
        answer = Answer(text=out.get("response") if isinstance(out.get("response"), str) else "")
        models = (out.get("stats") or {}).get("models") if isinstance(out.get("stats"), dict) else None
        for m in (models or {}).values():
            tokens = m.get("tokens") if isinstance(m, dict) else None
            if isinstance(tokens, dict):
                # prompt = all input (cached included); thoughts are billed as output
                answer.input_tokens += _int(tokens.get("prompt")) or _int(tokens.get("input"))
                answer.cache_read_tokens += _int(tokens.get("cached"))
                answer.output_tokens += _int(tokens.get("candidates")) + _int(tokens.get("thoughts"))
                answer.reasoning_tokens += _int(tokens.get("thoughts"))
        answer.denials = gemini_denials(out.get("stats"))
        tools = (out.get("stats") or {}).get("tools") if isinstance(out.get("stats"), dict) else None
        if isinstance(tools, dict) and type(tools.get("totalCalls")) is int and \
                reported(tools["totalCalls"], MAX_CALL_TOKENS) is not None:
            answer.tool_calls = tools["totalCalls"]
        return answer
    err_obj = out if out is not None and "error" in out else _one_json_object(stderr)
    err = err_obj.get("error") if isinstance(err_obj, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    code = code if isinstance(code, int) else None
    kind, what = _GEMINI_EXITS.get(rc, (None, None))
    if message:
        failure = failure_from_text(message, code)
        if failure.kind == "failed" and kind:
            failure.kind = kind
        return failure
    if kind:
        return Failure(kind, what + (f"; stderr: {_tail(stderr, 500)}" if stderr.strip() else ""))
    if rc == 0:
        return Failure("bad_output", "gemini printed no JSON response")
    return _no_output("gemini", rc, stderr)
