"""Protected checks: an attempt that changed a file its agent may not change is rejected,
the file is put back, and the checks run on the version they were written as.

What is protected comes from plan.json (protectrules.py: the spec files, `.harness/`,
CI configuration, the files a task's accept and score commands name, `protect:`, less
`allow_edit:`); `write_scope:` rejects a change outside its globs. Two guards:

* WorktreeGuard (isolation: worktree): the change is the attempt's base commit against its
  checkout's final tree, whatever the agent committed (worktrees.changes, the list the commit
  and its secret checks read too); ignored files count for protection (a check may read
  them), not for the scope. Each file that breaks the rules is kept aside under
  `.harness/rejected/<task>/<path>` and put back as it is at the base (a new file removed).
* SharedGuard (the project's own tree): files are compared between attempts only. Before
  each agent call the protected files are hashed and a copy kept (in memory when they are
  light, else in `.harness/protected/`: a copy is only read back by the same run); after it, a protected file the agent changed is moved aside under
  `.harness/rejected/<task>/<path>` and the earlier version put back - unless the file also
  changed while no agent ran (a person's edit between attempts): then the attempt is
  rejected and nothing is put back. A change made while another task's agent ran too is put
  back all the same (who made it cannot be told; the message names the other tasks): the
  checks' integrity first. In a shared tree `.harness/` is not compared (harnessc writes there
  while an agent runs).

Both run before the answer is verified, so no check ever runs on a changed protected file.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import stat
import threading
from pathlib import Path

from .. import protectrules as rules
from ..planfile import Plan, PlanNode, Protected
from ..workspace import Workspace, WorkspaceError, task_file_name, write_atomic_at
from .loop.files import EXCLUDED, MAX_HASHED_BYTES
from .worktree import worktrees

MAX_NAMED = 5  # paths named in one message; the rest are counted
# project root -> the shared-tree guards whose agent call is in flight (guards run in threads)
_RUNNING: dict[str, set] = {}
_RUNNING_LOCK = threading.Lock()
EXCLUDED_NAMES = frozenset(EXCLUDED)
# A shared-tree guard whose files are this few and this small hashes them on the event loop's
# thread (well under a millisecond): in a worker thread, every step fights the loop for the
# GIL, which cost a run of 50 ms command agents more than the hashing itself.
LIGHT_FILES, LIGHT_BYTES = 32, 256 << 10
_SEEN: dict[str, tuple[int, int]] = {}  # project root -> (files, bytes) the last shared-tree snapshot hashed
# path -> (the bytes last hashed there, their sha256): every snapshot still reads each file, but
# bytes equal to the last ones hashed are not hashed again (a 1,000-task roadmap.md is read and
# compared twice per task; hashing it was most of a light guard's cost). Light files only.
_HASHED: dict[str, tuple[bytes, str]] = {}
HASHED_FILES = 16  # (at most 4 MiB held)


class Rules:
    """Which changed paths a task's agent may not change, and why."""

    def __init__(self, plan: Plan, node: PlanNode):
        self.entries: list[Protected] = [*(plan.protect or ()), *node.protect]
        self.allow = list(node.allow_edit)
        self.scope = node.write_scope
        self.accept = [list(a.argv) for a in node.accept]
        self.score = list(node.approaches.score.argv) if node.approaches and node.approaches.score else None
        self.looked: set = set()  # where the commands' paths were looked up (a base, or the tree)
        self._why = _answers(self)  # why(), asked before and after each call of every task

    def name_command_paths(self, where: str, root: Path | None = None, kind=None) -> None:
        """Add what the task's commands name at its base (`where`: the base; files created
        since the build, by a dependency, are protected too), once per base."""
        if where in self.looked:
            return
        self.looked.add(where)
        known = {e.path for e in self.entries}
        self.entries += [Protected(e.path, e.why, e.new) for e in rules.command_entries(self.accept, self.score, root, kind)
                         if e.path not in known]
        self._why = _answers(self)

    def why(self, path: str, existed: bool) -> str | None:
        """The reason `path` (project-relative) is protected; None when it is not.
        `existed`: it is there at the base (a directory a command names protects only those)."""
        key, answers = (path, existed), self._why
        why = answers.get(key, _UNASKED)
        if why is _UNASKED:  # (guards run in threads too: no look at `answers` after this)
            if len(answers) >= 4096:
                answers.clear()  # (a bound: an isolated task asks about every path it changed)
            why = answers[key] = self._reason(path, existed)
        return why

    def _reason(self, path: str, existed: bool) -> str | None:
        found = [e.why for e in self.entries if (e.new or existed) and rules.matches(e.path, path)]
        if not found:
            return None
        if rules.OWN in found:
            return rules.OWN  # whatever allow_edit says
        return None if rules.matches_any(self.allow, path) else found[0]

    def outside_scope(self, path: str) -> bool:
        return self.scope is not None and not rules.matches_any(self.scope, path)

    def scope_text(self) -> str:
        return ", ".join(self.scope or ())

    def shared_entries(self) -> list[Protected]:
        """The entries a shared tree compares: all but `.harness/` (harnessc writes there while agents run)."""
        return [e for e in self.entries if e.why != rules.OWN]


# (entries, allow_edit) -> {(path, existed): why}: the tasks of a plan mostly share their rules
_WHY: dict[tuple, dict[tuple[str, bool], str | None]] = {}
_UNASKED = object()


def _answers(r: Rules) -> dict[tuple[str, bool], str | None]:
    """What why() answered for rules like `r` (the same entries and allow_edit)."""
    key = (tuple((e.path, e.why, e.new) for e in r.entries), tuple(r.allow))
    if key not in _WHY and len(_WHY) >= 256:
        _WHY.clear()  # (a bound)
    return _WHY.setdefault(key, {})


def messages(protected: dict[str, str], outside: list[str], scope: str, kept: dict[str, str],
             left: set[str], others: list[str] = ()) -> list[str]:
    """The rejection's errors, as the next prompt shows them; `others`: tasks whose agents
    ran at the same time in the same tree (the change may be theirs)."""
    out = []
    also = f" (the agents of {', '.join(others[:MAX_NAMED])} ran at the same time: it may not be your change)" \
        if others else ""
    for path, why in sorted(protected.items()):
        if path in left:
            out.append(f"protected: {path} ({why}) was changed by you and also by someone else between "
                       f"attempts; it is left as it is now. Do not change it.")
        else:
            aside = f" (the changed version is kept at {kept[path]})" if path in kept else ""
            out.append(f"protected: {path} ({why}): you may not change it; it was put back as it was{aside}{also}. "
                       f"Make the checks pass by changing the code, not the checks.")
    if outside:
        names = ", ".join(outside[:MAX_NAMED]) + (f" and {len(outside) - MAX_NAMED} more" if len(outside) > MAX_NAMED else "")
        out.append(f"outside write_scope ({scope}): {names}: changes there are not allowed; they were undone.")
    return out


class WorktreeGuard:
    """An isolated attempt's change against its base commit."""

    reads_before = False  # (before: nothing to record, the base is the reference)
    reads_after = True

    def __init__(self, rules_: Rules, workspace: Workspace, task_id: str, iso):
        self.rules, self.ws, self.tid, self.iso = rules_, workspace, task_id, iso
        self._base: str | None = None
        self._files: set[str] = set()

    def before(self) -> None:
        pass  # the base is the reference

    def close(self) -> None:
        pass

    def _kind_at_base(self, attempt, prefix: str):
        files = self._base_files(attempt)

        def kind(rel: str) -> str | None:
            if prefix + rel in files:
                return "file"
            below = prefix + rel + "/"
            return "dir" if any(f.startswith(below) for f in files) else None
        return kind

    def _base_files(self, attempt) -> set[str]:
        """The paths of the base commit (from the worktree's top), read once per base."""
        if self._base != attempt.base:
            out = attempt.git.run("ls-tree", "-r", "-z", "--name-only", attempt.base, worktree=False)
            self._base, self._files = attempt.base, {p for p in out.split("\0") if p}
        return self._files

    def after(self, attempt) -> list[str]:
        """Errors for what the attempt changed against the rules (empty: nothing), with
        those files put back as they are at its base."""
        if attempt is None or not getattr(attempt, "made", True):
            return []
        self.iso.trees.verify(attempt)  # its .git as git wrote it (Tampered: the attempt is rejected)
        git, prefix = attempt.git, _prefix(attempt)
        brought = set(attempt.brought)
        changed = [c.path for c in worktrees.changes(attempt)]  # the one definition of an attempt's change
        # ignored files never land, but a check may read them (a conftest.py hidden by a
        # .gitignore line): they count for protection, test runners' caches aside
        ignored = [p.rstrip("/") for p in git.run("ls-files", "-z", "--others", "--ignored", "--exclude-standard",
                                                  "--directory").split("\0") if p]
        ignored = [p for p in ignored if not EXCLUDED_NAMES.intersection(p.split("/"))]
        changed = [p for p in dict.fromkeys(changed + ignored)
                   if not any(p == b or p.startswith(b + "/") for b in brought)]
        if not changed:
            return []
        ignored_set = set(ignored)
        at_base = self._base_files(attempt)
        self.rules.name_command_paths(attempt.base, kind=self._kind_at_base(attempt, prefix))
        protected: dict[str, str] = {}
        outside: list[str] = []
        for top in changed:
            if not top.startswith(prefix):
                continue  # outside the project (a repository holding more than it)
            rel = top[len(prefix):]
            why = self.rules.why(rel, top in at_base)
            if why is not None:
                protected[rel] = why
            elif self.rules.outside_scope(rel) and top not in ignored_set:  # an ignored file never lands
                outside.append(rel)
        bad = [*protected, *outside]
        if not bad:
            return []
        kept = {}
        for rel in bad:
            path = _no_link_on_the_way(attempt.workdir, rel)
            if os.path.isdir(path) and not os.path.islink(path):
                _remove_tree(path)
            elif os.path.lexists(path):
                kept[rel] = _keep_aside(self.ws, self.tid, path, rel)
        restore = [prefix + rel for rel in bad if prefix + rel in at_base]
        if restore:
            git.run("checkout", "-q", attempt.base, "--", *(f":(top,literal){p}" for p in restore))
        return messages(protected, outside, self.rules.scope_text(), kept, set())


class SharedGuard:
    """A task in the project's own tree: protected files compared around each agent call."""

    def __init__(self, rules_: Rules, workspace: Workspace, task_id: str, root: Path):
        self.rules, self.ws, self.tid, self.root = rules_, workspace, task_id, root
        self.store = workspace.harness / "protected" / task_file_name(task_id)
        self.last: dict[str, str] | None = None  # after the previous attempt (its files put back)
        self.before_ids: dict[str, str] = {}
        # the copies of before_ids' files when they are light (LIGHT_FILES, LIGHT_BYTES): held
        # here, as read for hashing, instead of a directory and a file each per task (a file's
        # creation costs more than all the rest of a light guard's work); else in self.store
        self.copies: dict[str, bytes] = {}
        self.edited: set[str] = set()  # changed while no agent ran: a person's edit
        self.overlapped: set[SharedGuard] = set()  # other tasks' guards whose call ran during this one's
        self.reads = bool(rules_.accept or rules_.score or rules_.shared_entries())  # (else: no file to read)

    @property
    def reads_before(self) -> bool:
        """Whether its steps go to a worker thread: it has files to hash, and the last snapshot in
        this tree (any task's) hashed more than LIGHT_FILES or LIGHT_BYTES, or none was taken yet."""
        if not self.reads:
            return False
        files, size = _SEEN.get(str(self.root), (LIGHT_FILES + 1, 0))
        return files > LIGHT_FILES or size > LIGHT_BYTES

    reads_after = reads_before

    def before(self) -> None:
        self.rules.name_command_paths("tree", self.root)
        with _RUNNING_LOCK:
            running = _RUNNING.setdefault(str(self.root), set())
            self.overlapped = set(running)
            for other in running:
                other.overlapped.add(self)
            running.add(self)
        copies: dict[str, bytes] = {}
        ids = self._snapshot(copies)
        last = self.last if self.last is not None else ids
        self.edited = {p for p in set(ids) | set(last) if ids.get(p) != last.get(p)}
        if not all(cid in copies for cid in ids.values()):  # not light: copies on disk
            copies = {}
            missing = [(path, cid) for path, cid in ids.items() if not os.path.lexists(self.store / cid)]
            if missing:  # one walk to the task's copies for all of them (a walk costs more than a small file)
                fd = self.ws.open_dir(self.store)
                try:
                    for path, cid in missing:
                        write_atomic_at(fd, cid, _read(self.root / path), lambda c=cid: self.ws.rel(self.store / c))
                finally:
                    os.close(fd)
        self.before_ids, self.copies = ids, copies

    def after(self, attempt=None) -> list[str]:
        now = self._snapshot()
        self._leave()
        before = self.before_ids
        protected: dict[str, str] = {}
        for path in sorted(set(before) | set(now)):
            if before.get(path) == now.get(path):
                continue
            why = self.rules.why(path, path in before)
            if why is not None:
                protected[path] = why
        kept: dict[str, str] = {}
        left = {p for p in protected if p in self.edited}
        for path in protected:
            if path in left:
                continue
            target = _no_link_on_the_way(self.root, path)
            if os.path.isdir(target) and not os.path.islink(target):
                _remove_tree(target)
            elif os.path.lexists(target):
                kept[path] = _keep_aside(self.ws, self.tid, target, path)
            if path in before:
                self._put_back(path, before[path])
        self.last = {**now, **{p: before[p] for p in protected if p not in left and p in before}}
        for p in protected:
            if p not in left and p not in before:
                self.last.pop(p, None)
        others = sorted(g.tid for g in self.overlapped if g.tid != self.tid)
        return messages(protected, [], "", kept, left, others)

    def _leave(self) -> None:
        with _RUNNING_LOCK:
            _RUNNING.get(str(self.root), set()).discard(self)

    def close(self) -> None:
        """The task ended: its copies go (they are only needed between its attempts)."""
        self._leave()
        if not os.path.lexists(self.store):  # (one look, not a walk: most tasks made no copy)
            return
        try:
            fd = self.ws.open_dir(self.store, create=False)
        except FileNotFoundError:
            return
        try:
            for name in os.listdir(fd):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    def _put_back(self, path: str, cid: str) -> None:
        data = self.copies.get(cid)
        if data is None:
            data = self.ws.read_bytes(self.store / cid)
        target = self.root / path
        self.ws.write_atomic(target, data)
        mode = int(cid.split(":", 1)[0], 8)
        os.chmod(target, mode, follow_symlinks=False)

    def _snapshot(self, copies: dict[str, bytes] | None = None) -> dict[str, str]:
        """path -> 'mode:sha256' of each protected file there now (links and special files
        are compared by what they are, never followed). `copies`: filled with 'mode:sha256'
        -> the bytes hashed, while the files are light (emptied once they are not)."""
        out: dict[str, str] = {}
        size = 0
        root = str(self.root)
        why: dict[str, str | None] = {}  # (a file several entries name is matched once)
        for e in self.rules.shared_entries():
            for rel, st in _walk(root, e.path):
                if rel in out:
                    continue
                if rel not in why:
                    why[rel] = self.rules.why(rel, True)
                if why[rel] is None:
                    continue
                if st is None:
                    try:
                        st = os.lstat(os.path.join(root, rel))
                    except OSError:
                        continue
                if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_HASHED_BYTES:
                    data = _read(os.path.join(root, rel))
                    cid = out[rel] = f"{stat.S_IMODE(st.st_mode):o}:{_sha256(os.path.join(root, rel), data)}"
                    size += st.st_size
                    if copies is not None:
                        copies[cid] = data
                        if len(out) > LIGHT_FILES or size > LIGHT_BYTES:
                            copies.clear()
                            copies = None
        if self.reads:  # (a guard with nothing protected says nothing of the others' files)
            _SEEN[str(self.root)] = (len(out), size)
        return out


def harnessc_wrote(root: Path, rel: str) -> None:
    """harnessc itself changed protected file `rel` while agents may run (runtime/growth/:
    roadmap.md grown by a proposal): each shared-tree guard whose call is in flight takes the
    new version as the one from before its call, so it is neither put back nor blamed on its agent."""
    with _RUNNING_LOCK:
        guards = list(_RUNNING.get(str(root), ()))
    path = Path(root) / rel
    try:
        st = os.lstat(path)
        data = _read(path)
    except OSError:
        return
    cid = f"{stat.S_IMODE(st.st_mode):o}:{hashlib.sha256(data).hexdigest()}"
    for g in guards:
        if rel not in g.before_ids:
            continue
        if g.copies:  # a light guard holds its copies in memory
            g.copies[cid] = data
        elif not os.path.lexists(g.store / cid):
            g.ws.write_atomic(g.store / cid, data)
        g.before_ids[rel] = cid
        if g.last is not None:
            g.last[rel] = cid


def _walk(root: str, pattern: str):
    """(project-relative path, its lstat or None) of the files `pattern` names: walked from its
    literal start, no link followed, test runners' caches and `.harness/` aside."""
    rel = _literal_start(pattern)
    top = os.path.join(root, rel) if rel else root
    try:
        st = os.lstat(top)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        yield rel, st
        return
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED)
        base = Path(dirpath).relative_to(root).as_posix()
        for name in sorted(filenames):
            path = name if base == "." else f"{base}/{name}"
            if rules.matches(pattern, path):
                yield path, None


def _sha256(path: str, data: bytes) -> str:
    """The sha256 of `data`, read from `path` (not hashed again when the same bytes were last
    read there: `==` on bytes is far cheaper than a hash)."""
    last = _HASHED.get(path)
    if last is not None and last[0] == data:
        return last[1]
    digest = hashlib.sha256(data).hexdigest()
    if len(data) <= LIGHT_BYTES:
        if len(_HASHED) >= HASHED_FILES and path not in _HASHED:
            _HASHED.clear()  # (a bound: the protected files are few)
        _HASHED[path] = (data, digest)
    return digest


@functools.lru_cache(maxsize=1024)
def _literal_start(pattern: str) -> str:
    """The part of `pattern` before its first glob character's part ('' : the project)."""
    start: list[str] = []
    for p in pattern.replace("\\", "/").split("/"):
        if p in ("", "."):
            continue
        if any(c in p for c in "*?["):
            break
        start.append(p)
    return "/".join(start)


def _read(path: Path | str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:  # (os.read, not a file object: a small file's read costs less than the object)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _keep_aside(ws: Workspace, tid: str, path: Path, rel: str) -> str:
    """Move the agent's version of `rel` to .harness/rejected/<task>/<rel>; its path there."""
    target = ws.harness / "rejected" / task_file_name(tid) / rel
    if os.path.lexists(target):
        if os.path.isdir(target) and not os.path.islink(target):
            _remove_tree(target)
        else:
            ws.unlink(target)
    ws.move(path, target)
    return ws.rel(target)


def _no_link_on_the_way(root: Path, rel: str) -> Path:
    """root/rel, once no directory between them is a symbolic link (a put-back or a removal
    through one would reach outside the checkout); raises WorkspaceError otherwise."""
    here = Path(root)
    for part in rel.split("/")[:-1]:
        here = here / part
        if os.path.islink(here):
            raise WorkspaceError(f"{rel} is reached through a symbolic link ({part}): not put back")
    return here / rel.rsplit("/", 1)[-1]


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _prefix(attempt) -> str:
    """The project's directory inside the worktree, as git writes paths ('' or 'sub/')."""
    rel = os.path.relpath(attempt.workdir, attempt.path)
    return "" if rel == "." else rel.replace(os.sep, "/") + "/"


@functools.lru_cache(maxsize=4)
def _workspace(root: Path) -> Workspace:
    """The project's Workspace, built once (its paths cost more than a no-op task's guard)."""
    return Workspace(root)


def guard(plan: Plan, node: PlanNode, root: Path, iso=None):
    """The task's guard: WorktreeGuard when it runs isolated (`iso`: the run's
    worktree/isolation.Isolation), else SharedGuard."""
    ws = _workspace(root)
    r = Rules(plan, node)
    return WorktreeGuard(r, ws, node.id, iso) if iso is not None else SharedGuard(r, ws, node.id, root)
