"""Provider `anthropic`: the Messages API through the official SDK (AsyncAnthropic).

One call is one HTTP request (the SDK's own retries are off: harnessc's loop is the only
one). Structured output uses `output_config.format` json_schema with the contract's
Anthropic subset from plan.json (the full contract is still checked locally). The system
prompt (the stable prefix shared by every task) carries the `cache_control` breakpoint, so
the task-specific tail is never inside the cached prefix. The answer is parsed only after its
`stop_reason` says it is complete.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ... import providers
from .base import Request, Response, Usage, price_cost
from .errors import AgentError, classify, missing_key

# The SDK refuses a non-streamed call that may take over 10 minutes (3600 s x max_tokens / 128k).
NON_STREAMED_MAX_TOKENS = 21_333


class AnthropicAgent:
    def __init__(self, name: str, config: dict, root: Path):
        self.name = name
        self.config = config
        self.unit = providers.get("anthropic")
        self.model = config.get("model")
        self.max_tokens = int(self.unit.setting(config, "max_tokens"))
        stream = config.get("stream")
        self.stream = self.max_tokens > NON_STREAMED_MAX_TOKENS if stream is None else bool(stream)
        self.key_env = self.unit.key_env(config)
        self._client: Any = None

    def _connect(self) -> tuple[Any, str]:
        key = os.environ.get(self.key_env, "") if self.key_env else "not-needed"
        if not key:
            raise missing_key(self.name, self.key_env)
        if self._client is None:
            import anthropic  # only a run that calls this agent pays for the import

            self._client = anthropic.AsyncAnthropic(api_key=key, base_url=self.config.get("base_url"),
                                                    max_retries=0)
        return self._client, key

    def params(self, request: Request) -> dict[str, Any]:
        """The Messages API parameters for one request (no credentials)."""
        p: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": [{"role": "user", "content": request.prompt}],
        }
        if request.system:
            p["system"] = [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}]
        if self.config.get("temperature") is not None:
            p["temperature"] = self.config["temperature"]
        wire = (((request.contract or {}).get("provider_schemas") or {}).get("anthropic")) or {}
        if request.output_schema is not None and wire.get("strict") and wire.get("schema"):
            p["output_config"] = {"format": {"type": "json_schema", "schema": wire["schema"]}}
        return p

    async def call(self, request: Request) -> Response:
        if not self.model:
            raise AgentError(f"agent '{self.name}': provider anthropic needs `model:`", kind="invalid_request")
        client, key = self._connect()
        params = self.params(request)
        start = time.monotonic()
        try:
            if self.stream:
                message, finished = await self._streamed(client, params, request.timeout)
            else:
                message = await client.messages.create(**params, timeout=request.timeout)
                finished = True
        except Exception as exc:  # noqa: BLE001 - every SDK failure becomes one classified AgentError
            raise classify(exc, self.name, self.key_env, secret=key) from None
        usage = self.usage(message.usage)
        cost = price_cost(self.config, usage, "anthropic")
        text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")
        stop = message.stop_reason
        if not finished or stop is None:
            raise AgentError(f"agent '{self.name}': the stream ended before message_stop (truncated answer)",
                             kind="truncated", usage=usage, cost_usd=cost)
        if stop in ("max_tokens", "model_context_window_exceeded"):
            raise AgentError(f"agent '{self.name}': the answer hit max_tokens ({params['max_tokens']}) "
                             "and was cut (raise the agent's max_tokens)", kind="truncated",
                             usage=usage, cost_usd=cost)
        if stop == "refusal":
            raise AgentError(f"agent '{self.name}': the model refused to answer", kind="refusal",
                             usage=usage, cost_usd=cost)
        return Response(text=text, usage=usage, cost_usd=cost, latency=time.monotonic() - start)

    @staticmethod
    async def _streamed(client: Any, params: dict, timeout: float | None) -> tuple[Any, bool]:
        finished = False
        async with client.messages.stream(**params, timeout=timeout) as stream:
            async for event in stream:
                finished = finished or event.type == "message_stop"
            return await stream.get_final_message(), finished

    @staticmethod
    def usage(u: Any) -> Usage:
        """Anthropic's cache counters are additive to input_tokens; Usage counts all input."""
        read = getattr(u, "cache_read_input_tokens", None) or 0
        write = getattr(u, "cache_creation_input_tokens", None) or 0
        details = getattr(u, "output_tokens_details", None)
        reasoning = getattr(details, "thinking_tokens", None) or 0
        return Usage(input_tokens=(u.input_tokens or 0) + read + write, output_tokens=u.output_tokens or 0,
                     cache_read_tokens=read, cache_write_tokens=write, reasoning_tokens=reasoning)
