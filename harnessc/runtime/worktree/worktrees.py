"""Attempt worktrees: create one at a base commit, commit what the agent changed, remove it,
and reconcile what a killed run left behind.

An attempt of task `<n>` (its index in the plan), approach `<k>` works in
`.harness/worktrees/<run>/<n>-<k>` (detached) and its change is kept on the ref
`refs/harnessc/<run>/<n>-<k>` (not a branch). Its change is its base commit against its
checkout's final tree, committed by the agent or not (`changes`), made one commit whose only
parent is the base. A worktree holds committed files only;
harness.yaml `worktrees: {link, copy}` brings untracked or ignored things of the user's tree
in (a symbolic link, or a read-only copy), and they are never part of the change.

The agent can write anywhere in its checkout and, without a sandbox, beside it. So:

* every git process names its git directory: the user's tree's (found once, gitrepo.py), or
  the attempt's `<common>/worktrees/<name>`, read from the `.git` file git wrote when the
  worktree was made; before harnessc uses a checkout it checks that file still says so
  (`verify`: an agent that deleted or rewrote it is rejected, `tampered with .git`);
* a path is removed only once it is known to be a real directory under
  `.harness/worktrees/` (no link on the way) that git registered as a worktree there; a
  link is removed as a link, never followed (`_drop`);
* `link:`/`copy:` never write through a link in the checkout (one the agent landed earlier):
  that entry is skipped with a warning;
* a project in a directory of a bigger repository keeps its refs under
  `refs/harnessc/projects/<key>/` (`ref_root`), and cleans up only there and in its own
  `.harness/worktrees/`: two projects in one repository leave each other's refs alone.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ... import gitcmd
from ...gitrepo import IsolationError, Repo
from . import neverlands
from .commitmsg import message_bytes
from .gitops import LITERAL, PATH_CHUNK, secret_blobs
from .pool import Kept, Pool

REF_ROOT = "refs/harnessc"
PROJECTS = REF_ROOT + "/projects"  # + /<key>: the refs of a project inside the repository
# git's worktree bookkeeping (.git/worktrees/) is not safe against itself: an add reads the
# others' half-made entries, a prune removes them. One add/remove/prune at a time, per process.
_ADMIN = threading.Lock()
LOCK_NAMES = ("index.lock", "HEAD.lock", "packed-refs.lock", "config.lock", "ORIG_HEAD.lock")


@dataclass
class Attempt:
    """One attempt's worktree: where the agent, accept and score run."""

    path: Path  # the worktree's top
    workdir: Path  # the project directory inside it (cwd of the agent and its checks)
    ref: str  # refs/harnessc/<run>/<n>-<k>
    base: str  # the commit it started from
    git: gitcmd.Git
    gitfile: str = ""  # what git wrote in the checkout's `.git` file: `gitdir: <its git directory>`
    brought: tuple[str, ...] = ()  # paths never committed: .harness, the links and copies
    change: str | None = None  # the commit of its change, once made
    paths: list[str] = field(default_factory=list)  # the paths that commit changes (from the top)
    made: bool = True  # False: not on disk yet (executor ray makes it when a change comes back)


@dataclass(frozen=True)
class Changed:
    """One path of an attempt's change (Worktrees.changes)."""

    path: str  # from the worktree's top
    mode: str  # its mode in the final tree; "000000": deleted
    blob: str  # its object id in the final tree
    added: bool = False  # not at the base

    @property
    def deleted(self) -> bool:
        return self.mode == "000000"


@dataclass
class Reconciled:
    removed_worktrees: list[str] = field(default_factory=list)
    removed_refs: list[str] = field(default_factory=list)
    kept_refs: list[str] = field(default_factory=list)


def ref_root(prefix: str) -> str:
    """Where a project's refs go: refs/harnessc for one at the repository's top (as always),
    refs/harnessc/projects/<key> for one in directory `prefix` (its path made a valid ref
    name, plus a hash of it: two directories never share a key)."""
    if not prefix:
        return REF_ROOT
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", prefix.strip("/")).strip("-")[:40] or "project"
    return f"{PROJECTS}/{name}-{hashlib.sha256(prefix.encode()).hexdigest()[:8]}"


class Tampered(IsolationError):
    """The agent changed something harnessc's git relies on in its checkout."""

    def __init__(self, what: str, why: str):
        super().__init__(f"tampered with {what}: {why}; nothing of this attempt lands",
                         f"an agent must leave its checkout's {what} as harnessc made it")


class Worktrees:
    """The worktrees and refs of one run of one project."""

    def __init__(self, repo: Repo, project: Path, run_id: str, hooks: bool = False,
                 link: list[str] | None = None, copy: list[str] | None = None, reuse: bool = True):
        self.repo, self.project, self.run_id, self.hooks = repo, Path(project), run_id, hooks
        self.git = repo.git(hooks)
        self.refs = ref_root(repo.prefix)
        self.root = self.project / ".harness" / "worktrees"
        self.warnings: list[str] = []  # for the run's events (isolation.py takes them)
        self.link, self.copy = list(link or []), list(copy or [])
        self.unmade: set[Path] = set()  # worktrees handed out with make=False and not made since
        # reuse: an attempt's worktree, once it is done, is the next one's (pool.py); not with
        # git_hooks: true, where git runs the repository's post-checkout hook for each new one
        self.pool = Pool(self.root / run_id) if reuse and not hooks else None

    def ref(self, n: int, k: int = 1) -> str:
        return f"{self.refs}/{self.run_id}/{n}-{k}"

    def path(self, n: int, k: int = 1) -> Path:
        return self.root / self.run_id / f"{n}-{k}"

    def workdir(self, n: int, k: int = 1) -> Path:
        return self.path(n, k) / self.repo.prefix

    def create(self, n: int, k: int, base: str, make: bool = True) -> Attempt:
        """A fresh worktree at `base` (one left at that place is replaced). make=False: only
        its record; `make` puts it on disk when it is needed (an attempt whose change comes
        from elsewhere, executor ray, and that changed nothing never needs it)."""
        path = self.path(n, k)
        # no git directory yet (made by `make`): a git run before then fails, never walks up
        unmade = gitcmd.Git(path, git_dir=self._admin() / "(not made)")
        attempt = Attempt(path, path / self.repo.prefix, self.ref(n, k), base, unmade, made=False)
        if make:
            self.make(attempt)
        else:
            self.unmade.add(path)
        return attempt

    def make(self, attempt: Attempt) -> None:
        """Put the attempt's worktree on disk, at its base, with its ref: a free one of the
        pool moved there (pool.py), else a new one."""
        path = attempt.path
        self.unmade.discard(path)
        if path.exists() or os.path.islink(path):
            self._release(path)  # the one an earlier attempt of it left (tampered with, in conflict)
        self._check_inside(path.parent, mkdir=True)
        kept = self.pool.take(path, attempt.base, _ADMIN, self._drop) if self.pool is not None else None
        if kept is None:
            with _ADMIN:
                self.git.run("worktree", "add", "--detach", "-q", "-f", str(path), attempt.base, timeout=300)
            gitfile, git_dir = self._registered(path)
            kept = self.pool.hold(path, git_dir, gitfile) if self.pool is not None else None
        else:
            gitfile, git_dir = kept.gitfile, kept.git_dir
        attempt.gitfile = gitfile
        attempt.git = gitcmd.Git(path, hooks=self.hooks, git_dir=git_dir, ident=dict(self.repo.ident))
        self.git.run("update-ref", attempt.ref, attempt.base, worktree=False)
        attempt.brought = self._bring_in(attempt, kept)
        attempt.made = True

    def _bring_in(self, attempt: Attempt, kept: Kept | None = None) -> tuple[str, ...]:
        """Link and copy the configured untracked things (a link `kept` says harnessc made
        there, still pointing where it did, is kept); the paths (from the worktree's top) to
        keep out of the change, .harness/ first."""
        prefix = self.repo.prefix
        out = [f"{prefix}.harness"]
        mine = kept.links if kept is not None else {}
        for rel, how in [*((r, "link") for r in self.link), *((r, "copy") for r in self.copy)]:
            source, target = self.project / rel, attempt.workdir / rel
            top_rel = f"{prefix}{rel.rstrip('/')}"
            if how == "link" and top_rel in mine:
                out.append(top_rel)  # pool.py kept it: still ours, still pointing there
                continue
            if not os.path.lexists(source) or os.path.lexists(target):
                continue  # nothing to bring, or a committed file is there already
            link = _link_on_the_way(attempt.path, target.parent)
            if link is not None:
                self.warnings.append(f"worktrees: {how}: {rel} not brought into {attempt.path.name}: "
                                     f"{link} in the checkout is a symbolic link (committed there), "
                                     "and harnessc never writes through one")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if how == "link":
                os.symlink(str(source.resolve()), target)
                mine[top_rel] = str(source.resolve())
            elif source.is_dir():
                shutil.copytree(source, target, symlinks=True)
                _read_only(target)
            else:
                shutil.copy2(source, target, follow_symlinks=False)
                _read_only(target)
            out.append(top_rel)
        return tuple(out)

    def commit(self, attempt: Attempt, message: str, secrets: list[str] | None = None) -> tuple[str | None, dict]:
        """Commit the attempt's change (`changes`) as one commit whose only parent is its
        base, on the attempt's ref and as its checkout's HEAD: (its sha, or None when it
        changed nothing; path -> why, for the paths withheld because they hold a secret or
        are too large to check). The message goes by file: it can be longer than argv allows."""
        if not attempt.made:
            return None, {}  # never put on disk: nothing changed
        git = attempt.git
        changed = changes(attempt)
        tree = git.run("write-tree", worktree=False).strip()
        withheld = secret_blobs(git, tree, [c.path for c in changed if not c.deleted], secrets or [])
        if withheld:
            _back_to_base(attempt, sorted(withheld))
            changed = [c for c in changed if c.path not in withheld]
            tree = git.run("write-tree", worktree=False).strip()
        sha = None
        if changed:
            sha = git.run("commit-tree", tree, "-p", attempt.base, "-F", "-", worktree=False,
                          stdin=message_bytes(message)).strip()
        # the checkout's HEAD at the commit (detached: a branch the agent checked out stays as it is)
        git.run("update-ref", "--no-deref", "-m", "harnessc: the attempt's change", "HEAD", sha or attempt.base,
                worktree=False)
        self.git.run("update-ref", attempt.ref, sha or attempt.base, worktree=False)
        attempt.change, attempt.paths = sha, [c.path for c in changed]
        return sha, withheld

    def checkout(self, attempt: Attempt, sha: str) -> None:
        """Put the worktree at `sha` (after its change was committed: nothing is lost)."""
        self.verify(attempt)
        attempt.git.run("checkout", "-q", "--detach", "-f", sha, timeout=300)

    def forget_unmade(self, n: int, k: int = 1) -> bool:
        """Forget a worktree handed out with make=False and never made; False when it was made."""
        if self.path(n, k) not in self.unmade:
            return False
        self.unmade.discard(self.path(n, k))
        return True

    def remove(self, attempt: Attempt | None, n: int, k: int = 1, keep_ref: bool = False,
               keep_worktree: bool = False) -> None:
        """Remove the worktree (unless kept; with reuse it goes to the pool instead, for the
        next attempt) and its ref (unless kept)."""
        if self.forget_unmade(n, k):  # never made: neither exists
            return
        if keep_worktree and self.pool is not None:
            self.pool.drop(self.path(n, k))  # kept as it is: no longer the pool's
        elif not keep_worktree:
            self._release(self.path(n, k))
        if not keep_ref:
            self.git.run("update-ref", "-d", self.ref(n, k), worktree=False, ok=(0, 1))

    def _release(self, path: Path) -> None:
        """The worktree at `path` is done with: into the pool (pool.py) when it is one to
        reuse - a real directory under a real one, its `.git` file as git wrote it - else removed."""
        pool = self.pool
        if pool is not None and _link_on_the_way(self.project, path.parent) is None and pool.give(path, _ADMIN):
            return
        if pool is not None:
            pool.drop(path)
        self._drop(path)

    def drain(self) -> list[str]:
        """Remove the pool's free worktrees (the run's end); their git directories' names."""
        if self.pool is None:
            return []
        names = []
        for kept in self.pool.drain():
            self._drop(kept.path)
            names.append(kept.git_dir.name)
        return names

    def verify(self, attempt: Attempt) -> None:
        """Tampered when the checkout's `.git` is no longer the file git wrote (deleted, a
        link, a directory, or naming another git directory). harnessc's git names the git
        directory anyway; this says what the agent did, and its attempt does not land."""
        if not attempt.made:
            return
        dotgit = attempt.path / ".git"
        try:
            st = os.lstat(dotgit)
        except FileNotFoundError:
            raise Tampered(".git", "the checkout's .git file was deleted") from None
        if not stat.S_ISREG(st.st_mode):
            raise Tampered(".git", "the checkout's .git file was replaced (by a link or a directory)")
        if _read_small(dotgit) != attempt.gitfile:
            raise Tampered(".git", "the checkout's .git file was rewritten")

    def _admin(self) -> Path:
        """The repository's worktrees/ directory, where git keeps each worktree's git directory."""
        return (self.repo.common or self.repo.toplevel / ".git") / "worktrees"

    def _registered(self, path: Path) -> tuple[str, Path]:
        """(the `.git` file's text, the git directory it names) of the worktree git just
        registered at `path`: that directory must be `<common>/worktrees/<name>`, and name
        `path` back in its `gitdir` file."""
        text = _read_small(path / ".git")
        git_dir = Path(text.removeprefix("gitdir: ").strip()) if text.startswith("gitdir: ") else None
        if git_dir is None or git_dir.parent != self._admin() \
                or _read_small(git_dir / "gitdir").strip() != str(path / ".git"):
            raise IsolationError(f"git did not register the worktree at {path} as expected (its .git says "
                                 f"{text.strip()[:200]!r})", "run `git worktree prune` and try again")
        return text, git_dir

    def _check_inside(self, path: Path, mkdir: bool = False) -> None:
        """IsolationError unless every component below the project's directory down to
        `path` is a real directory (mkdir: made where missing), never a link."""
        top = self.project
        link = _link_on_the_way(top, path, mkdir)
        if link is not None:
            raise IsolationError(f"{link} is a symbolic link where harnessc keeps its worktrees",
                                 f"remove it (`rm {link}`) and run again")

    def _is_worktree(self, path: Path) -> bool:
        """`path` is a directory git registered as a worktree at that very place."""
        try:
            self._registered(path)
        except (IsolationError, OSError):
            return False
        return True

    def _drop(self, path: Path) -> None:
        """Remove what is at `path` (under .harness/worktrees/): a link as a link (never
        followed: it may point at the user's other worktree), a worktree git registered
        there with git, any other directory with rmtree (no link on the way to it)."""
        with _ADMIN:
            if _link_on_the_way(self.project, path.parent) is not None:
                return  # a link above it: what it points at is not ours to remove
            if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
                os.unlink(path)
            elif os.path.lexists(path) and self._is_worktree(path):
                try:
                    self.git.run("worktree", "remove", "--force", "--force", str(path), timeout=300)
                    if not os.path.lexists(path):
                        return  # git removed it and its bookkeeping
                except gitcmd.GitFailed:
                    pass  # its files are removed below
            if os.path.isdir(path) and not os.path.islink(path):
                _make_writable(path)
                shutil.rmtree(path, ignore_errors=True)
            self.git.run("worktree", "prune", worktree=False)

    # ------------------------------------------------------------------ after a crash

    def reconcile(self, keep_refs: set[str]) -> Reconciled:
        """Remove every worktree under this project's .harness/worktrees/ (no run holds them:
        the caller has the run lock) and every ref under its ref root but `keep_refs`
        (blocked tasks' changes); another project's refs are not touched."""
        done = Reconciled()
        if os.path.islink(self.root):
            os.unlink(self.root)  # not ours to follow
        elif self.root.is_dir() and _link_on_the_way(self.project, self.root) is None:
            for run_dir in sorted(self.root.iterdir()):
                if run_dir.is_dir() and not run_dir.is_symlink():
                    for wt in sorted(run_dir.iterdir()):
                        self._drop(wt)
                        done.removed_worktrees.append(str(wt.relative_to(self.project)))
                    shutil.rmtree(run_dir, ignore_errors=True)
                else:
                    os.unlink(run_dir)
        with _ADMIN:
            self.git.run("worktree", "prune", worktree=False)
        for ref in self.own_refs():
            if ref in keep_refs:
                done.kept_refs.append(ref)
            else:
                self.git.run("update-ref", "-d", ref, worktree=False, ok=(0, 1))
                done.removed_refs.append(ref)
        return done

    def own_refs(self) -> list[str]:
        """This project's refs (a top project's leave the ones under refs/harnessc/projects/ out)."""
        refs = self.git.run("for-each-ref", "--format=%(refname)", self.refs + "/", worktree=False).split()
        return [r for r in refs if self.refs != REF_ROOT or not r.startswith(PROJECTS + "/")]

    def stale_locks(self) -> tuple[list[str], list[str]]:
        """(removed, left) `.git/*.lock` files: removed when no live process has them open
        (a killed git leaves its lock), reported when one does or we cannot tell."""
        common = self._admin().parent
        found = [common / name for name in LOCK_NAMES if (common / name).exists()]
        found += [p for p in (common / "refs").rglob("*.lock")] if (common / "refs").is_dir() else []
        found += [p for p in (common / "worktrees").glob("*/*.lock")] if (common / "worktrees").is_dir() else []
        if not found:
            return [], []
        held = _open_files()
        removed, left = [], []
        for lock in found:
            if held is None or str(lock) in held:
                left.append(str(lock))
                continue
            try:
                lock.unlink()
                removed.append(str(lock))
            except OSError:
                left.append(str(lock))
        return removed, left


def changes(attempt: Attempt) -> list[Changed]:
    """The attempt's change: its base commit against its checkout's final tree, which is its
    files whatever the agent did with git (committed them or not, amended, reset, moved HEAD
    to another branch or an unrelated root). The checkout's index is made to hold that tree
    (`git add -A`), the brought-in paths and what never lands (neverlands.py) as they are at
    the base. The one list every check on an attempt's change reads (secrets and size here;
    protected paths)."""
    git = attempt.git
    git.run("add", "-A", "--", ":/", *_exclusions(attempt), *neverlands.pathspecs())
    git.run("add", "-u", "--", ":/")  # the files the base tracks: on the built-in list or not
    changed = _raw_diff(git.run("diff-index", "--cached", "-z", "--no-renames", attempt.base, worktree=False))
    # what the agent's own `git add -f` put in: brought-in paths, and new ignored files
    left_out = {c.path for c in changed if _under(c.path, attempt.brought)} | _ignored_new(attempt, changed)
    if left_out:
        _back_to_base(attempt, sorted(left_out))
        changed = [c for c in changed if c.path not in left_out]
    return changed


def _ignored_new(attempt: Attempt, changed: list[Changed]) -> set[str]:
    """The paths of `changed` not at the base that the built-in list or the repository's
    ignore rules leave out (a path the base tracks is the repository's: its change lands)."""
    new = {c.path for c in changed if c.added}
    if not new:
        return set()
    # the index's paths the ignore rules match (.gitignore files, info/exclude, core.excludesFile)
    ignored = attempt.git.run("ls-files", "-z", "--cached", "--ignored", "--exclude-standard", worktree=False)
    out = {p for p in new if neverlands.built_in(p)}
    out.update(p for p in ignored.split("\0") if p in new)
    return out


def _exclusions(attempt: Attempt) -> list[str]:
    """Pathspecs leaving the brought-in paths out of `git add -A`: only those there and not
    ignored (git refuses a pathspec naming an ignored path, and ignores them anyway)."""
    there = [p for p in attempt.brought if os.path.lexists(attempt.path / p)]
    if not there:
        return []
    ignored = set(attempt.git.run("check-ignore", "--no-index", "--", *there, ok=(0, 1)).splitlines())
    return [f":(exclude,top,literal){p}" for p in there if p not in ignored]


def _back_to_base(attempt: Attempt, paths: list[str]) -> None:
    """Put `paths` in the checkout's index as they are at its base (gone when not there)."""
    for i in range(0, len(paths), PATH_CHUNK):
        attempt.git.run("reset", "-q", attempt.base, "--", *paths[i:i + PATH_CHUNK], env=LITERAL)


def _raw_diff(out: str) -> list[Changed]:
    """The entries of `git diff-* -z --no-renames` raw output (`:old new old-id new-id X`, path)."""
    fields = out.split("\0")
    changed = []
    for meta, path in zip(fields[0::2], fields[1::2]):
        parts = meta.split()
        if len(parts) == 5 and path:
            changed.append(Changed(path, parts[1], parts[3], added=parts[0] == ":000000"))
    return changed


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def _open_files() -> set[str] | None:
    """Every file a live process has open (Linux /proc); None where that cannot be read."""
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return None
    out: set[str] = set()
    for pid in proc.iterdir():
        if not pid.name.isdigit():
            continue
        try:
            for fd in (pid / "fd").iterdir():
                try:
                    out.add(os.readlink(fd))
                except OSError:
                    pass
        except OSError:
            pass
    return out


def _read_small(path: Path) -> str:
    """A small file's text ("" when it cannot be read), never through a final link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        return f.read(4096).decode("utf-8", "surrogateescape")


def _link_on_the_way(top: Path, path: Path, mkdir: bool = False) -> Path | None:
    """The first symbolic link (or non-directory) among `path` and its parents below `top`
    (`path` inside `top`), or None; mkdir: missing directories are made on the way."""
    here = top
    for part in Path(os.path.relpath(path, top)).parts:
        if part in ("..", "."):
            return path
        here = here / part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            if not mkdir:
                return None  # nothing further exists
            os.mkdir(here)
            continue
        if not stat.S_ISDIR(st.st_mode):
            return here
    return None


def _read_only(path: Path) -> None:
    """A copy the agent should not change: write bits off (files and directories)."""
    for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
        if not p.is_symlink():
            mode = p.stat().st_mode
            os.chmod(p, mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _make_writable(path: Path) -> None:
    """Write bits back on (a read-only copy's directories) so the tree can be removed."""
    for p in [path, *(path.rglob("*") if path.is_dir() and not path.is_symlink() else [])]:
        if p.is_dir() and not p.is_symlink():
            try:
                os.chmod(p, p.stat().st_mode | stat.S_IWUSR)
            except OSError:
                pass
