"""Snapshots of the project's files, and what changed between two of them (file evidence).

In a git repository (GitSnapshots) the working tree goes into one private index per run
(`git add -A`, so untracked, not ignored files are in it; the user's index, refs and files
are never touched), and a snapshot is that index compared with a base tree written once
(`git diff --cached --raw`): the paths that differ from the base, with their blob ids. Two
snapshots are then compared in Python, without a git process; the lines added and removed
are counted from the changed blobs, read through one persistent `git cat-file --batch`, and
new commits are counted by walking commit parents through it too. Three git processes per
snapshot when something changed, two when nothing did (`git add` then writes no index): the
first (`git config`) lists the filter drivers to blank (gitcmd.py: an agent may have
configured one; none runs).

Outside git (HashedSnapshots): content hashes of the project's files (dot-directories and
caches aside, MAX_HASHED_FILES at most) and of the context files of the tasks that asked,
read in chunks; a file over MAX_HASHED_BYTES is known by its size and modification time, a
symbolic link by where it points (never followed), anything else (a FIFO, a device) by its kind.

GitPython is imported (through worktree/gitpython.py) by `snapshots()`, by the first task of a run that needs file evidence,
never by lint or build. A snapshot's methods run in a worker thread; `lock` keeps them one at
a time (one index, one cat-file process). A HashedSnapshots whose last snapshot was `quick`
(a small tree) is read on the event loop's thread instead: the hand-off would cost more.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import gitcmd
from ..worktree import gitpython

# Never evidence: harnessc's own directory and what test runners leave behind.
EXCLUDED = (".harness", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules", ".venv")
MAX_HASHED_FILES = 5000  # outside git: files hashed per snapshot, at most
MAX_HASHED_BYTES = 16 << 20  # outside git: a larger file is not read (its size and mtime stand in)
MAX_COUNTED_BYTES = 1 << 20  # a blob larger than this: its lines are not counted
MAX_WALKED_COMMITS = 200  # new commits counted per snapshot pair, at most
QUICK_SNAPSHOT = 0.001  # seconds: outside git, a tree read this fast is read on the event loop's thread
OWN_COMMIT_PREFIX = b"harnessc: "  # the subject of harnessc's own commits (gitops.py writes it)
ZERO = "0" * 40

# Files of the project that are never evidence either, for this process: `harnessc run >
# out.log` inside the project (a log that grows with each line the run prints). Absolute, real.
LEFT_OUT: set[str] = set()


def leave_out(path: Path | str) -> None:
    LEFT_OUT.add(os.path.realpath(path))


def redirected_output(root: Path) -> list[Path]:
    """The regular files inside the project (its `.harness/` aside) that this process's
    stdout or stderr write to. Found through /proc/self/fd (Linux); elsewhere none is found."""
    top = os.path.realpath(root)
    found: list[Path] = []
    for fd in (1, 2):
        try:
            st = os.fstat(fd)
            path = os.path.realpath(os.readlink(f"/proc/self/fd/{fd}"))
            same = os.stat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or (same.st_dev, same.st_ino) != (st.st_dev, st.st_ino):
            continue
        rel = os.path.relpath(path, top)
        if rel.startswith(os.pardir) or rel.split(os.sep)[0] == ".harness" or Path(path) in found:
            continue
        found.append(Path(path))
    return found


@dataclass
class FileChanges:
    """What changed in the project's files between two snapshots, as credited to one task
    (runtime/loop/attribution.py leaves out what other tasks running at the same time changed)."""

    source: str  # git | hashes
    files: int = 0
    added: int = 0  # lines (git only)
    removed: int = 0
    new: int = 0  # files that did not exist before (untracked ones included)
    commits: int = 0
    paths: list[str] = field(default_factory=list)  # the first few
    shared: int = 0  # changed while other tasks ran too, and not told apart: credited to none
    others: int = 0  # changed by other tasks running at the same time: not this task's

    def score(self) -> float:
        """0 when nothing changed; a change is worth 0.5, more lines and commits up to 1."""
        if not self.files and not self.commits:
            return 0.0
        lines = self.added + self.removed if self.source == "git" else 10 * self.files
        return round(min(1.0, 0.5 + lines / 100 + 0.25 * self.commits), 4)

    def describe(self) -> str:
        if not self.files and not self.commits:
            text = "no file changed"
        else:
            parts = [f"{self.files} file(s) changed"]
            if self.source == "git":
                parts.append(f"+{self.added} -{self.removed} lines")
            if self.new:
                parts.append(f"{self.new} new")
            if self.commits:
                parts.append(f"{self.commits} commit(s)")
            text = ", ".join(parts)
        if self.shared:
            text += f" ({self.shared} more changed while other tasks ran too: credited to none)"
        return text


@dataclass(frozen=True)
class Snapshot:
    """The project's files at one moment: `blobs` maps a path to its content id (a blob id
    or a hash, "" for a path that is absent); in git only the paths that differ from the
    base tree are listed, so an unlisted path is as in `base`."""

    seq: int  # snapshots of one run are numbered in the order they were taken
    base: str | None  # git: the base tree both sides of a comparison must share
    blobs: dict[str, str]
    head: str | None = None  # git: HEAD's commit


@dataclass
class Delta:
    """What changed between two snapshots: each changed path's (lines added, lines removed,
    new), and the new commits."""

    per_path: dict[str, tuple[int, int, bool]]
    commits: int = 0


class GitSnapshots:
    source = "git"
    quick = False  # git processes: always in a worker thread

    def __init__(self, repo: Any, root: Path, index: Path):
        """repo: gitpython's Repo, used to find the repository and read refs (files, no
        process); every git process goes through gitcmd (hooks and drivers off)."""
        self.repo, self.root, self.index = repo, root, index
        self.env = {"GIT_INDEX_FILE": str(index)}
        # git runs at the repository's top: the project may be a directory inside it
        top = Path(repo.working_tree_dir).resolve()
        self.git = gitcmd.Git(top, git_dir=Path(repo.git_dir).resolve())  # found once, then named
        self.objects = self.git.objects()
        self.notes: list[tuple[str, dict]] = []  # events for the run, taken by attribution.py
        project = os.path.relpath(Path(root).resolve(), top)
        self.pathspec = ["--", project] + [f":(exclude,glob)**/{name}/**" for name in EXCLUDED]
        self.pathspec += [f":(exclude,literal){os.path.relpath(p, top)}" for p in sorted(LEFT_OUT)
                          if not os.path.relpath(p, top).startswith(os.pardir)]
        self.base: str | None = None
        self.base_blobs: dict[str, str] = {}  # path -> its blob in the base, for listed paths
        self.seq = 0
        self.lock = threading.Lock()
        self._key: tuple | None = None  # the private index's identity after the last snapshot
        self._blobs: dict[str, str] | None = None

    def _index_key(self) -> tuple | None:
        """git writes an index through a new file (lock, rename): a new inode when it changed."""
        try:
            st = os.stat(self.index)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _git(self, *args: str, worktree: bool = False) -> str:
        return self.git.run(*args, env=self.env, worktree=worktree)

    def snapshot(self) -> Snapshot:
        with self.lock:
            if self.base is None:
                self._start_index()
            self._clear_stale_lock()
            try:
                self._git("add", "-A", "--ignore-errors", *self.pathspec, worktree=True)
            except gitcmd.GitFailed as e:
                if e.returncode is None or "index.lock" in e.stderr:
                    raise  # nothing was added: no evidence rather than "nothing changed"
                # else a file it could not read: the others are in the index all the same
            if self.base is None:
                self.base = self._git("write-tree").strip()
                blobs: dict[str, str] = {}
            elif self._index_key() == self._key and self._blobs is not None:
                blobs = self._blobs  # git add wrote no index: nothing changed since the last snapshot
            else:
                blobs = self._listed()
            self._key, self._blobs = self._index_key(), blobs
            try:  # read from the refs, without a git process
                head = gitpython.head(self.repo)
            except (ValueError, OSError):  # no commit yet
                head = None
            self.seq += 1
            return Snapshot(self.seq, self.base, blobs, head or None)

    def _clear_stale_lock(self) -> None:
        """Remove the private index's lock when one is there: no git process of ours is
        running on it (`lock`; the run lock keeps other runs out), so a git that was killed
        left it - and while it stays, every `git add` fails and no change is ever seen."""
        lock = Path(f"{self.index}.lock")
        if os.path.lexists(lock):
            os.unlink(lock)
            self.notes.append(("git_stale_lock_removed", {"path": str(lock), "message": (
                f"removed a stale {lock.name} (a git process was killed while it wrote the run's "
                "private index); file evidence and commits go on")}))

    def _start_index(self) -> None:
        """A fresh private index, a copy of git's own: its stat data spares hashing every file."""
        if os.path.lexists(self.index):
            os.unlink(self.index)  # a previous run's: its base tree is not ours
        real = Path(self.repo.git_dir) / "index"
        if real.is_file():
            fd = os.open(self.index, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(real.read_bytes())

    def _listed(self) -> dict[str, str]:
        """The paths of the index that differ from the base: path -> blob id ("" when deleted)."""
        out = self._git("diff", "--cached", "--raw", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
                        "--abbrev=40", self.base, *self.pathspec)
        fields = out.split("\0")
        blobs: dict[str, str] = {}
        for i in range(0, len(fields) - 1, 2):  # ":old-mode new-mode old new STATUS" NUL path NUL
            meta, path = fields[i], fields[i + 1]
            parts = meta.split()
            if len(parts) < 5:
                continue
            old, new = parts[2], parts[3]
            blobs[path] = "" if new == ZERO else new + parts[1]  # a mode change is a change
            self.base_blobs.setdefault(path, "" if old == ZERO else old + parts[0])
        return blobs

    def changes(self, before: Snapshot, after: Snapshot) -> Delta:
        if before.base != after.base:
            raise ValueError("snapshots of two runs")
        per_path: dict[str, tuple[int, int, bool]] = {}
        out = Delta(per_path)
        with self.lock:
            for path in sorted(changed_paths(before, after, self.base_blobs)):
                old = before.blobs.get(path, self.base_blobs.get(path, ""))
                new = after.blobs.get(path, self.base_blobs.get(path, ""))
                added, removed = self._lines(old, new)
                per_path[path] = (added, removed, not old and bool(new))
            if after.head and after.head != before.head:
                out.commits = self._new_commits(before.head, after.head)
        return out

    def _read(self, blob: str) -> bytes:
        return self.objects.read(blob[:40]) if blob else b""

    def _lines(self, old: str, new: str) -> tuple[int, int]:
        """Lines added and removed, counted as multisets of lines (a moved line is no change;
        binary and very large files count none)."""
        try:
            a, b = self._read(old), self._read(new)
        except Exception:  # an object gone (gc) or unreadable: the file still counts
            return 0, 0
        if len(a) > MAX_COUNTED_BYTES or len(b) > MAX_COUNTED_BYTES or b"\0" in a[:8000] or b"\0" in b[:8000]:
            return 0, 0
        la, lb = Counter(a.splitlines()), Counter(b.splitlines())
        return sum((lb - la).values()), sum((la - lb).values())

    def _new_commits(self, old: str | None, new: str) -> int:
        """Commits reachable from `new` and not from `old` (walked to MAX_WALKED_COMMITS),
        less harnessc's own (`git: commit`, gitops.py): committing a task's result is not
        another task's work."""
        seen, todo, ours = set(), [new], 0
        while todo and len(seen) < MAX_WALKED_COMMITS:
            sha = todo.pop()
            if sha == old or sha in seen:
                continue
            seen.add(sha)
            try:
                data = self.objects.read(sha)
            except Exception:
                break
            headers, _, message = data.partition(b"\n\n")
            ours += message.startswith(OWN_COMMIT_PREFIX)
            for line in headers.split(b"\n"):
                if line.startswith(b"parent "):
                    todo.append(line[7:].decode())
        return len(seen) - ours

    def close(self) -> None:
        self.objects.close()
        self.repo.close()


def changed_paths(before: Snapshot, after: Snapshot, base_blobs: dict[str, str] | None = None,
                  among: set[str] | None = None) -> set[str]:
    """The paths whose content differs between two snapshots (of one run); `among`: only these."""
    names = (before.blobs.keys() | after.blobs.keys()) if among is None else among
    base = base_blobs or {}
    out = set()
    for path in names:
        old = before.blobs.get(path, base.get(path) if before.base else "")
        new = after.blobs.get(path, base.get(path) if after.base else "")
        if old != new:
            out.add(path)
    return out


class HashedSnapshots:
    """Content hashes of the project's files (harnessc's own directory, dot-directories and
    caches aside), and of the files tasks named (`watch`). A file is hashed again only when
    its size or modification time changed."""

    source = "hashes"

    def __init__(self, root: Path):
        self.root = root
        self.extra: set[str] = set()
        self._cache: dict[str, tuple[int, int, str]] = {}
        self.seq = 0
        self.base_blobs: dict[str, str] = {}
        self.lock = threading.Lock()
        self.took: float | None = None  # seconds the last snapshot took
        self.left_out = {os.path.relpath(p, os.path.realpath(root)) for p in LEFT_OUT}

    @property
    def quick(self) -> bool:
        """The last snapshot took under QUICK_SNAPSHOT: the next may be taken on the event loop's thread."""
        return self.took is not None and self.took < QUICK_SNAPSHOT

    def watch(self, paths: list[str]) -> None:
        self.extra.update(paths)

    def _walked(self):
        """The project's files (dot-directories and caches aside), MAX_HASHED_FILES at most."""
        n = 0
        top_dir = os.fspath(self.root)
        for top, dirs, files in os.walk(top_dir):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in EXCLUDED)
            # os.walk yields top_dir, then join(top, d): the directory relative to the project
            # is what follows top_dir (os.path.relpath per file took half of a snapshot)
            under = top[len(top_dir):].lstrip(os.sep)
            for name in sorted(files):
                n += 1
                if n > MAX_HASHED_FILES:
                    return
                rel = os.path.join(under, name) if under else name
                if rel not in self.left_out:
                    yield rel

    def _watched(self, listed: dict[str, str]):
        """The watched files the walk did not list (`listed`), those whose directory is inside
        the project. One it listed is already read, and inside: os.walk follows no link (each
        task's context files are watched, so checking them all again cost two realpath calls
        per file per snapshot)."""
        if not self.extra:
            return  # (no realpath call either: most snapshots)
        top = os.path.realpath(self.root)
        for rel in sorted(self.extra):
            if rel not in listed and self._inside(rel, top) and os.path.normpath(rel) not in self.left_out:
                yield rel

    def _inside(self, rel: str, top: str) -> bool:
        """A named file's directory is inside the project (`top`: its real path), through no
        symbolic link (the walk never enters one: os.walk does not follow them)."""
        parent = os.path.dirname(os.path.normpath(rel))
        real = os.path.realpath(self.root / parent)
        return not os.path.isabs(rel) and real == os.path.join(top, parent).rstrip(os.sep)

    def snapshot(self) -> Snapshot:
        started = time.perf_counter()
        with self.lock:
            out = {}
            top_dir = os.fspath(self.root)
            for rel in itertools.chain(self._walked(), self._watched(out)):  # (lazily: out is filled first)
                if rel in out:
                    continue
                path = os.path.join(top_dir, rel)  # (a str: a Path per file cost more than its stat)
                try:
                    st = os.stat(path, follow_symlinks=False)
                    cached = self._cache.get(rel)
                    if cached and cached[:2] == (st.st_size, st.st_mtime_ns):
                        out[rel] = cached[2]
                        continue
                    digest = content_id(path, st)
                except OSError:
                    continue
                self._cache[rel] = (st.st_size, st.st_mtime_ns, digest)
                out[rel] = digest
            self.seq += 1
            self.took = time.perf_counter() - started
            return Snapshot(self.seq, None, out)

    def changes(self, before: Snapshot, after: Snapshot) -> Delta:
        return Delta({p: (0, 0, p not in before.blobs) for p in changed_paths(before, after)})

    def close(self) -> None:
        pass


def content_id(path: Path | str, st: os.stat_result) -> str:
    """What stands for a file's content outside git (`st`: its lstat): the sha256 of a
    regular file up to MAX_HASHED_BYTES, read in chunks; the size and modification time of
    a larger one; where a symbolic link points, never what it points to."""
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        return "special"  # a FIFO or a device: opening it could block or never end
    if st.st_size > MAX_HASHED_BYTES:
        return f"large:{st.st_size}:{st.st_mtime_ns}"
    # O_NOFOLLOW: a file swapped for a link since the stat is not followed either
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def snapshots(root: Path, index: Path) -> GitSnapshots | HashedSnapshots:
    """GitSnapshots when the project is in a git repository (and git runs), else HashedSnapshots."""
    if not _maybe_in_repository(root):
        return HashedSnapshots(root)  # GitPython is not imported for nothing: ~40 ms of a run's start
    try:
        git = gitpython.library()  # raises ImportError when no git executable is found
        repo = git.Repo(root, search_parent_directories=True)
        if repo.bare:
            raise git.GitError("bare repository")
    except Exception:  # not a repository, no git: hash the files instead
        return HashedSnapshots(root)
    return GitSnapshots(repo, root, index)


def _maybe_in_repository(root: Path) -> bool:
    """False when GitPython would find no repository from `root` (no GIT_DIR, and no `.git`
    entry nor git directory in it or a parent); True when it may (it decides)."""
    if os.environ.get("GIT_DIR"):
        return True
    top = Path(os.path.abspath(root))
    for d in (top, *top.parents):
        if os.path.lexists(d / ".git") or all(os.path.exists(d / n) for n in ("HEAD", "objects", "refs")):
            return True
    return False


def total(source: str, per_path: dict[str, tuple[int, int, bool]], commits: int = 0) -> FileChanges:
    """The totals of the paths credited to a task."""
    out = FileChanges(source, commits=commits)
    for path in sorted(per_path):
        added, removed, new = per_path[path]
        out.files += 1
        out.added += added
        out.removed += removed
        out.new += new
        if len(out.paths) < 10:
            out.paths.append(path)
    return out
