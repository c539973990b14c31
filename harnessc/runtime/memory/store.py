"""The memory file, `.harness/memory/memory.jsonl`: one JSON object a line, appended.

An entry: {"id", "kind": decision|failure|constraint|done, "text", "task", "run", "at",
"files": [...], and per kind "cause"/"fix" (failure), "expires" (constraint: an ISO time in
UTC, or "run": this run only)}; `done` lines (one per task that ended well) are what the
running summary (summary.py, `summary.json`) is rewritten from. `{"forget": ID}` removes an entry (`harnessc memory forget`): appending keeps a
running harnessc and the command from overwriting each other.

A line that is not such an object (a damaged or hand-edited file) makes the whole file
unreadable as memory: it is moved aside to `memory.jsonl.damaged` (nothing is lost), one
line says so, and memory starts empty. Ids are the kind's letter and a hash of the task and
text, so the same fact told twice is one entry.

`summary.json` is read and written here too (SummaryFile; summary.py decides when and what):
`harnessc memory` and `show` read it without loading the summary's agent.
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from ...workspace import Workspace, WorkspaceError, atomic_file_at
from .. import clock

KINDS = ("decision", "failure", "constraint", "done")
FILE = "memory.jsonl"


@dataclass(frozen=True)
class Settings:
    """harness.yaml `memory:` as the plan holds it."""

    on: bool = True
    summary_tokens: int = 1500
    inject_tokens: int = 2000
    every: int = 5
    agent: str | None = None

    @classmethod
    def of(cls, raw: dict | None) -> "Settings":
        if not raw:
            return cls()  # a plan built before memory existed: the defaults
        return cls(**{k: raw[k] for k in ("on", "summary_tokens", "inject_tokens", "every", "agent") if k in raw})


LETTER = {"decision": "d", "failure": "f", "constraint": "c", "done": "s"}


def entry_id(kind: str, task: str, text: str) -> str:
    return LETTER[kind] + "-" + hashlib.sha256(f"{kind}\0{task}\0{text}".encode()).hexdigest()[:8]


_LAST_ISO: tuple[int, str] = (-1, "")  # (a second, its text): a run stamps every task's entry


def now_iso() -> str:
    """The time now in UTC, as entries keep it: the runtime's clock (a test's virtual one)."""
    global _LAST_ISO
    second = int(clock.time() // 1)
    if _LAST_ISO[0] != second:
        _LAST_ISO = (second, datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _LAST_ISO[1]


def active(entry: dict, run_id: str | None, now: str | None = None) -> bool:
    """Whether a constraint still holds: "run" ones within the run that made them, timed
    ones until their time (ISO strings in UTC compare as text)."""
    expires = entry.get("expires")
    if not expires:
        return True
    if expires == "run":
        return run_id is not None and entry.get("run") == run_id
    return (now or now_iso()) < expires


class DamagedMemory(Exception):
    pass


def _check(obj: object, n: int) -> dict:
    if not isinstance(obj, dict):
        raise DamagedMemory(f"line {n} is not a JSON object")
    if "forget" in obj:
        if not isinstance(obj["forget"], str):
            raise DamagedMemory(f"line {n}: forget must name an entry id")
        return obj
    for key in ("id", "kind", "text", "task"):
        if not isinstance(obj.get(key), str):
            raise DamagedMemory(f"line {n}: an entry needs a string {key!r}")
    if obj["kind"] not in KINDS:
        raise DamagedMemory(f"line {n}: unknown kind {obj['kind']!r} (one of {', '.join(KINDS)})")
    if not isinstance(obj.get("files", []), list):
        raise DamagedMemory(f"line {n}: files must be a list")
    return obj


def parse(text: str) -> dict[str, dict]:
    """The live entries of a memory file's text by id, oldest first. Raises DamagedMemory."""
    entries: dict[str, dict] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = _check(json.loads(line), n)
        except json.JSONDecodeError as e:
            raise DamagedMemory(f"line {n} is not JSON ({e.msg})") from None
        _apply(entries, obj)
    return entries


def _apply(entries: dict[str, dict], obj: dict) -> None:
    if "forget" in obj:
        entries.pop(obj["forget"], None)
    else:
        entries.pop(obj["id"], None)  # told again: now the newest
        entries[obj["id"]] = obj


# json.dumps(entry, ensure_ascii=False, sort_keys=True), with one encoder (dumps makes one per
# call, and a run appends a line at every task's end)
_line = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode


def stat_key(path: Path) -> tuple | None:
    """What tells a file's versions apart (None: there is none): a writer replaces or appends,
    so mtime, size or inode moves."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return _key(st)


def _key(st: os.stat_result) -> tuple:
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class MemoryStore:
    """The project's memory file, read again whenever something else changed it (a `memory
    forget` during a run counts from the next prompt on); what this process appends updates
    what it holds without reading the file again."""

    def __init__(self, root: Path, say: Callable[[str], None] | None = None, keep_done: int | None = None,
                 aside: bool = True):
        self.ws = Workspace(root)
        self.aside = aside  # a damaged file is moved aside (False: a reader that only looks, the report)
        self.dir = self.ws.harness / "memory"
        self.path = self.dir / FILE
        self.say = say or (lambda line: None)
        self.keep_done = keep_done  # summary lines held (None: all); the file keeps them all till compact()
        self._seen: tuple | None = None
        self._entries: dict[str, dict] = {}
        self._told = 0  # entries held that are not `done` lines (a task's section has nothing else to show)
        self._done = 0  # `done` lines held
        self._trimmed = False  # whether _trim left out lines of the file
        self._dir_fd: int | None = None  # the memory directory, held open by a writer (dir_fd)
        self._closer: weakref.finalize | None = None
        self._file: int | None = None  # memory.jsonl, held open by a writer (_file_fd)
        self._file_closer: weakref.finalize | None = None

    def dir_fd(self) -> int:
        """The memory directory's descriptor, opened (and confined) once: a run writes here at
        every task's end, and a walk from the project's root each time cost more than the write."""
        if self._dir_fd is not None and os.fstat(self._dir_fd).st_nlink == 0:
            self.close()  # removed while the run ran: made again, as a walk would
        if self._dir_fd is None:
            self._dir_fd = fd = self.ws.open_dir(self.dir)
            self._closer = weakref.finalize(self, os.close, fd)
        return self._dir_fd

    def _file_fd(self) -> tuple[int, os.stat_result]:
        """memory.jsonl opened for appending, and its stat: held open by a writer, opened again
        (with open_in's checks) once it is no longer the one file of that name (removed,
        replaced, or given another name: a hard link)."""
        if self._file is not None:
            st = os.fstat(self._file)
            if st.st_nlink == 1:
                return self._file, st
            self._close_file()
        fd = self.ws.open_in(self.dir_fd(), self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, "write", in_place=True)
        self._file, self._file_closer = fd, weakref.finalize(self, os.close, fd)
        return fd, os.fstat(fd)

    def _close_file(self) -> None:
        if self._file_closer is not None:
            self._file_closer()
        self._file = self._file_closer = None

    def close(self) -> None:
        """The descriptors are closed (opened again when needed)."""
        self._close_file()
        if self._closer is not None:
            self._closer()
        self._dir_fd = self._closer = None

    def write_atomic(self, path: Path, data: bytes) -> None:
        """Workspace.write_atomic of a file of the memory directory, through dir_fd."""
        with atomic_file_at(self.dir_fd(), path.name, lambda: self.ws.rel(path)) as f:
            f.write(data)

    def entries(self) -> list[dict]:
        return list(self._current().values())

    def _current(self) -> dict[str, dict]:
        """The entries by id, oldest first, as the file holds them now (not a copy)."""
        key = stat_key(self.path)
        if key is None:
            self._seen, self._entries = None, {}
            self._count()
        elif key != self._seen:
            self._entries = self._load()
            self._count()
            self._trim()
            self._seen = stat_key(self.path)
        return self._entries

    def told(self) -> bool:
        """Whether memory holds a decision, failure or constraint (not only `done` lines)."""
        self._current()
        return self._told > 0

    def newest(self) -> Iterator[dict]:
        """The entries newest first (no copy: read while nothing is added)."""
        return reversed(self._current().values())

    def _count(self) -> None:
        self._done = sum(e["kind"] == "done" for e in self._entries.values())
        self._told = len(self._entries) - self._done

    def _put(self, obj: dict) -> None:
        """_apply, keeping the counts (what this process appends)."""
        gone = self._entries.get(obj.get("forget") or obj["id"])
        _apply(self._entries, obj)
        for e, step in ((gone, -1), (None if "forget" in obj else obj, 1)):
            if e is not None:
                if e["kind"] == "done":
                    self._done += step
                else:
                    self._told += step

    def _trim(self) -> None:
        if self.keep_done is None or self._done <= self.keep_done:
            return
        extra = self._done - self.keep_done
        oldest = []  # the oldest `extra` done lines (a run's appends: one, near the front)
        for i, e in self._entries.items():
            if e["kind"] == "done":
                oldest.append(i)
                if len(oldest) == extra:
                    break
        for i in oldest:
            del self._entries[i]
        self._done -= extra
        self._trimmed = True

    def _load(self) -> dict[str, dict]:
        try:
            data = self.ws.read_bytes(self.path)
        except FileNotFoundError:
            return {}
        except (WorkspaceError, OSError) as e:  # not damage: nothing is moved
            self.say(f"harnessc: warning: cannot read {self.ws.rel(self.path)}: {e}; memory is empty for now")
            return {}
        try:
            return parse(data.decode("utf-8"))
        except (DamagedMemory, UnicodeDecodeError) as e:
            why = str(e) if isinstance(e, DamagedMemory) else "it is not UTF-8 text"
        except RecursionError:
            why = "a line nests too deep"
        aside = self.dir / (FILE + ".damaged")
        if not self.aside:
            self.say(f"harnessc: warning: {self.ws.rel(self.path)}: {why}; memory is read as empty")
            return {}
        try:
            self.ws.move(self.path, aside)
            kept = f"kept as {self.ws.rel(aside)}"
        except (WorkspaceError, OSError) as moved:
            kept = f"left where it is ({moved})"
        self.say(f"harnessc: warning: {self.ws.rel(self.path)}: {why}; memory starts empty (the file is {kept})")
        return {}

    def _append(self, objs: list[dict]) -> None:
        """Append lines; what this process holds follows (no reading again) unless someone
        else wrote to the file since this process last looked."""
        data = memoryview("".join(_line(o) + "\n" for o in objs).encode())
        fd, st = self._file_fd()  # the file written to (a missing one is made empty by the open)
        current = self._seen == _key(st) or self._seen is None and st.st_size == 0
        try:
            while data:
                data = data[os.write(fd, data):]
            seen = _key(os.fstat(fd))
        except BaseException:
            self._close_file()
            raise
        # A forget where lines were trimmed from what this process holds: read again (a line
        # trimmed as the oldest is the newest summary line once the newer ones are forgotten).
        trimmed = self.keep_done is not None and self._trimmed and any("forget" in o for o in objs)
        if current and not trimmed:
            for o in objs:
                self._put(o)
            self._trim()
            self._seen = seen
        else:
            self.entries()

    def add(self, entries: list[dict]) -> list[dict]:
        """Append the entries not already there as they are; returns those appended."""
        if not entries:
            return []
        if all(e["kind"] == "done" for e in entries):  # (a task's line, always appended: _append
            new = entries  # sees a change by someone else itself, without a look at the file first)
        else:
            have = self._current()
            new = [e for e in entries if e["kind"] == "done" or have.get(e["id"], {}).get("text") != e["text"]]
        if new:
            self._append(new)
        return new

    def forget(self, entry_id: str) -> dict | None:
        """Remove an entry: the entry it was, None when there is none with that id."""
        match = self._current().get(entry_id)
        if match is not None:
            self._append([{"forget": entry_id}])
        return match

    def compact(self) -> None:
        """Rewrite the file without forgotten or replaced lines and with only the newest
        `keep_done` summary lines (a run's start: the file grows with every task otherwise)."""
        kept = self.entries()
        try:
            lines = sum(1 for line in self.ws.read_text(self.path).splitlines() if line.strip())
        except (FileNotFoundError, UnicodeDecodeError, WorkspaceError, OSError):
            return
        if lines > len(kept):
            self.ws.write_atomic(self.path, "".join(_line(e) + "\n"
                                                    for e in kept))
            self._seen = None
            self.entries()


def stamp(entry: dict, run_id: str | None) -> dict:
    """An entry as written: its id, run and time."""
    e = dict(entry)
    e.setdefault("files", [])
    e["id"] = entry_id(e["kind"], e["task"], e["text"])
    e["run"] = run_id
    e["at"] = now_iso()
    return e


def pending(entries: list[dict], upto: str | None) -> list[dict]:
    """The ended tasks' lines newer than the summary (all of them when it covers none)."""
    done = [e for e in entries if e["kind"] == "done"]
    ids = [e["id"] for e in done]
    return done[ids.index(upto) + 1:] if upto in ids else done


SUMMARY_FILE = "summary.json"  # the running summary (summary.py refreshes it; `harnessc memory` reads it)


class SummaryFile:
    """summary.json: {"text", "by": agent name | "entries", "at", "run", "upto": the newest
    ended task's summary line it covers, "phases": [the phases it covered the end of]}."""

    def __init__(self, memory: MemoryStore, say: Callable[[str], None]):
        self.memory, self.ws, self.say = memory, memory.ws, say
        self.path = memory.dir / SUMMARY_FILE
        self._damage_said = False
        self._held: tuple[tuple | None, dict] | None = None  # (the file's stat key, what it holds)
        self._pending: dict | None = None  # a summary held, not yet written (hold)
        self._text: Callable[[], str] | None = None  # the held summary's text, made when first needed

    def read(self, text: bool = True) -> dict:
        """What the file holds (read again only when it changed: a run asks at every task's end),
        or the summary held for it (`text` False: without its text when that is not made yet)."""
        if self._pending is not None:
            if text and self._text is not None:
                self._pending["text"], self._text = self._text(), None
            return dict(self._pending)
        key = stat_key(self.path)
        if self._held is not None and self._held[0] == key:
            return dict(self._held[1])
        data = self._read() if key is not None else {}
        self._held = (key, data)
        return dict(data)

    def _read(self) -> dict:
        try:
            data = json.loads(self.ws.read_text(self.path))
            if not (isinstance(data, dict) and isinstance(data.get("text"), str)
                    and isinstance(data.get("phases", []), list) and isinstance(data.get("upto"), (str, type(None)))):
                raise ValueError("not a summary object")
            return data
        except FileNotFoundError:
            return {}
        except (ValueError, UnicodeDecodeError, RecursionError, OSError, WorkspaceError) as e:
            if not self._damage_said:
                self._damage_said = True
                why = "it is not a summary (JSON with a text)" if isinstance(e, ValueError) else str(e)
                self.say(f"harnessc: warning: {self.ws.rel(self.path)}: {why}; the summary starts empty "
                         "(it is rewritten at the next refresh)")
            return {}

    def write(self, data: dict) -> None:
        self._pending = self._text = None  # (what it held is older)
        self.memory.write_atomic(self.path, (json.dumps(data, ensure_ascii=False, sort_keys=True, indent=1) + "\n").encode())
        self._held = (stat_key(self.path), dict(data))

    def hold(self, data: dict, text: Callable[[], str]) -> None:
        """Keep `data` and its text, made by `text()` when first read, as the summary (read()
        gives it) until write_held()."""
        self._pending, self._text = dict(data), text

    def write_held(self) -> None:
        if self._pending is not None:
            self.write(self.read())
