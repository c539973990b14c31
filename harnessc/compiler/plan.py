"""The plan: nodes with effective settings, static routing, estimates, waves, critical path, fingerprints."""

from __future__ import annotations

import hashlib
import operator
from array import array
from collections.abc import Sequence
from functools import lru_cache

from .. import __version__, providers
from .. import protectrules as protectmod
from ..argv import split_command
from ..estimates import cost_usd, tokens_for_chars
from ..planfile import (
    AcceptCommand,
    Analysis,
    Approaches,
    Assists,
    ContextStaging,
    CountedAccept,
    Estimate,
    Executor,
    Limits,
    NodeLoop,
    Plan,
    PlanNode,
    Protected,
    Retry,
    Routing,
)
from ..vocab import LADDER_ENDS, priority_rank
from .analysis import analyse, contract_size
from .ir import BUILTIN_AGENT, LS_KEYS, AgentConfig, Contract, HarnessConfig, Task
from .ir import Executor as ExecutorConfig
from .planjson import canonical, compact
from .project import PLAN_VERSION, Project
from .staging import add_retrieved, auto_budget, choose_budget, stage
from .tasks import approaches_of

SCHEMA_VERSION = 1
OUTPUT_TOKENS_STRUCTURED = 600
OUTPUT_TOKENS_FREE = 1500


def task_view(task: Task) -> dict:
    """A task as `harnessc ls --output json` shows it: canonical keys, JSON values."""
    d = {}
    for key in LS_KEYS:
        v = getattr(task, key)
        if key == "agent":
            v = list(v) if v else None
        elif key == "max_iterations" and v == "unlimited":
            v = None
        elif key in ("complexity", "priority", "git", "isolation", "select") and v is not None:
            v = getattr(v, "value", v)
        d[key] = v
    return d


def _approaches(task: Task, default: int) -> Approaches | None:
    """plan.json's `approaches` of a task (None: one approach and no score). `select` is
    best when a score is given, else first."""
    n = approaches_of(task, default)
    if n <= 1 and task.score is None:
        return None
    score = None
    if task.score is not None:
        try:
            score = AcceptCommand("score", split_command(task.score), None)
        except ValueError:
            return None  # reported by check_accept_commands
    select = getattr(task.select, "value", task.select) or ("best" if score else "first")
    return Approaches(n, select, score, task.min_score, [a for a in task.agent if a != "auto"])


def _isolation(task: Task, defaults, approaches: Approaches | None) -> str | None:
    """The task's isolation: several approaches need worktrees (explicit `none` is HC416)."""
    mode = _git_mode(task.isolation or defaults.isolation)
    if approaches is not None and task.isolation is None:  # several, or one with a score
        return "worktree"
    return mode


def _executor(setting) -> Executor | None:
    """plan.json's `executor`: None for local; `ray` alone is {kind: ray} with the defaults."""
    config = ExecutorConfig(kind="ray") if setting == "ray" else setting
    if not isinstance(config, ExecutorConfig) or config.kind != "ray":
        return None
    settings = config.model_dump(mode="json")
    settings["num_cpus_per_attempt"] = _whole(settings["num_cpus_per_attempt"])
    settings["resources"] = {name: _whole(x) for name, x in settings["resources"].items()}
    return Executor(**settings)


def _whole(x: float) -> int | float:
    """1.0 as 1: amounts read as written (roadmap.md's are ints when whole)."""
    return int(x) if float(x).is_integer() else x


def _git_mode(mode) -> str | None:
    """`commit`, `off`, or None when neither the task nor harness.yaml said (`run --autonomous`
    commits those; every other run leaves them alone)."""
    return getattr(mode, "value", mode)


def _model_agent(project: Project, model: str) -> tuple[str, AgentConfig]:
    """`model:` is shorthand for an agent with that model on the default provider."""
    for name, agent in project.config.agents.items():
        if agent.model == model:
            return name, agent
    default = project.config.agents.get(project.config.routing.default)
    if default is not None and default.provider in ("anthropic", "openai"):
        provider = default.provider
    else:
        provider = "anthropic" if model.startswith("claude") else "openai"
    return f"{provider}:{model}", AgentConfig(provider=provider, model=model)


def route(project: Project, task: Task, extra_agents: dict, by_complexity: dict[str, str],
          analysis: Analysis) -> Routing:
    """Static routing: task agent/model, else by complexity, else default, else rehearsal.

    `by_complexity` is routing.by_complexity with plain-word keys."""
    cfg = project.config
    routing = cfg.routing
    named = [a for a in task.agent if a != "auto"]
    complexity = getattr(task.complexity, "value", task.complexity)
    auto = False
    if named:
        agent, reason = named[0], "task agent"
        chain = named[1:]
    elif task.model:
        agent, config = _model_agent(project, task.model)
        extra_agents.setdefault(agent, config)
        reason, chain = f"task model {task.model}", []
    else:
        inferred = analysis.complexity
        if inferred in by_complexity:
            agent = by_complexity[inferred]
            reason = f"routing.by_complexity[{inferred}]" + ("" if complexity else " (complexity inferred)")
        elif routing.default != "auto" and routing.default in cfg.agents:
            agent, reason = routing.default, "routing.default"
        elif routing.escalation:
            agent, reason = routing.escalation[0], "auto: first agent of routing.escalation"
            auto = True
        else:
            user_agents = [a for a in cfg.agents if a != BUILTIN_AGENT]
            agent = user_agents[0] if user_agents else BUILTIN_AGENT
            reason = "auto: the only agent" if len(cfg.agents) == 1 else "auto: first agent in harness.yaml"
            auto = len(cfg.agents) > 1
        chain = []
    # the fallback chain: named alternatives, then stronger agents from routing.escalation
    if agent in routing.escalation:
        chain += routing.escalation[routing.escalation.index(agent) + 1:]
    chain = [a for a in dict.fromkeys(chain) if a != agent][: routing.max_fallbacks]
    return Routing(agent, chain, reason, auto)


def _staged_context(project: Project, task: Task, routing: Routing, windows: "_Windows",
                    shared: "_Interned", retrieval: "_Retrieval", accept: list,
                    entry: dict | None) -> tuple[list[str], ContextStaging | None]:
    """The task's context files that fit its budget, and the staging record (compiler/staging.py);
    then, with `context: auto`, the related files retrieval finds (compiler/retrieval.py)."""
    files = project.context_files.get(task.id)
    auto = task.id in project.context_auto
    if not files and not auto:
        return [], None
    defaults = project.config.defaults
    budget, source = choose_budget(
        task.context_tokens,
        defaults.context_tokens if "context_tokens" in defaults.model_fields_set else None,
        defaults.context_tokens,
        ((agent, windows[agent]) for agent in (routing.agent, *routing.chain)))
    kept, record = stage(files or [], project.context_priority.get(task.id, {}), budget, str(project.root),
                         shared(source))
    if not auto:
        return kept, record
    from .retrieval import choose

    asked = project.context_auto[task.id]
    query = "\n".join(filter(None, (
        task.title, task.goal, task.success, *(" ".join(a.argv) for a in accept),
        *((entry.get("output") or {}) if entry else ()))))
    index = retrieval.index()
    chosen, words = choose(index, query, auto_budget(record, asked), set(files or ()))
    return add_retrieved(kept, record, asked, chosen, len(index.entries), words)


class _Retrieval:
    """The project's retrieval index, made on the first task with `context: auto`: once a build."""

    def __init__(self, root):
        self.root, self._index = root, None

    def index(self):
        if self._index is None:
            from .retrieval import Index

            self._index = Index(self.root)
        return self._index


def _agent_entry(agent: AgentConfig, sandbox: bool = False) -> dict:
    """An agent as plan.json holds it: the keys set, and `api_key_env: null` (no key) kept,
    which left out would read as the provider's default variable. `sandbox`: harness.yaml's
    `defaults.sandbox`, written into the entry of each command or CLI agent that leaves it
    unset (the runtime reads an agent's settings only)."""
    entry = agent.model_dump(mode="json", exclude_none=True)
    if agent.api_key_env is None:
        entry = {k: entry.get(k) for k in type(agent).model_fields if k in entry or k == "api_key_env"}
    if sandbox and agent.sandbox is None and providers.runs_programs(agent.provider):
        entry["sandbox"] = True
    return entry


def agent_entries(config: HarnessConfig) -> dict[str, dict]:
    """Every agent harness.yaml defines, as plan.json would hold it (`harnessc draft` calls
    one without a plan)."""
    return {name: _agent_entry(agent, config.defaults.sandbox) for name, agent in config.agents.items()}


class _Windows(dict):
    """Agent name -> its context window in tokens or None (providers.context_window),
    looked up on first use in harness.yaml's agents, then in the tasks' implicit ones."""

    def __init__(self, *agents: dict[str, AgentConfig]):
        super().__init__()
        self.agents = agents

    def __missing__(self, name: str) -> int | None:
        config = next((agents[name] for agents in self.agents if name in agents), None)
        unit = providers.get(config.provider) if config is not None else None
        self[name] = window = providers.context_window(unit, config.model_dump(exclude_none=True)) if unit else None
        return window


def _node_loop(task: Task, human: bool) -> NodeLoop | None:
    """The task's own loop settings (None when it has none). A `recovery:` list without an
    end gets harness.yaml's: human, or fail with `loop.recovery.human: false`."""
    if task.progress_threshold is None and not task.recovery:
        return None
    rungs = None
    if task.recovery:
        rungs = list(task.recovery)
        if rungs[-1] not in LADDER_ENDS:
            rungs.append("human" if human else "fail")
    return NodeLoop(progress_threshold=task.progress_threshold, recovery=rungs)


def _estimate(agent: AgentConfig | None, tokens_in: int, structured: bool) -> "Estimate":
    tokens_out = OUTPUT_TOKENS_STRUCTURED if structured else OUTPUT_TOKENS_FREE
    cost = None
    if agent is not None and agent.price is not None:
        cost = round(cost_usd(tokens_in, tokens_out, agent.price.input, agent.price.output), 6)
    elif agent is not None and agent.provider == "simulate":
        cost = 0.0
    return Estimate(tokens_in, tokens_out, cost)


# No quotes, backslashes or whitespace other than shlex's own: shlex.split is str.split.
def _accept_entries(task: Task, contract: Contract | None, contract_entry: dict | None) -> list:
    """The task's accept commands, then its contract's; `min_passed` of the task wins over
    the contract's, an accept entry's own over both."""
    min_passed = task.min_passed if task.min_passed is not None else (contract.min_passed if contract else None)
    out = []
    for i, cmd in enumerate(task.accept, 1):
        try:
            argv = split_command(cmd)
        except ValueError:
            continue  # reported by check_accept_commands
        out.append(CountedAccept(_accept_id(i), argv, None, min_passed, None) if min_passed
                   else AcceptCommand(_accept_id(i), argv, None))
    if contract_entry and task.min_passed is not None and contract is not None:
        from .contract_schema import accept_entries

        out += accept_entries(contract, task.min_passed)
    elif contract_entry:
        out += contract_entry.get("accept", [])
    return out or _NONE


_NONE: tuple = ()  # an empty list in plan.json; one object for every task without any


@lru_cache(maxsize=64)
def _accept_id(i: int) -> str:
    return f"task-accept-{i}"  # one string per number, however many tasks use it


def _retry_policy(task: Task, contract: Contract | None) -> dict:
    """retry_on, dont_retry and start_level: the task's own, else its contract's."""
    def pick(key: str, empty):
        own = getattr(task, key)
        if own != empty:
            return list(own) if isinstance(own, tuple) else own
        value = getattr(contract, key, None) if contract is not None else None
        return [k.lower() for k in value] if isinstance(value, list) else value

    level = pick("start_level", None)
    return {"retry_on": pick("retry_on", ()), "dont_retry": pick("dont_retry", ()),
            "start_level": level if level is not None else 1}


def _defaults_entry(defaults) -> dict:
    """plan.json's `defaults`; `budget` only when set, so a plan without it is as before."""
    entry = defaults.model_dump(mode="json")
    if entry.get("budget") is None:
        entry.pop("budget", None)
    return entry


def _protected(task: Task, accept: list, approaches: Approaches | None, common: list[protectmod.Entry],
               kind) -> list[Protected]:
    """The task's own protected entries (protectrules.py): plan.json's `protect` holds the common ones."""
    score = approaches.score.argv if approaches is not None and approaches.score is not None else None
    entries = protectmod.task_entries(task.protect, [a["argv"] for a in accept], score, None, common, kind)
    return [Protected(e.path, e.why, e.new) for e in entries] or _NONE


def _review(task, contract) -> bool | None:
    """`review:` of the task, else of its contract; None (not said) when neither says true."""
    said = task.review if task.review is not None else getattr(contract, "review", None)
    return True if said else None


def build_plan(project: Project) -> None:
    """Assemble plan.json's content (prompts and fingerprints come in later passes)."""
    from .contract_schema import contract_plan_entry

    cfg = project.config
    defaults = cfg.defaults
    used_contracts = sorted({t.contract for t in project.tasks if t.contract and t.contract in project.contracts})
    entries = {}
    for name in used_contracts:
        entries[name] = contract_plan_entry(
            name, project.contracts[name], default_max_retries=defaults.max_retries,
            default_on_failure=getattr(defaults.on_failure, "value", defaults.on_failure))
    sizes = {name: contract_size(entry) for name, entry in entries.items()}  # shared by many tasks
    extra_agents: dict[str, AgentConfig] = {}
    by_complexity = {getattr(k, "value", k): v for k, v in cfg.routing.by_complexity.items()}
    delays = list(defaults.retry_delays)
    shared = _Interned()
    windows = _Windows(cfg.agents, extra_agents)
    retrieval = _Retrieval(project.root)
    common = protectmod.plan_entries(cfg.templates, defaults.protect)
    kind = protectmod.kind_in(project.root)  # what the tasks' commands name, looked up once each
    nodes = []
    for order, task in enumerate(project.tasks):
        contract = project.contracts.get(task.contract) if task.contract else None
        entry = entries.get(task.contract) if task.contract else None
        max_iter = task.max_iterations
        if max_iter is None:
            max_iter = defaults.max_iterations
        elif max_iter == "unlimited":
            max_iter = None
        max_retries = task.max_retries if task.max_retries is not None else (
            entry["max_retries"] if entry else defaults.max_retries)
        on_failure = task.on_failure or (entry["on_failure"] if entry else defaults.on_failure)
        analysis = analyse(task.title, task.goal, task.success, getattr(task.complexity, "value", task.complexity),
                           sizes.get(task.contract, (0, 0)), len(task.accept) + len(entry.accept if entry else ()), len(task.depends_on))
        routing = shared(route(project, task, extra_agents, by_complexity, analysis))
        accept = _accept_entries(task, contract, entry)
        context, staged = _staged_context(project, task, routing, windows, shared, retrieval, accept, entry)
        approaches = _approaches(task, defaults.approaches)
        allow_edit = [*defaults.allow_edit, *task.allow_edit]
        write_scope = list(task.write_scope) if task.write_scope else (
            list(defaults.write_scope) if defaults.write_scope is not None else None)
        max_time = task.max_time
        if max_time is None and contract and contract.constraints and contract.constraints.timeout:
            max_time = contract.constraints.timeout * (max_retries + 1)
        node = PlanNode(
            id=task.id,
            title=task.title,
            phase=task.phase,
            done=task.done,
            order=order,
            priority=getattr(task.priority, "value", task.priority) or "normal",
            complexity=analysis.complexity,
            tags=task.tags,  # the task's own lists: nothing changes them once parsed
            depends_on=task.depends_on,
            contract=task.contract,
            goal=task.goal,
            success=task.success,
            completion_promise=task.completion_promise,
            accept=accept,
            context=context or _NONE,
            context_staging=staged,
            # the same settings for most tasks: one dict each, shared (plans are read-only)
            limits=shared(Limits(
                max_iterations=max_iter,
                max_time=max_time if max_time is not None else defaults.max_time,
                stuck_after=task.stuck_after or defaults.stuck_after,
                budget_usd=task.budget if task.budget is not None else defaults.budget,
            )),
            retry=shared(Retry(max_retries=max_retries, on_failure=getattr(on_failure, "value", on_failure),
                               delays=delays, **_retry_policy(task, contract))),
            routing=routing,
            analysis=analysis,
            git=_git_mode(task.git or defaults.git),
            isolation=_isolation(task, defaults, approaches),
            approaches=approaches,
            resources=task.resources,
            protect=shared(_protected(task, accept, approaches, common, kind)),
            allow_edit=shared(allow_edit) or _NONE,
            write_scope=write_scope,
            review=_review(task, contract),
            split=True if task.split else None,
            loop=shared(_node_loop(task, cfg.loop.recovery.human)),
        )
        nodes.append(node)
    agents = {**cfg.agents, **extra_agents}
    assists = Assists(cfg.loop.recovery.mutation_agent, cfg.loop.context.summary_agent,
                      cfg.loop.context.summarize_every)
    used_agents = sorted({n["routing"]["agent"] for n in nodes} | {a for n in nodes for a in n["routing"]["chain"]}
                         | {a for a in (assists.mutation_agent, assists.summary_agent, _memory_agent(cfg.memory))
                            if a in agents})
    order = _topo_order(nodes)
    waves = _waves(nodes, order)
    by_id = {n["id"]: n for n in nodes}
    for i, wave in enumerate(waves):
        for tid in wave:
            by_id[tid]["wave"] = i
    project.plan = Plan(
        version=PLAN_VERSION,
        harnessc=__version__,
        metadata={
            "schema_version": SCHEMA_VERSION,
            "sources": dict(sorted(project.hashes.items())),
            "root_name": project.root.name,
        },
        project={"title": project.roadmap.title if project.roadmap else None,
                 "overview": project.roadmap.overview if project.roadmap else ""},
        templates=cfg.templates,
        # every agent harness.yaml defines (run --agent and the router may choose any), plus
        # the implicit PROVIDER:MODEL agents the tasks use
        agents={n: _agent_entry(agents[n], cfg.defaults.sandbox) for n in sorted(agents)
                if n in used_agents or (n in cfg.agents and n != BUILTIN_AGENT)},
        budget=cfg.budget.model_dump(mode="json"),
        defaults=_defaults_entry(cfg.defaults),
        concurrency=cfg.concurrency,
        loop=cfg.loop.model_dump(mode="json"),
        assists=assists,
        git_hooks=cfg.git_hooks,
        worktrees=cfg.worktrees.model_dump(mode="json", by_alias=True),
        telemetry=cfg.telemetry.model_dump(mode="json"),
        notify=cfg.notify.model_dump(mode="json") if cfg.notify else None,
        memory=_memory(cfg.memory) if "memory" in cfg.model_fields_set else None,
        executor=_executor(cfg.executor),
        growth=cfg.plan.model_dump(mode="json"),
        protect=[Protected(e.path, e.why, e.new) for e in common],
        contracts=entries,
        nodes=nodes,
        edges=Edges(nodes),
        waves=waves,
        critical_path=_critical_path(order),
    )


def _memory_agent(memory) -> str | None:
    """memory.agent (the summary agent), None when memory is off or names none."""
    return getattr(memory, "agent", None)  # "off", or unset


def _memory(memory) -> dict:
    """harness.yaml `memory:` as plan.json keeps it (`off`: {on: false}; unset: None, the defaults)."""
    if memory == "off" or memory is False:
        return {"on": False}
    return {"on": True, **memory.model_dump(mode="json")}


class Edges(Sequence):
    """plan.json's edges, [dependency, task] pairs, listed from the nodes when read (a
    100k-task plan need not hold 200k pairs besides the nodes that say the same)."""

    def __init__(self, nodes: list):
        self.nodes = nodes

    def __iter__(self):
        for n in self.nodes:
            for d in n["depends_on"]:
                yield [d, n["id"]]

    def __len__(self) -> int:
        return sum(len(n["depends_on"]) for n in self.nodes)

    def __getitem__(self, index):
        return list(self)[index]

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, (list, Edges)) else NotImplemented


class _Interned(dict):
    """Values plan.json writes alike as one object: call it with a value, get the first such one."""

    def __call__(self, value):
        if value is None:  # most tasks' loop settings: nothing to encode
            return None
        return self.setdefault(compact(value), value)


def _waves(nodes: list[dict], order: list[dict]) -> list[list[str]]:
    """Level of each task = 1 + the deepest dependency; tasks on one level can run together.

    `order` is _topo_order(nodes).
    """
    level: dict[str, int] = {}
    for n in order:
        level[n["id"]] = 1 + max((level[d] for d in n["depends_on"] if d in level), default=-1)
    waves: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for n in nodes:
        waves[level[n["id"]]].append(n["id"])
    return waves


def _topo_order(nodes: list[dict]) -> list[dict]:
    """The nodes in dependency order: roadmap order when every task comes after its
    dependencies (the usual case, checked in one pass), else Kahn's algorithm."""
    seen: set[str] = set()
    for n in nodes:
        if not seen.issuperset(n["depends_on"]):
            return _kahn_order(nodes)
        seen.add(n["id"])
    return nodes


def _kahn_order(nodes: list[dict]) -> list[dict]:
    by_id = {n["id"]: n for n in nodes}
    indegree = {n["id"]: sum(1 for d in n["depends_on"] if d in by_id) for n in nodes}
    children: dict[str, list[str]] = {n["id"]: [] for n in nodes}
    for n in nodes:
        for d in n["depends_on"]:
            if d in by_id:
                children[d].append(n["id"])
    ready = [n["id"] for n in nodes if indegree[n["id"]] == 0]
    out = []
    while ready:
        tid = ready.pop()
        out.append(by_id[tid])
        for c in children[tid]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    return out


def _critical_path(order: list[dict]) -> list[str]:
    """The longest chain of tasks still to run (done tasks weigh nothing); `order` is topological."""
    length: dict[str, int] = {}
    previous: dict[str, str | None] = {}
    for n in order:
        deps = [d for d in n["depends_on"] if d in length]
        before = max(deps, key=lambda d: length[d], default=None)
        length[n["id"]] = (length[before] if before else 0) + (0 if n["done"] else 1)
        previous[n["id"]] = before
    if not length:
        return []
    tid: str | None = max(length, key=lambda t: length[t])
    path = []
    while tid is not None:
        path.append(tid)
        tid = previous[tid]
    return path[::-1]


def sort_key(node: dict) -> tuple:
    """Scheduling order: priority, then roadmap order."""
    return (priority_rank(node.get("priority")), node["order"])


def finish_plan(project: Project) -> None:
    """Prompts are rendered: add their hashes, estimates and each task's fingerprint."""
    from .prompts import template_files_hash

    plan = project.plan
    if plan is None or project.diags.has_errors():
        return  # a prompt failed to render: there is no plan to finish
    project.template_hash = template_files_hash(plan, project.root)
    agents = {**project.config.agents}
    task_by_id = {t.id: t for t in project.tasks}
    contract_sha: dict[str | None, str] = {}  # contract name -> sha256 of its entry
    estimates: dict[tuple, Estimate] = {}  # equal estimates are one object (plans are read-only)
    for node, chars in zip(plan["nodes"], project.prompt_chars, strict=True):
        contract = plan["contracts"].get(node["contract"]) if node["contract"] else None
        agent = node["routing"]["agent"]
        chars += len(project.system_prompt)
        key = (agent, tokens_for_chars(chars), bool(contract and contract.get("output")))
        estimate = estimates.get(key)
        if estimate is None:
            agent_cfg = agents.get(agent)
            if agent_cfg is None and agent in plan["agents"]:
                agent_cfg = AgentConfig.model_validate(plan["agents"][agent])
            estimate = estimates[key] = _estimate(agent_cfg, key[1], key[2])
        node["estimate"] = estimate
        task = task_by_id[node["id"]]
        _check_affordable(project, task, node, estimate)
        spec = _fingerprinted_fields(task)
        if node["contract"] not in contract_sha:
            contract_sha[node["contract"]] = hashlib.sha256(canonical(contract)).hexdigest()
        checks = node["accept"]
        if node["approaches"] is not None and node["approaches"].score is not None:  # what a result must pass
            checks = [*checks, {"score": node["approaches"].score, "min_score": node["approaches"].min_score}]
        node["fingerprint"] = _fingerprint(spec, contract_sha[node["contract"]], node["prompt"].sha256, checks,
                                           project.template_hash)
    project.prompt_chars = array("q")  # now in the estimates
    costs = [n["estimate"]["cost_usd"] for n in plan["nodes"] if not n["done"]]
    plan["estimate"] = {
        "cost_usd": round(sum(c for c in costs if c is not None), 6) if costs and all(c is not None for c in costs) else None,
        "input_tokens": sum(n["estimate"]["input_tokens"] for n in plan["nodes"] if not n["done"]),
        "output_tokens": sum(n["estimate"]["output_tokens"] for n in plan["nodes"] if not n["done"]),
    }


def _check_affordable(project: Project, task: Task, node: dict, estimate: Estimate) -> None:
    """HC450: a task budget smaller than one call's estimate fails the task at its first call.
    Build's pass, not lint's: the estimate needs the task's routed agent and its rendered prompt."""
    budget = node["limits"]["budget_usd"]
    cost = estimate["cost_usd"]
    if budget is None or cost is None or node["done"] or cost <= budget:
        return
    own = task.budget is not None
    span = task.spans.get("budget", task.span) if own else task.span
    where = "its budget" if own else "defaults.budget in harness.yaml"
    project.diags.warning(
        "HC450", f"task '{task.id}' cannot afford one call: ~${cost:.4f} estimated for agent "
        f"'{node['routing']['agent']}', {where} is ${float(budget):.4f}", span,
        hint=(f"raise its budget: to at least ${cost:.4f}" if own else
              f"give the task its own budget: of at least ${cost:.4f} (it wins over defaults.budget) or raise "
              "defaults.budget") + ", or route it to a cheaper agent; `harnessc run --dry-run` lists such tasks")


# What a fingerprint covers of the task as written: what `ls` shows but `done` (checking a
# task off does not make its result stale).
# `git` neither: committing a result does not change it; nor `context_tokens`, whose effect is
# in the prompt's hash; nor the loop's own settings (`progress_threshold`, `recovery`): they
# say how a stuck task is helped along, not what its result must be - and a changed
# fingerprint would also wipe the memory and recovery position of a task being tuned mid-run.
# Nor how many approaches run and which lands (`approaches`, `select`); a score and its
# minimum are what a result must pass, so they are hashed with the accept commands. Nor where
# its attempts run (`resources`), nor what its agent may not change (`protect`, `allow_edit`,
# `write_scope`): they bound how an attempt works, and a result that passed stays good. Nor
# `split`: a split task's result is its subtasks', each fingerprinted itself.
# `min_passed` is hashed with the accept commands it holds. Nor how failures are retried
# (`retry_on`, `dont_retry`, `start_level`): not what a result must be.
_UNFINGERPRINTED = ("done", "git", "isolation", "context_tokens", "progress_threshold", "recovery",
                    "approaches", "select", "score", "min_score", "resources", "min_passed",
                    "retry_on", "dont_retry", "start_level", "protect", "allow_edit", "write_scope", "review",
                    "split")
_fingerprinted_fields = operator.attrgetter(*(key for key in LS_KEYS if key not in _UNFINGERPRINTED))


def _fingerprint(spec: dict, contract_sha: str, prompt_sha: str, accept: list, template_hash: str) -> str:
    """sha256 of the task as written, its contract, its first prompt, its accept commands,
    the templates and the harnessc version: when it changes, the task's result is stale."""
    return hashlib.sha256(canonical({
        "accept": accept, "contract": contract_sha, "harnessc": __version__, "prompt": prompt_sha,
        "task": spec, "templates": template_hash,
    })).hexdigest()
