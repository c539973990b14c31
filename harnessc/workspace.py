"""The project directory as harnessc finds it (the nearest one upward holding roadmap.md or
harness.yaml) and writes it: every path under `<project>/.harness/`, and the few file
operations harnessc performs in the project, each confined to it.

Confinement is proven at the moment of use, not checked once beforehand: each component
below the project root is opened relative to its parent's descriptor with O_NOFOLLOW, so a
symbolic link anywhere on the way (`.harness -> /tmp`, `.harness/build/prompts -> ~`, a
linked `run.lock`) is refused with an UnsafePath naming it, and a link swapped in after a
check cannot redirect the operation: the directory a file is written in is, by
construction, the one inside the project. The project root itself may be reached through
links (the user chose it). Files written in place (a lock, an appended log) must also not
be hard links, which would carry the write to another name.

Every failure is a WorkspaceError whose message is one line naming the path (relative to
the project) and the reason; the CLI prints it as `harnessc: error: ...` and exits 2.
"""

from __future__ import annotations

import errno
import io
import itertools
import os
import re
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from .errors import HarnesscError

HARNESS = ".harness"
PROJECT_MARKERS = ("roadmap.md", "harness.yaml")  # a directory with either is a project
_FILE_NAME_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # a task id (HC106) as a file name

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted as a file must not block harnessc (it is then refused as not
# a regular file); on regular files the flag changes nothing.
_FILE = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite opens these next to a database


def find_project_root(start: Path) -> Path | None:
    """The nearest directory upward from `start` holding roadmap.md or harness.yaml."""
    start = start.resolve()
    for d in (start, *start.parents):
        if any((d / name).is_file() for name in PROJECT_MARKERS):
            return d
    return None


def task_file_name(task_id: str) -> str:
    """A task id as a file name; an id the roadmap would refuse becomes task-<hash>."""
    if _FILE_NAME_ID.fullmatch(task_id):
        return task_id
    import hashlib  # here: OpenSSL's start-up is ~2 ms of every command (cli imports this module)

    return "task-" + hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class WorkspaceError(HarnesscError):
    """A file operation in the project failed; the message names the path and the reason."""


class UnsafePath(WorkspaceError):
    """The operation would go through a symbolic link (or write through a hard link)."""


def storage_reason(directory: Path, error: BaseException) -> str:
    """The OS reason a write under `directory` failed, in the OS's words when it can be
    told (SQLite says only "database or disk is full" or "disk I/O error")."""
    try:
        fs = os.statvfs(directory)
    except OSError:
        fs = None
    if fs is not None and fs.f_flag & os.ST_RDONLY:
        return os.strerror(errno.EROFS)
    if getattr(error, "sqlite_errorname", "") == "SQLITE_FULL" or (fs is not None and fs.f_bavail == 0):
        return os.strerror(errno.ENOSPC)
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


class Workspace:
    """The paths harnessc keeps in one project, and confined operations on them.

    Paths are absolute (root / ...); every operation takes a path below the root."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.harness = self.root / HARNESS
        self.build = self.harness / "build"  # `harnessc build` output
        self.plan = self.build / "plan.json"
        self.prompts = self.build / "prompts"  # <task-id>.md and _system.md
        self.state_db = self.harness / "state.db"
        self.run_lock = self.harness / "run.lock"
        self.stop = self.harness / "stop"  # `harnessc stop` asks the run to stop through it
        self.runs = self.harness / "runs"  # runs/<run-id>/: events.jsonl, run_results.json
        self.inbox = self.harness / "inbox"  # instructions and commands for a run (runtime/steering.py)
        self.cassettes = self.harness / "cassettes"
        self.alerts_log = self.harness / "alerts.log"
        self.loop = self.harness / "loop"  # run.index: the private git index of file evidence (attribution.py)
        self.outputs = self.harness / "outputs"  # <task>.json: each task's result as it lands (runtime/store/outputs.py)

    def run_dir(self, run_id: str) -> Path:
        return self.runs / run_id

    def events(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "events.jsonl"

    def run_results(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "run_results.json"

    def run_log(self, run_id: str) -> Path:
        """What the run said, as plain lines (runtime/observe/runlog.py)."""
        return self.run_dir(run_id) / "run.log"

    def cassette(self, task_id: str, directory: Path | None = None) -> Path:
        """A task's recorded agent calls (`run --record`, runtime/agents/cassettes.py), in
        .harness/cassettes/ or in the project directory a replay agent names. A task id
        is its file name; an id the roadmap would refuse becomes task-<hash>."""
        return (directory or self.cassettes) / f"{task_file_name(task_id)}.jsonl"

    def output(self, task_id: str) -> Path:
        """A task's result file, .harness/outputs/<task>.json (named like its cassette)."""
        return self.outputs / f"{task_file_name(task_id)}.json"

    def rel(self, path: Path | str) -> str:
        """`path` relative to the project, as messages show it."""
        return Path(path).relative_to(self.root).as_posix()

    # ------------------------------------------------------------------ operations

    def make_dir(self, path: Path) -> None:
        """mkdir -p, below the root, through no link."""
        os.close(self.open_dir(path))

    def open_dir(self, path: Path, create: bool = True) -> int:
        """A descriptor of directory `path` (created with its parents when `create`); the
        caller closes it. Raises FileNotFoundError when missing and not `create`."""
        return self._walk(self._parts(path), create, "write" if create else "read")

    def write_atomic(self, path: Path, data: bytes | str) -> None:
        """Replace `path` by `data` all at once: a temporary file in the same directory,
        renamed over it. On any failure (a full disk) the old file stays as it was."""
        with self.atomic_file(path) as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)

    @contextmanager
    def atomic_file(self, path: Path) -> Iterator[io.BufferedWriter]:
        """A binary file to stream into, which replaces `path` when the block ends without
        error (write_atomic, for data too large to hold)."""
        with self._parent(path, create=True, verb="write") as (fd, name):
            with atomic_file_at(fd, name, lambda: self.rel(path)) as f:
                yield f

    def open_write(self, path: Path, mode: str = "w") -> io.IOBase:
        """A file object for writing ("w", "wb") or appending ("a", "ab"), parents created."""
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode.startswith("a") else 0)
        fd = self._open_file(path, flags, "write", in_place=True)
        if not mode.startswith("a"):
            os.ftruncate(fd, 0)  # only now: a refused hard link is never truncated
        return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"}))

    def open_lock(self, path: Path) -> int:
        """A read-write descriptor for a lock file (created if missing); the caller closes it."""
        return self._open_file(path, os.O_RDWR | os.O_CREAT, "lock", in_place=True)

    def open_read(self, path: Path) -> int:
        """A read-only descriptor of a file; the caller closes it. Raises FileNotFoundError
        when it (or a parent) is missing."""
        return self._open_file(path, os.O_RDONLY, "read", create_parents=False)

    def read_bytes(self, path: Path, limit: int = -1) -> bytes:
        """The bytes of a file (the first `limit` ones, when given). Raises
        FileNotFoundError when it (or a parent) is missing."""
        with os.fdopen(self.open_read(path), "rb") as f:
            try:
                return f.read(limit)
            except OSError as e:
                raise self._error("read", path, e) from None

    def read_text(self, path: Path) -> str:
        return self.read_bytes(path).decode("utf-8")

    def unlink(self, path: Path, missing_ok: bool = True) -> None:
        """Remove a file (a link at `path` is removed itself, never followed)."""
        try:
            with self._parent(path, create=False, verb="delete") as (fd, name):
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            if not missing_ok:
                raise
        except OSError as e:
            raise self._error("delete", path, e) from None

    def list_dir(self, path: Path) -> list[str]:
        """The names in directory `path`, sorted; [] when it does not exist."""
        try:
            fd = self.open_dir(path, create=False)
        except FileNotFoundError:
            return []
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def move(self, src: Path, dst: Path) -> None:
        """Rename `src` to `dst` (parents of dst created); a link is moved, never followed."""
        try:
            with self._parent(src, create=False, verb="move") as (sfd, sname):
                with self._parent(dst, create=True, verb="move") as (dfd, dname):
                    os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
        except FileNotFoundError:
            raise WorkspaceError(f"cannot move {self.rel(src)}: it is gone") from None
        except OSError as e:
            raise self._error("move", src, e) from None

    def sqlite_path(self, path: Path, create: bool = True) -> str:
        """The path to give sqlite3.connect for database `path`, once its directory is
        confined and neither the database nor its WAL, shared-memory or journal file is
        a link. SQLite opens files by name, so this is a check just before the open."""
        with self._parent(path, create=create, verb="open") as (fd, name):
            for n in (name, *(name + s for s in SQLITE_SIDE_FILES)):
                try:
                    st = os.stat(n, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    raise self._link("open", path.parent / n, fd, n)
                if not stat.S_ISREG(st.st_mode):
                    raise WorkspaceError(f"cannot open {self.rel(path.parent / n)}: not a regular file")
        return str(path)

    # ------------------------------------------------------------------ plumbing

    def _parts(self, path: Path | str) -> tuple[str, ...]:
        parts = Path(path).relative_to(self.root).parts
        if not parts or ".." in parts:
            raise ValueError(f"{path} is not a path below {self.root}")
        return parts

    @contextmanager
    def _parent(self, path: Path, create: bool, verb: str) -> Iterator[tuple[int, str]]:
        """(descriptor of the confined parent directory, file name)."""
        parts = self._parts(path)
        fd = self._walk(parts[:-1], create, verb)
        try:
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def _walk(self, parts: tuple[str, ...], create: bool, verb: str) -> int:
        """Open root/parts... one directory at a time, never through a link."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise WorkspaceError(f"cannot {verb} in project directory {self.root}: {e.strerror}") from None
        for i, part in enumerate(parts):
            try:
                try:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:  # made meanwhile, by another harnessc or as a link
                        pass
                    nxt = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                os.close(fd)
                raise
            except OSError as e:
                here = self.root.joinpath(*parts[:i + 1])
                err = self._link(verb, here, fd, part) if e.errno in (errno.ENOTDIR, errno.ELOOP) else None
                os.close(fd)
                raise (err or self._error(verb, here, e)) from None
            os.close(fd)
            fd = nxt
        return fd

    def _open_file(self, path: Path, flags: int, verb: str, in_place: bool = False,
                   create_parents: bool = True) -> int:
        with self._parent(path, create=create_parents, verb=verb) as (dfd, name):
            return self.open_in(dfd, path, flags, verb, in_place, name)

    def open_in(self, dir_fd: int, path: Path, flags: int, verb: str, in_place: bool = False,
                name: str | None = None) -> int:
        """A descriptor of file `path` opened in its parent directory's descriptor `dir_fd`
        (one the caller holds: no walk), with _open_file's checks; the caller closes it."""
        name = name or Path(path).name
        try:
            fd = os.open(name, flags | _FILE, 0o666, dir_fd=dir_fd)
        except FileNotFoundError:
            raise
        except OSError as e:
            err = self._link(verb, path, dir_fd, name) if e.errno == errno.ELOOP else None
            raise (err or self._error(verb, path, e)) from None
        st = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(st.st_mode):
            problem = WorkspaceError(f"cannot {verb} {self.rel(path)}: not a regular file")
        elif in_place and st.st_nlink > 1:
            problem = UnsafePath(f"refusing to {verb} through a hard link: {self.rel(path)} "
                                 f"({st.st_nlink} names for one file)")
        if problem:
            os.close(fd)
            raise problem
        return fd

    def _link(self, verb: str, path: Path, dir_fd: int, name: str) -> UnsafePath | None:
        """The refusal for a link at `name` (in dir_fd), or None when it is no link."""
        try:
            target = os.readlink(name, dir_fd=dir_fd)
        except OSError:
            return None
        return UnsafePath(f"refusing to {verb} through a symbolic link: {self.rel(path)} -> {target}")

    def _error(self, verb: str, path: Path, e: OSError) -> WorkspaceError:
        return WorkspaceError(f"cannot {verb} {self.rel(path)}: {e.strerror or e}")


_tmp_names = itertools.count()
TMP_PREFIX = ".tmp-"  # a temporary file of write_atomic (a process killed mid-write leaves it)


def write_atomic_at(dir_fd: int, name: str, data: bytes, shown: Callable[[], str]) -> None:
    """write_atomic inside an open, confined directory (a build's prompts: one walk for
    all), for a `name` known to be no link (it was not in the directory, or was checked)."""
    fd, tmp = _create_tmp(dir_fd, name, shown)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # replaces a link, never follows it
    except OSError as e:
        _remove(dir_fd, tmp)
        raise WorkspaceError(f"cannot write {shown()}: {e.strerror or e}") from None


@contextmanager
def atomic_file_at(dir_fd: int, name: str, shown: Callable[[], str]) -> Iterator[io.BufferedWriter]:
    """A binary file that replaces `name` (in dir_fd) when the block ends without error;
    on an error the temporary file is removed and `name` is left as it was. A link at
    `name` is refused, not replaced."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"refusing to write through a symbolic link: {shown()} -> "
                         f"{os.readlink(name, dir_fd=dir_fd)}")
    fd, tmp = _create_tmp(dir_fd, name, shown)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as e:
        _remove(dir_fd, tmp)
        if isinstance(e, OSError):
            raise WorkspaceError(f"cannot write {shown()}: {e.strerror or e}") from None
        raise


def _create_tmp(dir_fd: int, name: str, shown: Callable[[], str]) -> tuple[int, str]:
    """A new temporary file next to `name`: (descriptor, its name). The name ends like
    `name`, so a build's clean-up of stale prompts also removes one a crash left."""
    while True:
        prefix = f"{TMP_PREFIX}{os.getpid()}-{next(_tmp_names)}-"
        tmp = prefix + name[len(prefix) - 255:]
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE, 0o666, dir_fd=dir_fd), tmp
        except FileExistsError:  # left by a killed process that had our pid
            continue
        except OSError as e:
            raise WorkspaceError(f"cannot write {shown()}: {e.strerror or e}") from None


def _remove(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
