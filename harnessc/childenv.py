"""A child's environment: what every process harnessc starts gets from ours (the base list),
the variables a task forwards by name (`pass_env:`), and nothing else.

Below both halves: the runtime's children (runtime/children/procs.py) and every git process
(gitcmd.py, lint's checks too) start with it.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Any, Iterable, Mapping

# What every child gets from our environment (documented in docs/cli.md): enough to find
# programs, a home, a locale and a terminal. Anything else is passed by name (`pass_env:`).
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR")
BASE_ENV_PREFIXES = ("LC_",)


# The variables an executor shipped with a remote attempt (executor/remote.py): forwarded to
# its agent instead of this (worker) process's own. None: read our own environment.
_forwarded: ContextVar[Mapping[str, str] | None] = ContextVar("harnessc_forwarded_env", default=None)


def forwarded_env() -> Mapping[str, str]:
    """Where the variables forwarded to an agent (`pass_env:`, its key) are read: the
    driver's values shipped with a remote attempt, else our environment."""
    shipped = _forwarded.get()
    return os.environ if shipped is None else shipped


def forwarding(values: Mapping[str, str]) -> Any:
    """From here on (this context) agents get `values` as the forwarded variables; returns
    the token `stop_forwarding` takes."""
    return _forwarded.set(dict(values))


def stop_forwarding(token: Any) -> None:
    """Back to what was forwarded before `forwarding` returned `token`."""
    _forwarded.reset(token)


def child_env(pass_env: Iterable[str] = (), extra: dict[str, str] | None = None) -> dict[str, str]:
    """A child's environment: the base list (ours), the variables named in pass_env (when
    set; forwarded_env), then the explicit `extra` values. Nothing else reaches a child."""
    environ = os.environ  # iterating its keys decodes only those; .items() decodes every value too
    env = {k: environ[k] for k in environ if k in BASE_ENV or k.startswith(BASE_ENV_PREFIXES)}
    source = forwarded_env()
    env.update({k: source[k] for k in pass_env if k in source})
    if extra:
        env.update({str(k): str(v) for k, v in extra.items()})
    return env
