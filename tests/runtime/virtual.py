"""Runs harnessc commands in this process in virtual time (runtime/clock.py's VirtualClock), for
tests of logic that waits - latencies, limits, breakers, a day's usage - rather than of what a
real process does (signals, kill -9, process groups: those keep helpers.harnessc/spawn)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

from harnessc.runtime.clock import VirtualClock


def noon_today() -> float:
    """Epoch seconds of today's local noon: a day's limits reset hours away either side."""
    t = time.localtime()
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 12, 0, 0, 0, 0, -1))


def virtual_clock(wall: float | None = None) -> VirtualClock:
    """A clock that jumps to the next timer whenever every task waits, at local noon today."""
    return VirtualClock(autojump_threshold=0, wall=noon_today() if wall is None else wall)


def children_running() -> bool:
    """Whether a child process of this one does work (any thread's: /proc/self/task/*/children),
    other than a run's lifeline watcher (runtime/children/lifeline.py), which waits all run long."""
    for task in Path("/proc/self/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if not any(a.endswith(b"children/lifeline.py") for a in argv):
                return True
    return False


class PatientClock(VirtualClock):
    """A virtual clock that does not jump while a child process runs (an accept command, a
    check): a real process's work takes real time, which a timer (the check's own timeout,
    the task's max_time) must not overtake. It jumps whenever every task waits otherwise."""

    def new_event_loop(self):
        loop = super().new_event_loop()
        selector = loop._selector  # type: ignore[attr-defined]
        virtual, real = selector.select, type(selector).select.__get__(selector)

        def select(timeout=None):
            if timeout is not None and timeout > 0 and children_running():
                return real(min(timeout, 0.01))  # poll: the child's exit wakes the loop anyway
            return virtual(timeout)

        selector.select = select
        return loop


_clocks: dict[Path, VirtualClock] = {}


def use_clock(root: Path, clock: VirtualClock) -> VirtualClock:
    """Make `clock` the project's virtual clock (before its first command)."""
    _clocks[Path(root).resolve()] = clock
    return clock


def clock_of(root: Path, wall: float | None = None) -> VirtualClock:
    """The project's virtual clock: every command of a test on `root` shares it, as a user's
    commands share the day. `wall`: where it starts, when it is made (default: noon today)."""
    key = Path(root).resolve()
    if key not in _clocks:
        _clocks[key] = virtual_clock(wall)
    return _clocks[key]


def harnessc(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`harnessc -C root ...` run in this process on the project's virtual clock; its exit code
    and output as helpers.harnessc gives them. The next command comes a virtual second later."""
    from harnessc.cli import main
    from harnessc.runtime.children import prctl

    clock = clock_of(root)
    subreaper = prctl.is_subreaper()
    out, err = io.StringIO(), io.StringIO()
    code = 0
    argv = ["harnessc", "-C", str(root), *args]
    here, saved_argv = os.getcwd(), sys.argv
    try:
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
        os.chdir(here)
        clock.jump(1.0)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
