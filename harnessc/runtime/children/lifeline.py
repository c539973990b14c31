"""One watcher per run that ends the run's command groups if harnessc dies, even by kill -9.

harnessc starts the watcher once (`python -S -I lifeline.py`, its own session, an empty
environment) with the read end of a pipe as its stdin (the process harnessc starts only
waits for the watcher, its child: whoever kills harnessc's children as harnessc exits, as Ray
does a worker's, leaves the watcher be). It first tells the watcher the run's marker ("m
HARNESSC_PROC=<prefix>.", the variable every command of the run and all it starts carry),
then each command's process group as it starts ("+ <pgid> <leader start time>") and when it
ended ("- <pgid>"). When harnessc dies the kernel closes the write end; at EOF the watcher
SIGKILLs every group still registered unless its number now belongs to another process (a
leader with another start time in /proc/<pgid>/stat: a pid reused by an unrelated process is
left alone), then every process whose environment carries the marker: a command harnessc
died too soon to register (between its spawn and the record; on a loaded machine the command
may have started children by then) is ended too, and so is what a command started in a
session of its own. A run that ends normally closes the pipe after every group was ended and
after it killed what carries its marker itself, and says so first ("."): the watcher then
finds no group to kill and skips the scan. The watcher sleeps until that EOF, reading the
records that came every DRAIN seconds (follow): woken at each record, it took the CPU from
harnessc twice per command on a busy machine.

The harnessc side (Lifeline) is imported by reaper.py; the watcher side (watch) runs as a
script with the standard library only.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
from typing import Iterable, Iterator

DRAIN = 0.5  # seconds between the watcher's reads of the records (the pipe holds 64 KiB at least)
PIPE_SIZE = 1 << 20  # bytes asked for the pipe: room for ~30,000 commands between two reads


class Lifeline:
    """harnessc's end of the pipe to a running watcher."""

    def __init__(self, watcher: subprocess.Popen):
        self.watcher = watcher
        self.fd = watcher.stdin.fileno()  # type: ignore[union-attr]
        os.set_blocking(self.fd, False)  # a stalled watcher must never stall the run (see _send)
        try:  # the watcher reads every DRAIN seconds: room to spare (else the default, 64 KiB)
            fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except (AttributeError, OSError):
            pass
        self.alive = True

    @classmethod
    def start(cls, mark: str | None = None) -> Lifeline | None:
        """A watcher, or None where none could be started (no /proc, no python to run it).
        `mark`: what the run's commands carry in their environment ("NAME=<prefix>.")."""
        if not os.path.isdir("/proc/self"):
            return None
        try:
            watcher = subprocess.Popen(
                [sys.executable, "-S", "-I", os.path.abspath(__file__)], env={},
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)  # no Ctrl-C or hang-up from our terminal reaches it
        except OSError:
            return None
        line = cls(watcher)
        if mark is not None:
            line._send(f"m {mark}\n")
        return line

    def register(self, pgid: int, start: int) -> bool:
        """Tell the watcher about a new group; False when it is gone (the group is not covered)."""
        return self._send(f"+ {pgid} {start}\n")

    def gone(self, pgid: int) -> None:
        """The group ended: the watcher forgets it, so a later reuse of the number is safe."""
        self._send(f"- {pgid}\n")

    def _send(self, record: str) -> bool:
        if not self.alive:
            return False
        try:
            os.write(self.fd, record.encode())  # under PIPE_BUF: all of it or nothing
            return True
        except OSError:  # it died, or stalled with a full pipe: no longer trusted
            self.alive = False
            self._kill()  # a stalled watcher would kill live groups at its EOF
            return False

    def close(self) -> None:
        """At the run's end (its groups are all ended): EOF for the watcher, and wait for it."""
        self._send(".\n")  # a clean end: nothing left to kill or look for
        self.watcher.stdin.close()  # type: ignore[union-attr]
        try:
            self.watcher.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            self.watcher.wait()

    def _kill(self) -> None:
        """Kill the watcher and the process waiting for it (its session's group)."""
        try:
            os.killpg(self.watcher.pid, signal.SIGKILL)
        except OSError:
            pass


# ------------------------------------------------------------------ the watcher


def _start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot), None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def follow(fd: int) -> Iterator[bytes]:
    """The records written to pipe `fd`, to its EOF, without waking at each one: the poll asks
    for no input, so only the writer's hang-up (or DRAIN seconds) ends it; then what came is read."""
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, 0)  # hang-up and errors are reported whatever is asked
    pending = b""
    while True:
        poller.poll(DRAIN * 1000)
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:  # all read, the writer still there
                break
            except OSError:
                chunk = b""
            if not chunk:  # EOF: harnessc is gone
                yield from pending.splitlines()
                return
            *lines, pending = (pending + chunk).split(b"\n")
            yield from lines


def watch(records: Iterable[bytes]) -> list[int]:
    """Follow `records` to EOF, then SIGKILL the groups still registered whose number no other
    process has taken, and every process carrying the run's marker. Returns the groups and
    processes killed."""
    groups: dict[int, int] = {}  # pgid -> its leader's start time
    needle, clean = None, False
    for line in records:
        if not line.strip():
            continue
        op, *args = line.split()
        if op == b"+":
            groups[int(args[0])] = int(args[1])
        elif op == b"-":
            groups.pop(int(args[0]), None)
        elif op == b"m":
            needle = b"\0" + args[0]
        elif op == b".":
            clean = True
    killed = []
    for pgid, start in groups.items():
        # Spared only when another process holds the leader's number: Linux gives no new
        # process a number still in use as a live group's id, so with the leader gone (killed
        # alone, as asyncio does when its loop closes) what is left of the group is ours.
        if _start_time(pgid) in (start, None):
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
            except OSError:
                pass
    return killed + (kill_carriers(needle) if needle and not clean else [])


def kill_carriers(needle: bytes) -> list[int]:
    """SIGKILL every process but this one whose environment holds `needle`, again while any is
    found (one may fork between a scan and its kill); reaper.py's kill_marked too. Reads all of
    /proc. A zombie's environment reads empty: it is never found."""
    me, killed = os.getpid(), []
    for _ in range(20):
        batch = [pid for pid in pids() if pid != me and pid not in killed and carries(pid, needle)]
        for pid in batch:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        if not batch:
            break
    return killed


def pids() -> list[int]:
    """Every process's number: all of /proc (reaper.py's scans read it here too)."""
    try:
        return [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return []


def carries(pid: int, needle: bytes) -> bool:
    """Whether the environment of process `pid` holds `needle` (reaper.py uses it too)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:  # gone, or not ours to read
        return False


def _main() -> int:
    """Wait for the watcher in a child: Ray kills a worker's children as the worker exits
    (all of them, not theirs), and the watcher must outlive that to do its job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only EOF ends it
    child = os.fork()
    if child == 0:
        watch(follow(sys.stdin.fileno()))
        return 0
    sys.stdin.close()  # the watcher's copy alone: harnessc's writes fail once it is gone
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(_main())
