"""Importers: task lists other tools keep, as a roadmap.md (`harnessc import taskmaster|speckit`).

Each importer reads its format into Tasks and a list of what did not map (never dropped in
silence); format_roadmap writes them. The result lints with no errors: ids are valid and
unique, and dependencies name tasks that exist (others are listed instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..compiler.roadmap import ID_PATTERN, format_roadmap
from ..compiler.tasks import Roadmap, Task


class NotImportable(ValueError):
    """The file cannot be read as the format claims: a one-line reason naming the place."""


@dataclass
class Imported:
    roadmap: Roadmap
    unmapped: list[str] = field(default_factory=list)  # what did not map, one line each

    def text(self) -> str:
        return format_roadmap(self.roadmap)


_ID = re.compile(ID_PATTERN)
_NOT_ID = re.compile(r"[^A-Za-z0-9._-]+")


def task_id(text: str) -> str:
    """A valid harnessc id made of `text` (characters an id cannot hold become '-')."""
    tid = _NOT_ID.sub("-", text).strip("-._") or "task"
    return tid if _ID.fullmatch(tid) else "t" + tid


def one_line(text: str) -> str:
    """Text for a title or a property value: one line, spaces collapsed."""
    return " ".join(str(text).split())


def goal_text(*parts: str) -> str:
    """A goal from paragraphs: tabs expanded (tabs in indentation are an error), line ends
    made '\\n', and never starting with a list item a reader could take for a property."""
    text = "\n\n".join(p.strip("\n") for p in parts if p and p.strip())
    text = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
    if text.lstrip()[:1] in ("-", "*", "+"):
        text = "Details:\n\n" + text
    return text


def keep_known_dependencies(tasks: list[Task], unmapped: list[str]) -> list[Task]:
    """Tasks whose depends_on names only tasks that exist (and not themselves); the rest is listed."""
    known = {t.id for t in tasks}
    out = []
    for t in tasks:
        deps = []
        for d in dict.fromkeys(t.depends_on):
            if d not in known:
                unmapped.append(f"{t.id}: dependency '{d}' names no task; left out")
            elif d == t.id:
                unmapped.append(f"{t.id}: depends on itself; left out")
            else:
                deps.append(d)
        t.depends_on = tuple(deps)
        out.append(t)
    break_cycles(out, unmapped)
    return out


def break_cycles(tasks: list[Task], unmapped: list[str]) -> None:
    """Drop (and list) each dependency that closes a cycle, so the roadmap builds (HC404)."""
    by_id = {t.id: t for t in tasks}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for root in tasks:
        if root.id in state:
            continue
        state[root.id] = 1
        stack = [(root, iter(root.depends_on))]
        while stack:
            task, deps = stack[-1]
            dep = next(deps, None)
            if dep is None:
                state[task.id] = 2
                stack.pop()
            elif state.get(dep) == 1:
                task.depends_on = tuple(d for d in task.depends_on if d != dep)
                unmapped.append(f"{task.id}: dependency on {dep} left out: it closes a cycle")
            elif dep not in state and dep in by_id:
                state[dep] = 1
                stack.append((by_id[dep], iter(by_id[dep].depends_on)))
