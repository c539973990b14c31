"""Routing: which agent serves a task's next iteration.

For now the compiler's decision (node.routing.agent) is final. Fallback chains and
escalation will grow here, behind the same function.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AttemptState:
    """What the router may look at: the task's history so far in this run."""

    iteration: int = 0
    failures: int = 0  # failed claims and failed calls
    transient_errors: int = 0
    last_agent: str | None = None
    errors: list[str] = field(default_factory=list)


def route(node: dict, state: AttemptState) -> str:
    routing = node.get("routing") or {}
    agent = routing.get("agent")
    if agent:
        return agent
    chain = routing.get("chain") or []
    return chain[0] if chain else "rehearsal"
