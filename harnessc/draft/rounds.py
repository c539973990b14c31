"""The rounds of `harnessc draft`: ask the agent, read its answer, lint the draft with the
project's own harness.yaml, and send what lint found back, until the draft is clean or
the rounds run out.

The agent is one of harness.yaml's, called the way a loop task's assist calls a cheap
agent (runtime/loop/assist.py): a Request with its own purpose (`draft`: a command agent
sees HARNESSC_PURPOSE=draft), the agent's own time and token limits, one call at a time,
its usage and cost added up from what each answer (or failure) reports. A CLI agent
(claude-code, codex, gemini-cli) works in an empty scratch directory, so one allowed to edit
files cannot write the user's specs itself; a command agent runs in the project, where its `command:`
is written relative to. An agent whose provider is `simulate` (and `--agent simulate`) is
not called: the offline draft is made from the document (offline.py) and linted the same way.

The draft is linted in memory (compiler.lint_project's `texts`), in place of the project's
roadmap.md and contracts.yaml, which are never linted or written here (contracts.yaml is
shown to the agent: its contracts may be named); context paths, accept programs, templates
and isolation's git checks are checked against the real project, as they will be used.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import providers
from ..compiler import lint_project, load
from ..compiler.project import Project
from ..diagnostics import REPEATS_SHOWN, Diagnostics, render_text
from ..errors import HarnesscError
from ..vocab import BUILTIN_AGENT, CONTRACTS, HARNESS, SPEC_FILES
from .answer import Draft, Unusable, read_answer
from .offline import offline_draft
from .prompt import first_prompt, next_prompt

if TYPE_CHECKING:
    from ..runtime.agents.usage import Charge

SIMULATE = "simulate"  # --agent simulate: the offline draft, whether harness.yaml defines it or not
DEFAULT_ROUNDS = 3
TIMEOUT = 600.0  # seconds for one call when the agent sets no `timeout:` (a whole roadmap is a long answer)
GRACE = 10.0  # past the time limit the agent enforces itself, the call is abandoned
MAX_FEEDBACK_CHARS = 20_000  # of lint's report sent back to the agent
MAX_EXISTING_CONTRACTS_BYTES = 1_000_000  # a YAML spec's own limit


class DraftSetupError(HarnesscError):
    """The draft cannot start: an unknown agent, a harness.yaml with errors (its diagnostics)."""

    def __init__(self, message: str, hint: str | None = None, diags: Diagnostics | None = None,
                 sources: dict[str, str] | None = None):
        super().__init__(message, hint)
        self.diags, self.sources = diags, sources or {}


@dataclass
class Round:
    number: int
    draft: Draft | None  # None: the answer could not be used (`problem` says why)
    diags: Diagnostics | None = None
    sources: dict[str, str] = field(default_factory=dict)  # what lint read (the draft's texts, harness.yaml)
    problem: str = ""  # what the agent is told: lint's report, or why its answer was not usable
    tasks: int = 0  # the tasks lint read in the draft

    def clean(self, strict: bool) -> bool:
        return self.diags is not None and not self.diags.errors and not (strict and self.diags.warnings)


@dataclass
class Spent:
    """What the draft's calls used, as each answer (or failure) reported it."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    sources: set[str] = field(default_factory=set)  # cost sources (agents/usage.py): price, cli, none, ...

    def add(self, charged: Charge) -> None:
        self.calls += 1
        if charged.usage is not None:
            self.input_tokens += charged.usage.input_tokens
            self.output_tokens += charged.usage.output_tokens
        self.cost_usd += charged.cost_usd or 0.0
        self.sources.add(charged.cost_source or "none")


@dataclass
class Outcome:
    agent: str
    offline: bool
    rounds: list[Round] = field(default_factory=list)
    spent: Spent = field(default_factory=Spent)
    failure: str | None = None  # the agent's call failed: why (no round after it)
    changed: list[str] = field(default_factory=list)  # spec files that changed while the agent drafted

    @property
    def last(self) -> Round | None:
        return self.rounds[-1] if self.rounds else None

    @property
    def result(self) -> Round | None:
        """The round whose draft is written: the last with a draft (a later unusable answer
        does not lose it)."""
        return next((r for r in reversed(self.rounds) if r.draft is not None), None)


@dataclass
class Choice:
    name: str
    config: Any  # the agent's AgentConfig (providers/config.py); None for the built-in simulate
    offline: bool
    agents: tuple[str, ...] = ()  # harness.yaml's agents, which a draft's task may name


def project_agents(root: Path) -> tuple[dict[str, Any], str]:
    """harness.yaml's agents as a run reads them (name -> AgentConfig) and its
    `routing.default`. DraftSetupError, with the diagnostics, when harness.yaml has errors:
    no agent of a broken harness.yaml is called."""
    from ..compiler.plan import agent_entries

    project = Project(root=root, sources={CONTRACTS: ""})  # harness.yaml alone is read
    load.discover_contracts(project)
    load.load_config(project)
    if not project.diags.errors:
        load.to_models(project)
    if project.diags.errors:
        raise DraftSetupError("harness.yaml has errors; no agent is called", "fix them (`harnessc lint` shows "
                              "them too), or pass --agent simulate", project.diags, project.sources)
    config = project.config
    try:
        agents = {name: providers.agent_config(name, entry) for name, entry in agent_entries(config).items()}
    except providers.AgentConfigError as e:
        raise DraftSetupError(f"harness.yaml: {e}") from None
    return agents, config.routing.default


def choose_agent(root: Path, wanted: str | None) -> Choice:
    """`--agent NAME`, else harness.yaml's routing.default when it names an agent, else the
    offline simulate draft (no key, no cost: a model is used only when asked for)."""
    if wanted == SIMULATE and not (root / HARNESS).is_file():
        return Choice(SIMULATE, None, True)
    agents, default = project_agents(root)
    name = wanted or (default if default in agents else SIMULATE)
    named = tuple(n for n in agents if n != BUILTIN_AGENT)
    if name not in agents:
        if name == SIMULATE:
            return Choice(SIMULATE, None, True, named)
        known = ", ".join(sorted({*agents, SIMULATE}))
        raise DraftSetupError(f"--agent {name}: no such agent in harness.yaml", f"known: {known}")
    config = agents[name]
    return Choice(name, config, config.provider == SIMULATE, named)


class Drafter:
    """One `harnessc draft`: `run()` -> Outcome. `on_round(round)` is told each round as it ends."""

    def __init__(self, root: Path, document: str, source: str, choice: Choice, max_rounds: int = DEFAULT_ROUNDS,
                 strict: bool = False, on_round: Callable[[Round], None] | None = None):
        self.root, self.document, self.source, self.choice = root, document, source, choice
        self.max_rounds, self.strict, self.on_round = max_rounds, strict, on_round or (lambda r: None)

    def run(self) -> Outcome:
        outcome = Outcome(self.choice.name, self.choice.offline)
        if self.choice.offline:
            fallback = Path(self.source).stem or "Project"
            self._finish(outcome, self.lint(1, offline_draft(self.document, self.source, fallback)))
            return outcome
        before = spec_digests(self.root)
        try:
            asyncio.run(self._rounds(outcome))
        finally:
            after = spec_digests(self.root)
            outcome.changed = [name for name in SPEC_FILES if before.get(name) != after.get(name)]
        return outcome

    def lint(self, number: int, draft: Draft) -> Round:
        project = lint_project(self.root, texts=draft.texts())
        return Round(number, draft, project.diags, dict(project.sources), feedback(project.diags, project.sources),
                     len(project.tasks))

    def _finish(self, outcome: Outcome, done: Round) -> None:
        outcome.rounds.append(done)
        self.on_round(done)

    async def _rounds(self, outcome: Outcome) -> None:
        from ..compiler.builtin_library import copy_data
        from ..runtime.agents.base import AgentError, make_agent

        try:
            agent = make_agent(self.choice.name, self.choice.config, self.root)
        except AgentError as e:
            outcome.failure = e.message
            return
        builtins = {name: str(c.get("description") or "") for name, c in copy_data()["contracts"].items()}
        existing = _read_existing_contracts(self.root)
        first = first_prompt(self.document, self.source, builtins, list(self.choice.agents), existing)
        prompt = first
        for number in range(1, self.max_rounds + 1):
            text, cut, failure = await self._call(agent, prompt, number, outcome.spent)
            if failure is not None:
                outcome.failure = failure
                return
            try:
                done = self.lint(number, read_answer(text))
            except Unusable as why:
                done = Round(number, None, problem=f"{why} ({cut})" if cut else str(why))
            self._finish(outcome, done)
            if done.clean(self.strict):
                return
            prompt = next_prompt(first, done.draft, done.problem)

    async def _call(self, agent: Any, prompt: str, number: int, spent: Spent) -> tuple[str, str | None, str | None]:
        """(the answer's text, why it is only its start or None, None) or ("", None, why the
        call failed); its usage added to `spent`."""
        from ..runtime.agents.base import AgentError, Request

        cfg = self.choice.config
        timeout = cfg.timeout or TIMEOUT
        cli = providers.get(cfg.provider).cli
        with tempfile.TemporaryDirectory(prefix="harnessc-draft-") as scratch:
            request = Request(task_id="draft", prompt=prompt, purpose="draft", iteration=number, timeout=timeout,
                              max_tokens=cfg.max_tokens, root=self.root, workdir=Path(scratch) if cli else None)
            try:
                resp = await asyncio.wait_for(agent.call(request), timeout + GRACE)
            except TimeoutError:
                spent.add({"usage": None, "cost_usd": 0.0, "cost_source": "no_response"})
                return "", None, f"agent '{self.choice.name}': no answer within {timeout + GRACE:g}s"
            except AgentError as e:
                spent.add(e.charged())
                return "", None, e.message
        spent.add(resp.charged())
        return resp.text, resp.truncated, None


def feedback(diags: Diagnostics, sources: dict[str, str]) -> str:
    """lint's report as the agent is sent it (its files' own names), at most MAX_FEEDBACK_CHARS."""
    text = render_text(diags.sorted(), sources, None, REPEATS_SHOWN)
    if len(text) > MAX_FEEDBACK_CHARS:
        cut = text.rfind("\n", 0, MAX_FEEDBACK_CHARS)
        text = text[:cut] + f"\n[... more problems not shown: fix these first; {len(diags.errors)} errors in all]\n"
    return text


def spec_digests(root: Path) -> dict[str, str | None]:
    """sha256 of each spec file (None: none there). harnessc never writes them here; an agent
    running in the project (a command agent) could, and the user is told."""
    import hashlib

    digests = {}
    for name in SPEC_FILES:
        try:
            with (root / name).open("rb") as f:
                digests[name] = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            digests[name] = None
    return digests


def _read_existing_contracts(root: Path) -> str | None:
    """The project's contracts.yaml (the prompt shows it: its contracts may be named), or
    None when there is none (or a link, or no text)."""
    path = root / CONTRACTS
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            return f.read(MAX_EXISTING_CONTRACTS_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
