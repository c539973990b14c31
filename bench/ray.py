"""executor ray: what running attempts on a Ray cluster costs the driver, and what it buys.

One `ray.cluster_utils.Cluster` on this machine (a head with no CPU for attempts and three
worker nodes of 2, 2 and 1 CPUs: 5 slots); every run is in-process (`session.execute`), its
tasks on one command agent, every task isolated (executor ray forces it; the local runs
use `isolation: worktree` too, so the difference is the executor's):

1. overhead: 500 no-op tasks (the agent prints the promise) at -j 4, local executor vs
   ray executor: (ray wall - local wall) / tasks. Goal <= 20 ms/attempt.
2. throughput: 2,000 tasks of 50 ms (a shell that sleeps; --agent python: a Python that
   sleeps) at -j 5 on the three nodes: makespan against the bound tasks x duration / slots,
   then two floors on the same cluster: bare Ray tasks running the same agent command (what
   Ray itself costs here), and those plus one `git status` each in a kept checkout (the
   least git an isolated attempt needs).
3. makespan: 200 tasks of 1 s at -j 5: against the same bound. Goal <= 1.25x.

--shape head: the cluster of issue 29's check run instead - a head with 1 CPU (it runs
attempts beside the driver, Ray's own processes and harnessc) and two nodes of 2 CPUs: the
same 5 slots. With --agent python --only makespan: its 200 attempts of a 1 s Python agent.

Each Ray run also prints, per remote call, the milliseconds of each phase on the worker
(source, checkout, agent, verify, diff, total: remote.run_attempt's record) and on the driver
(placeable, ship, roundtrip, apply), and the git processes the worker ran; every run, and
each floor, the CPU each task cost by process (CpuMeter) and the load average. On a 2-core
machine these figures are CPU-bound: compare harnessc with the floor of the same run.

    .venv/bin/python bench/ray.py [--noop 500] [--fast 2000] [--slow 200] [--runs 1] [--jobs 5]
                                  [--only overhead|throughput|makespan] [--no-floor] [--agent sh|python]
                                  [--shape spread|head]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require()
# this file is called ray.py: bench/ off the path, or `import ray` would import it
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(harnessc_env.REPO))

PY = sys.executable
SLOTS = 5
# --shape: (the head's CPUs for attempts, the worker nodes' CPUs); 5 slots either way
SHAPES = {"spread": (0, (2, 2, 1)), "head": (1, (2, 2))}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


AGENT = {"kind": "sh"}  # --agent


def agent_argv(seconds: float) -> list[str]:
    """The bench agent's command: prints the promise after `seconds`. A shell that sleeps
    (~3 ms of CPU), or with --agent python a Python that sleeps (~30 ms of CPU to start:
    on 2 cores, 5 slots of it alone take 1.5x the bound)."""
    if not seconds:
        return ["echo", "<promise>DONE</promise>"]
    if AGENT["kind"] == "python":
        return [PY, "-c", f"import time; time.sleep({seconds}); print('<promise>DONE</promise>')"]
    return ["sh", "-c", f"sleep {seconds}; echo '<promise>DONE</promise>'"]


def project(root: Path, tasks: int, seconds: float):
    """A git project of `tasks` independent tasks on one command agent that sleeps `seconds`."""
    from harnessc.runtime import plan as planmod

    root.mkdir(parents=True)
    lines = [f"- [ ] **t{i:04d}**: Task {i}\n  - agent: bot\n  - completion_promise: DONE\n"
             "  - isolation: worktree\n" for i in range(tasks)]
    (root / "roadmap.md").write_text("# Bench\n\n## Tasks\n\n" + "".join(lines))
    (root / "harness.yaml").write_text(json.dumps({"agents": {"bot": {"provider": "command",
                                                                      "command": agent_argv(seconds)}},
                                                   "concurrency": 4}))
    (root / ".gitignore").write_text(".harness/\n")
    git(root, "init", "-q")
    git(root, "config", "user.email", "b@example.com")
    git(root, "config", "user.name", "B")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "specs")
    return planmod.ensure_plan(root, False, say=lambda m: None)


def timed_run(root: Path, plan, jobs: int, executor: str | None) -> float:
    from harnessc.runtime.scheduler import RunOptions
    from harnessc.runtime.session import execute

    t0 = time.perf_counter()
    result = execute(root, plan, RunOptions(jobs=jobs, executor=executor, isolation="worktree"))
    wall = time.perf_counter() - t0
    if result.exit_code != 0:
        raise SystemExit(f"the run failed: {result.message}")
    return wall


def measure(work: Path, name: str, tasks: int, seconds: float, jobs: int, executor: str | None, runs: int) -> float:
    from harnessc.runtime.executor import ray as rayexec

    walls = []
    for i in range(runs):
        root = work / f"{name}-{executor or 'local'}-{i}"
        plan = project(root, tasks, seconds)
        rayexec.PHASES.clear()
        meter = CpuMeter()
        walls.append(timed_run(root, plan, jobs, executor))
        cpu = meter.stop()
        if name != "warm":
            if executor:
                print("  " + phases_line(rayexec.PHASES))
            print("  " + cpu_line(cpu, tasks))
    return statistics.median(walls)


# ------------------------------------------------------------------ where the CPU went

TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu() -> dict[int, tuple[str, int, int, int]]:
    """pid -> (who, ppid, own CPU ticks, its reaped children's CPU ticks), every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read(200)
        except (OSError, IndexError):
            continue
        out[int(d)] = (cmd.decode("utf-8", "replace"), int(fields[1]), int(fields[11]) + int(fields[12]),
                       int(fields[13]) + int(fields[14]))
    return out


def _busy_ticks() -> int:
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return user + nice + system + irq + softirq + steal


class CpuMeter:
    """CPU seconds the machine spent while a run was measured, by who spent them: this
    process (the driver; or the floor's dispatcher) and its reaped children (git, the
    lifeline), Ray's workers and theirs (agents, git, the shim), Ray's own processes (GCS,
    raylets, agents), and the rest of the machine (other work: noise)."""

    def __init__(self):
        self.before, self.busy, self.t0 = _proc_cpu(), _busy_ticks(), time.perf_counter()

    def stop(self) -> dict[str, float]:
        after, busy, wall = _proc_cpu(), _busy_ticks() - self.busy, time.perf_counter() - self.t0
        me = os.getpid()
        mine = {me}  # this process's descendants: the cluster's processes
        for pid in sorted(after):  # parents mostly have lower pids; a second pass catches the rest
            if after[pid][1] in mine:
                mine.add(pid)
        for pid in sorted(after):
            if after[pid][1] in mine:
                mine.add(pid)
        got = dict.fromkeys(("driver", "driver's children", "workers", "workers' children", "ray"), 0)
        for pid, (cmd, _, own, kids) in after.items():
            was = self.before.get(pid)
            own0, kids0 = (was[2], was[3]) if was and was[0] == cmd else (0, 0)
            if pid == me:
                got["driver"] += own - own0
                got["driver's children"] += kids - kids0
            elif pid in mine and cmd.startswith("ray::"):
                got["workers"] += own - own0
                got["workers' children"] += kids - kids0
            elif pid in mine:
                got["ray"] += own + kids - own0 - kids0
        secs = {k: v / TICK for k, v in got.items()}
        secs["rest of the machine"] = max(0.0, busy / TICK - sum(secs.values()))
        secs["busy"], secs["wall"] = busy / TICK, wall
        return secs


def cpu_line(cpu: dict[str, float], tasks: int) -> str:
    """CPU ms per task by who spent it, and how busy the cores were."""
    parts = [f"{k} {cpu[k] / tasks * 1000:.1f}" for k in cpu if k not in ("busy", "wall")]
    cores = os.cpu_count() or 1
    return (f"CPU ms per task: {', '.join(parts)}; the {cores} cores {cpu['busy'] / (cores * cpu['wall']):.0%} busy, "
            f"load {os.getloadavg()[0]:.2f}")


# ------------------------------------------------------------------ the floor: bare Ray tasks

def bare_attempt(argv: list[str], repo: str | None, base: str | None) -> int:
    """A Ray task that runs the agent's command and nothing else of harnessc's; with `repo`,
    also what an isolated attempt must do at least with git: see whether the agent changed
    anything, one `git status` in a checkout of `base` kept per worker process (as
    harnessc's workers keep theirs)."""
    import os
    import subprocess

    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "timeout": 60}
    if repo:
        top = f"{repo}.floor-{os.getpid()}"
        if not os.path.isdir(top):
            subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", repo, top], check=True, **quiet)
            subprocess.run(["git", "checkout", "-q", "--detach", base], cwd=top, check=True, **quiet)
    subprocess.run(argv, cwd=top if repo else None, check=True, **quiet)
    if repo:
        subprocess.run(["git", "status", "--porcelain", "-z", "--ignored=matching", "--untracked-files=all"],
                       cwd=top, check=True, **quiet)
    return 0


def floor(tasks: int, argv: list[str], jobs: int, repo: Path | None = None) -> tuple[float, dict]:
    """Wall seconds and CPU of `tasks` bare Ray tasks (num_cpus=1, as harnessc's), `jobs` in
    flight at a time, as harnessc's -j keeps them."""
    import ray

    fn = ray.remote(num_cpus=1, max_retries=0)(bare_attempt)
    base = git(repo, "rev-parse", "HEAD").strip() if repo else None
    ray.get([fn.remote(argv, str(repo) if repo else None, base) for _ in range(jobs * 2)])  # workers warm
    meter = CpuMeter()
    flying, sent = [], 0
    while sent < tasks or flying:
        while sent < tasks and len(flying) < jobs:
            flying.append(fn.remote(argv, str(repo) if repo else None, base))
            sent += 1
        done, flying = ray.wait(flying, num_returns=1)
        ray.get(done)
    cpu = meter.stop()
    return cpu["wall"], cpu


def phases_line(phases: dict[str, float]) -> str:
    """Per remote call: ms per phase, worker's (source .. total) and driver's (placeable, ship, roundtrip, apply)."""
    calls = phases.get("calls") or 1
    parts = [f"{k} {v / calls * 1000:.1f}" for k, v in phases.items() if k not in ("calls", "git")]
    return f"per call ({calls:.0f} calls), ms: " + ", ".join(parts) + f"; git processes {phases.get('git', 0) / calls:.1f}"


def floors(work: Path, tasks: int, seconds: float, jobs: int, wall: float, bound: float) -> None:
    """The throughput run's floors, measured right after it on the same cluster: bare Ray
    tasks running the same agent command, then the same plus one `git status` each."""
    repo = work / "floor-repo"
    project(repo, 1, seconds)
    for name, at in (("bare Ray tasks", None), ("bare Ray tasks + git status", repo)):
        took, cpu = floor(tasks, agent_argv(seconds), jobs, at)
        print(f"  floor, {name}: {took:.1f}s = {took / bound:.2f}x the bound; harnessc = {wall / took:.2f}x this floor; "
              f"load {os.getloadavg()[0]:.2f}")
        print("    " + cpu_line(cpu, tasks))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--noop", type=int, default=500)
    ap.add_argument("--fast", type=int, default=2000)
    ap.add_argument("--slow", type=int, default=200)
    ap.add_argument("--runs", type=int, default=1, help="runs per figure (the median is shown)")
    ap.add_argument("--jobs", type=int, default=SLOTS,
                    help="-j of the throughput and makespan runs (Ray's 5 slots bound the work either way)")
    ap.add_argument("--only", choices=["overhead", "throughput", "makespan"])
    ap.add_argument("--no-floor", action="store_true", help="skip the bare Ray tasks after the throughput run")
    ap.add_argument("--agent", choices=["sh", "python"], default="sh",
                    help="what the 50 ms and 1 s agents are: a shell that sleeps, or a Python that sleeps")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="spread",
                    help="spread: a head with no CPU and nodes of 2, 2 and 1; head: a head with 1 CPU and nodes of 2 and 2")
    args = ap.parse_args()
    AGENT["kind"] = args.agent
    head_cpus, nodes = SHAPES[args.shape]

    import ray
    from ray.cluster_utils import Cluster

    from harnessc.runtime import session
    from harnessc.runtime.executor.rayconfig import ExecutorSettings

    t0 = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": head_cpus, "include_dashboard": False})
    for cpus in nodes:
        cluster.add_node(num_cpus=cpus)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    print(f"cluster: a head with {head_cpus} CPU and {len(nodes)} nodes of {', '.join(map(str, nodes))}"
          f" ({SLOTS} slots) up in {time.perf_counter() - t0:.1f}s")
    settings = ExecutorSettings(address=cluster.address)
    session.resolve_executor = lambda plan, executor=None, ray_address=None: settings if executor == "ray" else None
    try:
        with tempfile.TemporaryDirectory(prefix="hc-ray-") as tmp:
            work = Path(tmp)
            measure(work, "warm", 10, 0, 4, "ray", 1)  # workers started, harnessc imported on them
            if args.only in (None, "overhead"):
                local = measure(work, "noop", args.noop, 0, 4, None, args.runs)
                remote = measure(work, "noop", args.noop, 0, 4, "ray", args.runs)
                per = (remote - local) / args.noop * 1000
                print(f"overhead: {args.noop} no-op tasks at -j 4: local {local:.1f}s, ray {remote:.1f}s = "
                      f"{per:+.1f} ms/attempt over local (goal <= 20)")
            for which, tasks, seconds in (("throughput", args.fast, 0.05), ("makespan", args.slow, 1.0)):
                if args.only not in (None, which):
                    continue
                wall = measure(work, which, tasks, seconds, args.jobs, "ray", args.runs)
                bound = tasks * seconds / SLOTS
                goal = " (goal <= 1.25x)" if which == "makespan" else ""
                print(f"{which}: {tasks} tasks of {seconds * 1000:g} ms on {SLOTS} slots at -j {args.jobs}: {wall:.1f}s against "
                      f"the bound {bound:.1f}s = {wall / bound:.2f}x{goal}; {tasks / wall:.1f} tasks/s; "
                      f"load {os.getloadavg()[0]:.2f}")
                if which == "throughput" and not args.no_floor:
                    floors(work, tasks, seconds, args.jobs, wall, bound)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
