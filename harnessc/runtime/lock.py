"""One run per project at a time: .harness/run.lock holds the pid under an fcntl lock.

The kernel drops the lock when its holder dies, so a lock left by a killed run is simply
taken over.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class Locked(Exception):
    def __init__(self, pid: int | None):
        super().__init__(f"a run is already in progress in this project (pid {pid or '?'})")
        self.pid = pid


class RunLock:
    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = int(os.read(fd, 64).decode().strip() or 0)
            except ValueError:
                pid = None
            os.close(fd)
            raise Locked(pid) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
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


def holder(path: Path) -> int | None:
    """The pid of a live run holding the lock, else None."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
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
