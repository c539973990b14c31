"""Ending what harnessc starts: no child outlives its command, its run, or harnessc itself.

- A child dies with harnessc: PR_SET_PDEATHSIG(SIGKILL) is set between fork and exec.
- A child carries HARNESSC_PROC=<scope>.<n> in its environment, and so does everything it
  starts (unless that rewrites its environment). When the command ends, every process that
  carries its marker is killed, wherever it went (setsid, double fork), and nothing else:
  concurrent commands never touch each other's processes.
- During a run harnessc is a child subreaper, so orphans come to us, not to init: their
  zombies are reaped here, and when the run ends any orphan still alive is killed.
- A harnessc killed with -9 cleans nothing up: each attempt records its marker and its
  child's pid and start time, and the next run ends whatever still matches (end_leftovers).

Linux only (/proc, prctl); elsewhere the process-group kill in procs.py is all there is.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator

from . import prctl

ENV_MARK = "HARNESSC_PROC"
KILL_WAIT = 5.0  # seconds end_leftovers waits for what it killed to be gone
_SIGKILL = int(signal.SIGKILL)


@dataclass(frozen=True)
class _Scope:
    marker: str  # children get <marker>.<n>
    on_spawn: Callable[[int, int | None], None] | None  # (pid, start time), to record it


_scope: ContextVar[_Scope | None] = ContextVar("harnessc_proc_scope", default=None)
_numbers = itertools.count(1)
_direct: set[int] = set()  # our own children still running: reaped by asyncio, never by us
_adopting = False  # a subreaper now (see adopting): orphans come to us, and we reap them


def enter(marker: str, on_spawn: Callable[[int, int | None], None] | None = None) -> None:
    """Children started from this context on (this asyncio task) carry <marker>.<n>, and
    on_spawn(pid, start time) is told about each of them."""
    _scope.set(_Scope(marker, on_spawn))


# ------------------------------------------------------------------ one child


@dataclass
class Child:
    """How to start one child and, once it ended, end everything it left."""

    marker: str
    preexec: Callable[[], None] | None
    on_spawn: Callable[[int, int | None], None] | None

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        return {**env, ENV_MARK: self.marker}

    def started(self, pid: int) -> None:
        _direct.add(pid)
        if self.on_spawn is not None:
            self.on_spawn(pid, start_time(pid))

    def kill(self) -> list[int]:
        """SIGKILL every process carrying this child's marker, wherever it went."""
        return kill_marked(self.marker)

    def ended(self, pid: int | None) -> list[int]:
        """The child was waited for: kill what is left of it, and reap adopted orphans."""
        _direct.discard(pid)
        killed = self.kill()
        reap_orphans()
        return killed


def child() -> Child:
    """A new child of the current scope (see enter)."""
    scope = _scope.get()
    base = scope.marker if scope else f"h{os.getpid()}"
    return Child(f"{base}.{next(_numbers)}", _die_with_parent(),
                 scope.on_spawn if scope else None)


def _die_with_parent() -> Callable[[], None] | None:
    """The preexec_fn for a child: PR_SET_PDEATHSIG and nothing else.

    It runs between fork and exec while other threads exist, so libc's prctl is resolved
    here, before the fork, and the step only calls it. If harnessc died before prctl took
    effect the child has a new parent already: it exits instead of running unowned.
    """
    fn = prctl.function()
    if fn is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        fn(prctl.PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


# ------------------------------------------------------------------ /proc


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat fields from field 3 (state) on: the command name may hold spaces."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22): with the pid, an identity."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def _running(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _pids() -> list[int]:
    try:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []


def _carriers(needle: bytes) -> list[int]:
    """Processes whose environment holds `needle` (b'\\0NAME=value...'), ourselves excepted."""
    me, found = os.getpid(), []
    for pid in _pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or not ours to read
            continue
        if needle in b"\0" + env:
            found.append(pid)
    return found


def _kill(pids: list[int]) -> list[int]:
    done = []
    for pid in pids:
        try:
            os.kill(pid, _SIGKILL)
            done.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return done


def kill_marked(marker: str, prefix: bool = False) -> list[int]:
    """SIGKILL every process carrying `marker` (or any marker under `marker.` with prefix).

    Scans again while it finds any: a process may fork between a scan and its kill.
    """
    needle = f"\0{ENV_MARK}={marker}{'.' if prefix else chr(0)}".encode()
    killed: list[int] = []
    for _ in range(20):
        batch = [p for p in _carriers(needle) if p not in killed and _running(p)]
        if not batch:
            break
        killed += _kill(batch)
    return killed


def _orphans() -> list[int]:
    """Our children that we did not start: descendants re-parented to us (subreaper).

    Commands run in sessions of their own; other code's children share ours and are left alone.
    """
    me, sid, out = os.getpid(), os.getsid(0), []
    for pid in _pids():
        fields = _stat(pid)
        if fields and int(fields[1]) == me and int(fields[3]) != sid and pid not in _direct:
            out.append(pid)
    return out


def reap_orphans() -> None:
    """Collect the exit status of orphans that died, so no zombie piles up under us."""
    if not _adopting:
        return  # no orphan comes to us: leave other code's children to it
    for pid in _orphans():
        if not _running(pid):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _wait_gone(pids: list[int], limit: float = KILL_WAIT) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        reap_orphans()
        if not any(_running(p) for p in pids):
            return
        time.sleep(0.02)


# ------------------------------------------------------------------ a run


@contextlib.contextmanager
def adopting(marker_prefix: str) -> Iterator[None]:
    """For a run: harnessc is a child subreaper; at the end, whatever the run's commands
    left (markers under `marker_prefix`, and orphans re-parented to us) is killed."""
    global _adopting
    was = prctl.is_subreaper()
    adopted = was or prctl.call(prctl.PR_SET_CHILD_SUBREAPER, 1)
    _adopting = adopted
    try:
        yield
    finally:
        killed = kill_marked(marker_prefix, prefix=True)
        for _ in range(20):  # an orphan's own children become orphans when it dies
            orphans = [p for p in _orphans() if _running(p)] if adopted else []
            if not orphans:
                break
            killed += _kill(orphans)
            _wait_gone(orphans, 1.0)
        _wait_gone(killed, 1.0)
        _adopting = False
        if adopted and not was:
            prctl.call(prctl.PR_SET_CHILD_SUBREAPER, 0)


def end_leftovers(procs: list[dict]) -> list[int]:
    """End what a killed run left: each record has the attempt's marker and, once its child
    started, the child's pid and start time. Returns the pids killed, once they are gone."""
    killed: list[int] = []
    for rec in procs:
        pid, started = rec.get("pid"), rec.get("start")
        if pid and started is not None and start_time(pid) == started and _running(pid):
            killed += _kill([pid])
        if rec.get("marker"):
            killed += kill_marked(rec["marker"], prefix=True)
    killed = sorted(set(killed))
    _wait_gone(killed)
    return killed
