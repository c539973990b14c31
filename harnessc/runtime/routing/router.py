"""Routing at run time: which agent serves a task's next iteration.

The compiler chose an agent per task and a chain after it (the task's named alternatives,
then the stronger agents of routing.escalation, capped at routing.max_fallbacks). A task's
`Route` walks that chain:

* `fall_back` - the agent failed in a way that will not clear soon (a key, a quota, the
  request refused, transient errors past their limit): the next agent serves the task, and
  the failure does not count as a failed verification;
* `escalate` - verification kept failing and on_failure is `escalate`: the next agent,
  with the task's retry count reset.

Each move is an event with the reason. The `Router` is the one place that decides which
agents a run may use and in which order. An agent the pre-flight found unusable for a task
(`unusable`, runtime/preflight.py: no key, no SDK, no executable, no cassette) is left out
of that task's route.

A task the compiler routed `auto` (routing.default: auto, nothing pinned) is routed again
here: among the plan's agents, the cheapest one expected to succeed (each agent's `tier`
against the tier the task's analysis asks for, corrected by what history.py has seen it do
on this complexity and contract) comes first, then the other agents expected to succeed, by
cost. When the budget left cannot pay for the rest of the plan (`step_down`), tasks that
are not critical or high priority ask for one tier less. An agent's health and daily limits
are checked before each call (health.py), not here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ...errors import HarnesscError
from ...estimates import cost_usd
from ...planfile import PlanNode
from ...providers import AgentConfig
from .history import History

REHEARSAL = "rehearsal"  # the built-in simulate agent of a plan without agents
TIER_RANK = {"fast": 0, "balanced": 1, "powerful": 2}
COMPLEXITY_TIER = {"trivial": "fast", "simple": "fast", "medium": "balanced", "complex": "powerful",
                   "epic": "powerful"}
PRIOR_BY_GAP = {0: 0.9, 1: 0.5, 2: 0.2}  # chance of success by tiers short of what the task needs
STRENGTH_BONUS = 0.1  # added to the prior for each of the task's needs the agent lists as a strength
LARGE_CONTEXT = 50_000  # estimated input tokens from which a task needs `large_context`
EXPECTED = 0.7  # an agent below this chance is not chosen first
HOPELESS = 0.3  # ... and below this one not even as a fallback (unless nothing else is left)


@dataclass
class Route:
    """One task's place on its chain of agents."""

    agents: list[str]
    index: int = 0
    moves: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, from, to)

    @property
    def agent(self) -> str:
        return self.agents[self.index]

    @property
    def next_agent(self) -> str | None:
        return self.agents[self.index + 1] if self.index + 1 < len(self.agents) else None

    def fall_back(self) -> str | None:
        """Move to the next agent after a failure of the agent itself; None at the end."""
        return self._move("fallback")

    def escalate(self) -> str | None:
        """Move to the next (stronger) agent after failed verifications; None at the top."""
        return self._move("escalation")

    def resume_at(self, agent: str) -> bool:
        """Go on at `agent`, where an earlier run's escalation left the task, when it is
        further along this route; False (and no move) otherwise."""
        if agent not in self.agents[self.index + 1:]:
            return False
        target = self.agents.index(agent, self.index + 1)
        self.moves.append(("resumed", self.agent, agent))
        self.index = target
        return True

    def _move(self, kind: str) -> str | None:
        nxt = self.next_agent
        if nxt is not None:
            self.moves.append((kind, self.agent, nxt))
            self.index += 1
        return nxt


class RoutingError(HarnesscError, ValueError):
    """A run option names an agent the plan does not define."""


class Router:
    """Hands each task its route: the build-time agent first, then its chain.

    `force` (run --agent NAME) serves every task with one agent; `only` (run --agents a,b)
    keeps each route to those agents, in the route's order, and when none of a task's own
    agents is allowed the task gets the first of them.
    """

    def __init__(self, agents: Mapping[str, AgentConfig] = MappingProxyType({}), force: str | None = None,
                 only: Sequence[str] | None = None, history: History | None = None):
        self.configs = dict(agents)
        self.history = history
        self.step_down = False  # the budget left cannot pay for the preferred tiers
        known = set(self.configs) | {REHEARSAL}
        for name in [force] if force else list(only or ()):
            if name not in known:
                raise RoutingError(f"agent '{name}' is not defined in harness.yaml "
                                   f"(defined: {', '.join(sorted(known))})")
        self.force = force
        self.only = list(dict.fromkeys(only)) if only else None
        # (agent, task id) -> True when the agent cannot serve the task (set by the run)
        self.unusable: Callable[[str, str], bool] | None = None

    def route(self, node: PlanNode) -> Route:
        """The task's chain without the agents that cannot serve it (the run refused to start
        when none can; the whole chain then, so the call says why)."""
        agents = self.chain(node)
        if self.unusable is not None:
            agents = [a for a in agents if not self.unusable(a, node.id)] or agents
        return Route(agents)

    def chain(self, node: PlanNode) -> list[str]:
        """Every agent that may serve the task, in order, usable or not."""
        if self.force:
            return [self.force]
        if node.routing.auto and len(self.configs) > 1:
            agents = self.ranked(node)
        else:
            first = node.routing.agent or REHEARSAL
            agents = list(dict.fromkeys([first, *(node.routing.chain or [])]))
        if self.only is not None:
            agents = [a for a in agents if a in self.only] or self.only[:1]
        return agents

    # ------------------------------------------------------------------ auto

    def needed_tier(self, node: PlanNode) -> int:
        tier = node.analysis.tier if node.analysis else COMPLEXITY_TIER.get(node.complexity, "balanced")
        rank = TIER_RANK[tier]
        if self.step_down and node.priority not in ("critical", "high"):
            rank = max(rank - 1, 0)
        return rank

    def expected_success(self, agent: str, node: PlanNode) -> float:
        have = TIER_RANK[self.tier(agent)]
        prior = PRIOR_BY_GAP.get(max(self.needed_tier(node) - have, 0), 0.2)
        prior = min(prior + STRENGTH_BONUS * self.strengths_matched(agent, node), 0.95)
        return self.history.expected_success(agent, node, prior) if self.history else prior

    def strengths_matched(self, agent: str, node: PlanNode) -> int:
        needs = set(node.analysis.needs if node.analysis else ())
        if node.estimate is not None and node.estimate.input_tokens >= LARGE_CONTEXT:
            needs.add("large_context")
        config = self.configs.get(agent)
        return len(needs & set(config.strengths if config else ()))

    def tier(self, agent: str) -> str:
        config = self.configs.get(agent)
        return config.tier if config else "balanced"

    def call_cost(self, agent: str, node: PlanNode) -> float:
        """One call's estimated USD on `agent` (0 without a price: cheapest, so tiers decide)."""
        config = self.configs.get(agent)
        price = config.price if config else None
        if price is None or node.estimate is None:
            return 0.0
        return cost_usd(node.estimate.input_tokens, node.estimate.output_tokens, price.input, price.output)

    def ranked(self, node: PlanNode) -> list[str]:
        """The agents for an auto-routed task: expected to succeed by cost (then weaker tier
        first), then the rest that still stand a chance, most likely first."""
        scored = []
        for agent in [a for a in self.configs if a != REHEARSAL] or [REHEARSAL]:
            tier = TIER_RANK[self.tier(agent)]
            scored.append((agent, self.expected_success(agent, node), self.call_cost(agent, node), tier))
        # equal cost (e.g. no prices): the weaker tier first, then the likelier to succeed
        good = sorted((s for s in scored if s[1] >= EXPECTED), key=lambda s: (s[2], s[3], -s[1]))
        maybe = sorted((s for s in scored if HOPELESS <= s[1] < EXPECTED), key=lambda s: (-s[1], s[2]))
        ordered = [s[0] for s in good + maybe]
        return ordered or [max(scored, key=lambda s: s[1])[0]]

    def record(self, agent: str, node: PlanNode, ok: bool, cost: float) -> None:
        """A verified or rejected claim: history learns from it within this run too."""
        if self.history is not None:
            self.history.record(agent, node, ok, cost)
