"""Tasks as roadmap.md writes them: plain dataclasses (built by our own parser, already typed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..diagnostics import Span
from .vocab import Complexity, FailureStrategy, Priority


@dataclass(eq=True, slots=True)  # slots: 100k tasks in memory at once must stay small
class Task:
    """One task of roadmap.md, as written (aliases resolved, values typed)."""

    id: str
    title: str
    span: Span  # where the id is written
    phase: str | None = None
    done: bool = False
    depends_on: list[str] = field(default_factory=list)
    contract: str | None = None
    agent: list[str] = field(default_factory=list)  # [] = unset; ["auto"] = router decides
    model: str | None = None
    complexity: Complexity | None = None
    priority: Priority | None = None
    max_iterations: int | Literal["unlimited"] | None = None
    max_time: int | float | None = None
    stuck_after: int | None = None
    completion_promise: str | None = None
    success: str | None = None
    accept: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    max_retries: int | None = None
    on_failure: FailureStrategy | None = None
    budget: float | None = None
    tags: list[str] = field(default_factory=list)
    goal: str = ""
    # where each part was written: "id", "title", and property keys (canonical names)
    spans: dict[str, Span] = field(default_factory=dict)
    value_spans: dict[str, list[Span]] = field(default_factory=dict)


@dataclass(eq=True)
class Roadmap:
    path: str
    title: str | None = None
    overview: str = ""
    tasks: list[Task] = field(default_factory=list)
