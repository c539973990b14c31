"""The one agent interface: `await agent.call(request)` -> Response, or raises AgentError."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from ... import providers
from ...estimates import cost_usd
from ...planfile import Contract, load_contract
from ...providers import AgentConfig
from .errors import AgentError

# the ledger's names, importable from here as before (usage.py: errors.py needs them too)
from .usage import (  # noqa: F401
    CLI,
    COST_SOURCES,
    MAX_CALL_COST_USD,
    MAX_CALL_TOKENS,
    NO_PRICE,
    NO_RESPONSE,
    PRICE,
    RESERVED,
    CachePrices,
    Charge,
    Usage,
    cache_prices,
    checked_charge,
    reported,
    shown,
)


@dataclass
class Request:
    """What an agent is asked: a rendered prompt plus what the answer must satisfy."""

    task_id: str
    prompt: str
    system: str = ""
    output_schema: dict | None = None  # the contract's JSON Schema, when it has an output
    contract: Contract | None = None  # the task's contract (simulate builds its answers from it)
    promise: str | None = None  # the completion promise word, when declared
    iteration: int = 1
    complexity: str | None = None  # the task's complexity (trivial ... epic)
    timeout: float | None = None  # seconds this call may take (bounded by the task's max_time)
    max_tokens: int | None = None
    root: Path = Path(".")
    # Where the parts of `prompt` that other tasks share end (character offsets): a provider
    # may cache the request up to there (agents/caching.py).
    cache_breaks: tuple[int, ...] = ()
    workdir: Path | None = None  # where a program agent runs: the attempt's worktree (isolation); None: the project
    approach: int | None = None  # best-of-N: which approach of the task (HARNESSC_APPROACH); None: the only one
    purpose: str = "task"  # task: an iteration of the task; mutation | summary: an assist call (assist.py);
    # draft: a round of `harnessc draft` (harnessc/draft/rounds.py)
    # Told the last line a CLI or command agent printed, as it prints (a live display shows it);
    # None when nobody looks. Not part of what is asked: never recorded.
    on_line: Callable[[str], None] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.contract is not None and not isinstance(self.contract, Contract):
            self.contract = load_contract(self.contract)  # a plan.json entry as parsed JSON

    def wire_schema(self, provider: str) -> dict:
        """The structured-output subset for `provider`: {schema, moved, strict}, from plan.json
        for the providers it holds, else computed from the output schema ({} without one)."""
        stored = self.contract.wire_schema(provider) if self.contract is not None else {}
        unit = providers.get(provider)
        if stored or self.output_schema is None or unit is None or unit.schema is None:
            return stored
        return unit.schema.entry(self.output_schema)

    def schema_name(self) -> str:
        """The answer's name on the wire (a json_schema's, a tool's): the contract's name,
        letters, digits, `_` and `-` only."""
        name = str((self.contract.name if self.contract is not None else None) or "output")
        return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]


@dataclass
class Response:
    text: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    latency: float = 0.0
    notes: list[str] = field(default_factory=list)
    cost_source: str = NO_PRICE  # see COST_SOURCES; agents set it with priced()
    denials: list[dict] = field(default_factory=list)  # tool calls the agent's permissions refused
    tool_calls: int | None = None  # tools the agent called during the call; None: it does not say
    unreported: list[str] = field(default_factory=list)  # figures not believed (checked_charge)
    truncated: str | None = None  # why the text is only the start of the answer (cut at the output cap)
    deprecated: str | None = None  # the end-of-life date the SDK gave for the agent's model (deprecation.py)

    def __post_init__(self) -> None:
        usage, self.cost_usd, self.cost_source, unreported = checked_charge(self.usage, self.cost_usd,
                                                                            self.cost_source)
        self.usage = usage or Usage()
        self.unreported = [*self.unreported, *(n for n in unreported if n not in self.unreported)]
        self.latency = reported(self.latency, float("inf")) or 0.0

    def charged(self) -> Charge:
        """What the answer adds to its attempt's row: the ledger figures, and the tool calls
        that were refused."""
        return Charge(self.usage, self.cost_usd, self.cost_source, self.latency, self.denials, self.tool_calls,
                      tuple(self.unreported))


class Agent(Protocol):
    name: str

    async def call(self, request: Request) -> Response: ...


def priced(config: AgentConfig, usage: Usage, provider: str | None = None) -> tuple[float, str]:
    """(USD, cost source) for `usage` at the agent's price: PRICE, or NO_PRICE (0) without one."""
    return price_cost(config, usage, provider), (PRICE if config.price else NO_PRICE)


def charge_reported(error: AgentError, usage: Usage, config: AgentConfig, provider: str) -> AgentError:
    """`error` charged the usage its stream reported before it failed (a stream cut mid-way
    is charged what it reported), unless the error carries its own."""
    if error.usage is None:
        error.usage = usage
        error.cost_usd, error.cost_source = priced(config, usage, provider)
    return error


def price_cost(config: AgentConfig, usage: Usage, provider: str | None = None) -> float:
    """USD for `usage` at the agent's configured price (0 when no price is set).

    Cache reads and writes cost `price.cache_read` / `price.cache_write` (an hour's write:
    `price.cache_write_1h`) when given, else the provider's default fraction of the input
    price (anthropic 0.1x, 1.25x and 2x; openai 0.1x, 1x).
    """
    if not config.price:
        return 0.0
    rates = cache_prices(config, provider)
    writes_5m = usage.cache_write_tokens - usage.cache_write_1h_tokens
    return (cost_usd(usage.uncached_input_tokens, usage.output_tokens, rates.input, config.price.output)
            + (usage.cache_read_tokens * rates.read + writes_5m * rates.write
               + usage.cache_write_1h_tokens * rates.write_1h) / 1_000_000)


def make_agent(name: str, config: AgentConfig, root: Path) -> Agent:
    """The agent for one entry of plan.agents (its class is imported here, on first use)."""
    return providers.get(config.provider).agent_factory()(name, config, root)
