"""Reused checkouts: a run keeps the worktrees its attempts are done with and moves the
next attempt's into place instead of checking out every file again.

`give` renames an attempt's worktree to `.harness/worktrees/<run>/free-<i>`; `take` renames
a free one to where the next attempt works (`<n>-<k>`) and makes it what a fresh `git
worktree add --detach <base>` would have made, so the agent cannot tell the two apart:

* its git directory's per-worktree files as git writes them for a new worktree - `HEAD`
  and `ORIG_HEAD` at the base, a reflog of one entry, and the index harnessc's own last
  checkout wrote (the agent's is never read: an index it edited, marked skip-worktree or
  split is not trusted). Everything else there goes: the agent's per-worktree refs and
  reflog, `config.worktree`, a merge, rebase or bisect in progress, submodule
  repositories (`modules/`), lock files;
* every directory of the checkout back to the mode git makes (one the agent made
  read-only or unreadable included), fifos and sockets removed, then `git clean -ffdx` of
  what is not tracked (ignored files and nested repositories too; the `worktrees: link`
  links still pointing where harnessc made them are kept), then `git read-tree -u --reset
  <base>` - it writes only the files that differ from that index: what the agent changed
  and what differs between the two bases; submodule directories emptied, as a new
  worktree leaves them. What the agent changed is told by stat data: every entry of the
  index whose file is not as it recorded, to the nanosecond, is marked changed first
  (`_smudged`: git compares times to the second, and permission bits not at all).

A checkout that cannot be put back so - its `.git` file or git directory not as harnessc
left them, a file that will not go - is removed (`discarded`) and a fresh one made. The pool
is emptied at the run's end (`drain`); after a crash `reconcile` removes what it held with
every other worktree under `.harness/worktrees/` (`harnessc clean` too).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ... import gitcmd

FREE = "free-"  # a free checkout's name under .harness/worktrees/<run>/
KEEP = ("commondir", "gitdir")  # of a worktree's git directory: what take rewrites or checks, not removes
# Settings for the reset: a file is taken as unchanged only when all its stat data (ctime and
# inode included) matches what the index recorded; no split index or untracked cache (files
# of the git directory the reset removes, or directory times an agent can set).
RESET = ("-c", "core.checkStat=default", "-c", "core.trustctime=true", "-c", "core.ignoreStat=false",
         "-c", "core.splitIndex=false", "-c", "core.untrackedCache=false", "-c", "core.fsmonitor=false")
GITLINK = (0o160000).to_bytes(4, "big")  # a submodule entry's mode in the index


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()
DIR_MODE = 0o777 & ~_UMASK  # what mkdir (git's too) gives a directory
FILE_MODE = 0o666 & ~_UMASK  # and a new file, the checkout's .git file among them


class Unusable(Exception):
    """A free checkout cannot be put back to what a fresh one would be (it is discarded)."""


@dataclass
class Kept:
    """A checkout harnessc made, as harnessc last left it."""

    path: Path  # where it is now
    git_dir: Path  # <common>/worktrees/<name>
    gitfile: str  # its `.git` file's text
    commondir: bytes
    index: bytes  # the index harnessc's last checkout wrote (at `base`)
    reflog: str  # ` <ident> <time> <zone>` of the reflog entry git wrote when it was made ("": none)
    orig_head: bool  # git wrote an ORIG_HEAD when it made it
    links: dict[str, str] = field(default_factory=dict)  # path (from the top) -> target of harnessc's links


@dataclass
class Pool:
    """The free checkouts of one run, and the ones attempts hold."""

    root: Path  # .harness/worktrees/<run>
    held: dict[Path, Kept] = field(default_factory=dict)  # by the attempt's path
    free: list[Kept] = field(default_factory=list)
    made: int = 0  # checkouts git made for this run
    reused: int = 0  # checkouts handed out again
    discarded: list[str] = field(default_factory=list)  # why, one line each
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seq: int = 0

    def hold(self, path: Path, git_dir: Path, gitfile: str) -> Kept:
        """Note a worktree git just made at `path` (before any agent ran in it)."""
        with self._lock:
            self.made += 1
        kept = Kept(path, git_dir, gitfile, (git_dir / "commondir").read_bytes(), (git_dir / "index").read_bytes(),
                    _reflog_tail(git_dir), (git_dir / "ORIG_HEAD").exists())
        self.held[path] = kept
        return kept

    def give(self, path: Path, admin: threading.Lock) -> bool:
        """The attempt at `path` is done: its worktree becomes free (renamed out of the way,
        its git directory told where it went). False when it is not one to keep."""
        kept = self.held.pop(path, None)
        if kept is None or _unsound(kept):
            return False
        with self._lock:
            self._seq += 1
            free = self.root / f"{FREE}{self._seq}"
        try:
            with admin:
                _move(kept, free)
        except OSError:
            return False
        with self._lock:
            self.free.append(kept)
        return True

    def take(self, path: Path, base: str, admin: threading.Lock, discard: Callable[[Path], None]) -> Kept | None:
        """A free checkout, moved to `path` (nothing is there) and put back to a fresh one's
        state at `base`; None when none is free (the caller makes one). One that cannot be
        put back is `discard`ed (removed) and the next free one tried."""
        while True:
            with self._lock:
                if not self.free:
                    return None
                kept = self.free.pop()
            try:
                self._put_back(kept, path, base, admin)
            except (Unusable, OSError, gitcmd.GitFailed) as e:
                self.held.pop(path, None)
                with self._lock:
                    self.discarded.append(str(e)[:300])
                discard(kept.path)
                continue
            with self._lock:
                self.reused += 1
            return kept

    def _put_back(self, kept: Kept, path: Path, base: str, admin: threading.Lock) -> None:
        with admin:
            if why := _unsound(kept):
                raise Unusable(f"{kept.path.name}: {why}")
            _move(kept, path)
        self.held[path] = kept
        _reset_git_dir(kept, base)
        git = gitcmd.Git(path, git_dir=kept.git_dir)
        os.chmod(path / ".git", FILE_MODE)  # a regular file (_unsound): no link followed
        _open_up(path)
        keep = [f"/{_literal(rel)}" for rel, target in kept.links.items() if _is_link_to(path, rel, target)]
        try:
            git.run(*RESET, "clean", "-ffdxq", *(a for p in keep for a in ("-e", p)), timeout=300)
        except gitcmd.GitFailed as e:  # exit 1: something would not go
            raise Unusable(f"{path.name}: git clean could not remove what the last attempt left: {e}") from None
        git.run(*RESET, "read-tree", "-u", "--reset", base, timeout=300)
        kept.index = (kept.git_dir / "index").read_bytes()
        if GITLINK in kept.index:
            _empty_submodules(git, path)
        kept.links = {rel: t for rel, t in kept.links.items() if _is_link_to(path, rel, t)}

    def drop(self, path: Path) -> Kept | None:
        """Forget the checkout at `path` (it is being removed); its record, when it was one."""
        with self._lock:
            kept = self.held.pop(path, None)
            for i, k in enumerate(self.free):
                if k.path == path:
                    kept = self.free.pop(i)
                    break
        return kept

    def drain(self) -> list[Kept]:
        """Every free checkout (for the caller to remove): the pool is empty after."""
        with self._lock:
            out, self.free = self.free, []
        return out


def _unsound(kept: Kept) -> str:
    """Why the checkout is not as harnessc left it for reuse ("" when it is): a real
    directory whose `.git` file is as git wrote it, a real git directory naming the common one."""
    if not _is_dir(kept.path):
        return "it is no longer a directory"
    if _read(kept.path / ".git") != kept.gitfile.encode():
        return "its .git file is not as git wrote it"
    if not _is_dir(kept.git_dir) or _read(kept.git_dir / "commondir") != kept.commondir:
        return "its git directory is not as git made it"
    return ""


def _move(kept: Kept, to: Path) -> None:
    """Rename the checkout to `to` and tell its git directory (`gitdir`), as `git worktree
    move` does (under the worktree admin lock: a `git worktree prune` must never see it half done)."""
    os.rename(kept.path, to)
    kept.path = to
    _write(kept.git_dir / "gitdir", f"{to / '.git'}\n".encode())


def _reset_git_dir(kept: Kept, base: str) -> None:
    """The checkout's own git directory as `git worktree add --detach <base>` leaves it."""
    git_dir = kept.git_dir
    for entry in os.scandir(git_dir):
        if entry.name not in KEEP:
            _remove(Path(entry.path))
    if kept.reflog:  # (none where core.logAllRefUpdates is off)
        os.mkdir(git_dir / "logs")
        head, tab, message = kept.reflog.partition("\t")
        who, _, zone = head.rpartition(" ")
        who = who.rpartition(" ")[0]  # the time it was made: now instead
        line = f"{'0' * len(base)} {base}{who} {int(time.time())} {zone}{tab}{message}\n"
        _write(git_dir / "logs" / "HEAD", line.encode())
    _write(git_dir / "HEAD", f"{base}\n".encode())
    if kept.orig_head:
        _write(git_dir / "ORIG_HEAD", f"{base}\n".encode())
    index = _smudged(kept.index, kept.path, len(base) // 2)
    if index is not None:  # else no index: read-tree writes every file
        _write(git_dir / "index", index)


def _smudged(index: bytes, top: Path, oid: int) -> bytes | None:
    """`index` (harnessc's, version 2 or 3) with every entry whose file is not exactly as it
    recorded - its times to the nanosecond, inode, size, owner, type and permission bits -
    marked changed (its stat data zeroed), so read-tree writes that file again. git
    compares times to the second only: an agent that changed a file in the second it was
    written and put its times back, or only changed its permission bits, would pass. None:
    an index this cannot read (version 4: prefix-compressed paths), then none is used."""
    if index[:4] != b"DIRC" or len(index) < 12 + oid:
        return None
    version, count = struct.unpack_from(">II", index, 4)
    if version not in (2, 3):
        return None
    out, at = bytearray(index), 12
    for _ in range(count):
        ctime_s, ctime_ns, mtime_s, mtime_ns, _dev, ino, mode, uid, gid, size = struct.unpack_from(">10I", index, at)
        flags = struct.unpack_from(">H", index, at + 40 + oid)[0]
        name_at = at + 42 + oid + (2 if version == 3 and flags & 0x4000 else 0)
        end = index.index(b"\0", name_at)
        rel = index[name_at:end].decode("utf-8", "surrogateescape")
        if mode >> 12 in (0o10, 0o12) and not flags & 0x3000:  # a file or link, stage 0
            try:
                st = os.lstat(top / rel)
            except OSError:
                st = None
            want = (0o777 if mode & 0o111 else 0o666) & ~_UMASK if mode >> 12 == 0o10 else None
            if st is None or (divmod(st.st_ctime_ns, 10**9), divmod(st.st_mtime_ns, 10**9)) != \
                    ((ctime_s, ctime_ns), (mtime_s, mtime_ns)) or (st.st_ino & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF,
                                                                   st.st_uid, st.st_gid) != (ino, size, uid, gid) \
                    or stat.S_IFMT(st.st_mode) >> 12 != mode >> 12 \
                    or (want is not None and stat.S_IMODE(st.st_mode) != want):
                struct.pack_into(">6I", out, at, 0, 0, 0, 0, 0, 0)
                struct.pack_into(">I", out, at + 36, 0)
        at += (end - at + 8) & ~7  # the entry's NUL padding: 1 to 8 bytes
    if any(index[-oid:]):  # its checksum (index.skipHash leaves zeros)
        out[-oid:] = (hashlib.sha1 if oid == 20 else hashlib.sha256)(bytes(out[:-oid])).digest()
    return bytes(out)


def _reflog_tail(git_dir: Path) -> str:
    """What follows the two object ids in the reflog entry git wrote when it made the
    worktree (` <ident> <time> <zone>`, a tab and message if any)."""
    line = _read(git_dir / "logs" / "HEAD").decode("utf-8", "surrogateescape").split("\n", 1)[0]
    parts = line.split(" ", 2)
    return " " + parts[2] if len(parts) == 3 else ""


def _open_up(top: Path) -> None:
    """Every directory of the checkout back to the mode mkdir gives (one the agent made
    read-only, unreadable or group-writable too), before its listing is read: nothing is
    left behind for want of a permission, and the next agent finds the modes a fresh
    checkout has. Fifos, sockets and devices go (git neither tracks nor cleans them). Links
    are never followed."""
    stack = [top]
    while stack:
        here = stack.pop()
        st = os.lstat(here)
        if stat.S_IMODE(st.st_mode) != DIR_MODE:
            os.chmod(here, DIR_MODE)
        with os.scandir(here) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                elif not e.is_file(follow_symlinks=False) and not e.is_symlink():
                    os.unlink(e.path)


def _empty_submodules(git: gitcmd.Git, top: Path) -> None:
    """A submodule's directory holds nothing in a new worktree: whatever is in one goes."""
    out = git.run("ls-files", "-s", "-z", worktree=False)
    for entry in out.split("\0"):
        meta, _, rel = entry.partition("\t")
        if not meta.startswith("160000 ") or not rel:
            continue
        if _link_on_the_way(top, rel):
            raise Unusable(f"{top.name}: a link where submodule {rel} goes")
        here = top / rel
        if not _is_dir(here):
            if os.path.lexists(here):
                os.unlink(here)
            os.mkdir(here)
        for child in os.scandir(here):
            _remove(Path(child.path))


def _remove(path: Path) -> None:
    """Remove `path`: a link or file as itself, a directory with what is in it (write bits
    put back first), never following a link."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    _open_up(path)
    shutil.rmtree(path)


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_link_to(top: Path, rel: str, target: str) -> bool:
    """Whether `top`/`rel` is a symbolic link to `target`, with no link on the way to it."""
    try:
        return not _link_on_the_way(top, str(Path(rel).parent)) and os.readlink(top / rel) == target
    except OSError:
        return False


def _link_on_the_way(top: Path, rel: str) -> bool:
    """Whether a directory of `rel` below `top` (itself included) is not a real directory."""
    here = top
    for part in Path(rel).parts:
        here = here / part
        if not _is_dir(here):
            return os.path.lexists(here)
    return False


def _read(path: Path) -> bytes:
    """A small file's bytes (b"" when it cannot be read), never through a final link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as f:
        return f.read(1 << 16)


def _write(path: Path, data: bytes) -> None:
    """Replace `path` whole (a rename: a link there is replaced, never written through)."""
    tmp = path.with_name(f".{path.name}.harnessc-{os.getpid()}-{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _literal(rel: str) -> str:
    """`rel` as a gitignore pattern that matches that path only."""
    out = "".join("\\" + c if c in "\\*?[" else c for c in rel.rstrip("/"))
    return "\\" + out if out[:1] in ("!", "#") else out
