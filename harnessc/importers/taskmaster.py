"""Taskmaster (claude-task-master) .taskmaster/tasks/tasks.json -> roadmap.md.

Both layouts are read: the tagged one, `{"master": {"tasks": [...], "metadata": {...}}, ...}`
(`tag` picks the list, default master), and the older `{"tasks": [...]}`. Task N becomes
`tm-N` and its subtask M `tm-N.M`; a task depends on its subtasks. description and details
make the goal; testStrategy the `success:` text (what the agent is told, not a command);
`status: done` a checked task; priority high/medium/low becomes high/normal/low.
"""

from __future__ import annotations

import json
from typing import Any

from ..compiler.tasks import Roadmap, Task
from ..vocab import Priority
from . import NotImportable, Imported, bounded_depth, goal_text, keep_known_dependencies, one_line, task_id

PRIORITIES = {"high": Priority.high, "medium": Priority.normal, "low": Priority.low, "critical": Priority.critical}
# fields read into the roadmap; any other field of a task is listed as not imported
TASK_FIELDS = {"id", "title", "description", "details", "testStrategy", "status", "dependencies", "priority", "subtasks"}
OPEN = {"pending", "in-progress", "review", "blocked", ""}  # statuses that are an open task as they are


def read(text: str, source: str, tag: str | None = None) -> Imported:
    """The roadmap of a tasks.json text (`source` names it in messages)."""
    bounded_depth(text, source)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise NotImportable(f"{source}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    tasks, title, unmapped = _task_list(data, source, tag)
    layout = "the older layout" if isinstance(data, dict) and isinstance(data.get("tasks"), list) \
        else f"tag {tag or 'master'}"
    out: list[Task] = []
    for i, raw in enumerate(tasks):
        if not isinstance(raw, dict) or "id" not in raw:
            unmapped.append(f"tasks[{i}]: not a task with an id; left out")
            continue
        out += _tasks_of(raw, unmapped)
    out = _unique(out, unmapped)
    roadmap = Roadmap(path="roadmap.md", title=title, tasks=keep_known_dependencies(out, unmapped),
                      overview=f"Imported from Taskmaster ({one_line(source)}, {one_line(layout)}) by `harnessc import`.")
    return Imported(roadmap, unmapped)


def _task_list(data: Any, source: str, tag: str | None) -> tuple[list, str, list[str]]:
    """(tasks, roadmap title, notes) of either layout."""
    unmapped: list[str] = []
    if isinstance(data, dict) and isinstance(data.get("tasks"), list):  # the older layout
        if tag not in (None, "master"):
            raise NotImportable(f"{source}: no tag '{tag}': the file has one task list (the older {{\"tasks\": [...]}} layout)")
        meta = data.get("meta") or data.get("metadata") or {}
        others = sorted(k for k in data if k not in ("tasks", "meta", "metadata"))
        unmapped += [f"top-level field '{k}': not imported" for k in others]
        unmapped += _metadata_note(meta, "meta")
        return data["tasks"], _title(meta), unmapped
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
    return data[want]["tasks"], _title(meta), unmapped


def _metadata_note(meta: Any, where: str) -> list[str]:
    """The metadata fields not imported (all but projectName, the roadmap's title)."""
    keys = sorted(k for k in meta if k != "projectName") if isinstance(meta, dict) else []
    return [f"{where}: {', '.join(keys)} not imported"] if keys else []


def _title(meta: Any) -> str:
    name = meta.get("projectName") if isinstance(meta, dict) else None
    return one_line(name) if name else "Imported from Taskmaster"


def _tasks_of(raw: dict, unmapped: list[str]) -> list[Task]:
    """A task and its subtasks (which it depends on)."""
    tid = task_id(f"tm-{raw['id']}")
    task = _task(tid, raw, unmapped)
    subtasks = raw.get("subtasks") or []
    subs: list[Task] = []
    sibling_ids = {str(s.get("id")) for s in subtasks if isinstance(s, dict)}
    for j, sub in enumerate(subtasks):
        if not isinstance(sub, dict) or "id" not in sub:
            unmapped.append(f"{tid}: subtasks[{j}] is not a subtask with an id; left out")
            continue
        sid = task_id(f"{tid}.{sub['id']}")
        deps = []
        for d in sub.get("dependencies") or []:
            text = str(d)
            if "." in text:  # "1.2": a subtask of any task
                deps.append(task_id(f"tm-{text}"))
            elif text in sibling_ids:
                deps.append(task_id(f"{tid}.{text}"))
            elif text == str(raw["id"]):  # its own parent, which depends on it: a cycle
                unmapped.append(f"{sid}: dependency on its parent {tid} left out (the parent depends on its subtasks)")
            else:
                deps.append(task_id(f"tm-{text}"))
        subs.append(_task(sid, {**sub, "dependencies": []}, unmapped, deps))
    task.depends_on = (*task.depends_on, *(s.id for s in subs))
    return [task, *subs]


def _task(tid: str, raw: dict, unmapped: list[str], deps: list[str] | None = None) -> Task:
    title = one_line(raw.get("title") or "")
    if not title:
        title = one_line(raw.get("description") or "") or "(untitled)"
        unmapped.append(f"{tid}: no title; the title is '{title}'")
    if deps is None:
        deps = [task_id(f"tm-{d}") for d in raw.get("dependencies") or []]
    status = str(raw.get("status") or "").lower()
    done = status == "done"
    tags: tuple[str, ...] = ()
    if status not in OPEN and not done:
        tags = (task_id(status),)
        if status == "cancelled":
            done = True  # never run; what depends on it may
            unmapped.append(f"{tid}: status cancelled: imported as a checked task tagged '{tags[0]}' so it never runs")
        else:
            unmapped.append(f"{tid}: status {status}: imported as an open task tagged '{tags[0]}'")
    priority = None
    if raw.get("priority") is not None:
        priority = PRIORITIES.get(str(raw["priority"]).lower())
        if priority is None:
            unmapped.append(f"{tid}: priority '{raw['priority']}' is not high, medium or low; left out")
    success = one_line(raw.get("testStrategy") or "") or None
    for key in sorted(set(raw) - TASK_FIELDS):
        unmapped.append(f"{tid}: field '{key}' not imported")
    return Task(id=tid, title=title, done=done, depends_on=tuple(deps), priority=priority, success=success,
                tags=tags, goal=goal_text(str(raw.get("description") or ""), str(raw.get("details") or "")))


def _unique(tasks: list[Task], unmapped: list[str]) -> list[Task]:
    seen: set[str] = set()
    out = []
    for t in tasks:
        if t.id in seen:
            unmapped.append(f"{t.id}: a second task with this id; left out")
            continue
        seen.add(t.id)
        out.append(t)
    return out
