"""What an isolated task never lands: files the tools make as they run (pytest's bytecode
and cache, installed packages, virtual environments), in any directory, whatever the
repository's .gitignore says. Files the repository's .gitignore ignores never land either
(worktrees.changes). A path the base commit tracks is the repository's: changing it is a
change like any other.

Imports nothing but the standard library: a Ray worker reads it too (executor/bundle.py).
"""

from __future__ import annotations

DIRS = ("__pycache__", ".pytest_cache", "node_modules", ".venv")
SUFFIXES = (".pyc",)
BUILT_IN = tuple(f"{d}/" for d in DIRS) + tuple(f"*{s}" for s in SUFFIXES)  # as the docs show it


def pathspecs() -> list[str]:
    """Exclude pathspecs (from the top) keeping the built-in list out of `git add`."""
    return ([f":(exclude,top,glob)**/{d}{tail}" for d in DIRS for tail in ("", "/**")] +
            [f":(exclude,top,glob)**/*{s}" for s in SUFFIXES])


def built_in(path: str) -> bool:
    """Whether `path` (slash-separated, from the top) is on the built-in list."""
    *dirs, name = path.split("/")
    return any(d in DIRS for d in (*dirs, name)) or name.endswith(SUFFIXES)
