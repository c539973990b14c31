"""The user's own edits during a run, told to the tasks whose files they touch.

Shared tree (no isolation): the project's files are compared between attempts, while no
agent works in it. Every attempt of a shared-tree task is a busy spell, from just before its
agent's call to the end of its checks (a landing on the user's branch is one too); the run's
snapshots (runtime/loop/files.py, through the attribution ledger: one snapshot system) are
taken as the tree goes from busy to idle and back. What changed in an idle spell is the
user's: no agent ran and harnessc wrote nothing there. Each task that is waiting for another
attempt collects the idle spells' changes; its next prompt lists those touching its files
(its context files, protect and write_scope paths, the files its earlier attempts changed:
as the attribution ledger credits them to a tracked task, else those of an attempt alone in
its busy spell) with their diff, up to DIFF_TOKENS, as "changed by the user since your last
attempt: keep these changes". An edit made while some agent works is not told apart from
that agent's work: it is not reported.

Isolated tasks (worktrees): an attempt starts from a commit (the run's start, or where its
dependencies landed), so the user's edits reach a task's base only once committed, on a
later run (a run's base does not move); its next prompts name the uncommitted ones touching
its files (they are not in its worktree).

Bounds: only the project's files (snapshots never leave it, links are never followed: a link
is named with where it points); a binary or large file is named only; the diff text stops at
the token budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import fnmatch
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import gitcmd
from ...estimates import CHARS_PER_TOKEN
from . import files as filesmod

DIFF_TOKENS = 2000  # per prompt: the diffs' text, at most (then names only)
MAX_LISTED = 50  # paths listed per prompt, at most
MAX_DIFF_BYTES = 256 << 10  # a larger file is named only
KEEP = "Changed by the user since your last attempt: keep these changes"


@dataclass
class Edit:
    """One path the user changed: its content id before the first and after the last idle
    spell that changed it ("" absent)."""

    old: str
    new: str


@dataclass
class Waiting:
    """A task between two attempts: the user's edits since its last one, and its files."""

    edits: dict[str, Edit] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)  # snapshot paths its attempts changed


class UserEdits:
    """The run's ledger of busy and idle spells in the shared tree (one per run)."""

    def __init__(self, ledger: Any):
        """ledger: the run's Attribution (runtime/loop/attribution.py): its snapshots."""
        self.ledger = ledger
        self.busy = 0
        self.busy_tasks: set[str] = set()  # the tasks whose attempts ran in this busy spell
        self.busy_from: filesmod.Snapshot | None = None  # the tree as the busy spell began
        self.idle_from: filesmod.Snapshot | None = None  # the tree as the idle spell began
        self.waiting: dict[str, Waiting] = {}
        self.lock = asyncio.Lock()

    @classmethod
    def of(cls, ctx: Any) -> "UserEdits":
        ledger = ctx.attribution
        if ledger.user_edits is None:
            ledger.user_edits = cls(ledger)
        return ledger.user_edits

    async def _snapshot(self) -> filesmod.Snapshot | None:
        try:
            files = await self.ledger._snapshots()
            return await self.ledger._read(files.snapshot)
        except Exception:  # no evidence: nothing is reported rather than a guess
            return None
        finally:
            self.ledger._tell()

    def _changed(self, before: filesmod.Snapshot | None, after: filesmod.Snapshot | None) -> dict[str, Edit]:
        if before is None or after is None or before.base != after.base:
            return {}
        base = self.ledger.files.base_blobs
        out = {}
        for p in filesmod.changed_paths(before, after, base):
            out[p] = Edit(before.blobs.get(p, base.get(p, "") if before.base else ""),
                          after.blobs.get(p, base.get(p, "") if after.base else ""))
        return out

    async def enter(self, tid: str | None, watch: bool = False) -> None:
        """An attempt (tid) or a landing (None) is about to write the tree: an idle spell
        ends here, and what changed in it is the user's. `watch`: snapshot the tree even if
        no task waits, so what this attempt changes is known as its files."""
        async with self.lock:
            if self.busy == 0:
                # none waits for another attempt, none to watch: no snapshot (nothing to compare)
                now = await self._snapshot() if self.waiting or watch else None
                if self.idle_from is not None and now is not None:
                    for path, edit in self._changed(self.idle_from, now).items():
                        for w in self.waiting.values():
                            seen = w.edits.get(path)
                            w.edits[path] = Edit(seen.old if seen else edit.old, edit.new)
                            if w.edits[path].old == w.edits[path].new:
                                del w.edits[path]  # put back as it was
                self.busy_from, self.idle_from = now, None
                self.busy_tasks = set()
            self.busy += 1
            if tid is not None:
                self.busy_tasks.add(tid)

    async def leave(self, tid: str | None, again: bool) -> None:
        """The attempt's (or landing's) writes are over; `again`: the task may have another
        attempt, so the user's edits from now on are kept for it."""
        async with self.lock:
            self.busy -= 1
            if tid is not None and again:
                self.waiting.setdefault(tid, Waiting())
            if self.busy or not self.waiting:
                return
            now = await self._snapshot()
            if len(self.busy_tasks) == 1:  # the spell's changes are that attempt's alone
                (only,) = self.busy_tasks
                if only in self.waiting:
                    self.waiting[only].touched |= set(self._changed(self.busy_from, now))
            self.idle_from = now

    def done(self, tid: str) -> None:
        self.waiting.pop(tid, None)

    @contextlib.asynccontextmanager
    async def writing(self):
        """A busy spell around harnessc's own writes to the tree (a landing)."""
        await self.enter(None)
        try:
            yield
        finally:
            await self.leave(None, False)

    def spell(self, tid: str) -> "Spell":
        return Spell(self, tid)

    def watches(self, node: Any, first: bool) -> bool:
        """Whether the task's first attempt is watched for its files: it has checks that may
        reject it, and the attribution ledger does not already follow its files."""
        checked = bool(node.accept or node.contract or node.completion_promise or node.write_scope)
        return first and checked and not self.ledger.tracks(node)

    async def take(self, tid: str, node: Any) -> str:
        """The prompt section for the task's next attempt (its edits are then told: dropped)."""
        w = self.waiting.get(tid)
        if w is None or not w.edits:
            return ""
        prefix = self.ledger._prefix()
        touched = set(w.touched) | set(getattr(self.ledger, "touched", {}).get(tid, ()))
        mine = sorted(p for p in w.edits if p.startswith(prefix)
                      and (p in touched or related(node, p[len(prefix):])))
        edits = {p: w.edits.pop(p) for p in mine}
        if not edits:
            return ""
        files = self.ledger.files

        def locked() -> str:  # one reader of the object store at a time (files.py)
            with files.lock:
                return render(edits, prefix, files, self.ledger.root)
        return await asyncio.to_thread(locked)


class Spell:
    """One attempt's busy spell: entered before its call, ended (once) after its checks."""

    def __init__(self, edits: UserEdits, tid: str):
        self.edits, self.tid, self.open = edits, tid, False

    async def begin(self, watch: bool = False) -> None:
        await self.edits.enter(self.tid, watch)
        self.open = True

    async def end(self, again: bool) -> None:
        if self.open:
            self.open = False
            await self.edits.leave(self.tid, again)


class NoSpell:
    """An isolated attempt's: its agent works in its own worktree."""

    async def end(self, again: bool) -> None:
        pass


def task_files(node: Any) -> tuple[list[str], list[str]]:
    """The task's named files and globs (project-relative): context, protect, write_scope."""
    named = list(node.context or ()) + [f["path"] for f in (node.context_staging or {}).get("files", ())]
    globs = [p.path for p in (node.protect or ())] + list(node.write_scope or ())
    return named, globs


def related(node: Any, path: str) -> bool:
    """Whether a project-relative path is one of the task's files."""
    named, globs = task_files(node)
    if path in {os.path.normpath(p) for p in named}:
        return True
    for g in globs:
        if g.endswith("/") and path.startswith(g):
            return True
        if fnmatch.fnmatchcase(path, g) or (g.endswith("/**") and path.startswith(g[:-2])):
            return True
    return False


def _content(blob: str, files: Any, root: Path, rel: str) -> tuple[str | None, str]:
    """(text, why not): a path's content for a diff; text None when it is named only."""
    if not blob:
        return "", ""
    if isinstance(files, filesmod.GitSnapshots):
        mode = blob[40:]
        if mode == "120000":
            return None, "a symbolic link"
        if mode == "160000":
            return None, "a submodule"
        try:
            data = files._read(blob)
        except Exception:
            return None, "unreadable"
    else:  # outside git only the content now is at hand, read without following a link
        path = Path(root) / rel
        try:
            st = os.stat(path, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                return None, "not a regular file"
            if st.st_size > MAX_DIFF_BYTES:
                return None, "a large file"
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                data = f.read(MAX_DIFF_BYTES + 1)
        except OSError:
            return None, "unreadable"
    if len(data) > MAX_DIFF_BYTES:
        return None, "a large file"
    if b"\0" in data[:8000]:
        return None, "a binary file"
    return data.decode("utf-8", "replace"), ""


def render(edits: dict[str, Edit], prefix: str, files: Any, root: Path) -> str:
    """The section: each path, what became of it, and its diff while the budget lasts."""
    budget = DIFF_TOKENS * CHARS_PER_TOKEN
    git = isinstance(files, filesmod.GitSnapshots)
    lines = ["", "", f"## {KEEP}", "",
             "The person running this harness edited these files of your task by hand since your last attempt. "
             "Their changes are on purpose: keep them, build on them, and do not undo or overwrite them.", ""]
    for n, (path, edit) in enumerate(sorted(edits.items())):
        rel = path[len(prefix):]
        if n >= MAX_LISTED:
            lines.append(f"- and {len(edits) - MAX_LISTED} more file(s)")
            break
        what = "deleted" if not edit.new else "created" if not edit.old else "changed"
        old, why_old = _content(edit.old, files, root, rel) if git else ("", "")
        new, why_new = _content(edit.new, files, root, rel)
        why = why_old or why_new
        if why:
            lines.append(f"- {rel}: {what} ({why}: not shown)")
            continue
        if git:
            diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                f"a/{rel}", f"b/{rel}"))
            body, fence = diff, "diff"
        else:
            body, fence = new, ""  # outside git the earlier content is not kept
            what += "; it now reads" if new else ""
        if not body:
            lines.append(f"- {rel}: {what}")
            continue
        if len(body) > budget:
            lines.append(f"- {rel}: {what} (its diff is past this section's budget: read the file)")
            budget = 0
            continue
        budget -= len(body)
        if not body.endswith("\n"):
            body += "\n"
        lines += [f"- {rel}: {what}", "", f"```{fence}", body.rstrip("\n"), "```", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def uncommitted_note(root: Path, node: Any) -> str:
    """An isolated task's note: the user's uncommitted edits to its files, which its
    worktree does not have (they reach its next base once committed)."""
    try:
        out = gitcmd.Git(root).run("status", "--porcelain", "-z", "--untracked-files=all", "--no-renames", "--",
                                   ".", ":(exclude,glob)**/.harness/**")
    except Exception:  # not a repository, git missing: nothing to say
        return ""
    paths = sorted({e[3:] for e in out.split("\0") if len(e) > 3})
    try:  # status paths are relative to the repository's top: made the project's
        prefix = gitcmd.Git(root).run("rev-parse", "--show-prefix").strip()
    except Exception:
        prefix = ""
    mine = [p[len(prefix):] for p in paths if p.startswith(prefix) and related(node, p[len(prefix):])]
    if not mine:
        return ""
    listed = "".join(f"- {p}\n" for p in mine[:MAX_LISTED])
    return ("\n\n## Edited by the user, not committed\n\n"
            "The person running this harness has uncommitted changes to these files of your task in their "
            "checkout. Your worktree starts from a commit, so it does not have them (committed, they are in the "
            "task's base on its next run). Do not redo or contradict them.\n\n" + listed)

