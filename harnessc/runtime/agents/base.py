"""The one agent interface: `await agent.call(request)` -> Response, or raises AgentError."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ...estimates import cost_usd
from .errors import AgentError


@dataclass
class Request:
    """What an agent is asked: a rendered prompt plus what the answer must satisfy."""

    task_id: str
    prompt: str
    system: str = ""
    output_schema: dict | None = None  # the contract's JSON Schema, when it has an output
    contract: dict | None = None  # plan["contracts"][name] (simulate builds its answers from it)
    promise: str | None = None  # the completion promise word, when declared
    iteration: int = 1
    timeout: float | None = None  # seconds this call may take (bounded by the task's max_time)
    max_tokens: int | None = None
    root: Path = Path(".")


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class Response:
    text: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    latency: float = 0.0
    notes: list[str] = field(default_factory=list)


class Agent(Protocol):
    name: str

    async def call(self, request: Request) -> Response: ...


def price_cost(config: dict, usage: Usage) -> float:
    """USD for `usage` at the agent's configured price (0 when no price is set)."""
    price = config.get("price") or {}
    if not price:
        return 0.0
    return cost_usd(usage.input_tokens, usage.output_tokens,
                    float(price.get("input", 0)), float(price.get("output", 0)))


class Unavailable:
    """A provider that exists in the spec language but not yet in this runtime."""

    def __init__(self, name: str, config: dict, root: Path):
        self.name = name
        self.provider = config.get("provider")

    async def call(self, request: Request) -> Response:
        raise AgentError(
            f"agent '{self.name}': provider '{self.provider}' is not available yet in this harnessc",
            transient=False,
        )


def _registry() -> dict[str, type]:
    # Imported here so `import harnessc.runtime` stays cheap; SDK-backed providers will be
    # added the same way and must import their SDK inside their module, lazily.
    from .cli import CLI_AGENTS
    from .command import CommandAgent
    from .simulate import SimulateAgent

    return {
        **CLI_AGENTS,
        "simulate": SimulateAgent,
        "command": CommandAgent,
        "anthropic": Unavailable,
        "openai": Unavailable,
        "replay": Unavailable,
    }


def make_agent(name: str, config: dict[str, Any], root: Path) -> Agent:
    """The agent for one entry of plan["agents"]."""
    provider = config.get("provider")
    cls = _registry().get(provider)
    if cls is None:
        raise AgentError(f"agent '{name}': unknown provider '{provider}'")
    return cls(name, config, root)
