"""The memory file's store (runtime/memory/store.py) keeps what it holds up to date as it
appends, without reading the file again: its counts (a prompt's section is skipped when
memory holds only ended tasks' lines), the summary's due check from the newest lines, and its
appends and summary writes through the memory directory it holds open. Each is checked
against a fresh read of the real file."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harnessc.runtime.memory import recall
from harnessc.runtime.memory.run import RunMemory
from harnessc.runtime.memory.store import MemoryStore, Settings, pending, stamp
from harnessc.runtime.memory.summary import Refresher, newer

KINDS = st.sampled_from(["decision", "failure", "constraint", "done", "done", "done"])
# (op, kind, task, text): add one entry, forget one, another process appends, compact
OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "forget", "other", "compact"]), KINDS,
                         st.sampled_from("abc"), st.sampled_from(["x", "y", "z", "w"])), max_size=40)


def fresh(root: Path, keep: int | None) -> list[dict]:
    return MemoryStore(root, keep_done=keep).entries()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPS, st.sampled_from([None, 1, 3]), st.integers(0, 4))
@example([("add", "done", "a", "x"), ("add", "done", "a", "w"), ("forget", "done", "a", "w")], 1, 0)  # x was trimmed
def test_what_the_store_holds_and_counts_follows_its_appends_as_a_fresh_read_does(tmp_path, ops, keep, every):
    root = tmp_path / "p"
    shutil.rmtree(root, ignore_errors=True)
    (root / ".harness").mkdir(parents=True)
    store = MemoryStore(root, keep_done=keep)
    other = MemoryStore(root)  # a `harnessc memory forget` beside the run
    for op, kind, task, text in ops:
        entry = stamp({"kind": kind, "task": task, "text": text}, "r1")
        if op == "add":
            store.add([entry])
        elif op == "forget":
            store.forget(entry["id"])
        elif op == "other":
            other.add([entry])
        else:
            store.compact()
        held, read = store.entries(), fresh(root, keep)
        assert held == read
        assert store.told() == any(e["kind"] != "done" for e in read)
        newest = list(store.newest())
        assert newest == read[::-1]
        for upto in [None, "nope", *(e["id"] for e in read)]:
            assert newer(iter(newest), upto, every) == (len(pending(read, upto)) >= every)
    store.close()


def node(tid: str, title: str = "Orders") -> SimpleNamespace:
    return SimpleNamespace(id=tid, title=title, goal="Store the orders", success="", context=[], write_scope=None,
                           accept=[], phase=None)


class State:
    run_id = "r1"

    def __init__(self):
        self.events: list[tuple] = []

    def event(self, kind, task=None, **data):
        self.events.append((kind, task, data))


def test_a_section_is_skipped_only_when_memory_holds_nothing_to_tell_a_task(tmp_path):
    """The shortcut (only done lines, harnessc's own summary) says what recall.section says, and a
    decision, a forgotten one, and an agent's summary each change it as they did."""
    root = tmp_path / "p"
    (root / ".harness").mkdir(parents=True)
    memory = RunMemory(root, Settings(every=2), State())

    def full(n) -> str:
        return recall.section(memory.file.entries(), n, memory.settings, "r1", memory.refresher.file.read())

    a, b = node("a"), node("b")
    memory.ended(a, "succeeded", "done it")
    assert memory.section(b) == full(b) == ""
    memory.ended(a, "succeeded", "<decision>Orders keep their ids</decision>")
    assert "Orders keep their ids" in memory.section(b) and memory.section(b) == full(b)
    decision = next(e for e in memory.file.entries() if e["kind"] == "decision")
    MemoryStore(root).forget(decision["id"])  # another process: the next section knows
    assert memory.section(b) == full(b) == ""
    memory.refresher.file.write({"text": "An agent's summary", "by": "cheap", "upto": None, "phases": []})
    assert "An agent's summary" in memory.section(b) and memory.section(b) == full(b)


def test_appends_and_summary_writes_go_on_when_the_memory_directory_is_removed_during_a_run(tmp_path):
    root = tmp_path / "p"
    (root / ".harness").mkdir(parents=True)
    state = State()
    memory = RunMemory(root, Settings(every=1), state)
    ctx = SimpleNamespace(plan=SimpleNamespace(nodes=[]), store=None)
    memory.ended(node("a"), "succeeded", "<decision>first</decision>")
    memory.task_ended(ctx, node("a"))
    shutil.rmtree(root / ".harness" / "memory")  # held open by the run: made again, not written into the void
    memory.ended(node("b"), "succeeded", "<decision>second</decision>")
    memory.task_ended(ctx, node("b"))
    lines = [json.loads(line) for line in (root / ".harness/memory/memory.jsonl").read_text().splitlines()]
    assert [e["text"] for e in lines if e["kind"] == "decision"] == ["second"]
    assert json.loads((root / ".harness/memory/summary.json").read_text())["upto"] == lines[-1]["id"]
    assert not [e for e in state.events if e[0] == "memory_unwritten"]


def test_a_phase_ends_when_its_last_task_is_final_even_after_one_went_back(tmp_path):
    """phases_ended looks at the first task not yet seen final; a task seen final that is
    pending again (a reset) keeps the phase open, as a look at the whole phase says."""
    states = {"a": "running", "b": "running", "c": "running"}

    class Store:
        def tasks(self, ids):
            return {t: {"state": states[t]} for t in ids}

    nodes = [SimpleNamespace(id=t, phase="P") for t in "abc"]
    ctx = SimpleNamespace(plan=SimpleNamespace(nodes=nodes), store=Store())
    root = tmp_path / "p"
    (root / ".harness").mkdir(parents=True)
    refresher = Refresher(root, Settings(), MemoryStore(root), print, State())
    states["b"] = "succeeded"
    assert refresher.phases_ended(ctx, nodes[1]) == []
    states["a"] = "failed"
    assert refresher.phases_ended(ctx, nodes[0]) == []
    states["a"] = "pending"  # seen final, then reset
    states["c"] = "succeeded"
    assert refresher.phases_ended(ctx, nodes[2]) == []
    states["a"] = "succeeded"
    assert refresher.phases_ended(ctx, nodes[0]) == ["P"]


def test_a_summary_from_the_entries_is_held_for_the_prompts_and_written_by_the_runs_end(tmp_path, monkeypatch):
    """In a run, a refresh from the entries is what the next prompt reads at once; the file
    gets it within summary.WRITE_EVERY seconds (a replace of the file per refresh cost a flush
    to disk) and at the run's end. The first refresh is written at once."""
    from harnessc.runtime.memory import summary as summarymod

    monkeypatch.setattr(summarymod, "WRITE_EVERY", 3600.0)  # (no timing in the test: nothing else writes it)
    root = tmp_path / "p"
    (root / ".harness").mkdir(parents=True)
    memory = RunMemory(root, Settings(every=1), State())
    ctx = SimpleNamespace(plan=SimpleNamespace(nodes=[]), store=None)
    path = root / ".harness/memory/summary.json"

    def done_ids() -> list[str]:
        return [e["id"] for e in memory.file.entries() if e["kind"] == "done"]

    async def run() -> None:
        memory.ended(node("a"), "succeeded", "<decision>first</decision>")
        memory.task_ended(ctx, node("a"))
        assert json.loads(path.read_text())["upto"] == done_ids()[-1]  # the first: at once
        memory.ended(node("b"), "succeeded", "<decision>second</decision>")
        memory.task_ended(ctx, node("b"))
        a, b = done_ids()
        assert json.loads(path.read_text())["upto"] == a  # b's refresh is held...
        held = memory.refresher.file.read()  # ...and what the next prompt reads (RunMemory.section)
        assert held["upto"] == b and "decided: second" in held["text"]
        await memory.settle()
        assert json.loads(path.read_text())["upto"] == b  # the run's end wrote it

    asyncio.run(run())
