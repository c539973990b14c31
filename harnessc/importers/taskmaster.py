"""Taskmaster (claude-task-master) .taskmaster/tasks/tasks.json -> roadmap.md.

Both layouts are read: the tagged one, `{"master": {"tasks": [...], "metadata": {...}}, ...}`
(`tag` picks the list, default master), and the older `{"tasks": [...]}`. Task N becomes
`tm-N`, its subtask M `tm-N.M` (and a subtask's own subtask K `tm-N.M.K`).

Dependencies mean what Taskmaster's `next` makes of them (scripts/modules/task-manager/
find-next-task.js): a task's `[1, "2.3"]` are task 1 and subtask 2.3; a subtask's number,
or a string without a dot, is a sibling (`2` in task 5's subtask is 5.2), a dotted string
any subtask. `next` offers a subtask only while its parent is in progress, and a parent
starts only once its own dependencies are done: so a subtask also depends on its parent's
dependencies. Siblings are ordered only by their `dependencies` (`next` offers the lowest
ready one, but does not wait for the others): those without one may run side by side. A
task depends on its subtasks (it is their wrap-up).

description and details make the goal. acceptanceCriteria is the `success:` text (what the
agent is told, not a command); without it, testStrategy is. A text of one line is the
`success:` line; one of several lines keeps them, in the goal under "Acceptance
criteria:" / "Test strategy:" (testStrategy always goes there when acceptanceCriteria is
the success text). priority high/medium/low becomes high/normal/low.

Statuses (STATUSES): done is a checked task; pending, in-progress and review are open, the
last two say so in the goal; deferred and blocked are open and tagged `deferred` (not run
unless selected: compiler/select.py), as are the subtasks of such a task, which `next`
never offers; cancelled tasks (and their subtasks) are left out, and an edge to one is
dropped with a warning. Each is counted in the summary.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..compiler.select import DEFERRED_TAG
from ..compiler.tasks import Roadmap, Task
from ..vocab import Priority
from . import (
    Ids,
    Imported,
    NotImportable,
    bounded_depth,
    break_cycles,
    goal_text,
    keep_known_dependencies,
    one_line,
    task_id,
)

PRIORITIES = {"high": Priority.high, "medium": Priority.normal, "low": Priority.low, "critical": Priority.critical}
# fields read into the roadmap; any other field of a task is listed as not imported
TASK_FIELDS = {"id", "title", "description", "details", "testStrategy", "acceptanceCriteria", "status",
               "dependencies", "priority", "subtasks"}

# a status -> (what it becomes, as the summary counts it); the order is the summary's
STATUSES = {
    "done": "done -> [x]",
    "completed": "completed -> [x]",  # `next` counts it as done
    "pending": "pending -> open",
    "in-progress": "in-progress -> open (the status in its goal)",
    "review": "review -> open (the status in its goal)",
    "deferred": f"deferred -> open, tag {DEFERRED_TAG} (not run unless selected: -s tag:{DEFERRED_TAG})",
    "blocked": f"blocked -> open, tag {DEFERRED_TAG} (not run unless selected: -s tag:{DEFERRED_TAG})",
    "cancelled": "cancelled -> left out",
}
DONE = {"done", "completed"}
SAID = {"in-progress", "review", "deferred", "blocked"}  # open, with the status in the goal
HELD = {"deferred", "blocked"}  # open, tagged deferred: `next` never offers them
UNDER_HELD = f"under a deferred or blocked task -> open, tag {DEFERRED_TAG}"
UNDER_CANCELLED = "under a cancelled task -> left out"
OTHER = "other status -> open (the status in its goal)"


def read(text: str, source: str, tag: str | None = None) -> Imported:
    """The roadmap of a tasks.json text (`source` names it in the roadmap and messages)."""
    bounded_depth(text, source)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise NotImportable(f"{source}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    tasks, title, unmapped, where = _task_list(data, source, tag)
    layout = "the older layout" if where == "tasks" else f"tag {tag or 'master'}"
    r = _Reader(source, unmapped)
    out: list[Task] = []
    for i, raw in enumerate(tasks):
        if not isinstance(raw, dict) or "id" not in raw:
            unmapped.append(f"{where}[{i}]: not a task with an id; left out")
            continue
        out += r.tasks_of(raw, f"{where}[{i}]")
    out = keep_known_dependencies(out, unmapped, r.cancelled, r.warnings)
    r.inherit(out)
    roadmap = Roadmap(path="roadmap.md", title=title, tasks=out,
                      overview=f"Imported from Taskmaster ({one_line(source)}, {one_line(layout)}) by `harnessc import`.")
    order = [*STATUSES.values(), UNDER_HELD, UNDER_CANCELLED, OTHER]
    statuses = Counter({k: r.statuses[k] for k in order if r.statuses[k]})
    return Imported(roadmap, unmapped, r.warnings, r.fields, statuses)


def _task_list(data: Any, source: str, tag: str | None) -> tuple[list, str, list[str], str]:
    """(tasks, roadmap title, notes, where the list is: `tasks` or `master.tasks`) of either layout."""
    unmapped: list[str] = []
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):  # the older layout
        if tag not in (None, "master"):
            raise NotImportable(f"{source}: no tag '{tag}': the file has one task list (the older {{\"tasks\": [...]}} layout)")
        meta = data.get("meta") or data.get("metadata") or {}
        others = sorted(k for k in data if k not in ("tasks", "meta", "metadata"))
        unmapped += [f"top-level field '{one_line(k)}': not imported" for k in others]
        unmapped += _metadata_note(meta, "meta")
        return data["tasks"], _title(meta), unmapped, "tasks"
    if not isinstance(data, dict):
        raise NotImportable(f"{source}: expected a JSON object with a task list, found {type(data).__name__}")
    tags = [k for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("tasks"), list)]
    if not tags:
        raise NotImportable(f"{source}: no task list: expected {{\"master\": {{\"tasks\": [...]}}}} or {{\"tasks\": [...]}}")
    want = tag or "master"
    if want not in tags:
        raise NotImportable(f"{source}: no tag '{want}'; the tags are: {', '.join(tags)} (choose one with --tag)")
    unmapped += [f"tag '{t}': {len(data[t]['tasks'])} task(s) not imported (import it with --tag {t})"
                 for t in tags if t != want]
    meta = data[want].get("metadata") or {}
    unmapped += _metadata_note(meta, f"tag '{want}' metadata")
    return data[want]["tasks"], _title(meta), unmapped, f"{want}.tasks"


def _metadata_note(meta: Any, where: str) -> list[str]:
    """The metadata fields not imported (all but projectName, the roadmap's title)."""
    keys = sorted(k for k in meta if k != "projectName") if isinstance(meta, dict) else []
    return [f"{where}: {', '.join(keys)} not imported"] if keys else []


def _title(meta: Any) -> str:
    name = meta.get("projectName") if isinstance(meta, dict) else None
    return one_line(name) if name else "Imported from Taskmaster"


@dataclass
class _Reader:
    """What reading one task list gathers besides the tasks."""

    source: str
    unmapped: list[str]
    warnings: list[str] = field(default_factory=list)
    fields: dict[str, list[str]] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)
    cancelled: dict[str, str] = field(default_factory=dict)  # id -> why left out (edges to it are dropped)
    task_of: dict[str, str] = field(default_factory=dict)  # a subtask's id -> its task's
    ids: Ids = field(init=False)

    def __post_init__(self) -> None:
        self.ids = Ids(self.warnings)

    def tasks_of(self, raw: dict, place: str, parent: _Parent | None = None) -> list[Task]:
        """A task and its subtasks (which it depends on; they depend on its dependencies)."""
        status = str(raw.get("status") or "pending").lower()
        sid = str(raw["id"])
        path = f"{parent.path}.{sid}" if parent else sid  # Taskmaster's own name: 2, 2.3, 2.3.1
        tid = self.ids.claim(task_id(f"tm-{path}"), place)
        if parent and parent.left_out:
            self.statuses[UNDER_CANCELLED] += 1
            self.cancelled[tid] = f"under cancelled {parent.id}"
            return self._subtasks_left_out(raw, tid, path, place, parent)
        if status == "cancelled":
            self.statuses[STATUSES["cancelled"]] += 1
            self.cancelled[tid] = "cancelled"
            return self._subtasks_left_out(raw, tid, path, place, parent)
        held = status in HELD or (parent is not None and parent.held and status not in DONE)
        if status in STATUSES:
            self.statuses[UNDER_HELD if held and status not in HELD else STATUSES[status]] += 1
        else:
            self.statuses[UNDER_HELD if held else OTHER] += 1
            self.unmapped.append(f"{tid}: status '{one_line(status)}' is not one of Taskmaster's; imported as an open task")
        deps = self._dependencies(raw, parent, tid)
        me = _Parent(tid, path, status, held=held, left_out=False)
        subs: list[Task] = []
        children = []  # its own subtasks, which it depends on (theirs it reaches through them)
        for j, sub in enumerate(_subtasks(raw, tid, self.unmapped)):
            if not isinstance(sub, dict) or "id" not in sub:
                self.unmapped.append(f"{tid}: subtasks[{j}] is not a subtask with an id; left out")
                continue
            these = self.tasks_of(sub, f"{place}.subtasks[{j}]", me)
            children += these[:1]
            subs += these
        self.task_of.update((c.id, tid) for c in children)
        task = self._task(tid, raw, status, held, parent, deps + [c.id for c in children])
        return [task, *subs]

    def inherit(self, tasks: list[Task]) -> None:
        """Each subtask waits for what its task waits for (but its subtasks), once those
        dependencies are checked: an edge left out is listed once, for the task. An edge
        inherited may close a cycle (the task's dependency waits for one of its subtasks):
        it is left out, and listed."""
        by_id = {t.id: t for t in tasks}
        mine: dict[str, set[str]] = {}
        for sub, owner in self.task_of.items():
            mine.setdefault(owner, set()).add(sub)
        for t in tasks:  # a task comes before its subtasks: its list is complete when they take it
            task = by_id.get(self.task_of.get(t.id, ""))
            if task is not None:
                theirs = [d for d in task.depends_on if d not in mine[task.id] and d != t.id]
                t.depends_on = tuple(dict.fromkeys([*theirs, *t.depends_on]))
        break_cycles(tasks, self.unmapped)

    def _subtasks_left_out(self, raw: dict, tid: str, path: str, place: str, parent: _Parent | None) -> list[Task]:
        """None of a cancelled task: its subtasks are left out too (`next` never offers them)."""
        me = _Parent(parent.id if parent and parent.left_out else tid, path, "cancelled", held=False, left_out=True)
        for j, sub in enumerate(_subtasks(raw, tid, [])):
            if isinstance(sub, dict) and "id" in sub:
                self.tasks_of(sub, f"{place}.subtasks[{j}]", me)
        return []

    def _dependencies(self, raw: dict, parent: _Parent | None, tid: str) -> list[str]:
        """`dependencies` as Taskmaster's `next` reads them: a subtask's number (or a string
        without a dot) is a sibling, a dotted string the subtask it names."""
        deps = raw.get("dependencies") or []
        if not isinstance(deps, list):
            self.unmapped.append(f"{tid}: dependencies '{one_line(json.dumps(deps))}' is not a list; left out")
            return []
        out = []
        for d in deps:
            text = str(d)
            if parent is not None and "." not in text:
                text = f"{parent.path}.{text}"
            out.append(task_id(f"tm-{text}"))
        return out

    def _task(self, tid: str, raw: dict, status: str, held: bool, parent: _Parent | None, deps: list[str]) -> Task:
        title = one_line(raw.get("title") or "")
        if not title:
            title = one_line(raw.get("description") or "") or "(untitled)"
            self.unmapped.append(f"{tid}: no title; the title is '{title}'")
        priority = None
        if raw.get("priority") is not None:
            priority = PRIORITIES.get(str(raw["priority"]).lower())
            if priority is None:
                self.unmapped.append(f"{tid}: priority '{one_line(str(raw['priority']))}' is not high, medium or low; left out")
        for key in sorted(set(raw) - TASK_FIELDS):
            self.fields.setdefault(key, []).append(tid)
        criteria, strategy = _text(raw.get("acceptanceCriteria")), _text(raw.get("testStrategy"))
        success, sections = None, []
        said, other = (criteria, strategy) if criteria else (strategy, "")
        label = "Acceptance criteria:" if criteria else "Test strategy:"
        if said and len(said.strip().splitlines()) == 1:
            success = one_line(said)
        elif said:
            sections.append(f"{label}\n\n{said}")
        if other:
            sections.append(f"Test strategy:\n\n{other}")
        if status not in DONE and (status in SAID or status not in STATUSES):
            sections.append(f"Taskmaster status: {status}.")
        elif held and parent is not None:
            sections.append(f"Taskmaster status: {status}, under {parent.id}, which is {parent.status} "
                            f"(Taskmaster offers a subtask only while its task is in progress).")
        return Task(id=tid, title=title, done=status in DONE, depends_on=tuple(deps), priority=priority,
                    success=success, tags=(DEFERRED_TAG,) if held else (),
                    goal=goal_text(_text(raw.get("description")), _text(raw.get("details")), *sections))


@dataclass(frozen=True)
class _Parent:
    id: str  # its roadmap id
    path: str  # its Taskmaster id (2, 2.3): a subtask's sibling dependency is path.N
    status: str
    held: bool  # deferred or blocked: its subtasks are too
    left_out: bool  # cancelled: its subtasks are too


def _subtasks(raw: dict, tid: str, unmapped: list[str]) -> list:
    subtasks = raw.get("subtasks") or []
    if isinstance(subtasks, list):
        return subtasks
    unmapped.append(f"{tid}: subtasks '{one_line(json.dumps(subtasks))[:80]}' is not a list; left out")
    return []


def _text(value: Any) -> str:
    """A field's text (a list of lines, as some files hold acceptanceCriteria, one per line)."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(f"- {v}" if isinstance(v, str) else json.dumps(v) for v in value)
    return value if isinstance(value, str) else json.dumps(value)
