"""Record / replay cost: what `run --record` and `run --replay` add per agent call.

    python bench/cassettes.py [--tasks 1000] [--repeat 3]

N independent contract tasks on a zero-latency simulate agent, each run from a clean state
(the cassettes kept): live, then --record, then --replay. Per-call overhead is
(mode - live) / N, best of --repeat runs each (a shared machine only ever adds time), after
one warm-up run. Also the cassettes' size on disk.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require()

from harnessc.runtime.scheduler import RunOptions  # noqa: E402
from harnessc.runtime.session import execute  # noqa: E402
from tests.runtime.helpers import SIMPLE_CONTRACT, node, write_project  # noqa: E402  (hand-made plans)


def forget_state(root: Path) -> None:
    """Everything but the build and the cassettes, as a CI checkout has it."""
    for p in (root / ".harness").iterdir():
        if p.name not in ("build", "cassettes"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()


def timed(root: Path, plan: dict, mode: str | None) -> float:
    forget_state(root)
    t0 = time.perf_counter()
    result = execute(root, plan, RunOptions(jobs=8, cassettes=mode))
    took = time.perf_counter() - t0
    assert result.exit_code == 0, result.message
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        root = Path(d)
        plan = write_project(root, [node(f"t{i:05d}", contract="summary") for i in range(args.tasks)],
                             contracts={"summary": SIMPLE_CONTRACT}, concurrency=8)
        timed(root, plan, "record")  # warm-up, and the cassettes the first replay needs
        best = {mode: min(timed(root, plan, mode) for _ in range(args.repeat))
                for mode in (None, "record", "replay")}
        size = sum(p.stat().st_size for p in (root / ".harness/cassettes").iterdir())
    n = args.tasks
    print(f"{n} calls, best of {args.repeat}:")
    print(f"  live (simulate)  {best[None]:.2f} s")
    for mode in ("record", "replay"):
        print(f"  --{mode:<7}        {best[mode]:.2f} s   {1000 * (best[mode] - best[None]) / n:+.2f} ms per call")
    print(f"  cassettes        {n} files, {size / n:.0f} bytes per call")


if __name__ == "__main__":
    main()
