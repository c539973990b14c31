"""A large recorded run, written straight into a real state database (for the report's
tests and bench/report.py): N tasks in waves, each with its attempts, some rejected, some
on a fallback agent, every tenth task failed, alerts."""

from __future__ import annotations

import json
import random
from pathlib import Path

from harnessc.runtime.store.state import StateStore
from harnessc.workspace import Workspace

from .helpers import node, write_project

AGENTS = ("sonnet", "haiku", "codex", "local")
WAVE = 100  # tasks per wave; each depends on up to two tasks of the wave before


def write_big_run(root: Path, tasks: int = 2000, attempts: int = 6000, seed: int = 7,
                  error_chars: int = 300, output_chars: int = 600) -> str:
    """Write the project and its run; the run's id."""
    rng = random.Random(seed)
    nodes = []
    for i in range(tasks):
        wave = i // WAVE
        deps = sorted({f"t{rng.randrange((wave - 1) * WAVE, wave * WAVE):05d}" for _ in range(2)}) if wave else []
        nodes.append(node(f"t{i:05d}", title=f"Task number {i}", depends_on=deps, wave=wave,
                          contract="summary" if i % 3 else None))
    write_project(root, nodes, agents={a: {"provider": "simulate"} for a in AGENTS})
    run_id = "20260101T000000-1"
    store = StateStore(Workspace(root))
    store.start_run(run_id, {"jobs": 8})
    per_task = [attempts // tasks + (1 if i < attempts % tasks else 0) for i in range(tasks)]
    clock = store.db.execute("SELECT started_at FROM runs WHERE id=?", (run_id,)).fetchone()[0]
    lanes = [clock + 1.0] * 8  # eight tasks at once
    rows, events, task_rows = [], [], []
    for i, n in enumerate(nodes):
        lane = min(range(len(lanes)), key=lanes.__getitem__)
        t = lanes[lane]
        failed_task = i % 10 == 0
        agent = AGENTS[i % len(AGENTS)]
        cost_total = tokens_total = 0
        for k in range(per_task[i]):
            last = k == per_task[i] - 1
            ok = last and not failed_task
            if k and k == per_task[i] - 1 and i % 7 == 0:  # a fallback before the last attempt
                events.append((run_id, t, "fallback", n["id"], json.dumps(
                    {"agent": agent, "to": AGENTS[(i + 1) % len(AGENTS)], "reason": "rejected twice"})))
                agent = AGENTS[(i + 1) % len(AGENTS)]
            latency = rng.uniform(2, 40)
            inp, out = rng.randrange(500, 5000), rng.randrange(50, 800)
            cost = (inp * 3 + out * 15) / 1e6
            errors = [] if ok else [f"$.field{j}: required field is missing " + "x" * error_chars for j in range(2)]
            output = {"title": f"result of {n['id']}", "body": "y" * output_chars} if ok else None
            checks = [{"id": "tests", "argv": ["pytest", "-q"], "returncode": 0, "timed_out": False,
                       "duration": 1.5, "passed": 12, "tail": "12 passed in 1.5s"}] if ok else []
            rows.append((run_id, n["id"], k + 1, min(k, 2), agent, "raw " * 50, json.dumps(output) if output else None,
                         json.dumps(errors), json.dumps(checks), inp, out, inp // 2, inp // 2, 0, 0, cost, latency,
                         "succeeded" if ok else "rejected", t, t + latency, "price"))
            t += latency + (rng.uniform(0.5, 5) if not last else 0)  # the wait before a retry
            cost_total += cost
            tokens_total += inp + out
        state = "failed" if failed_task else "succeeded"
        events.append((run_id, t, f"task_{state}", n["id"],
                       json.dumps({"error": "rejected 3 times: $.field0: required field is missing"}) if failed_task else None))
        if failed_task:
            events.append((run_id, t, "alert", None, json.dumps(
                {"alert": "failed", "level": "warning", "message": f"{n['id']} failed: rejected 3 times"})))
        task_rows.append((n["id"], state, per_task[i], per_task[i], agent, tokens_total, cost_total,
                          "rejected 3 times" if failed_task else None, n["fingerprint"], run_id,
                          lanes[lane], t, t))
        lanes[lane] = t + 0.2
    with store.tx():
        store.db.executemany(
            "INSERT INTO attempts (run_id, task_id, iteration, level, agent, raw_output, parsed_output, errors,"
            " checks, input_tokens, output_tokens, uncached_input_tokens, cache_read_tokens, cache_write_tokens,"
            " reasoning_tokens, cost_usd, latency, status, started_at, finished_at, cost_source)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        store.db.executemany("INSERT INTO events (run_id, ts, kind, task_id, data) VALUES (?,?,?,?,?)", events)
        store.db.executemany(
            "INSERT INTO tasks (id, state, attempts, iterations, agent, tokens, cost_usd, error, fingerprint,"
            " run_id, started_at, finished_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", task_rows)
    store.end_run("failed", 1, f"{tasks - tasks // 10} tasks succeeded, {tasks // 10} failed")
    with store.tx():  # the run ended when its last task did (the clock above ran ahead)
        store.db.execute("UPDATE runs SET ended_at=? WHERE id=?", (max(lanes), run_id))
    store.close()
    return run_id


def write_big_roadmap(root: Path, tasks: int, phases: int = 0, done: float = 0.0, failing: int = 37,
                      seed: int = 3) -> None:
    """A real project to compile and run: roadmap.md with `tasks` tasks in `phases` phases (0:
    none, as an import writes them), each depending on up to two earlier ones, a share `done`
    checked off, every `failing`-th with an accept command that fails; harness.yaml runs them
    on the simulate agent at once (latency 0, no price)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    lines, ids = ["# A big project", "", "## Tasks", ""], []
    per = -(-tasks // max(phases, 1))
    for i in range(tasks):
        if phases and i % per == 0:
            lines += [f"### Phase {i // per + 1}: Part {i // per + 1} of the work", ""]
        tid = f"task-{i + 1:04d}"
        deps = sorted({rng.choice(ids[-60:]) for _ in range(rng.randint(0, 2))}) if ids else []
        box = "x" if rng.random() < done else " "
        lines.append(f"- [{box}] **{tid}**: Part {i + 1} of the work")
        if deps:
            lines.append(f"  - depends_on: {', '.join(deps)}")
        if i % failing == 5 and box == " ":
            lines += ["  - accept: python3 -c \"import sys; print('checked: 2 of 3 files ok'); sys.exit(1)\"",
                      "  - max_retries: 0"]
        lines.append("")
        ids.append(tid)
    (root / "roadmap.md").write_text("\n".join(lines), encoding="utf-8")
    (root / "harness.yaml").write_text("agents:\n  rehearsal: {provider: simulate, latency: 0s}\nconcurrency: 8\n",
                                       encoding="utf-8")
