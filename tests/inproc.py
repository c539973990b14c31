"""`harnessc ARGS` run in this process, for tests of what a command decides (a diagnostic's
text, an exit code, a file written) rather than of what its process does: a fresh interpreter
costs a second or more on a loaded machine, this a few milliseconds. The console script,
exit codes through a real process, stdin and ttys, non-UTF-8 argv, the pre-commit hook and
start-up imports keep real processes (subprocess). tests/runtime/virtual.py does the same
for runs, in virtual time."""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import subprocess
import sys
from pathlib import Path


def harnessc(*args: str, cwd: Path | None = None, env: dict | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    """`python -m harnessc ARGS` as subprocess.run(capture_output=True, text=True) would give
    it, run in this process: its exit code, stdout and stderr. `cwd`: where it starts (default:
    here); `env`: the whole environment during the command (default: this one); `stdin`: what
    it reads. The working directory, environment, sys.argv, standard streams, logging handlers,
    the garbage collector (a command freezes what is alive) and the process's subreaper flag (a
    run sets it) are restored after it."""
    from harnessc.cli import main
    from harnessc.runtime.children import prctl

    if env is None:
        env = dict(os.environ)
    subreaper = prctl.is_subreaper()
    argv = ["harnessc", *args]
    # streams with bytes underneath (.buffer), as a process's are; stderr's errors as Python's
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)
    code = 0
    here, saved_argv, saved_env, saved_stdin = os.getcwd(), sys.argv, dict(os.environ), sys.stdin
    root = logging.getLogger()
    saved_log = (list(root.handlers), root.level)
    saved_gc = (gc.isenabled(), gc.get_freeze_count())
    try:
        os.environ.clear()
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv, sys.stdin = argv, io.StringIO(stdin)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as e:
                if isinstance(e.code, int) or e.code is None:
                    code = e.code or 0
                else:  # sys.exit("message"): printed to stderr, exit code 1
                    print(e.code, file=sys.stderr)
                    code = 1
    finally:
        if not subreaper:
            prctl.call(prctl.PR_SET_CHILD_SUBREAPER, 0)
        sys.argv, sys.stdin = saved_argv, saved_stdin
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(here)
        root.handlers[:], root.level = saved_log
        if not saved_gc[1] and gc.get_freeze_count():  # a one-shot command freezes what is alive (nogc.py)
            gc.unfreeze()
        (gc.enable if saved_gc[0] else gc.disable)()
    return subprocess.CompletedProcess(argv, code, _text(out), _text(err))


def _text(stream: io.TextIOWrapper) -> str:
    """What was written, read back as subprocess.run(text=True) reads a pipe (newlines too)."""
    stream.flush()
    return io.TextIOWrapper(io.BytesIO(stream.buffer.getvalue()), encoding="utf-8").read()
