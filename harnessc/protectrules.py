"""What an agent may not change: a task's protected files (`protect:`, `allow_edit:`,
`write_scope:`), shared by the compiler (plan.json's `protect` entries, each with its reason)
and the runtime (runtime/protect.py, which rejects an attempt that changed one).

A pattern is a glob relative to the project, as `context:` writes them: `*`, `?` and `[...]`
within one name, `**` for any number of directories, and a pattern naming a directory stands
for every path below it. Unlike context, a wildcard also matches names starting with `.`:
protection errs on the side of protecting.

Protected by default: the spec files and the templates directory, `.harness/`, CI
configuration, and every existing file a task's accept or score command names (a token of
its argv, split as commands are, that is a file or directory of the project; a pytest node id
`tests/test_x.py::test_y` names its file). A directory a command names protects the files it
holds at the task's base (new files may be added, so a task can write tests); the project
directory itself (`pytest .`) is never taken, it would protect every file.
"""

from __future__ import annotations

import os
import stat
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from .vocab import SPEC_FILES

HARNESS_DIR = ".harness/"
CI_FILES = (".github/", ".ci/", ".pre-commit-config.yaml")
# the reasons, as messages and `harnessc show` say them
SPEC = "a spec file"
TEMPLATES = "the prompt templates"
OWN = "harnessc's own directory"
CI = "CI configuration"
TASK = "protect: in roadmap.md"
DEFAULTS = "defaults.protect in harness.yaml"


class Entry(NamedTuple):
    path: str  # a glob, or a path a command names (a directory ends with '/')
    why: str
    new: bool = True  # False: only what is there at the task's base (a directory a command names)


def glob_problem(pattern: str) -> str | None:
    """What makes `pattern` no protect/allow_edit/write_scope pattern; None when it is one."""
    if "\0" in pattern:
        return "has a NUL byte"
    if not pattern.strip():
        return "is empty"
    if pattern[0] in "/\\~" or pattern[1:3] == ":\\" or os.path.isabs(pattern):
        return "is absolute"
    if ".." in pattern.replace("\\", "/").split("/"):
        return "leaves the project"
    return None


@lru_cache(maxsize=4096)  # a guard matches each file against every pattern, twice per attempt
def _parts(pattern: str) -> tuple[str, ...]:
    out: list[str] = []
    for p in pattern.replace("\\", "/").split("/"):
        if p in ("", ".") or (p == "**" and out and out[-1] == "**"):
            continue
        out.append(p)
    return tuple(out)


def normal(pattern: str) -> str:
    """The pattern as matched: '/'-separated, no '.' or empty parts ('' for the project itself)."""
    return "/".join(_parts(pattern))


def matches(pattern: str, path: str) -> bool:
    """Whether the project-relative posix `path` is `pattern` or below what it names."""
    return _match(_parts(pattern), tuple(path.split("/")))


def _match(pat: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pat:
        return True  # the pattern named this path or a directory above it
    head, rest = pat[0], pat[1:]
    if head == "**":
        return any(_match(rest, parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], head) and _match(rest, parts[1:])


def matches_any(patterns: Iterable[str], path: str) -> bool:
    return any(matches(p, path) for p in patterns)


def command_paths(argv: Iterable[str], root: Path | None = None, kind: Callable[[str], str | None] | None = None) -> list[str]:
    """The project files and directories (a directory ends with '/') a command's tokens name:
    looked up under `root` (where the command runs) without following links, or by `kind`
    (a project-relative path -> 'file', 'dir' or None: a commit's tree)."""
    out: list[str] = []
    for token in argv:
        rel = _token_path(token)
        if rel is None:
            continue
        what = kind(rel) if kind is not None else _kind(root, rel)
        if what == "dir":
            out.append(rel + "/")
        elif what == "file":
            out.append(rel)
    return list(dict.fromkeys(out))


def kind_in(root: Path | str | None) -> Callable[[str], str | None]:
    """`command_paths`' `kind` for files under `root`, each looked up once (a build: tasks
    name the same files again and again)."""
    return lru_cache(maxsize=None)(lambda rel: _kind(root, rel))


@lru_cache(maxsize=4096)  # a roadmap's commands repeat their words
def _token_path(token: str) -> str | None:
    """The project-relative path a command's token could name; None when it names none."""
    token = token.split("::", 1)[0]  # a pytest node id names its file
    if not token or token[0] == "-" or glob_problem(token) is not None:
        return None
    rel = normal(token)
    if not rel or rel.split("/", 1)[0] == ".harness":
        return None  # the project itself, or harnessc's own directory (protected anyway)
    return rel


def _kind(root: Path | str | None, rel: str) -> str | None:
    try:
        mode = os.lstat(os.path.join(root or ".", rel)).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) or stat.S_ISLNK(mode) else None


def command_entries(accept: Iterable[list[str]], score: list[str] | None, root: Path | None = None,
                    kind: Callable[[str], str | None] | None = None) -> list[Entry]:
    """The entries of what a task's accept and score commands name (a directory: its files at the base)."""
    out = []
    for argv in accept:
        out += [Entry(p, "named in the accept command", not p.endswith("/")) for p in command_paths(argv, root, kind)]
    if score:
        out += [Entry(p, "named in the score command", not p.endswith("/")) for p in command_paths(score, root, kind)]
    return out


def default_entries(templates: str | None) -> list[Entry]:
    """What every task protects, whatever it says."""
    out = [Entry(name, SPEC) for name in SPEC_FILES]
    if templates and glob_problem(templates) is None and normal(templates):
        out.append(Entry(normal(templates) + "/", TEMPLATES))
    out.append(Entry(HARNESS_DIR, OWN))
    out += [Entry(p, CI) for p in CI_FILES]
    return out


def plan_entries(templates: str | None, defaults_protect: Iterable[str]) -> list[Entry]:
    """What every task's agent may not change: plan.json's `protect`."""
    return _once([*default_entries(templates), *(Entry(p, DEFAULTS) for p in defaults_protect)])


def task_entries(task_protect: Iterable[str], accept: Iterable[list[str]], score: list[str] | None,
                 root: Path | None, common: Iterable[Entry] = (), kind: Callable[[str], str | None] | None = None
                 ) -> list[Entry]:
    """A task's own protected entries (a node's `protect`), each path once and none of `common`."""
    entries = [Entry(p, TASK) for p in task_protect] + command_entries(accept, score, root, kind)
    known = {e.path for e in common}
    return [e for e in _once(entries) if e.path not in known]


def _once(entries: list[Entry]) -> list[Entry]:
    """Each path once, with its first reason."""
    seen: dict[str, Entry] = {}
    for e in entries:
        seen.setdefault(e.path, e)
    return list(seen.values())


def lifted(entry: Entry, allow_edit: Iterable[str]) -> bool:
    """Whether an allow_edit pattern lifts the whole entry (the entry is at or below it)."""
    return any(matches(a, entry.path.rstrip("/")) for a in allow_edit)


def overlaps(allow: str, entry_path: str) -> bool:
    """Whether the allow_edit pattern `allow` lifts some of what the entry protects."""
    path = entry_path.rstrip("/")
    return matches(allow, path) or matches(path, normal(allow))
