"""Shipping a checkout and a change between the driver and Ray workers, with plain git.

* The driver bundles a base commit once (`bundle_commit`); the Ray executor puts it in the
  object store once per commit.
* A worker keeps one bare repository per source on its node (`NodeCache`): bundles are
  fetched into one, a `clone_url` is cloned once and fetched from; an attempt's checkout is
  a `--shared` clone of it at the base commit, with the change so far applied.
* A change is `git diff --binary` from the base commit to the checkout's files, untracked
  ones included (ignored ones and the built-in list of worktree/neverlands.py not): file
  modes and binary files survive; `apply_change` puts one in a driver worktree.

Imports nothing but the standard library (and neverlands.py): remote.py runs it on workers.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

from ... import gitcmd
from ...gitcmd import CONFINED, NEUTRAL, NO_HOOKS
from ..worktree import neverlands

GIT_TIMEOUT = 600.0
_QUIET = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_NO_REPLACE_OBJECTS": "1"}
SNAPSHOT_LIMIT = 5000  # files and directories a checkout may hold for a stat snapshot (more: git status each time)
RACY_NS = 2_000_000_000  # a file changed this recently could change again within its timestamp's tick, unseen


git_calls = 0  # git processes this process has run (remote.py reports them per attempt)


class ShipError(Exception):
    """A git step of shipping failed (its command and stderr, no more)."""


def git(*args: str, cwd: str | Path | None = None, stdin: bytes | None = None,
        env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,), git_dir: Path | None = None) -> bytes:
    """Run git (no hooks, no prompt); its stdout, or ShipError. git_dir: the repository's git
    directory, `cwd` its work tree (the driver's worktrees: never found by walking up); else
    git looks in `cwd` only, never above it."""
    global git_calls
    git_calls += 1
    full_env = {**os.environ, **_QUIET, **(env or {})}
    settings: tuple[str, ...] = NO_HOOKS
    if cwd is not None:  # a checkout an agent worked in: nothing its config names may run
        full_env["GIT_CEILING_DIRECTORIES"] = str(Path(cwd).absolute().parent)
        full_env.update(CONFINED)
        settings = NO_HOOKS + NEUTRAL
        if git_dir is not None:
            full_env.update(GIT_DIR=str(git_dir), GIT_WORK_TREE=str(cwd))
            if not str(git_dir).startswith(str(Path(cwd).absolute()) + os.sep):  # the user's repository
                # (the driver): harnessc's own git there, as gitcmd runs it - the child
                # environment, every driver its configuration names blanked
                full_env = _users_git(Path(cwd), Path(git_dir)).env({**_QUIET, **(env or {})}, drivers=True)
    try:
        res = subprocess.run(["git", *(x for c in settings for x in ("-c", c)), *args], cwd=cwd, input=stdin,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, timeout=GIT_TIMEOUT)
    except FileNotFoundError:
        raise ShipError("git is not installed (not found on PATH)") from None
    except subprocess.TimeoutExpired:
        raise ShipError(f"git {args[0]} took over {GIT_TIMEOUT:g}s") from None
    if res.returncode not in ok:
        err = res.stderr.decode("utf-8", "replace").strip()[-1000:]
        raise ShipError(f"git {' '.join(args[:2])} failed (exit {res.returncode}): {err}")
    return res.stdout


_USERS_GIT: dict[tuple[str, str], gitcmd.Git] = {}


def _users_git(cwd: Path, git_dir: Path) -> gitcmd.Git:
    """gitcmd's Git for a work tree of the user's repository (its driver blanks kept between calls)."""
    key = (str(cwd), str(git_dir))
    if key not in _USERS_GIT:
        _USERS_GIT[key] = gitcmd.Git(cwd, git_dir=git_dir)
    return _USERS_GIT[key]


NO_FILTERS = b"* -filter\n"  # info/attributes wins over every .gitattributes: no filter driver is named


def _own_git_dir(top: Path) -> Path:
    """A worker checkout's git directory, `top/.git` (a `clone --shared` of the node's cache),
    its info/attributes unsetting every filter. The agent that worked there may have written
    a filter, fsmonitor or hook into its config: harnessc's git there runs none of them (the
    `-c` settings and this file), and a `.git` that is no longer a directory is no checkout
    of harnessc's."""
    git_dir = top / ".git"
    try:
        if not os.path.isdir(git_dir) or os.path.islink(git_dir):
            raise ShipError(f"tampered with .git: {git_dir} is no longer the checkout's git directory")
        info = git_dir / "info"
        if os.path.islink(info):
            os.unlink(info)
        info.mkdir(exist_ok=True)
        attributes = info / "attributes"
        try:
            with open(attributes, "rb") as f:
                if f.read(len(NO_FILTERS) + 1) == NO_FILTERS:
                    return git_dir
        except OSError:
            pass
        if os.path.lexists(attributes):
            os.unlink(attributes)  # a link or the agent's own: replaced, never followed
        fd = os.open(attributes, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(NO_FILTERS)
    except OSError as e:
        raise ShipError(f"could not make {git_dir} safe for git: {e.strerror or e}") from None
    return git_dir


# What in a checkout's own git directory the next agent's git would obey: an agent that changed
# any of it (planted a hook, a filter in config, an alternate) leaves a checkout never handed on.
GIT_STATE = ("config", "config.worktree", "commondir", "hooks", "info", "objects/info", "modules")
GIT_STATE_LIMIT = 1 << 20  # bytes hashed at most: more is a change (the checkout is dropped)


def git_state(top: Path) -> str | None:
    """A digest of GIT_STATE in `top/.git` (names, modes, link targets, contents); None when it
    cannot be read or is larger than GIT_STATE_LIMIT."""
    digest, left = hashlib.sha256(), [GIT_STATE_LIMIT]

    def add(path: Path, name: str) -> None:
        st = os.lstat(path)
        digest.update(f"{name}\0{st.st_mode:o}\0".encode("utf-8", "surrogateescape"))
        if os.path.islink(path):
            digest.update(os.fsencode(os.readlink(path)))
        elif os.path.isdir(path):
            for child in sorted(os.listdir(path)):
                add(path / child, f"{name}/{child}")
        elif os.path.isfile(path):
            left[0] -= st.st_size
            if left[0] < 0:
                raise OSError("too large")
            with open(path, "rb") as f:
                digest.update(f.read())
        digest.update(b"\n")

    try:
        for name in GIT_STATE:
            if os.path.lexists(top / ".git" / name):
                add(top / ".git" / name, name)
    except OSError:
        return None
    return digest.hexdigest()


# ------------------------------------------------------------------ driver side

def bundle_commit(top: Path, sha: str, git_dir: Path | None = None) -> bytes:
    """A git bundle holding `sha` and its history (a bundle needs a ref: a temporary one)."""
    ref = f"refs/harnessc/bundle/{sha}"
    git("update-ref", ref, sha, cwd=top, git_dir=git_dir)
    try:
        with tempfile.TemporaryDirectory(prefix="harnessc-bundle-") as tmp:
            path = Path(tmp) / "base.bundle"
            git("bundle", "create", "-q", str(path), ref, cwd=top, git_dir=git_dir)
            return path.read_bytes()
    finally:
        git("update-ref", "-d", ref, cwd=top, ok=(0, 1), git_dir=git_dir)


def apply_change(top: Path, base: str, change: bytes, keep: tuple[str, ...] = (),
                 git_dir: Path | None = None) -> None:
    """Make the worktree at `top` hold `base` plus `change` (what a worker returned): its
    files reset to `base` first (untracked ones removed, `keep` and ignored ones aside)."""
    git("reset", "-q", "--hard", base, cwd=top, git_dir=git_dir)
    git("clean", "-fdq", *(a for p in keep for a in ("-e", "/" + p)), cwd=top, git_dir=git_dir)
    if change:
        git("apply", "--binary", "--whitespace=nowarn", "-", cwd=top, stdin=change, git_dir=git_dir)


# ------------------------------------------------------------------ worker side

def change_of(top: Path, base: str, git_dir: Path | None = None) -> tuple[bytes, bool]:
    """The checkout's files against `base` as one binary diff (untracked files included,
    ignored ones not), and whether the checkout is clean (at `base` - an agent may have
    committed -, nothing differs from it, no untracked or ignored file). A clean one costs
    one git process, a changed one three; the checkout's index is left holding the untracked
    files as intent-to-add (a checkout that is not clean is reset before its next use:
    NodeCache.checkout)."""
    status = git("status", "--porcelain=v2", "--branch", "-z", "--ignored=matching", "--untracked-files=all",
                 cwd=top, git_dir=git_dir).split(b"\0")
    # the headers come first ("# branch.oid <sha>", ...), then one entry per path
    if f"# branch.oid {base}".encode() in status and all(e.startswith(b"# ") for e in status if e):
        return b"", True
    # untracked files show in the diff as new ones; what never lands stays out of it
    git("add", "-A", "-N", "--", ".", *neverlands.pathspecs(), cwd=top, git_dir=git_dir)
    return git("diff", "--binary", "--no-renames", "--full-index", "--no-ext-diff", "--no-textconv",
               "--no-color", base, cwd=top, git_dir=git_dir), False


def snapshot(top: Path) -> dict[str, tuple] | None:
    """The checkout's files and directories (and its .git's HEAD, index and config) by their
    stat data: mode, size, inode, mtime, ctime. Two equal snapshots: nothing was written,
    made, removed or committed there in between, as git status itself trusts the stat data
    of the files its index holds. None when it has over SNAPSHOT_LIMIT entries, or one
    changed within RACY_NS (a second change within the same timestamp tick would look the
    same: git's racy case)."""
    since = time.time_ns() - RACY_NS
    out: dict[str, tuple] = {}
    for name in ("HEAD", "index", "config"):
        try:
            st = os.lstat(top / ".git" / name)
        except FileNotFoundError:
            continue
        if st.st_mtime_ns > since or st.st_ctime_ns > since:
            return None
        out[f".git/{name}"] = (st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    dirs = [(str(top), "")]
    while dirs:
        path, rel = dirs.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                name = rel + entry.name
                if name == ".git":
                    continue
                st = entry.stat(follow_symlinks=False)
                if st.st_mtime_ns > since or st.st_ctime_ns > since or len(out) >= SNAPSHOT_LIMIT:
                    return None
                out[name] = (st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
                if entry.is_dir(follow_symlinks=False):
                    dirs.append((entry.path, name + "/"))
    return out


def cache_root() -> Path:
    """Where this node keeps its repositories (HARNESSC_RAY_CACHE, else under the temp dir)."""
    return Path(os.environ.get("HARNESSC_RAY_CACHE") or
                Path(tempfile.gettempdir()) / f"harnessc-ray-cache-{os.getuid()}")


class NodeCache:
    """This node's repositories, one per source; attempt checkouts are made from them and
    kept for the next attempt of this (worker) process, reset to its base. A checkout found
    clean keeps its snapshot: the next attempt that leaves its files as they were needs no
    git to say so."""

    def __init__(self, root: Path | None = None):
        self.root = root or cache_root()
        self.known: set[tuple[Path, str]] = set()  # (repository, commit) it is known to hold
        self.free: dict[Path, list[tuple[Path, str | None]]] = {}  # repository -> (checkout, commit it is clean at)
        self.clean: dict[Path, dict] = {}  # checkout -> its snapshot when last found clean (at the commit it holds)
        self.made: dict[Path, str | None] = {}  # checkout -> its git_state as harnessc made it

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{name}.lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _repo(self, name: str, url: str | None = None) -> Path:
        repo = self.root / f"{name}.git"
        if not (repo / "HEAD").exists():
            tmp = self.root / f"{name}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            if url:
                git("clone", "--bare", "-q", url, str(tmp))
            else:
                git("init", "--bare", "-q", str(tmp))
            os.replace(tmp, repo)
        return repo

    @staticmethod
    def has(repo: Path, sha: str) -> bool:
        global git_calls
        git_calls += 1
        return subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=repo, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=GIT_TIMEOUT).returncode == 0

    def holding(self, source: dict, sha: str) -> Path | None:
        """The repository of `source` ({"url"} or {"bundle"}) when it is known to hold `sha`
        (no git, no lock), else None: from_url or from_bundle gets it."""
        repo = self._url_repo(source["url"]) if source.get("url") else self.root / "bundles.git"
        return repo if (repo, sha) in self.known else None

    def _url_repo(self, url: str) -> Path:
        return self.root / ("url-" + hashlib.sha256(url.encode()).hexdigest()[:16] + ".git")

    def from_bundle(self, sha: str, fetch: Callable[[], bytes]) -> Path:
        """The bundles' repository, holding `sha` (`fetch()` gives its bundle when it does not)."""
        repo = self.root / "bundles.git"
        if (repo, sha) in self.known:
            return repo
        with self._locked("bundles"):
            repo = self._repo("bundles")
            if not self.has(repo, sha):
                with tempfile.NamedTemporaryFile(prefix="harnessc-", suffix=".bundle", dir=self.root) as f:
                    f.write(fetch())
                    f.flush()
                    git("fetch", "-q", "--no-write-fetch-head", f.name, f"refs/harnessc/bundle/{sha}:refs/base/{sha}",
                        cwd=repo)
            self.known.add((repo, sha))
            return repo

    def from_url(self, url: str, sha: str) -> Path:
        """A clone of `url` (made once per node) holding `sha` (fetched when it does not)."""
        repo = self._url_repo(url)
        if (repo, sha) in self.known:
            return repo
        with self._locked(repo.stem):
            repo = self._repo(repo.stem, url)
            if not self.has(repo, sha):
                git("fetch", "-q", "--no-write-fetch-head", "origin", sha, cwd=repo)
            self.known.add((repo, sha))
            return repo

    def kept(self, repo: Path, sha: str, change: bytes) -> Path | None:
        """A kept checkout clean at `sha` when there is one and no change is to be applied: no
        git, no thread (else None: `checkout` makes one)."""
        free = self.free.get(repo) or []
        at = next((i for i in range(len(free) - 1, -1, -1) if free[i][1] == sha), None) if not change else None
        return self._untouched(free.pop(at)[0]) if at is not None else None

    def _untouched(self, top: Path | None) -> Path | None:
        """`top` when its own git directory is as harnessc made it, else None (dropped: the
        agent that worked there planted something the next one's git would run)."""
        if top is not None and (self.made.get(top) is None or git_state(top) != self.made[top]):
            self.drop(top)
            return None
        return top

    def checkout(self, repo: Path, sha: str, change: bytes) -> Path:
        """A checkout of `sha` with `change` applied: a kept one (reset to `sha` unless it is
        clean there already), else a new `--shared` clone."""
        free = self.free.setdefault(repo, [])
        top, clean_at = free.pop() if free else (None, None)
        top = self._untouched(top)
        if top is None:
            clean_at = None
        if change or clean_at != sha:
            self.clean.pop(top, None)  # its files change here: the snapshot no longer says
        try:
            if top is None:
                self.root.mkdir(parents=True, exist_ok=True)
                top = Path(tempfile.mkdtemp(prefix="attempt-", dir=self.root))
                git("clone", "--shared", "--no-checkout", "-q", str(repo), str(top))
                _own_git_dir(top)
                self.made[top] = git_state(top)
            if clean_at != sha:
                own = _own_git_dir(top)
                git("-c", "advice.detachedHead=false", "checkout", "-q", "-f", "--detach", sha, cwd=top, git_dir=own)
                git("clean", "-ffdxq", cwd=top, git_dir=own)  # -ff: a repository an agent made inside too
            if change:
                git("apply", "--binary", "--whitespace=nowarn", "-", cwd=top, stdin=change, git_dir=_own_git_dir(top))
        except BaseException:
            if top is not None:
                self.drop(top)
            raise
        return top

    def change(self, top: Path, sha: str) -> tuple[bytes, bool]:
        """change_of the checkout against `sha`, without git when its files are as they were
        when it was last found clean (equal snapshots); a checkout found clean keeps its
        snapshot for the next time."""
        before = self.clean.pop(top, None)
        if before is not None and snapshot(top) == before:
            self.clean[top] = before
            return b"", True
        change, clean = change_of(top, sha, _own_git_dir(top))
        if clean and (after := snapshot(top)) is not None:  # after git: its status may have refreshed the index
            self.clean[top] = after
        return change, clean

    def release(self, repo: Path, top: Path, clean_at: str | None) -> None:
        """Keep the checkout for the next attempt (`clean_at`: the commit it holds untouched)."""
        if clean_at is None:
            self.clean.pop(top, None)
        self.free.setdefault(repo, []).append((top, clean_at))

    def drop(self, top: Path) -> None:
        self.clean.pop(top, None)
        self.made.pop(top, None)
        shutil.rmtree(top, ignore_errors=True)
