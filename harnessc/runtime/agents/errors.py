"""The error taxonomy every agent speaks, and how an SDK failure maps onto it.

An agent call fails with an `AgentError` whose `kind` says what went wrong:

* retried (on the same agent, capped and jittered backoff, `retry_after` honoured - never
  earlier): rate_limited, overloaded, server, timeout, connection, truncated, bad_output;
* not retried on the same agent: quota_exhausted (with `reset_at` when the API gave one),
  auth (the message names the variable to set), invalid_request, refusal, context_too_long,
  not_recorded (`run --replay`: the cassettes hold no answer for the request), and `failed`
  (anything else, e.g. a command agent's non-zero exit).

`classify()` turns an exception raised by the anthropic/openai SDKs (or by httpx2 under
them, or by json for a 200 whose body is not JSON) into an AgentError. It looks at class
names, `status_code` and the error body's type/code only, so this module imports no SDK.
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import time
from typing import Any, Mapping

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
                 usage: Any = None, cost_usd: float = 0.0):
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
        self.usage = usage  # base.Usage of a call that was answered but unusable (e.g. truncated)
        self.cost_usd = cost_usd  # what that answer cost; 0 when no response came

    @property
    def transient(self) -> bool:
        return self.kind in RETRIED

    def charged(self) -> dict[str, Any]:
        """The attempt's ledger figures: what an unusable answer used and cost (0 for no answer)."""
        u = self.usage
        return {"input_tokens": getattr(u, "input_tokens", 0), "output_tokens": getattr(u, "output_tokens", 0),
                "cost_usd": self.cost_usd}

    @property
    def final(self) -> bool:
        """Whether retrying on the same agent is pointless (a key, a quota, the request itself)."""
        return self.kind in NOT_RETRIED and self.kind != "failed"


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
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def _header(headers: Any, name: str) -> str | None:
    try:
        value = headers.get(name)
    except Exception:  # noqa: BLE001 - a header object we do not know: no hint
        return None
    return value.strip() if isinstance(value, str) else None


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
             secret: str | None = None) -> AgentError:
    """The AgentError for an exception raised while calling agent `agent`'s API."""
    if isinstance(exc, AgentError):
        return exc
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
    retry_after = parse_retry_after(getattr(response, "headers", None)) if response is not None else None

    def error(kind: str, what: str, **kw: Any) -> AgentError:
        return AgentError(f"agent '{agent}': {what}: {detail}", kind=kind, **kw)

    if isinstance(status, int):
        return _classify_status(status, names, etype, code, detail, retry_after, error, api_key_env)
    if "APIError" in names and err:  # an error event inside a 200 stream (openai: no status)
        return _classify_status(200, names, etype, code, detail, retry_after, error, api_key_env)
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


def _classify_status(status: int, names: set[str], etype: str, code: str, detail: str,
                     retry_after: float | None, error: Any, api_key_env: str | None) -> AgentError:
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
        reset_at = time.time() + retry_after if retry_after else None
        return error("quota_exhausted", f"quota or spend limit exhausted (HTTP {status})", reset_at=reset_at)
    if status == 429:
        return error("rate_limited", "rate limited (HTTP 429)", retry_after=retry_after)
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
