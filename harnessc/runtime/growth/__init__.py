"""Tasks added to a running plan (issue 30 item 4): `plan.grow: auto` and `split: true`.

plan.grow: auto - when a task lands, the tasks its agent proposed (proposals.py) that lint
are appended to roadmap.md and the plan is rebuilt (.harness/build/plan.json); the new tasks
join this run's Schedule (Schedule.grow) and run in it. roadmap.md is where the grown plan
lives: a run killed after growing resumes with the new tasks (the next `harnessc run` builds
them from roadmap.md and runs those not complete), and `ls`, `status`, `show` and the report
see them as any other task.

split: true - a task's first call asks for its subtasks instead of the work (SplitRun); they
are added as in auto mode whatever plan.grow says (the author asked for the split), within
plan.max_new_tasks and plan.max_depth, and the task waits for them (Schedule.split). Once they
are complete it succeeds without a call; a subtask that fails, is blocked or skipped fails it.
Which subtasks a task has is its added proposals in .harness/proposals/<task>.json: a
resumed run reads them (`split.adopt`; `run --dry-run` too). proposals.grow writes that
record (status adding) before roadmap.md, so a run killed at any point is settled by the next
(`proposals.settle`) and a split task is asked once.

A grown task needs what its spec says; the isolation, `git: commit` commits and a loop's
tracking are set up at a run's start for the tasks it starts with, so a grown task needing
one the run lacks waits in roadmap.md for the next run (HC716, `PlanGrowth._later`).
"""

from .plan import PlanGrowth

__all__ = ["PlanGrowth"]
