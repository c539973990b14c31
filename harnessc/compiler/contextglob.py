"""Expanding a task's `context:` patterns into files, without following links.

Like glob.glob(recursive=True): `*`, `?` and `[...]` within one name, `**` for any number of
directories, and names starting with `.` matched only by a pattern that starts with `.`; a
directory stands for every file below it. Unlike glob, no symbolic link is followed: a link
that a pattern names or meets is reported (context files are read without following links,
so it could never be given to the agent), and a directory link is never descended into,
which is what makes `x -> .` with `**` finite. At most MAX_MATCHES files per pattern.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from fnmatch import fnmatchcase

MAX_MATCHES = 10_000  # files one context pattern may name (documented in spec-reference.md)
_MAGIC = frozenset("*?[")


@dataclass
class Expansion:
    files: list[str]  # project-relative posix paths, sorted, at most MAX_MATCHES
    found: bool = False  # the pattern matched something (a file, a directory or a link)
    link: str | None = None  # the first symbolic link met, when there is one
    capped: bool = False  # more than MAX_MATCHES files: the walk stopped


class _Stop(Exception):
    """The walk is over: a link was met or the cap was passed."""


def expand(pattern: str, root: str) -> Expansion:
    """The files `pattern` (relative, no `..`: checked before) names under `root`."""
    out = Expansion(files=[])
    parts = [p for p in pattern.replace(os.sep, "/").split("/") if p not in ("", ".")]
    dirs_only = pattern.endswith("/")  # as in glob: `src/*/` names directories only
    try:
        for rel in _match(root, "", parts):
            if dirs_only and os.path.isfile(os.path.join(root, rel)) and not os.path.islink(os.path.join(root, rel)):
                continue
            out.found = True
            _collect(root, rel, out)
    except _Stop:
        pass
    out.files.sort()
    return out


def _collect(root: str, rel: str, out: Expansion) -> None:
    """Add the file `rel`, or every file below directory `rel`; stop at a link or the cap."""
    try:
        st = os.lstat(os.path.join(root, rel))
    except OSError:  # gone meanwhile
        return
    if stat.S_ISLNK(st.st_mode):
        out.link = rel
        raise _Stop
    if stat.S_ISREG(st.st_mode):
        _add(out, rel)
    elif stat.S_ISDIR(st.st_mode):
        for entry in _scan(root, rel):
            _collect(root, _join(rel, entry.name), out)


def _add(out: Expansion, rel: str) -> None:
    if len(out.files) >= MAX_MATCHES:
        out.capped = True
        raise _Stop
    out.files.append(rel)


def _match(root: str, rel: str, parts: list[str]):
    """Paths below directory `rel` matching `parts`; a link is yielded, never entered."""
    if not parts:
        yield rel
        return
    head, rest = parts[0], parts[1:]
    if head == "**":
        if rest:
            yield from _match(root, rel, rest)
        for entry in _scan(root, rel):
            if entry.name.startswith("."):
                continue
            path = _join(rel, entry.name)
            if entry.is_dir(follow_symlinks=False):
                yield from _match(root, path, parts)
            elif not rest:
                yield path  # a file, or a link (reported by _collect)
        return
    if not _MAGIC.intersection(head):
        path = _join(rel, head)
        try:
            st = os.lstat(os.path.join(root, path))
        except OSError:
            return
        if not rest or stat.S_ISLNK(st.st_mode):
            yield path  # a link on the way is reported, not followed
        elif stat.S_ISDIR(st.st_mode):
            yield from _match(root, path, rest)
        return
    for entry in _scan(root, rel):
        if entry.name.startswith(".") and not head.startswith("."):
            continue
        if fnmatchcase(entry.name, head):
            path = _join(rel, entry.name)
            if not rest or entry.is_symlink():
                yield path
            elif entry.is_dir(follow_symlinks=False):
                yield from _match(root, path, rest)


def _scan(root: str, rel: str) -> list[os.DirEntry]:
    """The entries of directory `rel`, by name: the first link met is the same every time."""
    try:
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError:  # not a directory, unreadable, gone meanwhile
        return []


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name
