"""A task's result file (.harness/outputs/<task>.json) is written after its result commits to
state.db, in a thread of its own: a run killed in between leaves state.db holding a result
whose file is missing, and the next run writes it. Real runs, real SIGKILLs, real SQLite."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from harnessc.runtime.store import outputs
from harnessc.states import TaskState

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, node, spawn, write_project

# Prints the contract's object; task b waits for the file argv[1] to go first.
AGENT = """
import json, os, sys, time
sys.stdin.read()
while os.environ["HARNESSC_TASK"] == "b" and os.path.exists(sys.argv[1]):
    time.sleep(0.05)
print(json.dumps({"title": os.environ["HARNESSC_TASK"], "score": 1}))
"""


def project(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agent.py").write_text(AGENT)
    agents = {"cmd": {"provider": "command", "command": [PY, str(root / "agent.py"), str(root / "slow")],
                      "timeout": 60}}
    write_project(root, [node("a", contract="summary", routing={"agent": "cmd"}),
                         node("b", contract="summary", routing={"agent": "cmd"}, order=1)],
                  agents=agents, contracts={"summary": SIMPLE_CONTRACT}, concurrency=2)


def state_of(root: Path, tid: str) -> str | None:
    db = root / ".harness" / "state.db"
    if not db.exists():
        return None
    con = sqlite3.connect(db, timeout=10)
    try:
        row = con.execute("SELECT state FROM tasks WHERE id=?", (tid,)).fetchone()
    except sqlite3.OperationalError:  # the schema is not there yet
        return None
    finally:
        con.close()
    return row[0] if row else None


def shown(root: Path, tid: str) -> dict:
    r = virtual.harnessc(root, "show", tid, "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_a_result_whose_file_a_kill_cut_is_written_by_the_next_run(tmp_path):
    """kill -9 while b runs, after a landed; a's file removed, and half of it left in a
    temporary file, to stand for the write the kill cut (between the commit and the file,
    or during it: on a loaded machine a kill lands there now and then). The resumed run
    writes a's file from state.db, with what `show` says, removes the half-written one, and
    runs b."""
    root = tmp_path / "proj"
    project(root)
    (root / "slow").write_text("b waits for this to go")
    p = spawn(root, "run")
    try:
        deadline = time.monotonic() + 60
        while state_of(root, "a") != "succeeded":
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        assert state_of(root, "b") == "running"
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)
    outputs = root / ".harness" / "outputs"
    (outputs / "a.json").unlink(missing_ok=True)
    outputs.mkdir(exist_ok=True)
    (outputs / f".tmp-{p.pid}-0-a.json").write_text('{"task": "a", "sta')  # as workspace.write_atomic names it
    (root / "slow").unlink()

    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    for tid in ("a", "b"):
        on_disk = json.loads((outputs / f"{tid}.json").read_text())
        assert on_disk["output"] == {"title": tid, "score": 1} and on_disk["state"] == "succeeded"
        assert {k: v for k, v in shown(root, tid).items() if k != "file"} == on_disk
    assert not list(outputs.glob(".tmp-*"))


def test_a_run_with_nothing_left_to_do_writes_the_missing_result_files(tmp_path):
    """Every task complete, one file gone (the kill came after the last task landed): the
    next run has nothing to run, and writes the file."""
    root = tmp_path / "proj"
    project(root)
    assert virtual.harnessc(root, "run").returncode == 0
    outputs = root / ".harness" / "outputs"
    before = (outputs / "b.json").read_text()
    (outputs / "b.json").unlink()
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (outputs / "b.json").read_text() == before
    assert shown(root, "b")["file"] == ".harness/outputs/b.json"


# b's agent reads a's result file as it starts, and fails without it.
READER = """
import json, os, sys
sys.stdin.read()
if os.environ["HARNESSC_TASK"] == "b":
    with open(os.path.join(".harness", "outputs", "a.json")) as f:
        json.load(f)
print(json.dumps({"title": os.environ["HARNESSC_TASK"], "score": 1}))
"""


def test_a_dependent_starts_once_its_dependencys_result_file_is_written(tmp_path, monkeypatch):
    """The file is written in the writer's thread; the dependent waits for it, however slow."""
    from harnessc.runtime.scheduler import RunOptions
    from harnessc.runtime.session import execute
    from harnessc.runtime.store import outputs

    root = tmp_path / "p"
    root.mkdir()
    (root / "reader.py").write_text(READER)
    agents = {"cmd": {"provider": "command", "command": [PY, str(root / "reader.py")], "timeout": 60}}
    plan = write_project(root, [node("a", contract="summary", routing={"agent": "cmd"}),
                                node("b", contract="summary", routing={"agent": "cmd"}, depends_on=["a"])],
                         agents=agents, contracts={"summary": SIMPLE_CONTRACT}, concurrency=2)
    write = outputs.Writer.write

    def slow_write(self, rec):  # a slow disk: the file lands well after its task ended
        time.sleep(0.5)
        write(self, rec)

    monkeypatch.setattr(outputs.Writer, "write", slow_write)
    result = execute(root, plan, RunOptions(jobs=2))
    assert result.exit_code == 0, result.message
    assert state_of(root, "b") == "succeeded"
    assert json.loads((root / ".harness/outputs/b.json").read_text())["output"]["title"] == "b"


def test_results_queued_together_go_to_the_writers_thread_as_one_batch(tmp_path, monkeypatch):
    """Results that land close together are written by one hand-off to the thread (a hand-off
    per file fought the event loop for the GIL once per task); each keeps its own outcome: a
    file that cannot be written fails its own future only. A result whose batch was not due
    when the writer closed is written by close()."""
    import asyncio

    from harnessc.runtime.store import outputs
    from harnessc.workspace import Workspace, WorkspaceError

    ws = Workspace(tmp_path)
    writer = outputs.Writer(ws, lambda text: text)
    batches: list[list[str]] = []
    write_batch, write = outputs.Writer._write_batch, outputs.Writer.write

    def counted(self, recs):
        batches.append([r["task"] for r in recs])
        return write_batch(self, recs)

    def refusing(self, rec):
        if rec["task"] == "bad":
            raise WorkspaceError("cannot write bad.json: disk full")
        write(self, rec)

    monkeypatch.setattr(outputs.Writer, "_write_batch", counted)
    monkeypatch.setattr(outputs.Writer, "write", refusing)

    async def main():
        futs = [writer.write_soon({"task": t, "state": "succeeded"}) for t in ("a", "bad", "c")]
        done = await asyncio.gather(*futs, return_exceptions=True)
        late = writer.write_soon({"task": "late", "state": "succeeded"})  # its batch is not due yet
        return done, late

    done, late = asyncio.run(main())
    assert batches == [["a", "bad", "c"]]
    assert done[0] is None and done[2] is None and isinstance(done[1], WorkspaceError)
    assert sorted(outputs.present(ws)) == ["a.json", "c.json"]
    writer.close()
    assert sorted(outputs.present(ws)) == ["a.json", "c.json", "late.json"]


_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | st.text()
            | st.sampled_from(list(TaskState)))  # (a str subclass)
_VALUES = (_SCALARS | st.lists(st.text(), max_size=3) | st.tuples(st.text()) | st.just({})
           | st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)
           | st.builds(Path, st.text(alphabet="ab/", max_size=5)))  # (default=str)


@given(st.dictionaries(st.text(max_size=12), _VALUES, max_size=12))
@example({"task": "t", "state": "succeeded", "verified": True, "verified_by": [], "output": None, "attempts": 1,
          "answer": "Completed t.\n\n<promise>DONE</promise>", "title": "Tâche \u2028 \"t\"", "cost": float("nan")})
@example({"filled": [], "output": {}, "nested": {"a": [1, {"b": None}]}, "inf": float("-inf")})
def test_a_result_file_is_the_text_of_the_indented_encoder(rec):
    """The result file's text (made from the C encoder's parts where it can) is exactly what
    json.dumps(indent=2, sort_keys=True, ensure_ascii=False, default=str) writes."""
    assert outputs.encode(rec) == json.dumps(rec, indent=2, sort_keys=True, ensure_ascii=False, default=str)
