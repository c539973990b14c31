"""Context staging: which of a task's context files fit its token budget (seed 000 §2.3).

A `context:` entry may end with a priority in parentheses — `src/core.py (critical)`,
`docs/*.md (low)`; without one it is `medium` (the syntax: compiler/contextentry.py). The files go in by priority (critical, high,
medium, low), then in the order written, while they fit `context_tokens`; a critical file
that does not fit is cut to what is left, any other is left out. The prompt names what was
left out, and plan.json records every file's fate (`context_staging`).

The budget is the task's `context_tokens`, else harness.yaml's `defaults.context_tokens` when
written there, else half the smallest context window among the agents the task may run on
(its agent and fallback chain; the other half holds the rest of the prompt, the loop's
memory and the answer), else the built-in 32000 when no window is known.

`context: auto` (`auto(N)`) adds the files compiler/retrieval.py finds most related to the
task after the named files have been staged: their budget is what the named files left, or
N when that is smaller; they go in whole, best first, with priority `auto`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..estimates import tokens_for_chars
from ..planfile import AutoContext, AutoStaging, BudgetSource, ContextStaging, RetrievedFile, StagedFile
from .contextentry import PRIORITIES

WINDOW_SHARE = 0.5  # of the smallest window: the context files' share of a prompt


def choose_budget(task_tokens: int | None, defaults_tokens: int | None, built_in: int,
                  windows: Iterable[tuple[str, int | None]]) -> tuple[int, BudgetSource]:
    """A task's context budget and where it came from. `defaults_tokens` is None unless
    harness.yaml writes it; `windows` are (agent, its context window or None), the task's
    agent first; of equal windows the first agent is named."""
    if task_tokens:
        return task_tokens, BudgetSource("task")
    if defaults_tokens is not None:
        return defaults_tokens, BudgetSource("defaults")
    known = [(window, agent) for agent, window in windows if window]
    if not known:
        return built_in, BudgetSource("built-in")
    window, agent = min(known, key=lambda pair: pair[0])
    return max(1, int(window * WINDOW_SHARE)), BudgetSource("window", agent, window)


def stage(files: list[str], priority: dict[str, str], budget: int, root: str,
          source: BudgetSource | None = None) -> tuple[list[str], ContextStaging]:
    """(the files kept, in the order written; the staging record for plan.json)."""
    sized = []
    for order, rel in enumerate(files):
        try:
            size = os.lstat(os.path.join(root, rel)).st_size  # checked not to be a link by then
        except OSError:
            size = 0
        sized.append((PRIORITIES.index(priority.get(rel, "medium")), order, rel, tokens_for_chars(size)))
    left = budget
    fate: dict[str, StagedFile] = {}
    for rank, _, rel, tokens in sorted(sized):
        if tokens <= left:
            kept, allowed = "whole", tokens
        elif rank == 0 and left > 0:
            kept, allowed = "cut", left
        else:
            kept, allowed = "left out", 0
        left -= allowed
        fate[rel] = StagedFile(rel, PRIORITIES[rank], tokens, kept, allowed)
    record = ContextStaging(budget, source, budget - left, [fate[rel] for _, _, rel, _ in sized])
    return [rel for rel in files if fate[rel].kept != "left out"], record


def auto_budget(record: ContextStaging, asked: int | None) -> int:
    """The tokens `auto` (`auto(N)`: asked=N) has: what the named files left, at most N."""
    left = max(record.budget - record.used, 0)
    return left if asked is None else min(asked, left)


def add_retrieved(kept: list[str], record: ContextStaging, asked: int | None, chosen: list,
                  indexed: int, words: list[str]) -> tuple[list[str], AutoStaging]:
    """The named files kept plus the retrieved ones (retrieval.Choice, within auto_budget),
    and the staging record with them and what retrieval looked at."""
    files = [RetrievedFile(c.path, "auto", c.tokens, "whole", c.tokens, c.score, list(c.matched)) for c in chosen]
    used = sum(f.tokens for f in files)
    auto = AutoContext(asked, auto_budget(record, asked), used, indexed, list(words[:30]))
    return ([*kept, *(f.path for f in files)],
            AutoStaging(record.budget, record.budget_from, record.used + used, [*record.files, *files], auto))
