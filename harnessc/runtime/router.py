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
agents a run may use; agent health, daily limits and history grow here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..planfile import PlanNode

REHEARSAL = "rehearsal"  # the built-in simulate agent of a plan without agents


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

    def _move(self, kind: str) -> str | None:
        nxt = self.next_agent
        if nxt is not None:
            self.moves.append((kind, self.agent, nxt))
            self.index += 1
        return nxt


class RoutingError(ValueError):
    """A run option names an agent the plan does not define."""


class Router:
    """Hands each task its route: the build-time agent first, then its chain.

    `force` (run --agent NAME) serves every task with one agent; `only` (run --agents a,b)
    keeps each route to those agents, in the route's order, and when none of a task's own
    agents is allowed the task gets the first of them.
    """

    def __init__(self, defined: Iterable[str] = (), force: str | None = None,
                 only: Sequence[str] | None = None):
        known = set(defined) | {REHEARSAL}
        for name in [force] if force else list(only or ()):
            if name not in known:
                raise RoutingError(f"agent '{name}' is not defined in harness.yaml "
                                   f"(defined: {', '.join(sorted(known))})")
        self.force = force
        self.only = list(dict.fromkeys(only)) if only else None

    def route(self, node: PlanNode) -> Route:
        if self.force:
            return Route([self.force])
        first = node.routing.agent or REHEARSAL
        agents = list(dict.fromkeys([first, *(node.routing.chain or [])]))
        if self.only is not None:
            agents = [a for a in agents if a in self.only] or self.only[:1]
        return Route(agents)
