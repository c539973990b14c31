"""`run --detach`: how long the command takes to return, against harnessc's start-up.

    python bench/detach.py [--runs 7]

Three commands timed in turn, each --runs times (the median counts), on a project of 10
tasks of an instant command agent: `harnessc --version` (the interpreter and the CLI),
`harnessc run --dry-run` (a `run` command's start-up: its imports, the plan loaded, the
state read) and `harnessc run --rerun all --detach` (two start-ups: the command, then the
run it starts, which reports once its run has started). Between two detached runs the
script waits for the run to end (`harnessc runs`). Target: detach - version <= 0.5 s plus
one `run` start-up (dry-run - version).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require()

from tests.runtime.helpers import CLI, node, write_project  # noqa: E402  (hand-made plans)


def timed(root: Path, *args: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    r = subprocess.run([*CLI, "-C", str(root), *args], capture_output=True, text=True, env=env, cwd=REPO)
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return took


def wait_ended(root: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    while True:
        r = subprocess.run([*CLI, "-C", str(root), "runs", "--output", "json"], capture_output=True, text=True,
                           env=env, cwd=REPO)
        if json.loads(r.stdout)[-1]["status"] != "running":
            return
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7, help="runs per command; the median counts (7)")
    args = ap.parse_args()
    print(f"load average (1, 5, 15 min) at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        root = Path(d)
        nodes = [node(f"t{i}", completion_promise="DONE", routing={"agent": "cmd", "chain": [], "reason": "bench"})
                 for i in range(10)]
        write_project(root, nodes, agents={"cmd": {"provider": "command",
                                                   "command": ["/bin/sh", "-c", "echo '<promise>DONE</promise>'"]}})
        figures: dict[str, list[float]] = {"version": [], "dry-run": [], "detach": []}
        for _ in range(args.runs):
            figures["version"].append(timed(root, "--version"))
            figures["dry-run"].append(timed(root, "run", "--rerun", "all", "--dry-run"))
            figures["detach"].append(timed(root, "run", "--rerun", "all", "--detach"))
            wait_ended(root)
    v, dry, det = (statistics.median(figures[k]) for k in ("version", "dry-run", "detach"))
    print(f"harnessc --version {v:.3f}s; run --dry-run {dry:.3f}s; run --detach {det:.3f}s")
    print(f"run --detach - --version = {det - v:.3f}s; over one run start-up (dry-run - version,"
          f" {dry - v:.3f}s): {det - dry:.3f}s (target <= 0.5 s)")
    for k, xs in figures.items():
        print(f"  {k}: {' '.join(f'{x:.3f}' for x in xs)}")
    print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
