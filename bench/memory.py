#!/usr/bin/env python3
"""Memory benchmark: does what task k decided reach task k+10 (issue 30 item 1)?

30 independent tasks (no depends_on), run with -j 1 by a command agent, tasks 1-10 at
priority high, 11-20 normal, 21-30 low (so task k starts before task k+10). Task k
(k <= 20) decides a fact no spec holds: `<decision>service-k listens on port 7000+k</decision>`;
task k+10's goal is to write a client for service-k, which needs that port. Measured, with
run memory on (the defaults) and with `memory: off`:

- carried: the share of tasks 11..30 whose prompt holds the port their service listens on;
- added tokens: the prompt tokens (harnessc's estimate) a task gets with memory on, less
  the same task's prompt with memory off, averaged over the 30 tasks (and the largest);
- the wall time of each run.

Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harnessc_env  # bench/: this script's directory

harnessc_env.require()

N = 30
GAP = 10

AGENT = """\
import os, pathlib, sys
task = os.environ["HARNESSC_TASK"]
k = int(task[1:])
pathlib.Path("prompts").mkdir(exist_ok=True)
pathlib.Path("prompts/" + task + ".txt").write_text(sys.stdin.read())
if k <= %(last)d:
    print("Set up service-%%d. <decision>service-%%d listens on port %%d</decision>" %% (k, k, 7000 + k))
print("<promise>DONE</promise>")
""" % {"last": N - GAP}


def project(root: Path, memory: str) -> None:
    root.mkdir(parents=True)
    (root / "agent.py").write_text(AGENT)
    (root / "harness.yaml").write_text(
        f"agents:\n  bot:\n    provider: command\n    command: [{json.dumps(sys.executable)}, agent.py]\n"
        f"routing:\n  default: bot\ndefaults:\n  max_retries: 0\n{memory}")
    lines = ["# Memory bench", "", "## Tasks", ""]
    for k in range(1, N + 1):
        goal = (f"Set up service-{k} and choose its port." if k <= N - GAP else "")
        if k > GAP:
            goal += f" Write the client of service-{k - GAP}: it must connect to the port service-{k - GAP} listens on."
        priority = ("high", "normal", "low")[min(2, (k - 1) // GAP)]  # task k starts before task k+10
        lines += [f"- [ ] **t{k:02d}**: Task {k}", "  - completion_promise: DONE", f"  - priority: {priority}", "",
                  f"  {goal.strip()}", ""]
    (root / "roadmap.md").write_text("\n".join(lines))


def run(root: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(harnessc_env.REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "from harnessc.cli import main; main()", "-C", str(root), "run", "-j", "1"],
                       cwd=root, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"the run failed ({r.returncode}): {r.stderr[-2000:]}")
    return took


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    sys.path.insert(0, str(harnessc_env.REPO))
    from harnessc.estimates import estimate_tokens

    base = Path(tempfile.mkdtemp(prefix="memory-bench-"))
    try:
        on, off = base / "on", base / "off"
        project(on, "")
        project(off, "memory: off\n")
        t_on, t_off = run(on), run(off)
        prompts = {name: {p.stem: p.read_text() for p in (root / "prompts").iterdir()} for name, root in
                   (("on", on), ("off", off))}
        needing = [f"t{k:02d}" for k in range(GAP + 1, N + 1)]
        carried = [t for t in needing if f"port {7000 + int(t[1:]) - GAP}" in prompts["on"][t]]
        leaked = [t for t in needing if f"port {7000 + int(t[1:]) - GAP}" in prompts["off"][t]]
        added = [estimate_tokens(prompts["on"][t]) - estimate_tokens(prompts["off"][t]) for t in prompts["on"]]
        print(f"tasks: {N} (task k+{GAP} needs what task k decided; independent, -j 1)")
        print(f"memory on : the fact carried to {len(carried)}/{len(needing)} tasks "
              f"({100 * len(carried) / len(needing):.0f}%), run {t_on:.1f}s")
        print(f"memory off: the fact carried to {len(leaked)}/{len(needing)} tasks, run {t_off:.1f}s")
        print(f"added prompt tokens per task: mean {statistics.mean(added):.0f}, median "
              f"{statistics.median(added):.0f}, max {max(added)} (memory.inject_tokens: 2000)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
