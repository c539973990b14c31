"""plan.json's typed contract: the records the compiler writes and the runtime reads.

One definition of every plan.json entry (Plan, PlanNode, Limits, Retry, Routing, Estimate,
AcceptCommand, ContextStaging, PromptRef, Contract, Executor), with `load` (JSON data -> records) and `dump` (records ->
plan.json's text). The compiler builds these records, the runtime and the test helpers read
them by attribute, so a key renamed on one side is an error on the other, not a silent `None`.

Each record is a slots dataclass that also reads like the dict it is written as
(`node["id"]`, `node.get("done")`): a 100k-task plan holds several records per task and a
dict costs four times the memory; encoders write a record as an object, fields in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Callable

from .errors import HarnesscError
from .nogc import no_cyclic_gc
from .providers import AgentConfigError, agent_config
from .records import Record, record  # noqa: F401 - Record: for callers
from .vocab import PLAN_VERSION
from .workspace import Workspace

# ------------------------------------------------------------------ one task


@record
class Limits(Record):
    max_iterations: int | None  # None: unlimited
    max_time: float  # seconds for the whole task
    stuck_after: int
    budget_usd: float | None


@record
class Retry(Record):
    max_retries: int
    on_failure: str  # retry | fallback | partial | template | escalate
    delays: list[float]
    retry_on: list[str] | None = None  # kinds of failure retried (vocab.ERROR_KINDS); None: every kind
    dont_retry: list[str] | None = None  # kinds never retried: on_failure at once
    start_level: int = 1  # the first retry's refinement level

    def not_retried(self, kinds: Iterable[str]) -> str | None:
        """Why a failure of these kinds is not retried (retry_on / dont_retry), or None."""
        for kind in kinds:
            if self.dont_retry and kind in self.dont_retry:
                return f"{kind} is in dont_retry"
            if self.retry_on is not None and kind not in self.retry_on:
                return f"{kind} is not in retry_on ({', '.join(self.retry_on)})"
        return None

    def level(self, failures: int) -> int:
        """The refinement level of the retry after `failures` failed claims (1-3)."""
        return min(self.start_level + max(failures, 1) - 1, 3)

    def delay(self, failures: int) -> float:
        """Seconds to wait before the retry after `failures` failed claims (the last delay repeats)."""
        if not self.delays:
            return 0.0
        return float(self.delays[min(max(failures, 1) - 1, len(self.delays) - 1)])


@record
class NodeLoop(Record):
    """A loop task's own loop settings from roadmap.md, over the plan's `loop` (harness.yaml).
    None in a field: the plan's value."""

    progress_threshold: float | None
    recovery: list[str] | None  # the recovery ladder's rungs in order, ending in human or fail


@record
class Routing(Record):
    agent: str  # the build-time choice
    chain: list[str]  # fallbacks, then stronger agents of routing.escalation
    reason: str
    auto: bool = False  # routing.default auto chose: the router may choose again at run time


@record
class Analysis(Record):
    """How hard the task looks (compiler/analysis.py) and the agent tier it needs."""

    complexity: str  # trivial | simple | medium | complex | epic
    tier: str  # fast | balanced | powerful
    score: float | None  # None: complexity written in the roadmap
    reasons: list[str]
    needs: list[str] = ()  # implementation | research | reasoning: what its wording asks for


@record
class Estimate(Record):
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


@record
class AcceptCommand(Record):
    id: str
    argv: list[str]
    timeout: float | None

    min_passed = None  # not a field: only a CountedAccept has one (plan.json keeps its form without)
    junit = None


@record
class CountedAccept(AcceptCommand):
    """An accept command held to a number of passing tests (`min_passed:` of the entry, the
    task or the contract), written so only where one is set."""

    min_passed: int | str  # N, or "base": no fewer than pass at the task's base commit
    junit: str | None  # a JUnit XML file it writes (project-relative), read for the count


@record
class BudgetSource(Record):
    """Where a task's context budget came from."""

    source: str  # task (its context_tokens) | defaults (harness.yaml's) | window | built-in (32000)
    agent: str | None = None  # window: the agent of the task's chain with the smallest known window
    window: int | None = None  # window: that agent's context window in tokens


@record
class StagedFile(Record):
    """One context file's fate under the budget."""

    path: str
    priority: str  # critical | high | medium | low
    tokens: int  # estimated from the file's size at build time
    kept: str  # whole | cut | left out
    allowed: int  # tokens of it that go into the prompt


@record
class ContextStaging(Record):
    """Which of a task's context files fit its token budget (compiler/staging.py)."""

    budget: int
    budget_from: BudgetSource | None  # None in a plan built before it was recorded
    used: int
    files: list[StagedFile]


@record
class RetrievedFile(StagedFile):
    """A file `context: auto` chose (priority `auto`, always whole): why, as plan.json shows it."""

    score: float  # compiler/retrieval.py's score: higher is more related
    matched: list[str]  # the query's words and the paths that matched it (`imported by tests/x.py`)


@record
class AutoContext(Record):
    """What `context: auto` had and looked at (compiler/retrieval.py)."""

    asked: int | None  # auto(N)'s N; None: `auto`
    budget: int  # tokens for its files: N or what the named files left, whichever is smaller
    used: int
    indexed: int  # files of the project indexed (text files, not too large, no links)
    words: list[str]  # the query's words, first ones first (at most 30)


@record
class AutoStaging(ContextStaging):
    """The staging of a task with `context: auto`: its files come after the named ones."""

    auto: AutoContext

    def chosen(self) -> dict:
        """What retrieval chose and why, as `ls --output json` and `show` give it."""
        return {**dict(self.auto), "files": [
            {"path": f.path, "tokens": f.tokens, "score": f.score, "matched": list(f.matched)}
            for f in self.files if isinstance(f, RetrievedFile)]}


class PromptRef(Record):
    """A prompt file and its sha256; the path is made from the task id when read."""

    __slots__ = ("task_id", "sha256")
    _keys = {"path": None, "sha256": None}

    def __init__(self, task_id: str, sha256: str):
        self.task_id, self.sha256 = task_id, sha256

    @property
    def path(self) -> str:
        return f"prompts/{self.task_id}.md"

    @classmethod
    def from_json(cls, data: Mapping) -> "PromptRef":
        path = str(data.get("path") or "")
        task_id = path[len("prompts/"):-len(".md")] if path.startswith("prompts/") and path.endswith(".md") else path
        return cls(task_id, data.get("sha256") or "")


@record
class Approaches(Record):
    """Best-of-N (`approaches: N`): N approaches of the task at once, each in its own worktree."""

    n: int  # how many
    select: str  # first: the first verified lands, the rest are cancelled; best: the highest score
    score: AcceptCommand | None  # a command whose last output line is the approach's score
    min_score: float | None  # an approach scoring below it is not verified
    agents: list[str]  # the task's own agents: approach k starts on the k-th (cycling)


@record
class Protected(Record):
    """A file, directory or glob the task's agent may not change (protectrules.py), and why."""

    path: str  # a glob, or a path a command names (a directory ends with '/')
    why: str  # "a spec file", "named in the accept command", "protect: in roadmap.md", ...
    new: bool = True  # False: only the files there at the task's base (a directory a command names)


@record
class PlanNode(Record):
    """One task of the plan; the field order is plan.json's key order."""

    id: str
    title: str
    phase: str | None
    done: bool
    order: int
    priority: str
    complexity: str
    tags: list[str]
    depends_on: list[str]
    contract: str | None
    goal: str
    success: str | None
    completion_promise: str | None
    accept: list[AcceptCommand]
    context: list[str]
    limits: Limits
    retry: Retry
    routing: Routing
    analysis: Analysis | None = None
    git: str | None = None  # commit | off; None: not said (off, but `run --autonomous` commits)
    isolation: str | None = None  # worktree | none; None: not said (none)
    approaches: Approaches | None = None  # None: one approach (the task as it is)
    resources: dict[str, float] | None = None  # roadmap `resources:`: custom Ray resources of its attempts; None: none
    protect: list[Protected] = ()  # what its agent may not change besides the plan's `protect`
    allow_edit: list[str] = ()  # globs lifting protection (defaults' and the task's; never of .harness/)
    write_scope: list[str] | None = None  # globs: a change outside them rejects the attempt; None: anywhere
    review: bool | None = None  # `review: true`: its verified result waits for `harnessc approve`
    split: bool | None = None  # `split: true`: its first call proposes subtasks (runtime/growth/)
    loop: NodeLoop | None = None  # the task's own loop settings; None: the plan's
    context_staging: ContextStaging | None = None  # None: the task has no context files
    wave: int | None = None
    estimate: Estimate | None = None  # set by the compiler's last pass
    prompt: PromptRef | None = None  # set as the prompt is rendered
    fingerprint: str | None = None  # set by the compiler's last pass


# ------------------------------------------------------------------ contracts


@record
class Contract(Record):
    """A contract as the runtime checks it: the compiled JSON Schema, each provider's subset,
    the field declarations (for prompts, partial outputs, simulate), rules and commands."""

    name: str
    description: str | None
    version: str | None
    json_schema: dict | None
    provider_schemas: dict[str, dict] | None  # provider -> {schema, moved, strict}
    output: dict | None  # field name -> declaration; None: the contract has no output
    output_rules: list[str]
    accept: list[AcceptCommand]
    on_failure: str
    max_retries: int
    constraints: dict | None

    @property
    def output_schema(self) -> dict | None:
        """The JSON Schema an answer must satisfy, when the contract has an output."""
        return self.json_schema if self.output else None

    def wire_schema(self, provider: str) -> dict:
        """The provider's structured-output subset ({} when there is none)."""
        return (self.provider_schemas or {}).get(provider) or {}


# ------------------------------------------------------------------ the plan


@record
class Assists(Record):
    """The cheap agents that write text for loop tasks (harness.yaml `loop.recovery.mutation_agent`,
    `loop.context.summary_agent` and `summarize_every`); None: the deterministic text."""

    mutation_agent: str | None = None
    summary_agent: str | None = None
    summarize_every: int = 10


@record
class Executor(Record):
    """harness.yaml `executor:` when attempts run on a Ray cluster (a local executor is no
    record: Plan.executor None). `run --executor` / `--ray-address` win over it at run time
    (runtime/executor/rayconfig.py)."""

    kind: str  # ray
    address: str | None  # auto | HOST:PORT | ray://HOST:PORT; None: a local cluster started for the run
    num_cpus_per_attempt: float
    resources: dict[str, float]  # custom Ray resources every attempt asks for (a node's `resources:` adds)
    placement: str  # commands: command and CLI agents run on the workers | all: API agents too
    clone_url: str | None  # the workers clone this URL (cached per node); None: a git bundle of the base commit


@record
class Plan(Record):
    version: int
    harnessc: str
    metadata: dict
    project: dict
    templates: Any
    # agent name -> its harness.yaml settings as a providers.AgentConfig record of its provider's
    # kind (providers.agent_config)
    agents: dict[str, Any]
    budget: dict
    defaults: dict
    concurrency: int
    contracts: dict[str, Contract]
    nodes: list[PlanNode]
    edges: Any  # [dependency, task] pairs
    waves: list[list[str]]
    critical_path: list[str]
    system: PromptRef | None = None
    estimate: dict | None = None
    loop: dict | None = None  # harness.yaml `loop:` (None in a plan built before it existed)
    assists: Assists | None = None  # None in a plan built before assists existed: none
    git_hooks: bool | None = None  # harness.yaml `git_hooks` (None in a plan built before it existed: false)
    worktrees: dict | None = None  # harness.yaml `worktrees: {link, copy}` (None: nothing brought in)
    telemetry: dict | None = None  # harness.yaml `telemetry:` {otlp_endpoint, content, project} (None: as unset)
    notify: dict | None = None  # harness.yaml `notify:` {command, webhook, on, timeout, pass_env} (None: no notifier)
    memory: dict | None = None  # harness.yaml `memory:` {on, summary_tokens, inject_tokens, every, agent} (None: defaults)
    executor: Executor | None = None  # harness.yaml `executor:`; None: local (every task on this machine)
    growth: dict | None = None  # harness.yaml `plan:` {grow, max_new_tasks, max_depth} (None: the defaults)
    # what every task's agent may not change (the spec files, .harness/, CI configuration,
    # defaults.protect); a node's `protect` adds its own (None in a plan built before it existed)
    protect: list[Protected] | None = None

    def node(self, task_id: str) -> PlanNode:
        return self._by_id()[task_id]

    def contract_of(self, node: PlanNode) -> Contract | None:
        return self.contracts.get(node.contract) if node.contract else None

    def _by_id(self) -> dict[str, PlanNode]:
        return {n.id: n for n in self.nodes}


# ------------------------------------------------------------------ load / dump


class PlanFormatError(ValueError):
    """plan.json holds something this harnessc does not read as a plan."""


def load(data: Mapping) -> Plan:
    """Records from plan.json's parsed JSON. Raises PlanFormatError on a malformed entry."""
    try:
        agents = {str(name): agent_config(str(name), raw) for name, raw in (data.get("agents") or {}).items()}
    except (AgentConfigError, AttributeError) as e:
        raise PlanFormatError(str(e) if isinstance(e, AgentConfigError) else "agents must be a mapping") from None
    try:
        return Plan(
            **{k: data.get(k) for k in Plan._keys if k not in ("agents", "contracts", "nodes", "system", "assists", "executor", "protect")},
            agents=agents,
            contracts={name: load_contract(c) for name, c in (data.get("contracts") or {}).items()},
            nodes=[_node(n) for n in data.get("nodes") or []],
            system=PromptRef.from_json(data["system"]) if data.get("system") else None,
            assists=Assists(**data["assists"]) if data.get("assists") else None,
            executor=Executor(**data["executor"]) if data.get("executor") else None,
            protect=[Protected(**p) for p in data["protect"]] if data.get("protect") is not None else None,
        )
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        raise PlanFormatError(f"plan.json does not match this harnessc's plan format: {e!r}") from None


class PlanError(HarnesscError):
    """The plan cannot be used: missing, unreadable, wrong version, or failed to build; or a
    selector matches none of its tasks. `hint` says what to do, when there is more to say."""


def load_plan(root: Path) -> Plan:
    """The compiled plan (.harness/build/plan.json): here, not in the runtime's doorway to the
    compiler, so that the commands that only read a run (status, show, log) load no compiler.
    Raises PlanError, or WorkspaceError when .harness/ holds a link."""
    workspace = Workspace(root)
    path = workspace.plan
    try:
        plan = json.loads(workspace.read_text(path))
    except FileNotFoundError:
        raise PlanError(f"no compiled plan at {path.relative_to(root)}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PlanError(f"{path.relative_to(root)} is unreadable: {e}") from None
    if not isinstance(plan, dict) or plan.get("version") != PLAN_VERSION:
        got = plan.get("version") if isinstance(plan, dict) else None
        raise PlanError(
            f"{path.relative_to(root)} has plan version {got!r}; this harnessc reads version {PLAN_VERSION}"
        )
    try:
        with no_cyclic_gc():  # the plan's records live as long as the process (see nogc.py)
            return load(plan)
    except PlanFormatError as e:
        raise PlanError(f"{path.relative_to(root)}: {e}; run `harnessc build`") from None


def loads(text: str) -> Plan:
    return load(json.loads(text))


def dump(plan: Mapping, write: Callable[[bytes], Any]) -> None:
    """Write plan.json's text (records as objects, fields in order)."""
    from .compiler.planjson import write_plan_json

    write_plan_json(plan, write)


def plain(value: Any) -> Any:
    """`json.dumps(..., default=plain)`: records as objects, other sequences as arrays."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (tuple, list)) or hasattr(value, "__iter__"):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not part of a plan")


def _node(d: Mapping) -> PlanNode:
    return PlanNode(
        **{k: d[k] for k in _NODE_REQUIRED},
        wave=d.get("wave"),
        fingerprint=d.get("fingerprint"),
        accept=[_accept(a) for a in d["accept"]],
        limits=Limits(**d["limits"]),
        retry=Retry(**d["retry"]),
        routing=Routing(**d["routing"]),
        analysis=Analysis(**d["analysis"]) if d.get("analysis") else None,
        git=d.get("git"),
        isolation=d.get("isolation"),
        approaches=_approaches(d["approaches"]) if d.get("approaches") else None,
        resources=dict(d["resources"]) if d.get("resources") else None,
        protect=[Protected(**p) for p in d.get("protect") or ()],
        allow_edit=list(d.get("allow_edit") or ()),
        write_scope=list(d["write_scope"]) if d.get("write_scope") is not None else None,
        review=True if d.get("review") else None,
        split=True if d.get("split") else None,
        loop=NodeLoop(**d["loop"]) if d.get("loop") else None,
        context_staging=_staging(d["context_staging"]) if d.get("context_staging") else None,
        estimate=Estimate(**d["estimate"]) if d.get("estimate") else None,
        prompt=PromptRef.from_json(d["prompt"]) if d.get("prompt") else None,
    )


_NODE_REQUIRED = [k for k in PlanNode._keys
                  if k not in ("accept", "limits", "retry", "routing", "analysis", "git", "isolation", "approaches", "resources", "review", "split", "loop", "context_staging",
                               "estimate", "prompt", "wave", "fingerprint", "protect", "allow_edit", "write_scope")]


def _approaches(d: Mapping) -> Approaches:
    score = d.get("score")
    return Approaches(int(d["n"]), str(d.get("select") or "first"), _accept(score) if score else None,
                      d.get("min_score"), list(d.get("agents") or []))


def _staging(d: Mapping) -> ContextStaging:
    source = d.get("budget_from")
    files = [RetrievedFile(**f) if "score" in f else StagedFile(**f) for f in d["files"]]
    if d.get("auto"):
        return AutoStaging(d["budget"], BudgetSource(**source) if source else None, d["used"], files,
                           AutoContext(**d["auto"]))
    return ContextStaging(d["budget"], BudgetSource(**source) if source else None, d["used"], files)


def load_contract(d: Mapping) -> Contract:
    return Contract(**{**{k: d.get(k) for k in Contract._keys}, "accept": [_accept(a) for a in d.get("accept") or []],
                       "output_rules": list(d.get("output_rules") or [])})


def _accept(d: Mapping) -> AcceptCommand:
    if "min_passed" in d:
        return CountedAccept(d["id"], list(d["argv"]), d.get("timeout"), d["min_passed"], d.get("junit"))
    return AcceptCommand(d["id"], list(d["argv"]), d.get("timeout"))
