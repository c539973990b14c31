"""Runs harnessc commands in this process in virtual time (runtime/clock.py's VirtualClock), for
tests of logic that waits - latencies, limits, breakers, a day's usage - rather than of what a
real process does (signals, kill -9, process groups: those keep helpers.harnessc/spawn)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from harnessc.runtime.clock import VirtualClock


def noon_today() -> float:
    """Epoch seconds of today's local noon: a day's limits reset hours away either side."""
    t = time.localtime()
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 12, 0, 0, 0, 0, -1))


def children() -> set[int]:
    """This process's live child processes (any thread's: /proc/self/task/*/children; not a
    zombie), other than a run's lifeline watcher (runtime/children/lifeline.py), which waits
    all run long."""
    found = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except (OSError, IndexError):
                continue
            if state != "Z" and not any(a.endswith(b"children/lifeline.py") for a in argv):
                found.add(int(pid))
    return found


class PatientClock(VirtualClock):
    """A virtual clock that does not jump while a child process runs (an accept command, a
    command agent) but goes at the real pace: a real process's work takes real time, which a
    timer (the check's own timeout, the task's max_time) must not overtake, and a timeout set
    on it still comes. It jumps whenever every task waits otherwise.
    A child counts until asyncio has heard of its end: outside a run (`doctor`) a thread per
    child waits for it (asyncio's ThreadedChildWatcher), and a child that thread has waited
    for is gone from /proc before the loop hears of it (a quick `--version` timed out at once).
    `before`: children that were there before the command (another test's), not waited for."""

    before: set[int] = set()

    def new_event_loop(self):
        loop = super().new_event_loop()
        selector = loop._selector  # type: ignore[attr-defined]
        virtual, real = selector.select, type(selector).select.__get__(selector)

        def working() -> bool:
            return bool(children() - self.before) or any(
                t.name.startswith("asyncio-waitpid-") and t.is_alive() for t in threading.enumerate())

        def select(timeout=None):
            if timeout is not None and timeout > 0 and working():
                # time goes as fast as the child's: real seconds, polled (its exit wakes the loop)
                started = time.monotonic()
                events = real(min(timeout, 0.01))
                self.jump(min(time.monotonic() - started, timeout))
                return events
            return virtual(timeout)

        selector.select = select
        return loop


def virtual_clock(wall: float | None = None) -> VirtualClock:
    """A clock that jumps to the next timer whenever every task waits (and no child process
    works: PatientClock), at local noon today."""
    return PatientClock(autojump_threshold=0, wall=noon_today() if wall is None else wall)


_clocks: dict[Path, VirtualClock] = {}


def clock_of(root: Path, wall: float | None = None) -> VirtualClock:
    """The project's virtual clock: every command of a test on `root` shares it, as a user's
    commands share the day. `wall`: where it starts, when it is made (default: noon today)."""
    key = Path(root).resolve()
    if key not in _clocks:
        _clocks[key] = virtual_clock(wall)
    return _clocks[key]


def harnessc(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`harnessc -C root ...` run in this process on the project's virtual clock; its exit code
    and output as helpers.harnessc gives them. The next command comes a virtual second later.
    `env`: the whole environment during the command (as subprocess's), then restored."""
    from harnessc.cli import main
    from harnessc.runtime.children import prctl

    clock = clock_of(root)
    if isinstance(clock, PatientClock):
        clock.before = children()
    subreaper = prctl.is_subreaper()
    out, err = io.StringIO(), io.StringIO()
    code = 0
    argv = ["harnessc", "-C", str(root), *args]
    here, saved_argv, saved_env = os.getcwd(), sys.argv, dict(os.environ)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(root)
        sys.argv = argv
        with clock.installed(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        if not subreaper:  # a run makes its process a child subreaper for good: not this one
            prctl.call(prctl.PR_SET_CHILD_SUBREAPER, 0)
        sys.argv = saved_argv
        if env is not None:
            os.environ.clear()
            os.environ.update(saved_env)
        os.chdir(here)
        clock.jump(1.0)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
