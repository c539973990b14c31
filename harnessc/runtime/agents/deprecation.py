"""An SDK's "this model is deprecated" warning, heard per call instead of hidden by Python.

The anthropic SDK warns on each request to a model in its deprecation table
(DeprecationWarning: "The model 'X' is deprecated and will reach end-of-life on DATE.");
Python's default filters hide DeprecationWarning from a CLI user, so a run would go on
until the model stops answering. `listening()` around a call collects such warnings raised
in the calling asyncio task (a context variable: concurrent calls do not hear each other's)
and keeps them from being printed; the run says them once per agent (iteration.py).
`harnessc doctor` reads the SDK's table itself (anthropic_api.end_of_life), before any call.
"""

from __future__ import annotations

import contextvars
import re
import warnings
from contextlib import contextmanager
from typing import Iterator

# The SDK's wording (anthropic/resources/messages/messages.py)
SDK_TEXT = re.compile(r"The model '(?P<model>[^']+)' is deprecated and will reach end-of-life on "
                      r"(?P<date>[^\n]+?)\.?(?:\n|$)")
_FILTER = r"The model '.*' is deprecated and will reach end-of-life"
_HEARD: contextvars.ContextVar["Heard | None"] = contextvars.ContextVar("harnessc_deprecations", default=None)


class Heard(list):
    """The end-of-life dates the SDK warned of during a call ("DATE" strings)."""

    @property
    def date(self) -> str | None:
        """The first one, or None: the model was not said to be deprecated."""
        return self[0] if self else None


@contextmanager
def listening() -> Iterator[Heard]:
    """The model deprecation warnings raised in this task while inside."""
    _install()
    heard = Heard()
    token = _HEARD.set(heard)
    try:
        yield heard
    finally:
        _HEARD.reset(token)


def warning(agent: str, model: str | None, date: str) -> str:
    """The run's line for an agent on a deprecated model."""
    return (f"agent '{agent}': model '{model}' is deprecated and reaches end-of-life on {date} "
            f"(the anthropic SDK says so); pick a newer model for it in harness.yaml "
            f"(https://docs.anthropic.com/en/docs/resources/model-deprecations)")


def _install() -> None:
    """Let the SDK's deprecation warning through Python's filters to our showwarning, which
    keeps it when a call is listening and passes anything else on. Process-wide, so done
    once (again if something - a test runner - put its own showwarning back)."""
    if getattr(warnings.showwarning, "_harnessc_listening", False):
        return
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001 - warnings' signature
        heard = _HEARD.get()
        found = SDK_TEXT.search(str(message)) if issubclass(category, DeprecationWarning) else None
        if heard is not None and found:
            heard.append(found["date"])
            return
        previous(message, category, filename, lineno, file, line)

    show._harnessc_listening = True  # type: ignore[attr-defined]
    warnings.showwarning = show
    warnings.filterwarnings("always", message=_FILTER, category=DeprecationWarning)
