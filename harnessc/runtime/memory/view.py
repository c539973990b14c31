"""Run memory as the report shows it (runreport/): the running summary and the newest entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .store import MemoryStore, SummaryFile, active


def memory_view(root: Path, run_id: str, most: int) -> dict[str, Any]:
    """The summary and the newest `most` entries (newest first), each with the task that
    recorded it and whether run `run_id` did. Only reads: a damaged file is read as empty and
    left where it is (the next run says so and sets it aside)."""
    store = MemoryStore(root, aside=False)
    entries = [e for e in store.entries() if e["kind"] != "done"]
    summary = SummaryFile(store, lambda line: None).read()
    shown = [{**{k: e.get(k) for k in ("id", "kind", "text", "task", "cause", "fix", "expires")},
              "this_run": e.get("run") == run_id,
              "expired": e["kind"] == "constraint" and not active(e, run_id)} for e in entries[-most:]]
    return {"summary": summary.get("text") or "", "summary_by": summary.get("by"), "entries": shown[::-1],
            "more": max(0, len(entries) - most)}
