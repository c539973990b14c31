"""The check every benchmark makes first: can this python run harnessc?

Run with a python outside the project's venv, a benchmark that drives `harnessc` through
subprocesses timed commands that failed at once (bench/routing.py printed 0.0% and $0 for
every strategy), and one that imports harnessc stopped with a traceback. `require()` says
what is missing in one line and exits 2 instead.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# pyproject.toml's dependencies, by distribution: the module each is imported as
# (tests/test_bench_env.py checks the two lists agree)
DEPENDENCIES = {"pyyaml": "yaml", "pydantic": "pydantic", "jsonschema": "jsonschema", "jinja2": "jinja2",
                "click": "click", "rich": "rich", "gitpython": "git", "orjson": "orjson", "google-re2": "re2"}


def missing(*extra: str) -> list[str]:
    """The distributions this python cannot import: harnessc's dependencies, then `extra`."""
    wanted = {**DEPENDENCIES, **{name: name for name in extra}}
    return [dist for dist, module in wanted.items() if importlib.util.find_spec(module) is None]


def require(*extra: str) -> None:
    """Exit 2 with one line unless this python has harnessc's dependencies (and `extra`)."""
    lacking = missing(*extra)
    if lacking:
        script = Path(sys.argv[0]).name or "bench"
        print(f"{script}: error: this python ({sys.executable}) cannot run harnessc: "
              f"{', '.join(lacking)} not installed\n"
              f"  hint: run it with the project's venv, `.venv/bin/python bench/{script}`, or "
              f"`pip install -e .` into this one", file=sys.stderr)
        raise SystemExit(2)
