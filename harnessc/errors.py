"""The one family of errors a user can act on: what went wrong and, where there is more to
say, what to do (`hint`). `cli.main` shows each the same way (`harnessc: error: ...`, exit 2);
a command raises one rather than printing and exiting itself. Anything else that escapes a
command is an internal error (cli.py says so, without a traceback)."""

from __future__ import annotations


class HarnesscError(Exception):
    hint: str | None = None  # a subclass may give every instance one

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint
