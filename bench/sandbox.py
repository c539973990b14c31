"""The sandbox's start-up cost per agent call (`sandbox: true`), against a bare `bwrap true`.

    python bench/sandbox.py [-n 200]

In one process, on an attempt's worktree of a real repository, as a run starts its commands
(harnessc a subreaper with the run's lifeline watcher), alternating round by round (so a
change in the machine's load hits every figure alike), the median milliseconds of:

1. `true`                         - a bare spawn (subprocess.run);
2. `bwrap <its flags> true`       - the floor: bubblewrap alone, as harnessc starts it but
                                    without binds (subprocess.run);
3. the same with a call's binds   - the worktree, git objects, its admin directory and a
                                    TMPDIR bound (subprocess.run): bubblewrap's whole part;
4. a command agent call of `true` - harnessc's CommandAgent.call, sandbox unset;
5. `bwrap <its flags> true` through harnessc's procs.run (asyncio, pipes, the reaper): the
                                    floor as harnessc starts any command;
6. the agent call with `sandbox: true` - (3) plus the private TMPDIR made and removed and
                                    the layout looked up, through the same procs.run.

What the sandbox adds per call is (6) - (4), against a bare `bwrap true` started the same way,
(5) - (4); (2) - (1) and (3) - (1) are bubblewrap's own figures without asyncio. On a loaded
machine every process start through an event loop pays more scheduling than a blocking
subprocess.run, and bubblewrap's clone-and-mount start more so: compare like with like.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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

from harnessc import providers  # noqa: E402
from harnessc.runtime.agents.base import Request  # noqa: E402
from harnessc.runtime.agents.command import CommandAgent  # noqa: E402
from harnessc.runtime.children import procs, reaper, sandbox  # noqa: E402


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def worktree(base: Path) -> tuple[Path, Path]:
    """A repository of 200 files with one attempt worktree, as isolation makes it."""
    root = base / "p"
    (root / "src").mkdir(parents=True)
    for i in range(200):
        (root / "src" / f"f{i}.py").write_text(f"X = {i}\n")
    (root / ".gitignore").write_text(".harness/\n")
    git(root, "init", "-q")
    git(root, "-c", "user.email=b@e", "-c", "user.name=B", "add", "-A")
    git(root, "-c", "user.email=b@e", "-c", "user.name=B", "commit", "-qm", "start")
    work = root / ".harness" / "worktrees" / "r1" / "1-1"
    work.parent.mkdir(parents=True)
    git(root, "worktree", "add", "-q", "--detach", str(work), "HEAD")
    return root, work


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200, help="rounds (each times the six once)")
    args = ap.parse_args()
    why = sandbox.problem()
    if why:
        sys.exit(f"sandbox.py: {why} ({sandbox.HINT})")
    bwrap = sandbox.bwrap_path()
    base = Path(tempfile.mkdtemp(prefix="harnessc-bench-sandbox-"))
    try:
        root, work = worktree(base)
        config = {"provider": "command", "command": ["true"]}
        plain = CommandAgent("plain", providers.agent_config("plain", config), root)
        jailed = CommandAgent("jailed", providers.agent_config("jailed", {**config, "sandbox": True}), root)
        request = Request(task_id="t", prompt="go", workdir=work)
        loop = asyncio.new_event_loop()
        quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        with sandbox.Call(root, work) as call:  # the argv a sandboxed call runs, binds and all
            bound = call.wrap(["true"], {})
            made = call.tmpdir
        made.mkdir()  # kept for the bare runs of that argv; removed with `base`'s sibling below
        cases = {
            "true": lambda: subprocess.run(["true"], **quiet),
            "bwrap true": lambda: subprocess.run([bwrap, *sandbox.BASE, "true"], **quiet),
            "bwrap + binds, true": lambda: subprocess.run(bound, cwd=work, **quiet),
            "agent call": lambda: loop.run_until_complete(plain.call(request)),
            "procs.run bwrap true": lambda: loop.run_until_complete(
                procs.run([bwrap, *sandbox.BASE, "true"], cwd=work, timeout=60)),
            "agent call, sandbox": lambda: loop.run_until_complete(jailed.call(request)),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        with reaper.adopting("hbench"):  # as in a run: subreaper and lifeline, no setpriv shim
            reaper.enter("hbench")
            for fn in cases.values():  # warm: imports, the probe, git's first look
                fn()
            for _ in range(args.n):
                for name, fn in cases.items():
                    times[name].append(timed(fn))
        loop.close()
        med = {name: statistics.median(t) * 1000 for name, t in times.items()}
        print(f"sandbox start-up per agent call ({args.n} rounds, medians, load {os.getloadavg()[0]:.2f}, {bwrap})")
        for name, ms in med.items():
            print(f"  {name:<22} {ms:7.2f} ms")
        floor = med["bwrap true"] - med["true"]
        binds = med["bwrap + binds, true"] - med["true"]
        added = med["agent call, sandbox"] - med["agent call"]
        floor_here = med["procs.run bwrap true"] - med["agent call"]
        print(f"  bubblewrap's own start, subprocess.run (bwrap true - true):   {floor:6.2f} ms")
        print(f"  the same with the call's binds:                                {binds:6.2f} ms")
        print(f"  bubblewrap's own start, harnessc's procs.run (- agent call):  {floor_here:6.2f} ms")
        print(f"  the sandbox per agent call (sandboxed - plain agent call):    {added:6.2f} ms"
              f"  = {added / floor_here:.2f}x a bare bwrap true started the same way")
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main()
