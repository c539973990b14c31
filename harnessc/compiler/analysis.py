"""Task analysis: how hard a task looks from what the spec says, and the agent tier it needs.

An explicit `complexity:` wins. Otherwise points add up from the goal's wording (design and
architecture words weigh most, then research, then implementation; chores weigh less), its
length, the contract's size (fields and rules), accept commands and fan-in (dependencies
whose outputs the task must combine). The score maps onto trivial..epic, and that onto a
tier: trivial/simple -> fast, medium -> balanced, complex/epic -> powerful. Every point
comes with its reason, so `plan.json` and `harnessc ls --output json` can say why.
"""

from __future__ import annotations

from functools import lru_cache
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
# The [a-z]+ runs of lower-cased text, found by bytes: ASCII letters are their own bytes in
# UTF-8 and every other character's bytes are >= 0x80, so blanking every byte but a-z and
# splitting finds the same words as the regex, in half its time (a 10k-task build reads every goal).
_BLANK_ALL_BUT_A_TO_Z = bytes(b if 97 <= b <= 122 else 32 for b in range(256))


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
    words = _words(f"{title} {goal} {success or ''}".lower())
    present = set(words)
    points: list[tuple[float, str]] = []
    needs = []
    for kind, weight, vocabulary in WORDS:
        hits = sorted(present & vocabulary)
        if hits:
            points.append((weight, f"{weight:+g} {kind} wording ({', '.join(hits[:3])})"))
            if kind in NEEDS:
                needs.append(NEEDS[kind])
    fields, rules = size
    points += (_for_count(len(words), 40, 3.0, "word"),
               _for_count(fields, 5, 2.0, "contract field"),
               _for_count(rules, 3, 1.0, "contract rule"),
               _for_count(accept, 1, 1.0, "accept command"),
               _for_count(fan_in, 2, 2.0, "dependency", "dependencies"))
    score, reasons = 0.0, []
    for p, why in points:
        if p:
            score += p
            reasons.append(why)
    score = round(max(score, 0.0), 2)
    level = next((name for name, bound in LEVELS if score < bound), "epic")
    return Analysis(level, TIERS[level], score, reasons, needs)


def _words(lowered: str) -> list[str]:
    """The [a-z]+ runs of `lowered` (see _BLANK_ALL_BUT_A_TO_Z)."""
    return lowered.encode("utf-8", "surrogatepass").translate(_BLANK_ALL_BUT_A_TO_Z).decode("ascii").split()


@lru_cache(maxsize=4096)
def _for_count(n: int, per: float, cap: float, word: str, many: str | None = None) -> tuple[float, str]:
    """The points for n things (one per `per`, at most `cap`) and their reason; the same for
    every task with that count, so made once."""
    points = round(min(n / per, cap), 2)
    return points, f"{points:+g} {plural(n, word, many)}"


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
