"""`harnessc clean`: prune old `.harness/runs/<run-id>/` directories, keeping the newest.

Runs are ordered by their start time in the state (directories the state does not know
count as oldest, by name). The run in progress is never removed. Removal never follows a
symbolic link: the runs directory is opened through the Workspace (one component at a time,
O_NOFOLLOW; a linked `.harness` or `runs` is refused), a link among the run directories is
left alone and reported, and each directory is removed with shutil.rmtree relative to that
descriptor (which does not follow links inside it either).

It also removes the per-task git indexes (`.harness/loop/<task>.index`) that earlier versions
left behind (a run now keeps one, `run.index`), only while no run holds the lock.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field

from ...workspace import Workspace, WorkspaceError
from .lock import holder
from .state import NoState, StateStore


@dataclass
class Pruned:
    removed: list[str] = field(default_factory=list)  # run ids, oldest first
    kept: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # entries left alone: symbolic links


def _run_starts(workspace: Workspace) -> tuple[dict[str, float], str | None]:
    """(run id -> start time, id of the run in progress or None) from the state."""
    try:
        store = StateStore(workspace, create=False)
    except NoState:
        return {}, None
    try:
        starts, last = store.run_starts(), store.last_run()
    finally:
        store.close()
    active = last["id"] if last and last["status"] == "running" and holder(workspace) else None
    return starts, active


CURRENT_INDEX = "run.index"  # the run's file ledger (scheduler.py); every other *.index is stale


def remove_stale_indexes(workspace: Workspace, dry_run: bool = False) -> list[str]:
    """Remove the `*.index` files of `.harness/loop/` other than run.index (regular files
    only, never through a link) and return their names, sorted; none while a run holds the
    lock (its tasks may still use theirs). Raises WorkspaceError."""
    if holder(workspace):
        return []
    try:
        fd = workspace.open_dir(workspace.loop, create=False)
    except FileNotFoundError:
        return []
    try:
        stale = sorted(e.name for e in os.scandir(fd) if e.name.endswith(".index") and e.name != CURRENT_INDEX
                       and stat.S_ISREG(e.stat(follow_symlinks=False).st_mode))
        if not dry_run:
            for name in stale:
                try:
                    os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    pass  # gone already: what we wanted
                except OSError as e:
                    raise WorkspaceError(f"cannot remove {workspace.rel(workspace.loop / name)}: "
                                         f"{e.strerror or e}") from None
        return stale
    finally:
        os.close(fd)


def prune(workspace: Workspace, keep: int, dry_run: bool = False) -> Pruned:
    """Remove all but the `keep` newest run directories (never the run in progress).
    Raises WorkspaceError (a link on the way, a directory that cannot be removed)."""
    starts, active = _run_starts(workspace)
    try:
        fd = workspace.open_dir(workspace.runs, create=False)
    except FileNotFoundError:
        return Pruned()
    try:
        runs, links = [], []
        for entry in os.scandir(fd):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                links.append(entry.name)
            elif stat.S_ISDIR(st.st_mode):
                runs.append(entry.name)
        runs.sort(key=lambda r: (r in starts, starts.get(r, 0.0), r))
        old = set(runs[:max(0, len(runs) - keep)]) - {active}
        result = Pruned(removed=[r for r in runs if r in old], kept=[r for r in runs if r not in old],
                        links=sorted(links))
        if not dry_run:
            for r in result.removed:
                try:
                    shutil.rmtree(r, dir_fd=fd)
                except OSError as e:
                    raise WorkspaceError(f"cannot remove {workspace.rel(workspace.run_dir(r))}: "
                                         f"{e.strerror or e}") from None
        return result
    finally:
        os.close(fd)
