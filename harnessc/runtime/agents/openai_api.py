"""Provider `openai`: Chat Completions through the official SDK (AsyncOpenAI), for OpenAI and
any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) via `base_url`.

One call is one HTTP request (SDK retries off). Structured output per `structured:`:
`json_schema` (default: `response_format` json_schema strict with the contract's OpenAI
subset from plan.json), `json_object` (JSON mode, for servers that reject schemas) or `none`
(the prompt alone). `api_key_env: null` sends a placeholder key (local servers need none but
the SDK insists on one). A streamed call asks for the usage chunk (`include_usage`), which
arrives last with `choices == []`. `finish_reason: length`, or a stream without its final
chunk, is a truncated answer.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ... import providers
from .base import Request, Response, Usage, price_cost
from .errors import AgentError, classify, missing_key

PLACEHOLDER_KEY = "not-needed"
STRUCTURED = ("json_schema", "json_object", "none")


class OpenAIAgent:
    def __init__(self, name: str, config: dict, root: Path):
        self.name = name
        self.config = config
        self.unit = providers.get("openai")
        self.model = config.get("model")
        self.max_tokens = config.get("max_tokens")  # unset: the server's own limit
        self.stream = bool(config.get("stream", False))
        self.structured = config.get("structured") or "json_schema"
        self.key_env = self.unit.key_env(config)
        self._client: Any = None

    def _connect(self) -> tuple[Any, str | None]:
        if self.key_env:
            key = os.environ.get(self.key_env, "")
            if not key:
                raise missing_key(self.name, self.key_env)
        else:
            key = None
        if self._client is None:
            import openai  # only a run that calls this agent pays for the import

            self._client = openai.AsyncOpenAI(api_key=key or PLACEHOLDER_KEY,
                                              base_url=self.config.get("base_url"), max_retries=0)
        return self._client, key

    def params(self, request: Request) -> dict[str, Any]:
        """The Chat Completions parameters for one request (no credentials)."""
        messages = ([{"role": "system", "content": request.system}] if request.system else [])
        p: dict[str, Any] = {"model": self.model,
                             "messages": messages + [{"role": "user", "content": request.prompt}]}
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            p["max_completion_tokens"] = max_tokens
        if self.config.get("temperature") is not None:
            p["temperature"] = self.config["temperature"]
        wire = (((request.contract or {}).get("provider_schemas") or {}).get("openai")) or {}
        if request.output_schema is not None and self.structured == "json_schema" and wire.get("schema"):
            p["response_format"] = {"type": "json_schema", "json_schema": {
                "name": _schema_name(request), "schema": wire["schema"], "strict": bool(wire.get("strict"))}}
        elif request.output_schema is not None and self.structured == "json_object":
            p["response_format"] = {"type": "json_object"}
        if self.stream:
            p["stream"] = True
            p["stream_options"] = {"include_usage": True}
        return p

    async def call(self, request: Request) -> Response:
        if not self.model:
            raise AgentError(f"agent '{self.name}': provider openai needs `model:`", kind="invalid_request")
        client, key = self._connect()
        params = self.params(request)
        start = time.monotonic()
        try:
            if self.stream:
                text, finish, raw_usage, refusal = await self._streamed(client, params, request.timeout)
            else:
                completion = await client.chat.completions.create(**params, timeout=request.timeout)
                choice = completion.choices[0] if completion.choices else None
                text = (choice.message.content or "") if choice else ""
                refusal = getattr(choice.message, "refusal", None) if choice else None
                finish, raw_usage = (choice.finish_reason if choice else None), completion.usage
        except Exception as exc:  # noqa: BLE001 - every SDK failure becomes one classified AgentError
            raise classify(exc, self.name, self.key_env, secret=key) from None
        usage = self.usage(raw_usage)
        cost = price_cost(self.config, usage, "openai")
        if finish is None:
            raise AgentError(f"agent '{self.name}': the stream ended before its last chunk (truncated answer)",
                             kind="truncated", usage=usage, cost_usd=cost)
        if finish == "length":
            raise AgentError(f"agent '{self.name}': the answer hit the token limit and was cut "
                             "(raise the agent's max_tokens)", kind="truncated", usage=usage, cost_usd=cost)
        if refusal or finish == "content_filter":
            raise AgentError(f"agent '{self.name}': the model refused to answer"
                             + (f": {refusal}" if refusal else " (content filter)"), kind="refusal",
                             usage=usage, cost_usd=cost)
        return Response(text=text, usage=usage, cost_usd=cost, latency=time.monotonic() - start)

    @staticmethod
    async def _streamed(client: Any, params: dict, timeout: float | None) -> tuple[str, Any, Any, Any]:
        parts: list[str] = []
        finish = usage = refusal = None
        stream = await client.chat.completions.create(**params, timeout=timeout)
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:  # the usage-only final chunk has none
                if choice.delta and choice.delta.content:
                    parts.append(choice.delta.content)
                if choice.delta and getattr(choice.delta, "refusal", None):
                    refusal = (refusal or "") + choice.delta.refusal
                finish = choice.finish_reason or finish
        return "".join(parts), finish, usage, refusal

    @staticmethod
    def usage(u: Any) -> Usage:
        """OpenAI's cached_tokens are a subset of prompt_tokens (unlike Anthropic's counters)."""
        if u is None:
            return Usage()
        details = getattr(u, "prompt_tokens_details", None)
        out_details = getattr(u, "completion_tokens_details", None)
        return Usage(input_tokens=u.prompt_tokens or 0, output_tokens=u.completion_tokens or 0,
                     cache_read_tokens=getattr(details, "cached_tokens", None) or 0,
                     reasoning_tokens=getattr(out_details, "reasoning_tokens", None) or 0)


def _schema_name(request: Request) -> str:
    name = str((request.contract or {}).get("name") or "output")
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]
