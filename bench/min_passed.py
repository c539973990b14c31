"""`min_passed: base` - how often the base's tests run.

A project with a 20-test suite (pytest, counted by a conftest that notes every run) and K
isolated tasks whose checks are `pytest -q` with `min_passed: base`, run by a command agent
that adds a file of its own:

1. K tasks on one base commit (no dependencies): the base is measured once for all of them;
2. K tasks in a chain (each starts where the one before landed): one base commit each, so K;
3. K tasks in the shared tree: measured once per task, before its first attempt.

Printed: the test runs in a checkout of the base (from the counter), the `min_passed_base`
events, and every test run of the run (base runs + the tasks' own checks).

    .venv/bin/python bench/min_passed.py [--tasks 8]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require()

PY = sys.executable
TESTS = "import unittest\n\n\nclass Suite(unittest.TestCase):\n" + "".join(
    f"    def test_{i}(self):\n        self.assertTrue({i} >= 0)\n\n" for i in range(20))
AGENT = ("import os, pathlib\npathlib.Path('out').mkdir(exist_ok=True)\n"
         "pathlib.Path('out', os.environ['HARNESSC_TASK'] + '.txt').write_text('x')\n"
         "print('<promise>DONE</promise>')\n")
CONFTEST = "import os, pathlib\npathlib.Path({counter!r}).open('a').write(os.getcwd() + '\\n')\n"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def scenario(base: Path, name: str, k: int, chain: bool, isolated: bool) -> dict:
    root = base / name
    root.mkdir()
    counter = base / f"{name}-runs.txt"
    (root / "test_suite.py").write_text(TESTS)
    (root / "conftest.py").write_text(CONFTEST.format(counter=str(counter)))
    (root / "agent.py").write_text(AGENT)
    (root / ".gitignore").write_text(".harness/\n__pycache__/\n")
    (root / "harness.yaml").write_text(
        f"agents:\n  bot:\n    provider: command\n    command: [{json.dumps(PY)}, agent.py]\n"
        f"routing:\n  default: bot\nconcurrency: 4\n")
    lines = ["# bench", "", "## Tasks", ""]
    for i in range(k):
        lines += [f"- [ ] **t{i}**: Task {i}", "  - completion_promise: DONE",
                  f"  - accept: {PY} -m pytest -q -p no:cacheprovider", "  - min_passed: base"]
        lines += ["  - isolation: worktree"] if isolated else []
        lines += [f"  - depends_on: t{i - 1}"] if chain and i else []
    (root / "roadmap.md").write_text("\n".join(lines) + "\n")
    git(root, "init", "-q")
    git(root, "-c", "user.email=b@example.com", "-c", "user.name=B", "add", "-A")
    git(root, "-c", "user.email=b@example.com", "-c", "user.name=B", "commit", "-q", "-m", "start")
    started = time.perf_counter()
    r = subprocess.run([PY, "-m", "harnessc", "-C", str(root), "run"], capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": str(harnessc_env.REPO)})
    took = time.perf_counter() - started
    db = sqlite3.connect(root / ".harness" / "state.db")
    states = [s for (s,) in db.execute("SELECT state FROM tasks")]
    events = db.execute("SELECT COUNT(*) FROM events WHERE kind = 'min_passed_base'").fetchone()[0]
    runs = counter.read_text().splitlines() if counter.exists() else []
    base_runs = [d for d in runs if Path(d).name.startswith("0-")] if isolated else runs[:0]
    return {"scenario": name, "tasks": k, "succeeded": states.count("succeeded"), "exit": r.returncode,
            "base_runs": len(base_runs) if isolated else events, "events": events,
            "test_runs": len(runs), "seconds": round(took, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=8)
    args = ap.parse_args()
    k = args.tasks
    with tempfile.TemporaryDirectory(prefix="hc-min-passed-") as tmp:
        rows = [scenario(Path(tmp), "one-base", k, chain=False, isolated=True),
                scenario(Path(tmp), "chain", k, chain=True, isolated=True),
                scenario(Path(tmp), "shared-tree", k, chain=False, isolated=False)]
    expected = {"one-base": 1, "chain": k, "shared-tree": k}
    print(f"{'scenario':<12} {'tasks':>5} {'ok':>3} {'base runs':>9} {'expected':>8} {'events':>6} "
          f"{'all test runs':>13} {'seconds':>7}")
    for r in rows:
        print(f"{r['scenario']:<12} {r['tasks']:>5} {r['succeeded']:>3} {r['base_runs']:>9} "
              f"{expected[r['scenario']]:>8} {r['events']:>6} {r['test_runs']:>13} {r['seconds']:>7}")


if __name__ == "__main__":
    main()
