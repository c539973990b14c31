"""`harnessc report`: the HTML page of a large run and of the demo.

    python bench/report.py [--tasks 2000 --attempts 6000] [--repeat 3]

1. A recorded run of 2,000 tasks and 6,000 attempts (tests/runtime/bigrun.py: real SQLite,
   20 waves, rejected attempts with errors, fallbacks, 200 failed tasks, alerts): the report
   written by a fresh `python -m harnessc report` (so the figure includes start-up and the
   chart library's import), median of --repeat, wall and CPU time; and the page's size.
   Targets: <= 1.5 s, <= 3 MB.
2. The demo (specs/demo run once on its simulate agents): the same figures.
3. Where the time goes, in-process: reading the run, each chart, the page.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
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

from tests.runtime.bigrun import write_big_run  # noqa: E402

CLI = [sys.executable, "-m", "harnessc"]
TARGET_S, TARGET_MB = 1.5, 3.0


def timed_report(root: Path, repeat: int) -> tuple[float, float, int]:
    """Median wall and CPU (user + system) time of `harnessc report` in a fresh process; the
    page's size in bytes. On a loaded machine the CPU time is the steadier figure."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        res = subprocess.run([*CLI, "-C", str(root), "report"], capture_output=True, text=True,
                             cwd=REPO, timeout=600)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if res.returncode:
            sys.exit(f"report failed: {res.stderr.strip()}")
    page = root / res.stdout.strip().removeprefix("report: ")
    return statistics.median(walls), statistics.median(cpus), page.stat().st_size


def parts(root: Path) -> dict[str, tuple[float, float]]:
    """Wall and CPU seconds of each step, in this process (the chart library imported first,
    apart)."""
    from harnessc.runreport import charts, data, html, svg

    def timed(step) -> tuple[float, float]:
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        return time.perf_counter() - start, time.process_time() - start_cpu

    def library() -> None:
        charts.require()
        import matplotlib.figure  # noqa: F401

    out = {"import matplotlib": timed(library)}
    report: dict = {}
    out["read the run"] = timed(lambda: report.update(data.collect(root)))
    colors = charts.agent_colors(list(report["agents"]))
    ids = {t["id"] for t in report["tasks"]}
    out["plan graph"] = timed(lambda: svg.plan(report["tasks"], ids))
    out["timeline"] = timed(lambda: svg.timeline(report, colors, ids))
    out["cost and tokens"] = timed(lambda: charts.spending(report, colors))
    out["whole page (charts again)"] = timed(lambda: html.render(report))
    return out


def row(name: str, seconds: float, cpu: float, size: int) -> str:
    ok = "ok" if seconds <= TARGET_S and size <= TARGET_MB * 1e6 else "MISSED"
    return (f"{name:<28} {seconds:6.2f} s wall {cpu:6.2f} s cpu   {size / 1e6:5.2f} MB"
            f"   (targets {TARGET_S} s, {TARGET_MB} MB: {ok}; load {os.getloadavg()[0]:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--attempts", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        big = Path(tmp) / "big"
        write_big_run(big, tasks=args.tasks, attempts=args.attempts)
        print(row(f"{args.tasks} tasks, {args.attempts} attempts", *timed_report(big, args.repeat)))
        demo = Path(tmp) / "demo"
        shutil.copytree(REPO / "specs" / "demo", demo)
        subprocess.run([*CLI, "-C", str(demo), "run"], capture_output=True, cwd=REPO, timeout=600, check=True)
        print(row("demo", *timed_report(demo, args.repeat)))
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            print("(PYTHONDONTWRITEBYTECODE is set: each run compiles harnessc's modules, which an"
                  " installed harnessc's cached bytecode spares)")
        print(f"\nin-process, {args.tasks} tasks:")
        for name, (wall, cpu) in parts(big).items():
            print(f"  {name:<28} {wall:6.2f} s wall {cpu:6.2f} s cpu")


if __name__ == "__main__":
    main()
