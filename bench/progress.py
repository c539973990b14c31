"""What progress scoring costs a loop iteration (runtime/loop/progress.py), per iteration.

A project of --files files (default 2,000, in 100 directories, committed to a new git
repository) gets --iterations iterations of a loop task's meter; between two iterations an
"agent" edits 2 files, adds an untracked one and, every 5th iteration, commits. Measured:
ProgressMeter.begin and .measure, as a loop iteration pays them (a task alone: one snapshot
per iteration - `git add -A` into the private index, `git diff --cached --raw` against the
base tree - then the changed blobs' lines and the new commits read through a persistent
`git cat-file`, plus the text signals); then the same outside git (content hashes of every
file). Target (issue 10): <= 20 ms per iteration with gitpython on 2,000 files.
Then the output difference alone on consecutive outputs `"1-" * n` and `"2-" * n` (issue 17:
difflib took 241 s at n=4,000; target: under 10 ms whatever n).

    .venv/bin/python bench/progress.py [--files 2000] [--iterations 30]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require()

from harnessc.planfile import Limits, PlanNode, Retry, Routing  # noqa: E402
from harnessc.runtime.loop.progress import ProgressMeter, Settings, output_difference  # noqa: E402


def make_project(root: Path, files: int, git: bool) -> None:
    for i in range(files):
        path = root / f"pkg{i % 100:03d}" / f"mod{i:05d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"value_{j} = {i * j}\n" for j in range(40)))
    if git:
        run = lambda *a: subprocess.run(["git", "-C", str(root), *a], check=True, capture_output=True)  # noqa: E731
        run("init", "-q")
        run("config", "user.email", "bench@example.com")
        run("config", "user.name", "bench")
        (root / ".gitignore").write_text(".harness/\n")
        run("add", "-A")
        run("commit", "-qm", "init")


def work(root: Path, n: int, git: bool) -> None:
    """What an agent does between two measurements."""
    for k in (n, n + 7):
        path = root / f"pkg{k % 100:03d}" / f"mod{k:05d}.py"
        path.write_text(path.read_text() + f"added_{n} = {n}\n")
    (root / f"new_{n}.py").write_text(f"x = {n}\n")
    if git and n % 5 == 0:
        subprocess.run(["git", "-C", str(root), "commit", "-qam", f"step {n}"], check=True, capture_output=True)


def node() -> PlanNode:
    return PlanNode(id="t", title="t", phase=None, done=False, order=0, priority="normal", complexity="medium",
                    tags=[], depends_on=[], contract=None, goal="- [ ] a\n- [ ] b", success=None,
                    completion_promise="DONE", accept=[], context=[],
                    limits=Limits(50, 3600, 3, None), retry=Retry(2, "retry", [0]), routing=Routing("s", [], ""))


async def measure(root: Path, iterations: int, git: bool) -> list[float]:
    state_dir = root / ".harness" / "loop"
    state_dir.mkdir(parents=True)
    meter = ProgressMeter(root, node(), Settings(), state_dir)
    await meter.begin()  # the first snapshot (a copy of git's index spares hashing every file)
    times = []
    for n in range(1, iterations + 1):
        t = time.perf_counter()
        await meter.begin()  # the iteration's start: the last one's end, for a task alone
        spent = time.perf_counter() - t
        work(root, n, git)
        t = time.perf_counter()
        evidence = await meter.measure(f"<progress>step {n}</progress> did things {n}", [])
        times.append(spent + time.perf_counter() - t)
        assert evidence.files and evidence.files.files >= 3, evidence.record()
        if git:
            assert evidence.files.added >= 3 and evidence.files.new == 1, evidence.record()
            assert evidence.files.commits == (n % 5 == 0), evidence.record()
    meter.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--iterations", type=int, default=30)
    args = ap.parse_args()
    print(f"{args.files} files, {args.iterations} iterations (2 files edited + 1 new each, a commit every 5th)")
    for git in (True, False):
        root = Path(tempfile.mkdtemp(prefix="hc-progress-"))
        try:
            make_project(root, args.files, git)
            times = asyncio.run(measure(root, args.iterations, git))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        ms = sorted(t * 1000 for t in times)
        target = "  (target <= 20 ms)" if git else ""
        print(f"{'git   ' if git else 'hashes'}: median {statistics.median(ms):6.1f} ms, "
              f"p90 {ms[int(len(ms) * 0.9) - 1]:6.1f} ms, max {ms[-1]:6.1f} ms per iteration{target}")
    output_differences()


def output_differences() -> None:
    for n in (1_000, 4_000, 100_000, 1_000_000):
        a, b = "1-" * n, "2-" * n
        t = time.perf_counter()
        output_difference(a, b)
        print(f"output difference, n={n:>9,}: {(time.perf_counter() - t) * 1000:6.2f} ms  (target < 10 ms)")


if __name__ == "__main__":
    main()
