"""One run per project at a time: .harness/run.lock holds the pid under an fcntl lock.

The kernel drops the lock when its holder dies, so a lock left by a killed run is simply
taken over.
"""

from __future__ import annotations

import fcntl
import os

from ...errors import HarnesscError
from ...workspace import Workspace, WorkspaceError


class Locked(HarnesscError):
    def __init__(self, pid: int | None):
        super().__init__(f"a run is already in progress in this project (pid {pid or '?'})")
        self.pid = pid


class RunLock:
    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self.fd: int | None = None

    def acquire(self) -> None:
        fd = self.workspace.open_lock(self.workspace.run_lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = int(os.read(fd, 64).decode().strip() or 0)
            except ValueError:
                pid = None
            os.close(fd)
            raise Locked(pid) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as e:  # a full disk or a read-only project
            os.close(fd)
            raise WorkspaceError(f"cannot write {self.workspace.rel(self.workspace.run_lock)}: {e.strerror}") from None
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            finally:
                os.close(self.fd)
                self.fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


def holder(workspace: Workspace) -> int | None:
    """The pid of a live run holding the lock, else None."""
    try:
        fd = workspace.open_read(workspace.run_lock)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return int(os.read(fd, 64).decode().strip() or 0) or None
            except ValueError:
                return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
