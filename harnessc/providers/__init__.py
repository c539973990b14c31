"""The provider registry: each provider is one unit, read by the compiler and the runtime.

A unit (`Provider`, unit.py) holds what harnessc knows about one provider: its structured-output
JSON-Schema subset (the compiler stores it per contract in plan.json), its defaults (the
environment variable holding the key, `max_tokens`), the context windows of the models it
serves (the compiler derives a task's default context budget from them), the typed record
its agents' settings are read into (`agent_config`, providers/config.py), and where its agent
class lives. The agent class is imported only when a run builds that agent, so `lint` and
`build` import no SDK and `run` imports only the SDKs of the agents it calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from . import anthropic, gemini, openai
from .subset import DRAFT07, SchemaSubset
from .unit import Provider, window_of

if TYPE_CHECKING:
    from .config import AgentConfig

# The agent config records (config.py) are this package's too (`from harnessc.providers import
# AgentConfig`), but imported only when first asked for: building ten dataclasses is a tenth
# of `lint`, which reads no agent's settings (tests/runtime/test_startup_imports.py).
_CONFIG_NAMES = frozenset({
    "AgentConfig", "AgentConfigError", "AgentLimits", "AnthropicConfig", "CliConfig", "CommandConfig", "OpenAIConfig",
    "Price", "ProgramConfig", "ReplayConfig", "SimulateConfig", "read_config", "shown",
})


def __getattr__(name: str) -> Any:
    if name in _CONFIG_NAMES:
        from . import config

        return getattr(config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _units() -> dict[str, Provider]:
    agents = "harnessc.runtime.agents"
    return {p.name: p for p in (
        openai.PROVIDER,  # schema providers first, in plan.json's order
        anthropic.PROVIDER,
        Provider("command", f"{agents}.command:CommandAgent", config="CommandConfig", requires={"command": (
            "add the argv to run, e.g. `command: [my-agent, --print, '{prompt}']`"
            " ({prompt} and {prompt_file} are replaced, else the prompt goes to stdin)")}),
        # the CLIs run their vendor's models; without `model:` their own default model.
        # claude's --json-schema: the whole contract as Ajv draft-07 knows it (a non-strict
        # StructuredOutput tool); codex's --output-schema: OpenAI strict json_schema.
        Provider("claude-code", f"{agents}.cli:ClaudeCodeAgent", config="CliConfig", cli=True,
                 schema=SchemaSubset(provider="claude-code", keep=DRAFT07, strict=False), schema_in_plan=False,
                 windows={**anthropic.WINDOWS, **anthropic.CLAUDE_CODE_ALIASES},
                 default_window=anthropic.CLAUDE_CODE_WINDOW),
        Provider("codex", f"{agents}.cli:CodexAgent", config="CliConfig", cli=True,
                 schema=replace(openai.PROVIDER.schema, provider="codex"), schema_in_plan=False,
                 windows=openai.WINDOWS, default_window=openai.CODEX_WINDOW),
        Provider("gemini-cli", f"{agents}.cli:GeminiCliAgent", config="CliConfig", cli=True, windows=gemini.WINDOWS,
                 default_window=gemini.GEMINI_CLI_WINDOW),
        Provider("simulate", f"{agents}.simulate:SimulateAgent", config="SimulateConfig"),
        Provider("replay", "harnessc.runtime.agents.cassettes:ReplayAgent", config="ReplayConfig"),
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


def context_window(unit: Provider, config: dict) -> int | None:
    """One agent's context window in tokens (`unit`: its provider): its `context_window:`
    setting, else its model's (this provider's table, then every provider's: a gateway may
    serve another vendor's model), else, with no model set, the model the provider uses by
    default. None when unknown: a model in no table, or a provider that runs no named model
    (command, simulate, replay)."""
    if config.get("context_window"):
        return config["context_window"]
    if not unit.windows:
        return None
    model = config.get("model")
    if not model:
        return unit.default_window
    return window_of(model, unit.windows) or window_of(model, _all_windows())


def get(name: str | None) -> Provider | None:
    return REGISTRY.get(name or "")


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def agent_config(name: str, raw: Mapping) -> AgentConfig:
    """One agent's settings as the runtime reads them: plan.json's entry (harness.yaml's keys
    as written) as the record of its provider's kind, each value type-checked and an unset
    `api_key_env` read as the provider's default. The one place such records are made.
    Raises AgentConfigError (the agent and the key in its message)."""
    from .config import AgentConfigError, read_config, shown

    if not isinstance(raw, Mapping):
        raise AgentConfigError(f"agent '{name}' must be a mapping of settings, not {shown(raw)}")
    provider = raw.get("provider")
    unit = get(provider) if isinstance(provider, str) else None
    if unit is None:
        raise AgentConfigError(f"agent '{name}': unknown provider {shown(provider)} (known: {', '.join(names())})")
    return read_config(unit.config_record(), name, raw, unit.api_key_env)


def key_envs(agents: Mapping[str, AgentConfig]) -> set[str]:
    """The variables holding the keys of `agents` (plan.agents), whatever they are called:
    their values are secrets (redacted before anything is written) even when the name does
    not look like one."""
    return {config.api_key_env for config in agents.values() if config.api_key_env}


def provider_key_names(agents: Mapping[str, AgentConfig] | None = None) -> set[str]:
    """Every variable known to hold a provider's key: each provider's default (ANTHROPIC_API_KEY,
    OPENAI_API_KEY, ...), the coding CLIs' and `agents`' api_key_env. A notifier never gets one."""
    names = {unit.api_key_env for unit in REGISTRY.values() if unit.api_key_env}
    names |= {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "CODEX_API_KEY",
              "GEMINI_API_KEY", "GOOGLE_API_KEY"}
    return names | (key_envs(agents) if agents else set())


def clis() -> tuple[str, ...]:
    """The providers that take `permissions:` (the coding CLIs)."""
    return tuple(p.name for p in REGISTRY.values() if p.cli)


def runs_programs(name: str | None) -> bool:
    """Whether agents of provider `name` run a program on this machine (command and the CLIs):
    the ones `sandbox:` applies to."""
    unit = get(name)
    return unit is not None and (unit.cli or unit.name == "command")


def with_schema() -> tuple[Provider, ...]:
    """The providers whose structured-output schema plan.json holds, one per contract."""
    return tuple(p for p in REGISTRY.values() if p.schema is not None and p.schema_in_plan)
