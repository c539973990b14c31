"""OpenTelemetry traces of a run (issue 20 part 3, issue 28 part 1), checked at an OTLP/HTTP
receiver on 127.0.0.1 that decodes what arrives with the OTLP protobuf messages: the span
tree (run > task > render prompt, route, attempt > chat, verify > accept), real times with
no time given to the wrong span, each agent call an LLM span (GenAI inference and
OpenInference attributes) whose tokens add up to what `status` reports, ERROR on a rejected
attempt and a skipped task, the Phoenix project, no content and no secret unless
`telemetry.content: true` (and never a secret, a value given to an agent or a URL's
credentials), a collector that is down, hangs or answers with a huge body, telemetry
configured without its packages, and a bad endpoint in lint."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from google.protobuf.json_format import MessageToDict  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from . import virtual  # noqa: E402
from .helpers import CLI, PY, REPO, SIMPLE_CONTRACT, env, harnessc, node, peak_rss, write_project  # noqa: E402


class Receiver:
    """An OTLP/HTTP collector: POST /v1/traces bodies decoded into spans (dicts)."""

    def __init__(self, hang: bool = False, error_body: int = 0):
        """`hang`: never answer; `error_body`: answer 500 with a body of that many bytes (sent
        a MiB at a time, for as long as the client reads)."""
        self.spans: list[dict] = []
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if hang:
                    receiver.release.wait(30)
                    return
                receiver.take(self.path, self.headers.get("Content-Type"), body)
                if error_body:
                    self._error_body()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _error_body(self):
                self.send_response(500)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(error_body))
                self.end_headers()
                mib = b"x" * (1 << 20)
                try:
                    for _ in range(error_body >> 20):
                        self.wfile.write(mib)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client read what it wanted and hung up

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def take(self, path: str, content_type: str | None, body: bytes) -> None:
        assert content_type == "application/x-protobuf"
        self.paths.append(path)
        self.bodies.append(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = _attrs(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    self.spans.append({
                        "name": s.name, "trace": s.trace_id.hex(), "id": s.span_id.hex(),
                        "parent": s.parent_span_id.hex() or None, "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano, "error": s.status.code == 2, "status": s.status.message,
                        "kind": s.kind,
                        "attrs": _attrs(s.attributes), "resource": resource})

    def __enter__(self) -> "Receiver":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def named(self, prefix: str) -> list[dict]:
        return [s for s in self.spans if s["name"].startswith(prefix)]


def _attrs(kvs) -> dict:
    out = {}
    for kv in kvs:
        value = MessageToDict(kv.value)
        (kind, v), = value.items()
        out[kv.key] = int(v) if kind == "intValue" else v
    return out


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_telemetry(root: Path, **settings) -> None:
    """Set harness.yaml's `telemetry:` in the plan.json write_project wrote (as a build would)."""
    path = root / ".harness" / "build" / "plan.json"
    plan = json.loads(path.read_text())
    plan["telemetry"] = {"otlp_endpoint": None, "content": False, **settings}
    path.write_text(json.dumps(plan))


def otel_env(url: str | None = None, **extra) -> dict:
    e = {k: v for k, v in env(**extra).items() if not k.startswith("OTEL_")}
    if url:
        e["OTEL_EXPORTER_OTLP_ENDPOINT"] = url
    return e


def rows(root: Path, sql: str) -> list[dict]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute(sql)]
    finally:
        db.close()


def status_totals(root: Path) -> dict:
    """`harnessc status --output json`'s totals: what the run's spans must add up to."""
    r = virtual.harnessc(root, "status", "--output", "json", env=otel_env())
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["totals"]


def assert_chat_spans_add_up(rx: "Receiver", root: Path) -> None:
    """One `chat` span per attempt and per assist call, whose tokens and costs add up to what
    status reports for each."""
    totals = status_totals(root)
    chats = [c["attrs"] for c in rx.named("chat ") if "harnessc.assist.purpose" not in c["attrs"]]
    assists = [c["attrs"] for c in rx.named("chat ") if "harnessc.assist.purpose" in c["attrs"]]
    assert len(chats) == totals["attempts"] > 0 and len(assists) == totals["assists"]["calls"]
    assert sum(a["gen_ai.usage.input_tokens"] for a in chats) == totals["input_tokens"]
    assert sum(a["gen_ai.usage.output_tokens"] for a in chats) == totals["output_tokens"]
    assert sum(a["llm.token_count.total"] for a in chats) == totals["tokens"]
    assert sum(a["harnessc.cost_usd"] for a in chats) == pytest.approx(totals["cost_usd"])
    assert sum(a["llm.token_count.total"] for a in assists) == totals["assists"]["tokens"]
    assert sum(a["harnessc.cost_usd"] for a in assists) == pytest.approx(totals["assists"]["cost_usd"])


def status_task(root: Path, tid: str) -> dict:
    r = virtual.harnessc(root, "status", "--output", "json", env=otel_env())
    return next(t for t in json.loads(r.stdout)["tasks"] if t["id"] == tid)


def alerts(root: Path) -> list[dict]:
    path = root / ".harness" / "alerts.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ------------------------------------------------------------------ the trace


def test_a_run_is_one_trace_of_run_task_attempt_verify_and_accept_spans_with_real_times(tmp_path):
    accept = [{"id": "smoke", "argv": [PY, "-c", "print('ok')"], "timeout": 60}]
    write_project(tmp_path, [
        node("a", contract="summary", accept=accept, routing={"agent": "careful", "chain": ["careful"]},
             goal="GOAL-MARKER-a: summarise"),
        node("b", depends_on=["a"]),
    ], agents={"rehearsal": {"provider": "simulate", "price": {"input": 3.0, "output": 15.0}},
               "careful": {"provider": "simulate", "invalid_first": 1, "price": {"input": 3.0, "output": 15.0}}},
        contracts={"summary": SIMPLE_CONTRACT})
    with Receiver() as rx:
        r = harnessc(tmp_path, "run", env=otel_env(rx.url + "/"))  # a trailing slash is no second one
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(rx.paths) == {"/v1/traces"}
    spans = {s["id"]: s for s in rx.spans}
    assert len({s["trace"] for s in rx.spans}) == 1  # one run, one trace

    (run,) = rx.named("harnessc run")
    (run_row,) = rows(tmp_path, "SELECT * FROM runs")
    assert run["name"] == f"harnessc run Test {run_row['id']}"  # the project's title and the run
    assert run["parent"] is None and run["resource"]["service.name"] == "harnessc"
    assert "openinference.project.name" not in run["resource"]  # no telemetry.project: the tool's default
    assert run["attrs"]["harnessc.run.id"] == run_row["id"]
    assert run["attrs"]["harnessc.run.status"] == "succeeded" and run["attrs"]["harnessc.run.exit_code"] == 0
    assert not run["error"]

    tasks = {s["attrs"]["harnessc.task.id"]: s for s in rx.named("task ")}
    assert set(tasks) == {"a", "b"}
    for tid, span in tasks.items():
        assert span["name"] == f"task {tid}" and span["parent"] == run["id"]
        assert span["attrs"]["harnessc.task.state"] == "succeeded"
        assert run["start"] <= span["start"] <= span["end"] <= run["end"]

    attempts = rows(tmp_path, "SELECT * FROM attempts ORDER BY id")
    assert [a["status"] for a in attempts] == ["rejected", "succeeded", "succeeded"]
    by_attempt = {s["attrs"]["harnessc.attempt.id"]: s for s in rx.named("invoke_agent ")}
    assert set(by_attempt) == {a["id"] for a in attempts}
    chats = {spans[s["parent"]]["attrs"]["harnessc.attempt.id"]: s for s in rx.named("chat ")}
    assert set(chats) == set(by_attempt)  # one agent call per attempt
    for row in attempts:
        span = by_attempt[row["id"]]
        a = span["attrs"]
        assert span["name"] == f"invoke_agent {row['agent']}" and span["parent"] == tasks[row["task_id"]]["id"]
        assert a["harnessc.task.id"] == row["task_id"] and a["harnessc.attempt.status"] == row["status"]
        # simulate agents: the provider's own name, and the agent's name as the model
        assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "simulate"
        assert a["gen_ai.request.model"] == a["gen_ai.agent.name"] == row["agent"]
        assert a["gen_ai.operation.name"] == "invoke_agent" and a["openinference.span.kind"] == "AGENT"
        assert a["harnessc.tokens"] == row["input_tokens"] + row["output_tokens"]
        assert a["harnessc.cost_usd"] == pytest.approx(row["cost_usd"]) and row["cost_usd"] > 0
        # its usage is on its chat span only: a tool that sums every span's usage counts it once
        assert not [k for k in a if k.startswith(("gen_ai.usage.", "llm.token_count."))]
        # the attempt's own times (the span opens at its attempt_started event, a moment later)
        assert abs(span["start"] - row["started_at"] * 1e9) < 50e6
        assert abs(span["end"] - row["finished_at"] * 1e9) < 1e6
        # the call: an LLM span, child of its attempt, with the attempt's usage (estimated here)
        chat = chats[row["id"]]
        c = chat["attrs"]
        assert chat["name"] == f"chat {row['agent']}" and chat["parent"] == span["id"] and not chat["error"]
        assert chat["kind"] == 3 and span["kind"] == 1  # SPAN_KIND_CLIENT (a call to a service), INTERNAL
        assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.provider.name"] == "simulate"
        assert c["gen_ai.request.model"] == c["gen_ai.response.model"] == c["llm.model_name"] == row["agent"]
        assert c["openinference.span.kind"] == "LLM" and c["harnessc.usage_source"] == "estimate"
        assert c["gen_ai.usage.input_tokens"] == c["llm.token_count.prompt"] == row["input_tokens"] > 0
        assert c["gen_ai.usage.output_tokens"] == c["llm.token_count.completion"] == row["output_tokens"] > 0
        assert c["llm.token_count.total"] == row["input_tokens"] + row["output_tokens"]
        assert c["gen_ai.usage.cache_read.input_tokens"] == c["gen_ai.usage.cache_creation.input_tokens"] == 0
        assert c["harnessc.cost_usd"] == c["gen_ai.usage.cost"] == c["llm.cost.total"] == pytest.approx(row["cost_usd"])
        assert c["harnessc.cost_source"] == "price"
        # the call lasts the agent's latency, inside the attempt, and ends when verify starts
        assert span["start"] <= chat["start"] <= chat["end"] <= span["end"]
        assert (chat["end"] - chat["start"]) / 1e9 == pytest.approx(row["latency"], abs=2e-3)
        for key in ("gen_ai.prompt", "gen_ai.completion", "gen_ai.input.messages", "gen_ai.output.messages",
                    "input.value", "output.value"):
            assert key not in a and key not in c
    # a rejected attempt is an error, saying so (no error text: content is off)
    assert by_attempt[attempts[0]["id"]]["error"] and by_attempt[attempts[0]["id"]]["status"] == "rejected"
    assert not any(by_attempt[row["id"]]["error"] for row in attempts[1:])

    # the steps before each attempt: its prompt rendered (the first, then the refined one) and
    # its route (agent, budget, slot), in its task, before the attempt: never its verify's time
    for tid, task in tasks.items():
        before = [s for s in rx.spans if s["parent"] == task["id"] and not s["name"].startswith("invoke_agent ")]
        mine = sorted((by_attempt[row["id"]] for row in attempts if row["task_id"] == tid), key=lambda s: s["start"])
        assert sorted(s["name"] for s in before) == sorted(["render prompt", "route"] * len(mine))
        assert task["start"] == min(s["start"] for s in before)  # the task's span holds them
        for span in before:
            assert span["attrs"]["harnessc.task.id"] == tid and not span["error"]
            assert span["attrs"]["openinference.span.kind"] == {"render prompt": "PROMPT", "route": "CHAIN"}[span["name"]]
            nxt = next(a for a in mine if a["start"] >= span["end"] - 1e6)  # the attempt they prepared
            assert span["end"] <= nxt["start"] + 1e6
        for route in (s for s in before if s["name"] == "route"):
            assert route["attrs"]["harnessc.route.agent"] in ("careful", "rehearsal")
    assert_chat_spans_add_up(rx, tmp_path)

    verify = {spans[s["parent"]]["attrs"]["harnessc.attempt.id"]: s for s in rx.named("verify")}
    assert set(verify) == set(by_attempt)
    rejected, passed = verify[attempts[0]["id"]], verify[attempts[1]["id"]]
    assert rejected["error"] and rejected["status"] == "verification failed"  # no error text: content is off
    assert not rejected["attrs"]["harnessc.verify.passed"] and rejected["attrs"]["harnessc.verify.errors"] >= 1
    assert not passed["error"] and passed["attrs"]["harnessc.verify.passed"]
    for aid, s in verify.items():
        attempt = spans[s["parent"]]
        assert s["attrs"]["openinference.span.kind"] == "GUARDRAIL"
        assert chats[aid]["end"] == s["start"] <= s["end"] == attempt["end"]  # from the answer on
        assert s["attrs"]["harnessc.task.id"] == attempt["attrs"]["harnessc.task.id"]

    (check,) = rx.named("accept smoke")
    (row_check,) = json.loads(attempts[1]["checks"])
    assert check["parent"] == passed["id"] and check["attrs"]["harnessc.accept.exit_code"] == 0
    assert check["attrs"]["harnessc.task.id"] == "a"
    assert check["start"] == pytest.approx(row_check["started"] * 1e9, abs=1e6)
    assert (check["end"] - check["start"]) / 1e9 == pytest.approx(row_check["duration"], abs=2e-3)
    assert passed["start"] <= check["start"] <= check["end"] <= passed["end"]

    # the run's texts never left: the prompts and the simulated answers
    sent = b"".join(rx.bodies)
    assert all(row["prompt"].strip().encode() not in sent for row in attempts)
    assert b"GOAL-MARKER" not in sent and b'"score"' not in sent

    # the next run is a trace of its own
    with Receiver() as again:
        r = harnessc(tmp_path, "run", "--rerun", "all", env=otel_env(again.url))
    assert r.returncode == 0, r.stdout + r.stderr
    assert {s["trace"] for s in again.spans}.isdisjoint({s["trace"] for s in rx.spans})


@pytest.mark.parametrize("content", [False, True])
def test_an_api_agent_span_has_its_provider_model_and_cache_tokens_and_no_key(tmp_path, content):
    pytest.importorskip("anthropic")
    from .fakeapi import Reply, ThreadedFakeAPI
    from .test_providers import KEYS

    usage = {"input": 100, "cache_read": 1000, "cache_write": 200, "output": 20}
    with ThreadedFakeAPI() as api, Receiver() as rx:
        api.push(Reply.ok('{"title": "Q3", "score": 4}', usage=usage))
        agent = {"provider": "anthropic", "model": "m-1", "base_url": api.base_url,
                 "price": {"input": 3.0, "output": 15.0}}
        write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                      agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
        with_telemetry(tmp_path, otlp_endpoint=rx.url, content=content)
        e = {k: v for k, v in otel_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        r = harnessc(tmp_path, "run", env={**e, **KEYS})
    assert r.returncode == 0, r.stdout + r.stderr
    (span,) = rx.named("invoke_agent llm")
    a = span["attrs"]
    assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "anthropic"
    assert a["gen_ai.request.model"] == "m-1" and a["gen_ai.agent.name"] == "llm"
    (chat,) = rx.named("chat ")
    c = chat["attrs"]
    assert chat["name"] == "chat m-1" and chat["parent"] == span["id"]
    assert c["gen_ai.provider.name"] == c["llm.provider"] == "anthropic" and c["harnessc.usage_source"] == "reported"
    assert c["gen_ai.request.model"] == c["gen_ai.response.model"] == c["llm.model_name"] == "m-1"
    assert c["gen_ai.usage.input_tokens"] == c["llm.token_count.prompt"] == 1300
    assert c["gen_ai.usage.output_tokens"] == c["llm.token_count.completion"] == 20
    assert c["gen_ai.usage.cache_read.input_tokens"] == c["llm.token_count.prompt_details.cache_read"] == 1000
    assert c["gen_ai.usage.cache_creation.input_tokens"] == c["llm.token_count.prompt_details.cache_write"] == 200
    (row,) = rows(tmp_path, "SELECT cost_usd, latency, prompt FROM attempts")
    assert c["harnessc.cost_usd"] == c["llm.cost.total"] == pytest.approx(row["cost_usd"]) and row["cost_usd"] > 0
    # the request's own time: what came before it in the attempt (the SDK's import, its client)
    # is not the call's, and verification starts when the answer came
    (verify,) = rx.named("verify")
    assert span["start"] <= chat["start"] and chat["end"] == verify["start"] and verify["end"] == span["end"]
    assert (chat["end"] - chat["start"]) / 1e9 == pytest.approx(row["latency"], abs=2e-3)
    assert ("output.value" in c) == ("gen_ai.output.messages" in c) == content
    if content:
        (message,) = json.loads(c["gen_ai.output.messages"])
        assert message == {"role": "assistant", "finish_reason": "stop",
                           "parts": [{"type": "text", "content": '{"title": "Q3", "score": 4}'}]}
        assert json.loads(c["gen_ai.input.messages"])[0]["parts"][0]["content"] == c["input.value"] == row["prompt"]
    assert not any(key.encode() in body for body in rx.bodies for key in KEYS.values())
    assert_chat_spans_add_up(rx, tmp_path)


def test_a_loop_tasks_iterations_each_render_their_prompt_and_route_before_the_call(tmp_path):
    """A loop task: every iteration's prompt (with its memory of the earlier ones) is rendered
    before its attempt, in a `render prompt` span; its progress attempts are healthy."""
    write_project(tmp_path, [node("loop", completion_promise="DONE", routing={"agent": "slowpoke"})],
                  agents={"slowpoke": {"provider": "simulate", "complete_after": 4}})
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url)
        r = harnessc(tmp_path, "run", env=otel_env())
    assert r.returncode == 0, r.stdout + r.stderr
    attempts = sorted(rx.named("invoke_agent "), key=lambda s: s["start"])
    assert [s["attrs"]["harnessc.attempt.status"] for s in attempts] == ["progress"] * 4 + ["succeeded"]
    assert not any(s["error"] for s in rx.spans)
    prompts = sorted(rx.named("render prompt"), key=lambda s: s["start"])
    routes = sorted(rx.named("route"), key=lambda s: s["start"])
    assert len(prompts) == len(routes) == len(attempts)
    for prompt, route, attempt in zip(prompts, routes, attempts):
        assert prompt["end"] <= route["start"] and route["end"] <= attempt["start"] + 1e6
    assert_chat_spans_add_up(rx, tmp_path)


def test_a_cheap_agents_summary_and_mutation_calls_are_llm_spans_of_their_task(tmp_path):
    """The loop's assist calls (memory summaries, prompt mutations) are agent calls too: a
    `chat` span each in their task, with their purpose, adding up to status's assists."""
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "worker"},
                                  limits={"stuck_after": 2})],
                  agents={"worker": {"provider": "simulate", "complete_after": 8, "progress": "none"},
                          "rehearsal": {"provider": "simulate", "price": {"input": 1.0, "output": 2.0}}},
                  loop={"context": {"raw_window_size": 1, "summary_agent": "rehearsal", "summarize_every": 2},
                        "recovery": {"prompt_mutations": 2, "escalate": False, "human": False,
                                     "mutation_agent": "rehearsal"}})
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url)
        r = harnessc(tmp_path, "run", env=otel_env())
    assert r.returncode == 1, r.stdout + r.stderr  # still stuck: the worker never changes
    (task,) = rx.named("task t")
    assists = [s for s in rx.named("chat rehearsal")]
    assert {s["attrs"]["harnessc.assist.purpose"] for s in assists} == {"summary", "mutation"}
    for span in assists:
        a = span["attrs"]
        assert span["parent"] == task["id"] and not span["error"] and a["harnessc.assist.status"] == "written"
        assert a["openinference.span.kind"] == "LLM" and a["harnessc.usage_source"] == "estimate"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0 and a["llm.cost.total"] > 0
        assert task["start"] <= span["start"] <= span["end"] <= task["end"]
    assert_chat_spans_add_up(rx, tmp_path)
    assert task["attrs"]["harnessc.tokens"] == status_task(tmp_path, "t")["tokens"]  # the task's own, assists too


def test_waiting_for_an_agents_slot_is_routing_time_not_the_calls(tmp_path):
    """Two tasks at once on an agent that takes one call at a time: the second waits for the
    slot in its `route` span, which ends after the first call's answer; its own call starts
    after that (the wait is neither its call's nor its verification's)."""
    write_project(tmp_path, [node("a"), node("b")],
                  agents={"rehearsal": {"provider": "simulate", "latency": 0.3, "limits": {"concurrency": 1}}})
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url)
        r = harnessc(tmp_path, "run", env=otel_env())
    assert r.returncode == 0, r.stdout + r.stderr
    spans = {s["id"]: s for s in rx.spans}
    task_of = {s["id"]: s["attrs"]["harnessc.task.id"] for s in rx.named("task ")}
    chats = sorted(rx.named("chat "), key=lambda s: s["start"])
    routes = {task_of[s["parent"]]: s for s in rx.named("route")}
    first, second = (spans[c["parent"]]["attrs"]["harnessc.task.id"] for c in chats)
    assert routes[second]["end"] >= chats[0]["end"]  # it waited for the first call's slot ...
    assert chats[1]["start"] >= routes[second]["end"]  # ... before its own call
    assert routes[first]["end"] <= chats[0]["start"]


def test_a_cli_agent_invocation_is_a_chat_span_with_the_usage_the_cli_reported(tmp_path):
    from .test_cli_agents import CLAUDE_OK, fake_cli

    bindir = tmp_path / "bin"
    fake_cli(bindir, "claude", stdout=json.dumps(
        {**CLAUDE_OK, "structured_output": None, "result": '```json\n{"title": "ok", "score": 4}\n```'}))
    root = tmp_path / "proj"
    write_project(root, [node("t1", contract="summary", routing={"agent": "cc", "chain": ["cc"]})],
                  agents={"cc": {"provider": "claude-code", "model": "haiku"}}, contracts={"summary": SIMPLE_CONTRACT})
    with Receiver() as rx:
        with_telemetry(root, otlp_endpoint=rx.url)
        r = harnessc(root, "run", env=otel_env(PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}"))
    assert r.returncode == 0, r.stdout + r.stderr
    (chat,) = rx.named("chat ")
    (row,) = rows(root, "SELECT * FROM attempts")
    c = chat["attrs"]
    assert chat["name"] == "chat haiku" and c["gen_ai.provider.name"] == "anthropic"
    assert c["harnessc.usage_source"] == "reported" and c["harnessc.cost_source"] == "cli"
    assert c["gen_ai.usage.input_tokens"] == row["input_tokens"] > 0
    assert c["gen_ai.usage.cache_read.input_tokens"] == row["cache_read_tokens"]
    assert c["llm.cost.total"] == pytest.approx(0.000141)
    assert_chat_spans_add_up(rx, root)


def test_command_agent_calls_are_llm_spans_with_estimated_usage_and_a_skipped_task_is_an_error(tmp_path):
    """A command agent's calls carry the usage harnessc estimated (`estimate`), so the spans
    of a run add up to `status` even with no model behind the agent; a task skipped because
    its dependency failed is an ERROR saying why (harnessc's words: with content off too)."""
    talk = "import sys; sys.stdin.read(); print('done: ' + 'x' * 400)"
    fail = "import sys; sys.stdin.read(); sys.exit('no luck')"
    write_project(tmp_path, [
        node("ok", routing={"agent": "talk", "chain": ["talk"]}),
        node("ok2", depends_on=["ok"], routing={"agent": "talk", "chain": ["talk"]}),
        node("bad", routing={"agent": "fail", "chain": ["fail"]}, retry={"max_retries": 0}),
        node("after", depends_on=["bad"]),
    ], agents={"talk": {"provider": "command", "command": [PY, "-c", talk], "price": {"input": 1.0, "output": 2.0}},
               "fail": {"provider": "command", "command": [PY, "-c", fail]}})
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url)
        r = harnessc(tmp_path, "run", env=otel_env())
    assert r.returncode == 1, r.stdout + r.stderr
    spans = {s["id"]: s for s in rx.spans}
    chats = {spans[s["parent"]]["attrs"]["harnessc.task.id"]: s for s in rx.named("chat ")}
    assert set(chats) == {"ok", "ok2", "bad"}
    for tid in ("ok", "ok2"):
        c = chats[tid]["attrs"]
        assert chats[tid]["name"] == "chat talk" and not chats[tid]["error"]
        assert c["harnessc.usage_source"] == "estimate" and c["gen_ai.provider.name"] == "command"
        assert c["gen_ai.usage.output_tokens"] > 100 and c["harnessc.cost_usd"] > 0  # 400 characters, priced
    assert chats["bad"]["error"] and chats["bad"]["attrs"]["error.type"] == "error"
    assert_chat_spans_add_up(rx, tmp_path)

    tasks = {s["attrs"]["harnessc.task.id"]: s for s in rx.named("task ")}
    after = tasks["after"]
    assert after["error"] and after["status"] == "skipped: dependency 'bad' failed"
    assert after["attrs"]["harnessc.task.state"] == "skipped" and after["attrs"]["harnessc.task.attempts"] == 0
    assert tasks["bad"]["error"] and not tasks["ok"]["error"] and not tasks["ok2"]["error"]
    # the dependent's span starts with its own prompt, after the task it waited for
    assert tasks["ok2"]["start"] >= tasks["ok"]["end"] - 1e6


def test_telemetry_project_names_the_phoenix_project_over_the_environment(tmp_path):
    write_project(tmp_path, [node("a")])
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url, project="nightly-demo")
        r = harnessc(tmp_path, "run", env={
            **otel_env(), "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=from-env,deployment.environment=ci"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert rx.spans
    for span in rx.spans:
        assert span["resource"]["openinference.project.name"] == "nightly-demo"
        assert span["resource"]["deployment.environment"] == "ci"  # the rest of the environment's kept
    # without it, the environment's choice stands
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url)
        r = harnessc(tmp_path, "run", "--rerun", "all",
                     env={**otel_env(), "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=from-env"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert {s["resource"]["openinference.project.name"] for s in rx.spans} == {"from-env"}


def test_content_is_redacted_then_cut_at_its_limit_in_every_attribute_it_goes_to(tmp_path):
    """An answer longer than CONTENT_LIMIT with a secret across the cut: every copy of it (the
    GenAI messages' JSON, OpenInference's output.value) is the redacted text, cut, with no
    start of the secret left at the cut."""
    from harnessc.runtime.observe.telemetry import CONTENT_LIMIT

    at = CONTENT_LIMIT - len(SECRET) // 2  # the secret straddles the cut
    script = ("import os, sys; sys.stdin.read(); "
              f"sys.stdout.write('a' * {at} + os.environ['TELEMETRY_TEST_API_KEY'] + 'b' * 5000)")
    write_project(tmp_path, [node("t", routing={"agent": "cmd", "chain": ["cmd"]})],
                  agents={"cmd": {"provider": "command", "command": [PY, "-c", script],
                                  "pass_env": ["TELEMETRY_TEST_API_KEY"]}})
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url, content=True)
        r = harnessc(tmp_path, "run", env=otel_env(TELEMETRY_TEST_API_KEY=SECRET))
    assert r.returncode == 0, r.stdout + r.stderr
    (chat,) = rx.named("chat cmd")
    value = chat["attrs"]["output.value"]
    (message,) = json.loads(chat["attrs"]["gen_ai.output.messages"])
    assert message["parts"][0]["content"] == value
    assert value == ("a" * at + "[redacted]" + "b" * 5000)[:CONTENT_LIMIT] + "\n[truncated]"
    sent = b"".join(rx.bodies)
    assert SECRET[:8].encode() not in sent and SECRET.encode() not in sent


SECRET = "tel-secret-value-31415926"
MARKER = "OUTPUT-MARKER-7"


def _secret_project(root: Path, **telemetry) -> None:
    """A command agent that prints a secret it was passed, and a marker."""
    script = f"import os, sys; sys.stdin.read(); print('{MARKER}', os.environ['TELEMETRY_TEST_API_KEY'])"
    write_project(root, [node("t", routing={"agent": "cmd", "chain": ["cmd"]}, goal="GOAL-MARKER-t: report")],
                  agents={"cmd": {"provider": "command", "command": [PY, "-c", script],
                                  "pass_env": ["TELEMETRY_TEST_API_KEY"]}})
    with_telemetry(root, **telemetry)


@pytest.mark.parametrize("content", [False, True])
def test_no_text_unless_content_is_on_and_never_a_secret(tmp_path, content):
    with Receiver() as rx:
        _secret_project(tmp_path, otlp_endpoint=rx.url, content=content)
        r = harnessc(tmp_path, "run", env=otel_env(TELEMETRY_TEST_API_KEY=SECRET))
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = rows(tmp_path, "SELECT prompt, raw_output FROM attempts")
    assert MARKER in row["raw_output"] and "GOAL-MARKER-t" in row["prompt"]  # (redacted on disk)
    sent = b"".join(rx.bodies)
    assert rx.spans and SECRET.encode() not in sent and SECRET[::-1].encode() not in sent
    (span,) = rx.named("invoke_agent cmd")
    assert span["attrs"]["gen_ai.request.model"] == "cmd" and span["attrs"]["gen_ai.provider.name"] == "command"
    (chat,) = rx.named("chat cmd")
    c = chat["attrs"]
    assert c["harnessc.usage_source"] == "estimate" and c["gen_ai.provider.name"] == "command"
    texts = {"gen_ai.input.messages", "gen_ai.output.messages", "input.value", "output.value"}
    if content:
        # the current GenAI shape (a JSON list of messages: role and parts) and OpenInference's values
        (asked,) = json.loads(c["gen_ai.input.messages"])
        (answer,) = json.loads(c["gen_ai.output.messages"])
        assert asked == {"role": "user", "parts": [{"type": "text", "content": row["prompt"]}]}
        assert answer["role"] == "assistant" and answer["finish_reason"] == "stop"
        assert [p["type"] for p in answer["parts"]] == ["text"]
        assert answer["parts"][0]["content"].strip() == c["output.value"].strip() == f"{MARKER} [redacted]"
        assert c["input.value"] == row["prompt"] and c["input.mime_type"] == "text/plain"
        assert not texts & set(span["attrs"])  # the texts are the call's: on its chat span only
    else:
        assert MARKER.encode() not in sent and b"GOAL-MARKER" not in sent
        assert not texts & {k for s in rx.spans for k in s["attrs"]}
    assert not {"gen_ai.prompt", "gen_ai.completion"} & {k for s in rx.spans for k in s["attrs"]}  # deprecated


@pytest.mark.parametrize("content", [False, True])
def test_a_failed_call_is_an_error_span_whose_message_is_content(tmp_path, content):
    script = f"import os, sys; sys.stdin.read(); sys.exit('{MARKER} ' + os.environ['TELEMETRY_TEST_API_KEY'])"
    write_project(tmp_path, [node("t", routing={"agent": "cmd", "chain": ["cmd"]}, retry={"max_retries": 0})],
                  agents={"cmd": {"provider": "command", "command": [PY, "-c", script],
                                  "pass_env": ["TELEMETRY_TEST_API_KEY"]}})
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url, content=content)
        r = harnessc(tmp_path, "run", env=otel_env(TELEMETRY_TEST_API_KEY=SECRET))
    assert r.returncode == 1, r.stdout + r.stderr
    (attempt,) = rx.named("invoke_agent cmd")
    (task,) = rx.named("task t")
    (run,) = rx.named("harnessc run")
    assert attempt["error"] and attempt["attrs"]["error.type"] == "error" and "verify" not in {
        s["name"] for s in rx.spans}  # no answer, nothing verified
    assert task["error"] and task["attrs"]["harnessc.task.state"] == "failed"
    assert run["error"] and run["attrs"]["harnessc.run.exit_code"] == 1
    sent = b"".join(rx.bodies)
    assert SECRET.encode() not in sent
    if content:
        assert attempt["status"].startswith("error: ") and f"{MARKER} [redacted]" in attempt["status"]
    else:
        assert attempt["status"] == "error" and task["status"] == "failed" and MARKER.encode() not in sent


ENV_VALUE = "env-value-8675309"  # given through the agent's `env:`
PASS_VALUE = "pass-env-value-1123581321"  # given through `pass_env:` (a name that looks like no secret)
CRED_URL = "https://bob:hunter2pw@api.example/v1?api_key=k3y-value-99&page=2"


@pytest.mark.parametrize("outcome", ["answer", "error"])
def test_content_never_sends_what_an_agent_is_given_nor_a_urls_credentials(tmp_path, outcome):
    """With `content: true`, a value of the agent's `env:`, the value of a `pass_env:`
    variable and the credentials of a URL, printed by the agent (its answer, or its error),
    put in the task's title (the prompt) and in an accept command, reach no span."""
    stream, code = ("sys.stdout", 0) if outcome == "answer" else ("sys.stderr", 1)
    script = (f"import os, sys; sys.stdin.read(); print('{MARKER}', os.environ['PLAIN_SETTING'], "
              f"os.environ['CORP_PLAIN_NAME'], {CRED_URL!r}, file={stream}); sys.exit({code})")
    accept = [{"id": "smoke", "argv": [PY, "-c", "print('ok')", CRED_URL, ENV_VALUE], "timeout": 60}]
    write_project(tmp_path, [node("t", title=f"report on {ENV_VALUE}", accept=accept, retry={"max_retries": 0},
                                  routing={"agent": "cmd", "chain": ["cmd"]})],
                  agents={"cmd": {"provider": "command", "command": [PY, "-c", script],
                                  "env": {"PLAIN_SETTING": ENV_VALUE}, "pass_env": ["CORP_PLAIN_NAME"]}})
    with Receiver() as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url, content=True)
        r = harnessc(tmp_path, "run", env=otel_env(CORP_PLAIN_NAME=PASS_VALUE))
    assert r.returncode == code, r.stdout + r.stderr
    sent = b"".join(rx.bodies)
    (span,) = rx.named("invoke_agent cmd")
    (chat,) = rx.named("chat cmd")
    text = chat["attrs"]["output.value"] if outcome == "answer" else span["status"]
    assert MARKER in text and "api.example/v1?api_key=[redacted]&page=2" in text  # content is on
    if outcome == "error":
        assert chat["error"] and chat["status"] == span["status"]
    else:
        assert "report on [redacted]" in chat["attrs"]["input.value"]
        assert "report on [redacted]" in json.loads(chat["attrs"]["gen_ai.input.messages"])[0]["parts"][0]["content"]
        (check,) = rx.named("accept smoke")
        assert "https://[redacted]@api.example" in check["attrs"]["harnessc.accept.command"]
    for leak in (ENV_VALUE, PASS_VALUE, "hunter2pw", "bob:", "k3y-value-99"):
        assert leak.encode() not in sent and leak[::-1].encode() not in sent, leak


def _max_rss_run(root: Path, run_env: dict) -> tuple[int, int]:
    """`harnessc run` in a child of this process: (its exit code, its peak resident memory in
    bytes, as the kernel counted it: wait4's ru_maxrss)."""
    with open(root / "out.txt", "wb") as out:
        res, peak = peak_rss([*CLI, "-C", str(root), "run"], root / "peak.txt", stdout=out,
                             stderr=subprocess.STDOUT, env=run_env)
    return res.returncode, peak


@pytest.mark.skipif(not hasattr(os, "wait4"), reason="os.wait4 (peak memory of a child) is POSIX only")
def test_a_collector_answering_500_with_600_mib_reads_at_most_64_kib(tmp_path):
    """The exporter read a collector's whole answer: 600 MiB took the run to 663 MB."""
    write_project(tmp_path, [node("a")])
    with Receiver(error_body=600 << 20) as rx:
        with_telemetry(tmp_path, otlp_endpoint=rx.url)
        code, peak = _max_rss_run(tmp_path, otel_env())
    assert code == 0, (tmp_path / "out.txt").read_text()
    assert rx.spans  # the collector had the spans, and answered 500
    assert peak < 300 << 20, f"harnessc's peak memory: {peak >> 20} MiB"
    (alert,) = [a for a in alerts(tmp_path) if a["kind"] == "telemetry"]
    assert alert["message"].startswith(f"traces not sent to {rx.url}/v1/traces: ")


# ------------------------------------------------------------------ when it cannot send


def test_a_collector_that_is_down_costs_the_run_nothing_but_an_alert(tmp_path):
    write_project(tmp_path, [node("a"), node("b")])
    r = harnessc(tmp_path, "run", env=otel_env(f"http://127.0.0.1:{closed_port()}"))
    assert r.returncode == 0, r.stdout + r.stderr  # as without telemetry
    (alert,) = [a for a in alerts(tmp_path) if a["kind"] == "telemetry"]
    assert alert["level"] == "warning" and alert["message"].startswith("traces not sent to http://127.0.0.1:")
    assert "Traceback" not in r.stderr and "alert warning: traces not sent" in r.stdout + r.stderr
    assert {row["status"] for row in rows(tmp_path, "SELECT status FROM runs")} == {"succeeded"}


def test_the_end_of_a_run_waits_for_a_hanging_collector_at_most_the_bound_given_to_the_sdk(tmp_path, monkeypatch):
    """The bound is checked as the SDK receives it, not by the clock: the exporter's timeout
    (each export, with its retries) and the run's wait for the flush are FLUSH_TIMEOUT."""
    from opentelemetry.exporter.otlp.proto.http import trace_exporter
    from opentelemetry.sdk.trace import export

    from harnessc.runtime.observe import telemetry
    from harnessc.runtime.scheduler import RunOptions
    from harnessc.runtime.session import execute

    given: dict[str, float] = {}

    class Exporter(trace_exporter.OTLPSpanExporter):
        def __init__(self, *args, **kw):
            given["export_timeout"] = kw["timeout"]
            super().__init__(*args, **kw)

    class Processor(export.BatchSpanProcessor):
        def __init__(self, *args, **kw):
            given["processor_timeout_ms"] = kw["export_timeout_millis"]
            super().__init__(*args, **kw)

    joined: list[float] = []
    real_join = threading.Thread.join

    def join(self, timeout=None):
        if self.name == "harnessc-telemetry":
            joined.append(timeout)
        return real_join(self, timeout)

    monkeypatch.setattr(trace_exporter, "OTLPSpanExporter", Exporter)
    monkeypatch.setattr(export, "BatchSpanProcessor", Processor)
    monkeypatch.setattr(threading.Thread, "join", join)
    monkeypatch.setattr(telemetry, "FLUSH_TIMEOUT", 0.5)
    plan = write_project(tmp_path, [node("a")])
    with Receiver(hang=True) as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        result = execute(tmp_path, plan, RunOptions())
    assert result.exit_code == 0 and result.status == "succeeded"
    assert given == {"export_timeout": 0.5, "processor_timeout_ms": 500}
    assert joined == [0.5]
    (alert,) = [a for a in alerts(tmp_path) if a["kind"] == "telemetry"]
    assert alert["message"].startswith(f"traces not sent to {rx.url}/v1/traces: ")


def test_telemetry_without_its_packages_warns_once_and_the_run_goes_on(tmp_path):
    blocked = tmp_path / "blocked" / "opentelemetry"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('blocked by the test', name='opentelemetry')\n")
    project = tmp_path / "p"
    write_project(project, [node("a")])
    with_telemetry(project, otlp_endpoint=f"http://127.0.0.1:{closed_port()}")
    e = otel_env()
    e["PYTHONPATH"] = str(tmp_path / "blocked") + ":" + e["PYTHONPATH"]
    r = harnessc(project, "run", env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    (alert,) = [a for a in alerts(project) if a["kind"] == "telemetry"]
    assert alert["message"] == ("no traces for this run: the OpenTelemetry packages are not installed "
                                "(opentelemetry): pip install 'harnessc[otel]'")
    assert "Traceback" not in r.stderr


def test_a_bad_endpoint_in_the_environment_is_a_warning_and_no_traces(tmp_path):
    write_project(tmp_path, [node("a")])
    r = harnessc(tmp_path, "run", env=otel_env("localhost:4318"))
    assert r.returncode == 0, r.stdout + r.stderr
    (alert,) = [a for a in alerts(tmp_path) if a["kind"] == "telemetry"]
    assert alert["message"] == ("no traces for this run: OTEL_EXPORTER_OTLP_ENDPOINT is not an http:// or "
                                "https:// URL: a base URL like http://localhost:4318 (/v1/traces is added)")


# ------------------------------------------------------------------ lint


@pytest.mark.parametrize("url, message, hint", [
    ("ftp://collector:21", "is not an http:// or https:// URL", "a base URL like http://localhost:4318"),
    ("http://user:hunter2-pw@collector:4318", "holds credentials", "OTEL_EXPORTER_OTLP_HEADERS"),
    ("http://collector:4318/v1/traces", "ends with /v1/traces, which harnessc adds", "write http://collector:4318"),
    ("http://collector:http", "is not a URL", "a base URL"),
])
def test_lint_reports_a_bad_endpoint_where_it_is_written(tmp_path, url, message, hint):
    project = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", project, ignore=shutil.ignore_patterns(".harness"))
    config = project / "harness.yaml"
    lines = config.read_text().splitlines()
    config.write_text("\n".join([*lines, "telemetry:", f"  otlp_endpoint: '{url}'", "  content: false"]) + "\n")
    r = virtual.harnessc(project, "lint", "--output", "json", env=otel_env())
    assert r.returncode == 1, r.stdout + r.stderr
    (diag,) = json.loads(r.stdout)
    assert diag["code"] == "HC211" and diag["message"] == f"telemetry.otlp_endpoint {message}"
    assert diag["span"]["path"].endswith("harness.yaml") and (diag["span"]["line"], diag["span"]["col"]) == (
        len(lines) + 2, 18)
    assert hint in diag["hint"] and "hunter2" not in diag["message"] + diag["hint"]


def test_the_endpoint_and_content_reach_plan_json(tmp_path):
    project = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", project, ignore=shutil.ignore_patterns(".harness"))
    config = project / "harness.yaml"
    original = config.read_text()
    config.write_text(original + "telemetry: {otlp_endpoint: 'https://cloud.langfuse.com/api/public/otel', "
                      "content: true}\n")
    r = virtual.harnessc(project, "build", env=otel_env())
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads((project / ".harness" / "build" / "plan.json").read_text())
    assert plan["telemetry"] == {"otlp_endpoint": "https://cloud.langfuse.com/api/public/otel", "content": True,
                                 "project": None}
    config.write_text(original + "telemetry: {project: harnessc-nightly}\n")
    r = virtual.harnessc(project, "build", env=otel_env())
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads((project / ".harness" / "build" / "plan.json").read_text())
    assert plan["telemetry"] == {"otlp_endpoint": None, "content": False, "project": "harnessc-nightly"}


def test_an_empty_project_is_a_diagnostic_where_it_is_written(tmp_path):
    project = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", project, ignore=shutil.ignore_patterns(".harness"))
    config = project / "harness.yaml"
    lines = config.read_text().splitlines()
    config.write_text("\n".join([*lines, "telemetry:", "  project: ''"]) + "\n")
    r = virtual.harnessc(project, "lint", "--output", "json", env=otel_env())
    assert r.returncode == 1, r.stdout + r.stderr
    (diag,) = json.loads(r.stdout)
    assert "telemetry.project" in diag["message"] and diag["span"]["line"] == len(lines) + 2
    assert "Traceback" not in r.stderr


def test_an_accept_span_starts_within_its_verify_span_though_its_start_is_kept_to_the_millisecond():
    """A check's `started` is rounded to the millisecond in state.db: it may fall up to half a
    millisecond before the answer the verify span opens at (a loaded suite run saw 98 µs)."""
    from harnessc.runtime.observe.telemetry import Tracing

    class Recorder:
        def __init__(self):
            self.spans: dict[str, list[float]] = {}

        def start(self, name, ts, parent, attributes, client=False):
            self.spans[name] = [ts, ts]
            return name

        def end(self, span, ts, error=None):
            self.spans[span][1] = ts

    tracing = Tracing.__new__(Tracing)
    tracing.sdk = rec = Recorder()
    answered = 1_700_000_000.1234567
    check = {"id": "smoke", "argv": ["true"], "returncode": 0, "started": round(answered, 3), "duration": 0.01}
    assert check["started"] < answered  # the case: rounded down, before its parent's start
    tracing._verify(None, "a", {"status": "succeeded", "checks": [check]}, answered, answered + 1)
    verify, accept = rec.spans["verify"], rec.spans["accept smoke"]
    assert verify[0] <= accept[0] <= accept[1] <= verify[1], (verify, accept)
