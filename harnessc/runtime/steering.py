"""Steering a run from outside: the inbox, pause/resume, and environment overrides.

`.harness/inbox/` holds files the run reads between iterations (and every STOP_POLL seconds,
from the scheduler's watcher), in name order:

* `*.json` - one object, what `harnessc tell` / `pause` / `resume` write:
  `{"text": "...", "task": "ID" | null, "urgent": false}` - an instruction for one task or
  for every task of the run; or `{"command": "pause" | "resume" | "skip" | "prioritize",
  "task": "ID"}` (skip and prioritize name a task).
* `*.txt` / `*.md` - the whole text is an instruction for every task (`echo ... > file`).

An instruction reaches the next prompt of the task(s) it is for, in an "Instructions from
the operator" section that stays in that task's prompts for the rest of the run; an urgent
one also cuts the task's wait between iterations short. A file is moved to
`inbox/processed/` once it is applied: a command and an instruction for every task when
read, an instruction for one task when it reaches that task's prompt (until then it waits
in the inbox, also across runs). A file that cannot be read as one of the above is moved to
`processed/` with a `<name>.error` line saying why, and the run goes on. Each step is an
event.

Environment overrides, read at the same moments: HARNESSC_PAUSE=1 pauses (until `resume`),
HARNESSC_MAX_COST sets the run budget in USD, HARNESSC_AGENT sends every task's next
iteration to that agent.

harness.yaml `loop.environment` can turn either off: `inbox: false` refuses instructions
(an inbox that others can write to is a way into the agents' prompts; commands stay, as
they only steer the run), `env_overrides: false` ignores the variables.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import HarnesscError
from ..workspace import Workspace, WorkspaceError
from . import clock
from .store.state import StateStore

MAX_FILE_BYTES = 64 * 1024
TEXT_SUFFIXES = (".txt", ".md")
COMMANDS = ("pause", "resume", "skip", "prioritize")
REVIEW = "review"  # written by `harnessc approve/reject`: a decision is in state.db (a wake-up, not for hands)
ENV_PAUSE, ENV_MAX_COST, ENV_AGENT = "HARNESSC_PAUSE", "HARNESSC_MAX_COST", "HARNESSC_AGENT"


class InboxError(HarnesscError, ValueError):
    """An inbox file that is not an instruction or a command (the message says why)."""


@dataclass
class Instruction:
    name: str  # the inbox file's name
    text: str
    task: str | None  # None: every task
    urgent: bool = False
    delivered: set[str] = field(default_factory=set)  # tasks whose prompt carried it


def inbox_file_name(kind: str) -> str:
    """A new inbox file's name: sorts by time of writing, unique per process."""
    now = clock.time()
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}-{os.getpid()}-{kind}.json"


def write_inbox(workspace: Workspace, kind: str, data: dict) -> Path:
    """Drop one file into the inbox (atomically: the run never reads half of it); InboxError
    for one the run would refuse (parse): over MAX_FILE_BYTES, or text that is not UTF-8."""
    text = json.dumps(data, ensure_ascii=False) + "\n"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # undecodable bytes of the command line (surrogate escapes)
        raise InboxError("not UTF-8 text") from None
    if size > MAX_FILE_BYTES:
        raise InboxError(f"{size:,} bytes, over the inbox's limit of {MAX_FILE_BYTES // 1024} KiB "
                         f"({MAX_FILE_BYTES:,} bytes)")
    path = workspace.inbox / inbox_file_name(kind)
    workspace.write_atomic(path, text)
    return path


def parse(name: str, data: bytes, task_ids: set[str]) -> Instruction | tuple[str, str | None]:
    """An inbox file as an Instruction or a (command, task) pair; raises InboxError."""
    if len(data) > MAX_FILE_BYTES:
        raise InboxError(f"larger than {MAX_FILE_BYTES // 1024} KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InboxError("not UTF-8 text") from None
    if name.endswith(TEXT_SUFFIXES):
        if not text.strip():
            raise InboxError("empty instruction")
        return Instruction(name, text.strip(), None)
    if not name.endswith(".json"):
        raise InboxError("not .json, .txt or .md (see `harnessc tell`)")
    try:
        obj = json.loads(text, object_pairs_hook=_unique_keys)
    except InboxError:
        raise
    except ValueError as e:
        raise InboxError(f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise InboxError("not a JSON object")
    task = obj.get("task")
    if task is not None and (not isinstance(task, str) or task not in task_ids):
        raise InboxError(f"no task {task!r} in the plan")
    if "command" in obj:
        _only(obj, {"command", "task"})
        command = obj["command"]
        if command not in COMMANDS and command != REVIEW:
            raise InboxError(f"unknown command {command!r} (one of: {', '.join(COMMANDS)})")
        if command in ("skip", "prioritize", REVIEW) and task is None:
            raise InboxError(f"'{command}' needs a task")
        if command in ("pause", "resume") and "task" in obj:  # not one task's: refuse, not widen
            raise InboxError(f"'{command}' is for the whole run and takes no task "
                             f"(to steer {task!r}, send it an instruction: `harnessc tell {task} \"...\"`)")
        return command, task
    _only(obj, {"text", "task", "urgent"})
    if not isinstance(obj.get("text"), str) or not obj["text"].strip():
        raise InboxError('neither "command" nor a non-empty "text"')
    if not isinstance(obj.get("urgent", False), bool):
        raise InboxError('"urgent" is not true or false')
    return Instruction(name, obj["text"].strip(), task, bool(obj.get("urgent")))


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object's pairs as a dict; a repeated key is an error, not "the last one wins"
    (which of two texts the operator meant is not ours to guess)."""
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise InboxError(f"repeated key {key!r}")
        obj[key] = value
    return obj


def _only(obj: dict, keys: set[str]) -> None:
    extra = sorted(set(obj) - keys)
    if extra:
        raise InboxError(f"unknown key {extra[0]!r} (allowed: {', '.join(sorted(keys))})")


class Steering:
    """The operator's say in a run: read the inbox and the environment, hold tasks while
    paused, hand each task its instructions."""

    def __init__(self, workspace: Workspace, store: StateStore, task_ids: set[str], budget,
                 agents: set[str], on_change: Callable[[], None] = lambda: None,
                 instructions: bool = True, env_overrides: bool = True):
        """instructions, env_overrides: harness.yaml `loop.environment.inbox` and `env_overrides`."""
        self.workspace, self.store, self.task_ids = workspace, store, task_ids
        self.budget, self.agents, self.on_change = budget, agents, on_change
        self.accepts_instructions, self.env_overrides = instructions, env_overrides
        self.instructions: list[Instruction] = []
        self.seen: set[str] = set()  # inbox files already read by this run
        self.skips: set[str] = set()
        self.priority: set[str] = set()
        self.reordered = False  # a prioritize since the scheduler last looked
        self.reviews = False  # an approve/reject since the scheduler last looked (the decision: state.db)
        self.agent: str | None = None  # HARNESSC_AGENT, once checked
        self._paused_by: str | None = None  # why the run is paused (None: it is not)
        self._resumed = False  # `resume` overrides HARNESSC_PAUSE for the rest of the run
        self._env: dict[str, str | None] = {}
        self._last_poll = float("-inf")
        self._changed: asyncio.Event | None = None
        self._wakers: dict[str, asyncio.Event] = {}

    # ------------------------------------------------------------------ reading

    def poll(self, max_age: float = 0.0) -> None:
        """Read new inbox files and the environment overrides, unless the last read is
        younger than `max_age` seconds (a run of many short tasks reads once per 50 ms,
        not once per iteration)."""
        now = clock.monotonic()
        if max_age and now - self._last_poll < max_age:
            return
        self._last_poll = now
        if self.env_overrides:
            self._read_env()
        else:
            self._ignore_env()
        try:
            names = self.workspace.list_dir(self.workspace.inbox)
        except WorkspaceError as e:
            reason = str(e)
            self._once("inbox", lambda: self.store.event("inbox_error", file="inbox", reason=reason))
            return
        for name in names:
            if name in self.seen or name.startswith(".") or name == "processed":
                continue
            self.seen.add(name)
            try:
                item = parse(name, self.workspace.read_bytes(self.workspace.inbox / name, MAX_FILE_BYTES + 1),
                             self.task_ids)
            except (InboxError, WorkspaceError, OSError) as e:
                self._reject(name, str(e))
                continue
            if isinstance(item, Instruction) and not self.accepts_instructions:
                self._reject(name, "instructions are off in this project (harness.yaml loop.environment.inbox: "
                                   "false); nothing of this file reached an agent")
            elif isinstance(item, Instruction):
                self._receive(item)
            else:
                self._command(*item)
                self._processed(name)

    def _receive(self, ins: Instruction) -> None:
        self.instructions.append(ins)
        self.store.event("instruction_received", ins.task, file=ins.name, urgent=ins.urgent, text=ins.text)
        if ins.task is None:
            self._processed(ins.name)
        if ins.urgent:
            for tid, ev in self._wakers.items():
                if ins.task in (None, tid):
                    ev.set()

    def _command(self, command: str, task: str | None) -> None:
        self.store.event("inbox_command", task, command=command)
        if command == "pause":
            self.pause("inbox")
        elif command == "resume":
            self.resume("inbox")
        elif command == "skip":
            self.skips.add(task)
        elif command == REVIEW:
            self.reviews = True
        else:
            self.priority.add(task)
            self.reordered = True
        self.on_change()

    def _reject(self, name: str, reason: str) -> None:
        self.store.event("inbox_error", file=name, reason=reason)
        moved = self._processed(name)
        if moved:
            try:
                self.workspace.write_atomic(moved.with_name(moved.name + ".error"), f"{name}: {reason}\n")
            except WorkspaceError:
                pass

    def _processed(self, name: str) -> Path | None:
        """Move an inbox file to processed/ (a name taken there gets a number)."""
        done = self.workspace.inbox / "processed"
        try:
            taken = set(self.workspace.list_dir(done))
            target, n = name, 1
            while target in taken or target + ".error" in taken:
                target, n = f"{name}.{n}", n + 1
            self.workspace.move(self.workspace.inbox / name, done / target)
            return done / target
        except WorkspaceError as e:
            reason = str(e)
            self._once(f"move:{name}", lambda: self.store.event("inbox_error", file=name, reason=reason))
            return None

    def _read_env(self) -> None:
        env = {k: os.environ.get(k) for k in (ENV_PAUSE, ENV_MAX_COST, ENV_AGENT)}
        if env == self._env:
            return
        old, self._env = self._env, env
        if env[ENV_PAUSE] != old.get(ENV_PAUSE) and not self._resumed:
            value = (env[ENV_PAUSE] or "").strip().lower()
            if value in ("1", "true", "yes"):
                self.pause(ENV_PAUSE)
            else:
                if value not in ("", "0", "false", "no"):
                    self.store.event("steering_error", reason=f"{ENV_PAUSE}={env[ENV_PAUSE]!r} is neither 1 nor 0 "
                                     "(true/false, yes/no); the run is not paused")
                if self._paused_by == ENV_PAUSE:
                    self.resume(ENV_PAUSE)
        if env[ENV_MAX_COST] != old.get(ENV_MAX_COST) and env[ENV_MAX_COST] is not None:
            try:
                usd = float(env[ENV_MAX_COST])
                if not usd >= 0 or usd == float("inf"):
                    raise ValueError
            except ValueError:
                self.store.event("steering_error", reason=f"{ENV_MAX_COST}={env[ENV_MAX_COST]!r} is not an amount "
                                 "of USD; the run budget stays as it was")
            else:
                self.store.event("budget_changed", max_cost_usd=usd, was=self.budget.run_limit, via=ENV_MAX_COST)
                self.budget.run_limit = usd
        if env[ENV_AGENT] != old.get(ENV_AGENT):
            name = env[ENV_AGENT] or None
            if name is not None and name not in self.agents:
                self.store.event("steering_error", reason=f"{ENV_AGENT}={name!r} is not an agent of harness.yaml "
                                 f"({', '.join(sorted(self.agents)) or 'none'}); routing is unchanged")
                name = None
            if name != self.agent:
                self.agent = name
                self.store.event("agent_forced", agent=name, via=ENV_AGENT)

    def _ignore_env(self) -> None:
        """env_overrides: false - say once that a set override is ignored."""
        for name in (ENV_PAUSE, ENV_MAX_COST, ENV_AGENT):
            if os.environ.get(name) is not None:
                self._once(f"env:{name}", lambda: self.store.event("steering_error", reason=(
                    f"{name} is set but harness.yaml says loop.environment.env_overrides: false; ignored")))

    def _once(self, key: str, report: Callable[[], object]) -> None:
        if key not in self.seen:
            self.seen.add(key)
            report()

    # ------------------------------------------------------------------ pause

    @property
    def paused(self) -> bool:
        return self._paused_by is not None

    def pause(self, via: str, reason: str | None = None) -> None:
        if self._paused_by is None:
            self._paused_by = via
            self.store.event("paused", via=via, **({"reason": reason} if reason else {}))
            self.on_change()

    def resume(self, via: str) -> None:
        if via != ENV_PAUSE:
            self._resumed = True
        if self._paused_by is not None:
            self._paused_by = None
            self.store.event("resumed", via=via)
            self._signal()
            self.on_change()

    async def hold(self, halting: Callable[[], bool]) -> float:
        """Wait while the run is paused (a stop ends the wait). Returns the seconds waited."""
        if not self.paused or halting():
            return 0.0
        t0 = clock.monotonic()
        while self.paused and not halting():
            await self._wait(self._change_event(), timeout=0.2)
        return clock.monotonic() - t0

    # ------------------------------------------------------------------ tasks

    def skipped(self, task_id: str) -> bool:
        return task_id in self.skips

    def rank(self, task_id: str) -> int:
        """0 for a prioritized task (it starts first), else 1."""
        return 0 if task_id in self.priority else 1

    def take_reviews(self) -> bool:
        reviews, self.reviews = self.reviews, False
        return reviews

    def feedback(self, task_id: str, text: str) -> None:
        """A reviewer's `harnessc reject` reason: an instruction for the task's next prompts."""
        self.instructions.append(Instruction("", text, task_id))

    def take_reorder(self) -> bool:
        reordered, self.reordered = self.reordered, False
        return reordered

    def instructions_for(self, task_id: str) -> list[Instruction]:
        """The instructions the task's next prompt carries (each one marked delivered)."""
        found = [i for i in self.instructions if i.task in (None, task_id)]
        for ins in found:
            if task_id not in ins.delivered:
                ins.delivered.add(task_id)
                self.store.event("instruction_delivered", task_id, file=ins.name)
                if ins.task is not None and ins.name:  # a reviewer's feedback has no file
                    self._processed(ins.name)
        return found

    async def sleep(self, seconds: float, task_id: str | None, stop: asyncio.Event) -> None:
        """A task's wait between iterations: ends early on a stop, or on an urgent
        instruction for the task that its prompts have not carried yet."""
        if seconds <= 0:
            return
        events = [stop]
        if task_id is not None:
            if any(i.urgent and task_id not in i.delivered and i.task in (None, task_id) for i in self.instructions):
                return
            events.append(self._wakers.setdefault(task_id, asyncio.Event()))
            events[-1].clear()
        await self._wait(*events, timeout=seconds)

    def _change_event(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.clear()
        return self._changed

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()

    @staticmethod
    async def _wait(*events: asyncio.Event, timeout: float) -> None:
        waits = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()


def paused_run(store: StateStore, run_id: str | None) -> bool:
    """Whether run `run_id`'s last pause/resume event was a pause (for `status`)."""
    if not run_id:
        return False
    row = store.db.execute("SELECT kind FROM events WHERE run_id=? AND kind IN ('paused','resumed') "
                           "ORDER BY id DESC LIMIT 1", (run_id,)).fetchone()
    return bool(row) and row[0] == "paused"
