"""The repository an isolated run works in, checked once before anything is created.

Isolation needs a non-bare repository with at least one commit and a branch checked out
(the branch the results follow); submodules and LFS files are refused (a worktree would
hold neither their content nor, with filter drivers blanked, LFS objects: the agent would
see pointers). A branch named `harnessc` (or `harnessc/run`) makes the integration branch
`harnessc/run/<id>` impossible: refused with the rename that fixes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import gitcmd
from .errors import HarnesscError


class IsolationError(HarnesscError):
    """isolation: worktree cannot work in this project; `hint` says what to do."""

    def __init__(self, message: str, hint: str):
        super().__init__(message, hint)

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})"


@dataclass(frozen=True)
class Repo:
    toplevel: Path  # the user's working tree
    prefix: str  # the project directory inside it ('' or 'sub/dir/')
    branch: str  # the user's checked-out branch, refs/heads/...
    head: str  # the commit it was at when checked
    git_dir: Path | None = None  # the user's tree's git directory (found once: gitcmd.locate)
    common: Path | None = None  # where refs, objects, worktrees/ and the shared config are
    ident: tuple[tuple[str, str], ...] = ()  # whom harnessc commits as (gitcmd.identity)

    def git(self, hooks: bool = False) -> gitcmd.Git:
        """git in the user's tree, its git directory named (never discovered again)."""
        return gitcmd.Git(self.toplevel, hooks=hooks, git_dir=self.git_dir, ident=dict(self.ident))


def find(root: Path) -> Repo:
    """The repository holding `root`, found once (no branch or head read): for cleaning up."""
    place = gitcmd.locate(root)
    return Repo(place.top, place.prefix, "", "", place.git_dir, place.common)


def open_repo(root: Path, hooks: bool = False) -> Repo:
    """The repository holding project `root`, or IsolationError saying what to do."""
    try:
        place = gitcmd.locate(root)
    except gitcmd.GitFailed as e:
        if e.returncode is None:
            raise IsolationError(f"isolation: worktree needs git ({e.stderr.strip()})", "install git") from None
        if "must be run in a work tree" in e.stderr:  # a bare repository (or inside a git directory)
            raise IsolationError("isolation: worktree needs a working tree; this repository is bare",
                                 "run harnessc in a clone with a working tree (`git clone <bare> work`)") from None
        raise IsolationError(f"isolation: worktree needs a git repository; {root} is not in one",
                             "run `git init && git add -A && git commit -m init`, or set isolation: none") from None
    git = gitcmd.Git(place.top, hooks=hooks, git_dir=place.git_dir)
    branch = git.run("symbolic-ref", "-q", "HEAD", worktree=False, ok=(0, 1)).strip()
    head = git.run("rev-parse", "-q", "--verify", "HEAD^{commit}", worktree=False, ok=(0, 1)).strip()
    if not head:
        raise IsolationError("isolation: worktree needs a commit to start from; this repository has none",
                             "commit your files first: `git add -A && git commit -m init`")
    if not branch:
        raise IsolationError("isolation: worktree needs a branch checked out; HEAD is detached",
                             "check out a branch, e.g. `git switch -c work`")
    for name in ("refs/heads/harnessc", "refs/heads/harnessc/run"):
        if _exists(git, name):
            short = name.removeprefix("refs/heads/")
            raise IsolationError(f"a branch named '{short}' makes harnessc's integration branches "
                                 f"(harnessc/run/<run-id>) impossible",
                                 f"rename it: `git branch -m {short} {short}-old`")
    if _exists(git, "HEAD:.gitmodules"):
        raise IsolationError("isolation: worktree does not support submodules (this repository has .gitmodules)",
                             "set isolation: none for this project")
    lfs = git.run("grep", "-l", "-I", "filter=lfs", "HEAD", "--", ".gitattributes", "*/.gitattributes",
                  worktree=False, ok=(0, 1)).strip()
    if lfs:
        raise IsolationError(f"isolation: worktree does not support Git LFS files ({lfs.splitlines()[0]} "
                             "names filter=lfs): a worktree would hold pointers, not the files",
                             "set isolation: none for this project")
    ident = tuple(sorted(gitcmd.identity(place.git_dir).items()))
    return Repo(place.top, place.prefix, branch, head, place.git_dir, place.common, ident)


def _exists(git: gitcmd.Git, rev: str) -> bool:
    return bool(git.run("rev-parse", "-q", "--verify", rev, worktree=False, ok=(0, 1)).strip())

