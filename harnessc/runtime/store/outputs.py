"""A task's result, as `harnessc show TASK` prints it and `.harness/outputs/<task>.json` keeps it.

A succeeded task's result is its verified output - the contract's JSON object, or the text of
the answer when the contract asks for none - with what verified it. A degraded task's is its
fallback output, marked unverified, with the fields on_failure filled from the contract.

The run writes each result as its task lands, from what state.db holds (secrets are redacted
there before anything is written), atomically (a temporary file renamed over the old one), in
a thread of its own: creating a file can cost the kernel a millisecond (ext4 looking for a
free inode), which the event loop does not wait for. A task with dependents waiting has its
file written on the loop, before they are released (their agents may read it). A write that
fails is the run's warning, not its end: state.db keeps the result, and `show` reads it from
there. A run killed before a result's
file was written leaves state.db holding it; the next run writes the file (`missing`), and
removes the temporary file of a write the kill cut short (`present`).
"""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable

from ...planfile import Contract, PlanNode
from ...states import LANDED, TaskState
from ...wording import accept_name, filled_text, plural
from ...workspace import TMP_PREFIX, Workspace, WorkspaceError, write_atomic_at


def result(row: dict, node: PlanNode | None, contract: Contract | None, final: dict | None) -> dict:
    """A task's result from its state row, its plan node (None: no longer in the plan) and its
    final answered attempt (state.final_attempt)."""
    state = row["state"]
    rec: dict[str, Any] = {"task": row["id"], "title": node.title if node else None, "state": state,
                           "verified": state == TaskState.SUCCEEDED, "run_id": row.get("run_id"),
                           "agent": row.get("agent"), "attempts": row.get("attempts") or 0}
    if state == TaskState.SUCCEEDED:
        checks = (final or {}).get("checks") or []
        rec["verified_by"] = verified_by(node, contract, checks) if node else [
            f"accept {accept_name(c)} (exit {c.get('returncode')})" for c in checks]
    if state in LANDED:
        rec["output"] = row.get("output")
        if rec["output"] is None and final is not None:
            rec["answer"] = final.get("raw_output") or ""
    if state == TaskState.DEGRADED:
        rec["filled"] = row.get("filled") or []
    if state != TaskState.SUCCEEDED and row.get("error"):
        rec["error"] = row["error"]
    return rec


# json.dumps(rec, indent=2, sort_keys=True, ensure_ascii=False, default=str), one encoder for all
_encode = json.JSONEncoder(indent=2, sort_keys=True, ensure_ascii=False, default=str).encode
_string = json.encoder.encode_basestring  # (in C) what that encoder writes a string with


def encode(rec: dict) -> str:
    """_encode(rec). An indented encoding is Python's pure-Python encoder; a result is mostly
    strings and numbers (nested output aside), so its lines are made here from the C parts,
    the same text; anything else (a nested object, a list of other than strings) is _encode's."""
    lines = []
    for key, value in sorted(rec.items()):
        text = _flat(value)
        if text is None or not isinstance(key, str):
            return _encode(rec)
        lines.append(f"{_string(key)}: {text}")
    return "{\n  " + ",\n  ".join(lines) + "\n}" if lines else "{}"


def _flat(value: Any) -> str | None:
    """A value of a result's top level as the indented encoder writes it; None: not made here."""
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "[\n    " + ",\n    ".join(map(_string, value)) + "\n  ]" if value else "[]"
    if isinstance(value, dict) and not value:
        return "{}"
    return None

BATCH_WAIT = 0.02  # seconds a result file may wait for others to go to the writer's thread with


class Writer:
    """Writes results into .harness/outputs/, opened once (confined, through no link) for a
    run: a walk from the project directory per file would double a file's cost."""

    def __init__(self, workspace: Workspace, redact):
        self.workspace, self.redact = workspace, redact
        self.fd: int | None = None
        self._thread: ThreadPoolExecutor | None = None  # one thread: files land in their tasks' order
        self._queued: list[tuple[dict, asyncio.Future]] = []  # for the thread's next batch
        self._busy = False  # a batch is due or being written

    def write_soon(self, rec: dict) -> asyncio.Future:
        """write(rec) in the writer's thread; the future is done once the file is in place
        (or holds the WorkspaceError). Await every one before close().

        The records queued within BATCH_WAIT seconds, or while the thread writes, go to it
        together: a hand-off per file woke the thread and then the loop once per task, each
        fighting the other for the GIL. (Nobody waits for these files: a task with dependents
        has its file written at once, by write().)"""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queued.append((rec, fut))
        if not self._busy:
            self._busy = True
            loop.call_later(BATCH_WAIT, self._hand_over, loop)
        return fut

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """The queued records to the thread, as one batch; their futures settle when it ends."""
        if not self._queued:  # (closed meanwhile: close() wrote them)
            self._busy = False
            return
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="harnessc-outputs")
        batch, self._queued = self._queued, []
        self._busy = True
        job = loop.run_in_executor(self._thread, self._write_batch, [rec for rec, _ in batch])
        job.add_done_callback(lambda done: self._batch_done(loop, batch, done))

    def _write_batch(self, recs: list[dict]) -> list[BaseException | None]:
        """Write each record; what each raised (None: written), so one file's trouble stays its own."""
        raised: list[BaseException | None] = []
        for rec in recs:
            try:
                self.write(rec)
                raised.append(None)
            except Exception as e:  # a WorkspaceError, or a bug the scheduler raises when it counts
                raised.append(e)
        return raised

    def _batch_done(self, loop: asyncio.AbstractEventLoop, batch: list, done: asyncio.Future) -> None:
        self._busy = False
        if done.cancelled() or done.exception() is not None:
            outcomes = [done.exception() if not done.cancelled() else None] * len(batch)
        else:
            outcomes = done.result()
        for (_, fut), err in zip(batch, outcomes):
            if fut.done():
                continue
            if done.cancelled():
                fut.cancel()
            elif err is not None:
                fut.set_exception(err)
            else:
                fut.set_result(None)
        if self._queued:  # (they waited for this batch: no BATCH_WAIT more)
            self._busy = True
            self._hand_over(loop)

    def write(self, rec: dict) -> None:
        """.harness/outputs/<task>.json, all at once. Raises WorkspaceError."""
        path = self.workspace.output(rec["task"])
        text = encode(rec) + "\n"
        if self.fd is None:
            self.fd = self.workspace.open_dir(self.workspace.outputs)
        write_atomic_at(self.fd, path.name, self.redact(text).encode("utf-8"), lambda: self.workspace.rel(path))

    def close(self) -> None:
        """After the writes were awaited: the thread ends, the directory is closed. Records
        whose batch was not due yet (a run cut short) are written now."""
        queued, self._queued = self._queued, []
        for rec, _ in queued:
            try:
                self.write(rec)
            except WorkspaceError:
                pass  # state.db keeps the result; the next run writes the file (`missing`)
        if self._thread is not None:
            self._thread.shutdown()
            self._thread = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def present(workspace: Workspace, sweep: bool = False) -> set[str]:
    """The names of the result files in .harness/outputs/. `sweep` (a run, holding the run
    lock: no other writer is at work): the temporary files of a writer killed mid-write
    (kill -9) are removed. Raises WorkspaceError."""
    names = workspace.list_dir(workspace.outputs)
    for name in names if sweep else ():
        if name.startswith(TMP_PREFIX):
            workspace.unlink(workspace.outputs / name)
    return {n for n in names if n.endswith(".json") and not n.startswith(TMP_PREFIX)}


def forget(workspace: Workspace, ids: Iterable[str] | None, files: set[str] | None = None) -> None:
    """Remove the result files of `ids` (None: every one): their tasks run again, or were
    reset. `files`: what `present` found, when the caller has it. Raises WorkspaceError."""
    files = present(workspace) if files is None else files
    if not files:  # (a first run: no file names to make for its tasks)
        return
    names = files if ids is None else files & {workspace.output(tid).name for tid in ids}
    for name in sorted(names):
        workspace.unlink(workspace.outputs / name)


def missing(workspace: Workspace, rows: dict[str, dict], files: set[str]) -> list[str]:
    """The tasks (of `rows`, task id -> state row) whose result is in state.db but whose
    file is not among `files` (`present`): a run killed between the two, or a file deleted."""
    return sorted(tid for tid, row in rows.items()
                  if row["state"] in LANDED and workspace.output(tid).name not in files)


def text(rec: dict) -> str:
    """A result as `harnessc show` prints it: a head line, how it was verified (or why it was
    not), then the output JSON or the answer's text."""
    tid, state = rec["task"], rec["state"]
    title = f" ({rec['title']})" if rec.get("title") else ""
    where = ", ".join(p for p in (f"agent {rec['agent']}" if rec.get("agent") else "",
                                  plural(rec["attempts"], "attempt") if rec.get("attempts") else "",
                                  f"run {rec['run_id']}" if rec.get("run_id") else "") if p)
    lines = [f"{tid}{title}: {state}" + (f" ({where})" if where and state in LANDED else "")]
    if state == TaskState.SUCCEEDED:
        lines.append("verified by: " + (", ".join(rec.get("verified_by") or ())
                                        or "nothing: no contract output, promise or accept command checks this task"))
    elif state == TaskState.DEGRADED:
        lines.append(f"NOT verified: {rec.get('error') or 'a fallback output'}")
        filled = filled_text(rec.get("filled"))
        lines.append(f"filled from the contract, not from the agent: {filled or 'nothing'}")
    elif state == TaskState.DONE:
        lines.append("checked off in roadmap.md: no output recorded")
    else:
        if rec.get("error"):
            lines.append(f"error: {rec['error']}")
        lines.append(f"no output{' yet' if state in (TaskState.PENDING, TaskState.READY, TaskState.RUNNING) else ''}"
                     + (f"; `harnessc log {tid}` shows every attempt" if rec.get("attempts") else ""))
    if state in LANDED:
        shown = f" ({rec['file']})" if rec.get("file") else ""
        if rec.get("output") is not None:
            lines += [f"output{shown}:", json.dumps(rec["output"], indent=2, sort_keys=True, ensure_ascii=False)]
        else:
            lines += [f"answer{shown}:", (rec.get("answer") or "").rstrip("\n")]
    return "\n".join(lines)


def verified_by(node: PlanNode, contract: Contract | None, checks: list[dict]) -> list[str]:
    """What a verified result passed, in words: its contract, its promise, its accept
    commands with their exit codes (empty: nothing checks the answer)."""
    parts = [f"contract {contract.name}"] if contract and contract.output else []
    if node.completion_promise:
        parts.append(f"completion promise {node.completion_promise}")
    parts += [f"accept {accept_name(c)} (exit {c.get('returncode')})" for c in checks]
    if getattr(node, "split", None):
        parts.append("its subtasks (split: true), each verified itself")
    return parts
