"""Event kinds and their fields are declared (harnessc/events.py): the store records a
declared event as before; under the suite (HARNESSC_STRICT_EVENTS=1, tests/conftest.py) it
refuses an undeclared kind or field before writing anything, and in a user's run it writes it
all the same (nothing a run says is lost to a missing declaration)."""

from __future__ import annotations

import json

import pytest

from harnessc.events import EVENTS, STRICT, UndeclaredEvent, task_state
from harnessc.runtime.store.state import StateStore
from harnessc.states import STORED, TaskState
from harnessc.workspace import Workspace


@pytest.fixture
def store(tmp_path):
    s = StateStore(Workspace(tmp_path))
    s.start_run("r1", {})
    s.ensure_tasks(["a"], set())
    yield s
    s.close()


def recorded(store: StateStore) -> tuple[list[str], list[dict]]:
    store.flush_mirror()
    rows = [r[0] for r in store.db.execute("SELECT kind FROM events ORDER BY id")]
    lines = store.workspace.events("r1").read_text().splitlines()
    return rows, [json.loads(line) for line in lines]


def test_a_declared_event_is_recorded_in_the_db_and_events_jsonl(store):
    store.event("stuck", "a", signal="no_progress", reason="3 iterations without progress")
    store.set_state("a", TaskState.SKIPPED, error="dependency 'b' failed")
    rows, lines = recorded(store)
    assert rows == ["run_started", "stuck", "task_skipped"]
    assert lines[1] == {"kind": "stuck", "run_id": "r1", "task": "a", "ts": lines[1]["ts"],
                        "signal": "no_progress", "reason": "3 iterations without progress"}
    assert lines[2]["kind"] == "task_skipped" and lines[2]["error"] == "dependency 'b' failed"


@pytest.mark.parametrize("kind, fields, said", [
    ("stuk", {"reason": "x"}, "event kind 'stuk' is not declared"),
    ("stuck", {"reason": "x", "signl": "y"}, "event 'stuck' has undeclared fields ['signl']"),
    ("task_maybe", {}, "event kind 'task_maybe' is not declared"),
])
def test_an_undeclared_kind_or_field_is_refused_and_nothing_is_written(store, kind, fields, said):
    with pytest.raises(UndeclaredEvent, match=said.replace("[", r"\[").replace("]", r"\]")):
        store.event(kind, "a", **fields)
    rows, lines = recorded(store)
    assert rows == ["run_started"] and [line["kind"] for line in lines] == ["run_started"]


def test_every_stored_state_has_its_task_event():
    for state in STORED:
        assert task_state(f"task_{state}") is state
    assert task_state("run_started") is None and task_state("task_nothing") is None
    assert all(e.about for e in EVENTS.values())


def test_a_users_run_writes_an_undeclared_event_all_the_same(store, monkeypatch):
    monkeypatch.delenv(STRICT, raising=False)
    store.event("stuk", "a", reason="x")
    rows, lines = recorded(store)
    assert rows == ["run_started", "stuk"] and lines[1]["reason"] == "x"
