"""Plain-text helpers shared by every message: counts with the right plural, short durations,
aligned tables."""

from __future__ import annotations

from typing import Sequence


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 task', '2 tasks', '0 tasks'; `many` for irregular plurals ('1 dependency', '2 dependencies')."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def duration(seconds: float) -> str:
    """A duration to read at a glance, to the second: '42s', '5m', '1h05m', '2d3h'."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size or parts:
            parts.append(f"{s // size:02d}{unit}" if parts else f"{s // size}{unit}")
            s %= size
        if len(parts) == 2:
            break
    return "".join(p for p in parts if not p.startswith("00")) or "0s"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()) -> str:
    """Columns aligned with two spaces, a dashed rule under the header; the columns named in
    `right` are right-aligned. No trailing spaces."""
    cells = [list(header)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(f"{c:>{w}}" if h in right else f"{c:<{w}}"
                               for c, w, h in zip(r, widths, header)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
