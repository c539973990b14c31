"""One-line summaries of a run and the code its process exits with.

Like black's `Report`: the runtime says what happened (a run's task states and how it ended)
and this module says what the user is told and which code the process exits with. The codes
themselves, and the verdict on a lint's or a build's diagnostics, are exitcodes.py's (lint
imports that small module only).

Degraded is 0 on purpose: on_failure fallback/partial/template is the spec author's choice
to accept a fallback output, so the run did what the spec asked. The summary says how many
tasks degraded, and dependents' prompts mark that output as unverified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

from .exitcodes import Exit
from .states import BROKEN, COMPLETE, ENDED, TaskState  # noqa: F401 (COMPLETE: callers import it here)
from .wording import plural  # the one pluralising helper (also used as outcome.plural)

# ------------------------------------------------------------------ one task's calls


@dataclass
class CallTally:
    """The calls one task made in this run, by how each ended: the words of its final error.

    A call either failed as a call (an agent error: no answer to verify, counted by its kind)
    or answered; an answer either claimed completion and failed verification, or made no
    claim (loop work).
    """

    rejected: int = 0  # answers that failed verification
    no_claim: int = 0  # answers without a claim
    errors: dict[str, int] = field(default_factory=dict)  # calls that failed, by error kind
    last: str = ""  # the last failure, in words (an error message, or verification errors)

    def failed_call(self, kind: str, message: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1
        self.last = message

    def answered(self, claim: bool, errors: list[str] = ()) -> None:
        if not claim:
            self.no_claim += 1
        elif errors:
            self.rejected += 1
            self.last = "; ".join(errors)

    @property
    def calls(self) -> int:
        return self.rejected + self.no_claim + sum(self.errors.values())

    def describe(self) -> str:
        """'1 call failed without an answer (auth)', '2 calls failed verification', '3 calls:
        2 failed verification, 1 failed without an answer (timeout)'; '' before the first call."""
        parts = []
        if self.rejected:
            parts.append((self.rejected, "failed verification"))
        failed = sum(self.errors.values())
        if failed:
            kinds = ", ".join(k if len(self.errors) == 1 else f"{n} {k}" for k, n in self.errors.items())
            parts.append((failed, f"failed without an answer ({kinds})"))
        if self.no_claim:
            parts.append((self.no_claim, "answered without claiming completion"))
        if not parts:
            return ""
        if len(parts) == 1:
            return f"{plural(self.calls, 'call')} {parts[0][1]}"
        return f"{plural(self.calls, 'call')}: " + ", ".join(f"{n} {words}" for n, words in parts)

    def story(self, limit: int = 2000) -> str:
        """describe() with the last failure: '2 calls failed verification; last: $.x: ...'."""
        text = self.describe()
        if text and self.last:
            text += "; last: " + self.last[:limit]
        return text


# ------------------------------------------------------------------ runs

REVIEW = TaskState.REVIEW  # verified, waiting for `harnessc approve` (not complete: its dependents wait)
UNFINISHED = "left"  # how the summary names tasks that are neither complete nor broken

# How a run ended, as the runner saw it (the task states tell the rest).
FINISHED = "finished"  # every startable task was started and ended
STOP = "stop"  # `harnessc stop` or Ctrl-C once: in-flight work finished
ABORT = "abort"  # `harnessc stop --abort`, Ctrl-C twice, SIGTERM: in-flight work cancelled
BUDGET = "budget"  # a run-wide cost or token budget refused the next call
FAIL_FAST = "fail_fast"  # --fail-fast after the first failure
STATE_LOST = "state_lost"  # state.db was removed or replaced under the run: nothing more is saved
NOTHING = "nothing"  # nothing to run: no run was started

_ENDING_WORDS = {
    STOP: ("stopped", "in-flight work finished and was checkpointed"),
    ABORT: ("aborted", "in-flight work was cancelled and checkpointed"),
}


@dataclass(frozen=True)
class RunOutcome:
    status: str  # succeeded | failed | stopped | aborted | budget | error (runs.status, run_results.json)
    exit_code: Exit
    message: str  # the counts, then why it ended early: "2 tasks succeeded, 3 left — ..."
    nothing_to_run: bool = False

    def headline(self) -> str:
        """The summary line without figures: 'failed: 1 task failed, 2 succeeded'."""
        return f"{'nothing to run' if self.nothing_to_run else self.status}: {self.message}"


def count_states(states: Iterable[str]) -> dict[str, int]:
    counts = dict.fromkeys(ENDED, 0)
    counts[UNFINISHED] = 0
    for s in states:
        counts[s if s in counts else UNFINISHED] += 1
    return counts


def describe_counts(counts: dict[str, int]) -> str:
    """'3 tasks succeeded, 1 degraded, 2 left' (failures first when there are any)."""
    order = list(ENDED) + [UNFINISHED]
    if any(counts.get(k) for k in BROKEN):
        order = list(BROKEN) + [k for k in order if k not in BROKEN]
    parts = [(counts[k], k) for k in order if counts.get(k)]
    if not parts:
        return "no tasks selected"
    parts = [(n, "in review" if k == REVIEW else k) for n, k in parts]
    (n, first), rest = parts[0], parts[1:]
    return ", ".join([f"{plural(n, 'task')} {first}"] + [f"{n} {k}" for n, k in rest])


def run_outcome(states: Iterable[str], ending: str = FINISHED, why: str | None = None) -> RunOutcome:
    """Status, exit code and message of a run whose selected tasks ended in `states`.

    A stop, abort or budget that came when no task was left unfinished changes nothing:
    the run reached its end (so a run stopped after its last task finished exits 0).
    """
    counts = count_states(states)
    text = describe_counts(counts)
    broken = sum(counts[k] for k in BROKEN)
    left = counts[UNFINISHED]

    def outcome(status: str, code: Exit, reason: str | None = None) -> RunOutcome:
        return RunOutcome(status, code, text + (f" — {reason}" if reason else ""),
                          nothing_to_run=ending == NOTHING)

    if ending == STATE_LOST:  # not a stop to resume from: the run's own record is gone
        return outcome("error", Exit.USAGE, why)
    if ending == FAIL_FAST:
        return outcome("failed", Exit.PROBLEMS, why)
    if left and ending == BUDGET:
        return outcome("budget", Exit.STOPPED, why)
    if left and ending in _ENDING_WORDS:
        status, reason = _ENDING_WORDS[ending]
        return outcome(status, Exit.STOPPED, why or reason)
    if broken:
        return outcome("failed", Exit.PROBLEMS, _waiting(counts) if ending == NOTHING else None)
    if counts[REVIEW]:  # a person's turn: not a failure, not the end either
        n = counts[REVIEW]
        return outcome("review", Exit.STOPPED, f"{plural(n, 'task')} {'waits' if n == 1 else 'wait'} for review "
                       "(`harnessc review`, then `harnessc approve TASK` or `harnessc reject TASK \"why\"`)")
    if left and ending != NOTHING:
        return outcome("stopped", Exit.STOPPED, why or "the run ended before every task finished")
    return outcome("succeeded", Exit.OK)


def _waiting(counts: dict[str, int]) -> str:
    """Why a run with failed or skipped tasks had nothing to run."""
    waiting = [k for k in (TaskState.FAILED, TaskState.BLOCKED) if counts[k]]
    if waiting:
        return f"{' and '.join(waiting)} tasks wait for `harnessc retry` (or --rerun failed)"
    return "skipped tasks wait for their dependencies (select them too: -s +TASK)"


def money(usd: float | None) -> str:
    return f"${usd or 0:.4f}"


def run_summary_line(outcome: RunOutcome, run_cost: float, total_cost: float, elapsed: float) -> str:
    """The run's last line: what happened, this run's cost with the project's total, time."""
    return (f"{outcome.headline()} ({money(run_cost)} this run, {money(total_cost)} in total,"
            f" {elapsed:.1f}s)")


@dataclass(frozen=True)
class BudgetStop:
    """The run budget that stopped a run: its limit, and what spent so far plus the
    estimates of the tasks left come to (the work a run to the end needs)."""
    kind: str  # "cost" (budget.max_cost_usd or --max-cost, USD) or "tokens" (budget.max_tokens)
    limit: float
    needed: float

    def higher(self) -> float:
        """A limit that lets the run go on: twice this one, or what the tasks left need if
        that is more, rounded up to two significant figures ($0.25 -> $0.5)."""
        want = max(2 * self.limit, self.needed, 1e-2 if self.kind == "cost" else 1000)
        step = 10 ** (math.floor(math.log10(want)) - 1)
        return round(math.ceil(want / step - 1e-9) * step, 10)

    def step(self) -> tuple[str, str]:
        """The next step: the same `harnessc run` would stop again at once."""
        if self.kind == "cost":
            return (f"harnessc run --max-cost {self.higher():g}",
                    f"go on with a higher budget (the ${self.limit:g} one is used up: `harnessc run` alone stops again at once)")
        return ("harnessc run", f"after raising budget.max_tokens in harness.yaml (its {int(self.limit)} are"
                                f" used up; the tasks left need about {int(self.higher())})")


NAMES_SHOWN = 10  # tasks named per line of next steps; the rest are counted


def _names(tasks: list[dict]) -> str:
    names = [t["id"] for t in tasks[:NAMES_SHOWN]]
    more = len(tasks) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


SKIP_REASONS_SHOWN = 5  # lines of skipped tasks, one per reason; the rest are counted


def _skipped_lines(skipped: list[dict], prog: str = "harnessc") -> list[str]:
    """The skipped tasks grouped by why each was skipped (an operator's skip is not a failed
    dependency): `  skipped: b, c (dependency 'a' failed)`."""
    by_reason: dict[str, list[dict]] = {}
    for t in skipped:
        why = (t.get("error") or "no reason recorded").removeprefix("skipped ")
        by_reason.setdefault(why, []).append(t)
    reasons = list(by_reason.items())
    lines = [f"  skipped: {_names(ts)} ({why})" for why, ts in reasons[:SKIP_REASONS_SHOWN]]
    rest = sum(len(ts) for _, ts in reasons[SKIP_REASONS_SHOWN:])
    if rest:
        lines.append(f"  skipped: {rest} more, for other reasons (`{prog} status` lists them)")
    return lines


def next_steps(outcome: RunOutcome, tasks: list[dict], budget_stop: BudgetStop | None = None,
               prog: str = "harnessc") -> list[str]:
    """What to do after a run that did not succeed: the tasks by name, then the commands
    (as dbt and ruff end a failed run). After a budget stop, a higher budget. `prog`: how
    the commands start where the run was started (`harnessc -C DIR`)."""
    failed = [t for t in tasks if t["state"] == TaskState.FAILED]
    blocked = [t for t in tasks if t["state"] == TaskState.BLOCKED]
    skipped = [t for t in tasks if t["state"] == TaskState.SKIPPED]
    review = [t for t in tasks if t["state"] == REVIEW]
    lines = []
    if review:
        lines.append(f"  review:  {_names(review)} (verified; a person approves before it lands)")
    if failed:
        lines.append(f"  failed:  {_names(failed)}")
    if blocked:
        lines.append(f"  blocked: {_names(blocked)} (stuck after every recovery step: a human decides)")
    lines += _skipped_lines(skipped, prog)
    steps = []
    if failed:
        first = failed[0]["id"]
        steps.append((f"harnessc log {first}", f"every attempt of {first}: prompt, output, errors"))
    if blocked:
        first = blocked[0]["id"]
        steps.append((f"harnessc tell {first} \"...\"", f"tell {first}'s agent what to do differently"))
    if failed or blocked or skipped:
        steps.append(("harnessc retry", "re-run the failed, blocked and skipped tasks" if blocked
                      else "re-run the failed and skipped tasks"))
    if review:
        steps.append(("harnessc review", "what waits for review, with the command to see each diff"))
        steps.append((f"harnessc approve {review[0]['id']}", "land it; its dependents run in the next run"))
    if outcome.status == "budget" and budget_stop is not None:
        steps.append(budget_stop.step())
    elif outcome.exit_code == Exit.STOPPED:
        steps.append(("harnessc run", "go on where this run stopped"))
    if steps:
        lines.append("next steps:")
        steps = [(prog + cmd.removeprefix("harnessc"), what) for cmd, what in steps]
        width = max(len(cmd) for cmd, _ in steps)
        lines += [f"  {cmd:{width}}  {what}" for cmd, what in steps]
    return lines
