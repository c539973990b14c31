"""`harnessc run --detach`: the run in a process of its own session, the command back at once.

The parent (the user's `run --detach`) checks the flags and builds the plan itself, so a
spec error is printed on the user's terminal. It then starts `harnessc run` again as a
child in a new session (start_new_session: no controlling terminal, so closing the terminal
sends it no SIGHUP, and Ctrl-C in the terminal does not reach it), stdin /dev/null, with a
pipe (`--detached-fd`) and the parent's stdout and stderr for now.

The run id is the child's: it is chosen where it has always been (session.execute, after
the run lock is taken and the state recovered), and the child reports it through the pipe.
Until then the child writes to the user's terminal: a lock held by another run, agents the
pre-flight refuses, "nothing to run" are said there, and the parent exits with the child's
code. At the report (`hand_off`, when the run has started) the child points its stdout and
stderr at `.harness/runs/<id>/run.log` and closes the pipe; the parent prints the run id,
the pid, the log and how to follow it, and returns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ...workspace import Workspace, WorkspaceError

FD_OPTION = "--detached-fd"  # hidden `run` option: the pipe to report on


@dataclass
class Started:
    run_id: str
    pid: int
    log: str  # the log's path, absolute


def start(root: Path, run_args: list[str]) -> Started | int:
    """Start `harnessc -C root run RUN_ARGS` detached; its report, or its exit code when it
    ended before starting a run (it said why on our stdout/stderr)."""
    read_end, write_end = os.pipe()
    argv = [sys.executable, "-m", "harnessc", "-C", str(root), "run", *run_args, FD_OPTION, str(write_end)]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, pass_fds=(write_end,), start_new_session=True)
    finally:
        os.close(write_end)  # ours: the pipe ends when the child closes its copy
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()  # until the child hands off, or ends
    if not data:
        return proc.wait()
    report = json.loads(data)
    return Started(report["run_id"], proc.pid, report["log"])


def hand_off(fd: int, workspace: Workspace, run_id: str) -> None:
    """In the child, once its run has started: stdout and stderr to the run's log from
    now on, then the report to the parent (which then returns)."""
    path = workspace.run_log(run_id)
    try:
        log = workspace.open_write(path, "a")
    except (WorkspaceError, OSError):
        log = open(os.devnull, "w")  # no log: the run still goes on; state.db holds it
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    log.close()
    try:
        os.write(fd, json.dumps({"run_id": run_id, "log": str(path)}).encode() + b"\n")
        os.close(fd)
    except OSError:
        pass  # the parent is gone (killed while waiting): the run goes on
