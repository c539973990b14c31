"""Record / replay: a run's agent calls kept in cassettes and served back offline.

`harnessc run --record` wraps each agent so that every call it answers (or fails) is written
to its task's cassette; `harnessc run --replay`, and any agent with `provider: replay`,
answers every call from the cassettes without building the real agent: no network, no key,
no SDK import. The scheduler checks a replayed answer exactly like a live one.

A cassette is one JSON-lines file per task (Workspace.cassette: .harness/cassettes/<task-id>.jsonl),
one call per line in the order the calls were made:

    {"v": 1, "key": "<16 hex>", "request": {...}, "response": {...}}   (or "error": {...})

* request: agent, provider, model, task, iteration, system, prompt, output_schema;
* response: text, usage (input/output/cache read/cache write/reasoning tokens), cost_usd,
  cost_source, tool_calls (null: the agent does not report them), latency, notes, denials
  when the agent's permissions refused tool calls, and `truncated` (why) for an answer cut
  at the output cap;
* error: kind, message, retry_after, reset_at, retry (the server's x-should-retry when it
  overruled the kind, else null), stderr, usage, cost_usd, cost_source (what it was
  charged; a replayed call is charged the same, from the same source), and `unreachable:
  true` when nothing answered at the address (a replay retries it the same way).

Credentials are no part of a request, and every string is redacted (procs.secret_values, plus
the value of each recorded agent's key variable) before it is written. `key` hashes the
request without its iteration: a retry that asks the same thing is the same request, and
identical requests are served in the order they were recorded. A run with --record rewrites
the cassettes of the tasks it runs and leaves the others alone.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import providers
from ...providers import AgentConfig, ReplayConfig
from ...workspace import Workspace, WorkspaceError
from ..children.procs import scrubbed as _scrub
from ..children.procs import secret_values
from .base import COST_SOURCES, NO_PRICE, NO_RESPONSE, PRICE, Agent, Request, Response, Usage, make_agent, reported
from .errors import KINDS, AgentError

FORMAT = 1
# What makes two requests the same (the key). A `provider: replay` agent stands in for any
# agent, so it matches on what was asked only.
SAME_CALL = ("agent", "provider", "model", "task", "system", "prompt", "output_schema")
SAME_QUESTION = ("task", "system", "prompt", "output_schema")
MAX_EPOCH = 1e11  # a recorded reset time past this (year 5138) is no time
USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                "reasoning_tokens")


class Cassettes:
    """The cassettes of one run, and the agents it calls: live (mode None), recording every
    call ("record"), or served from the cassettes ("replay")."""

    def __init__(self, workspace: Workspace, mode: str | None = None):
        self.workspace = workspace
        self.mode = mode
        self._key_envs: set[str] = set()
        self._secrets: list[str] | None = None
        self._written: dict[Path, list[str]] = {}  # cassette -> the lines this run recorded
        self._tapes: dict[Path, Tape] = {}  # cassette -> what it holds, for replay

    def agent(self, name: str, config: AgentConfig) -> Agent:
        """Agent `name` as this run calls it (the real one is built only when it is called live)."""
        if isinstance(config, ReplayConfig):
            return ReplayAgent(name, config, self.workspace.root, self)
        if self.mode == "replay":
            return ReplayAgent(name, config, self.workspace.root, self, match=SAME_CALL)
        agent = make_agent(name, config, self.workspace.root)
        if self.mode == "record":
            added = providers.key_envs({name: config}) - self._key_envs
            if added:  # its key is a secret whatever the variable is called
                self._key_envs |= added
                self._secrets = None
            return Recorder(agent, name, config, self)
        return agent

    # ------------------------------------------------------------------ recording

    def record(self, request: dict, outcome: str, body: dict) -> None:
        """Append one call (outcome "response" or "error") to its task's cassette. The first
        call this run records for a task replaces what an earlier recording left there."""
        path = self.workspace.cassette(request["task"])
        request = self.redact(request)
        call = {"v": FORMAT, "key": request_key(request, SAME_CALL), "request": request,
                outcome: self.redact(body)}
        lines = self._written.setdefault(path, [])
        lines.append(json.dumps(call, ensure_ascii=False, default=str))
        # backslashreplace: a lone surrogate (undecodable agent output) is written as the
        # JSON escape \udcxx, which reads back as the same string.
        self.workspace.write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8", "backslashreplace"))

    def redact(self, value: Any) -> Any:
        """`value` with every form of our secrets replaced, in every string it holds."""
        if self._secrets is None:
            self._secrets = secret_values(names=self._key_envs)
        return _scrub(value, self._secrets)

    # ------------------------------------------------------------------ replay

    def tape(self, path: Path) -> "Tape":
        """What the cassette at `path` holds (read once per run)."""
        if path not in self._tapes:
            self._tapes[path] = Tape.read(self.workspace, path)
        return self._tapes[path]




def normalized(agent: str, config: AgentConfig, request: Request) -> dict:
    """What an agent was asked, as a cassette stores it (no credentials, no paths)."""
    return {"agent": agent, "provider": config.provider, "model": config.model,
            "task": request.task_id, "iteration": request.iteration, "system": request.system,
            "prompt": request.prompt, "output_schema": request.output_schema}


def request_key(request: dict, fields: tuple[str, ...]) -> str:
    same = {f: request.get(f) for f in fields}
    return hashlib.sha256(json.dumps(same, sort_keys=True, ensure_ascii=False, default=str)
                          .encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _usage(u: Usage | None) -> dict[str, int]:
    return {f: int(getattr(u, f, 0) or 0) for f in USAGE_FIELDS}


class Recorder:
    """A live agent whose every call is written to the cassettes."""

    def __init__(self, agent: Agent, name: str, config: AgentConfig, cassettes: Cassettes):
        self.inner = agent
        self.name = name
        self.config = config
        self.cassettes = cassettes

    def __getattr__(self, attr: str) -> Any:  # anything else is the live agent's
        return getattr(self.inner, attr)

    async def call(self, request: Request) -> Response:
        asked = normalized(self.name, self.config, request)
        try:
            resp = await self.inner.call(request)
        except AgentError as e:
            charge = e.charged()  # the figures believed (a NaN count is recorded as 0)
            self._record(asked, "error", {
                "kind": e.kind, "message": e.message, "retry_after": e.retry_after,
                "reset_at": e.reset_at, "retry": e.retry, "stderr": e.stderr, "usage": _usage(charge.usage),
                "cost_usd": charge.cost_usd, "cost_source": charge.cost_source,
                **({"unreachable": True} if e.unreachable else {})}, failed=e)
            raise
        self._record(asked, "response", {
            "text": resp.text, "usage": _usage(resp.usage), "cost_usd": resp.cost_usd,
            "cost_source": resp.cost_source, "tool_calls": resp.tool_calls,
            **({"truncated": resp.truncated} if resp.truncated else {}),
            "latency": round(resp.latency, 6), "notes": list(resp.notes),
            **({"denials": resp.denials} if resp.denials else {})}, answered=resp)
        return resp

    def _record(self, asked: dict, outcome: str, body: dict, answered: Response | None = None,
                failed: AgentError | None = None) -> None:
        """Write the call. When that fails the call fails too, keeping what it produced (the
        answer as the attempt's raw text, its cost in the ledger): a --record run must not
        end with holes in its cassettes."""
        try:
            self.cassettes.record(asked, outcome, body)
        except WorkspaceError as e:
            was = f"{failed.message}; and " if failed else ""
            src = answered or failed
            raise AgentError(f"{was}agent '{self.name}': the call could not be recorded: {e}", kind="failed",
                             stderr=answered.text if answered else failed.stderr,
                             usage=src.usage, cost_usd=src.cost_usd, cost_source=src.cost_source) from None


# ---------------------------------------------------------------------- replay


@dataclass
class Tape:
    """The calls one cassette holds, and how many of each this run has served."""

    path: Path
    shown: str  # the path as messages show it
    calls: list[dict] = field(default_factory=list)
    problem: str | None = None  # why it cannot be served from (missing, unreadable, damaged)
    served: dict[tuple, int] = field(default_factory=dict)  # (fields, key) -> calls served
    _index: dict[tuple, dict[str, list[int]]] = field(default_factory=dict)

    @classmethod
    def read(cls, workspace: Workspace, path: Path) -> "Tape":
        tape = cls(path, workspace.rel(path))
        try:
            text = workspace.read_bytes(path).decode("utf-8")
        except FileNotFoundError:
            tape.problem = f"{tape.shown} does not exist (record it with `harnessc run --record`)"
            return tape
        except (WorkspaceError, UnicodeDecodeError) as e:
            tape.problem = f"{tape.shown} cannot be read ({e})"
            return tape
        for n, line in enumerate(text.split("\n"), 1):  # not splitlines: \x85 and \u2028 are text
            if not line.strip():
                continue
            try:
                call = json.loads(line)
            except (ValueError, RecursionError):
                call = None
            why = _malformed(call)
            if why:
                tape.problem = f"{tape.shown} line {n} is not a recorded call ({why})"
                return tape
            call["line"] = n
            tape.calls.append(call)
        return tape

    def next(self, wanted: dict, fields: tuple[str, ...]) -> dict | None:
        """The next recorded call that asked what `wanted` asks, or None."""
        index = self._index.get(fields)
        if index is None:
            index = self._index[fields] = {}
            for i, call in enumerate(self.calls):
                index.setdefault(request_key(call["request"], fields), []).append(i)
        key = request_key(wanted, fields)
        same = index.get(key, [])
        n = self.served.get((fields, key), 0)
        if n >= len(same):
            return None
        self.served[(fields, key)] = n + 1
        return self.calls[same[n]]

    def missing(self, agent: str, wanted: dict, fields: tuple[str, ...]) -> AgentError:
        """The error for a request this cassette cannot answer: where it looked, and the
        nearest recorded request with what differs."""
        head = (f"agent '{agent}': replay: no recorded answer for task '{wanted['task']}' "
                f"(request {request_key(wanted, fields)})")
        if self.problem:
            return AgentError(f"{head}: {self.problem}", kind="not_recorded")
        if not self.calls:
            return AgentError(f"{head}: {self.shown} holds no calls", kind="not_recorded")
        near = min(self.calls, key=lambda c: _distance(c["request"], wanted, fields))
        diffs = differences(near["request"], wanted, fields)
        where = f"nearest recorded: {self.shown} line {near['line']} (agent '{near['request'].get('agent')}', " \
                f"iteration {near['request'].get('iteration')})"
        if not diffs:
            times = sum(1 for c in self.calls if request_key(c["request"], fields) == request_key(wanted, fields))
            return AgentError(f"{head} in {self.shown}: this request was recorded {times} time(s) and each "
                              f"recorded answer was served already (the recorded run asked it fewer times); "
                              f"{where}", kind="not_recorded")
        return AgentError(f"{head} in {self.shown}; {where}: {'; '.join(diffs)}", kind="not_recorded")


def _malformed(call: Any) -> str | None:
    if not isinstance(call, dict):
        return "not a JSON object"
    if call.get("v") != FORMAT:
        return f"format {call.get('v')!r}, this harnessc reads {FORMAT}"
    req = call.get("request")
    if not isinstance(req, dict) or not all(isinstance(req.get(f), str) for f in ("task", "prompt", "system")):
        return "no request with task, system and prompt"
    if isinstance(call.get("response"), dict):
        return None if isinstance(call["response"].get("text"), str) else "a response without text"
    err = call.get("error")
    if isinstance(err, dict):
        return None if err.get("kind") in KINDS and isinstance(err.get("message"), str) else \
            "an error without a known kind and a message"
    return "neither a response nor an error"


def _distance(recorded: dict, wanted: dict, fields: tuple[str, ...]) -> tuple[int, float]:
    """Fields that differ, then how unlike the prompts are (0 = the same text)."""
    differing = sum(recorded.get(f) != wanted.get(f) for f in fields)
    a, b = str(recorded.get("prompt")), str(wanted.get("prompt"))
    return differing, 0.0 if a == b else 1.0 - difflib.SequenceMatcher(None, a, b).quick_ratio()


def differences(recorded: dict, wanted: dict, fields: tuple[str, ...]) -> list[str]:
    """What differs between a recorded request and this one, one phrase per field."""
    out = []
    for f in fields:
        a, b = recorded.get(f), wanted.get(f)
        if a == b:
            continue
        if isinstance(a, str) and isinstance(b, str):
            out.append(f"the {f} differs {_first_difference(a, b)}")
        else:
            out.append(f"the {f} differs (recorded {_short(a)}, now {_short(b)})")
    return out


def _first_difference(a: str, b: str) -> str:
    """Where two different texts first differ, by line."""
    la, lb = a.split("\n"), b.split("\n")
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"at line {i + 1} (recorded {_short(x)}, now {_short(y)})"
    return f"in length (recorded {len(la)} lines, now {len(lb)})"  # one is the other plus lines


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[:width - 1] + "…"


class ReplayAgent:
    """Answers every call from the cassettes; a request they do not hold fails with
    kind not_recorded. Provider `replay` (matching what was asked, whichever agent answered
    it, in `cassette:` or .harness/cassettes/), and every agent of a `run --replay`
    (matching the agent, provider and model too)."""

    def __init__(self, name: str, config: AgentConfig, root: Path, cassettes: Cassettes | None = None,
                 match: tuple[str, ...] = SAME_QUESTION):
        self.name = name
        self.config = config
        self.cassettes = cassettes or Cassettes(Workspace(root), "replay")
        self.match = match
        directory = config.cassette if isinstance(config, ReplayConfig) else None
        self.directory = None
        if directory:
            rel = Path(directory)
            if rel.is_absolute() or ".." in rel.parts or "\0" in str(directory):
                raise AgentError(f"agent '{name}': cassette {directory!r} must be a directory inside "
                                 "the project, e.g. tests/cassettes", kind="invalid_request")
            self.directory = root / rel

    async def call(self, request: Request) -> Response:
        wanted = self.cassettes.redact(normalized(self.name, self.config, request))
        tape = self.cassettes.tape(self.cassettes.workspace.cassette(request.task_id, self.directory))
        call = tape.next(wanted, self.match)
        if call is None:
            raise tape.missing(self.name, wanted, self.match)
        note = f"replayed from {tape.shown} line {call['line']}"
        if "error" in call:
            e = call["error"]
            # No wait: there is no server to wait for (the recorded retry_after stays in the file).
            source = _cost_source(e)
            raise AgentError(e["message"], kind=e["kind"], retry_after=0.0, reset_at=reported(e.get("reset_at"), MAX_EPOCH) or None,
                             stderr=str(e.get("stderr") or ""),
                             usage=None if source == NO_RESPONSE else _from_usage(e.get("usage")),
                             cost_usd=_number(e.get("cost_usd")), cost_source=source,
                             retry=e["retry"] if isinstance(e.get("retry"), bool) else None,
                             unreachable=e.get("unreachable") is True)
        r = call["response"]
        return Response(text=r["text"], usage=_from_usage(r.get("usage")),
                        cost_usd=_number(r.get("cost_usd")), cost_source=_cost_source(r),
                        latency=_number(r.get("latency")),
                        tool_calls=r["tool_calls"] if type(r.get("tool_calls")) is int else None,
                        truncated=str(r["truncated"]) if r.get("truncated") else None,
                        notes=[*map(str, r.get("notes") or []), note],
                        denials=[d for d in r.get("denials") or [] if isinstance(d, dict)])


def _cost_source(body: dict) -> str:
    """The recorded cost source; for a cassette without one (or a bad one), what its figures
    say: a cost is priced, an error that used nothing got no response."""
    source = body.get("cost_source")
    if source in COST_SOURCES:
        return source
    if _number(body.get("cost_usd")):
        return PRICE
    used = any(_from_usage(body.get("usage")).__dict__.values())
    return NO_PRICE if used or "text" in body else NO_RESPONSE


def _from_usage(u: Any) -> Usage:
    """The recorded counts as they are: what is not a count to believe is noted and counted
    0 when the Response or the error's ledger is built (agents.base.checked_charge)."""
    u = u if isinstance(u, dict) else {}
    return Usage(**{f: u.get(f) or 0 for f in USAGE_FIELDS})


def _number(value: Any, kind: type = float) -> Any:
    """A recorded figure (a hand-edited cassette may hold anything: it counts as 0)."""
    try:
        return kind(value or 0)
    except (TypeError, ValueError, OverflowError):
        return kind(0)
