"""File evidence from a change that comes back as a diff (executor ray).

A remote attempt's call runs on a worker, whose checkout holds the attempt's change so far;
what comes back is that whole change, one binary diff against the attempt's base
(executor/bundle.change_of), and the driver's worktree may never be made. An iteration's
file evidence is then the difference between the change held before its call and the one
held after: a path changed when its part of the diff differs; its lines added and removed
are counted as files.py counts them (multisets of lines; binary files count none), since a
file's lines are its base's, less the diff's `-` lines, plus its `+` lines. Commits made on
the worker are folded into the diff: none is counted.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from . import files as filesmod
from .files import FileChanges

_HEADER = b"diff --git "
_OCTAL = re.compile(rb"\\([0-7]{3}|.)", re.S)
_ESCAPES = {b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\", b"a": b"\a", b"b": b"\b", b"f": b"\f",
            b"r": b"\r", b"v": b"\v"}


@dataclass(frozen=True)
class FileDiff:
    """One path's part of a diff against the base."""

    text: bytes
    created: bool  # absent in the base
    deleted: bool  # absent in the change
    lines: Counter | None  # the change's line counts over the base (+1 added, -1 removed); None: binary


def parse(diff: bytes) -> dict[str, FileDiff]:
    """Path (from the repository's top) -> its part of a `git diff --binary --no-renames`."""
    out: dict[str, FileDiff] = {}
    for part in diff.split(b"\n" + _HEADER):
        part = part.removeprefix(_HEADER).rstrip(b"\n")  # the last part keeps the diff's last newline
        if not part.strip():
            continue
        head, _, body = part.partition(b"\n")
        path = _path(head)
        if path is None:
            continue
        lines: Counter | None = Counter()
        hunks = False
        for line in body.split(b"\n"):
            if line.startswith(b"@@"):
                hunks = True
            elif line.startswith(b"GIT binary patch") or line.startswith(b"Binary files "):
                lines = None
                break
            elif hunks and line[:1] == b"+":
                lines[line[1:]] += 1
            elif hunks and line[:1] == b"-":
                lines[line[1:]] -= 1
        meta = body.split(b"\n@@", 1)[0]
        out[path] = FileDiff(part, b"\nnew file mode " in b"\n" + meta, b"\ndeleted file mode " in b"\n" + meta,
                             lines)
    return out


def _path(head: bytes) -> str | None:
    """The path of a `diff --git a/X b/X` header (X the same on both sides: no renames), quoted or not."""
    if head.startswith(b'"'):  # C-quoted: "a/X" "b/X"
        end = 1
        while end < len(head) and head[end] != ord('"'):
            end += 2 if head[end] == ord("\\") else 1
        raw = _OCTAL.sub(lambda m: bytes([int(m[1], 8)]) if len(m[1]) == 3 else _ESCAPES.get(m[1], m[1]),
                         head[1:end])
    else:  # a/X b/X: X is as long on both sides
        raw = head[: (len(head) - 1) // 2]
    if not raw.startswith(b"a/"):
        return None
    return raw[2:].decode("utf-8", "surrogateescape")


def changes(before: bytes, after: bytes, prefix: str = "") -> FileChanges:
    """What changed from the change `before` to the change `after` (both against one base),
    in the project (`prefix`: its directory in the repository), files.EXCLUDED aside."""
    old, new = parse(before), parse(after)
    per_path: dict[str, tuple[int, int, bool]] = {}
    for path in sorted(old.keys() | new.keys()):
        if not path.startswith(prefix) or any(p in filesmod.EXCLUDED for p in path.split("/")[:-1]):
            continue
        a, b = old.get(path), new.get(path)
        if (a.text if a else None) == (b.text if b else None):
            continue
        there_before = not a.deleted if a else not b.created
        there_after = not b.deleted if b else not a.created
        added = removed = 0
        if (a is None or a.lines is not None) and (b is None or b.lines is not None):
            delta = Counter()
            delta.update(b.lines if b else {})
            delta.subtract(a.lines if a else {})
            added = sum(n for n in delta.values() if n > 0)
            removed = -sum(n for n in delta.values() if n < 0)
        per_path[path] = (added, removed, not there_before and there_after)
    return filesmod.total("git", per_path)


class ReturnedChange:
    """An attempt's side of its file evidence when its change comes back from its calls:
    `held()` is the change the attempt holds now (a diff against its base)."""

    def __init__(self, held: Callable[[], bytes], prefix: str = ""):
        self.held, self.prefix = held, prefix
        self.start: bytes | None = None

    async def begin(self) -> None:
        """Before the call: the change as it finds it."""
        self.start = self.held()

    async def measure(self, text: str = "") -> FileChanges | None:
        """What the call changed (None when no call began)."""
        before, self.start = self.start, None
        if before is None:
            return None
        after = self.held()
        if after == before:
            return filesmod.total("git", {})
        return await asyncio.to_thread(changes, before, after, self.prefix)
