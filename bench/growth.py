#!/usr/bin/env python3
"""Growth benchmark: proposed tasks linted and merged into a plan (issue 30 item 4).

A roadmap of --base tasks; one succeeded task proposes --tasks follow-ups as `<task>` markers
(each depending on the task before it, or on a roadmap task), which harnessc files and lints
(proposals.collect: each linted against roadmap.md plus the proposals before it); then each
is accepted (proposals.accept: linted again against roadmap.md as it is, appended), and the
grown roadmap is built once (compile_project + write_build, as `accept-proposal` does after
its last). In-process, real files; the attempt's text comes from a stand-in for state.db.

Then plan.grow: auto on a fresh copy: each proposing task's proposals linted and appended to
roadmap.md as it lands (proposals.grow), the plan rebuilt (runtime/plan.py build, as the run
does after each landing that added tasks) and the new tasks joined to a running Schedule
(Schedule.grow).

Prints the time per proposal of each step; nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import harnessc_env  # bench/: this script's directory

harnessc_env.require()
sys.path.insert(0, str(harnessc_env.REPO))

from harnessc import proposals  # noqa: E402
from harnessc.compiler import compile_project, write_build  # noqa: E402
from harnessc.runtime import plan as planmod  # noqa: E402
from harnessc.runtime.schedule import Graph, Schedule  # noqa: E402
from harnessc.vocab import priority_rank  # noqa: E402


class Attempts:
    """What proposals.collect reads of state.db: the proposing task's last answer."""

    def __init__(self, texts: dict[str, str]):
        self.texts = texts

    def tasks(self, ids):
        return {t: {"output": None} for t in ids}

    def final_attempt(self, tid):
        return {"raw_output": self.texts.get(tid, "")}

    def event(self, *args, **kw):
        pass


def roadmap(base: int) -> str:
    lines = ["# Growth bench", "", "## Tasks", ""]
    for i in range(base):
        lines += [f"- [ ] **base-{i}**: Base task {i}", "  - completion_promise: DONE"]
        if i:
            lines.append(f"  - depends_on: base-{i - 1}")
        lines += ["", f"  Goal: do base task {i}.", ""]
    return "\n".join(lines + ["## Notes", "", "kept", ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100, help="proposals (default 100)")
    ap.add_argument("--base", type=int, default=50, help="tasks in the roadmap before it grows (default 50)")
    args = ap.parse_args()
    args.base = max(args.base, 1)
    n = max(1, args.tasks)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "roadmap.md").write_text(roadmap(args.base))
        # a task proposes at most proposals.MAX_PER_TASK: the proposals come from several tasks
        texts: dict[str, str] = {}
        for i in range(n):
            by = f"base-{min(i // proposals.MAX_PER_TASK, args.base - 1)}"
            texts[by] = texts.get(by, "") + (f'<task id="grow-{i}" depends_on="{f"grow-{i - 1}" if i else "base-0"}">'
                                             f"Follow-up {i}: print <promise>DONE</promise> when done.</task>\n")
        growth = {"grow": "review", "max_new_tasks": n, "max_depth": 2}
        t0 = time.perf_counter()
        proposals.collect(root, growth, Attempts(texts), list(texts), "bench")
        filed = time.perf_counter() - t0
        waiting = [p for p in proposals.Store(root).all() if p.status == proposals.WAITING]
        t0 = time.perf_counter()
        for p in waiting:
            proposals.accept(root, p.id)
        accepted = time.perf_counter() - t0
        t0 = time.perf_counter()
        project = compile_project(root, write_prompts=True)
        assert project.plan is not None, [str(d) for d in project.diags.errors]
        write_build(project)
        built = time.perf_counter() - t0
    print(f"growth: {n} proposals on a roadmap of {args.base} tasks ({len(waiting)} filed and accepted)")
    print(f"  filed + linted:   {filed:8.3f} s  ({1000 * filed / n:7.2f} ms per proposal)")
    print(f"  accepted (lint + append to roadmap.md): {accepted:8.3f} s  ({1000 * accepted / n:7.2f} ms per proposal)")
    print(f"  rebuild of the grown plan ({args.base + len(waiting)} tasks): {built:8.3f} s")
    total = filed + accepted + built
    print(f"  total: {total:.3f} s, {1000 * total / n:.2f} ms per proposal")
    auto(args.base, n, texts)


def auto(base: int, n: int, texts: dict[str, str]) -> None:
    """plan.grow: auto: what a run does as each proposing task lands."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "roadmap.md").write_text(roadmap(base))
        plan, _ = planmod.build(root)
        assert plan is not None
        sched = Schedule(Graph.of(plan.nodes, priority_rank), {t.id: "succeeded" for t in plan.nodes}, [], {}, jobs=4)
        cfg = proposals.settings({"grow": "auto", "max_new_tasks": n, "max_depth": 2})
        filing = proposals.Filing(root, cfg, Attempts(texts), "bench")
        linted = rebuilt = joined = 0.0
        added = 0
        for by in texts:
            t0 = time.perf_counter()
            new = proposals.grow(filing, by)
            t1 = time.perf_counter()
            plan, _ = planmod.build(root)
            assert plan is not None
            t2 = time.perf_counter()
            ids = {p.id for p in new}
            sched.grow(Graph.of([x for x in plan.nodes if x.id in ids], priority_rank))
            t3 = time.perf_counter()
            linted, rebuilt, joined, added = linted + t1 - t0, rebuilt + t2 - t1, joined + t3 - t2, added + len(new)
    total = linted + rebuilt + joined
    print(f"plan.grow: auto: {added} of {n} proposals added to the running plan, from {len(texts)} landings")
    print(f"  linted + appended to roadmap.md: {linted:8.3f} s  ({1000 * linted / n:7.2f} ms per proposal)")
    print(f"  plan rebuilt after each landing: {rebuilt:8.3f} s  ({1000 * rebuilt / len(texts):7.2f} ms per landing)")
    print(f"  joined to the schedule:          {joined:8.3f} s  ({1000 * joined / n:7.2f} ms per proposal)")
    print(f"  total: {total:.3f} s, {1000 * total / n:.2f} ms per proposal")


if __name__ == "__main__":
    main()
