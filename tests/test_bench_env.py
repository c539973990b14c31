"""bench/*.py run by a python that cannot run harnessc stop with one line, not with all-zero
figures (bench/routing.py printed 0.0% and $0 for every strategy) or a traceback."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p for p in (REPO / "bench").glob("*.py") if p.name != "harnessc_env.py")


def _load_harnessc_env():
    """bench/harnessc_env.py, loaded by path: bench/ on sys.path would let its ray.py shadow Ray."""
    spec = importlib.util.spec_from_file_location("harnessc_env", REPO / "bench" / "harnessc_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harnessc_env = _load_harnessc_env()


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_a_python_without_harnessc_dependencies_gets_one_clear_error(script: Path, tmp_path: Path) -> None:
    # `python -S`: no site-packages, so none of harnessc's dependencies, as a python outside the venv
    r = subprocess.run([sys.executable, "-S", str(script), "--tasks", "2"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr, r.stdout + r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"{script.name}: error: this python ({sys.executable}) cannot run harnessc: "), first
    assert "rich" in first and "pyyaml" in first, first
    assert f".venv/bin/python bench/{script.name}" in r.stderr


def test_the_checked_dependencies_are_pyprojects():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    names = {re.match(r"[A-Za-z0-9_.-]+", d).group().lower() for d in pyproject["project"]["dependencies"]}
    assert set(harnessc_env.DEPENDENCIES) == names
    assert harnessc_env.missing() == []  # the test's own python has them all, by their import names
