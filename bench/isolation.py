"""isolation: worktree - what it costs and what it buys.

1. Per-task overhead on a 5,000-file repository: harnessc's create (worktree + ref), commit
   of a one-file change, land (the branch's compare-and-swap and the user's fast-forward)
   and remove, against the floor `git worktree add` + `git worktree remove` measured in the
   same run; median of 3. Goal: <= 1.5x the floor.
2. 20 coding tasks at -j 4 on the same command agent, with isolation and without (`git:
   commit`, the shared tree and attribution): the makespan ratio, and the files committed
   under a task that did not write them (0 with isolation).

    .venv/bin/python bench/isolation.py [--files 5000] [--tasks 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require()
sys.path.insert(0, str(harnessc_env.REPO))

from harnessc.runtime.worktree.landing import Landing  # noqa: E402
from harnessc.runtime.worktree.repo import open_repo  # noqa: E402
from harnessc.runtime.worktree.worktrees import Worktrees  # noqa: E402

PY = sys.executable


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def make_repo(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "b@example.com")
    git(root, "config", "user.name", "B")
    for i in range(files):
        d = root / "src" / f"pkg{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f"VALUE_{i} = {i}\n" * 20)
    (root / ".gitignore").write_text(".harness/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")


def overhead(files: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        make_repo(root, files)
        floors, ours = [], []
        git(root, "status", "--porcelain")  # the index refreshed, the files in the page cache
        for i in range(3):
            t0 = time.perf_counter()
            git(root, "worktree", "add", "--detach", "-q", str(Path(tmp) / f"floor{i}"), "HEAD")
            git(root, "worktree", "remove", "--force", str(Path(tmp) / f"floor{i}"))
            floors.append(time.perf_counter() - t0)

            repo = open_repo(root)
            trees, landing = Worktrees(repo, root, f"bench{i}"), Landing(repo)
            integration, _ = landing.open(f"bench{i}", None)
            t0 = time.perf_counter()
            attempt = trees.create(1, 1, repo.head)
            (attempt.workdir / "src" / "pkg000" / "mod00000.py").write_text(f"changed {i}\n")
            trees.commit(attempt, f"harnessc: t{i}: bench\n")
            assert landing.advance(integration, attempt.change, repo.head)
            assert landing.follow(integration, attempt.change), integration.left_because
            trees.remove(attempt, 1, 1)
            ours.append(time.perf_counter() - t0)
        floor, mine = statistics.median(floors), statistics.median(ours)
        print(f"overhead, {files} files: git worktree add+remove {floor * 1000:.0f} ms; harnessc create+commit+"
              f"land+fast-forward+remove {mine * 1000:.0f} ms = {mine / floor:.2f}x the floor (goal <= 1.5x)")


AGENT = """\
import os, pathlib, time
task = os.environ["HARNESSC_TASK"]
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".py").write_text("# half written by " + task + "\\n")
time.sleep(0.4)
pathlib.Path("out", task + ".py").write_text("DONE = " + repr(task) + "\\n")
print("done <promise>DONE</promise>")
"""


def coding(tasks: int, isolated: bool, work: Path) -> tuple[float, int]:
    root = work / ("iso" if isolated else "shared")
    make_repo(root, 50)
    (root / "agent.py").write_text(AGENT)
    prop = "isolation: worktree" if isolated else "git: commit"
    lines = [f"- [ ] **t{i:02d}**: Write module {i}\n  - agent: bot\n  - completion_promise: DONE\n  - {prop}\n"
             for i in range(tasks)]
    (root / "roadmap.md").write_text("# Bench\n\n## Tasks\n\n" + "".join(lines))
    (root / "harness.yaml").write_text(json.dumps({"agents": {"bot": {"provider": "command",
                                                                         "command": [PY, str(root / "agent.py")]}},
                                                   "concurrency": 4}))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "specs")
    cli = [PY, "-c", "from harnessc.cli import main; main()", "-C", str(root)]
    env = {"PYTHONPATH": str(harnessc_env.REPO), "PATH": "/usr/bin:/bin", "HOME": str(work)}
    subprocess.run([*cli, "build"], check=True, capture_output=True, env=env)
    t0 = time.perf_counter()
    r = subprocess.run([*cli, "run", "-j", "4"], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:])
    wrong = 0
    for sha in git(root, "log", "--format=%H", "--grep=^harnessc: t").split():
        subject = git(root, "log", "-1", "--format=%s", sha)
        task = subject.split(":")[1].strip()
        for path in git(root, "show", "--name-only", "--format=", sha).split():
            wrong += path != f"out/{task}.py"
    return elapsed, wrong


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--tasks", type=int, default=20)
    args = ap.parse_args()
    overhead(args.files)
    with tempfile.TemporaryDirectory() as tmp:
        shared, shared_wrong = coding(args.tasks, False, Path(tmp))
        iso, iso_wrong = coding(args.tasks, True, Path(tmp))
    print(f"{args.tasks} coding tasks at -j 4: shared tree {shared:.1f}s, isolated {iso:.1f}s "
          f"= {iso / shared:.2f}x the makespan; misattributed files: shared {shared_wrong}, isolated {iso_wrong} "
          "(goal 0)")


if __name__ == "__main__":
    main()
