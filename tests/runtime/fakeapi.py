"""An in-process fault server speaking the Anthropic Messages and OpenAI Chat Completions wire
formats over real sockets (respx/pytest-httpx patch `httpx`, not the `httpx2` the SDKs use).

    api = FakeAPI(); base = await api.start()        # http://127.0.0.1:<port>
    api.push(Reply.status(429, headers={"retry-after": "3"}), Reply.ok('{"a": 1}'))
    ... point AsyncAnthropic(base_url=base) / AsyncOpenAI(base_url=base + "/v1") at it ...
    assert api.count == 2; await api.close()

Each request takes the next `Reply` from the queue (an ok answer once it is empty). A reply
is streamed (SSE) when the request asked for `stream: true`. Faults: an HTTP status with an
error body, an error event inside a 200 stream, a cut stream (transport.abort()), a clean
end without the terminator, a 200 whose body is not JSON, a delay, and `max_tokens` /
`length` stops. Requests are recorded (path, JSON body, headers without credentials).
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
    fault: str = "ok"  # ok | status | stream_error | cut | eof | bad_body
    text: str = '{"ok": true}'
    status: int = 200
    error_type: str = "api_error"
    error_code: str | None = None  # openai `code`, anthropic `details.error_code`
    message: str = "fault injected by the test server"
    headers: dict[str, str] = field(default_factory=dict)
    stop: str | None = None  # None: end_turn / stop; "max_tokens": max_tokens / length; "refusal"
    usage: dict[str, int] = field(default_factory=dict)  # input, output, cache_read, cache_write, reasoning
    delay: float = 0.0

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
        self._runner: web.AppRunner | None = None

    @property
    def count(self) -> int:
        return len(self.requests)

    def push(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/chat/completions", self._openai)
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
        reply = self.queue.popleft() if self.queue else Reply()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        return reply, body if isinstance(body, dict) else {}

    @staticmethod
    def _error_response(reply: Reply, body: dict) -> web.Response:
        return web.Response(status=reply.status, headers=reply.headers,
                            content_type="application/json", text=json.dumps(body))

    @staticmethod
    async def _sse(request: web.Request, reply: Reply, events: list[str], terminator: str | None,
                   error_event: str | None) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"content-type": "text/event-stream", **reply.headers})
        await resp.prepare(request)
        if reply.fault in ("cut", "eof", "stream_error"):
            events = events[: max(1, len(events) // 2)]
        for event in events:
            await resp.write(event.encode())
        if reply.fault == "cut":
            await asyncio.sleep(0.01)
            assert request.transport is not None
            request.transport.abort()
            return resp
        if reply.fault == "stream_error" and error_event:
            await resp.write(error_event.encode())
        elif reply.fault == "ok" and terminator:
            await resp.write(terminator.encode())
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
                 "cache_creation_input_tokens": u.get("cache_write", 0)}
        stop = {None: "end_turn", "max_tokens": "max_tokens", "refusal": "refusal"}[reply.stop]
        model = body.get("model", "claude-test")
        message = {"id": "msg_test", "type": "message", "role": "assistant", "model": model,
                   "content": [{"type": "text", "text": reply.text}], "stop_reason": stop,
                   "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return web.json_response(message, headers=reply.headers)

        def ev(name: str, data: dict) -> str:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n"

        start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
        half = len(reply.text) // 2
        events = [
            ev("message_start", {"type": "message_start", "message": start}),
            ev("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}}),
            ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": reply.text[:half]}}),
            ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": reply.text[half:]}}),
            ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                 "usage": {"output_tokens": usage["output_tokens"]}}),
        ]
        error = ev("error", {"type": "error", "error": {"type": reply.error_type, "message": reply.message}})
        return await self._sse(request, reply, events, ev("message_stop", {"type": "message_stop"}), error)

    # ------------------------------------------------------------------ OpenAI Chat Completions

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        reply, body = await self._take(request)
        if reply.fault == "status":
            return self._error_response(reply, {"error": {"message": reply.message, "type": reply.error_type,
                                                          "code": reply.error_code, "param": None}})
        if reply.fault == "bad_body":
            return self._bad_body(reply)
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
            return web.json_response(dict(base, object="chat.completion", usage=usage, choices=[{
                "index": 0, "message": {"role": "assistant", "content": reply.text, "refusal": None},
                "finish_reason": finish, "logprobs": None}]), headers=reply.headers)

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
        return await self._sse(request, reply, events, "data: [DONE]\n\n", error)


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
