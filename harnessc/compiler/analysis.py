"""Task analysis: how hard a task looks from what the spec says, and the agent tier it needs.

An explicit `complexity:` wins. Otherwise points add up from the goal's wording (design and
architecture words weigh most, then research, then implementation; chores weigh less), its
length, the contract's size (fields and rules), accept commands and fan-in (dependencies
whose outputs the task must combine). The score maps onto trivial..epic, and that onto a
tier: trivial/simple -> fast, medium -> balanced, complex/epic -> powerful. Every point
comes with its reason, so `plan.json` and `harnessc ls --output json` can say why.
"""

from __future__ import annotations

import re
from typing import Any

from ..planfile import Analysis
from ..wording import plural

NEEDS = {"design/architecture": "reasoning", "research": "research", "implementation": "implementation"}
WORDS: tuple[tuple[str, float, frozenset[str]], ...] = (
    ("design/architecture", 2.0, frozenset({
        "architecture", "architect", "design", "redesign", "refactor", "migrate", "migration", "distributed",
        "concurrency", "concurrent", "security", "scalability", "scale", "protocol", "framework", "optimize",
        "optimise", "performance"})),
    ("research", 1.0, frozenset({
        "research", "investigate", "compare", "evaluate", "analyze", "analyse", "analysis", "survey", "assess",
        "benchmark", "study"})),
    ("implementation", 1.0, frozenset({
        "implement", "build", "write", "develop", "integrate", "add", "create", "fix", "test", "port"})),
    ("chore", -1.0, frozenset({"rename", "typo", "bump", "reformat", "format", "lint", "tidy", "cleanup"})),
)
LEVELS = (("trivial", 1.5), ("simple", 3.5), ("medium", 6.0), ("complex", 9.0))  # below the bound
TIERS = {"trivial": "fast", "simple": "fast", "medium": "balanced", "complex": "powerful", "epic": "powerful"}
_WORD = re.compile(r"[a-z]+")


def analyse(title: str, goal: str, success: str | None, written: str | None, size: tuple[int, int],
            accept: int, fan_in: int) -> Analysis:
    """The task's complexity (written, or scored), the tier it needs, the reasons, and what
    its wording asks of an agent (`needs`, matched against agents' `strengths`). `size` is
    its contract's contract_size(), measured once per contract however many tasks share it."""
    scored = _score(title, goal, success, size, accept, fan_in)
    if written:
        return Analysis(written, TIERS[written], None, [f"complexity {written}: written in the roadmap"],
                        scored.needs)
    return scored


def _score(title: str, goal: str, success: str | None, size: tuple[int, int], accept: int, fan_in: int) -> Analysis:
    text = f"{title} {goal} {success or ''}".lower()
    words = _WORD.findall(text)
    present = set(words)
    score, reasons, needs = 0.0, [], []

    def add(points: float, why: str) -> None:
        nonlocal score
        if points:
            score += points
            reasons.append(f"{points:+g} {why}")

    for kind, weight, vocabulary in WORDS:
        hits = sorted(present & vocabulary)
        if hits:
            add(weight, f"{kind} wording ({', '.join(hits[:3])})")
            if kind in NEEDS:
                needs.append(NEEDS[kind])
    add(round(min(len(words) / 40, 3.0), 2), plural(len(words), "word"))
    fields, rules = size
    add(round(min(fields / 5, 2.0), 2), plural(fields, "contract field"))
    add(round(min(rules / 3, 1.0), 2), plural(rules, "contract rule"))
    add(1.0 if accept else 0.0, plural(accept, "accept command"))
    add(min(fan_in * 0.5, 2.0), plural(fan_in, "dependency", "dependencies"))
    score = round(max(score, 0.0), 2)
    level = next((name for name, bound in LEVELS if score < bound), "epic")
    return Analysis(level, TIERS[level], score, reasons, needs)


def contract_size(contract: Any) -> tuple[int, int]:
    """(fields, rules) of a contract's output, nested fields and items included; (0, 0)
    without a contract."""
    if not contract or not contract.get("output"):
        return 0, 0
    fields = rules = 0
    stack = list(contract["output"].values())
    while stack:
        d = stack.pop()
        if not isinstance(d, dict):
            continue
        fields += 1
        rules += len(d.get("rules") or ())
        stack.extend((d.get("fields") or {}).values())
        if isinstance(d.get("items"), dict):
            stack.append(d["items"])
    return fields, rules + len(contract.get("output_rules") or ())
