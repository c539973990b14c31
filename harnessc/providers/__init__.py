"""The provider registry: each provider is one unit, read by the compiler and the runtime.

A unit (`Provider`) holds what harnessc knows about one provider: its structured-output
JSON-Schema subset (the compiler stores it per contract in plan.json), its defaults (the
environment variable holding the key, `max_tokens`), and where its agent class lives. The
agent class is imported only when a run builds that agent, so `lint` and `build` import no
SDK and `run` imports only the SDKs of the agents it calls.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from .subset import SchemaSubset


@dataclass(frozen=True)
class Provider:
    name: str
    agent: str  # "module:Class" (or a function choosing one), imported on first use
    schema: SchemaSubset | None = None  # None: the provider takes no wire schema
    api_key_env: str | None = None  # the default variable holding the key
    defaults: dict[str, Any] = field(default_factory=dict)  # agent settings when unset
    cache_rates: tuple[float, float] = (1.0, 1.0)  # cache read, write: fractions of the input price
    requires: dict[str, str] = field(default_factory=dict)  # agent keys lint insists on (HC215) -> hint
    cli: bool = False  # a coding CLI: the only kind that takes `permissions:`

    def agent_factory(self) -> Any:
        """What builds this provider's agent from (name, config, root): its class, or a
        function choosing one by the config (openai's `api:`)."""
        module, _, attr = self.agent.partition(":")
        return getattr(importlib.import_module(module), attr)

    def key_env(self, config: dict) -> str | None:
        """The key variable of one agent: its `api_key_env` ("" = this provider's default,
        None = no key, e.g. a local server)."""
        env = config.get("api_key_env", "")
        return self.api_key_env if env == "" else env

    def setting(self, config: dict, key: str) -> Any:
        """An agent setting, or this provider's default for it."""
        value = config.get(key)
        return self.defaults.get(key) if value is None else value


def _units() -> dict[str, Provider]:
    from . import anthropic, openai

    agents = "harnessc.runtime.agents"
    return {p.name: p for p in (
        openai.PROVIDER,  # schema providers first, in plan.json's order
        anthropic.PROVIDER,
        Provider("command", f"{agents}.command:CommandAgent", requires={"command": (
            "add the argv to run, e.g. `command: [my-agent, --print, '{prompt}']`"
            " ({prompt} and {prompt_file} are replaced, else the prompt goes to stdin)")}),
        Provider("claude-code", f"{agents}.cli:ClaudeCodeAgent", cli=True),
        Provider("codex", f"{agents}.cli:CodexAgent", cli=True),
        Provider("gemini-cli", f"{agents}.cli:GeminiCliAgent", cli=True),
        Provider("simulate", f"{agents}.simulate:SimulateAgent"),
        Provider("replay", "harnessc.runtime.cassettes:ReplayAgent"),
    )}


REGISTRY: dict[str, Provider] = _units()


def get(name: str | None) -> Provider | None:
    return REGISTRY.get(name or "")


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def key_envs(agents: dict[str, dict]) -> set[str]:
    """The variables holding the keys of `agents` (plan["agents"]), whatever they are called:
    their values are secrets (redacted before anything is written) even when the name does
    not look like one."""
    names = set()
    for config in agents.values():
        unit = get(config.get("provider"))
        env = unit.key_env(config) if unit else None
        if env:
            names.add(env)
    return names


def clis() -> tuple[str, ...]:
    """The providers that take `permissions:` (the coding CLIs)."""
    return tuple(p.name for p in REGISTRY.values() if p.cli)


def with_schema() -> tuple[Provider, ...]:
    """The providers that take a structured-output schema (plan.json has one per contract)."""
    return tuple(p for p in REGISTRY.values() if p.schema is not None)
