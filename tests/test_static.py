"""Static checks on the package, run by the README's test command (so by CI): ruff (pyflakes and
the import order) and mypy, as configured in pyproject.toml. Neither leaves a cache in the
repository, the home directory or /tmp: ruff runs without one, and so does mypy in the suite
(tests/conftest.py); run alone, mypy keeps one in the temporary directory."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> subprocess.CompletedProcess:
    tool = argv[0]
    try:
        __import__(tool)
    except ImportError:
        pytest.fail(f"{tool} is not installed: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=900)


def test_ruff_finds_nothing():
    res = _run("ruff", "check", "--no-cache", "--output-format", "concise", "harnessc")
    assert res.returncode == 0, f"ruff check harnessc (`ruff check --fix` sorts imports):\n{res.stdout}{res.stderr}"


def test_mypy_finds_nothing():
    # Under the suite's own home (tests/conftest.py) no cache: it would be removed with the home
    # unread, and writing it cost a tenth of mypy's time; run alone, one in the temporary
    # directory makes the next run incremental.
    cache = "/dev/null" if os.environ.get("HARNESSC_TESTS_HOME") else str(
        Path(tempfile.gettempdir()) / f"harnessc-mypy-{hashlib.sha256(str(REPO).encode()).hexdigest()[:12]}")
    res = _run("mypy", "--cache-dir", cache, "harnessc")
    assert res.returncode == 0, f"mypy harnessc:\n{res.stdout}{res.stderr}"
