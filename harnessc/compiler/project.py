"""The compilation unit: one project's sources and everything the passes derive from them."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..diagnostics import Diagnostics
from ..vocab import CONTRACTS, HARNESS, PLAN_VERSION, ROADMAP, SPEC_FILES  # noqa: F401  (re-exported)
from .tasks import Roadmap
from .yamlsafe import Marks

if TYPE_CHECKING:
    from ..planfile import Plan
    from .ir import Contract, HarnessConfig
    from .promptfiles import PromptFiles
    from .specview import SpecView



@dataclass
class Project:
    """Mutable state threaded through the compiler passes."""

    root: Path
    diags: Diagnostics = field(default_factory=Diagnostics)
    sources: dict[str, str] = field(default_factory=dict)  # relative path -> text
    roadmap: Roadmap | None = None
    config: "SpecView | HarnessConfig | None" = None  # a checked view at lint, the model after to_models
    config_marks: Marks | None = None
    contracts: "dict[str, SpecView | Contract]" = field(default_factory=dict)  # resolved (extends applied)
    contract_marks: dict[str, Marks] = field(default_factory=dict)  # contract name -> marks of its file
    contract_paths: dict[str, tuple] = field(default_factory=dict)  # name -> path inside its file
    builtin_names: set[str] = field(default_factory=set)
    contracts_unreadable: bool = False  # contracts.yaml did not parse: unknown names are not news
    config_unreadable: bool = False  # harness.yaml did not parse: unknown agent names are not news
    # Defined, but with an error already reported (the bad part was cut out): references to
    # them resolve, and checks of what they contain are skipped. One mistake, one error.
    broken_agents: set[str] = field(default_factory=set)
    broken_contracts: set[str] = field(default_factory=set)
    executor_broken: bool = False  # harness.yaml `executor:` had an error (reported) and was cut out
    context_files: dict[str, list[str]] = field(default_factory=dict)  # task id -> resolved paths, if any
    context_priority: dict[str, dict[str, str]] = field(default_factory=dict)  # task id -> path -> priority
    context_auto: dict[str, int | None] = field(default_factory=dict)  # task id -> `auto(N)`'s N (None: `auto`)
    prompts: dict[str, str] = field(default_factory=dict)  # task id -> first prompt (when kept in memory)
    prompt_chars: "array[int]" = field(default_factory=lambda: array("q"))  # each node's prompt length, in order
    prompt_files: "PromptFiles | None" = None  # a build writes prompts here as they are rendered
    system_prompt: str = ""
    template_hash: str = ""
    plan: Plan | None = None

    @property
    def hashes(self) -> dict[str, str]:
        """sha256 of each spec file (build only: lint does not pay for hashlib)."""
        import hashlib

        # sources are the files' exact UTF-8 text, so this is the hash of the bytes on disk
        return {name: hashlib.sha256(text.encode("utf-8")).hexdigest()
                for name, text in self.sources.items() if name in SPEC_FILES}

    @property
    def tasks(self):
        return self.roadmap.tasks if self.roadmap else []

    @property
    def agent_names(self) -> list[str]:
        """Every agent harness.yaml defines, broken ones included."""
        return [*self.config.agents, *sorted(self.broken_agents - set(self.config.agents))]

    @property
    def executor_kind(self) -> str | None:
        """local or ray, as harness.yaml says; None when harness.yaml or its `executor:` is
        broken (reported already: no check should guess)."""
        if self.config_unreadable or self.executor_broken:
            return None
        executor = self.config.executor
        return executor if isinstance(executor, str) else executor.kind

    def defines_agent(self, name: str) -> bool:
        return name in self.config.agents or name in self.broken_agents or self.config_unreadable
