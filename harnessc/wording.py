"""Small wording helpers shared by every message: counts with the right plural."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 task', '2 tasks', '0 tasks'; `many` for irregular plurals ('1 dependency', '2 dependencies')."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
