"""Plain-text helpers shared by every message: counts with the right plural, short durations,
aligned tables."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
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


def routing_line(event: dict) -> str:
    """One routing decision, as `log` and the report show it."""
    if event["kind"] == "routed":
        return "routed (auto): " + " -> ".join(event.get("agents") or [])
    return f"{event['kind']}: {event.get('agent')} -> {event.get('to')} ({event.get('reason')})"


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


_CODE = re.compile(r"(`[^`]*`)")  # a command or value quoted in backticks: never cut
LEAD_IN = 100  # characters of prose kept before a command: what it is for


def shorten(text: str, limit: int) -> str:
    """`text` in about `limit` characters: the prose around backtick-quoted commands is cut
    at word boundaries (longest part first, marked "..."), keeping the words that lead into
    a command; the commands stay whole, so a line ending "(`harnessc tell a \"...\"`)" can
    still be pasted (it may stay over `limit` for them)."""
    if len(text) <= limit:
        return text
    parts = _CODE.split(text)  # prose at even indexes, commands at odd ones
    excess = len(text) - limit
    for i in sorted(range(0, len(parts), 2), key=lambda i: -len(parts[i])):
        if excess <= 0:
            break
        before_command = i + 1 < len(parts)
        cut = _elide(parts[i], excess, LEAD_IN if before_command else 0)
        excess -= len(parts[i]) - len(cut)
        parts[i] = cut
    return "".join(parts)


def _elide(prose: str, drop: int, tail: int) -> str:
    """`prose` at least `drop` characters shorter, its middle (or end) replaced by "...", cut
    between words; up to `tail` characters of its end are kept."""
    keep = len(prose) - drop - 3
    if keep <= 0:
        return (" " if prose.startswith(" ") else "") + "..." + (" " if prose.endswith(" ") else "")
    tail = min(tail, keep // 2)
    head = prose[:keep - tail]
    if not prose[len(head)].isspace():  # back to the end of the last whole word
        head = head[:head.rfind(" ") + 1] if " " in head else ""
    end = prose[len(prose) - tail:] if tail else ""
    if end and not prose[len(prose) - tail - 1].isspace():  # on to the start of the next word
        end = end[end.find(" ") + 1:] if " " in end else ""
    return head.rstrip() + "..." + (" " + end if end else "")


# The ids harnessc gives accept commands that have none (compiler/plan.py, contract_schema.py):
# they name a position, not the check, so a message names the command instead.
_GIVEN_ACCEPT_ID = re.compile(r"(task-)?accept-\d+")
COMMAND_CHARS = 200  # of a command's text in a one-line message


def command_text(argv: Sequence[str] | None, limit: int = COMMAND_CHARS) -> str:
    """A command as a shell would take it (`python3 -c 'print(1)'`), cut to `limit` characters."""
    text = shlex.join(str(a) for a in argv or ())
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def accept_name(check: dict) -> str:
    """An accept check by its own id, or by its command when its id is one harnessc gave
    (`task-accept-1` says nothing a reader can use)."""
    given = check.get("id")
    if given and not _GIVEN_ACCEPT_ID.fullmatch(given):
        return given
    return command_text(check.get("argv")) or given or "?"


def command_prefix(root: Path) -> str:
    """`harnessc`, with `-C DIR` when the project is not the current directory: a hint printed
    after `harnessc -C specs/demo run` must work pasted where that command ran."""
    here = Path.cwd().resolve()
    if root.resolve() == here:
        return "harnessc"
    rel = os.path.relpath(root.resolve(), here)
    return f"harnessc -C {shlex.quote(rel if not rel.startswith('../../..') else str(root.resolve()))}"


def filled_text(filled: list[dict] | None) -> str:
    """'title (example, the answer's was invalid), score (default, missing from the answer)': the fields a
    fallback output took from the contract, not from the agent."""
    def one(f: dict) -> str:
        source = f.get("from") or "nothing could fill it"
        was = {"missing": "missing from the answer", "invalid": "the answer's was invalid"}.get(f.get("was"), "")
        return f"{f.get('field')} ({source}{', ' + was if was else ''})"
    return ", ".join(one(f) for f in filled or () if isinstance(f, dict))
