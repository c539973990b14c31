"""Every kind of event a run records, with the fields it carries.

An event is `{"ts", "run_id", "kind", "task", **fields}`: a row of state.db's events table,
a line of the run's events.jsonl and what the listeners (display, alerts, notifications,
telemetry) are handed. StateStore.event refuses a kind not declared here, or a field its
kind does not declare (UndeclaredEvent: a bug, never a user's mistake); tests/test_layout.py
checks every call that names its kind. A field is one a kind may carry, not one it must.
"""

from __future__ import annotations

from dataclasses import dataclass

from .states import STORED, TaskState

# Set to 1 (the test suite does): an undeclared event is an error. Unset (a user's run), it
# is written all the same - a missing declaration must not end a run or lose what it says.
STRICT = "HARNESSC_STRICT_EVENTS"


class UndeclaredEvent(ValueError):
    """An event kind, or a field of it, that this module does not declare."""


@dataclass(frozen=True, slots=True)
class EventKind:
    name: str
    fields: frozenset[str]
    about: str
    state: TaskState | None = None  # task_<state>: the state the task's row was set to


def _kinds(*declared: tuple[str, str, str]) -> dict[str, EventKind]:
    return {name: EventKind(name, frozenset(fields.split()), about) for name, fields, about in declared}


EVENTS: dict[str, EventKind] = _kinds(
    # the run
    ("run_started", "options", "a run began with these options"),
    ("run_planned", "tasks stale", "the tasks this run starts, and those left stale"),
    ("run_finished", "status exit_code message", "the run ended: its status, exit code and summary"),
    ("recovered", "tasks attempts", "what a killed run left running was set back (at start)"),
    ("leftovers_ended", "pids", "processes a killed run left behind were ended"),
    ("summary", "tasks done running failed blocked iterations cost_usd elapsed", "the periodic progress summary"),
    ("agents_passed_over", "agents message", "agents the preflight found unusable"),
    ("output_not_written", "reason", "results could not be written to (or looked for in) .harness/outputs"),
    ("telemetry_failed", "reason", "traces stopped or never started (the run goes on)"),
    ("memory_damaged", "message", "the memory file was unreadable: set aside, memory starts empty (the run goes on)"),
    ("memory_summary", "agent phases message", "the running summary of run memory was rewritten (by memory.agent, or from the entries)"),
    ("memory_unwritten", "message", "what a task told could not be written to run memory (the run goes on)"),
    # steering: the operator's commands
    ("stop_requested", "mode via", "`harnessc stop`, a signal or a limit asked the run to stop"),
    ("paused", "via reason", "nothing new starts until resumed"),
    ("resumed", "via", "the pause ended"),
    ("inbox_command", "command", "a command from the inbox was carried out"),
    ("inbox_error", "file reason", "an inbox file could not be read or carried out"),
    ("steering_error", "reason", "a steering command was refused"),
    ("instruction_received", "file text urgent", "`harnessc tell`: an instruction for a task"),
    ("instruction_delivered", "file", "the instruction went into the task's next prompt"),
    ("budget_changed", "max_cost_usd was via", "the run's cost budget was changed while it ran"),
    ("agent_forced", "agent via", "every next call goes to this agent"),
    # a task's attempts
    ("routed", "agents", "the agents a task's calls may go to, in order"),
    ("attempt_started", "attempt iteration agent level reserved_usd steps",
     "a call to an agent began (steps: how long its prompt and route took, for the trace)"),
    ("attempt_finished", "attempt status tokens cost_usd cost_source latency errors progress progressed answered_at",
     "a call ended and its answer was checked (answered_at: when the answer came)"),
    ("attempt_lost", "message", "a worker or node died with the attempt: its iteration runs again"),
    ("assist", "purpose agent status reason latency cost_usd tokens error_kind input_tokens output_tokens "
               "cache_read_tokens cache_write_tokens reasoning_tokens",
     "a helper call for a loop task (a summary, a plan), with its usage split"),
    ("fallback", "agent to reason", "the task's calls moved to the next agent of its chain"),
    ("escalated", "agent to reason", "on_failure escalate: a stronger agent takes the task"),
    ("stuck", "signal reason", "a loop task made no progress"),
    ("recovery", "step mutation reason", "a stuck loop task's recovery took its next step"),
    ("recovery_resumed", "step rung rungs agent escalated_to rewritten_prompt",
     "a resumed task continues its recovery"),
    ("protected", "errors message", "the agent changed files it must not: the attempt is refused"),
    ("model_deprecated", "agent model end_of_life reason", "the task's model is deprecated"),
    ("min_passed_base", "base check passed message", "the count of passed tests on the task's base (for min_passed)"),
    ("conflict", "approach tip paths why message", "a verified change does not merge with the integration branch"),
    # limits and budgets
    ("budget_exhausted", "message", "the task could not be charged: the budget is spent"),
    ("budget_step_down", "message",
     "the budget left is short of the estimate: tasks that are not critical step down a tier"),
    ("daily_limit_reached", "agent message", "an agent's daily limit was reached"),
    ("limit_near", "limit used max reason", "a task nears one of its limits"),
    ("limit_unchecked", "agent limit reason",
     "a task limit cannot be checked on this agent (it does not report what it counts)"),
    ("breaker_opened", "agent until reason", "an agent failed too often: no calls until then"),
    ("breaker_closed", "agent", "an agent takes calls again"),
    # review
    ("review_approved", "message", "a task was approved in review (and its change landed)"),
    ("review_rejected", "why message", "a rejected task runs again with the reviewer's words"),
    ("review_approved_asked", "why", "`harnessc approve` was typed"),
    ("review_rejected_asked", "why", "`harnessc reject` was typed"),
    # a plan that grows under review (proposals.py)
    ("proposal_filed", "proposed status diagnostics", "the task's agent proposed a task: filed waiting or rejected"),
    ("proposal_ignored", "reason", "a proposed task that could not be read (a bad id, no goal, too many)"),
    ("plan_grown", "tasks split message", "tasks were added to roadmap.md and this run (plan.grow: auto, split: true)"),
    ("plan_grown_later", "tasks message", "tasks added to roadmap.md wait for the next run: they need a setting "
     "this run did not start with (HC716)"),
    ("split_done", "subtasks message", "a split task is done: its subtasks are"),
    # approaches and exploration
    ("approaches_started", "n select agents", "the task's approaches began"),
    ("approaches_off", "message", "the task runs once: its approaches need isolation: worktree"),
    ("approach_ended", "approach agent outcome score cost_usd why", "one approach ended"),
    ("approach_cancelled", "approach", "an approach was cancelled: another was verified first"),
    ("approach_selected", "approach agent score sha message", "the approach whose change lands"),
    ("explored", "chosen progress message", "an exploration chose its branch (each branch's progress)"),
    ("exploration_rejected", "message", "an exploration branch tampered with its checkout: it counts for nothing"),
    # git and isolation
    ("git_unavailable", "message", "git: commit cannot work here (no gitpython, no repository): nothing is committed"),
    ("git_dirty_at_start", "paths message", "the work tree had uncommitted changes at start"),
    ("git_committed", "sha paths shared_by", "the task's verified work was committed"),
    ("git_commit_failed", "message shared_by", "the commit failed"),
    ("git_nothing_to_commit", "", "the task changed nothing to commit"),
    ("git_secret_withheld", "paths message", "files that look like secrets were left out of a commit"),
    ("git_locks", "removed left message", "stale git lock files were removed"),
    ("git_stale_lock_removed", "path message", "the run's private index had a killed git's lock: removed"),
    ("git_tampered", "files details attempts not_restored message", "the agent touched what it must not in git"),
    ("git_branches_removed", "refs", "harnessc branches were removed from the git directory"),
    ("git_other_run", "files", "another harnessc run changed the git directory (logged, no alert)"),
    ("git_changed", "files details message", "the git directory changed while no agent ran: taken as its state"),
    ("integration_branch", "branch start user_branch resumed", "where isolated tasks land"),
    ("worktrees_reconciled", "worktrees refs kept",
     "the worktrees and refs a killed run left were matched to its tasks"),
    ("landed", "sha branch paths merged", "an isolated task's change landed"),
    ("landing_recovered", "sha message", "a landing a killed run began was completed"),
    ("isolation_result", "message", "a line of the isolated run's closing account (where its work is)"),
    ("worktree_not_brought", "message", "a file the task's worktree should have been given could not be"),
    ("worktrees_reused", "made reused discarded why",
     "the run's checkouts: how many were made, reused, and discarded (and why)"),
    ("worktree_kept", "path ref", "a failed task's worktree was kept (--keep-worktrees)"),
    ("worktree_remove_failed", "message", "a worktree could not be removed"),
    ("user_branch_followed", "branch sha", "the user's branch follows the integration branch to this commit"),
    ("user_branch_left", "message",
     "the user's branch is left as it is: results go on landing on the integration branch"),
    # alerts
    ("alert", "level alert message", "an alert (alerts.log)"),
)
# task_<state>: a task's row was set to <state> (an ending carries its error, a degraded one what was filled)
EVENTS.update({f"task_{s}": EventKind(f"task_{s}", frozenset({"error", "filled"}), f"the task is {s}", s)
               for s in STORED})


def declared(kind: str, fields) -> bool:
    """Whether `kind` is declared and carries only its fields (check() says what is not)."""
    known = EVENTS.get(kind)
    return known is not None and known.fields.issuperset(fields)


def check(kind: str, fields) -> None:
    """Raise UndeclaredEvent unless `kind` is declared and carries only its fields."""
    declared = EVENTS.get(kind)
    if declared is None:
        raise UndeclaredEvent(f"event kind {kind!r} is not declared in harnessc/events.py")
    if not declared.fields.issuperset(fields):  # (in C: every event of a run passes here)
        extra = sorted(f for f in fields if f not in declared.fields)
        raise UndeclaredEvent(f"event {kind!r} has undeclared fields {extra} (harnessc/events.py)")


def task_state(kind: str) -> TaskState | None:
    """The state a task_<state> event records; None for any other kind."""
    declared = EVENTS.get(kind)
    return declared.state if declared else None
