"""harnessc/outcome.py (a run's code and summary lines) and exitcodes.py (the codes, lint's verdict)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from harnessc import outcome as oc
from harnessc.outcome import Exit, run_outcome

STATES = ("succeeded", "degraded", "done", "failed", "skipped", "pending", "running")
ENDINGS = (oc.FINISHED, oc.STOP, oc.ABORT, oc.BUDGET, oc.FAIL_FAST)


@pytest.mark.parametrize("states, ending, status, code", [
    (["succeeded", "done"], oc.FINISHED, "succeeded", Exit.OK),
    (["succeeded", "degraded"], oc.FINISHED, "succeeded", Exit.OK),
    (["succeeded", "failed"], oc.FINISHED, "failed", Exit.PROBLEMS),
    (["succeeded", "skipped"], oc.FINISHED, "failed", Exit.PROBLEMS),
    (["succeeded", "pending"], oc.STOP, "stopped", Exit.STOPPED),
    (["succeeded", "pending"], oc.ABORT, "aborted", Exit.STOPPED),
    (["succeeded", "pending"], oc.BUDGET, "budget", Exit.STOPPED),
    (["failed", "pending"], oc.FAIL_FAST, "failed", Exit.PROBLEMS),
    (["failed", "pending"], oc.STOP, "stopped", Exit.STOPPED),
    # A stop that came when nothing was left changes nothing: the run reached its end.
    (["succeeded", "succeeded"], oc.STOP, "succeeded", Exit.OK),
    (["succeeded", "degraded"], oc.ABORT, "succeeded", Exit.OK),
    (["succeeded", "failed"], oc.STOP, "failed", Exit.PROBLEMS),
    (["succeeded"], oc.NOTHING, "succeeded", Exit.OK),
    (["succeeded", "failed"], oc.NOTHING, "failed", Exit.PROBLEMS),
    # state.db removed or replaced under the run: an error, even when every task had finished
    (["succeeded", "pending"], oc.STATE_LOST, "error", Exit.USAGE),
    (["succeeded", "succeeded"], oc.STATE_LOST, "error", Exit.USAGE),
])
def test_run_exit_codes(states, ending, status, code):
    out = run_outcome(states, ending)
    assert (out.status, out.exit_code) == (status, code)


@given(st.lists(st.sampled_from(STATES), max_size=12), st.sampled_from(ENDINGS))
def test_exit_code_contract(states, ending):
    """0 exactly when every task is complete; 3 only when some task was left unfinished."""
    code = run_outcome(states, ending).exit_code
    complete = all(s in oc.COMPLETE for s in states)
    assert (code == Exit.OK) == (complete and ending != oc.FAIL_FAST)
    if code == Exit.STOPPED:
        assert any(s not in oc.COMPLETE + oc.BROKEN for s in states)


def test_summary_counts_say_degraded_and_pluralise():
    assert run_outcome(["succeeded"] * 3 + ["degraded"]).message == "3 tasks succeeded, 1 degraded"
    assert run_outcome(["failed", "succeeded", "skipped"]).message == "1 task failed, 1 skipped, 1 succeeded"
    out = run_outcome(["succeeded", "pending"], oc.STOP)
    assert out.headline() == "stopped: 1 task succeeded, 1 left — in-flight work finished and was checkpointed"
    assert run_outcome(["done"], oc.NOTHING).headline() == "nothing to run: 1 task done"


def test_diagnostics():
    from harnessc.exitcodes import diagnostics_exit, diagnostics_summary

    assert diagnostics_exit(0, 2, strict=False) == Exit.OK
    assert diagnostics_exit(0, 2, strict=True) == Exit.PROBLEMS
    assert diagnostics_summary(1, 1, False) == "1 error, 1 warning"
    assert diagnostics_summary(0, 2, True) == "0 errors, 2 warnings (warnings fail with --strict)"
    assert diagnostics_summary(0, 0, True) is None


def test_next_steps_name_the_tasks_and_the_commands():
    tasks = [{"id": "a", "state": "failed"}, {"id": "b", "state": "skipped", "error": "dependency 'a' failed"},
             {"id": "c", "state": "succeeded"}]
    lines = oc.next_steps(run_outcome([t["state"] for t in tasks]), tasks)
    assert lines[0] == "  failed:  a"
    assert lines[1] == "  skipped: b (dependency 'a' failed)"
    assert any("harnessc log a" in x for x in lines) and any("harnessc retry" in x for x in lines)
    assert oc.next_steps(run_outcome(["succeeded"]), [{"id": "c", "state": "succeeded"}]) == []


def test_a_budget_stop_suggests_a_higher_budget_not_the_same_run():
    tasks = [{"id": "a", "state": "succeeded"}, {"id": "b", "state": "pending"}]
    stopped = run_outcome(["succeeded", "pending"], oc.BUDGET, "run budget reached")
    lines = oc.next_steps(stopped, tasks, oc.BudgetStop("cost", 0.25, 0.2))
    assert lines[0] == "next steps:" and lines[1].startswith("  harnessc run --max-cost 0.5  "), lines
    assert not any(x.split() == ["harnessc", "run"] or "go on where" in x for x in lines)
    # what the tasks left need wins over doubling; two significant figures, rounded up
    assert oc.BudgetStop("cost", 0.25, 1.234).higher() == 1.3
    assert oc.BudgetStop("cost", 0, 0).higher() == 0.01
    tokens = oc.next_steps(stopped, tasks, oc.BudgetStop("tokens", 5000, 7000))
    assert "budget.max_tokens" in tokens[1] and "10000" in tokens[1], tokens


def test_skipped_tasks_are_grouped_by_their_reason():
    tasks = [{"id": f"s{i}", "state": "skipped", "error": f"dependency 'f{i}' failed"} for i in range(7)]
    tasks.append({"id": "x", "state": "skipped", "error": None})
    lines = oc.next_steps(run_outcome([t["state"] for t in tasks]), tasks)
    assert lines[:oc.SKIP_REASONS_SHOWN] == [f"  skipped: s{i} (dependency 'f{i}' failed)" for i in range(5)]
    assert lines[oc.SKIP_REASONS_SHOWN] == "  skipped: 3 more, for other reasons (`harnessc status` lists them)"


def test_a_tasks_calls_are_counted_by_how_they_failed():
    from harnessc.outcome import CallTally

    t = CallTally()
    assert t.story() == ""
    t.failed_call("auth", "agent 'a': no API key")
    assert t.story() == "1 call failed without an answer (auth); last: agent 'a': no API key"
    t.answered(True, ["$.x: missing"])
    t.answered(True, ["$.y: missing"])
    assert t.story() == "3 calls: 2 failed verification, 1 failed without an answer (auth); last: $.y: missing"
    t.failed_call("timeout", "agent 'a': timed out")
    t.answered(False)
    assert t.describe() == ("5 calls: 2 failed verification, 2 failed without an answer (1 auth, 1 timeout), "
                            "1 answered without claiming completion")
    only = CallTally()
    only.answered(True, ["bad"])
    only.answered(True, ["worse"])
    assert only.story() == "2 calls failed verification; last: worse"
