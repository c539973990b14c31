"""The memory file, `.harness/memory/memory.jsonl`: one JSON object a line, appended.

An entry: {"id", "kind": decision|failure|constraint|done, "text", "task", "run", "at",
"files": [...], and per kind "cause"/"fix" (failure), "expires" (constraint: an ISO time in
UTC, or "run": this run only)}; `done` lines make the running summary (one per task that
ended well). `{"forget": ID}` removes an entry (`harnessc memory forget`): appending keeps a
running harnessc and the command from overwriting each other.

A line that is not such an object (a damaged or hand-edited file) makes the whole file
unreadable as memory: it is moved aside to `memory.jsonl.damaged` (nothing is lost), one
line says so, and memory starts empty. Ids are the kind's letter and a hash of the task and
text, so the same fact told twice is one entry.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ...workspace import Workspace, WorkspaceError

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


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def parse(text: str) -> list[dict]:
    """The live entries of a memory file's text, oldest first. Raises DamagedMemory."""
    entries: dict[str, dict] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = _check(json.loads(line), n)
        except json.JSONDecodeError as e:
            raise DamagedMemory(f"line {n} is not JSON ({e.msg})") from None
        if "forget" in obj:
            entries.pop(obj["forget"], None)
        else:
            entries.pop(obj["id"], None)  # told again: now the newest
            entries[obj["id"]] = obj
    return list(entries.values())


class MemoryStore:
    """The project's memory file, read again whenever it changed on disk (a `memory forget`
    during a run counts from the next prompt on)."""

    def __init__(self, root: Path, say: Callable[[str], None] | None = None):
        self.ws = Workspace(root)
        self.dir = self.ws.harness / "memory"
        self.path = self.dir / FILE
        self.say = say or (lambda line: None)
        self._seen: tuple | None = None
        self._entries: list[dict] = []

    def entries(self) -> list[dict]:
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            self._seen, self._entries = None, []
            return []
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key != self._seen:
            self._entries = self._load()
            self._seen = self._stat_key()
        return list(self._entries)

    def _stat_key(self) -> tuple | None:
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _load(self) -> list[dict]:
        try:
            text = self.ws.read_text(self.path)
            return parse(text)
        except FileNotFoundError:
            return []
        except (DamagedMemory, UnicodeDecodeError, WorkspaceError, OSError) as e:
            why = str(e) if isinstance(e, (DamagedMemory, WorkspaceError)) else "it is not UTF-8 text" \
                if isinstance(e, UnicodeDecodeError) else e.strerror or str(e)
            aside = self.dir / (FILE + ".damaged")
            try:
                self.ws.move(self.path, aside)
                kept = f"kept as {self.ws.rel(aside)}"
            except (WorkspaceError, OSError) as moved:
                kept = f"left where it is ({moved})"
            self.say(f"harnessc: warning: {self.ws.rel(self.path)}: {why}; memory starts empty (the file is {kept})")
            return []

    def add(self, entries: list[dict]) -> list[dict]:
        """Append the entries not already there as they are; returns those appended."""
        if not entries:
            return []
        have = {e["id"]: e for e in self.entries()}
        new = [e for e in entries if have.get(e["id"], {}).get("text") != e["text"] or e["kind"] == "done"]
        if not new:
            return []
        with self.ws.open_write(self.path, "a") as f:
            f.write("".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in new))
        self.entries()
        return new

    def forget(self, entry_id: str) -> dict | None:
        """Remove an entry: the entry it was, None when there is none with that id."""
        match = next((e for e in self.entries() if e["id"] == entry_id), None)
        if match is not None:
            with self.ws.open_write(self.path, "a") as f:
                f.write(json.dumps({"forget": entry_id}) + "\n")
            self.entries()
        return match

    def compact(self, keep_done: int) -> None:
        """Rewrite the file without forgotten or replaced lines and with only the newest
        `keep_done` summary lines (a run's start: the file grows with every task otherwise)."""
        entries = self.entries()
        done = [e for e in entries if e["kind"] == "done"]
        kept = [e for e in entries if e["kind"] != "done" or e in done[-keep_done:]]
        try:
            lines = len(self.ws.read_text(self.path).splitlines())
        except (FileNotFoundError, UnicodeDecodeError, WorkspaceError, OSError):
            return
        if lines > len(kept):
            self.ws.write_atomic(self.path, "".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n"
                                                    for e in kept))
            self.entries()


def stamp(entry: dict, run_id: str | None) -> dict:
    """An entry as written: its id, run and time."""
    e = dict(entry)
    e.setdefault("files", [])
    e["id"] = entry_id(e["kind"], e["task"], e["text"])
    e["run"] = run_id
    e["at"] = now_iso()
    return e


