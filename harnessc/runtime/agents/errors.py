"""The error taxonomy every agent speaks, and how an SDK failure maps onto it.

An agent call fails with an `AgentError` whose `kind` says what went wrong:

* retried (on the same agent, capped and jittered backoff, `retry_after` honoured - never
  earlier): rate_limited, overloaded, server, timeout, connection, truncated, bad_output;
* not retried on the same agent: quota_exhausted (with `reset_at` when the API gave one),
  auth (the message names the variable to set), invalid_request, refusal, context_too_long,
  not_recorded (`run --replay`: the cassettes hold no answer for the request), and `failed`
  (anything else, e.g. a command agent's non-zero exit).

The server may overrule the kind's decision with `x-should-retry: true|false` (both SDKs
honour it; so does `classify`). A 429 without retry-after waits for the rate-limit reset
headers (`anthropic-ratelimit-*-reset`, `x-ratelimit-reset-*`). A quota or usage limit's reset
time comes from those headers, else from its message (`text_reset`: an epoch, a date and
time, or a clock time; the CLIs' usage-limit messages are read the same way).

`classify()` turns an exception raised by the anthropic/openai SDKs (or by httpx2 under
them, or by json for a 200 whose body is not JSON) into an AgentError. It looks at class
names, `status_code` and the error body's type/code only, so this module imports no SDK.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import math
import random
import re
import zoneinfo
from typing import Any, Mapping

from .. import clock
from .usage import NO_PRICE, PRICE, Charge, checked_charge

RETRIED = frozenset({"rate_limited", "overloaded", "server", "timeout", "connection", "truncated",
                     "bad_output"})
NOT_RETRIED = frozenset({"quota_exhausted", "auth", "invalid_request", "refusal", "context_too_long",
                         "not_recorded", "failed"})
KINDS = RETRIED | NOT_RETRIED

BACKOFF_BASE = 1.0  # seconds before the first retry without a retry-after
BACKOFF_CAP = 30.0  # the longest wait backoff alone chooses


class AgentError(Exception):
    """A failed call, of one `kind` (see the module docstring); `transient` means retried."""

    def __init__(self, message: str, transient: bool = False, retry_after: float | None = None,
                 stderr: str = "", kind: str | None = None, reset_at: float | None = None,
                 usage: Any = None, cost_usd: float = 0.0, retry: bool | None = None,
                 cost_source: str | None = None, unreachable: bool = False,
                 unreported: list[str] | None = None, deprecated: str | None = None):
        super().__init__(message)
        if kind is None:  # callers from before the taxonomy say only transient or not
            kind = "server" if transient else "failed"
        if kind not in KINDS:
            raise ValueError(f"unknown agent error kind {kind!r}")
        self.message = message
        self.kind = kind
        self.retry_after = retry_after
        self.reset_at = reset_at  # epoch seconds when a quota or limit resets, when known
        self.stderr = stderr
        self.usage = usage  # usage.Usage of a call that was answered but unusable (e.g. truncated)
        self.cost_usd = cost_usd  # what that answer cost; 0 when no response came
        self.retry = retry  # the server's x-should-retry, when it overrules the kind
        self.cost_source = cost_source  # usage.COST_SOURCES; None: no usage, "no_response"
        # Nothing answered at the address (connection refused, no such host): a server that is
        # down or a wrong base_url, which backing off for minutes does not fix. Retried like a
        # failed verification instead: the task's max_retries, with its retry_delays.
        self.unreachable = unreachable
        self.unreported = list(unreported or [])  # figures not believed (usage.checked_charge)
        self.deprecated = deprecated  # the end-of-life date the SDK gave for the model (deprecation.py)

    @property
    def transient(self) -> bool:
        if self.unreachable:
            return False
        return self.kind in RETRIED if self.retry is None else self.retry

    def charged(self) -> Charge:
        """The attempt's ledger figures: what an unusable answer used and cost, or nothing
        and "no_response" when no usage was reported."""
        if self.usage is None:
            return Charge()
        usage, cost, source, unreported = checked_charge(
            self.usage, self.cost_usd, self.cost_source or (PRICE if self.cost_usd else NO_PRICE))
        return Charge(usage, cost, source, unreported=(*self.unreported, *unreported))

    @property
    def final(self) -> bool:
        """Whether retrying on the same agent is pointless (a key, a quota, the request itself)."""
        return not self.transient and self.kind != "failed" and not self.unreachable


class AnswerError(Exception):
    """An error the API reported inside a 200 answer (a Responses stream's `error` event, a
    `response.failed` event or a non-streamed response with status `failed`), raised by an
    agent so that `classify` treats it like any error event inside a stream."""

    status_code = 200

    def __init__(self, message: str, code: str | None = None, error_type: str | None = None):
        super().__init__(message)
        self.body = {"error": {"type": error_type or code or "", "code": code, "message": message}}


def retry_delay(error: AgentError, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number `attempt` (1-based) after `error`.

    The API's retry-after when it gave one (never earlier: an earlier retry is refused again);
    otherwise exponential from BACKOFF_BASE, capped at BACKOFF_CAP and jittered down to 75%
    so a burst of failures does not retry in lockstep.
    """
    if error.retry_after is not None:
        return max(error.retry_after, 0.0)
    backoff = min(BACKOFF_BASE * 2 ** max(attempt - 1, 0), BACKOFF_CAP)
    return backoff * (rng or random).uniform(0.75, 1.0)


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: retry-after-ms, then retry-after (seconds or an
    HTTP date). None when absent or unreadable; never negative."""
    if not headers:
        return None
    ms = _seconds(_header(headers, "retry-after-ms"))
    if ms is not None:
        return ms / 1000
    value = _header(headers, "retry-after")
    if value is None:
        return None
    if _seconds(value) is not None:
        return _seconds(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - (clock.time() if now is None else now), 0.0)


# The rate-limit reset headers: reset time -> what remains of that limit. Anthropic's are
# RFC 3339 times, OpenAI's durations (`1s`, `6m0s`, `20ms`).
_RESETS = {
    "anthropic-ratelimit-requests-reset": "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-reset": "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset": "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset": "anthropic-ratelimit-output-tokens-remaining",
    "x-ratelimit-reset-requests": "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-tokens": "x-ratelimit-remaining-tokens",
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_reset(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds until the rate limit that refused a request resets, from the reset headers.

    The limits reported exhausted (remaining 0) decide: the latest of their resets. When none
    is (a request needing more tokens than remain), the latest token-limit reset, else the
    latest reset given. None when no reset header is readable; never negative.
    """
    if not headers:
        return None
    now = clock.time() if now is None else now
    resets: dict[str, float] = {}
    for name in _RESETS:
        seconds = _reset_seconds(_header(headers, name), now)
        if seconds is not None:
            resets[name] = seconds
    if not resets:
        return None
    exhausted = [v for k, v in resets.items() if _header(headers, _RESETS[k]) == "0"]
    tokens = [v for k, v in resets.items() if "tokens" in k]
    return max(exhausted or tokens or resets.values())


def _reset_seconds(value: str | None, now: float) -> float | None:
    """A reset header's value as seconds from now: an RFC 3339 time, a duration, or seconds."""
    if not value:
        return None
    if _seconds(value) is not None:
        return _seconds(value)
    parts = _DURATION_PART.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(when.timestamp() - now, 0.0)


def _seconds(text: str | None) -> float | None:
    """`text` as a number of seconds, never negative; None unless it is a finite number."""
    try:
        value = float(text or "")
    except ValueError:
        return None
    return max(value, 0.0) if math.isfinite(value) else None


def should_retry(headers: Mapping[str, str] | None) -> bool | None:
    """The server's `x-should-retry` (True/False), None when absent or neither."""
    value = (_header(headers, "x-should-retry") or "").lower() if headers else ""
    return {"true": True, "false": False}.get(value)


def _header(headers: Any, name: str) -> str | None:
    try:
        value = headers.get(name)
    except Exception:  # noqa: BLE001 - a header object we do not know: no hint
        return None
    return value.strip() if isinstance(value, str) else None


# ------------------------------------------------------------------ reset times in text

# Where a message says when a limit resets: "resets 3pm", "reset at 15:00", "try again at
# 2026-11-25 15:00 UTC", "try again after ...", "until ...", "available again at ...".
_WHEN = r"(?:\breset(?:s|ting)?(?:\s+(?:at|on))?|\btry again\s+(?:at|after|on)|\buntil|\bavailable again\s+(?:at|on))\s+"
_ZONE = r"(?:\s*(Z|UTC|GMT|[+-]\d{2}:?\d{2})\b)?(?:\s*\(([A-Za-z][\w+\-]*(?:/[\w+\-]+)*)\))?"
_CLOCK = r"(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\b\.?)?"
_RESET_EPOCH = re.compile(r"limit reached\|(\d{9,11})\b"  # Claude Code's older usage-limit text
                          r"|\bresets_?at\"?\s*[:=]\s*\"?(\d{9,11})\b", re.IGNORECASE)  # resetsAt / resets_at
_RESET_IN = re.compile(r"\bresets_in_seconds\"?\s*[:=]\s*\"?(\d+(?:\.\d+)?)", re.IGNORECASE)
_RESET_ISO = re.compile(_WHEN + r"(\d{4}-\d{2}-\d{2})[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?" + _ZONE, re.IGNORECASE)
_RESET_DATE = re.compile(_WHEN + r"([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?(?:\s+(\d{4}),?)?\s+(?:at\s+)?"
                         + _CLOCK + _ZONE, re.IGNORECASE)
_RESET_CLOCK = re.compile(_WHEN + _CLOCK + _ZONE, re.IGNORECASE)
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                       "nov", "dec"), 1)}
_UNKNOWN = object()


def text_reset(text: str | None, now: float | None = None) -> float | None:
    """Epoch seconds when a limit resets, from a provider's or a CLI's message: an epoch
    (Claude Code's "limit reached|<epoch>", `resetsAt`/`resets_at`, `resets_in_seconds`), a
    date and time ("try again at 2026-11-25 15:00 UTC", "resets Nov 25, 3pm (Europe/Paris)"),
    or a clock time ("resets 3pm": the next one after now). A time without a zone is the
    machine's (the CLI runs here and prints local time). None when there is none, or its zone
    or date is not one (a wrong reset time is worse than none)."""
    if not text:
        return None
    now = clock.time() if now is None else now
    m = _RESET_EPOCH.search(text)
    if m:
        return float(m.group(1) or m.group(2))
    m = _RESET_IN.search(text)
    if m:
        return now + float(m.group(1))
    m = _RESET_ISO.search(text)
    if m:
        date, hour, minute, second, offset, zone = m.groups()
        return _at(date, int(hour), int(minute), int(second or 0), offset or zone)
    m = _RESET_DATE.search(text)
    if m and m.group(1)[:3].lower() in _MONTHS and (m.group(5) or m.group(6)):
        month, day, year = _MONTHS[m.group(1)[:3].lower()], int(m.group(2)), m.group(3)
        hour = _hour(int(m.group(4)), int(m.group(5) or 0), m.group(6))
        tz = _tz(m.group(7) or m.group(8))
        if hour is None or tz is _UNKNOWN:
            return None
        current = _now_in(now, tz)
        for y in ([int(year)] if year else [current.year, current.year + 1]):
            when = _at(f"{y:04d}-{month:02d}-{day:02d}", hour, int(m.group(5) or 0), 0, m.group(7) or m.group(8))
            if when is not None and (year or when > now - 86400):  # "Jan 2" seen on Dec 31: next year
                return when
        return None
    return clock_reset(text, now)


def clock_reset(text: str, now: float | None = None) -> float | None:
    """Epoch seconds of the next "resets 3pm (Zone)" after `now`; None when there is no clock
    time or its zone is unknown."""
    m = _RESET_CLOCK.search(text or "")
    if not m or not (m.group(2) or m.group(3)):  # "resets 3" alone is not a time
        return None
    hour, minute = _hour(int(m.group(1)), int(m.group(2) or 0), m.group(3)), int(m.group(2) or 0)
    tz = _tz(m.group(4) or m.group(5))
    if hour is None or minute > 59 or tz is _UNKNOWN:
        return None
    current = _now_in(clock.time() if now is None else now, tz)
    reset = current.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if reset <= current:
        reset += datetime.timedelta(days=1)
    return reset.timestamp()


def _hour(hour: int, minute: int, half: str | None) -> int | None:
    """A 24-hour hour from "3pm" / "15" (None when it is no hour)."""
    half = (half or "").lower().replace(".", "")
    if half:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "pm" else 0)
    return hour if hour <= 23 and minute <= 59 else None


def _tz(name: str | None) -> Any:
    """None for the machine's zone, a tzinfo, or _UNKNOWN."""
    if not name:
        return None
    if name.upper() in ("Z", "UTC", "GMT"):
        return datetime.timezone.utc
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name)
    if m:
        delta = datetime.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return datetime.timezone(delta if m.group(1) == "+" else -delta)
    try:
        return zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return _UNKNOWN


def _now_in(now: float, tz: Any) -> datetime.datetime:
    current = datetime.datetime.fromtimestamp(now, tz)
    return current if tz is not None else current.astimezone()


def _at(date: str, hour: int, minute: int, second: int, zone: str | None) -> float | None:
    """Epoch seconds of a date and time in a zone (None when either is not one)."""
    tz = _tz(zone)
    if tz is _UNKNOWN or hour > 23 or minute > 59 or second > 59:
        return None
    try:
        when = datetime.datetime.fromisoformat(f"{date}T{hour:02d}:{minute:02d}:{second:02d}")
    except ValueError:
        return None
    return (when.replace(tzinfo=tz) if tz is not None else when.astimezone()).timestamp()


# ------------------------------------------------------------------ SDK exceptions

_QUOTA_CLASSES = {"ContractSpendLimitReachedError", "EnforcedSpendLimitReachedError",
                  "LinkedOrganizationSpendLimitReachedError", "PaymentRequiredError"}
_QUOTA_CODES = {"insufficient_quota", "billing_hard_limit_reached", "usage_limit_reached",
                "contract_spend_limit_reached", "enforced_spend_limit_reached",
                "linked_organization_spend_limit_reached"}
_QUOTA_TEXT = re.compile(r"credit balance is too low|spend limit|insufficient.quota|billing", re.I)
_CONTEXT_CODES = {"context_length_exceeded", "string_above_max_length"}
_CONTEXT_TEXT = re.compile(r"prompt is too long|context (length|window)|maximum context|too many tokens"
                           r"|input length and `max_tokens` exceed", re.I)
_TIMEOUT_CLASSES = {"APITimeoutError", "TimeoutException", "ReadTimeout", "WriteTimeout",
                    "ConnectTimeout", "PoolTimeout", "TimeoutError"}
_CONNECTION_CLASSES = {"APIConnectionError", "TransportError", "NetworkError", "ProtocolError",
                       "RemoteProtocolError", "ReadError", "WriteError", "ConnectError",
                       "ConnectionError", "IncompleteRead"}
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{4})[A-Za-z0-9_\-*]+")


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _body_error(exc: BaseException) -> dict:
    """The `error` object of an API error body ({} when there is none)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        return inner if isinstance(inner, dict) else {}
    return {}


def redact(text: str, secret: str | None = None) -> str:
    """`text` without the API key (or anything shaped like an sk- key) in it."""
    if secret and len(secret) >= 8:
        text = text.replace(secret, "[redacted]")
    return _KEY_LIKE.sub(r"\1…", text)


def classify(exc: BaseException, agent: str, api_key_env: str | None = None,
             secret: str | None = None, base_url: str | None = None) -> AgentError:
    """The AgentError for an exception raised while calling agent `agent`'s API at `base_url`."""
    if isinstance(exc, AgentError):
        return exc
    unreachable = _unreachable(exc, agent, base_url)
    if unreachable is not None:
        return unreachable
    names = _class_names(exc)
    err = _body_error(exc)
    etype = str(getattr(exc, "type", None) or err.get("type") or "")
    details = err.get("details") if isinstance(err.get("details"), dict) else {}
    code = str(getattr(exc, "code", None) or getattr(exc, "error_code", None) or err.get("code")
               or details.get("error_code") or "")
    detail = str(getattr(exc, "api_message", None) or err.get("message") or exc or type(exc).__name__)
    detail = redact(detail.strip().splitlines()[0] if detail.strip() else type(exc).__name__, secret)
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) if response is not None else None
    retry_after = parse_retry_after(headers)
    server_says = should_retry(headers)

    def error(kind: str, what: str, **kw: Any) -> AgentError:
        if server_says is not None and server_says != (kind in RETRIED):
            what += f" (x-should-retry: {'true' if server_says else 'false'})"
            kw["retry"] = server_says
        return AgentError(f"agent '{agent}': {what}: {detail}", kind=kind, **kw)

    if isinstance(status, int) or ("APIError" in names and err):  # openai: an error event in a 200 stream
        # a 429 waits for retry-after, else for the rate limit's reset (never earlier)
        limit_wait = retry_after if retry_after is not None else parse_reset(headers)
        return _classify_status(status if isinstance(status, int) else 200, names, etype, code, detail,
                                retry_after, limit_wait, error, api_key_env)
    if isinstance(exc, json.JSONDecodeError):
        return error("server", "the API answered with a body that is not JSON (cut or corrupted)")
    if names & _TIMEOUT_CLASSES:
        return error("timeout", "the request timed out")
    if names & _CONNECTION_CLASSES:
        return error("connection", "the connection failed or was cut")
    if "OpenAIError" in names and "credentials" in detail.lower():
        return _auth(agent, api_key_env, detail)
    if isinstance(exc, ValueError) and "streaming is required" in detail.lower():
        return error("invalid_request", "max_tokens is too large for a non-streamed call (set stream: true)")
    return error("failed", f"{type(exc).__name__}")


def _unreachable(exc: BaseException, agent: str, base_url: str | None) -> AgentError | None:
    """The error for a request that never reached a server (the connection itself failed:
    httpx2's ConnectError under the SDK's APIConnectionError), naming the address; None for
    any other failure (a connection cut mid-answer is `connection`, retried with backoff)."""
    chain = _causes(exc)
    if not any("ConnectError" in _class_names(e) for e in chain):
        return None
    refused = any(isinstance(e, ConnectionRefusedError) for e in chain)
    why = "connection refused" if refused else str(chain[-1]) or type(chain[-1]).__name__
    where = base_url.rstrip("/") if base_url else "the API"
    return AgentError(f"agent '{agent}': cannot connect to {where} ({why}): is the server running, and is "
                      f"`base_url` right?", kind="connection", unreachable=True)


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first (at most 10)."""
    chain: list[BaseException] = []
    while exc is not None and len(chain) < 10 and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _classify_status(status: int, names: set[str], etype: str, code: str, detail: str,
                     retry_after: float | None, limit_wait: float | None, error: Any,
                     api_key_env: str | None) -> AgentError:
    if status == 200:  # an error event inside a streamed 200 (the SDK reports status 200)
        if "overloaded" in etype:
            return error("overloaded", "the API is overloaded (error inside the stream)")
        if "rate_limit" in etype:
            return error("rate_limited", "rate limited (error inside the stream)")
        if code in _QUOTA_CODES or etype in _QUOTA_CODES:
            return error("quota_exhausted", "quota or spend limit exhausted (error inside the stream)")
        if "policy" in code:  # Responses: bio_policy, misalignment_policy_violation
            return error("refusal", f"the model refused to answer ({code})")
        if code.startswith(("invalid_", "image_", "unsupported_")):  # Responses: the request's input
            return error("invalid_request", f"the API rejected the request ({code})")
        return error("server", f"the API failed inside the stream ({etype or 'error event'})")
    if names & _QUOTA_CLASSES or code in _QUOTA_CODES or status == 402 or (
            status in (400, 403, 429) and _QUOTA_TEXT.search(detail)):
        reset_at = clock.time() + limit_wait if limit_wait else text_reset(detail)
        return error("quota_exhausted", f"quota or spend limit exhausted (HTTP {status})", reset_at=reset_at)
    if status == 429:
        return error("rate_limited", "rate limited (HTTP 429)", retry_after=limit_wait)
    if status in (401, 403) or etype in ("authentication_error", "permission_error"):
        return _auth_status(error, status, api_key_env)
    if status == 529 or "overloaded" in etype:
        return error("overloaded", f"the API is overloaded (HTTP {status})", retry_after=retry_after)
    if status == 408:
        return error("timeout", "the API timed out the request (HTTP 408)", retry_after=retry_after)
    if status == 409 or status >= 500:
        return error("server", f"server error (HTTP {status})", retry_after=retry_after)
    if status == 413 or code in _CONTEXT_CODES or _CONTEXT_TEXT.search(detail):
        return error("context_too_long", f"the request is too long for the model (HTTP {status})")
    return error("invalid_request", f"the API rejected the request (HTTP {status})")


def _auth_status(error: Any, status: int, api_key_env: str | None) -> AgentError:
    hint = f"check the key in ${api_key_env}" if api_key_env else "check the server's credentials"
    return error("auth", f"authentication failed (HTTP {status}; {hint})")


def _auth(agent: str, api_key_env: str | None, detail: str) -> AgentError:
    hint = f"set {api_key_env}" if api_key_env else "set api_key_env in harness.yaml"
    return AgentError(f"agent '{agent}': no API key ({hint}): {detail}", kind="auth")


def missing_key(agent: str, api_key_env: str) -> AgentError:
    """The error for an agent whose key variable is unset or empty."""
    return AgentError(f"agent '{agent}': no API key: set {api_key_env} in the environment "
                      f"(or api_key_env: null for a local server that needs none)", kind="auth")
