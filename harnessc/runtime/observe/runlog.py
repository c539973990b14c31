"""`.harness/runs/<id>/run.log`: what a run says, as plain lines, flushed one by one.

Every run writes it (detached or not): the lines of the plain view (display.PlainDisplay:
no colour, no progress bar, heartbeats for long calls), the warnings said when the run
started and the summary printed when it ended. A detached run's stdout and stderr are this
file itself (children/detach.py), so it is then not written twice (`same_file`).

A log that cannot be written (a full disk, its directory removed) never stops the run: the
log goes quiet and the run goes on (state.db and events.jsonl hold the run).
"""

from __future__ import annotations

import os

from ...workspace import Workspace, WorkspaceError
from .display import PlainDisplay


def same_file(fd: int, path) -> bool:
    """Whether file descriptor `fd` is open on `path` (the same device and inode)."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class _FileView(PlainDisplay):
    """The plain view into the log file: a write that fails ends the log, not the run."""

    def _print(self, line: str) -> None:
        if self.stream is None:
            return
        try:
            super()._print(line)
        except (OSError, ValueError):  # ENOSPC, EIO; ValueError: closed under us
            self.stream = None


class RunLog:
    """A run's log: `on_event` for the run's listeners (it writes nothing until `open`),
    `line` for what the command prints itself (warnings, the summary).

    `shown`: the terminal's view. When it is the plain one (stdout is no terminal), its lines
    are the log's: it hands each to the log as it writes it (heartbeats too), and the log needs
    no view of its own (`listens` is False) - the same lines, made once."""

    def __init__(self, shown=None):
        self.view: _FileView | None = None
        self.plain = shown if isinstance(shown, PlainDisplay) else None
        self.stream = None  # the log, written with the plain view's lines

    @property
    def listens(self) -> bool:
        """Whether on_event must be one of the run's listeners (the log makes its own lines)."""
        return self.plain is None

    def open(self, workspace: Workspace, runner, run_id: str) -> None:
        path = workspace.run_log(run_id)
        if same_file(1, path):
            return  # a detached run: its stdout is the log already
        try:
            stream = workspace.open_write(path, "a")
        except (WorkspaceError, OSError):
            return  # no log; the run goes on
        if self.plain is not None:
            with self.plain.lock:
                self.stream, self.plain.copy = stream, self._write
            return
        self.view = _FileView(stream)
        self.view.start(runner, 0)

    def _write(self, line: str) -> None:
        """A line into the log, flushed (under the plain view's lock); a write that fails ends
        the log, not the run."""
        if self.stream is None:
            return
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # ENOSPC, EIO; ValueError: closed under us
            self.stream = None

    def on_event(self, ev: dict) -> None:
        if self.view is not None:
            self.view.on_event(ev)

    def line(self, text: str) -> None:
        if self.view is not None:
            with self.view.lock:
                self.view._print(text)
        elif self.plain is not None:
            with self.plain.lock:
                self._write(text)

    def close(self) -> None:
        if self.plain is not None:
            with self.plain.lock:
                self.plain.copy = None
                stream, self.stream = self.stream, None
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
            return
        if self.view is None:
            return
        self.view.close()
        stream, self.view.stream = self.view.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
