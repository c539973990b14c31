"""Tasks as roadmap.md writes them: plain dataclasses (built by our own parser, already typed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from ..diagnostics import Span
from ..vocab import Complexity, FailureStrategy, GitMode, IsolationMode, Priority, SelectMode


@dataclass(eq=True, slots=True)  # slots: 100k tasks in memory at once must stay small
class Task:
    """One task of roadmap.md, as written (aliases resolved, values typed). Lists are
    tuples: the IR is read, never changed, and a task without tags costs no list."""

    id: str
    title: str
    line: int = 1  # where the id is written (see span)
    col: int = 1
    phase: str | None = None
    done: bool = False
    depends_on: tuple[str, ...] = ()
    contract: str | None = None
    agent: tuple[str, ...] = ()  # () = unset; ("auto",) = router decides
    model: str | None = None
    complexity: Complexity | None = None
    priority: Priority | None = None
    max_iterations: int | Literal["unlimited"] | None = None
    max_time: int | float | None = None
    stuck_after: int | None = None
    progress_threshold: float | None = None  # loop.progress.threshold for this task
    recovery: tuple[str, ...] = ()  # its recovery ladder's rungs (vocab.RUNGS); (): harness.yaml's
    completion_promise: str | None = None
    success: str | None = None
    accept: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    context_tokens: int | None = None
    max_retries: int | None = None
    on_failure: FailureStrategy | None = None
    budget: float | None = None
    tags: tuple[str, ...] = ()
    git: GitMode | None = None
    isolation: IsolationMode | None = None
    approaches: int | None = None  # best-of-N: approaches at once, each in its own worktree
    select: SelectMode | None = None  # which approach lands; None: best with a score, else first
    score: str | None = None  # a command whose last output line is the approach's score
    min_score: float | None = None
    resources: dict[str, int | float] | None = None  # custom Ray resources each attempt asks for (executor: ray)
    min_passed: int | Literal["base"] | None = None  # passing tests each accept command's runner must report
    retry_on: tuple[str, ...] = ()  # kinds of failure retried (vocab.ERROR_KINDS); (): every kind
    dont_retry: tuple[str, ...] = ()  # kinds of failure never retried: on_failure at once
    start_level: int | None = None  # the first retry's refinement level (1-3); None: 1
    protect: tuple[str, ...] = ()  # globs the agent may not change (besides the defaults: protectrules.py)
    allow_edit: tuple[str, ...] = ()  # globs lifting protection
    write_scope: tuple[str, ...] = ()  # globs: a change outside them is rejected; (): anywhere
    review: bool | None = None  # a person approves its verified result before it lands (None: the contract's)
    split: bool | None = None  # its first call proposes subtasks; it is done when they are (runtime/growth/)
    goal: str = ""
    # the roadmap this task was read from: positions beyond `span` are looked up there
    source: "TaskSource | None" = field(default=None, compare=False, repr=False)

    @property
    def span(self) -> Span:
        """Where the id is written (made when asked for: a diagnostic, so rarely)."""
        path = self.source.path if self.source is not None else "roadmap.md"
        return Span(path, self.line, self.col, self.line, self.col + len(self.id))

    @property
    def spans(self) -> dict[str, Span]:
        """Where each part was written: "id", "title", and property keys (canonical names)."""
        return self.source.spans(self) if self.source is not None else {"id": self.span}

    @property
    def value_spans(self) -> dict[str, list[Span]]:
        """One span per value of each property (per list item for comma lists)."""
        return self.source.value_spans(self) if self.source is not None else {}


class TaskSource:
    """A parsed roadmap's text, shared by its tasks.

    Only a task's id position is kept; the spans of its title, keys and values are worked out
    again from the text when asked for (by a diagnostic, so rarely). Keeping them all made
    a parsed roadmap ten times the size of its text.
    """

    LOCATED_KEPT = 8  # tasks whose spans are kept: a check reports a task's problems together

    def __init__(self, text: str, path: str, locate: Callable[[TaskSource, Task], tuple[dict, dict]]):
        """`locate`: (spans, value_spans) of one task read again from the text - the parser's
        (roadmap.locate_spans), which builds on these classes."""
        self.text, self.path = text, path
        self.locate = locate
        self._lines: list[str] | None = None
        # task line -> its (spans, value_spans): one diagnostic a value of a long property
        # list re-read the whole list for each (quadratic: 19 s for 4,000 context paths)
        self._located: dict[int, tuple[dict, dict]] = {}

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.text.splitlines()
        return self._lines

    def spans(self, task: "Task") -> dict[str, Span]:
        return self._locate(task)[0]

    def value_spans(self, task: "Task") -> dict[str, list[Span]]:
        return self._locate(task)[1]

    def _locate(self, task: "Task") -> tuple[dict, dict]:
        found = self._located.get(task.line)
        if found is None:
            found = self.locate(self, task)
            if len(self._located) >= self.LOCATED_KEPT:
                del self._located[next(iter(self._located))]
            self._located[task.line] = found
        return found

    def __deepcopy__(self, memo) -> "TaskSource":
        return self  # immutable text: copies of a task share it


@dataclass(eq=True)
class Roadmap:
    path: str
    title: str | None = None
    overview: str = ""
    tasks: list[Task] = field(default_factory=list)
    ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)  # task id -> codes to ignore there


def approaches_of(task: Task, default: int) -> int:
    """How many approaches the task runs: its own `approaches:`, else harness.yaml's - but a
    task that says `isolation: none` runs one (several need worktrees)."""
    if task.approaches:
        return task.approaches
    return 1 if getattr(task.isolation, "value", task.isolation) == "none" else default
