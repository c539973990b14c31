"""Provider `openai`: the official SDK (AsyncOpenAI), for OpenAI and any OpenAI-compatible
server (Ollama, vLLM, llama.cpp, LM Studio) via `base_url`.

`api: chat` (default) is Chat Completions, here; `api: responses` is the Responses API
(openai_responses.py). Structured output per `structured:`: `json_schema` (default: strict
json_schema with the contract's OpenAI subset from plan.json), `json_object` (JSON mode, for
servers that reject schemas) or `none` (the prompt alone). `api_key_env: null` sends a
placeholder key. A streamed chat call asks for the usage chunk (`include_usage`), which
arrives last with `choices == []`. `finish_reason: length`, or a stream without its final
chunk, is a truncated answer. The call step itself is `sdk.SdkAgent`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...providers import OpenAIConfig
from .base import Request, Usage
from .caching import prompt_cache_key
from .sdk import DONE, MAX_TOKENS, REFUSAL, UNFINISHED, Answer, SdkAgent

STRUCTURED = ("json_schema", "json_object", "none")


class OpenAIAgent(SdkAgent):
    """Chat Completions."""

    provider = "openai"
    terminator = "its last chunk"

    config: OpenAIConfig

    def __init__(self, name: str, config: OpenAIConfig, root: Path):
        super().__init__(name, config, root)  # max_tokens unset: the server's own limit
        self.stream = config.stream
        self.structured = config.structured

    def connect(self, key: str) -> Any:
        import openai  # only a run that calls this agent pays for the import

        return openai.AsyncOpenAI(api_key=key, base_url=self.config.base_url, max_retries=0)

    def structured_format(self, request: Request) -> dict[str, Any] | None:
        """How the contract's output is asked for: the strict json_schema format (OpenAI subset),
        JSON mode, or None. The chat API wraps it in `response_format`, Responses in `text`."""
        if request.output_schema is None:
            return None
        wire = request.wire_schema("openai")
        if self.structured == "json_schema" and wire.get("schema"):
            return {"type": "json_schema", "name": request.schema_name(), "schema": wire["schema"],
                    "strict": bool(wire.get("strict"))}
        if self.structured == "json_object":
            return {"type": "json_object"}
        return None

    def params(self, request: Request) -> dict[str, Any]:
        """The Chat Completions parameters for one request (no credentials)."""
        messages = ([{"role": "system", "content": request.system}] if request.system else [])
        p: dict[str, Any] = {"model": self.model,
                             "messages": messages + [{"role": "user", "content": request.prompt}]}
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            p["max_completion_tokens"] = max_tokens
        if self.config.temperature is not None:
            p["temperature"] = self.config.temperature
        fmt = self.structured_format(request)
        if fmt and fmt["type"] == "json_schema":
            p["response_format"] = {"type": "json_schema", "json_schema": {
                k: v for k, v in fmt.items() if k != "type"}}
        elif fmt:
            p["response_format"] = fmt
        if self.stream:
            p["stream"] = True
            p["stream_options"] = {"include_usage": True}
        p.update(self.cache_routing(request))
        return p

    def cache_routing(self, request: Request) -> dict[str, Any]:
        """`prompt_cache_key` for OpenAI (requests sharing a prefix land where it is cached);
        none for a keyless local server (`api_key_env: null`), which has no use for it."""
        if not self.key_env:
            return {}
        return {"prompt_cache_key": prompt_cache_key(request.system, request.prompt, request.cache_breaks)}

    async def send(self, client: Any, params: dict[str, Any], timeout: float | None) -> Answer:
        if self.stream:
            text, finish, raw_usage, refusal = await self._streamed(client, params, timeout)
        else:
            completion = await client.chat.completions.create(**params, timeout=timeout)
            choice = completion.choices[0] if completion.choices else None
            text = (choice.message.content or "") if choice else ""
            refusal = getattr(choice.message, "refusal", None) if choice else None
            finish, raw_usage = (choice.finish_reason if choice else None), completion.usage
        if finish is None:
            stop = UNFINISHED
        elif finish == "length":
            stop = MAX_TOKENS
        elif refusal or finish == "content_filter":
            stop, refusal = REFUSAL, refusal or "stopped by the content filter"
        else:
            stop = DONE
        return Answer(text=text, stop=stop, usage=raw_usage, refusal=refusal)

    @staticmethod
    async def _streamed(client: Any, params: dict, timeout: float | None) -> tuple[str, Any, Any, Any]:
        parts: list[str] = []
        finish = usage = refusal = None
        stream = await client.chat.completions.create(**params, timeout=timeout)
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
                OpenAIAgent.reported(usage)
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
