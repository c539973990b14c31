"""A run's hold on the project's memory (RunMemory): each task's section, what its answers tell."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ...workspace import WorkspaceError
from . import capture, recall
from .store import MemoryStore, Settings, stamp
from .summary import Refresher

KEEP_DONE = 200  # summary lines a run's start keeps in the file (the summary shows fewer)


class RunMemory:
    """A run's hold on the project's memory: each task's section, what its answers tell."""

    def __init__(self, root: Path, settings: Settings, store: Any):
        self.settings = settings
        self.state = store  # state.db's StateStore: the run id, events
        self.file = MemoryStore(root, say=self._damaged, keep_done=KEEP_DONE)
        try:
            self.file.compact()  # a damaged file is said and set aside here, once, at the start
        except (OSError, WorkspaceError):
            pass  # a file that cannot be rewritten is read as it is
        self.refresher = Refresher(root, settings, self.file, self._damaged, store)

    @classmethod
    def of(cls, root: Path, plan: Any, store: Any) -> "RunMemory | None":
        settings = Settings.of(getattr(plan, "memory", None))
        return cls(root, settings, store) if settings.on else None

    def _damaged(self, line: str) -> None:
        print(line, file=sys.stderr)
        self.state.event("memory_damaged", None, message=line[:500])

    @property
    def run_id(self) -> str | None:
        return getattr(self.state, "run_id", None)

    def section(self, node: Any) -> str:
        if not self.file.told() and self.refresher.file.read(text=False).get("by", "entries") == "entries":
            return ""  # only ended tasks' lines and harnessc's own summary: recall.section says nothing
        return recall.section(self.file.entries(), node, self.settings, self.run_id, self.refresher.file.read())

    def task_ended(self, ctx: Any, node: Any) -> None:
        """A task's outcome is recorded, its change landed: refresh the summary when due
        (in the background, one refresh at a time: summary.py)."""
        self.refresher.ended(ctx, node)

    async def settle(self, abort: bool = False) -> None:
        """The run ends: a refresh in flight ends with it (an abort cancels it)."""
        try:
            await self.refresher.settle(abort)
        finally:
            self.file.close()

    def cancel(self) -> None:
        """An abort: a refresh in flight is cancelled (the file keeps the last summary written)."""
        self.refresher.cancel()

    def _add(self, entries: list[dict]) -> list[dict]:
        try:
            return self.file.add([stamp(e, self.run_id) for e in entries])
        except (OSError, WorkspaceError) as e:  # memory is advice: a full disk must not fail the task
            self.state.event("memory_unwritten", None, message=f"could not write to memory: {e}"[:500])
            return []

    def ended(self, node: Any, outcome: str, text: str, extra_decisions: list[str] = (), output: Any = None) -> None:
        """A task ended well (succeeded, or waits for review): what its last answer (markers,
        and its output's memory fields) and a loop task's earlier iterations told, and its
        summary line."""
        files = recall.task_files(node)
        told, skipped = capture.fields(output, node.id, files)
        if skipped:
            self.state.event("memory_unwritten", node.id, message=(
                "output fields not taken into memory: " + "; ".join(skipped[:5]))[:500])
        told += capture.markers(text, node.id, files)
        told += [{"kind": "decision", "text": capture.clip(d), "task": node.id, "files": files}
                 for d in extra_decisions if capture.clip(d)]
        told = list({(e["kind"], e["text"]): e for e in told}.values())  # said twice: once
        added = self._add(told)
        self._add([recall.done_line(node, outcome, added or told)])

    def closing(self) -> list[str]:
        """The run's closing line about what its agents told memory (none when they told nothing;
        a rejected attempt's first error, recorded as a failure of its own, does not count)."""
        mine = [e for e in self.file.entries() if e.get("run") == self.run_id
                and (e["kind"] in ("decision", "constraint") or e["kind"] == "failure" and (e.get("cause") or e.get("fix")))]
        if not mine:
            return []
        counts = {k: sum(e["kind"] == k for e in mine) for k in ("decision", "failure", "constraint")}
        told = ", ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in counts.items() if n)
        return [f"memory: this run recorded {told} for later tasks: `harnessc memory` lists them"]

    def rejected(self, node: Any, text: str, errors: list[str]) -> None:
        """A rejected attempt: the failures it reported, else its first error."""
        files = recall.task_files(node)
        told = [e for e in capture.markers(text, node.id, files) if e["kind"] == "failure"]
        if not told and (first := capture.rejection(errors, node.id, files)):
            told = [first]
        self._add(told)
