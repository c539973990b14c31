"""Provider `anthropic`: the Messages API through the official SDK (AsyncAnthropic).

Structured output uses `output_config.format` json_schema with the contract's Anthropic
subset from plan.json when that subset is strict; a contract strict mode cannot express
(lists without an item type, free-form objects) is asked for through a forced tool whose
`input_schema` is the whole contract, non-strict, and the tool call's input is the answer.
Either way the full contract is still checked locally. `cache_control` breakpoints end the
parts of the prompt other tasks share (caching.py), with the agent's `cache_ttl`; the task's
own text is never inside a cached prefix. The call step itself (one request,
errors classified, `stop_reason` checked before the answer is used) is `sdk.SdkAgent`'s.

The one module that imports the anthropic SDK: its client when a run first calls such an
agent, and its table of deprecated models when `harnessc doctor` asks (`end_of_life`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...providers import AnthropicConfig
from ...providers.anthropic import TOOL_SCHEMA
from .base import Request, Usage
from .caching import anthropic_messages
from .sdk import DONE, MAX_TOKENS, REFUSAL, UNFINISHED, Answer, SdkAgent

# The SDK refuses a non-streamed call that may take over 10 minutes (3600 s x max_tokens / 128k).
NON_STREAMED_MAX_TOKENS = 21_333
_STOPS = {"max_tokens": MAX_TOKENS, "model_context_window_exceeded": MAX_TOKENS, "refusal": REFUSAL,
          None: UNFINISHED}


class AnthropicAgent(SdkAgent):
    provider = "anthropic"
    terminator = "message_stop"

    config: AnthropicConfig

    def __init__(self, name: str, config: AnthropicConfig, root: Path):
        super().__init__(name, config, root)
        self.max_tokens = config.output_cap
        self.stream = self.max_tokens > NON_STREAMED_MAX_TOKENS if config.stream is None else config.stream

    def connect(self, key: str) -> Any:
        import anthropic  # only a run that calls this agent pays for the import

        return anthropic.AsyncAnthropic(api_key=key, base_url=self.config.base_url, max_retries=0)

    def params(self, request: Request) -> dict[str, Any]:
        """The Messages API parameters for one request (no credentials)."""
        system, messages = anthropic_messages(request.system, request.prompt, request.cache_breaks, self.model,
                                              self.config.cache_ttl)
        p: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": messages,
        }
        if system:
            p["system"] = system
        if self.config.temperature is not None:
            p["temperature"] = self.config.temperature
        if request.output_schema is not None:
            p.update(self.structured(request))
        return p

    @staticmethod
    def structured(request: Request) -> dict[str, Any]:
        """How the contract's output is asked for: strict `output_config`, else a forced tool."""
        wire = request.wire_schema("anthropic")
        if wire.get("strict") and wire.get("schema"):
            return {"output_config": {"format": {"type": "json_schema", "schema": wire["schema"]}}}
        name = request.schema_name()
        schema, _ = TOOL_SCHEMA.apply(request.output_schema or {})
        return {"tools": [{"name": name, "description": "Give your answer: call this once with the output.",
                           "input_schema": schema}],
                "tool_choice": {"type": "tool", "name": name, "disable_parallel_tool_use": True}}

    async def send(self, client: Any, params: dict[str, Any], timeout: float | None) -> Answer:
        if self.stream:
            finished = False
            async with client.messages.stream(**params, timeout=timeout) as stream:
                async for event in stream:
                    if event.type in ("message_start", "message_delta"):
                        # the SDK's snapshot adds message_delta's counts to message_start's
                        self.reported(stream.current_message_snapshot.usage)
                    finished = finished or event.type == "message_stop"
                message = await stream.get_final_message()
        else:
            message = await client.messages.create(**params, timeout=timeout)
            finished = True
        stop = _STOPS.get(message.stop_reason, DONE) if finished else UNFINISHED
        return Answer(text=_text(message, params), stop=stop, usage=message.usage)

    @staticmethod
    def usage(u: Any) -> Usage:
        """Anthropic's cache counters are additive to input_tokens; Usage counts all input."""
        if u is None:
            return Usage()
        read = getattr(u, "cache_read_input_tokens", None) or 0
        write = getattr(u, "cache_creation_input_tokens", None) or 0
        write_1h = getattr(getattr(u, "cache_creation", None), "ephemeral_1h_input_tokens", None) or 0
        details = getattr(u, "output_tokens_details", None)
        reasoning = getattr(details, "thinking_tokens", None) or 0
        return Usage(input_tokens=(u.input_tokens or 0) + read + write, output_tokens=u.output_tokens or 0,
                     cache_read_tokens=read, cache_write_tokens=write, reasoning_tokens=reasoning,
                     cache_write_1h_tokens=min(write_1h, write))


def _text(message: Any, params: dict[str, Any]) -> str:
    """The answer: the forced tool's input as JSON when the request asked through a tool,
    else the text blocks."""
    forced = (params.get("tool_choice") or {}).get("name")
    for block in message.content:
        if forced and getattr(block, "type", "") == "tool_use" and block.name == forced:
            return json.dumps(block.input, ensure_ascii=False)
    return "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")


def end_of_life(model: str) -> str | None:
    """The end-of-life date the installed anthropic SDK's own table gives `model`; None when
    it is not deprecated, or this SDK has no such table (a private module: it may move)."""
    try:
        from anthropic._data import DEPRECATED_MODELS
        date = DEPRECATED_MODELS.get(model)
    except Exception:  # noqa: BLE001 - a missing or reshaped table is no finding
        return None
    return date if isinstance(date, str) else None
