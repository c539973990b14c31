"""What an isolated task never lands (runtime/worktree/neverlands.py, worktrees.changes): the
files tools make as they run (pytest's __pycache__ and .pytest_cache, node_modules, .venv)
and what the repository's .gitignore ignores, even force-added; a file the base tracks lands
as any change. Real git, real worktrees, a real command agent running pytest."""

from __future__ import annotations

import subprocess

from . import virtual
from .helpers import PY, git, git_repo, node, write_project

# Runs pytest on its own test file in its worktree (so __pycache__ and .pytest_cache appear,
# different per task), writes node_modules as npm would, and counts its calls.
AGENT = """\
import os, pathlib, subprocess, sys
task = os.environ["HARNESSC_TASK"]
with open(sys.argv[1], "a") as f:
    f.write(task + "\\n")
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".txt").write_text("made by " + task + "\\n")
pathlib.Path("tests", f"test_{task}.py").write_text("from calc import add\\ndef test_add():\\n    assert add(1, 2) == 3\\n")
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTEST_ADDOPTS")}
r = subprocess.run([sys.executable, "-m", "pytest", "-q", f"tests/test_{task}.py"], env=env)
assert r.returncode == 0, "pytest failed"
assert pathlib.Path("tests/__pycache__").is_dir() and pathlib.Path(".pytest_cache").is_dir()
pathlib.Path("node_modules").mkdir(exist_ok=True)
pathlib.Path("node_modules", ".package-lock.json").write_text(task + "\\n")
pathlib.Path("build").mkdir(exist_ok=True)
pathlib.Path("build", task + ".bin").write_text(task + "\\n")
subprocess.run(["git", "add", "-f", "build", "node_modules"], check=True)  # force-added: still ignored
if task == "b":
    pathlib.Path("vendor/node_modules/lib.js").write_text("// b changed me\\n")
print("done <promise>DONE</promise>")
"""


def test_two_tasks_running_pytest_land_no_cache_no_ignored_file_and_never_conflict(tmp_path):
    root = tmp_path / "p"
    calls = tmp_path / "calls"
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    write_project(root, [node("a", **bot), node("b", **bot)], concurrency=2,
                  agents={"bot": {"provider": "command", "command": [PY, str(tmp_path / "agent.py"), str(calls)]}})
    (tmp_path / "agent.py").write_text(AGENT)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text("")
    (root / "conftest.py").write_text("")  # calc importable from tests/
    (root / "vendor" / "node_modules").mkdir(parents=True)
    (root / "vendor" / "node_modules" / "lib.js").write_text("// vendored, tracked\n")
    git_repo(root)
    (root / ".gitignore").write_text(".harness/\nbuild/\n")
    git(root, "commit", "-qam", "ignore build")
    start = git(root, "rev-parse", "HEAD").strip()

    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(calls.read_text().split()) == ["a", "b"]  # one call each: nothing conflicted
    landed = git(root, "log", "--name-only", "--format=", f"{start}..HEAD").split()
    assert sorted(landed) == ["out/a.txt", "out/b.txt", "tests/test_a.py", "tests/test_b.py",
                              "vendor/node_modules/lib.js"]  # a tracked file on the list lands
    assert git(root, "show", "HEAD:vendor/node_modules/lib.js") == "// b changed me\n"
    assert git(root, "status", "--porcelain", "--untracked-files=all", "--ignored") .count("pycache") == 0


def test_what_never_lands_is_left_out_of_a_ray_workers_change(tmp_path):
    from harnessc.runtime.executor.bundle import change_of

    top = tmp_path / "w"
    top.mkdir()
    (top / "a.py").write_text("x = 1\n")
    git_repo(top)
    base = git(top, "rev-parse", "HEAD").strip()
    (top / "__pycache__").mkdir()
    (top / "__pycache__" / "a.cpython-312.pyc").write_bytes(b"\0pyc")
    (top / "node_modules").mkdir()
    (top / "node_modules" / "x.js").write_text("x\n")
    (top / "b.py").write_text("y = 2\n")
    change, clean = change_of(top, base)
    assert not clean
    paths = subprocess.run(["git", "apply", "--numstat", "-"], input=change, capture_output=True, cwd=top,
                           check=True).stdout.decode().split()
    assert paths[2::3] == ["b.py"]
