"""GitPython, met only here: a run reads a repository through it without starting a git
process (finding the repository, its git directory, HEAD). Nothing here imports it until a
function is called: only a run with a `git: commit` task, or file evidence taken in a git
repository (loop/files.py), pays for it.
"""

from __future__ import annotations

from typing import Any


def library() -> Any:
    """The `git` package; ImportError when GitPython is missing or finds no git executable."""
    import git

    return git


def head(repo: Any) -> Any:
    """The commit HEAD names, read from the refs (no git process); ValueError or OSError when
    there is none yet."""
    from git.refs.symbolic import SymbolicReference

    return SymbolicReference.dereference_recursive(repo, "HEAD")
