"""Agent configs as the runtime reads them: one typed record per kind of agent.

plan.json keeps each agent's harness.yaml settings as written (unset keys left out);
`providers.agent_config(name, raw)` turns one entry into the record of its provider's kind,
every value type-checked against the field's annotation, so a hand-edited plan saying
`max_tokens: "8k"` is one clear error naming the agent and the key, not a traceback in the
middle of a run. A record holds the keys its kind reads and the ones every agent has; a key
harness.yaml allows on any agent but only another kind reads (`latency` on an anthropic
agent) is left out, as the runtime always ignored it. What lint accepts is still decided by
compiler/ir.py and its schema, not here.

Records read like the mapping they came from (`cfg["model"]`, `cfg.get("model")`,
planfile.Record), and are frozen: one agent's settings are shared by every task it serves.
Defaults are what the runtime does when a key is unset; None stays None where unset means
something of its own (anthropic's `stream`: streamed when max_tokens is large).
"""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from dataclasses import MISSING, field, fields
from functools import lru_cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from ..records import Record, record

Tier = Literal["fast", "balanced", "powerful"]
Strength = Literal["implementation", "research", "reasoning", "large_context"]
Permissions = Literal["read-only", "edit", "full"]


class AgentConfigError(ValueError):
    """An agent's settings hold a value of the wrong type, or a key no agent has."""


@record(frozen=True)
class Price(Record):
    """USD per million tokens; a cache price left unset is the provider's fraction of `input`."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None


@record(frozen=True)
class AgentLimits(Record):
    """Usage caps (None: no cap)."""

    daily_calls: int | None = None
    daily_tokens: int | None = None
    daily_cost_usd: float | None = None
    concurrency: int | None = None


@record(frozen=True)
class AgentConfig(Record):
    """What every agent has, read by the runtime whatever the kind (routing, budgets,
    limits, cache figures, telemetry, cassettes, pre-flight)."""

    provider: str
    model: str | None = None
    tier: Tier = "balanced"
    strengths: tuple[Strength, ...] = ()
    price: Price | None = None  # None: calls cost nothing known
    limits: AgentLimits = field(default_factory=AgentLimits)
    # the variable holding the key, the provider's default when unset; None: no key
    api_key_env: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None  # None: the provider's (or the server's) own cap
    context_window: int | None = None  # None: the model table's (providers.Provider.context_window)
    timeout: float | None = None  # seconds per call; None: the kind's own default
    cache_ttl: Literal["5m", "1h"] = "5m"


@record(frozen=True)
class AnthropicConfig(AgentConfig):
    """provider anthropic (the Messages API)."""

    DEFAULT_MAX_TOKENS = 8192  # the API insists on a cap; this one when `max_tokens` is unset

    stream: bool | None = None  # None: streamed when the cap is over what the API answers unstreamed
    temperature: float | None = None

    @property
    def output_cap(self) -> int:
        return self.max_tokens or self.DEFAULT_MAX_TOKENS


@record(frozen=True)
class OpenAIConfig(AgentConfig):
    """provider openai (Chat Completions or Responses; any OpenAI-compatible server)."""

    stream: bool = False
    structured: Literal["json_schema", "json_object", "none"] = "json_schema"
    api: Literal["chat", "responses"] = "chat"
    temperature: float | None = None


@record(frozen=True)
class ProgramConfig(AgentConfig):
    """An agent that runs a program per call, in a restricted environment."""

    DEFAULT_TIMEOUT = 1800.0  # seconds per call when `timeout` is unset

    command: tuple[str, ...] | None = None  # argv (a CLI: its executable and leading arguments)
    env: dict[str, str] = field(default_factory=dict)  # set for the program, over what it receives
    pass_env: tuple[str, ...] = ()  # passed through from harnessc's environment, by name
    sandbox: bool = False  # run under bubblewrap (runtime/children/sandbox.py); plan.json holds defaults' value

    @property
    def call_timeout(self) -> float:
        return self.timeout or self.DEFAULT_TIMEOUT


@record(frozen=True)
class CommandConfig(ProgramConfig):
    """provider command: any program, `{prompt}` / `{prompt_file}` in its argv or the prompt on stdin."""


@record(frozen=True)
class CliConfig(ProgramConfig):
    """providers claude-code, codex, gemini-cli: a coding CLI whose argv harnessc builds."""

    permissions: Permissions = "read-only"


@record(frozen=True)
class SimulateConfig(AgentConfig):
    """provider simulate: answers from the contracts, offline."""

    latency: float = 0.0  # seconds per call
    invalid_first: int = 0
    fail_rate: float = 0.0
    progress: Literal["steady", "none"] = "steady"
    complete_after: int = 0
    seed: int = 0
    skill: dict[str, float] = field(default_factory=dict)  # complexity -> chance of a valid answer


@record(frozen=True)
class ReplayConfig(AgentConfig):
    """provider replay: answers from recorded cassettes."""

    cassette: str | None = None  # a directory in the project; None: .harness/cassettes


KINDS = (AnthropicConfig, OpenAIConfig, CommandConfig, CliConfig, SimulateConfig, ReplayConfig)


def read_config(kind: type[AgentConfig], name: str, raw: Mapping, key_env: str | None) -> AgentConfig:
    """`raw` (one plan.json agent entry) as a `kind` record; `key_env` is the provider's
    default key variable, for an `api_key_env` left unset ("" or absent)."""
    unknown = sorted(str(k) for k in raw if k not in agent_keys())
    if unknown:
        raise AgentConfigError(f"agent '{name}': unknown key '{unknown[0]}'")
    own = {k: v for k, v in raw.items() if k in kind._keys}
    if own.get("api_key_env", "") == "":
        own["api_key_env"] = key_env
    return _record(kind, own, f"agent '{name}': ")


@lru_cache(maxsize=1)
def agent_keys() -> frozenset[str]:
    """Every key some kind of agent reads."""
    return frozenset(k for kind in KINDS for k in kind._keys)


# ------------------------------------------------------------------ type checks


def _record(cls: type[Record], raw: Mapping, where: str) -> Record:
    hints = _hints(cls)
    unknown = [str(k) for k in raw if k not in cls._keys]
    if unknown:
        raise AgentConfigError(f"{where}unknown key '{unknown[0]}'")
    values = {}
    for f in fields(cls):
        if f.name in raw:
            values[f.name] = _value(hints[f.name], raw[f.name], f"{where}{f.name}")
        elif f.default is MISSING and f.default_factory is MISSING:
            raise AgentConfigError(f"{where}{f.name} is missing")
    return cls(**values)


def _value(tp: Any, value: Any, where: str) -> Any:
    """`value` as type `tp` (an int is a float too; a list is a tuple); AgentConfigError else."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]  # X | None is the only union used
        return _value(inner, value, where)
    if origin is Literal:
        if isinstance(value, str) and value in get_args(tp):
            return value
        raise _wrong(where, "one of " + ", ".join(get_args(tp)), value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise _wrong(where, "a list", value)
        return tuple(_value(get_args(tp)[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise _wrong(where, "a mapping", value)
        key_type, value_type = get_args(tp)
        return {_value(key_type, k, f"{where} key"): _value(value_type, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, Record):
        if not isinstance(value, Mapping):
            raise _wrong(where, "a mapping", value)
        return _record(tp, value, f"{where}.")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _wrong(where, "true or false", value)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _wrong(where, "an integer", value)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _wrong(where, "a number", value)
    if tp is str:
        if isinstance(value, str):
            return value
        raise _wrong(where, "a string", value)
    raise TypeError(f"{where}: no check for {tp!r}")  # a field of a type this module does not read


def _wrong(where: str, wanted: str, value: Any) -> AgentConfigError:
    return AgentConfigError(f"{where} must be {wanted}, not {shown(value)}")


def shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)
