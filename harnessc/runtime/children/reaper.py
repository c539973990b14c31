"""Ending what harnessc starts: no child outlives its command, its run, or harnessc itself.

- A command dies with harnessc, even one killed with -9. During a run, through ONE watcher
  process per run (lifeline.py): harnessc tells it each command's process group as it
  starts and ends, and when harnessc dies the watcher's pipe reaches EOF and it SIGKILLs the
  groups still registered (checking each leader's start time, so a reused pid is spared).
  Why not per command: the death signal (PR_SET_PDEATHSIG) can only be set by the child
  itself, so each command had to be started as `setpriv --pdeathsig KILL -- argv...`, an
  extra exec costing ~1 ms of CPU per command (`sh -c true`: 0.69 ms alone, 1.66 ms under
  setpriv) that competed with the commands themselves; the watcher costs one exec per run
  and two small pipe writes per command, and the spawn is a plain vfork with its own
  session. It also covers the whole group, where the death signal reached only the leader.
  Outside a run, or where the watcher cannot start or stops reading, a command is started
  under the setpriv shim as before (and where no such setpriv exists, a preexec_fn sets the
  signal, which forces a full fork of harnessc, about 10x the spawn time at its size).
  The watcher is also told the run's marker (below), and at EOF kills every process that
  carries it: a command harnessc died too soon to register is ended as well. The shim does
  not cover a harnessc that dies before setpriv set the signal; what is left then is ended by
  the next run (end_leftovers, below).
- A child carries HARNESSC_PROC=<scope>.<n> in its environment, and so does everything it
  starts (unless that rewrites its environment). When the command ends, every process that
  carries its marker is killed, wherever it went (setsid, double fork), and nothing else:
  concurrent commands never touch each other's processes.
- Finding those without reading all of /proc after every command: during a run harnessc is a
  child subreaper, so when a command's leader is gone, everything it left is either still in
  its process group (one killpg shows it) or was adopted by us, as an orphan or a descendant
  of one. So a command's end kills its group; if the group had survivors, /proc is scanned for
  the marker (the slow, sure way); if not, only our own children are looked at
  (/proc/self/task/<pid>/children, which the kernel gives orphans to): orphans carrying the
  marker are killed, and their adopted children in turn. Outside a run (no subreaper) every
  command's end scans /proc. (A process with the marker that is no descendant at all, say
  one a daemon started with the command's environment, is left to the run's end.)
- Orphans are reaped here, by pid, and only they: the children asyncio started for procs.run
  are asyncio's to wait for (it reports 255 for a child whose status someone else took).
  A child counts as ours (_direct) from the moment its spawn returns, or, with a run's pidfd
  watcher (procs.child_watching), from its start to its reaping (born, waited); while any
  spawn is in flight its child may exist unregistered, so no orphan is reaped until none is.
- When the run ends any orphan still alive is killed, and /proc is scanned for the run's
  markers once.
- Beyond what the watcher kills, a harnessc killed with -9 cleans nothing up: each attempt records its marker and its
  child's pid and start time, and the next run ends whatever still matches (end_leftovers).

Linux only (/proc, prctl); elsewhere the process-group kill in procs.py is all there is.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import signal
import subprocess
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Iterator, TypeVar

from . import lifeline, prctl
from .lifeline import Lifeline, carries, kill_carriers

ENV_MARK = "HARNESSC_PROC"
KILL_WAIT = 5.0  # seconds end_leftovers waits for what it killed to be gone
_SIGKILL = int(signal.SIGKILL)
_P = TypeVar("_P")


@dataclass(frozen=True)
class _Scope:
    marker: str  # children get <marker>.<n>
    on_spawn: Callable[[int, int | None], None] | None  # (pid, start time), to record it


_scope: ContextVar[_Scope | None] = ContextVar("harnessc_proc_scope", default=None)
_numbers = itertools.count(1)
_direct: set[int] = set()  # our own children until asyncio reaped them: never reaped by us
_spawning = 0  # spawns in flight: their children may not be in _direct yet
_reap_owed = False  # an orphan reap was put off while a spawn was in flight
_adopting = False  # a subreaper now (see adopting): orphans come to us, and we reap them
_lifeline: Lifeline | None = None  # the run's watcher (see adopting), while it is trusted
_born: dict[int, int | None] = {}  # pid -> start time, noted as asyncio took the child (born)
_BORN_KEPT = 4096  # (a bound: children no Child claims, other code's, are noted too)


def enter(marker: str, on_spawn: Callable[[int, int | None], None] | None = None) -> None:
    """Children started from this context on (this asyncio task) carry <marker>.<n>, and
    on_spawn(pid, start time) is told about each of them."""
    _scope.set(_Scope(marker, on_spawn))


# ------------------------------------------------------------------ one child


@dataclass
class Child:
    """How to start one child and, once it ended, end everything it left."""

    marker: str
    shim: list[str]  # put before the argv: sets the death signal, then execs the command
    preexec: Callable[[], None] | None  # sets it instead, where there is no shim
    on_spawn: Callable[[int, int | None], None] | None
    lifeline: Lifeline | None = None  # tells the run's watcher about the group instead

    def command(self, argv: list[str]) -> list[str]:
        return [*self.shim, *argv]

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        return {**env, ENV_MARK: self.marker}

    async def spawn(self, starting: Awaitable[_P]) -> _P:
        """Await `starting` (asyncio.create_subprocess_exec(...)) and count its process as
        ours before anything else runs: until then no orphan is reaped (see reap_orphans)."""
        global _spawning
        _spawning += 1
        try:
            proc = await starting
            _direct.add(proc.pid)  # type: ignore[attr-defined]
        finally:
            _spawning -= 1
            if not _spawning and _reap_owed:
                reap_orphans()
        return proc

    def started(self, pid: int) -> None:
        """The child (leader of group `pid`) was spawned: record it, and register its group
        with the run's watcher."""
        start = _born.pop(pid, None)
        if start is None:
            start = start_time(pid)
        if self.on_spawn is not None:
            self.on_spawn(pid, start)
        if self.lifeline is not None and start is not None:
            self.lifeline.register(pid, start)

    def kill(self, group: int | None = None) -> list[int]:
        """SIGKILL `group` (the child's process group) and every process carrying this
        child's marker, wherever it went. Returns the pids killed by marker."""
        survivors = group is not None and _killpg(group)
        if survivors or not _adopting:
            return kill_marked(self.marker)
        return self._kill_adopted()

    def _kill_adopted(self) -> list[int]:
        """Kill the orphans we adopted that carry the marker, then the children they leave us."""
        needle = _needle(self.marker)
        killed: list[int] = []
        for _ in range(20):
            batch = [p for p in _orphans(_children()) if p not in killed and carries(p, needle)
                     and _running(p)]
            if not batch:
                break
            killed += _kill(batch)
            _wait_gone(batch, 1.0, poll=0.002)  # once gone, their children are ours
        return killed

    def ended(self, pid: int, reaped: bool = True) -> list[int]:
        """The child (leader of group `pid`) was waited for: kill what is left of it, and
        reap adopted orphans. `reaped`: asyncio has its exit status (else it is still its)."""
        if reaped:
            _direct.discard(pid)
        killed = self.kill(pid)
        if self.lifeline is not None:
            self.lifeline.gone(pid)  # after its kill: nothing is left in the group to cover
        reap_orphans()
        return killed


def born(pid: int) -> None:
    """asyncio has just started child `pid` (its pidfd watcher tells, see procs.child_watching):
    it is asyncio's to wait for from now on, not an orphan, even while its spawn is in flight;
    and its start time is noted before anything can reap it (Child.started takes it: a quick
    child may be gone from /proc by then)."""
    _direct.add(pid)
    if len(_born) >= _BORN_KEPT:
        _born.clear()
    _born[pid] = start_time(pid)


def waited(pid: int) -> None:
    """asyncio took child `pid`'s exit status (its pidfd watcher tells): its number may be
    anyone's now."""
    _direct.discard(pid)


def child() -> Child:
    """A new child of the current scope (see enter)."""
    scope = _scope.get()
    marker = f"{scope.marker if scope else f'h{os.getpid()}'}.{next(_numbers)}"
    on_spawn = scope.on_spawn if scope else None
    if _lifeline is not None and _lifeline.alive:
        return Child(marker, [], None, on_spawn, _lifeline)
    setpriv = _setpriv() if prctl.function() is not None else None
    shim = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
    return Child(marker, shim, None if shim else pdeathsig_preexec(), on_spawn)


@functools.cache
def _setpriv() -> str | None:
    """The path of a setpriv that sets the parent-death signal (util-linux >= 2.33), or None."""
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        probe = subprocess.run([path, "--pdeathsig", "KILL", "--", path, "--version"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if probe.returncode == 0 else None


def pdeathsig_preexec() -> Callable[[], None] | None:
    """A preexec_fn setting PR_SET_PDEATHSIG and nothing else (where there is no setpriv).

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



def _children() -> list[int]:
    """Our main thread's children: where the kernel puts the orphans it gives a subreaper
    (the first live thread of the process). All processes where that list is missing."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN
        return lifeline.pids()


def _needle(marker: str, prefix: bool = False) -> bytes:
    """What a carrier's environment holds: b'\\0HARNESSC_PROC=<marker>\\0' (or '.' with prefix)."""
    return f"\0{ENV_MARK}={marker}{'.' if prefix else chr(0)}".encode()


def _kill(pids: list[int]) -> list[int]:
    done = []
    for pid in pids:
        try:
            os.kill(pid, _SIGKILL)
            done.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return done


def _killpg(group: int) -> bool:
    """SIGKILL a process group; whether it had any member left (zombies count)."""
    try:
        os.killpg(group, _SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_marked(marker: str, prefix: bool = False) -> list[int]:
    """SIGKILL every process carrying `marker` (or any marker under `marker.` with prefix).

    Scans all of /proc, again while it finds any: a process may fork between a scan and its kill.
    """
    return kill_carriers(_needle(marker, prefix))


def _orphans(candidates: Iterable[int]) -> list[int]:
    """Those of `candidates` that are our children we did not start: descendants re-parented
    to us (subreaper). Commands run in sessions of their own; other code's children share
    ours and are left alone."""
    me, sid, out = os.getpid(), os.getsid(0), []
    for pid in candidates:
        if pid in _direct:
            continue
        fields = _stat(pid)
        if fields and int(fields[1]) == me and int(fields[3]) != sid:
            out.append(pid)
    return out


def reap_orphans() -> None:
    """Collect the exit status of orphans that died, so no zombie piles up under us."""
    global _reap_owed
    if not _adopting:
        return  # no orphan comes to us: leave other code's children to it
    if _spawning:  # a new child not in _direct yet would pass for an orphan: later
        _reap_owed = True
        return
    _reap_owed = False
    for pid in _orphans(_children()):
        if not _running(pid):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _wait_gone(pids: list[int], limit: float = KILL_WAIT, poll: float = 0.02) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        reap_orphans()
        if not any(_running(p) for p in pids):
            return
        time.sleep(poll)


# ------------------------------------------------------------------ a run


@contextlib.contextmanager
def adopting(marker_prefix: str) -> Iterator[None]:
    """For a run: harnessc is a child subreaper, and a lifeline watcher ends the run's
    command groups if harnessc dies; at the end, whatever the run's commands left (markers
    under `marker_prefix`, and orphans re-parented to us) is killed."""
    global _adopting, _lifeline
    was = prctl.is_subreaper()
    adopted = was or prctl.call(prctl.PR_SET_CHILD_SUBREAPER, 1)
    _adopting = adopted
    mark = f"{ENV_MARK}={marker_prefix}."  # what kill_marked(marker_prefix, prefix=True) looks for
    line = _lifeline = Lifeline.start(mark) if prctl.function() is not None else None
    if line is not None:
        _direct.add(line.watcher.pid)  # our child, not an orphan to kill or reap
    try:
        yield
    finally:
        _lifeline = None
        killed = kill_marked(marker_prefix, prefix=True)
        for _ in range(20):  # an orphan's own children become orphans when it dies
            orphans = [p for p in _orphans(lifeline.pids()) if _running(p)] if adopted else []
            if not orphans:
                break
            killed += _kill(orphans)
            _wait_gone(orphans, 1.0)
        _wait_gone(killed, 1.0)
        if line is not None:
            line.close()
            _direct.discard(line.watcher.pid)
        _adopting = False
        _born.clear()
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
