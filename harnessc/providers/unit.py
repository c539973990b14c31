"""One provider as harnessc knows it (`Provider`), and the model-window lookup its tables
use. The registry (__init__.py) gathers the units; the vendors' modules (anthropic.py,
openai.py) each define theirs."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .subset import SchemaSubset

if TYPE_CHECKING:
    from .config import AgentConfig


@dataclass(frozen=True)
class Provider:
    name: str
    agent: str  # "module:Class" (or a function choosing one), imported on first use
    schema: SchemaSubset | None = None  # None: the provider takes no wire schema
    # plan.json stores this subset per contract (the API providers); a CLI's is computed from
    # the contract's schema when it is called, so adding one changes no task's fingerprint
    schema_in_plan: bool = True
    # the record its agents' settings are read into: a class of config.py, by name, so that
    # the registry does not import config.py (its ten dataclasses are a tenth of `lint`)
    config: str = "AgentConfig"
    api_key_env: str | None = None  # the default variable holding the key
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

    def config_record(self) -> type[AgentConfig]:
        """The record class its agents' settings are read into (`config`)."""
        from . import config

        return getattr(config, self.config)



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
