"""Loop benchmark: how many iterations a stuck task wastes before each recovery step.

    python bench/loop.py [--tasks 200] [--stuck 0.25] [--stuck-after 3] [--assist]

--tasks loop tasks run on simulate agents (each with a completion promise); a fraction
(--stuck) of them talk without ever claiming (`progress: none`: the same text each time),
the rest claim after a few iterations. Every stuck task climbs the recovery ladder
(runtime/loop/recovery.py: 3 prompt mutations, escalation to a second agent, then blocked).
Reported: for each recovery step, the iterations spent since the previous step (target:
<= stuck_after + 1 per step), the stuck tasks' final states, and the run's wall time. With
--assist a simulate agent writes the prompt mutations and, every 5 iterations, the memory
summaries (runtime/loop/assist.py): the assist calls are counted too.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require()

from harnessc.runtime.scheduler import RunOptions  # noqa: E402
from harnessc.runtime.session import execute  # noqa: E402
from tests.runtime.helpers import node, write_project  # noqa: E402  (hand-made plans)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--stuck", type=float, default=0.25, help="fraction of tasks that never claim")
    ap.add_argument("--stuck-after", type=int, default=3)
    ap.add_argument("--assist", action="store_true", help="a simulate agent writes mutations and summaries")
    args = ap.parse_args()
    n_stuck = int(args.tasks * args.stuck)
    with tempfile.TemporaryDirectory(prefix="hc-loop-") as d:
        root = Path(d)
        nodes = [node(f"s{i:03d}", completion_promise="DONE", routing={"agent": "talker", "chain": ["talker2"]},
                      limits={"stuck_after": args.stuck_after, "max_iterations": None})
                 for i in range(n_stuck)]
        nodes += [node(f"w{i:03d}", completion_promise="DONE", routing={"agent": "worker"},
                       limits={"stuck_after": args.stuck_after}) for i in range(args.tasks - n_stuck)]
        silent = {"provider": "simulate", "complete_after": 10**6, "progress": "none"}
        agents = {"talker": silent, "talker2": silent, "worker": {"provider": "simulate", "complete_after": 3},
                  "helper": {"provider": "simulate"}}
        loop = {"recovery": {"mutation_agent": "helper"},
                "context": {"summary_agent": "helper", "summarize_every": 5}} if args.assist else None
        plan = write_project(root, nodes, concurrency=8, agents=agents, loop=loop)
        t0 = time.perf_counter()
        execute(root, plan, RunOptions(jobs=8))
        wall = time.perf_counter() - t0
        db = sqlite3.connect(root / ".harness" / "state.db")
        steps: dict[str, list[tuple[int, str]]] = {}
        for task, data, attempt_count in db.execute(
                "SELECT e.task_id, e.data, (SELECT COUNT(*) FROM attempts a WHERE a.task_id = e.task_id"
                " AND a.started_at <= e.ts) FROM events e WHERE e.kind = 'recovery' ORDER BY e.id"):
            steps.setdefault(task, []).append((attempt_count, json.loads(data)["step"]))
        states = Counter(s for (s,) in db.execute("SELECT state FROM tasks WHERE id LIKE 's%'"))
        worker_states = Counter(s for (s,) in db.execute("SELECT state FROM tasks WHERE id LIKE 'w%'"))
        assists = Counter((json.loads(d)["purpose"], json.loads(d)["status"])
                          for (d,) in db.execute("SELECT data FROM events WHERE kind = 'assist'"))
    gaps: list[int] = []
    for seq in steps.values():
        before = 0
        for count, _ in seq:
            gaps.append(count - before)
            before = count
    worst = max(gaps, default=0)
    print(f"{args.tasks} loop tasks ({n_stuck} never claim), stuck_after {args.stuck_after}, jobs 8: {wall:.2f}s")
    print(f"recovery steps: {len(gaps)} ({Counter(s for seq in steps.values() for _, s in seq)})")
    print(f"iterations before each step: max {worst}, mean {sum(gaps) / max(len(gaps), 1):.2f}"
          f" (target <= stuck_after + 1 = {args.stuck_after + 1})")
    print(f"stuck tasks ended: {dict(states)}; the others: {dict(worker_states)}")
    if args.assist:
        print(f"assist calls: {dict(assists)}")


if __name__ == "__main__":
    main()
