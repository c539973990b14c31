"""The tripwire: what an agent changed in the repository's shared git directory, undone.

An attempt's worktree shares the user's git directory: its config, hooks, refs and the other
worktrees' records are one `open()` away from any agent. At the start of an isolated run
the tripwire records them (`record`):

* files: `HEAD`, `config`, `config.worktree`, `info/{attributes,exclude,grafts}`, `shallow`,
  every file under `hooks/` and `objects/info/` (but the caches git itself rewrites:
  `packs`, `commit-graph`, `commit-graphs/`), and of each worktree record
  `worktrees/<name>/{gitdir,HEAD,commondir,config.worktree}` (but the HEAD of the attempts'
  own worktrees, which their agents move by committing);
* refs: every loose ref under `refs/` and every ref in `packed-refs`, but the attempts' own
  (`refs/harnessc/<run>/...`): the user's branches and tags, `refs/replace/`, other runs'
  refs, the integration branch. A branch that did not exist and was created while attempts
  ran (an agent's `git checkout -b` in its checkout) is deleted again, without tainting
  anything: its commits are in the attempt's change, and nothing of it stays.

Another harnessc run working in the same repository (another project) at the same time adds
and removes worktrees under its `.harness/worktrees/` and moves refs under `refs/harnessc/`
and `refs/heads/harnessc/`: a change there (this run's integration branch aside) is taken as
it is, whenever it happens, never put back.

`check` (before each landing and each new checkout, when the last running attempt ends, and
at the run's end) compares them with the record plus harnessc's own changes (`refresh_refs`,
`refresh_worktree` under `lock`). A change found while attempts ran since the last check
(`begin`/`end` mark them) is undone - a ref put back or deleted with git, a file written
back from its recorded bytes, a new file moved aside to `.harness/tampered/` (nothing is
lost) - and every one of those attempts is tainted (`taken`: its landing is rejected). A
change found while none ran (the user, another harnessc run) becomes the record.

Cheap: a check is an lstat per file (content is read and hashed only when its stat data
changed), one directory listing per refs directory, and packed-refs parsed only when it
changed. No git process unless something is put back. An attempt stays in the window of
the check after its end, so what it (or a process it left) changes is found by the next one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

FILES = ("HEAD", "config", "config.worktree", "info/attributes", "info/exclude", "info/grafts", "shallow")
TREES = ("hooks", "objects/info")  # every file under them
DERIVED = {"objects/info/packs", "objects/info/commit-graph", "objects/info/commit-graphs"}  # caches git rewrites
WORKTREE_FILES = ("gitdir", "HEAD", "commondir", "config.worktree")
KEEP_BYTES = 1 << 20  # a file up to this size is kept whole (to be written back); larger: its hash only
# Another harnessc run's (another project in the same repository, working at the same time):
# its branches and refs, and the records of worktrees under a `.harness/worktrees/`.
OTHER_RUNS = ("refs/heads/harnessc/", "refs/harnessc/")
OTHER_TREES = b"/.harness/worktrees/"


@dataclass(frozen=True)
class Entry:
    """One file as recorded: its stat data (the fast path), what it is and holds."""

    stat: tuple
    mode: int  # type and permission bits
    digest: str  # sha256 of the content, or "link:<target>" for a symbolic link
    data: bytes | None = None  # the content, to write back (None: a link, or too large)


@dataclass
class Finding:
    """What one check found changed (names as git shows them: `.git/hooks/x`, `refs/heads/main`)."""

    changed: list[str]
    tampering: bool  # attempts ran since the last check: put back, those attempts tainted
    attempts: list[str] = field(default_factory=list)  # their labels (task ids)
    details: list[str] = field(default_factory=list)  # one line each: what was there, what was done
    not_restored: list[str] = field(default_factory=list)
    other_run: bool = False  # only another harnessc run's branches, refs and worktrees changed
    branches_removed: list[str] = field(default_factory=list)  # branches agents created, deleted again


class Tripwire:
    def __init__(self, common: Path, shown: str, own_refs: str, put_ref: Callable[[str, str | None], None],
                 aside: Path):
        """common: the common git directory; shown: how names are shown ('.git/'); own_refs:
        the attempts' ref prefix (`refs/harnessc/<run>/`), never recorded; put_ref(ref,
        value or None): sets or deletes a ref with git; aside: where replaced files go."""
        self.common, self.shown, self.own_refs, self.put_ref, self.aside = common, shown, own_refs, put_ref, aside
        self._c = str(common) + os.sep  # + a name: plain strings, a check's paths (pathlib costs more than the stat)
        self.lock = threading.RLock()  # held by a check and by harnessc's own changes to what is recorded
        self.files: dict[str, Entry] = {}
        self.refs: dict[str, str] = {}
        self._loose: dict[str, tuple[tuple, str]] = {}  # ref file -> (stat, value): read once per change
        self._packed: tuple[tuple | None, dict[str, str]] = (None, {})
        self.own_worktrees: set[str] = set()  # worktree record names of attempts (their HEAD is theirs)
        self.names: dict[str, str] = {}  # attempt worktree path -> its record's name
        self.active: dict[str, str] = {}  # attempt key -> label, running now
        self.window: dict[str, str] = {}  # attempt key -> label, ran since the last check
        self.tainted: dict[str, list[str]] = {}  # attempt key -> what was tampered with while it ran
        self.mine: set[str] = set()  # refs of this run in OTHER_RUNS' namespaces (the integration branch)

    # ------------------------------------------------------------------ attempts

    def begin(self, key: str, label: str) -> None:
        with self.lock:
            self.active[key] = self.window[key] = label
            self.tainted.pop(key, None)

    def end(self, key: str) -> None:
        with self.lock:
            self.active.pop(key, None)

    def taken(self, key: str) -> list[str]:
        """What was tampered with while attempt `key` ran ([]: nothing); asked once."""
        with self.lock:
            return self.tainted.pop(key, [])

    # ------------------------------------------------------------------ the record

    def record(self) -> None:
        with self.lock:
            self.files = self._scan_files({})
            self.refs = self._scan_refs()

    def refresh_refs(self, refs: list[str]) -> None:
        """harnessc changed these refs itself (the caller holds `lock` since before the change):
        read them alone, their loose file or else packed-refs."""
        with self.lock:
            packed = self._packed_refs()
            for ref in refs:
                try:
                    st = os.lstat(self._c + ref)
                    value = _ref_value(self._c + ref, st) if stat.S_ISREG(st.st_mode) or \
                        stat.S_ISLNK(st.st_mode) else None
                except OSError:
                    value = None
                value = value if value is not None else packed.get(ref)
                if value is None:
                    self.refs.pop(ref, None)
                else:
                    self.refs[ref] = value

    def adopt_worktree(self, path: Path) -> str | None:
        """harnessc added the attempt worktree at `path`: its record is taken as it is now
        (HEAD aside, its agent's to move); the record's name, or None."""
        try:
            text = (path / ".git").read_text(errors="replace").strip()
        except OSError:
            return None
        if not text.startswith("gitdir:"):
            return None
        name = Path(text[7:].strip()).name
        with self.lock:
            self.own_worktrees.add(name)
            self.names[str(path)] = name
            self.refresh_worktree(name)
        return name

    def forget_worktree(self, path: str) -> None:
        """harnessc removed the attempt worktree at `path`: its record goes from the record too."""
        with self.lock:
            name = self.names.pop(path, None)
            if name is not None:
                self.own_worktrees.discard(name)
                self.refresh_worktree(name)

    def refresh_worktree(self, name: str) -> None:
        """harnessc added or removed worktree record `name`: what it holds now is recorded."""
        with self.lock:
            prefix = f"worktrees/{name}/"
            for key in [k for k in self.files if k.startswith(prefix)]:
                del self.files[key]
            self.files.update(self._scan_worktree(name, {}))

    # ------------------------------------------------------------------ the check

    def check(self) -> Finding | None:
        """Compare with the record (see the module docstring); None when nothing changed."""
        with self.lock:
            now_files = self._scan_files(self.files)
            now_refs = self._scan_refs()
            ran, self.window = self.window, dict(self.active)
            files = sorted(k for k in self.files.keys() | now_files.keys()
                           if _content(self.files.get(k)) != _content(now_files.get(k)))
            refs = sorted(k for k in self.refs.keys() | now_refs.keys() if self.refs.get(k) != now_refs.get(k))
            others = [k for k in files if self._other_tree(k, now_files)] + \
                [k for k in refs if k.startswith(OTHER_RUNS) and k not in self.mine]
            if others:  # another harnessc run's doing: taken as it is, whenever it happened
                for k in others:
                    self._take(k, now_files, now_refs)
                files = [k for k in files if k not in others]
                refs = [k for k in refs if k not in others]
            # a branch an agent created (`git checkout -b` in its checkout) is ordinary git use,
            # not tampering: its commits are in the attempt's change anyway. Deleted again, so
            # nothing of it stays in the user's repository; the attempt is not rejected for it.
            created = [k for k in refs if ran and k.startswith("refs/heads/") and k not in self.refs]
            for k in created:
                try:
                    self.put_ref(k, None)
                except Exception:  # noqa: BLE001 - then it is what it is: taken below like a change of ours
                    pass
                self.refs.pop(k, None)
            refs = [k for k in refs if k not in created]
            if not files and not refs:
                self.files = now_files  # the same content (or another run's, taken); newer stat data
                self.refs = self._scan_refs() if created else self.refs
                shown = [k if k.startswith("refs/") else self.shown + k for k in others]
                if created:
                    return Finding(shown + created, False, branches_removed=created, other_run=bool(others))
                return Finding(shown, False, other_run=True) if others else None
            details = [self._file_line(k, now_files.get(k)) for k in files] + \
                      [_ref_line(k, self.refs.get(k), now_refs.get(k)) for k in refs]
            shown = [self.shown + k for k in files] + refs
            if not ran:
                self.files, self.refs = now_files, now_refs
                return Finding(shown, False, details=details)
            failed = self._restore(files, now_files, refs, now_refs)
            # what could not be put back is what it is now: no check finds it again
            self.files, self.refs = self._scan_files(self.files), self._scan_refs()
            for key in ran:
                self.tainted.setdefault(key, []).extend(n for n in shown if n not in self.tainted[key])
            return Finding(shown, True, sorted(set(ran.values())), details, failed)

    def _other_tree(self, name: str, now_files: dict[str, Entry]) -> bool:
        """Whether `name` is in the record of a worktree under a `.harness/worktrees/` (another run's)."""
        parts = name.split("/")
        if parts[0] != "worktrees" or len(parts) < 3 or parts[1] in self.own_worktrees:
            return False
        gitdir = f"worktrees/{parts[1]}/gitdir"
        return any(e is not None and e.data is not None and OTHER_TREES in e.data
                   for e in (self.files.get(gitdir), now_files.get(gitdir)))

    def _take(self, name: str, now_files: dict[str, Entry], now_refs: dict[str, str]) -> None:
        for have, now in ((self.files, now_files), (self.refs, now_refs)):
            if name in now:
                have[name] = now[name]
            else:
                have.pop(name, None)

    def _file_line(self, name: str, now: Entry | None) -> str:
        was = self.files.get(name)
        what = "added" if was is None else "removed" if now is None else "changed"
        return f"{self.shown}{name} {what}"

    # ------------------------------------------------------------------ putting back

    def _restore(self, files: list[str], now_files: dict[str, Entry], refs: list[str],
                 now_refs: dict[str, str]) -> list[str]:
        """Put back what changed: files first (the config the ref updates read), then refs.
        The names that could not be put back."""
        failed = []
        stamp = time.strftime("%Y%m%dT%H%M%S")
        moved: set[str] = set()
        for name in sorted(files, key=lambda n: (n != "config", n)):  # the config first
            was = self.files.get(name)
            try:
                top = _new_worktree_dir(name, self.files)
                if was is None and top:
                    if top not in moved:  # a whole worktree record someone added: moved aside whole
                        moved.add(top)
                        self._put_aside(top, stamp)
                    continue
                if name in now_files or os.path.lexists(self.common / name):
                    self._put_aside(name, stamp)
                if was is not None:
                    _write_back(self.common / name, was)
            except OSError as e:
                failed.append(f"{self.shown}{name} ({e.strerror or e})")
        for ref in refs:
            try:
                self.put_ref(ref, self.refs.get(ref))
            except Exception as e:  # noqa: BLE001 - named in the alert; the check goes on
                failed.append(f"{ref} ({str(e)[:200]})")
        return failed

    def _put_aside(self, name: str, stamp: str) -> None:
        """Move the current file (or directory) `name` to .harness/tampered/<time>/ (nothing is lost)."""
        target = self.aside / stamp / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(target):
            target = target.with_name(f"{target.name}.{time.monotonic_ns()}")
        shutil.move(str(self.common / name), str(target))

    # ------------------------------------------------------------------ scanning

    def _scan_files(self, known: dict[str, Entry]) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        for name in FILES:
            _look(self._c, name, known, out)
        for top in TREES:
            _walk(self._c, top, known, out)
        try:
            names = [e.name for e in os.scandir(self._c + "worktrees")]
        except OSError:
            names = []
        for name in names:
            out.update(self._scan_worktree(name, known))
        return out

    def _scan_worktree(self, name: str, known: dict[str, Entry]) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        base = f"worktrees/{name}"
        try:
            is_dir = stat.S_ISDIR(os.lstat(self._c + base).st_mode)
        except OSError:
            return out
        if not is_dir:
            _look(self._c, base, known, out)  # a link (or file) in place of a record
            return out
        for leaf in WORKTREE_FILES:
            if leaf == "HEAD" and name in self.own_worktrees:
                continue
            _look(self._c, f"{base}/{leaf}", known, out)
        return out

    def _scan_refs(self) -> dict[str, str]:
        """Every ref (loose wins over packed) but the attempts' own: ref -> its value."""
        refs = dict(self._packed_refs())
        seen: dict[str, tuple[tuple, str]] = {}
        stack = ["refs"]
        while stack:
            rel = stack.pop()
            try:
                entries = list(os.scandir(self._c + rel))
            except OSError:
                continue
            for e in entries:
                name = f"{rel}/{e.name}"
                if name.startswith(self.own_refs) or (name + "/") == self.own_refs:
                    continue
                if e.is_dir(follow_symlinks=False):
                    stack.append(name)
                    continue
                if e.name.endswith(".lock"):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                key = _key(st)
                cached = self._loose.get(name)
                if cached is not None and cached[0] == key:
                    value = cached[1]
                else:
                    value = _ref_value(self._c + name, st)
                seen[name] = (key, value)
                if value is not None:
                    refs[name] = value
        self._loose = seen
        return refs

    def _packed_refs(self) -> dict[str, str]:
        path = self._c + "packed-refs"
        try:
            st = os.lstat(path)
        except OSError:
            self._packed = (None, {})
            return {}
        key = _key(st)
        if self._packed[0] == key:
            return self._packed[1]
        refs: dict[str, str] = {}
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
        except OSError:
            text = ""
        for line in text.splitlines():
            if not line or line[0] in "#^":
                continue
            sha, _, name = line.partition(" ")
            if name and not name.startswith(self.own_refs):
                refs[name] = sha
        self._packed = (key, refs)
        return refs


def _key(st: os.stat_result) -> tuple:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _content(entry: Entry | None) -> tuple | None:
    return None if entry is None else (stat.S_IFMT(entry.mode), entry.mode & 0o777, entry.digest)


def _look(common: str, name: str, known: dict[str, Entry], out: dict[str, Entry]) -> None:
    """Record file `name` (under `common`, which ends in a separator) into `out` when it is
    there (its known entry when its stat is unchanged)."""
    path = common + name
    try:
        st = os.lstat(path)
    except OSError:
        return
    key = _key(st)
    old = known.get(name)
    if old is not None and old.stat == key:
        out[name] = old
        return
    entry = _entry(path, st, key)
    if entry is not None:
        out[name] = entry


def _walk(common: str, top: str, known: dict[str, Entry], out: dict[str, Entry]) -> None:
    stack = [top]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(common + rel))
        except OSError:
            if rel == top:
                _look(common, top, known, out)  # a file or link where the directory should be
            continue
        for e in entries:
            name = f"{rel}/{e.name}"
            if name in DERIVED:
                continue
            if e.is_dir(follow_symlinks=False):
                stack.append(name)
            else:
                _look(common, name, known, out)


def _entry(path: str, st: os.stat_result, key: tuple) -> Entry | None:
    if stat.S_ISLNK(st.st_mode):
        try:
            return Entry(key, st.st_mode, "link:" + os.readlink(path))
        except OSError:
            return None
    if stat.S_ISDIR(st.st_mode):
        return Entry(key, st.st_mode, "dir")
    if not stat.S_ISREG(st.st_mode):
        return Entry(key, st.st_mode, "special")
    h = hashlib.sha256()
    kept = bytearray()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 16):
                h.update(chunk)
                if len(kept) <= KEEP_BYTES:
                    kept += chunk
    except OSError:
        return None
    return Entry(key, st.st_mode, h.hexdigest(), bytes(kept) if len(kept) <= KEEP_BYTES else None)


def _write_back(path: Path, was: Entry) -> None:
    """Put the recorded file (or link) back at `path` (replaced whole: a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.harnessc-{os.getpid()}")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    if was.digest.startswith("link:"):
        os.symlink(was.digest[5:], tmp)
    elif was.data is None:
        raise OSError(f"larger than {KEEP_BYTES} bytes: not kept")
    else:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(was.data)
        os.chmod(tmp, stat.S_IMODE(was.mode))
    os.replace(tmp, path)


def _new_worktree_dir(name: str, recorded: dict[str, Entry]) -> str | None:
    """`worktrees/<x>` when `name` is in a worktree record of which nothing was recorded."""
    parts = name.split("/")
    if parts[0] != "worktrees" or len(parts) < 2:
        return None
    top = f"worktrees/{parts[1]}"
    return None if any(k == top or k.startswith(top + "/") for k in recorded) else top


def _ref_value(path: str, st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        try:
            return "link:" + os.readlink(path)
        except OSError:
            return None
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "surrogateescape").strip()
    except OSError:
        return None


def _ref_line(ref: str, was: str | None, now: str | None) -> str:
    if was is None:
        return f"{ref} created at {(now or '')[:12]}"
    if now is None:
        return f"{ref} deleted (was {was[:12]})"
    return f"{ref} moved from {was[:12]} to {now[:12]}"
