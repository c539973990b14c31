"""The live view's cost: a run with the view `harnessc run` shows on a terminal against the
same run through a pipe.

    python bench/display.py [-n 2000] [-j 16] [--runs 5] [--agent simulate|command]

1. The run: `execute()` of N independent tasks at -j J, in-process as `harnessc run` does it,
   from a fresh project each time, alternately with the live view (LiveDisplay on a console
   writing to a pseudo-terminal from the `pty` module: redrawn 4 times a second, the agents'
   last lines read as they print) and with the plain view (PlainDisplay writing to a pipe: one
   line per event, as in CI). A `cat` process drains either, as a terminal would. Figures:
   the makespan (execute's wall time) and this process's CPU time over it (every thread: the
   view's redraws count), median of --runs each way, their difference in % and per event of
   the run. Target (issue 20): the makespans within 3%. On a loaded machine the makespan of
   one run swings by tens of percent from run to run, the CPU time much less.
2. The whole `harnessc run` process on a pseudo-terminal and through a pipe (start-up and the
   final summary included: on a terminal that is a rich table of every task), makespan from
   run_results.json and the process's CPU time (wait4).
3. In-process, the view's parts: LiveDisplay.on_event per event over a 2,000-task event
   stream, and one redraw with 16 running tasks (the ETA computed in it, its worst case).

`--agent simulate` (latency 0, the default) makes the run all CPU, the worst case for a view
that takes CPU; `--agent command` runs a command agent printing two lines, so the last-line
listener (procs.LastLine) is in the loop too. The load average is printed at the start and the
end: compare figures taken at similar loads.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require()

from tests.runtime.helpers import CLI, node, write_project  # noqa: E402  (hand-made plans)

SAYS = ["/bin/sh", "-c", "cat >/dev/null; echo 'working on it'; echo '<promise>DONE</promise>'"]


def project(root: Path, n: int, jobs: int, agent: str):
    nodes = [node(f"t{i:05d}") for i in range(n)]
    if agent == "command":
        for x in nodes:
            x["completion_promise"] = "DONE"
        agents = {"rehearsal": {"provider": "command", "command": SAYS}}
    else:
        agents = {"rehearsal": {"provider": "simulate", "latency": 0}}
    return write_project(root, nodes, agents=agents, concurrency=jobs)


def in_process_run(n: int, jobs: int, agent: str, terminal: bool) -> tuple[float, float, int]:
    """(makespan s, CPU s, events) of `execute` with the view `harnessc run` picks on a
    terminal (LiveDisplay) or a pipe (PlainDisplay), as cli._execute wires it."""
    from rich.console import Console

    from harnessc.runtime.observe.display import LiveDisplay, PlainDisplay
    from harnessc.runtime.scheduler import RunOptions
    from harnessc.runtime.session import execute

    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        root = Path(d)
        plan = project(root, n, jobs, agent)
        reader, writer = pty.openpty() if terminal else os.pipe()
        sink = subprocess.Popen(["cat"], stdin=reader, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the terminal's side
        os.close(reader)
        out = os.fdopen(writer, "w", encoding="utf-8")
        view = (LiveDisplay(Console(file=out, force_terminal=True, width=120, height=40)) if terminal
                else PlainDisplay(stream=out))
        events = [0]

        def count(ev: dict) -> None:
            events[0] += 1

        t0, c0 = time.perf_counter(), time.process_time()
        try:
            result = execute(root, plan, RunOptions(jobs=jobs), listeners=[view.on_event, count],
                             on_start=lambda runner, recovered: view.start(runner, 0))
        finally:
            view.close()
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        out.close()
        sink.wait()
        assert result.exit_code == 0, result.message
        return took, cpu, events[0]


def drain(fd: int, sink: list[int]) -> None:
    """Read `fd` to its end (a terminal's reader), counting bytes."""
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                sink[0] += len(chunk)
        except OSError:  # EIO: the child side closed
            return


def reap(p: subprocess.Popen) -> tuple[int, float]:
    """(exit code, CPU seconds: user + system) of a child process, once it has ended."""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, usage.ru_utime + usage.ru_stime


def one_run(n: int, jobs: int, agent: str, terminal: bool) -> tuple[float, float, int]:
    """(makespan s, CPU s, events) of one `harnessc run` process."""
    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        root = Path(d)
        project(root, n, jobs, agent)
        env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
        env.pop("CI", None)  # rich treats CI as "not interactive"
        env.pop("NO_COLOR", None)
        argv = [*CLI, "-C", str(root), "run", "-j", str(jobs)]
        printed = [0]
        if terminal:
            master, slave = pty.openpty()
            p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO, close_fds=True)
            os.close(slave)
            reader = threading.Thread(target=drain, args=(master, printed))
            reader.start()
            code, cpu = reap(p)
            reader.join()
            os.close(master)
        else:
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO)
            drain(p.stdout.fileno(), printed)
            code, cpu = reap(p)
        assert code == 0, f"harnessc run exited {code}"
        (results,) = (root / ".harness" / "runs").glob("*/run_results.json")
        events = sum(1 for _ in results.with_name("events.jsonl").open())
        return json.loads(results.read_text())["elapsed"], cpu, events


def in_process(n: int = 2000, running: int = 16) -> tuple[float, float]:
    """(µs per event of LiveDisplay.on_event, ms per redraw) with a terminal console."""
    from rich.console import Console

    from harnessc.runtime.observe.display import LiveDisplay
    from harnessc.runtime.observe.eta import Eta

    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        plan = write_project(Path(d), [node(f"t{i:05d}") for i in range(n)])
    console = Console(file=io.StringIO(), force_terminal=True, width=120, height=40)
    view = LiveDisplay(console)
    live: dict[str, dict] = {}
    view.runner = SimpleNamespace(live=live, steering=SimpleNamespace(paused=False),
                                  budget=SimpleNamespace(run_limit=5.0))
    view.eta = Eta({x.id: x for x in plan.nodes}, [x.id for x in plan.nodes], 16)
    stream = [{"kind": "run_planned", "tasks": n}]
    for i in range(n):
        tid = f"t{i:05d}"
        stream += [{"kind": "task_running", "task": tid},
                   {"kind": "attempt_started", "task": tid, "iteration": 1, "agent": "rehearsal", "level": 0},
                   {"kind": "attempt_finished", "task": tid, "status": "succeeded", "cost_usd": 0.001, "tokens": 300},
                   {"kind": "task_succeeded", "task": tid}]
    t0 = time.perf_counter()
    for ev in stream:
        view.on_event(ev)
    per_event = (time.perf_counter() - t0) / len(stream) * 1e6
    for i in range(running):
        tid = f"t{i:05d}"
        live[tid] = {"iteration": 2, "agent": "rehearsal", "line": f"step {i}: compiling the module " * 3}
        view.eta.started(tid, time.monotonic() - 5)
    frames = 50
    t0 = time.perf_counter()
    for _ in range(frames):
        view.eta_at = (float("-inf"), None)  # the ETA computed in every frame: the worst case
        console.print(view._render())
    per_frame = (time.perf_counter() - t0) / frames * 1e3
    return per_event, per_frame


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000, help="tasks (2000)")
    ap.add_argument("-j", "--jobs", type=int, default=16, help="tasks at once (16)")
    ap.add_argument("--runs", type=int, default=5, help="runs each way; the median counts (5)")
    ap.add_argument("--agent", choices=("simulate", "command"), default="simulate")
    args = ap.parse_args()

    print(f"load average (1, 5, 15 min) at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    in_process_run(20, args.jobs, args.agent, True)  # warm-up: imports, templates
    for name, measure in (("the run, in-process", in_process_run), ("the whole process", one_run)):
        runs: dict[bool, list[tuple[float, float, int]]] = {True: [], False: []}
        for _ in range(args.runs):
            for terminal in (True, False):
                runs[terminal].append(measure(args.n, args.jobs, args.agent, terminal))
        (t, tc, ev), (p, pc, _) = ([statistics.median(x[i] for x in runs[k]) for i in range(3)]
                                   for k in (True, False))
        print(f"{name}: {args.n} tasks on {args.agent}, -j {args.jobs}, {ev:.0f} events; median of {args.runs}:")
        print(f"  makespan: terminal {t:.2f}s, pipe {p:.2f}s: {100 * (t - p) / p:+.1f}% (target within 3%),"
              f" {(t - p) / ev * 1e6:+.0f} µs per event")
        print(f"  CPU: terminal {tc:.2f}s, pipe {pc:.2f}s: {100 * (tc - pc) / pc:+.1f}%,"
              f" {(tc - pc) / ev * 1e6:+.0f} µs per event")
        for k, label in ((True, "terminal"), (False, "pipe")):
            print(f"  {label} (makespan/CPU s): {' '.join(f'{m:.2f}/{c:.2f}' for m, c, _ in runs[k])}")
    per_event, per_frame = in_process()
    print(f"in-process: LiveDisplay.on_event {per_event:.1f} µs per event (2,000 tasks); one redraw with 16"
          f" running tasks {per_frame:.2f} ms (x 4 a second = {per_frame * 4 / 10:.1f}% of a core)")
    print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
