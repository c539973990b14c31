"""Which task changed which file, when tasks run at the same time.

Tasks share the project's working tree, so a change seen during one task's work may be
another's. A tracked task's work is cut into segments, each between two snapshots of the
files (runtime/loop/files.py): from when its attempt begins to when its iteration is scored (a
loop task) or its task ends. A path that changed in task A's segment is decided:

1. no other task's segment saw it change (none overlapped, or the change came before or
   after theirs): A's;
2. else, among the tasks that saw it change (A and the others), those whose `context:`
   names it (the file itself, or a file in the same directory), or whose title or goal names
   it (its path or its file name: "write src/parser.py"); the closest naming wins: the
   whole path over its last directories and name, those over the name alone (or a context
   file in the same directory), so "write pkgb/ops.py" does not name pkga/ops.py;
3. else the task that owns it: the last one it was decided to alone, in this run;
4. else the tasks whose last answer names it most closely (as in 2);
5. else it is shared by them all: credited to none of them as progress.

A loop task's file evidence (progress.py) is what was decided to it alone (or to it and
other tasks whose context names the path). A task's commit (gitops.py) holds the paths that
changed in its segments, less those whose last decision names another task still running:
a path shared with a task that may yet claim it waits for that task. Tracked: loop tasks,
`git: commit` tasks, and (when several tasks run at once) every task of a run that has one.
A task alone reuses its last snapshot as the start of its next segment: one snapshot per
iteration; with others running it takes a fresh one, so the time between its iterations is
nobody's.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ...planfile import PlanNode
from . import files as filesmod
from .files import Delta, FileChanges, GitSnapshots, HashedSnapshots, Snapshot


@dataclass
class Segment:
    task: str
    start: Snapshot
    end: Snapshot | None = None
    changed: frozenset[str] = frozenset()  # once closed: the paths it saw change


class Attribution:
    """The run's ledger of segments and owners (one per run; a lone ProgressMeter has its own)."""

    def __init__(self, root: Path, index: Path, nodes: list[PlanNode] | None = None, jobs: int = 1,
                 make_dir=None, event=None):
        """index: the private git index's path; make_dir: creates its directory (the workspace's);
        event(kind, **data): records what the snapshots noted (a stale lock removed)."""
        self.root, self.index, self.jobs = root, index, jobs
        self._event = event
        self._make_dir = make_dir or (lambda p: p.mkdir(parents=True, exist_ok=True))
        nodes = [n for n in (nodes or []) if not n.done]
        self.enabled = any(n.completion_promise or n.git == "commit" for n in nodes)
        self.files: GitSnapshots | HashedSnapshots | None = None
        self._opening: asyncio.Lock | None = None
        self.open: dict[str, Segment] = {}
        self.closed: list[Segment] = []
        self.owner: dict[str, str] = {}  # path -> the task it was last decided to alone
        self.touched: dict[str, set[str]] = {}  # task -> the paths that changed in its segments
        self.claim: dict[str, frozenset[str]] = {}  # path -> the tasks of its last decision
        self.scopes: dict[str, tuple[frozenset[str], frozenset[str]]] = {}  # task -> (files, dirs)
        self.running: set[str] = set()
        self.last: dict[str, Snapshot] = {}  # task -> the end of its last segment
        self.said: dict[str, str] = {}  # task -> its last answer (for rule 4)
        self.goals: dict[str, str] = {}  # task -> its title and goal (for rule 2)
        self.user_edits = None  # the user's edits between attempts (loop/useredits.py), made on first use

    def tracks(self, node: PlanNode) -> bool:
        """Loop and `git: commit` tasks always; the others when tasks run at the same time."""
        return self.enabled and (bool(node.completion_promise) or node.git == "commit" or self.jobs > 1)

    def task(self, node: PlanNode) -> "TaskFiles | None":
        return TaskFiles(self, node) if self.tracks(node) else None

    # ------------------------------------------------------------------ snapshots

    async def _snapshots(self) -> GitSnapshots | HashedSnapshots:
        if self.files is None:
            self._opening = self._opening or asyncio.Lock()
            async with self._opening:
                if self.files is None:
                    self._make_dir(self.index.parent)
                    self.files = await asyncio.to_thread(filesmod.snapshots, self.root, self.index)
        return self.files

    async def _read(self, fn, *args):
        """fn(*args) of the snapshots in a worker thread, or on the loop's thread when they
        are quick (files.py: a small tree outside git)."""
        if self.files is not None and self.files.quick:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

    def _prefix(self) -> str:
        """The project's directory inside the repository ("" at its top): snapshot paths start with it."""
        if isinstance(self.files, GitSnapshots):
            rel = os.path.relpath(Path(self.root).resolve(), Path(self.files.repo.working_tree_dir).resolve())
            return "" if rel == "." else rel.replace(os.sep, "/") + "/"
        return ""

    def _scope(self, node: PlanNode) -> tuple[frozenset[str], frozenset[str]]:
        prefix = self._prefix()
        named = list(node.context or ()) + [f["path"] for f in (node.context_staging or {}).get("files", ())]
        paths = frozenset(prefix + p for p in named)
        return paths, frozenset(str(PurePosixPath(p).parent) for p in paths)

    def _scope_match(self, task: str, path: str) -> int:
        """How closely the task was asked to work on the path (0: not at all), as `naming`
        counts: its context names the file itself (the whole path) or a file in the same
        directory (as its name alone would), or its title or goal names it."""
        paths, dirs = self.scopes.get(task, (frozenset(), frozenset()))
        prefix = self._prefix()
        if path in paths:
            return len(PurePosixPath(path[len(prefix):]).parts)
        in_dir = 1 if str(PurePosixPath(path).parent) in dirs else 0
        return max(in_dir, naming(self.goals.get(task, ""), path, prefix, self.root))

    async def begin(self, node: PlanNode) -> None:
        """Open the task's segment (unless one is open): the files as its attempt finds them."""
        try:
            files = await self._snapshots()
        except Exception:  # .harness/loop unusable: no file evidence, the task goes on
            return
        if node.id not in self.scopes:
            self.scopes[node.id] = self._scope(node)
            self.goals[node.id] = f"{node.title}\n{node.goal or ''}"
            if isinstance(files, HashedSnapshots):
                files.watch(list(node.context or ()))
        self.running.add(node.id)
        if node.id in self.open:
            return
        start = self.last.get(node.id) if self.running == {node.id} else None
        if start is None:
            try:
                start = await self._read(files.snapshot)
            except Exception:  # a git failure is missing evidence, not the task's failure
                return
            finally:
                self._tell()
        self.open[node.id] = Segment(node.id, start)

    async def measure(self, tid: str, text: str = "") -> FileChanges | None:
        """Close the task's segment: what changed in it, as credited to the task (None when
        the files could not be read). `text`: the task's answer."""
        seg = self.open.get(tid)  # open until decided: a rival deciding meanwhile still sees it
        if seg is None or self.files is None:
            return None
        files = self.files
        self.said[tid] = text[-20000:]
        try:
            end = await self._read(files.snapshot)
            self.last[tid] = end
            delta = await self._read(files.changes, seg.start, end)
        except Exception:  # a git failure is missing evidence, not the task's failure
            self.open.pop(tid, None)
            return None
        finally:
            self._tell()
        seg.end, seg.changed = end, frozenset(delta.per_path)
        self.open.pop(tid, None)
        self.closed.append(seg)
        credited = self._decide(seg, delta)
        self._prune()
        return credited

    def _tell(self) -> None:
        """The snapshots' notes as events (on the loop's thread: the store is not shared)."""
        notes = getattr(self.files, "notes", None)
        while notes:
            kind, data = notes.pop(0)
            if self._event is not None:
                self._event(kind, **data)

    async def end(self, tid: str, measure: bool, text: str = "") -> None:
        """The task is over: its open segment is measured (`measure`) or dropped."""
        if measure and tid in self.open:
            await self.measure(tid, text)
        self.open.pop(tid, None)
        self.last.pop(tid, None)
        self.said.pop(tid, None)
        self.running.discard(tid)

    # ------------------------------------------------------------------ deciding

    def _rivals(self, seg: Segment) -> list[Segment]:
        a0, a1 = seg.start.seq, seg.end.seq
        out = [s for s in self.closed if s.task != seg.task and s.start.seq < a1 and s.end.seq > a0]
        out += [s for s in self.open.values() if s.task != seg.task and s.start.seq < a1]
        return out

    def _decide(self, seg: Segment, delta: Delta) -> FileChanges:
        tid, paths = seg.task, set(delta.per_path)
        saw: dict[str, set[str]] = {p: {tid} for p in paths}
        for rival in self._rivals(seg) if paths else ():
            if rival.end is not None:
                seen = rival.changed & paths
            else:  # still working: what changed from its start to our end
                seen = filesmod.changed_paths(rival.start, seg.end, self.files.base_blobs, among=paths)
            for p in seen:
                saw[p].add(rival.task)
        credited: dict[str, tuple[int, int, bool]] = {}
        shared = others = 0
        for p in sorted(paths):
            tasks = saw[p]
            declared = closest(tasks, lambda t: self._scope_match(t, p)) if len(tasks) > 1 else set()
            if len(tasks) == 1:
                decided = tasks
            elif declared:
                decided = declared
            elif self.owner.get(p) in tasks:
                decided = {self.owner[p]}
            else:
                said = closest(tasks, lambda t: naming(self.said.get(t, ""), p, self._prefix(), self.root))
                decided = said or tasks
            self.touched.setdefault(tid, set()).add(p)
            self.claim[p] = frozenset(decided)
            if tid not in decided:
                others += 1
                continue
            if len(decided) == 1:
                self.owner[p] = tid
                credited[p] = delta.per_path[p]
            elif decided is declared or decided != tasks:
                credited[p] = delta.per_path[p]
            else:
                shared += 1
        out = filesmod.total(self.files.source, credited, delta.commits)
        out.shared, out.others = shared, others
        return out

    def _prune(self) -> None:
        """Closed segments no segment can overlap any more are forgotten (an open one, or the
        next of a running task that would start at its last snapshot)."""
        starts = [s.start.seq for s in self.open.values()] + [self.last[t].seq for t in self.running if t in self.last]
        oldest = min(starts, default=None)
        self.closed = [s for s in self.closed if oldest is not None and s.end.seq > oldest]

    def commit_paths(self, tid: str) -> set[str]:
        """The task's paths for its commit (relative to the project): those that changed in
        its segments, less those whose last decision names another task still running."""
        prefix = self._prefix()
        mine = {p for p in self.touched.get(tid, ()) if not (self.claim.get(p, frozenset()) - {tid}) & self.running}
        return {p[len(prefix):] for p in mine if p.startswith(prefix)}

    def waiting_paths(self, tid: str) -> set[str]:
        """The task's changed paths its commit leaves out for now: their last decision names
        another task still running (relative to the project)."""
        prefix = self._prefix()
        held = {p for p in self.touched.get(tid, ()) if (self.claim.get(p, frozenset()) - {tid}) & self.running}
        return {p[len(prefix):] for p in held if p.startswith(prefix)}

    def settled_shared(self, tid: str) -> dict[str, frozenset[str]]:
        """The task's changed paths whose last decision names other tasks, none of them
        running any more: path (relative to the project) -> the tasks of that decision."""
        prefix = self._prefix()
        out = {}
        for p in self.touched.get(tid, ()):
            tasks = self.claim.get(p, frozenset())
            if tasks - {tid} and not tasks & self.running and p.startswith(prefix):
                out[p[len(prefix):]] = tasks
        return out

    def close(self) -> None:
        if self.files is not None:
            self.files.close()


def naming(text: str, path: str, prefix: str = "", root: Path | None = None) -> int:
    """How closely a text names a file: how many of the path's last parts (its name, then
    its directories) it spells, the whole path (from the project or the repository, or
    absolute under `root`) counting as all of them; 0 when it does not. A mention is a
    whole word of a path, not the end of another one: "pkgb/ops.py" does not name pkga/ops.py."""
    if not text:
        return 0
    rel = path[len(prefix):] if prefix and path.startswith(prefix) else path
    parts = PurePosixPath(rel).parts
    whole = [rel, path] + ([f"{Path(root).as_posix().rstrip('/')}/{rel}"] if root is not None else [])
    if any(_mentions(text, p, relative=not p.startswith("/")) for p in whole):
        return len(parts)
    for k in range(len(parts) - 1, 0, -1):
        if _mentions(text, "/".join(parts[-k:])):
            return k
    return 0


def _mentions(text: str, path: str, relative: bool = True) -> bool:
    """Whether the text has the path as a whole word (after a space or quote, not after
    another path's "/"; "./" before a relative one is fine; before "." ending a sentence)."""
    lead = r"(?<![\w./-])(?:\./)*" if relative else r"(?<![\w./-])"
    return re.search(lead + re.escape(path) + r"(?![\w/-]|\.\w)", text) is not None


def closest(tasks: set[str], match) -> set[str]:
    """The tasks whose `match` (a `naming` count) is the highest above 0 (none: empty)."""
    scores = {t: match(t) for t in tasks}
    top = max(scores.values(), default=0)
    return {t for t, n in scores.items() if n == top} if top else set()


class TaskFiles:
    """One task's side of the ledger."""

    def __init__(self, ledger: Attribution, node: PlanNode):
        self.ledger, self.node = ledger, node

    async def begin(self) -> None:
        await self.ledger.begin(self.node)

    async def measure(self, text: str = "") -> FileChanges | None:
        return await self.ledger.measure(self.node.id, text)

    async def end(self, measure: bool = True, text: str = "") -> None:
        await self.ledger.end(self.node.id, measure, text)

    def forget(self) -> None:
        """The task was cancelled: its open segment is dropped unmeasured."""
        self.ledger.open.pop(self.node.id, None)
        self.ledger.running.discard(self.node.id)

    def commit_paths(self) -> set[str]:
        return self.ledger.commit_paths(self.node.id)

    def waiting_paths(self) -> set[str]:
        return self.ledger.waiting_paths(self.node.id)

    def settled_shared(self) -> dict[str, frozenset[str]]:
        return self.ledger.settled_shared(self.node.id)

    @property
    def source(self) -> str | None:
        return self.ledger.files.source if self.ledger.files else None
