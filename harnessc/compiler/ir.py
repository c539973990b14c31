"""The IR: pydantic models for tasks, contracts and harness config.

The YAML-facing models (ContractsFile, HarnessConfig and what they contain) forbid unknown
keys and carry a description on every field: schemas/*.schema.json are generated from them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, field_validator

from ..vocab import (  # noqa: F401  (re-exported)
    BUILTIN_AGENT,
    DELIVERABLE_TYPES,
    DURATION_PATTERN,
    ENV_NAME_PATTERN,
    LS_KEYS,
    MAX_APPROACHES,
    NOTIFY_KINDS,
    PRIORITY_RANK,
    Complexity,
    DeliverableType,
    FailureStrategy,
    GitMode,
    IsolationMode,
    Priority,
    parse_duration,
)
from .tasks import Roadmap, Task  # noqa: F401  (re-exported: the IR in one place)

# ------------------------------------------------------------------ scalar types

Duration = Annotated[
    Union[int, float],
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "description": "A duration: a number with a unit (ms, s, m, h, d), e.g. 45s, 30m, 4h, 1h30m; or seconds as a number.",
            "anyOf": [
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "number", "minimum": 0},
            ],
        }
    ),
]


class _Spec(BaseModel):
    """Base for models read from YAML: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_enum_values=True)


# `min_passed:` (task, contract, accept entry): passing tests a check's runner must report
MinPassed = Annotated[
    Union[int, str],
    WithJsonSchema(
        {
            "description": "Passing tests the check's test runner must report: a whole number, or base "
                           "(no fewer than pass at the task's base commit).",
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "enum": ["base"]}],
        }
    ),
]


# ------------------------------------------------------------------ contracts.yaml


class Deliverable(_Spec):
    """One field of a contract's output."""

    type: DeliverableType = Field(
        DeliverableType.any, description="The value's type: str, int, float, bool, list, dict or any."
    )
    description: str = Field("", description="What the field holds; shown to the agent.")
    required: bool = Field(True, description="Whether the field must be present (default true).")
    rules: list[str] = Field(
        default_factory=list,
        description="Rule expressions over `value` that must all hold, e.g. 'value >= 0', 'len(value) > 0'.",
    )
    example: Any = Field(None, description="An example value; must satisfy the type and rules.")
    default: Any = Field(None, description="Used when the field is missing (and by fallbacks).")
    enum: list[Any] | None = Field(None, description="The only values allowed.")
    items: Union[DeliverableType, "Deliverable", None] = Field(
        None, description="For lists: the item type, or a nested deliverable."
    )
    fields: dict[str, "Deliverable"] | None = Field(
        None, description="For dicts: the nested deliverables, by key."
    )
    schema_: dict[str, Any] | None = Field(
        None,
        alias="schema",
        description="Raw JSON Schema for this value: an escape hatch, merged into the generated schema.",
    )


class AcceptCommand(_Spec):
    """A command that must exit 0 for a claim to be accepted."""

    id: str | None = Field(None, description="A name for the check, shown in reports.")
    run: str | list[str] = Field(
        ..., description="The command: a string (split like a shell, but no shell runs) or an argv list."
    )
    timeout: Duration | None = Field(None, description="Kill the command after this long.")
    min_passed: MinPassed | None = Field(
        None, description="Fail the check when its test runner reports fewer passing tests: N, or base "
                          "(no fewer than at the task's base commit). 0: no count needed.")
    junit: str | None = Field(
        None, description="A JUnit XML file the command writes (relative to the project), read for the "
                          "passing count instead of the command's output.")


class Constraints(_Spec):
    """Resource limits for one task under this contract."""

    max_input_tokens: int | None = Field(None, ge=1, description="Input tokens per attempt.")
    max_output_tokens: int | None = Field(None, ge=1, description="Output tokens per attempt.")
    max_total_tokens: int | None = Field(None, ge=1, description="Tokens across all attempts.")
    max_tool_calls: int | None = Field(None, ge=0, description="Tool calls allowed.")
    timeout: Duration | None = Field(None, description="Time allowed per attempt.")
    warn_threshold: float = Field(
        0.8, ge=0, le=1, description="Fraction of a limit at which a warning is emitted."
    )


class Contract(_Spec):
    """What a task's output must be and how it is verified."""

    description: str = Field("", description="What the contract is for.")
    version: str = Field("1.0.0", description="The contract's version.")
    extends: str | None = Field(
        None, description="Another contract whose output, accept and settings this one reuses."
    )
    output: dict[str, Deliverable] | None = Field(
        None, description="The JSON object the agent must return: field name -> deliverable."
    )
    output_rules: list[str] = Field(
        default_factory=list,
        description="Rules over the whole output, as `output` (e.g. 'output.end > output.start').",
    )
    accept: list[Union[str, AcceptCommand]] = Field(
        default_factory=list, description="Commands that must exit 0 (tests, linters)."
    )
    constraints: Constraints | None = Field(None, description="Resource limits.")
    min_passed: MinPassed | None = Field(
        None, description="For each accept command without its own: passing tests its runner must report "
                          "(N, or base: no fewer than at the task's base commit).")
    on_failure: FailureStrategy | None = Field(
        None, description="After max_retries failed attempts: retry (then fail), fallback, partial, template, escalate or fail."
    )
    review: bool | None = Field(
        None, description="true: a task's verified result waits in state review until `harnessc approve` "
                          "(isolated tasks land only then); a task's own `review:` wins.")
    max_retries: int | None = Field(
        None, ge=0, description="Retries after the first attempt (2 means up to 3 attempts)."
    )
    retry_on: list[str] | None = Field(
        None, description="Kinds of failure that are retried (contract, promise, truncated, accept, missing_file, "
        "permission, timeout, min_passed, tool_denied, crash); any other goes to on_failure at once. Unset: every kind. "
        "A task's own wins.")
    dont_retry: list[str] | None = Field(
        None, description="Kinds of failure never retried: the task goes to on_failure at once. A task's own wins.")
    start_level: int | None = Field(
        None, ge=1, le=3, description="The first retry's refinement level: 1 (the errors), 2 (+ the output "
        "format), 3 (+ the exact structure). Unset: 1. A task's own wins.")
    tags: list[str] = Field(default_factory=list, description="Free-form labels.")


class ContractsFile(_Spec):
    """contracts.yaml: named output contracts."""

    model_config = ConfigDict(title="harnessc contracts.yaml")
    contracts: dict[str, Contract] = Field(
        default_factory=dict, description="Contracts by name; tasks refer to them with `contract:`."
    )


# ------------------------------------------------------------------ harness.yaml


class Price(_Spec):
    """USD per million tokens."""

    input: float = Field(..., ge=0, description="USD per million input tokens.")
    output: float = Field(..., ge=0, description="USD per million output tokens.")
    cache_read: float | None = Field(
        None, ge=0, description="USD per million input tokens read from the prompt cache (default: 0.1x input)."
    )
    cache_write: float | None = Field(
        None, ge=0,
        description="USD per million input tokens written to the prompt cache (default: 1.25x input for anthropic, 1x for openai).",
    )
    cache_write_1h: float | None = Field(
        None, ge=0,
        description="USD per million input tokens written to the prompt cache for an hour (anthropic `cache_ttl: 1h`; "
        "default: 2x input).",
    )


class AgentLimits(_Spec):
    """Usage caps for one agent."""

    daily_calls: int | None = Field(None, ge=0, description="Calls per local day, across runs.")
    daily_tokens: int | None = Field(None, ge=0, description="Tokens (input + output) per local day, across runs.")
    daily_cost_usd: float | None = Field(None, ge=0, description="USD per local day, across runs.")
    concurrency: int | None = Field(None, ge=1, description="Calls in flight at once.")


Provider = Literal["anthropic", "openai", "command", "claude-code", "codex", "gemini-cli", "simulate", "replay"]


class AgentConfig(_Spec):
    """An agent: a provider plus how to reach and use it."""

    provider: Provider = Field(
        ...,
        description="anthropic, openai (any OpenAI-compatible server), command (any CLI, argv given), "
        "claude-code (claude -p), codex (codex exec), gemini-cli (gemini -p), simulate (offline) "
        "or replay (recorded).",
    )
    model: str | None = Field(None, description="Model id (for the CLI agents: passed to the CLI's model flag).")
    permissions: Literal["read-only", "edit", "full"] | None = Field(
        None,
        description="claude-code, codex, gemini-cli: what the CLI may do in the project "
        "(read-only by default; edit: change files; full: run anything without asking).",
    )
    tier: Literal["fast", "balanced", "powerful"] | None = Field(
        None, description="Rough strength, used by the router."
    )
    strengths: list[Literal["implementation", "research", "reasoning", "large_context"]] | None = Field(
        None, description="What the agent is good at; the router prefers an agent whose strengths match "
        "what a task needs (its wording: implementation, research, design -> reasoning; a large prompt).")
    price: Price | None = Field(None, description="USD per million tokens; enables cost estimates.")
    limits: AgentLimits | None = Field(None, description="Usage caps.")
    base_url: str | None = Field(None, description="API endpoint (any OpenAI-compatible server for openai).")
    api_key_env: str | None = Field(
        "", description="Environment variable holding the API key; null for none. Keys are never stored."
    )
    max_tokens: int | None = Field(None, ge=1, description="Output token cap per call.")
    context_window: int | None = Field(
        None, ge=1, description="The model's context window in tokens, when harnessc's table does not know it "
        "(a local server's model) or knows it wrong; a task's default context budget is half the smallest "
        "window among its agents.")
    stream: bool | None = Field(
        None, description="anthropic/openai: stream the answer (anthropic streams by default when max_tokens > 21333)."
    )
    structured: Literal["json_schema", "json_object", "none"] | None = Field(
        None, description="openai: how contract output is requested: json_schema (strict, default), json_object (JSON mode) or none (prompt only)."
    )
    api: Literal["chat", "responses"] | None = Field(
        None, description="openai: chat (Chat Completions, default) or responses (the Responses API)."
    )
    cache_ttl: Literal["5m", "1h"] | None = Field(
        None, description="anthropic: how long the shared part of the prompts stays cached: 5m (default) or 1h "
        "(for runs whose tasks reuse it more than 5 minutes apart; its writes cost price.cache_write_1h)."
    )
    temperature: float | None = Field(None, ge=0, le=2, description="Sampling temperature.")
    command: list[str] | None = Field(
        None, description="For provider command: argv; {prompt} and {prompt_file} are replaced, else the prompt goes to stdin. "
        "For claude-code, codex, gemini-cli: the executable (and leading arguments) to run instead of "
        "claude / codex / gemini."
    )
    timeout: Duration | None = Field(None, description="Per-call time limit.")
    sandbox: bool | None = Field(
        None, description="command, claude-code, codex, gemini-cli (Linux): run the agent under bubblewrap, "
        "its checkout and a private TMPDIR writable, the rest of the file system read-only, the git "
        "directory writable only for its objects and the attempt's own worktree records; a run where "
        "bubblewrap cannot start refuses the agent. Unset: `defaults.sandbox`."
    )
    env: dict[str, str] | None = Field(
        None, description="command: environment values set for the agent, on top of what it receives."
    )
    pass_env: list[Annotated[str, Field(pattern=ENV_NAME_PATTERN)]] | None = Field(
        None,
        description="command: variables passed through from harnessc's environment, by name "
        "(e.g. ANTHROPIC_API_KEY). Otherwise an agent gets only PATH, HOME, USER, LOGNAME, SHELL, "
        "LANG, LANGUAGE, LC_*, TZ, TERM and TMPDIR.",
    )
    # simulate
    latency: Duration | None = Field(None, description="simulate: delay per call, e.g. 20ms.")
    invalid_first: int | None = Field(None, ge=0, description="simulate: answer invalidly this many times first.")
    fail_rate: float | None = Field(None, ge=0, le=1, description="simulate: fraction of calls that fail transiently.")
    progress: Literal["steady", "none"] | None = Field(None, description="simulate: show progress or not.")
    complete_after: int | None = Field(None, ge=0, description="simulate: iterations before claiming completion.")
    seed: int | None = Field(None, description="simulate: random seed.")
    skill: dict[Complexity, Annotated[float, Field(ge=0, le=1)]] | None = Field(
        None, description="simulate: by task complexity, the probability that an attempt answers "
        "validly (otherwise invalidly), e.g. {trivial: 0.99, epic: 0.2}; drawn from seed, task "
        "and iteration. Unlisted complexities always answer validly.")
    # replay
    cassette: str | None = Field(
        None, description="replay: the directory in the project holding the cassettes to serve "
        "(default .harness/cassettes, where `harnessc run --record` writes them)."
    )


class Routing(_Spec):
    """How a task gets its agent."""

    default: str = Field("auto", description="An agent name, or auto.")
    by_complexity: dict[Complexity, str] = Field(
        default_factory=dict, description="Agent per complexity (trivial..epic)."
    )
    escalation: list[str] = Field(
        default_factory=list, description="Agents in order of strength, for escalation."
    )
    max_fallbacks: int = Field(2, ge=0, description="How many other agents a task may fall back to.")


class Budget(_Spec):
    """Limits for a whole run."""

    max_cost_usd: float | None = Field(None, ge=0, description="USD for the whole run.")
    max_tokens: int | None = Field(None, ge=0, description="Tokens for the whole run.")


class Defaults(_Spec):
    """Task settings used where the roadmap and contract say nothing."""

    max_retries: int = Field(2, ge=0, description="Retries after the first attempt.")
    retry_delays: list[Duration] = Field(
        default_factory=lambda: [0, 1, 2], description="Delay before each retry; the last repeats."
    )
    max_iterations: int | None = Field(50, ge=1, description="Iterations per task; null for unlimited.")
    max_time: Duration = Field(3600, description="Wall time per task.")
    stuck_after: int = Field(3, ge=1, description="No-progress iterations before recovery.")
    on_failure: FailureStrategy = Field(FailureStrategy.retry, description="See contracts.")
    budget: float | None = Field(None, ge=0, description="USD each task may spend since it last started afresh "
                                 "(as a task's `budget:`, which wins); unset: no per-task ceiling.")
    context_tokens: int = Field(32_000, ge=1, description="Token budget for a task's context files: the "
                                "lowest priority go first when they do not fit. Unset: half the smallest "
                                "context window among the task's agents, or 32000 when none is known.")
    git: GitMode | None = Field(None, description="commit: commit each succeeded task's changes "
                                "(a git repository is needed); off: leave git alone. Unset: off, except "
                                "that `harnessc run --autonomous` commits.")
    isolation: IsolationMode = Field(IsolationMode.none, description="worktree: each attempt of a task works in "
                                     "its own git worktree and a verified change lands as one commit on the "
                                     "run's integration branch harnessc/run/<run-id>; none: in the project's tree.")
    sandbox: bool = Field(False, description="Run every command and CLI agent that does not say otherwise "
                          "under harnessc's sandbox (an agent's own `sandbox:` wins).")
    approaches: int = Field(1, ge=1, le=MAX_APPROACHES, description="Approaches of each task run at once, each "
                            "in its own git worktree (best-of-N; more than 1 implies isolation: worktree); a task's "
                            "`approaches:` wins.")
    protect: list[str] = Field(default_factory=list, description="Globs every task's agent may not change, besides "
                               "what is protected anyway (the spec files, .harness/, CI configuration and the files "
                               "a task's accept and score commands name); a task's `protect:` adds to them.")
    allow_edit: list[str] = Field(default_factory=list, description="Globs lifting that protection for every task "
                                  "(files an agent must edit, like tests it writes); a task's `allow_edit:` adds to them.")
    write_scope: list[str] | None = Field(None, description="Globs: an attempt that changes a file outside them is "
                                          "rejected; a task's `write_scope:` replaces them. Unset: anywhere.")

    @field_validator("protect", "allow_edit", "write_scope")
    @classmethod
    def _globs(cls, patterns: list[str] | None) -> list[str] | None:
        from ..protectrules import glob_problem

        for p in patterns or ():
            if (why := glob_problem(p)) is not None:
                raise ValueError(f"'{p}' {why}: write a glob relative to the project, like tests/** or src/*.py")
        return patterns


class Alerts(_Spec):
    """What writes a line to .harness/alerts.log besides the fixed alerts (stuck, fallback,
    escalation, budget at 50/80/100%, daily limits, breakers, runaway signs)."""

    milestone_every: int = Field(
        10, ge=0, description="An info alert each time a task reaches a multiple of this many iterations; 0: none."
    )
    pause_on_critical: bool = Field(
        False, description="Pause the run on a critical alert (budget used up, a runaway task); "
        "`harnessc resume` continues."
    )


class Runaway(_Spec):
    """Signs that a task is spending without working, each raised once per task as an alert."""

    max_iterations_warning: int = Field(
        100, ge=1, description="Warn when a task without max_iterations passes this many iterations."
    )
    min_iteration_duration: Duration = Field(
        1.0, description="Three iterations in a row without a result or progress, each faster than this: "
        "a critical alert (the agent may not be doing any work). 0 turns it off."
    )
    token_spike: float = Field(
        3.0, ge=1, description="Warn when an iteration uses more than this many times the task's median "
        "tokens (from its fourth iteration on)."
    )


class Recovery(_Spec):
    """What a stuck task tries, rung by rung, before it gives up (seed 003 §3). A task's
    `recovery:` in roadmap.md (its steps in order) replaces these three keys for that task."""

    prompt_mutations: int = Field(
        3, ge=0, le=5, description="Prompt rewrites tried first, in the order rephrase, decompose, constrain, "
        "examples, negative.")
    escalate: bool = Field(True, description="Then move to the next, stronger agent of the task's chain.")
    human: bool = Field(
        True, description="Last: the task becomes blocked for a human (`harnessc tell`, `harnessc retry`); "
        "false: it fails.")
    explore: bool = Field(
        False, description="After the prompt rewrites, before escalating: branch exploration - a few approaches "
        "of the stuck task run from where it is stuck, each in its own git worktree, and the task goes on from "
        "the one with the best progress score (the task needs isolation: worktree; elsewhere the rung is skipped).")
    explore_approaches: int = Field(3, ge=2, le=3, description="Approaches the explore rung runs (2 or 3).")
    mutation_agent: str | None = Field(
        None, description="An agent (by name; a cheap, fast one will do) that writes the prompt mutations: "
        "it rewrites the instructions heading the task's prompt, the task itself stays. Unset: deterministic "
        "template mutations, which are also the fallback when the agent fails, times out or the budget refuses.")


class ProgressWeights(_Spec):
    """How much each kind of evidence counts in an iteration's progress score (each signal is
    0..1; the score is their weighted mean). All 0: no score, and no 'no progress' signal."""

    output: float = Field(0.1, ge=0, description="The output's difference to the previous iteration's.")
    files: float = Field(
        0.4, ge=0, description="Files changed since the iteration began (git: files, lines, commits, "
        "untracked files; elsewhere: content hashes of the task's context files or the project's files)."
    )
    markers: float = Field(0.2, ge=0, description="A `<progress>...</progress>` marker not printed before.")
    checklist: float = Field(
        0.15, ge=0, description="A `- [ ]` item of the task's goal reported done (`- [x] item`) for the first time."
    )
    tests: float = Field(
        0.15, ge=0, description="Accept commands passing more than before: more exit 0, or a higher 'N passed' count."
    )


class LoopProgress(_Spec):
    """Progress from evidence, and when a loop task counts as stuck."""

    threshold: float = Field(
        0.15, ge=0, le=1, description="An iteration scoring below this made no progress; `stuck_after` "
        "such iterations in a row end the task as stuck. A task's `progress_threshold` in roadmap.md wins."
    )
    weights: ProgressWeights = Field(default_factory=ProgressWeights, description="Weight of each signal.")


class LoopContext(_Spec):
    """What a loop task remembers from one iteration to the next (rendered into its next prompt)."""

    raw_window_size: int = Field(3, ge=0, description="Recent iterations shown as they were (output truncated).")
    max_output_chars: int = Field(1500, ge=100, description="Characters of one iteration's output kept in the window.")
    max_summary_tokens: int = Field(
        1000, ge=50, description="The running summary of older iterations stays under this many tokens."
    )
    max_tokens: int = Field(
        3000, ge=100, description="Token budget of the whole memory section of a prompt (window, summary, "
        "decisions, failures); the oldest window entries go first."
    )
    summary_agent: str | None = Field(
        None, description="An agent (by name; a cheap, fast one will do) that rewrites the running summary "
        "every `summarize_every` iterations from the old summary and the iterations that left the window. "
        "Unset: the summary stays extractive (one line per iteration), also the fallback when the agent fails."
    )
    summarize_every: int = Field(
        10, ge=1, description="Iterations between two summaries written by `summary_agent`."
    )


class Termination(_Spec):
    """When a run ends by itself, besides its tasks ending (seed 003 §1): a run left alone
    overnight stops at these even if every task could go on. A stop ends the run as
    `harnessc stop` does: calls in flight finish, nothing new starts, and `harnessc run` goes on."""

    max_time: Duration | None = Field(
        None, description="The run's wall-clock limit (`run --max-time` wins; `--autonomous` sets 24h "
        "when this is unset). null: none.")
    max_iterations: int | None = Field(
        None, ge=1, description="Iterations of the whole run, every task's together (each task keeps its "
        "own max_iterations too). null: none.")


class Environment(_Spec):
    """What a run reads from outside while it goes (seed 003 §4)."""

    inbox: bool = Field(
        True, description="Instructions from .harness/inbox/ (`harnessc tell`) reach the agents' prompts. "
        "false: instruction files are refused (moved to processed/ with a reason) and `harnessc tell` says "
        "so; commands (pause, resume, skip, prioritize) still work.")
    env_overrides: bool = Field(
        True, description="HARNESSC_PAUSE, HARNESSC_MAX_COST and HARNESSC_AGENT are read between "
        "iterations. false: they are ignored (one event says so when one is set).")


class Loop(_Spec):
    """Loop tasks (with a completion_promise) and unattended runs: progress and stuck detection,
    the recovery ladder, memory across iterations, alerts, runaway signs and periodic summaries."""

    termination: Termination = Field(default_factory=Termination, description="When a run ends by itself.")
    progress: LoopProgress = Field(default_factory=LoopProgress, description="Progress scoring and stuck detection.")
    context: LoopContext = Field(default_factory=LoopContext, description="Memory across iterations.")
    alerts: Alerts = Field(default_factory=Alerts, description="Alerts in .harness/alerts.log.")
    recovery: Recovery = Field(default_factory=Recovery, description="The recovery ladder of a stuck task.")
    runaway: Runaway = Field(default_factory=Runaway, description="Runaway detection.")
    environment: Environment = Field(default_factory=Environment, description="The inbox and the "
                                     "environment overrides.")
    summary_every: Duration = Field(
        600, description="A one-line status summary (and a `summary` event) this often during a run; 0: none."
    )


class Worktrees(_Spec):
    """What an isolated task's worktree gets from your tree besides its committed files."""

    link: list[str] = Field(default_factory=list, description="Paths linked into each worktree "
                            "(symbolic links to your tree's), like .venv, node_modules.")
    copy_paths: list[str] = Field(default_factory=list, alias="copy", description="Paths copied into each worktree, read-only, "
                            "like .env.test.")

    @field_validator("link", "copy_paths")
    @classmethod
    def _inside(cls, paths: list[str]) -> list[str]:
        for p in paths:
            parts = p.replace("\\", "/").split("/")
            if not p or p.startswith("/") or ".." in parts or parts[0] in (".git", ".harness"):
                raise ValueError(f"'{p}' must be a path inside the project (relative, no '..', not .git or .harness)")
        return paths


class Telemetry(_Spec):
    """OpenTelemetry traces of each run (`pip install 'harnessc[otel]'`): a span per run, task,
    prompt rendering, routing, attempt, agent call (an LLM call: GenAI semantic conventions and
    OpenInference) and verification."""

    otlp_endpoint: str | None = Field(
        None, description="Base URL of an OTLP/HTTP collector (protobuf); /v1/traces is added, e.g. "
        "http://localhost:4318 or https://cloud.langfuse.com/api/public/otel. Unset: the environment's "
        "OTEL_EXPORTER_OTLP_ENDPOINT, else no traces. Credentials go in OTEL_EXPORTER_OTLP_HEADERS, never here.")
    content: bool = Field(
        False, description="Put each attempt's prompt and output text (secrets redacted) and error "
        "messages on its spans (gen_ai.input.messages, gen_ai.output.messages, input.value, output.value). "
        "false: counts, times and names only.")
    project: str | None = Field(
        None, min_length=1, max_length=200,
        description="The project the traces go to in Phoenix (resource attribute openinference.project.name; "
        "wins over OTEL_RESOURCE_ATTRIBUTES). Unset: the tool's default project. Langfuse's project is the one "
        "its key pair belongs to.")


class Memory(_Spec):
    """Run memory (`.harness/memory/`): decisions, failures and constraints agents report with
    <decision>, <failure> and <constraint> markers, shown to later tasks of any run."""

    summary_tokens: int = Field(1500, ge=0, description="The running summary (.harness/memory/summary.json, "
                                "written by `agent` or from the entries, newest first) is at most this many tokens.")
    inject_tokens: int = Field(2000, ge=0, description="Each task's memory section is at most this many tokens "
                               "(the summary, the decisions most related to the task, failures on its files, "
                               "active constraints).")
    every: int = Field(5, ge=1, description="The running summary is rewritten after this many tasks ended well, "
                       "and at each phase's end (after the task's landing, one rewrite at a time).")
    agent: str | None = Field(None, description="A cheap agent (one of `agents:`) that rewrites the running "
                              "summary; its calls count against the budget. Unset, or when its answer is not "
                              "usable: the summary is built from the entries, newest first.")


class Notify(_Spec):
    """Tell someone when a run needs a person: each event of the kinds in `on` calls
    `command` with one JSON object on stdin and/or POSTs it to `webhook`."""

    command: list[str] | None = Field(
        None, description="A program and its arguments (no shell), given one JSON object on stdin per event: "
        "{run, task, kind, message, look}. It gets the environment command agents get plus pass_env, never a "
        "provider's API key.")
    webhook: str | None = Field(
        None, description="An http:// or https:// URL the same JSON object is POSTed to (redirects are not "
        "followed). It goes into plan.json: a URL that is itself a secret (a Slack webhook) belongs in a "
        "command notifier's environment instead (pass_env).")
    on: list[str] = Field(
        default_factory=lambda: list(NOTIFY_KINDS),
        description="The events that notify: blocked (a task ended blocked), failed (a task failed), review "
        "(a result waits for a person), budget (a budget stopped work), stuck (a loop task made no progress), "
        "run_end (the run ended, with its outcome and exit code). Default: all of them.")
    timeout: Duration = Field(
        10, description="Time for all tries of one event together (a failed try is retried at most twice "
        "within it); a notifier still running then is killed with its process group.")
    pass_env: list[Annotated[str, Field(pattern=ENV_NAME_PATTERN)]] = Field(
        default_factory=list, description="Variables of harnessc's environment the command also gets (e.g. "
        "SLACK_WEBHOOK_URL); a provider's API key never.")


class Executor(_Spec):
    """Where attempts run: `local` (this machine, the default) or a Ray cluster (`pip install
    'harnessc[ray]'`). The driver (`harnessc run`) keeps state.db, routing, budgets and landing;
    each attempt of a task runs on a worker, in a checkout of its base commit, isolated."""

    kind: Literal["local", "ray"] = Field(..., description="local: attempts run on this machine; ray: each "
                                          "attempt runs as a Ray task on a cluster.")
    address: str | None = Field(
        None, description="The cluster: auto (the one `ray start` runs on this machine), HOST:PORT (its head "
        "node's GCS port, e.g. 10.0.0.5:6379) or ray://HOST:PORT (Ray Client, e.g. ray://head:10001). "
        "Unset: a local cluster is started for the run and shut down at its end. `run --ray-address` wins.")
    num_cpus_per_attempt: float = Field(1, gt=0, description="CPUs each attempt asks Ray for (a fraction "
                                        "such as 0.5 packs more attempts on a node).")
    resources: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict, description="Custom Ray resources every attempt asks for, name -> amount, e.g. "
        "{harnessc_worker: 1}; a task's `resources:` adds to them (its amount wins for a name both give).")
    placement: Literal["commands", "all"] = Field(
        "commands", description="commands: command and CLI agents run on the workers, API agents (anthropic, "
        "openai) answer from the driver; all: API agents run on the workers too.")
    clone_url: str | None = Field(
        None, description="A git URL the workers clone the project from (cached per node, then fetched), "
        "instead of receiving each base commit as a git bundle. No credentials in it: use the workers' "
        "SSH keys or credential helper.")


class PlanGrowth(_Spec):
    """Tasks agents propose (a `next_tasks` list in an output, `<task id=".." depends_on="a,b">goal</task>`
    markers in an agent's text): filed in .harness/proposals/, linted, listed by `harnessc review`."""

    grow: Union[Literal["review", "auto", "off"], Literal[False]] = Field(
        "review", description="off (YAML reads a bare off as false: both mean off); review: proposals wait for `harnessc accept-proposal ID`, which appends the task to "
        "roadmap.md; auto: proposals that lint are appended to roadmap.md and run in the same run; off: proposals are "
        "ignored. `split: true` tasks add their subtasks whatever it says.")
    max_new_tasks: int = Field(10, ge=0, le=1000, description="Proposals filed for review or added to the plan "
                               "(auto, split: true) per run; more are rejected (HC495).")
    max_depth: int = Field(2, ge=0, le=100, description="Generations of proposed tasks: a task the roadmap's "
                           "author wrote proposes generation 1, which proposes generation 2; deeper is "
                           "rejected (HC496).")


class HarnessConfig(_Spec):
    """harness.yaml: agents, routing, budgets and defaults."""

    model_config = ConfigDict(title="harnessc harness.yaml")
    agents: dict[str, AgentConfig] = Field(default_factory=dict, description="Agents by name.")
    routing: Routing = Field(default_factory=Routing, description="Agent selection.")
    budget: Budget = Field(default_factory=Budget, description="Run-wide limits.")
    defaults: Defaults = Field(default_factory=Defaults, description="Task defaults.")
    concurrency: int = Field(4, ge=1, description="Tasks run at once.")
    loop: Loop = Field(default_factory=Loop, description="Loop tasks and unattended runs: progress, stuck "
                       "detection, memory, alerts, runaway signs, summaries.")
    templates: str | None = Field(
        None, description="Directory of Jinja overrides, same file names as harnessc/templates."
    )
    worktrees: Worktrees = Field(default_factory=lambda: Worktrees(), description="Untracked or ignored "
                                 "things of your tree each isolated task's worktree gets (a worktree holds "
                                 "committed files only).")
    git_hooks: bool = Field(
        False, description="Run the repository's git hooks for harnessc's own commits (`git: commit`), "
        "with the child base environment (no API key); pre-commit and commit-msg never run (--no-verify). "
        "false: no hook runs for any git command harnessc starts (an agent could have written one)."
    )
    telemetry: Telemetry = Field(default_factory=Telemetry, description="OpenTelemetry traces of each run.")
    memory: Union[Literal["off", False], Memory] = Field(
        default_factory=lambda: Memory(), description="Run memory across tasks and runs (.harness/memory/): "
        "off (or false), or its budgets. Default: on, with the defaults.")
    notify: Notify | None = Field(None, description="Tell someone when a run needs a person: a command and/or a "
                                  "webhook given one JSON object per event.")
    plan: PlanGrowth = Field(default_factory=lambda: PlanGrowth(), description="A plan that grows under "
                             "review: what happens to the tasks agents propose.")
    executor: Union[Literal["local", "ray"], Executor] = Field(
        "local", description="Where attempts run: local (default), ray (a Ray cluster with the defaults: "
        "the same as {kind: ray}) or a mapping with kind: ray and its settings. `run --executor` wins.")
