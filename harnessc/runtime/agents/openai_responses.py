"""Provider `openai` with `api: responses`: the Responses API (`client.responses.create`).

The system prompt is sent as `instructions`, the task prompt as `input`, the output cap as
`max_output_tokens`; structured output is `text.format` (the same strict json_schema, JSON
mode or nothing as chat, per `structured:`). `store: false`: harnessc keeps its own record.
A streamed answer is the `response.output_text.delta` events, ended by `response.completed`
(or `response.incomplete`); `response.failed` and `error` events are errors of the API.
Status `incomplete` with reason `max_output_tokens` is a truncated answer, a `refusal`
content item (or reason `content_filter`) a refusal. The client, the key handling and the
call step are the chat agent's (openai_api.py, sdk.py).
"""

from __future__ import annotations

from typing import Any

from .base import Request, Usage
from .errors import AnswerError
from .openai_api import OpenAIAgent
from .sdk import DONE, MAX_TOKENS, REFUSAL, UNFINISHED, Answer

_TERMINAL = ("response.completed", "response.incomplete")


class OpenAIResponsesAgent(OpenAIAgent):
    terminator = "response.completed"

    def params(self, request: Request) -> dict[str, Any]:
        """The Responses API parameters for one request (no credentials)."""
        p: dict[str, Any] = {"model": self.model, "input": request.prompt, "store": False}
        if request.system:
            p["instructions"] = request.system
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            p["max_output_tokens"] = max_tokens
        if self.config.temperature is not None:
            p["temperature"] = self.config.temperature
        fmt = self.structured_format(request)
        if fmt:
            p["text"] = {"format": fmt}
        if self.stream:
            p["stream"] = True
        p.update(self.cache_routing(request))
        return p

    async def send(self, client: Any, params: dict[str, Any], timeout: float | None) -> Answer:
        if not self.stream:
            return _answer(await client.responses.create(**params, timeout=timeout), None)
        parts: list[str] = []
        stream = await client.responses.create(**params, timeout=timeout)
        async for event in stream:
            kind = getattr(event, "type", "")
            if kind == "response.output_text.delta":
                parts.append(event.delta)
            elif kind in _TERMINAL:
                return _answer(event.response, "".join(parts))
            elif kind == "response.failed":
                _raise_failed(event.response)
            elif kind == "error":
                raise AnswerError(event.message or "error event", code=getattr(event, "code", None))
        return Answer(text="".join(parts), stop=UNFINISHED, usage=None)

    @staticmethod
    def usage(u: Any) -> Usage:
        """Responses usage: cached_tokens are a subset of input_tokens, like chat's."""
        if u is None:
            return Usage()
        details = getattr(u, "input_tokens_details", None)
        out_details = getattr(u, "output_tokens_details", None)
        return Usage(input_tokens=u.input_tokens or 0, output_tokens=u.output_tokens or 0,
                     cache_read_tokens=getattr(details, "cached_tokens", None) or 0,
                     reasoning_tokens=getattr(out_details, "reasoning_tokens", None) or 0)


def _answer(response: Any, streamed_text: str | None) -> Answer:
    """The Answer of a finished Response object (streamed text, when given, is the answer)."""
    status = getattr(response, "status", None)
    if status == "failed":
        _raise_failed(response)
    text, refusal = _output(response)
    if streamed_text:
        text = streamed_text
    reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
    if refusal is not None or reason == "content_filter":
        stop = REFUSAL
        refusal = refusal or ("stopped by the content filter" if reason == "content_filter" else None)
    elif status == "incomplete":
        stop = MAX_TOKENS if reason == "max_output_tokens" else UNFINISHED
    elif status == "completed":
        stop = DONE
    else:  # queued / in_progress / cancelled: not an answer
        stop = UNFINISHED
    return Answer(text=text, stop=stop, usage=getattr(response, "usage", None), refusal=refusal)


def _output(response: Any) -> tuple[str, str | None]:
    """The output_text parts of the response's messages, and its refusal (None: none)."""
    texts: list[str] = []
    refusal: str | None = None
    for item in getattr(response, "output", None) or []:
        if getattr(item, "type", "") != "message":
            continue
        for part in getattr(item, "content", None) or []:
            if part.type == "output_text":
                texts.append(part.text or "")
            elif part.type == "refusal":
                refusal = (refusal or "") + (part.refusal or "")
    return "".join(texts), refusal


def _raise_failed(response: Any) -> None:
    err = getattr(response, "error", None)
    raise AnswerError(getattr(err, "message", None) or "the response failed",
                      code=getattr(err, "code", None), error_type=getattr(err, "type", None))
