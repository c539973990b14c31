"""OpenTelemetry traces of a run, read off its event stream (`pip install 'harnessc[otel]'`).

On when harness.yaml's `telemetry.otlp_endpoint` is set, else when the environment's
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL) or OTEL_EXPORTER_OTLP_ENDPOINT (a base URL,
/v1/traces added) is; spans go out as OTLP over HTTP/protobuf. Each `harnessc run` is one
trace (a resumed run is a new trace):

    harnessc run <project> <run>  the run: id, status, exit code
      task <id>                   a task's time in this run: its end state, cost, tokens
        render prompt             the task's prompt rendered (or refined) before an attempt
        route                     choosing its agent, reserving its budget, waiting for a slot
        invoke_agent <agent>      an attempt: its agent, status, cost
          chat <model>            the agent call: GenAI inference and OpenInference LLM
                                  attributes (model, usage, cost), which GenAI tools count
          verify                  checking an answer: from the answer to the attempt's record
            accept <id>           one accept command
        chat <model>              a cheap agent's call for the task (a memory summary, a
                                  prompt mutation: loop/assist.py), as an attempt's call

Spans carry the times the events and attempt rows recorded, so a span is opened when its
unit starts and closed with the unit's own end time. Every attempt is one agent call and has
its `chat` span with the usage its row holds (what `status` adds up); `command` and
`simulate` agents' usage is harnessc's estimate (`harnessc.usage_source`). Names, ids, counts
and times only: the prompt, the output and error messages (which may quote them) only with
`telemetry.content: true`. Every span name, attribute and status is redacted (`[redacted]`),
content or not: the secrets redacted on disk (procs.secret_values, the agents' keys), every
value an agent is given (its `env:` values, the values of the variables its `pass_env:`
names), the user part of a URL (`https://user:pass@host`) and a URL parameter whose name says
secret (`?api_key=`, `&access_token=`, `X-Amz-Signature=`). The exporter's credentials come
from OTEL_EXPORTER_OTLP_HEADERS, never from a file; a collector's answer is read up to
ANSWER_LIMIT bytes (only its status and headers are used).

Off, nothing here imports opentelemetry. Configured but not installed, or a collector that
does not take the spans: a warning alert, the run goes on and keeps its exit code; the end
of a run waits at most FLUSH_TIMEOUT seconds for the collector.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
from typing import Any

from ... import __version__
from ...events import task_state
from ...states import ENDED, TaskState
from ...vocab import otlp_endpoint_problem
from ..children.procs import REDACTED, forwarded_env, secret_forms

FLUSH_TIMEOUT = 5.0  # seconds the end of a run waits for the collector; also each export's limit
CONTENT_LIMIT = 100_000  # characters of a prompt or an output put on a span (content: true)
ANSWER_LIMIT = 64 * 1024  # bytes of a collector's answer read (a 600 MiB error page was read whole)
TRACES_PATH = "/v1/traces"
INSTALL = "pip install 'harnessc[otel]'"

# harnessc's provider -> GenAI semantic conventions' provider name (the others: their own name)
GENAI_PROVIDERS = {"anthropic": "anthropic", "claude-code": "anthropic", "openai": "openai",
                   "codex": "openai", "gemini-cli": "gcp.gemini"}
ESTIMATED = {"command", "simulate"}  # providers whose usage harnessc estimates from the texts' sizes
TASK_ENDS = {*ENDED, TaskState.PENDING}  # the states whose task_<state> event ends a task's span
ANSWERED = {"succeeded", "rejected", "progress", "stuck"}  # attempts whose answer was verified
FAILED_CALLS = {"error", "over_limit", "interrupted"}
# an attempt row's usage -> (GenAI semantic conventions, OpenInference) attributes
USAGE = (("input_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt"),
         ("output_tokens", "gen_ai.usage.output_tokens", "llm.token_count.completion"),
         ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens", "llm.token_count.prompt_details.cache_read"),
         ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens",
          "llm.token_count.prompt_details.cache_write"),
         ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens", "llm.token_count.completion_details.reasoning"))
STEPS = {"prompt": "render prompt", "route": "route"}  # timed steps before an attempt -> their spans
# OpenInference's span kind of each span (Phoenix groups and filters by it)
KINDS = {"render prompt": "PROMPT", "route": "CHAIN", "verify": "GUARDRAIL", "accept": "TOOL"}


def endpoint(settings: dict | None) -> tuple[str | None, str | None]:
    """(the traces URL, None) when telemetry is on; (None, why not) when its URL is unusable;
    (None, None) when it is off."""
    configured = (settings or {}).get("otlp_endpoint")
    if configured:  # lint checked it
        return configured.rstrip("/") + TRACES_PATH, None
    full = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if full:
        problem = otlp_endpoint_problem(full.removesuffix("/").removesuffix(TRACES_PATH))
        return (None, f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT {problem[0]}") if problem else (full, None)
    if base:
        problem = otlp_endpoint_problem(base)
        return (None, f"OTEL_EXPORTER_OTLP_ENDPOINT {problem[0]}: {problem[1]}") if problem else \
            (base.rstrip("/") + TRACES_PATH, None)
    return None, None


# The user part of a URL, up to its last @ before the host (a token is often the user):
# `https://user:pass@host` -> `https://[redacted]@host`. Linear: a `://` starts each try, and
# the part ends at the next /, which every other `://` holds.
_USERINFO = re.compile(r"(?<=://)[^/\s?#]+@")
# A query or fragment parameter (`?name=value`, `&name=value`, `#access_token=value`); the name
# bounded so each try is short.
_PARAM = re.compile(r"([?&#;][^=&#;\s]{1,256}=)([^&#;\s]+)")
_SECRET_PARAM = re.compile(r"token|key|secret|pass|pwd|sig|auth|credential|session", re.IGNORECASE)


def without_url_credentials(text: str) -> str:
    """`text` with the user part of each URL and each secret-named URL parameter's value redacted."""
    if "://" in text:
        text = _USERINFO.sub(REDACTED + "@", text)
    if "=" in text:
        text = _PARAM.sub(_param, text)
    return text


def _param(m: re.Match) -> str:
    return m.group(1) + REDACTED if _SECRET_PARAM.search(m.group(1)) else m.group()


def agent_values(agents) -> set[str]:
    """Every value an agent is given by the plan: its `env:` values and the values of the
    variables its `pass_env:` names (as they are now)."""
    environ = forwarded_env()
    values = set()
    for config in agents.values():
        values.update((getattr(config, "env", None) or {}).values())
        values.update(environ[name] for name in getattr(config, "pass_env", None) or () if name in environ)
    return values


def tracing(plan, store) -> Tracing | None:
    """The run's tracer, to add to the store's listeners; None when telemetry is off."""
    settings = plan.telemetry or {}
    url, problem = endpoint(settings)
    if url is None and problem is None:
        return None
    return Tracing(plan, store, url, problem, content=bool(settings.get("content")), project=settings.get("project"))


class Tracing:
    """Spans from the run's events (a state-store listener); `close` sends what is left."""

    def __init__(self, plan, store, url: str | None, problem: str | None, content: bool,
                 project: str | None = None):
        self.plan, self.store, self.url, self.content, self.project = plan, store, url, content, project
        # what never leaves: the run's secrets (its store's) and every value an agent is given
        self.secrets = sorted({*store.secrets, *secret_forms(agent_values(plan.agents))}, key=len, reverse=True)
        self.problem = problem  # why there are no traces (said once the run is recorded)
        self.sdk: _Sdk | None = None
        self.run = None
        self.tasks: dict[str, Any] = {}  # task id -> its open span
        self.task_started: dict[str, float] = {}  # task id -> when it turned running (its span not open yet)
        self.task_usage: dict[str, list] = {}  # task id -> [attempts, tokens, USD] in this run
        self.attempts: dict[int, Any] = {}  # attempt id -> its open span

    def on_event(self, ev: dict) -> None:
        if ev["kind"] == "run_started":
            self._start(ev)
        if self.sdk is None:
            return
        try:
            self._record(ev)
        except Exception as e:  # noqa: BLE001  a trace is never worth the run: tracing stops, the run goes on
            self.sdk.log.detach()
            self.sdk = None
            self.store.event("telemetry_failed", reason=self.clean(f"tracing stopped: {type(e).__name__}: {e}"))

    def _record(self, ev: dict) -> None:
        kind, task = ev["kind"], ev.get("task")
        if kind == "task_running":  # its span opens with its first attempt's steps (which came before)
            self.task_started.setdefault(task, ev["ts"])
        elif kind == "attempt_started":
            self._attempt_started(task, ev)
        elif kind == "attempt_finished":
            self._attempt_finished(task, ev)
        elif kind == "assist":
            self._assist(task, ev)
        elif (state := task_state(kind)) in TASK_ENDS:
            self._task_ended(task, state, ev)
        elif kind == "run_finished":
            self._run_finished(ev)

    # ------------------------------------------------------------------ spans

    def _start(self, ev: dict) -> None:
        if self.problem is None:
            try:
                self.sdk = _Sdk(self.url, self.clean, self.project)
            except ImportError as e:
                self.problem = f"the OpenTelemetry packages are not installed ({e.name}): {INSTALL}"
            except Exception as e:  # noqa: BLE001  a broken install (protobuf versions that disagree)
                self.problem = f"OpenTelemetry could not start ({type(e).__name__}: {e})"
        if self.problem is not None:
            self.store.event("telemetry_failed", reason=self.clean(f"no traces for this run: {self.problem}"))
            return
        project = (self.plan.project or {}).get("title") or (self.plan.metadata or {}).get("root_name") or ""
        self.run = self.sdk.start(f"harnessc run {project or '-'} {ev['run_id']}", ev["ts"], None, {
            "harnessc.run.id": ev["run_id"], "harnessc.project": project, "openinference.span.kind": "CHAIN"})

    def _task_span(self, task: str, ts: float):
        if task not in self.tasks:
            start = min(ts, self.task_started.pop(task, ts))
            self.tasks[task] = self.sdk.start(f"task {task}", start, self.run, {
                "harnessc.task.id": task, "openinference.span.kind": "CHAIN"})
            self.task_usage[task] = [0, 0, 0.0]
        return self.tasks[task]

    def _agent(self, name: str) -> tuple[str, str, str]:
        """(provider, GenAI provider name, model) of an agent: its `model:`, else its name."""
        cfg = self.plan.agents.get(name)
        provider = cfg.provider if cfg else ""
        return provider, GENAI_PROVIDERS.get(provider, provider), (cfg.model if cfg else None) or name

    def _attempt_started(self, task: str, ev: dict) -> None:
        agent = ev.get("agent") or ""
        _, genai, model = self._agent(agent)
        steps = {step: times for step, times in (ev.get("steps") or {}).items() if step in STEPS}
        parent = self._task_span(task, min([ev["ts"], *(start for start, _ in steps.values())]))
        for step, (start, end) in sorted(steps.items(), key=lambda item: item[1][0]):
            attrs = {"harnessc.task.id": task, "openinference.span.kind": KINDS[STEPS[step]]}
            if step == "route":
                attrs.update({"harnessc.route.agent": agent, "harnessc.reserved_usd": float(ev.get("reserved_usd") or 0)})
            self.sdk.end(self.sdk.start(STEPS[step], start, parent, attrs), end)
        self.attempts[ev["attempt"]] = self.sdk.start(f"invoke_agent {agent}", ev["ts"], parent, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "gen_ai.provider.name": genai, "gen_ai.system": genai, "gen_ai.request.model": model,
            "openinference.span.kind": "AGENT",
            "harnessc.task.id": task, "harnessc.attempt.id": ev["attempt"],
            "harnessc.attempt.iteration": ev.get("iteration") or 0, "harnessc.attempt.level": ev.get("level") or 0,
        })

    def _attempt_finished(self, task: str, ev: dict) -> None:
        span = self.attempts.pop(ev["attempt"], None)
        if span is None:
            return  # begun before this run (recovered at its start)
        row = self.store.attempt(ev["attempt"])
        if row is None:
            self.sdk.end(span, ev["ts"])
            return
        status = row["status"]
        tokens = int(row.get("input_tokens") or 0) + int(row.get("output_tokens") or 0)
        cost = float(row["cost_usd"] or 0.0)
        attrs: dict[str, Any] = {"harnessc.attempt.status": status, "harnessc.cost_source": row["cost_source"] or "",
                                 "harnessc.cost_usd": cost, "harnessc.tokens": tokens}
        if row.get("tool_calls") is not None:
            attrs["harnessc.attempt.tool_calls"] = int(row["tool_calls"])
        failed = status in FAILED_CALLS
        if failed:
            attrs["error.type"] = status
        self.sdk.set(span, attrs)
        end = row.get("finished_at") or ev["ts"]
        answered = self._chat(span, task, row, ev, end)
        if status in ANSWERED:
            self._verify(span, task, row, answered, end)
        usage = self.task_usage.setdefault(task, [0, 0, 0.0])
        usage[0] += 1
        usage[1] += tokens
        usage[2] += cost
        bad = failed or status == "rejected"  # a rejected answer: the attempt did not do its work
        self.sdk.end(span, end, error=self._why(status, row.get("errors")) if bad else None)

    def _chat(self, attempt, task: str, row: dict, ev: dict, end: float) -> float:
        """The agent call of an attempt, as an LLM call (GenAI inference and OpenInference
        attributes, for the tools that count tokens and cost on those): from the request to
        the answer (or the attempt's end when none came). Returns when the answer came."""
        opened = max(row["started_at"], attempt.start_time / 1e9)  # the span opened a moment later
        latency = float(row.get("latency") or 0.0)
        answered = min(end, float(ev.get("answered_at") or (opened + latency if latency else end)))
        called = max(opened, answered - latency) if latency else opened
        status = row["status"]
        model, attrs = self._call_attrs(row.get("agent") or "", task, row, float(row["cost_usd"] or 0.0),
                                        row.get("cost_source") in ("reserved", "unknown"))
        attrs.update({"harnessc.attempt.id": row["id"], "harnessc.cost_source": row["cost_source"] or ""})
        if self.content:
            attrs.update(self._messages(row))
        failed = status in FAILED_CALLS - {"over_limit"}  # over a limit: the call itself answered
        if failed:
            attrs["error.type"] = status
        span = self.sdk.start(f"chat {model}", called, attempt, attrs, client=True)
        self.sdk.end(span, answered, error=self._why(status, row.get("errors")) if failed else None)
        return answered

    def _call_attrs(self, agent: str, task: str, usage: dict, cost: float, estimated: bool) -> tuple[str, dict]:
        """(the model, the attributes) of an agent call: GenAI inference, OpenInference LLM and
        Langfuse generation attributes, with `usage` (USAGE's columns) and `cost`."""
        provider, genai, model = self._agent(agent)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": genai, "gen_ai.system": genai,
            "gen_ai.request.model": model, "gen_ai.response.model": model,
            "harnessc.cost_usd": cost, "gen_ai.usage.cost": cost,
            "harnessc.usage_source": "estimate" if estimated or provider in ESTIMATED else "reported",
            "harnessc.task.id": task,
            "openinference.span.kind": "LLM", "llm.model_name": model, "llm.system": genai, "llm.provider": genai,
            "llm.cost.total": cost, "langfuse.observation.type": "generation"}
        for col, genai_name, oi_name in USAGE:
            attrs[genai_name] = attrs[oi_name] = int(usage.get(col) or 0)
        attrs["llm.token_count.total"] = attrs["llm.token_count.prompt"] + attrs["llm.token_count.completion"]
        return model, attrs

    def _assist(self, task: str, ev: dict) -> None:
        """A cheap agent's call for a task (a loop task's memory summary, a prompt mutation:
        assist.py): an LLM span in the task, its usage counted in `status`'s assists."""
        if "latency" not in ev and ev.get("status") != "interrupted":
            return  # no call was made (a budget, a breaker, a stopping run)
        end = ev["ts"]
        start = end - float(ev.get("latency") or 0.0)
        model, attrs = self._call_attrs(ev.get("agent") or "", task, ev, float(ev.get("cost_usd") or 0.0), False)
        attrs.update({"harnessc.assist.purpose": ev.get("purpose") or "", "harnessc.assist.status": ev.get("status") or ""})
        failed = ev.get("status") == "interrupted" or bool(ev.get("error_kind"))
        if failed:
            attrs["error.type"] = ev.get("error_kind") or "interrupted"
        span = self.sdk.start(f"chat {model}", start, self._task_span(task, start), attrs, client=True)
        usage = self.task_usage.setdefault(task, [0, 0, 0.0])
        usage[1] += int(ev.get("tokens") or 0)
        usage[2] += float(ev.get("cost_usd") or 0.0)
        self.sdk.end(span, end, error=self._why(attrs.get("error.type", ""), [ev.get("reason")]) if failed else None)

    def _messages(self, row: dict) -> dict[str, str]:
        """The call's prompt and answer (content: true) as GenAI messages (role + parts, JSON)
        and as OpenInference's input and output values. Each text is redacted before it is
        cut and put in JSON (an escaped secret would no longer match its redaction)."""
        prompt, answer = self._text(row.get("prompt")), self._text(row.get("raw_output"))
        attrs = {"input.value": prompt, "input.mime_type": "text/plain",
                 "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": prompt}]}],
                                                     ensure_ascii=False)}
        if row.get("raw_output") is not None:
            attrs.update({"output.value": answer, "output.mime_type": "text/plain",
                          "gen_ai.output.messages": json.dumps([{
                              "role": "assistant", "parts": [{"type": "text", "content": answer}],
                              "finish_reason": "error" if row["status"] in FAILED_CALLS else "stop"}],
                              ensure_ascii=False)})
        return attrs

    def _verify(self, attempt, task: str, row: dict, answered: float, end: float) -> None:
        """The verification of an answer, and its accept commands in it."""
        passed = row["status"] == "succeeded"
        span = self.sdk.start("verify", answered, attempt, {
            "harnessc.task.id": task, "harnessc.verify.passed": passed, "openinference.span.kind": KINDS["verify"],
            "harnessc.verify.errors": len(row.get("errors") or [])})
        at = answered
        for check in row.get("checks") or []:
            # older rows: one after the other; `started` is kept to the millisecond, so it may
            # fall a moment before the verify span it belongs in
            at = max(float(check.get("started") or at), answered)
            argv = [str(a) for a in check.get("argv") or []]
            ok = check.get("returncode") == 0 and not check.get("timed_out")
            child = self.sdk.start(f"accept {check.get('id') or (argv[:1] or ['?'])[0]}", at, span, {
                "harnessc.task.id": task, "harnessc.accept.command": " ".join(argv),
                "openinference.span.kind": KINDS["accept"],
                "harnessc.accept.exit_code": -1 if check.get("returncode") is None else int(check["returncode"]),
                "harnessc.accept.timed_out": bool(check.get("timed_out"))})
            at += float(check.get("duration") or 0.0)
            self.sdk.end(child, min(at, end), error=None if ok else "accept command failed")
        failed = row["status"] == "rejected" or (row["status"] == "stuck" and row.get("errors"))
        self.sdk.end(span, end, error=self._why("verification failed", row.get("errors")) if failed else None)

    def _task_ended(self, task: str, state: str, ev: dict) -> None:
        if state == TaskState.PENDING and task not in self.tasks:
            self.task_started.pop(task, None)
            return  # set to run, not ended
        span = self._task_span(task, ev["ts"])  # a task ending without an attempt (skipped): an instant
        del self.tasks[task]
        attempts, tokens, cost = self.task_usage.pop(task, [0, 0, 0.0])
        state = TaskState.INTERRUPTED if state == TaskState.PENDING else state  # an abort sends it back to pending
        self.sdk.set(span, {"harnessc.task.state": state, "harnessc.task.attempts": attempts,
                            "harnessc.tokens": tokens, "harnessc.cost_usd": cost})
        if state == TaskState.SKIPPED:  # harnessc's own words, naming tasks only: said with content off too
            error = f"skipped: {ev['error']}" if ev.get("error") else "skipped"
        else:
            bad = state in (TaskState.FAILED, TaskState.BLOCKED, TaskState.INTERRUPTED)
            error = self._why(state, [ev.get("error")]) if bad else None
        self.sdk.end(span, ev["ts"], error=error)

    def _run_finished(self, ev: dict) -> None:
        self._end_open(ev["ts"])
        if self.run is not None:
            self.sdk.set(self.run, {"harnessc.run.status": ev.get("status") or "",
                                    "harnessc.run.exit_code": int(ev.get("exit_code") or 0)})
            ok = ev.get("exit_code") in (0, None)
            self.sdk.end(self.run, ev["ts"], error=None if ok else self._why(ev.get("status") or "", [ev.get("message")]))
            self.run = None

    def _end_open(self, ts: float) -> None:
        """Spans whose unit never told its end (a crash, an abort): they end now, unfinished."""
        for span in [*self.attempts.values(), *self.tasks.values()]:
            self.sdk.set(span, {"harnessc.unfinished": True})
            self.sdk.end(span, ts, error="unfinished")
        self.attempts.clear()
        self.tasks.clear()
        self.task_started.clear()

    def _why(self, what: str, errors: list | None) -> str:
        """A span's error description: what ended it, and with content on, the first error."""
        first = next((e for e in errors or [] if e), None)
        if not self.content or not first:
            return what
        return f"{what}: {self._text(str(first).splitlines()[0])}"

    def _text(self, text: str | None) -> str:
        text = self.clean(text or "")  # before the cut, which could leave a secret's start
        return text if len(text) <= CONTENT_LIMIT else text[:CONTENT_LIMIT] + "\n[truncated]"

    def clean(self, value: Any) -> Any:
        """`value` redacted when it is text (see the module's docstring)."""
        if not isinstance(value, str):
            return value
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return without_url_credentials(value)

    # ------------------------------------------------------------------ the end

    def close(self) -> None:
        """End what is still open, send every span (waiting at most FLUSH_TIMEOUT seconds), and
        say so with an alert when the collector did not take them all."""
        if self.sdk is None:
            return
        now = time.time()
        self._end_open(now)
        if self.run is not None:
            self.sdk.end(self.run, now, error="unfinished")
            self.run = None
        sdk, self.sdk = self.sdk, None
        problem = sdk.shutdown()
        if problem:
            try:
                self.store.event("telemetry_failed", reason=self.clean(f"traces not sent to {self.url}: {problem}"))
            except (sqlite3.Error, OSError):  # the store failed with the run: that error is the one to tell
                pass


class _Sdk:
    """The OpenTelemetry SDK as the tracer uses it: imported here, only when a run traces.
    Every name, attribute and status goes through `clean` (Tracing.clean) on its way in."""

    def __init__(self, url: str, clean, project: str | None = None):
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

        self.trace, self.failed, self.clean = trace, 0, clean
        sdk = self

        class Exporter(OTLPSpanExporter):
            def export(self, spans):
                result = super().export(spans)
                if result is not SpanExportResult.SUCCESS:
                    sdk.failed += len(spans)
                return result

        self.exporter = Exporter(endpoint=url, timeout=FLUSH_TIMEOUT, session=_bounded_session())
        self.processor = BatchSpanProcessor(self.exporter, export_timeout_millis=FLUSH_TIMEOUT * 1000)
        service = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "harnessc"}
        # telemetry.project: Phoenix's project (OpenInference's resource attribute); it wins
        # over OTEL_RESOURCE_ATTRIBUTES, which Resource.create merges under what it is given
        named = {"openinference.project.name": clean(project)} if project else {}
        self.provider = TracerProvider(resource=Resource.create({**service, "service.version": __version__, **named}),
                                       shutdown_on_exit=False)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("harnessc", __version__)
        self.log = _LastProblem()  # the SDK's warnings: said in our alert, not printed over the display

    def start(self, name: str, ts: float, parent, attributes: dict, client: bool = False):
        """A span from `ts`; `client`: a call to a service (an agent call: GenAI's span kind)."""
        context = self.trace.set_span_in_context(parent) if parent is not None else None
        kind = self.trace.SpanKind.CLIENT if client else self.trace.SpanKind.INTERNAL
        return self.tracer.start_span(self.clean(name), context=context, kind=kind, start_time=_ns(ts),
                                      attributes=self._cleaned(attributes))

    def set(self, span, attributes: dict) -> None:
        span.set_attributes(self._cleaned(attributes))

    def _cleaned(self, attributes: dict) -> dict:
        return {key: self.clean(value) for key, value in attributes.items()}

    def end(self, span, ts: float, error: str | None = None) -> None:
        if error is not None:
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, self.clean(error)))
        span.end(end_time=max(_ns(ts), span.start_time or 0))

    def shutdown(self) -> str | None:
        """Send what is queued, in a thread the run waits for at most FLUSH_TIMEOUT seconds (the
        SDK's own flush does not bound its wait); what went wrong, or None."""
        worker = threading.Thread(target=self._shutdown, name="harnessc-telemetry", daemon=True)
        worker.start()
        worker.join(FLUSH_TIMEOUT)
        if worker.is_alive():  # left to end with the process (a daemon thread), its warnings unheard
            return f"the collector did not take them within {FLUSH_TIMEOUT:g}s" + self.log.said()
        self.log.detach()
        if self.failed:
            return f"{self.failed} span(s) refused or undelivered" + self.log.said()
        return None

    def _shutdown(self) -> None:
        self.provider.force_flush(int(FLUSH_TIMEOUT * 1000))
        self.provider.shutdown()


def _bounded_session():
    """A requests session for the exporter that reads at most ANSWER_LIMIT bytes of an answer,
    still encoded (the exporter uses only its status and headers; nothing is decompressed),
    then closes the connection instead of draining the rest."""
    import requests

    class BoundedSession(requests.Session):
        def request(self, *args, **kw):
            response = super().request(*args, **{**kw, "stream": True})
            try:
                body = response.raw.read(ANSWER_LIMIT, decode_content=False)
            except (OSError, requests.RequestException, ValueError):
                body = b""  # the answer's status says what happened; its body is no part of it
            finally:
                response.close()
            response._content = body or b""  # what .content returns: nothing reads the stream again
            return response

    return BoundedSession()


class _LastProblem(logging.Handler):
    """Keeps the SDK's last warning (why an export failed) for the run's alert, in place of
    the "opentelemetry" logger's output while it is attached."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self.logger = logging.getLogger("opentelemetry")
        self.propagated = self.logger.propagate
        self.logger.addHandler(self)
        self.logger.propagate = False

    def detach(self) -> None:
        self.logger.removeHandler(self)
        self.logger.propagate = self.propagated

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.last = message.splitlines()[0][:300] if message else self.last

    def said(self) -> str:
        return f" ({self.last})" if self.last else ""


def _ns(ts: float) -> int:
    return int(ts * 1e9)
