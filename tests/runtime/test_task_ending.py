"""A task's Ending (store/attempts.py): what TaskRun returns and the scheduler writes with one
store.end_task - the task's final state and its attempt's last record in one commit, so a
process dying in that write leaves neither (real SQLite, reopened as after kill -9)."""

from __future__ import annotations

import pytest

from harnessc.runtime.store.attempts import AttemptEnd, Ending, TaskEnd
from harnessc.runtime.store.state import StateStore
from harnessc.states import TaskState
from harnessc.workspace import Workspace


class Crash(BaseException):
    """Stands for the process dying inside the write (as test_state_machine.py's)."""


@pytest.fixture
def store(tmp_path):
    s = StateStore(Workspace(tmp_path))
    s.run_id = "r1"
    s.db.execute("INSERT INTO runs (id, started_at, status) VALUES ('r1', 0, 'running')")
    s.ensure_tasks(["t"], set())
    yield s
    s.close()


def begin(store: StateStore) -> int:
    return store.begin_attempt("t", 1, 0, "bot", "the prompt", "h", 0.25, start_task=True)


def crash_at(store: StateStore, kind: str) -> None:
    def listener(event: dict) -> None:
        if event["kind"] == kind:
            raise Crash()

    store.listeners = [listener]


def reopened(store: StateStore, tmp_path) -> StateStore:
    store.close()
    return StateStore(Workspace(tmp_path))


def test_an_ending_and_its_attempt_commit_together_or_not_at_all(store, tmp_path):
    aid = begin(store)
    ending = Ending(TaskEnd(TaskState.SUCCEEDED, output={"summary": "ok"}, fingerprint="f1"), aid,
                    AttemptEnd("succeeded", raw='{"summary": "ok"}', parsed={"summary": "ok"}))
    crash_at(store, "task_succeeded")  # the last write of the commit: everything before it is in it
    with pytest.raises(Crash):
        store.end_task("t", ending)
    store = reopened(store, tmp_path)
    assert store.tasks(["t"])["t"]["state"] == TaskState.RUNNING  # neither the state ...
    assert store.attempt(aid)["status"] == "started"  # ... nor the attempt's end
    store.run_id = "r1"
    store.end_task("t", ending)
    store = reopened(store, tmp_path)
    row = store.tasks(["t"])["t"]
    assert (row["state"], row["output"], row["fingerprint"]) == (TaskState.SUCCEEDED, {"summary": "ok"}, "f1")
    attempt = store.attempt(aid)
    assert (attempt["status"], attempt["parsed_output"]) == ("succeeded", {"summary": "ok"})
    kinds = [r[0] for r in store.db.execute("SELECT kind FROM events ORDER BY id")]
    store.close()
    assert kinds.index("attempt_finished") < kinds.index("task_succeeded")


def test_a_cut_call_is_interrupted_and_pending_again_in_one_commit(store, tmp_path):
    """A call cut by a stop's grace: its attempt interrupted and the task pending, one commit
    (it was two: a death between them left a task running with no attempt in flight)."""
    aid = begin(store)
    ending = Ending(None, aid, AttemptEnd("interrupted", errors=["stopped: cut"]))
    assert ending.state == TaskState.INTERRUPTED
    crash_at(store, "task_pending")
    with pytest.raises(Crash):
        store.end_task("t", ending)
    store = reopened(store, tmp_path)
    assert store.attempt(aid)["status"] == "started"
    assert store.tasks(["t"])["t"]["state"] == TaskState.RUNNING
    store.run_id = "r1"
    store.end_task("t", ending)
    assert store.attempt(aid)["status"] == "interrupted"
    assert store.tasks(["t"])["t"]["state"] == TaskState.PENDING
    store.close()


def test_an_ending_without_an_attempt_keeps_the_running_time_it_is_given(store):
    begin(store)
    store.end_task("t", Ending(None, running_s=12.5))  # a halt: pending again, its time so far kept
    row = store.tasks(["t"])["t"]
    assert (row["state"], row["running_s"]) == (TaskState.PENDING, 12.5)
    store.end_task("t", Ending(TaskEnd(TaskState.FAILED, error="max_time (1s) reached")))
    row = store.tasks(["t"])["t"]
    assert (row["state"], row["error"], row["running_s"]) == (TaskState.FAILED, "max_time (1s) reached", 0)
