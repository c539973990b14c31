"""Git per task (`git: commit`): each succeeded task's changes become one commit, so every
step of an unattended run can be reviewed and reverted on its own.

At the start of a run that has such tasks, the project must be a git repository (else one
warning event and nothing is committed) and its uncommitted changes are recorded: they are
reported, and never committed or discarded - a task's commit leaves those paths out. When a
task succeeds, what changed in the working tree (tracked and untracked, `.harness/` aside)
is committed with a message naming the task and how it was verified: the paths that changed
during the task's attempts, as runtime/loop/attribution.py decides them when several tasks run
at once (another running task's paths stay out).

Every git process goes through harnessc/gitcmd.py: the child base environment, no hook (unless
harness.yaml says `git_hooks: true`), no fsmonitor, filter driver or signing program. Commits
are made with `--no-verify` in any case (pre-commit and commit-msg never run: harnessc
verified the change itself). GitPython (finding the repository, reading HEAD; no process)
is imported, through gitpython.py, only by a run with a `git: commit` task.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from ... import gitcmd
from ...planfile import PlanNode
from ...states import TaskState
from ..loop.files import OWN_COMMIT_PREFIX
from ..store.state import StateStore
from . import gitpython
from .commitmsg import headline, message_bytes

IGNORED = (".harness/", ".harness")
MAX_SCANNED_BYTES = 100 << 20  # a larger file is not read for secrets: it is never committed
SCAN_CHUNK = 1 << 20


class GitCommits:
    def __init__(self, root: Path, store: StateStore, nodes: list[PlanNode], hooks: bool = False):
        """hooks: harness.yaml's `git_hooks` (the repository's hooks run for our commits)."""
        self.root, self.store = root, store
        self.wanted = any(n.git == "commit" and not n.done for n in nodes)
        self.repo: Any = None
        self.hooks = hooks
        self.git = gitcmd.Git(root, hooks=hooks, git_dir=root / ".git")  # named again once found (start)
        self.dirty_at_start: set[str] = set()
        self._lock = asyncio.Lock()  # one commit at a time: git's index is one file
        # succeeded tasks whose commit left out paths shared with tasks still running
        self.waiting: dict[str, Any] = {}  # task -> its attribution.TaskFiles
        self.titles = {n.id: n.title for n in nodes}
        self.unverified: set[str] = set()  # tasks that ended without a verified result
        self.notes: list[tuple[str, dict]] = []  # events of a commit (made in a worker thread)

    def start(self) -> None:
        """Find the repository and note what was uncommitted before the run (never committed)."""
        if not self.wanted:
            return
        try:
            git = gitpython.library()  # only runs with `git: commit` pay for it
        except ImportError:  # pragma: no cover - a declared dependency
            self.store.event("git_unavailable", message="git: commit needs gitpython; nothing will be committed")
            return
        try:
            self.repo = git.Repo(self.root, search_parent_directories=False)
            # its git directory, found once before any agent ran: every git process names it
            git_dir = Path(self.repo.git_dir).resolve()
            self.git = gitcmd.Git(self.root, hooks=self.hooks, git_dir=git_dir, ident=gitcmd.identity(git_dir))
            self.dirty_at_start = self._changed()
        except (git.InvalidGitRepositoryError, git.NoSuchPathError, gitcmd.GitFailed) as e:
            self.repo = None
            self.store.event("git_unavailable", message=(
                f"git: commit needs the project to be a git repository ({type(e).__name__}); "
                "nothing will be committed (run `git init` to have each task committed)"))
            return
        if self.dirty_at_start:
            paths = sorted(self.dirty_at_start)
            self.store.event("git_dirty_at_start", paths=paths[:200], message=(
                f"{len(paths)} uncommitted path(s) before the run ({', '.join(paths[:5])}"
                f"{', ...' if len(paths) > 5 else ''}): left as they are, never part of a task's commit"))

    async def commit(self, node: PlanNode, verified: str, attempt: int, agent: str, files: Any = None) -> None:
        """Commit what changed for a succeeded task (in a worker thread: git is a subprocess).
        files: the task's side of the attribution ledger (attribution.TaskFiles), asked for
        its paths once the commits before it are made; None: whatever changed. Paths it
        shares with tasks still running wait for them (`task_ended`)."""
        if self.repo is None or node.git != "commit":
            return
        subject, whole = headline(f"{OWN_COMMIT_PREFIX.decode()}{node.id}: ", node.title)
        message = (f"{subject}\n\n{whole}Verified: {verified}\n"
                   f"Attempt {attempt} on agent {agent}, run {self.store.run_id}.\n")
        async with self._lock:
            paths = files.commit_paths() if files else None
            kind, data = await asyncio.to_thread(self._commit, message, paths)
            if files and files.waiting_paths():
                self.waiting[node.id] = files
        self._tell(node.id)
        self.store.event(kind, node.id, **data)  # on the loop's thread: the store is not shared

    async def task_ended(self, tid: str, outcome: str) -> None:
        """A task ended. The paths a succeeded task left out of its commit, because they were
        shared with tasks then running, are committed once none of those runs any more: the
        tasks that ended without a verified result drop out of the sharing (their changes are
        nobody's work to keep), and what is left is one commit per set of tasks, naming them
        (harnessc cannot tell which of them made each change) - no verified work is left
        uncommitted because another task ran beside it."""
        # review: verified, its work is in the tree
        if outcome not in (TaskState.SUCCEEDED, TaskState.DEGRADED, TaskState.REVIEW):
            self.unverified.add(tid)
        if self.repo is None or not self.waiting:
            return
        groups: dict[frozenset[str], set[str]] = {}
        for waiting, files in list(self.waiting.items()):
            for path, tasks in files.settled_shared().items():
                groups.setdefault(frozenset(tasks - self.unverified) or tasks, set()).add(path)
            if not files.waiting_paths():
                del self.waiting[waiting]
        for tasks, paths in sorted(groups.items(), key=lambda kv: sorted(kv[0])):
            async with self._lock:
                kind, data = await asyncio.to_thread(self._commit, self._shared_message(tasks), paths)
            self._tell(next(iter(tasks)) if len(tasks) == 1 else None)
            if kind != "git_nothing_to_commit":
                self.store.event(kind, next(iter(tasks)) if len(tasks) == 1 else None,
                                 shared_by=sorted(tasks), **data)

    def _tell(self, task: str | None) -> None:
        while self.notes:
            kind, data = self.notes.pop(0)
            self.store.event(kind, task, **data)

    def _shared_message(self, tasks: frozenset[str]) -> str:
        prefix, run = OWN_COMMIT_PREFIX.decode(), self.store.run_id
        if len(tasks) == 1:
            (tid,) = tasks
            subject, whole = headline(f"{prefix}{tid}: ", self.titles.get(tid, tid))
            return (f"{subject} (files it shared with tasks that did not succeed)\n\n{whole}Changed while "
                    f"other tasks ran beside it; they ended without a verified result, run {run}.\n")
        return (f"{prefix}shared by {', '.join(sorted(tasks))}\n\nChanged while these tasks ran side by side "
                f"(harnessc cannot tell which one made each change); committed once none of them was "
                f"running, run {run}.\n")

    def _commit(self, message: str, claimed: set[str] | None) -> tuple[str, dict]:
        """(event kind, its data) of the commit of `claimed` (None: whatever changed)."""
        try:
            changed = self._changed() - self.dirty_at_start
            paths = sorted(changed if claimed is None else changed & claimed)
            if not paths:
                return "git_nothing_to_commit", {}
            withheld = secret_files(self.root, [p for p in paths if os.path.lexists(self.root / p)],
                                    self.store.secrets)
            if withheld:
                self.notes.append(("git_secret_withheld", {"paths": sorted(withheld)[:200], "message": (
                    "not committed: " + "; ".join(f"{p} ({why})" for p, why in sorted(withheld.items())[:5])
                    + (", ..." if len(withheld) > 5 else "") + " - left in the working tree as it is")}))
                paths = [p for p in paths if p not in withheld]
                if not paths:
                    return "git_nothing_to_commit", {}
            present = [p for p in paths if os.path.lexists(self.root / p)]
            gone = [p for p in paths if p not in present]
            if present:
                self.git.run("add", "--", *present)
            if gone:
                self.git.run("rm", "--cached", "--quiet", "--ignore-unmatch", "--", *gone)
            self.git.run("commit", "--no-verify", "--no-gpg-sign", "-F", "-", "--", *paths,  # stdin: a long
                         stdin=message_bytes(message))  # title would be too long for argv
            sha = self.repo.head.commit.hexsha
        except (gitcmd.GitFailed, OSError, ValueError) as e:
            return "git_commit_failed", {"message": str(e)[:500]}
        return "git_committed", {"sha": sha, "paths": paths[:200]}

    def _changed(self) -> set[str]:
        """Paths that differ from HEAD: modified, added, deleted and untracked (not ignored)."""
        out = self.git.run("status", "--porcelain", "-z", "--untracked-files=all", "--ignore-submodules=all")
        changed = set()
        entries = iter(out.split("\0"))
        for entry in entries:
            if len(entry) < 4:
                continue
            code, path = entry[:2], entry[3:]
            if code[0] in "RC":
                next(entries, None)  # a rename's second field is its old path
            if not path.startswith(IGNORED):
                changed.add(path)
        return changed


def secret_files(root: Path, paths: list[str], secrets: list[str]) -> dict[str, str]:
    """The paths whose content holds one of our secrets (procs.secret_values: the value,
    reversed, base64), path -> why; read in chunks, MAX_SCANNED_BYTES at most (a larger
    file is withheld unread). A symbolic link is committed as its target's name: that is
    what is checked."""
    if not secrets:
        return {}
    needles = [s.encode("utf-8", "surrogatepass") for s in secrets]
    overlap = max(len(n) for n in needles) - 1
    out: dict[str, str] = {}
    for rel in paths:
        path = root / rel
        try:
            if path.is_symlink():
                if any(n in os.fsencode(os.readlink(path)) for n in needles):
                    out[rel] = "its link target holds a secret"
                continue
            if not path.is_file():
                continue
            if path.stat().st_size > MAX_SCANNED_BYTES:
                out[rel] = f"larger than {MAX_SCANNED_BYTES >> 20} MiB: not checked for secrets"
                continue
            with open(path, "rb") as f:
                tail = b""
                while chunk := f.read(SCAN_CHUNK):
                    window = tail + chunk
                    if any(n in window for n in needles):
                        out[rel] = "it holds the value of a secret harnessc redacts"
                        break
                    tail = window[-overlap:] if overlap else b""
        except OSError as e:
            out[rel] = f"could not be read to check it for secrets ({e.strerror or e})"
    return out


LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}  # a path is a path (no glob, no magic)
PATH_CHUNK = 500  # paths per git command (argv length)


def secret_blobs(git: gitcmd.Git, tree: str, paths: list[str], secrets: list[str]) -> dict[str, str]:
    """secret_files for what `tree` (a tree or commit id) holds at `paths`, read from git's
    objects: what would be committed, whatever the files on disk say now (an index entry
    marked assume-unchanged or skip-worktree hides its file from `git add`)."""
    if not secrets or not paths:
        return {}
    needles = [s.encode("utf-8", "surrogatepass") for s in secrets]
    blobs: list[tuple[str, str, str, int]] = []  # (path, mode, object id, size)
    for i in range(0, len(paths), PATH_CHUNK):
        out = git.run("ls-tree", "-r", "-l", "-z", tree, "--", *paths[i:i + PATH_CHUNK], env=LITERAL,
                      worktree=False)
        for entry in out.split("\0"):
            meta, _, path = entry.partition("\t")
            fields = meta.split()
            if len(fields) == 4 and fields[1] == "blob":
                blobs.append((path, fields[0], fields[2], int(fields[3]) if fields[3].isdigit() else 0))
    out: dict[str, str] = {}
    objects = git.objects()
    try:
        for path, mode, sha, size in blobs:
            if size > MAX_SCANNED_BYTES:
                out[path] = f"larger than {MAX_SCANNED_BYTES >> 20} MiB: not checked for secrets"
                continue
            try:
                data = objects.read(sha)
            except KeyError:
                out[path] = "its content is missing from the repository: not checked for secrets"
                continue
            if any(n in data for n in needles):
                out[path] = "its link target holds a secret" if mode == "120000" else \
                    "it holds the value of a secret harnessc redacts"
    finally:
        objects.close()
    return out
