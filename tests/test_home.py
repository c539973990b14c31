"""The suite leaves nothing in the home directory (tests/conftest.py): tests and the processes
they start run with HOME and the XDG directories in a temporary directory, and a run that
writes to the real home anyway fails, naming what it wrote.

Checked with a small suite run by pytest under a home of its own, with tests/conftest.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

# Writes where Ray, matplotlib and a browser write: through the home directory and XDG, in
# this process and in a child.
POLITE = """
import os, subprocess, sys
from pathlib import Path

def test_writes_through_home():
    (Path.home() / ".ray").mkdir()
    (Path.home() / ".ray" / "auth_token").write_text("t")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "matplotlib"
    cache.mkdir(parents=True)

def test_a_child_writes_through_home():
    subprocess.run([sys.executable, "-c", "import pathlib; p = pathlib.Path.home() / '.config' / 'chromium';"
                    "p.mkdir(parents=True)"], check=True)
"""

# Writes to the real home by its path (as a tool that reads the password database would).
RUDE = """
import os
from pathlib import Path

def test_writes_the_real_home():
    (Path(os.environ["REAL_HOME_FOR_TEST"]) / ".leftover").write_text("x")
"""


def run_suite(tmp_path: Path, test: str, **extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    home, suite = tmp_path / "home", tmp_path / "suite"
    home.mkdir()
    suite.mkdir()
    shutil.copy(CONFTEST, suite / "conftest.py")
    (suite / "test_it.py").write_text(test)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HARNESSC_TESTS_", "XDG_")) and k != "MPLCONFIGDIR"}
    env.update(HOME=str(home), REAL_HOME_FOR_TEST=str(home), PYTHONDONTWRITEBYTECODE="1", **extra)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          str(suite)], cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    return res, home


def test_what_tests_write_through_home_lands_outside_the_real_one(tmp_path):
    res, home = run_suite(tmp_path, POLITE)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.name for p in home.iterdir()) == []


def test_a_suite_that_writes_to_the_real_home_fails_naming_what_it_wrote(tmp_path):
    res, home = run_suite(tmp_path, RUDE)
    assert (home / ".leftover").exists()
    assert res.returncode == 1, res.stdout + res.stderr
    assert "1 passed" in res.stdout  # the test itself passed...
    assert f"the suite wrote to the home directory {home}: .leftover" in res.stdout  # ...the run did not


def test_on_a_shared_home_the_check_can_warn_instead(tmp_path):
    res, home = run_suite(tmp_path, RUDE, HARNESSC_TESTS_HOME_CHECK="warn")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"WARNING: the suite wrote to the home directory {home}: .leftover" in res.stdout


def test_the_suite_and_its_children_run_under_a_home_of_its_own():
    home = Path(os.environ["HOME"])
    assert os.environ["HARNESSC_TESTS_HOME"] == str(home)
    assert home.name == "home" and home.parent.name.startswith("harnessc-tests-home-")
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "MPLCONFIGDIR"):
        assert Path(os.environ[var]).is_relative_to(home), var
    child = subprocess.run([sys.executable, "-c", "import pathlib; print(pathlib.Path.home())"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == str(home)


def test_the_suites_home_is_removed_whole_and_nothing_a_link_in_it_points_to(tmp_path):
    from conftest import remove_tree

    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "dir" / "kept.txt").write_text("x")
    (outside / "kept.txt").write_text("x")
    base = tmp_path / "base"
    deep = base / "tmp" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    for i in range(50):
        (deep.parent / f"f{i}").write_text("x")
    (deep / "file").write_text("x")
    (base / "link-to-dir").symlink_to(outside / "dir")
    (deep / "link-to-file").symlink_to(outside / "kept.txt")
    (base / "tmp" / "dangling").symlink_to(tmp_path / "nothing")
    remove_tree(base)
    assert not base.exists()
    assert sorted(p.relative_to(outside).as_posix() for p in outside.rglob("*")) == ["dir", "dir/kept.txt", "kept.txt"]
