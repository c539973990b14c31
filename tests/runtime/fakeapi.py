"""An in-process fault server speaking the Anthropic Messages, OpenAI Chat Completions and
OpenAI Responses wire formats over real sockets (respx/pytest-httpx patch `httpx`, not the `httpx2` the SDKs use).

    api = FakeAPI(); base = await api.start()        # http://127.0.0.1:<port>
    api.push(Reply.status(429, headers={"retry-after": "3"}), Reply.ok('{"a": 1}'))
    ... point AsyncAnthropic(base_url=base) / AsyncOpenAI(base_url=base + "/v1") at it ...
    assert api.count == 2; await api.close()

Each request takes the next `Reply` from the queue (an ok answer once it is empty). A reply
is streamed (SSE) when the request asked for `stream: true`. Faults: an HTTP status with an
error body, an error event inside a 200 stream, a cut stream (transport.abort()), a clean
end without the terminator, a 200 whose body is not JSON, a delay, a stream that never ends
(`slow`: a keep-alive comment every `pace` seconds), a body at one byte per `pace` (`drip`,
not streamed; `ticks` counts what they sent), and `max_tokens` /
`length` / `incomplete` stops; for Responses also `failed` (a `response.failed` event, or a
non-streamed response with status failed). Requests are recorded (path, JSON body, headers
without credentials).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

SECRET_HEADERS = {"x-api-key", "authorization"}


@dataclass
class Reply:
    fault: str = "ok"  # ok | status | stream_error | cut | eof | bad_body | failed (Responses) | slow | drip
    text: str = '{"ok": true}'
    status: int = 200
    error_type: str = "api_error"
    error_code: str | None = None  # openai `code`, anthropic `details.error_code`
    message: str = "fault injected by the test server"
    headers: dict[str, str] = field(default_factory=dict)
    stop: str | None = None  # None: end_turn / stop; "max_tokens": max_tokens / length; "refusal"
    # input, output, cache_read, cache_write (of which cache_write_1h for an hour), reasoning
    usage: dict[str, int] = field(default_factory=dict)
    delay: float = 0.0
    pace: float = 0.5  # slow: seconds between the stream's keep-alive events; drip: between bytes

    @classmethod
    def ok(cls, text: str = '{"ok": true}', **kw: Any) -> "Reply":
        return cls(text=text, **kw)

    @classmethod
    def error(cls, status: int, error_type: str = "api_error", **kw: Any) -> "Reply":
        return cls(fault="status", status=status, error_type=error_type, **kw)


@dataclass
class Seen:
    path: str
    body: Any
    headers: dict[str, str]  # without credentials
    auth: str | None  # the credential header as sent (tests use fake keys only)


class FakeAPI:
    def __init__(self) -> None:
        self.queue: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self.ticks = 0  # keep-alive events (slow) and bytes (drip) sent so far
        self._runner: web.AppRunner | None = None

    @property
    def count(self) -> int:
        return len(self.requests)

    def push(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    def next_reply(self, body: Any) -> Reply:
        """The reply to the request just received, whose JSON body is `body` (subclasses may
        script it otherwise)."""
        return self.queue.popleft() if self.queue else Reply()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/responses", self._responses)

    async def start(self) -> str:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    # ------------------------------------------------------------------ common

    async def _take(self, request: web.Request) -> tuple[Reply, dict]:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() not in SECRET_HEADERS}
        auth = request.headers.get("authorization") or request.headers.get("x-api-key")
        self.requests.append(Seen(request.path, body, headers, auth))
        reply = self.next_reply(body)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        return reply, body if isinstance(body, dict) else {}

    @staticmethod
    def _error_response(reply: Reply, body: dict) -> web.Response:
        return web.Response(status=reply.status, headers=reply.headers,
                            content_type="application/json", text=json.dumps(body))

    async def _sse(self, request: web.Request, reply: Reply, events: list[str],
                   endings: dict[str, str]) -> web.StreamResponse:
        """Stream `events`, then the ending for the reply's fault (`endings[fault]`: the
        terminator for ok, the error event for stream_error, ...; none: a clean end without
        it). A fault's stream breaks off half-way; a cut one aborts the connection."""
        resp = web.StreamResponse(status=200, headers={"content-type": "text/event-stream", **reply.headers})
        await resp.prepare(request)
        if reply.fault != "ok":
            events = events[: max(1, len(events) // 2)]
        for event in events:
            await resp.write(event.encode())
        if reply.fault == "slow":  # never ends (until the client goes): an SSE comment every `pace` seconds
            try:
                while True:
                    await asyncio.sleep(reply.pace)
                    await resp.write(b": keep-alive\n\n")
                    self.ticks += 1
            except ConnectionResetError:
                return resp
        if reply.fault == "cut":
            await asyncio.sleep(0.01)
            assert request.transport is not None
            request.transport.abort()
            return resp
        if reply.fault in endings:
            await resp.write(endings[reply.fault].encode())
        await resp.write_eof()
        return resp

    async def _drip(self, request: web.Request, reply: Reply, body: dict) -> web.StreamResponse:
        """The whole JSON answer, one byte every `pace` seconds."""
        data = json.dumps(body).encode()
        resp = web.StreamResponse(status=200, headers={"content-type": "application/json",
                                                       "content-length": str(len(data)), **reply.headers})
        await resp.prepare(request)
        try:
            for i in range(len(data)):
                await resp.write(data[i:i + 1])
                self.ticks += 1
                await asyncio.sleep(reply.pace)
        except ConnectionResetError:  # the client gave up
            return resp
        await resp.write_eof()
        return resp

    @staticmethod
    def _bad_body(reply: Reply) -> web.Response:
        return web.Response(status=200, content_type="application/json", headers=reply.headers,
                            text='{"id": "x", "content": [{"type": "text", "te')

    # ------------------------------------------------------------------ Anthropic Messages

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        reply, body = await self._take(request)
        if reply.fault == "status":
            details = {"error_code": reply.error_code} if reply.error_code else None
            err = {"type": reply.error_type, "message": reply.message, **({"details": details} if details else {})}
            return self._error_response(reply, {"type": "error", "error": err})
        if reply.fault == "bad_body":
            return self._bad_body(reply)
        u = reply.usage
        usage = {"input_tokens": u.get("input", 10), "output_tokens": u.get("output", 5),
                 "cache_read_input_tokens": u.get("cache_read", 0),
                 "cache_creation_input_tokens": u.get("cache_write", 0),
                 "cache_creation": {"ephemeral_5m_input_tokens": u.get("cache_write", 0) - u.get("cache_write_1h", 0),
                                    "ephemeral_1h_input_tokens": u.get("cache_write_1h", 0)}}
        forced = body.get("tool_choice") or {}
        tool = forced.get("name") if forced.get("type") == "tool" else None  # answered as a tool call
        stop = {None: "tool_use" if tool else "end_turn", "max_tokens": "max_tokens", "refusal": "refusal"}[reply.stop]
        model = body.get("model", "claude-test")
        block = ({"type": "tool_use", "id": "toolu_test", "name": tool, "input": _json_or_empty(reply.text)}
                 if tool else {"type": "text", "text": reply.text})
        message = {"id": "msg_test", "type": "message", "role": "assistant", "model": model,
                   "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            if reply.fault == "drip":
                return await self._drip(request, reply, message)
            return web.json_response(message, headers=reply.headers)

        def ev(name: str, data: dict) -> str:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n"

        start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
        half = len(reply.text) // 2
        events = [
            ev("message_start", {"type": "message_start", "message": start}),
            ev("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": dict(block, input={}) if tool else dict(block, text="")}),
            *(ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": (
                {"type": "input_json_delta", "partial_json": part} if tool else {"type": "text_delta", "text": part})})
              for part in (reply.text[:half], reply.text[half:])),
            ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": usage["output_tokens"]}}),
        ]
        error = ev("error", {"type": "error", "error": {"type": reply.error_type, "message": reply.message}})
        return await self._sse(request, reply, events,
                               {"ok": ev("message_stop", {"type": "message_stop"}), "stream_error": error})

    # ------------------------------------------------------------------ OpenAI Chat Completions

    def _openai_fault(self, reply: Reply) -> web.Response:
        """An HTTP error with OpenAI's error body, or a 200 whose body is not JSON (both APIs)."""
        if reply.fault == "bad_body":
            return self._bad_body(reply)
        return self._error_response(reply, {"error": {"message": reply.message, "type": reply.error_type,
                                                      "code": reply.error_code, "param": None}})

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        reply, body = await self._take(request)
        if reply.fault in ("status", "bad_body"):
            return self._openai_fault(reply)
        u = reply.usage
        cached = u.get("cache_read", 0)
        usage = {"prompt_tokens": u.get("input", 10) + cached, "completion_tokens": u.get("output", 5),
                 "total_tokens": u.get("input", 10) + cached + u.get("output", 5),
                 "prompt_tokens_details": {"cached_tokens": cached},
                 "completion_tokens_details": {"reasoning_tokens": u.get("reasoning", 0)}}
        finish = {None: "stop", "max_tokens": "length", "refusal": "content_filter"}[reply.stop]
        model = body.get("model", "gpt-test")
        base = {"id": "chatcmpl-test", "created": 0, "model": model}
        if not body.get("stream"):
            completion = dict(base, object="chat.completion", usage=usage, choices=[{
                "index": 0, "message": {"role": "assistant", "content": reply.text, "refusal": None},
                "finish_reason": finish, "logprobs": None}])
            if reply.fault == "drip":
                return await self._drip(request, reply, completion)
            return web.json_response(completion, headers=reply.headers)

        def chunk(choices: list, **extra: Any) -> str:
            return "data: " + json.dumps(dict(base, object="chat.completion.chunk", choices=choices, **extra)) + "\n\n"

        half = len(reply.text) // 2
        events = [
            chunk([{"index": 0, "delta": {"role": "assistant", "content": reply.text[:half]}, "finish_reason": None}]),
            chunk([{"index": 0, "delta": {"content": reply.text[half:]}, "finish_reason": None}]),
            chunk([{"index": 0, "delta": {}, "finish_reason": finish}]),
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append(chunk([], usage=usage))  # the usage-only final chunk: choices == []
        error = "data: " + json.dumps({"error": {"message": reply.message, "type": reply.error_type,
                                                 "code": reply.error_code}}) + "\n\n"
        return await self._sse(request, reply, events, {"ok": "data: [DONE]\n\n", "stream_error": error})

    # ------------------------------------------------------------------ OpenAI Responses

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        reply, body = await self._take(request)
        if reply.fault in ("status", "bad_body"):
            return self._openai_fault(reply)
        u = reply.usage
        cached = u.get("cache_read", 0)
        usage = {"input_tokens": u.get("input", 10) + cached, "input_tokens_details": {"cached_tokens": cached},
                 "output_tokens": u.get("output", 5),
                 "output_tokens_details": {"reasoning_tokens": u.get("reasoning", 0)},
                 "total_tokens": u.get("input", 10) + cached + u.get("output", 5)}
        part = ({"type": "refusal", "refusal": reply.text} if reply.stop == "refusal"
                else {"type": "output_text", "text": reply.text, "annotations": []})
        item = {"type": "message", "id": "msg_test", "status": "completed", "role": "assistant", "content": [part]}
        response = {"id": "resp_test", "object": "response", "created_at": 0, "model": body.get("model", "gpt-test"),
                    "status": "completed", "error": None, "incomplete_details": None, "output": [item],
                    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage}
        if reply.stop == "max_tokens":
            response.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        failed = dict(response, status="failed", output=[], usage=None,
                      error={"code": reply.error_code or "server_error", "message": reply.message})
        if not body.get("stream"):
            return web.json_response(failed if reply.fault == "failed" else response, headers=reply.headers)

        seq = iter(range(1_000_000))

        def ev(name: str, **data: Any) -> str:
            return f"event: {name}\ndata: {json.dumps(dict(type=name, sequence_number=next(seq), **data))}\n\n"

        started = dict(response, status="in_progress", output=[], usage=None)
        at = {"item_id": "msg_test", "output_index": 0, "content_index": 0}
        delta = "response.refusal.delta" if reply.stop == "refusal" else "response.output_text.delta"
        extra = {} if reply.stop == "refusal" else {"logprobs": []}
        half = len(reply.text) // 2
        events = [
            ev("response.created", response=started),
            ev("response.in_progress", response=started),
            ev("response.output_item.added", output_index=0, item=dict(item, status="in_progress", content=[])),
            ev("response.content_part.added", part=dict(part, **({"refusal": ""} if reply.stop == "refusal"
                                                                 else {"text": ""})), **at),
            ev(delta, delta=reply.text[:half], **at, **extra),
            ev(delta, delta=reply.text[half:], **at, **extra),
            ev("response.content_part.done", part=part, **at),
            ev("response.output_item.done", output_index=0, item=item),
        ]
        terminal = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        endings = {"ok": ev(terminal, response=response),
                   "stream_error": ev("error", code=reply.error_code or reply.error_type, message=reply.message,
                                      param=None),
                   "failed": ev("response.failed", response=failed)}
        return await self._sse(request, reply, events, endings)


class ThreadedFakeAPI(FakeAPI):
    """The same server on its own event loop in a thread, for a harnessc subprocess to call."""

    def __enter__(self) -> "ThreadedFakeAPI":
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.base_url = asyncio.run_coroutine_threadsafe(self.start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def _json_or_empty(text: str) -> Any:
    """A tool call's input: the reply's text as JSON ({} when it is none, as a cut call's)."""
    try:
        return json.loads(text)
    except ValueError:
        return {}
