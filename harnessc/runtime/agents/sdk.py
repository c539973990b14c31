"""The call step every SDK provider shares (anthropic, openai chat, openai responses).

`SdkAgent.call` owns the sequence: check `model:`, read the key, build the client once
(lazily importing the SDK, `max_retries=0` so harnessc's loop is the only one), build the
request parameters, time ONE request, classify any exception into an AgentError, turn the
usage into Usage and cost, and refuse an answer that is not complete (truncated, refused).

A provider subclass supplies only its wire specifics:

* `connect(key)`: the SDK client;
* `params(request)`: the request parameters (no credentials);
* `send(client, params, timeout)`: the request itself, returning an `Answer`; a streamed
  send passes each usage the stream reports to `reported(raw)`, so a stream cut mid-way is
  charged what it reported;
* `usage(raw)`: the provider's usage object as a Usage.

Every call's ledger (Usage, cost, cost source) rides on its Response or AgentError: priced
from the tokens, or charged 0 as `no_response` when no usage came back.
The SDK's warning that the model is deprecated rides on them too (`deprecated`: its
end-of-life date; deprecation.py), for the run to say once per agent.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import providers
from ...providers import AgentConfig
from .. import clock
from ..children import procs
from . import deprecation
from .base import NO_RESPONSE, Request, Response, Usage, charge_reported, priced
from .errors import AgentError, classify, missing_key

# The usage the current call's stream reported so far (one list per call: a context variable
# is per asyncio task, and concurrent tasks share one agent).
_REPORTED: contextvars.ContextVar[list] = contextvars.ContextVar("harnessc_sdk_reported")

PLACEHOLDER_KEY = "not-needed"  # sent when api_key_env is null: local servers need none, SDKs insist

# Answer.stop: how the answer ended.
DONE = "done"  # complete
MAX_TOKENS = "max_tokens"  # cut at the output token limit
UNFINISHED = "unfinished"  # the stream (or answer) ended without its terminator
REFUSAL = "refusal"  # the model declined


@dataclass
class Answer:
    """One request's result in provider-neutral terms."""

    text: str
    stop: str  # DONE | MAX_TOKENS | UNFINISHED | REFUSAL
    usage: Any  # the SDK's usage object, None when the answer carried none
    refusal: str | None = None  # what the model said when it refused, if anything


def capped(text: str, limit: int = procs.MAX_OUTPUT) -> tuple[str, str | None]:
    """An answer as it is kept: its first `limit` bytes (a command's output is capped the
    same), and why it was cut (None when it was not)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, None
    kept = data[:limit].decode("utf-8", "ignore")  # never half a character
    return kept, (f"the answer was {len(data):,} bytes, over the {limit:,}-byte cap on an answer: "
                  f"only its first {limit:,} bytes were kept")


class SdkAgent:
    provider = ""  # the registry name
    terminator = ""  # what a complete answer ends with, for the truncation message

    def __init__(self, name: str, config: AgentConfig, root: Path):
        self.name = name
        self.config = config
        self.unit = providers.get(self.provider)
        self.model = config.model
        self.max_tokens: int | None = config.max_tokens
        self.key_env = config.api_key_env
        self._client: Any = None

    # ------------------------------------------------------------------ provider specifics

    def connect(self, key: str) -> Any:
        raise NotImplementedError

    def params(self, request: Request) -> dict[str, Any]:
        raise NotImplementedError

    async def send(self, client: Any, params: dict[str, Any], timeout: float | None) -> Answer:
        raise NotImplementedError

    @staticmethod
    def usage(raw: Any) -> Usage:
        raise NotImplementedError

    # ------------------------------------------------------------------ the shared step

    async def call(self, request: Request) -> Response:
        if not self.model:
            raise AgentError(f"agent '{self.name}': provider {self.provider} needs `model:`",
                             kind="invalid_request")
        key = self._key()
        if self._client is None:
            self._client = self.connect(key or PLACEHOLDER_KEY)
        params = self.params(request)
        start = clock.monotonic()
        reported: list[Any] = []
        _REPORTED.set(reported)
        try:
            # the SDK's timeout is per read: a server that sends a byte now and then would
            # hold the call forever, so the whole call is bounded by the task's time left
            with deprecation.listening() as deprecated:
                async with asyncio.timeout(request.timeout) as bound:
                    answer = await self.send(self._client, params, request.timeout)
        except Exception as exc:  # noqa: BLE001 - every SDK failure becomes one classified AgentError
            if isinstance(exc, TimeoutError) and bound.expired():
                error = AgentError(f"agent '{self.name}': the call was cut after {request.timeout:.1f}s, the time "
                                   f"its task had left of max_time (the whole call is bounded, not each read)",
                                   kind="timeout")
            else:
                error = classify(exc, self.name, self.key_env, secret=key,
                                 base_url=str(getattr(self._client, "base_url", "") or "") or None)
            if reported:
                charge_reported(error, self.usage(reported[-1]), self.config, self.provider)
            error.deprecated = deprecated.date
            raise error from None
        if answer.usage is None:  # a stream cut before its usage, a server that sends none
            charge: dict[str, Any] = {"usage": None, "cost_usd": 0.0, "cost_source": NO_RESPONSE}
        else:
            usage = self.usage(answer.usage)
            cost, source = priced(self.config, usage, self.provider)
            charge = {"usage": usage, "cost_usd": cost, "cost_source": source}
        problem = self._incomplete(answer, request)
        if problem:
            kind, what = problem
            raise AgentError(f"agent '{self.name}': {what}", kind=kind, deprecated=deprecated.date, **charge)
        text, cut = capped(answer.text)
        return Response(text=text, usage=charge["usage"] or Usage(), cost_usd=charge["cost_usd"],
                        cost_source=charge["cost_source"], latency=clock.monotonic() - start,
                        tool_calls=0, truncated=cut,  # harnessc gives API models no tools
                        deprecated=deprecated.date)

    @staticmethod
    def reported(raw: Any) -> None:
        """The usage a stream reported so far (send calls it as usage arrives)."""
        holder = _REPORTED.get(None)
        if holder is not None:
            holder[:] = [raw]

    def _key(self) -> str | None:
        """The API key from the environment (None when the agent uses none)."""
        if not self.key_env:
            return None
        key = procs.forwarded_env().get(self.key_env, "")
        if not key:
            raise missing_key(self.name, self.key_env)
        return key

    def _incomplete(self, answer: Answer, request: Request) -> tuple[str, str] | None:
        """(kind, message) when the answer must not be used; an unusable answer is still charged."""
        if answer.stop == UNFINISHED:
            return "truncated", f"the stream ended before {self.terminator} (truncated answer)"
        if answer.stop == MAX_TOKENS:
            limit = request.max_tokens or self.max_tokens
            hit = f"max_tokens ({limit})" if limit else "the server's token limit"
            return "truncated", f"the answer hit {hit} and was cut (raise the agent's max_tokens)"
        if answer.stop == REFUSAL:
            return "refusal", "the model refused to answer" + (f": {answer.refusal}" if answer.refusal else "")
        return None
