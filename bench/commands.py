"""Command agents: what harnessc adds to running fast commands, against floors measured
side by side in the same process.

    python bench/commands.py [-n 1000] [--runs 5] [--skip-chains | --skip-throughput] [--run-log]

1. N tasks of a 50 ms `command` agent at -j 16: the whole `harnessc run` process against a
   bare asyncio loop running the same argv (same stdin, stdout captured) 16 at a time.
   Target: ratio <= 1.3x.
1b. The same from a roadmap made by `harnessc build` (its protected spec files, its prompts on
   disk) with an agent that does not read its stdin, against a bare loop running that argv
   (same stdin, unread). Target: ratio <= 1.3x.
2. 10 chains x 10 tasks of a 100 ms command agent, jobs 10: makespan (first task start to
   last task end, from the run's events, in-process) against the bound 10 x 100 ms = 1.0 s.
   Target: <= 1.10x. Printed next to it: a bare asyncio loop running the same 10 chains
   (what the commands themselves cost beyond their sleep).

3. With --run-log (figures 1 and 2 are then skipped): figure 1's `harnessc run` process with
   its `.harness/runs/<id>/run.log` against the same process with that log turned off (a
   `python -c` that makes RunLog.open do nothing): wall time and CPU time (the process and
   its agents). Target: <= 1.02x. On a loaded machine the wall times vary more than 2% from
   run to run, so the log's own cost is measured too: the run's events (its events.jsonl)
   written again through the run log's writer, against the run's wall time.

Each figure is the median of --runs; the runs alternate (bare, harnessc, bare, ...) so a
change in the machine's load hits both alike. The load average is printed with the figures,
and figures 1 and 1b also print the CPU time each side used (the process and its commands),
which a busy machine changes far less than the wall times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
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

from harnessc.runtime.observe.display import FINAL  # noqa: E402
from harnessc.runtime.scheduler import RunOptions  # noqa: E402
from harnessc.runtime.session import execute  # noqa: E402
from tests.runtime.helpers import CLI, node, write_project  # noqa: E402  (hand-made plans)

PROMPT = b"# Task t00000: Task t00000\n\nDo the work for task t00000.\n"


def agent_argv(seconds: float, reads: bool = True) -> list[str]:
    """A command agent that reads its prompt (unless not `reads`), takes `seconds`, and says
    it is done."""
    return ["/bin/sh", "-c", f"{'cat >/dev/null; ' if reads else ''}sleep {seconds}; echo '<promise>DONE</promise>'"]


async def bare_command(argv: list[str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True)
    out, _ = await proc.communicate(PROMPT)  # (an agent that never reads it: the pipe's error is ignored)
    assert proc.returncode == 0 and b"DONE" in out


def cpu_seconds() -> float:
    """CPU seconds this process and its waited-for children have used so far."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def bare_loop(n: int, jobs: int, seconds: float, reads: bool = True, keep: dict | None = None) -> float:
    """Seconds a plain asyncio loop takes to run the agent's argv n times, `jobs` at once
    (`keep`: gets the CPU seconds of the loop and its commands, "cpu")."""
    argv = agent_argv(seconds, reads)

    async def one(gate: asyncio.Semaphore) -> None:
        async with gate:
            await bare_command(argv)

    async def main() -> None:
        gate = asyncio.Semaphore(jobs)
        await asyncio.gather(*(one(gate) for _ in range(n)))

    cpu0, t0 = cpu_seconds(), time.perf_counter()
    asyncio.run(main())
    took = time.perf_counter() - t0
    if keep is not None:
        keep["cpu"] = cpu_seconds() - cpu0
    return took


def bare_chains(chains: int = 10, length: int = 10, seconds: float = 0.1) -> float:
    """Seconds a plain asyncio loop takes to run `chains` chains of `length` commands."""
    argv = agent_argv(seconds)

    async def chain() -> None:
        for _ in range(length):
            await bare_command(argv)

    async def main() -> None:
        await asyncio.gather(*(chain() for _ in range(chains)))

    t0 = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - t0


def command_project(root: Path, nodes: list[dict], seconds: float, jobs: int):
    """A compiled project whose tasks all run the command agent; its plan."""
    for n in nodes:
        n["completion_promise"] = "DONE"
        n["routing"] = {"agent": "cmd", "chain": [], "reason": "bench"}
    return write_project(root, nodes, agents={"cmd": {"provider": "command", "command": agent_argv(seconds)}},
                  concurrency=jobs)


def built_project(root: Path, n: int, seconds: float, jobs: int) -> None:
    """A project of n independent tasks of the command agent that does not read its stdin,
    its plan made by `harnessc build` (as a user's is: spec files protected, prompts on disk)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "harness.yaml").write_text(
        f"agents:\n  cmd:\n    provider: command\n    command: {json.dumps(agent_argv(seconds, reads=False))}\n"
        f"routing:\n  default: cmd\nconcurrency: {jobs}\n")
    lines = ["# Bench", "", "## Tasks", ""]
    for i in range(n):
        lines += [f"- [ ] **t{i:05d}**: Task t{i:05d}", "  - completion_promise: DONE"]
    (root / "roadmap.md").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([*CLI, "-C", str(root), "build"], capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


# harnessc's CLI with the run's run.log turned off (figure 3's floor)
NO_RUN_LOG = [CLI[0], "-c", "from harnessc.runtime.observe.runlog import RunLog; RunLog.open = lambda *a: None; "
              "from harnessc.cli import main; main()"]


def harnessc_run(n: int, jobs: int, seconds: float, run_log: bool = True, keep: dict | None = None,
                 built: bool = False) -> float:
    """Seconds the `harnessc run -j jobs` process takes on n independent command-agent tasks
    (without `run_log`: with its run.log turned off; `built`: figure 1b's project). `keep`:
    gets the CPU seconds of the process and its agents ("cpu") and the run's events ("events")."""
    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        root = Path(d)
        if built:
            built_project(root, n, seconds, jobs)
        else:
            command_project(root, [node(f"t{i:05d}") for i in range(n)], seconds, jobs)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        # cwd: `python -c` puts it first on sys.path, so it decides which harnessc runs
        r = subprocess.run([*(CLI if run_log else NO_RUN_LOG), "-C", str(root), "run", "-j", str(jobs)],
                           capture_output=True, text=True, env=env, cwd=REPO)
        took = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        logs = list(root.glob(".harness/runs/*/run.log"))
        assert bool(logs) == run_log, logs
        if keep is not None:
            keep["cpu"] = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
            keep["events"] = [json.loads(line) for f in root.glob(".harness/runs/*/events.jsonl")
                              for line in f.read_text().splitlines()]
        return took


def run_log_cost(events: list[dict], tasks: list[dict]) -> float:
    """Seconds the run log's writer takes over a run's events and its summary (observe/runlog.py)."""
    from harnessc.runtime.observe.display import plain_summary
    from harnessc.runtime.observe.runlog import RunLog
    from harnessc.workspace import Workspace

    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        log = RunLog()
        t0 = time.perf_counter()
        log.open(Workspace(d), None, "bench")
        for ev in events:
            log.on_event(ev)
        log.line(plain_summary(tasks, "run bench"))
        log.close()
        return time.perf_counter() - t0


def chains_makespan(chains: int = 10, length: int = 10, seconds: float = 0.1) -> float:
    """First task start to last task end of `chains` chains of `length` command-agent tasks."""
    nodes = []
    for c in range(chains):
        for i in range(length):
            nodes.append(node(f"c{c:02d}t{i:02d}", depends_on=[f"c{c:02d}t{i - 1:02d}"] if i else []))
    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        root = Path(d)
        plan = command_project(root, nodes, seconds, chains)
        marks: list[float] = []

        def on_event(ev: dict) -> None:
            if ev["kind"] == "task_running" or ev["kind"] in FINAL:
                marks.append(time.perf_counter())

        result = execute(root, plan, RunOptions(jobs=chains), listeners=[on_event])
        assert result.exit_code == 0, result.message
        return marks[-1] - marks[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1000, help="tasks / commands in figure 1 (1000)")
    ap.add_argument("--runs", type=int, default=5, help="runs per figure; the median counts (5)")
    ap.add_argument("--skip-chains", action="store_true", help="figure 1 only")
    ap.add_argument("--skip-throughput", action="store_true", help="figure 2 only")
    ap.add_argument("--run-log", action="store_true", help="figure 3 only: what run.log costs figure 1's run")
    args = ap.parse_args()
    jobs, seconds = 16, 0.05
    if args.run_log:
        args.skip_throughput = args.skip_chains = True

    print(f"load average (1, 5, 15 min) at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    bare_loop(20, jobs, seconds)  # warm-up: the page cache for sh and sleep
    if not args.skip_throughput:
        for built in (False, True):
            bare, hc, bare_cpu, hc_cpu = [], [], [], []
            for _ in range(args.runs):
                kept: dict = {}
                bare.append(bare_loop(args.n, jobs, seconds, reads=not built, keep=kept))
                bare_cpu.append(kept["cpu"])
                hc.append(harnessc_run(args.n, jobs, seconds, keep=kept, built=built))
                hc_cpu.append(kept["cpu"])
            b, h = statistics.median(bare), statistics.median(hc)
            if built:
                print(f"{args.n} tasks of a 50 ms command agent not reading its stdin, roadmap built by `harnessc"
                      f" build`, -j {jobs}: harnessc run {h:.2f}s, bare asyncio loop {b:.2f}s = {h / b:.2f}x"
                      f" (target <= 1.3x)")
            else:
                print(f"{args.n} tasks of a 50 ms command agent, -j {jobs}: harnessc run {h:.2f}s, bare asyncio"
                      f" loop {b:.2f}s = {h / b:.2f}x (target <= 1.3x); ideal {args.n * seconds / jobs:.2f}s")
            print(f"  runs: harnessc {' '.join(f'{x:.2f}' for x in hc)}; bare {' '.join(f'{x:.2f}' for x in bare)}")
            # On a busy machine the wall times follow the share of the CPU each run got: the CPU
            # it used (the process and its commands) says what it costs whatever the load.
            bc, hcc = statistics.median(bare_cpu), statistics.median(hc_cpu)
            print(f"  CPU, the process and its commands: harnessc {hcc:.2f}s, bare {bc:.2f}s = {hcc / bc:.2f}x;"
                  f" harnessc's beyond the bare loop's: {1000 * (hcc - bc) / args.n:.2f} ms per task")

    if not args.skip_chains:
        spans, bares = [], []
        for _ in range(args.runs):
            bares.append(bare_chains())
            spans.append(chains_makespan())
        m, b = statistics.median(spans), statistics.median(bares)
        print(f"10 chains x 10 tasks of a 100 ms command agent, jobs 10: makespan {m:.3f}s vs bound"
              f" 1.00s = {m:.3f}x (target <= 1.10x); a bare asyncio loop: {b:.3f}s; harnessc / bare = {m / b:.3f}x")
        print(f"  runs: harnessc {' '.join(f'{x:.3f}' for x in spans)}; bare {' '.join(f'{x:.3f}' for x in bares)}")
    if args.run_log:
        with_log, without, cpu_with, cpu_without, own = [], [], [], [], []
        for _ in range(args.runs):
            kept: dict = {}
            without.append(harnessc_run(args.n, jobs, seconds, run_log=False, keep=kept))
            cpu_without.append(kept["cpu"])
            with_log.append(harnessc_run(args.n, jobs, seconds, keep=kept))
            cpu_with.append(kept["cpu"])
            tasks = [{"id": f"t{i:05d}", "state": "succeeded", "attempts": 1, "agent": "cmd", "tokens": 131,
                      "cost_usd": 0.0, "duration": 0.06} for i in range(args.n)]
            own.append(run_log_cost(kept["events"], tasks) / with_log[-1])
        w, o = statistics.median(with_log), statistics.median(without)
        cw, co = statistics.median(cpu_with), statistics.median(cpu_without)
        print(f"{args.n} tasks of a 50 ms command agent, -j {jobs}: harnessc run with run.log {w:.2f}s, without"
              f" {o:.2f}s = {w / o:.3f}x wall; CPU {cw:.2f}s vs {co:.2f}s = {cw / co:.3f}x (target <= 1.02x)")
        print(f"  run.log's own writing: {100 * statistics.median(own):.2f}% of the run's wall time")
        print(f"  runs: with {' '.join(f'{x:.2f}' for x in with_log)}; without {' '.join(f'{x:.2f}' for x in without)}")
    print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
