"""Run scenarios as data files (after black's tests/data/cases): tests/runtime/scenarios/<name>/
holds a project (roadmap.md, harness.yaml, contracts.yaml, ...: every file but the two below
is copied into the test's directory), `scenario.yaml` (the commands, the agents' scripted
replies and what the run must end with) and `trace.jsonl` (the expected event trace, a
golden file: HARNESSC_UPDATE_GOLDEN=1 rewrites it).

The commands run in this process in virtual time (virtual.py); an agent named under
`replies:` answers from its script instead of its provider, the others are built as the plan
says. Accept commands and checks run for real. scenario.yaml:

    about: what it shows
    moved_from: [tests/runtime/test_x.py::test_y]   # the subprocess tests it replaces
    plan:                         # instead of roadmap.md: a compiled plan (helpers.write_project)
      nodes: [{id: a, contract: summary, retry: {on_failure: fallback}}]   # helpers.node's keywords
      agents: {cmd: {provider: simulate}}
      contracts: {summary: {on_failure: fallback}}   # helpers.SIMPLE_CONTRACT with these keys
      loop: {recovery: {prompt_mutations: 0}}   # harness.yaml's loop: sections (helpers.loop_settings)
      concurrency: 1
      templates: prompts          # the project's template directory
    commands: [[run]]             # each an argv after `harnessc -C <project>`; default [[run]]
    exit: [1]                     # each command's exit code (default: all 0)
    replies:                      # agent -> task ("*": any task) -> one reply per call; the
      bot:                        # last repeats. A key "task:mutation" scripts an assist call.
        "*":
          - text: "done <promise>DONE</promise>"   # {task} and {n} (the call's number) filled in
            usage: {input_tokens: 10, output_tokens: 5}  # default: estimated from the text
            latency: 30           # virtual seconds the call takes (default LATENCY)
            files: {out.txt: "..."}  # written in the attempt's directory before answering
          - error: {kind: failed, message: "agent '{agent}': exited with 3"}
    expect:
      tasks: {a: {state: failed, attempts: 3, error: {startswith: "..."}}}   # state.db's tasks rows
      attempts: {a: [{level: 0, status: rejected}, {prompt: {contains: "..."}}]}  # every attempt, in order
      files: {out.txt: true, gone.txt: false}   # exist in the project, or not
      json: {.harness/build/plan.json: {defaults: {budget: 0.01}}}   # a JSON file's content
      events: {recovery: [{task: a, step: give_up}]}   # every event of the kind, in order
      output: {contains: ["..."]}  # stdout + stderr of all the commands

A value in `expect` is equal to what was found, or a matcher: {startswith: s}, {contains: s or
[s, ...]}, {lacks: s or [s, ...]}, {gt: x}, {lt: x}.

The trace is every event of the scenario's runs, grouped by task (the run's own first) in the
order each task saw them, without the fields that change from run to run (TRACE_DROPPED).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harnessc.estimates import estimate_tokens
from harnessc.runtime import clock
from harnessc.runtime.agents import cassettes
from harnessc.runtime.agents.base import Request, Response, Usage, priced
from harnessc.runtime.agents.errors import AgentError

from . import helpers, virtual

HERE = Path(__file__).resolve().parent / "scenarios"
SCENARIO, TRACE = "scenario.yaml", "trace.jsonl"
# Fields of an event that change from run to run (times, ids, paths, measured sizes) or with
# every prompt wording (tokens): the trace keeps the rest.
# Periodic summaries come by the clock, which goes at the real pace while a child process
# works (virtual.PatientClock): not part of the trace.
TRACE_DROPPED_KINDS = frozenset({"summary"})
# A scripted call takes this long (virtual seconds, free) unless its reply says: a real call
# takes time, and iterations faster than loop.alerts' min_iteration_duration (1 s) would be a
# runaway sign that came or not by how fast the machine ran the accept commands.
LATENCY = 5.0
TRACE_DROPPED = frozenset({"ts", "run_id", "task", "steps", "answered_at", "latency", "attempt", "options",
                           "elapsed", "tokens", "reserved_usd", "pids", "started", "duration", "path"})


def names() -> list[str]:
    return sorted(p.name for p in HERE.iterdir() if (p / SCENARIO).is_file())


@dataclass
class Scenario:
    name: str
    dir: Path
    spec: dict = field(default_factory=dict)

    @classmethod
    def load(cls, name: str) -> "Scenario":
        d = HERE / name
        return cls(name, d, yaml.safe_load((d / SCENARIO).read_text(encoding="utf-8")) or {})

    @property
    def commands(self) -> list[list[str]]:
        return [[str(a) for a in c] for c in self.spec.get("commands", [["run"]])]

    def project(self, root: Path) -> Path:
        """Copy the scenario's project files to `root`; with `plan:`, write the compiled plan
        it lists as well (helpers.write_project)."""
        shutil.copytree(self.dir, root, ignore=shutil.ignore_patterns(SCENARIO, TRACE))
        plan = self.spec.get("plan")
        if plan:
            contracts = {name: {**helpers.SIMPLE_CONTRACT, "name": name, **c}
                         for name, c in (plan.get("contracts") or {}).items()}
            helpers.write_project(root, [helpers.node(n["id"], **{k: v for k, v in n.items() if k != "id"}) for n in plan["nodes"]], agents=plan.get("agents"),
                                  contracts=contracts, concurrency=plan.get("concurrency", 4), loop=plan.get("loop"),
                                  templates=plan.get("templates"))
        return root


# ------------------------------------------------------------------ scripted agents


class ScriptedAgent:
    """An agent answering each call from its script: replies[task][n-1] (the last repeats);
    a call with no script goes to `inner`, the agent the plan names."""

    def __init__(self, name: str, config: Any, replies: dict[str, list[dict]], inner: Any):
        self.name = name
        self.config = config
        self.replies = replies
        self.inner = inner
        self.calls: dict[str, int] = {}

    async def call(self, request: Request) -> Response:
        key = request.task_id if request.purpose == "task" else f"{request.task_id}:{request.purpose}"
        script = self.replies.get(key) or (self.replies.get("*") if request.purpose == "task" else None)
        if not script:
            return await self.inner.call(request)
        n = self.calls[key] = self.calls.get(key, 0) + 1
        reply = script[min(n, len(script)) - 1]

        def fill(s: str) -> str:
            return str(s).replace("{task}", request.task_id).replace("{n}", str(n)).replace("{agent}", self.name)

        latency = float(reply.get("latency", LATENCY))
        if request.timeout is not None and latency > request.timeout:  # bounded as every agent bounds its call
            await clock.sleep(request.timeout)
            raise AgentError(f"agent '{self.name}': no answer within {request.timeout:g}s", kind="timeout")
        if latency:
            await clock.sleep(latency)
        where = request.workdir or request.root
        for rel, content in (reply.get("files") or {}).items():
            path = Path(where) / fill(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(fill(content), encoding="utf-8")
        if "error" in reply:
            e = reply["error"]
            raise AgentError(fill(e.get("message", f"agent '{self.name}': scripted failure")),
                             kind=e.get("kind", "failed"), retry_after=e.get("retry_after"),
                             reset_at=e.get("reset_at"))
        text = fill(reply.get("text", ""))
        u = reply.get("usage") or {}
        usage = Usage(int(u.get("input_tokens", estimate_tokens(request.system + request.prompt))),
                      int(u.get("output_tokens", estimate_tokens(text))))
        cost, source = priced(self.config, usage)
        return Response(text=text, usage=usage, cost_usd=cost, cost_source=source,
                        latency=latency, tool_calls=reply.get("tool_calls"))


def scripted(monkeypatch: Any, replies: dict[str, dict[str, list[dict]]]) -> None:
    """Agents named in `replies` answer from their scripts in this test's runs (the one seam:
    the function the run's Cassettes builds each agent with)."""
    real = cassettes.make_agent

    def make_agent(name: str, config: Any, root: Path) -> Any:
        inner = real(name, config, root)
        return ScriptedAgent(name, config, replies[name], inner) if name in replies else inner

    monkeypatch.setattr(cassettes, "make_agent", make_agent)


# ------------------------------------------------------------------ what a run left


def rows(root: Path, sql: str) -> list[dict]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    try:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute(sql)]
    finally:
        db.close()


def trace(root: Path) -> str:
    """The runs' events (state.db), grouped by task, the run's own first, as JSON lines."""
    groups: dict[str, list[dict]] = {}
    for r in rows(root, "SELECT kind, task_id, data FROM events ORDER BY id"):
        if r["kind"] in TRACE_DROPPED_KINDS:
            continue
        data = json.loads(r["data"] or "{}")
        kept = {k: v for k, v in sorted(data.items()) if k not in TRACE_DROPPED and k not in ("kind", "task_id")}
        groups.setdefault(r["task_id"] or "", []).append({"task": r["task_id"], "kind": r["kind"], **kept})
    return "".join(json.dumps(e, sort_keys=False, ensure_ascii=False) + "\n"
                   for task in sorted(groups) for e in groups[task])


def check(what: str, expected: Any, actual: Any) -> None:
    """`actual` matches `expected` (a value, a matcher, or a mapping/list of them)."""
    if isinstance(expected, dict) and expected and set(expected) <= {"startswith", "contains", "lacks", "gt", "lt"}:
        for op, want in expected.items():
            wants = want if isinstance(want, list) else [want]
            if op == "startswith":
                assert isinstance(actual, str) and actual.startswith(want), f"{what}: {actual!r} does not start with {want!r}"
            elif op == "contains":
                for w in wants:
                    assert w in (actual or ""), f"{what}: {w!r} not in {actual!r}"
            elif op == "lacks":
                for w in wants:
                    assert w not in (actual or ""), f"{what}: {w!r} in {actual!r}"
            elif op == "gt":
                assert actual is not None and actual > want, f"{what}: {actual!r} is not > {want!r}"
            else:
                assert actual is not None and actual < want, f"{what}: {actual!r} is not < {want!r}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{what}: expected a mapping, found {actual!r}"
        for k, v in expected.items():
            assert k in actual, f"{what}: no {k!r} in {sorted(actual)}"
            check(f"{what}.{k}", v, actual[k])
    elif isinstance(expected, list) and not (expected and not isinstance(expected[0], dict) and not isinstance(actual, list)):
        assert isinstance(actual, list) and len(actual) == len(expected), \
            f"{what}: expected {len(expected)} items, found {len(actual) if isinstance(actual, list) else actual!r}: {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            check(f"{what}[{i}]", e, a)
    else:
        assert actual == expected, f"{what}: expected {expected!r}, found {actual!r}"


def check_state(root: Path, expect: dict, output: str) -> None:
    """The run's final state (state.db, the project's files, the commands' output) against `expect`."""
    if "tasks" in expect:
        tasks = {r["id"]: r for r in rows(root, "SELECT * FROM tasks")}
        check("tasks", expect["tasks"], tasks)
    if "attempts" in expect:
        found: dict[str, list[dict]] = {}
        for r in rows(root, "SELECT * FROM attempts ORDER BY id"):
            found.setdefault(r["task_id"], []).append(r)
        check("attempts", expect["attempts"], found)
    for rel, there in (expect.get("files") or {}).items():
        assert (root / rel).exists() == bool(there), f"{rel} {'missing' if there else 'should not exist'}"
    if "events" in expect:
        found = {}
        for r in rows(root, "SELECT kind, task_id, data FROM events ORDER BY id"):
            found.setdefault(r["kind"], []).append({"task": r["task_id"], **json.loads(r["data"] or "{}")})
        check("events", expect["events"], {kind: found.get(kind, []) for kind in expect["events"]})
    for rel, want in (expect.get("json") or {}).items():
        check(rel, want, json.loads((root / rel).read_text(encoding="utf-8")))
    if "output" in expect:
        check("output", expect["output"], output)


def run(scenario: Scenario, root: Path, monkeypatch: Any) -> str:
    """Run the scenario's commands on a copy of its project at `root`; their output."""
    scenario.project(root)
    scripted(monkeypatch, scenario.spec.get("replies") or {})
    codes = scenario.spec.get("exit") or [0] * len(scenario.commands)
    out = []
    for argv, code in zip(scenario.commands, codes, strict=True):
        r = virtual.harnessc(root, *argv)
        out.append(r.stdout + r.stderr)
        assert r.returncode == code, f"harnessc {' '.join(argv)} exited {r.returncode}, expected {code}:\n{out[-1]}"
    return "".join(out)
