"""The state store's group commit: writes queued in one loop turn share one transaction."""

from __future__ import annotations

import asyncio

import pytest

from harnessc.runtime.store.state import StateStore
from harnessc.workspace import Workspace


@pytest.fixture
def store(tmp_path):
    s = StateStore(Workspace(tmp_path))
    s.run_id = "r1"
    s.ensure_tasks(["a", "b", "c"], set())
    yield s
    s.close()


def test_writes_of_one_turn_commit_together_and_fail_alone(store):
    commits = []
    real_flush = store.flush

    def counting_flush():
        commits.append(len(store._queue))
        real_flush()

    store.flush = counting_flush

    def boom():
        store.set_state("b", "running")
        raise RuntimeError("disk says no")

    async def main():
        fa = store.defer(lambda: store.begin_attempt("a", 1, 0, "x", "p", "h", 0.0, start_task=True))
        fb = store.defer(boom)
        fc = store.defer(lambda: store.begin_attempt("c", 1, 0, "x", "p", "h", 0.0, start_task=True))
        store._flush_handle.cancel()  # route the scheduled flush through the counter
        asyncio.get_running_loop().call_soon(store.flush)
        return await asyncio.gather(fa, fb, fc, return_exceptions=True)

    a, b, c = asyncio.run(main())
    assert commits == [3]  # one transaction for the three writes
    assert isinstance(a, int) and isinstance(c, int)
    assert isinstance(b, RuntimeError)  # its own failure only, and rolled back
    states = {t: r["state"] for t, r in store.tasks().items()}
    assert states == {"a": "running", "b": "pending", "c": "running"}


def test_cancelled_write_is_dropped(store):
    async def main():
        fut = store.defer(lambda: store.begin_attempt("a", 1, 0, "x", "p", "h", 0.0, start_task=True))
        fut.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    asyncio.run(main())
    assert store.attempts("a") == []
    assert store.tasks()["a"]["state"] == "pending"


def test_a_new_event_loop_after_a_crash_still_flushes(store):
    async def crashed():
        store.defer(lambda: store.set_state("a", "running"))
        raise KeyboardInterrupt  # the loop ends before its flush ran

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(crashed())

    async def again():
        return await store.defer(lambda: store.set_state("c", "running") or "ok")

    assert asyncio.run(again()) == "ok"
    assert store.tasks()["c"]["state"] == "running"


def test_a_child_record_rides_along_with_the_next_commit_or_commits_alone_soon(store):
    """record_child saves no commit of its own while other writes come: it commits with the
    next one; alone, it commits within CHILD_RECORD_WITHIN seconds anyway."""
    commits = []
    store.db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)

    def child_of(aid: int) -> tuple:
        return tuple(store.db.execute("SELECT proc_pid, proc_start FROM attempts WHERE id=?", (aid,)).fetchone())

    async def main():
        a = await store.defer(lambda: store.begin_attempt("a", 1, 0, "x", "p", "h", 0.0, start_task=True))
        b = await store.defer(lambda: store.begin_attempt("b", 1, 0, "x", "p", "h", 0.0, start_task=True))
        del commits[:]
        store.record_child(a, 4242, 17)
        for _ in range(5):
            await asyncio.sleep(0)  # loop turns: no commit of its own
        assert commits == [] and child_of(a) == (None, None)
        await store.defer(lambda: store.set_state("c", "running"))
        assert commits == ["COMMIT"] and child_of(a) == (4242, 17)  # the one commit held both
        store.record_child(b, 4343, 18)
        deadline = asyncio.get_running_loop().time() + 30
        while child_of(b) != (4343, 18):  # alone: it commits by itself
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)

    asyncio.run(main())
