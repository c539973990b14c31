"""The provider registry: each provider is one unit, read by the compiler and the runtime.

A unit (`Provider`) holds what harnessc knows about one provider: its structured-output
JSON-Schema subset (the compiler stores it per contract in plan.json), its defaults (the
environment variable holding the key, `max_tokens`), the context windows of the models it
serves (the compiler derives a task's default context budget from them), and where its agent
class lives. The
agent class is imported only when a run builds that agent, so `lint` and `build` import no
SDK and `run` imports only the SDKs of the agents it calls.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from .subset import DRAFT07, SchemaSubset


@dataclass(frozen=True)
class Provider:
    name: str
    agent: str  # "module:Class" (or a function choosing one), imported on first use
    schema: SchemaSubset | None = None  # None: the provider takes no wire schema
    # plan.json stores this subset per contract (the API providers); a CLI's is computed from
    # the contract's schema when it is called, so adding one changes no task's fingerprint
    schema_in_plan: bool = True
    api_key_env: str | None = None  # the default variable holding the key
    defaults: dict[str, Any] = field(default_factory=dict)  # agent settings when unset
    # cache read, write (5 minutes), write (1 hour): fractions of the input price
    cache_rates: tuple[float, float, float] = (1.0, 1.0, 1.0)
    requires: dict[str, str] = field(default_factory=dict)  # agent keys lint insists on (HC215) -> hint
    cli: bool = False  # a coding CLI: the only kind that takes `permissions:`
    windows: Mapping[str, int] = field(default_factory=dict)  # model-id prefix -> context window (tokens)
    default_window: int | None = None  # a CLI run without `model:`: its default model's window
    sdk: str | None = None  # the SDK package its agent imports (installed by harnessc[llm])

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

    def context_window(self, config: dict) -> int | None:
        """One agent's context window in tokens: its `context_window:` setting, else its
        model's (this provider's table, then every provider's: a gateway may serve another
        vendor's model), else, with no model set, the model the provider uses by default.
        None when unknown: a model in no table, or a provider that runs no named model
        (command, simulate, replay)."""
        if config.get("context_window"):
            return config["context_window"]
        if not self.windows:
            return None
        model = config.get("model")
        if not model:
            return self.default_window
        return window_of(model, self.windows) or window_of(model, _all_windows())


def window_of(model: str, windows: Mapping[str, int]) -> int | None:
    """The window of the longest prefix of `model` in `windows` that ends at a word boundary
    (`gpt-4` is not `gpt-4o`'s prefix, it is `gpt-4-0613`'s); a gateway's `vendor/model` id
    is looked up by its last part. None when no prefix matches."""
    model = model.rpartition("/")[2].lower()
    best = None
    for prefix, window in windows.items():
        if model.startswith(prefix) and (len(model) == len(prefix) or not prefix[-1].isalnum()
                                         or not model[len(prefix)].isalnum()):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, window)
    return best[1] if best else None


def _units() -> dict[str, Provider]:
    from . import anthropic, gemini, openai

    agents = "harnessc.runtime.agents"
    return {p.name: p for p in (
        openai.PROVIDER,  # schema providers first, in plan.json's order
        anthropic.PROVIDER,
        Provider("command", f"{agents}.command:CommandAgent", requires={"command": (
            "add the argv to run, e.g. `command: [my-agent, --print, '{prompt}']`"
            " ({prompt} and {prompt_file} are replaced, else the prompt goes to stdin)")}),
        # the CLIs run their vendor's models; without `model:` their own default model.
        # claude's --json-schema: the whole contract as Ajv draft-07 knows it (a non-strict
        # StructuredOutput tool); codex's --output-schema: OpenAI strict json_schema.
        Provider("claude-code", f"{agents}.cli:ClaudeCodeAgent", cli=True,
                 schema=SchemaSubset(provider="claude-code", keep=DRAFT07, strict=False), schema_in_plan=False,
                 windows={**anthropic.WINDOWS, **anthropic.CLAUDE_CODE_ALIASES},
                 default_window=anthropic.CLAUDE_CODE_WINDOW),
        Provider("codex", f"{agents}.cli:CodexAgent", cli=True,
                 schema=replace(openai.PROVIDER.schema, provider="codex"), schema_in_plan=False,
                 windows=openai.WINDOWS, default_window=openai.CODEX_WINDOW),
        Provider("gemini-cli", f"{agents}.cli:GeminiCliAgent", cli=True, windows=gemini.WINDOWS,
                 default_window=gemini.GEMINI_CLI_WINDOW),
        Provider("simulate", f"{agents}.simulate:SimulateAgent"),
        Provider("replay", "harnessc.runtime.agents.cassettes:ReplayAgent"),
    )}


REGISTRY: dict[str, Provider] = _units()


@lru_cache(maxsize=1)
def _all_windows() -> dict[str, int]:
    """Every provider's model windows in one table (the smallest where two disagree)."""
    merged: dict[str, int] = {}
    for unit in REGISTRY.values():
        for prefix, window in unit.windows.items():
            merged[prefix] = min(window, merged.get(prefix, window))
    return merged


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
    """The providers whose structured-output schema plan.json holds, one per contract."""
    return tuple(p for p in REGISTRY.values() if p.schema is not None and p.schema_in_plan)
