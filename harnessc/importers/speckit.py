"""spec-kit specs/NNN-feature/tasks.md -> roadmap.md.

A task line is `- [ ] T001 [P] [US1] Description with a path (depends on T012, T013)`
(`[X]` when done). Each `## Phase N: Name` is a phase and depends on the phase before (its
first tasks wait for the earlier phase's last ones). Inside a phase, a task without [P] runs
after the tasks before it, and a [P] task after the last task without [P] before it.
[P] becomes the tag `parallel`, [USn] the tag `USn`; "(depends on T005)" and "T005 blocks
T006" lines anywhere become dependencies. The prose (purpose, checkpoints, the notes on
execution order) is kept as the roadmap's overview.
"""

from __future__ import annotations

import re

from ..compiler.tasks import Roadmap, Task
from . import NotImportable, Imported, keep_known_dependencies, one_line, task_id

_TASK = re.compile(r"[-*][ \t]+\[([ xX])\][ \t]+(T\d+)\b[ \t]*(.*)")
_MARK = re.compile(r"\[(P|US\d+)\][ \t]*")
_DEPENDS = re.compile(r"\(\s*depends on\s+([^)]*)\)", re.IGNORECASE)
_BLOCKS = re.compile(r"\b(T\d+)\s+blocks\s+((?:T\d+)(?:\s*(?:,|and)\s*T\d+)*)", re.IGNORECASE)
_IDS = re.compile(r"\bT\d+\b")
_PHASE = re.compile(r"##[ \t]+(Phase\b.*)", re.IGNORECASE)
_TITLE = re.compile(r"#[ \t]+(?:Tasks:?[ \t]*)?(.*)")


def read(text: str, source: str) -> Imported:
    """The roadmap of a tasks.md text (`source` names it in messages)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    title, phase = None, None
    tasks: list[Task] = []
    prose: list[str] = []
    unmapped: list[str] = []
    order: dict[str, int] = {}
    phase_of: dict[str, str | None] = {}
    parallel: set[str] = set()
    blocks: list[tuple[str, str, int]] = []  # (before, after, line)
    fence = False
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
        m = None if fence else _TASK.match(line)
        if m is None:
            if not fence:
                found = [(b, a, no) for b, rest in _BLOCKS.findall(line) for a in _IDS.findall(rest)]
                blocks += found
                if not found and _IDS.search(line):
                    unmapped.append(f"{source}:{no}: '{one_line(line).lstrip('-* ')}' names tasks but is not "
                                    "'T001 blocks T002' or '(depends on T001)'; kept in the overview only")
                h = _PHASE.match(line)
                if h:
                    phase = one_line(h.group(1)).rstrip(" 🎯") or None
                elif title is None and line.startswith("# "):
                    title = one_line(_TITLE.match(line).group(1))
                    continue
                elif line.startswith("## "):
                    phase = None  # a section that is no phase: tasks there have none
            prose.append(line)
            continue
        done, tid, rest = m.group(1) != " ", m.group(2), m.group(3)
        marks = _MARK.findall(rest[: _marks_end(rest)])
        rest = rest[_marks_end(rest):]
        deps = [d for found in _DEPENDS.findall(rest) for d in _IDS.findall(found)]
        rest = one_line(_DEPENDS.sub("", rest))
        tid = task_id(tid)
        if tid in order:
            unmapped.append(f"{source}:{no}: a second task {tid}; left out")
            continue
        order[tid] = no
        phase_of[tid] = phase
        if "P" in marks:
            parallel.add(tid)
        tags = (("parallel",) if "P" in marks else ()) + tuple(m for m in marks if m != "P")
        tasks.append(Task(id=tid, title=rest or tid, done=done, depends_on=tuple(deps), tags=tags, phase=phase,
                          line=no))
        if not rest:
            unmapped.append(f"{source}:{no}: {tid} has no description; its title is its id")
    if not tasks:
        raise NotImportable(f"{source}: no task lines like '- [ ] T001 Description' found")
    _order_tasks(tasks, parallel)
    by_id = {t.id: t for t in tasks}
    for before, after, no in blocks:
        if after in by_id:
            by_id[after].depends_on = (*by_id[after].depends_on, task_id(before))
        else:
            unmapped.append(f"{source}:{no}: '{before} blocks {after}': no task {after}; left out")
    _check_phase_order(tasks, unmapped, source)
    for t in tasks:
        t.line = 1
    overview = "\n".join(prose).strip()
    roadmap = Roadmap(path="roadmap.md", title=title or "Imported from spec-kit",
                      overview=f"Imported from spec-kit ({source}) by `harnessc import`."
                               + (f" The text of tasks.md without its task lines:\n\n{overview}" if overview else ""),
                      tasks=keep_known_dependencies(tasks, unmapped))
    return Imported(roadmap, unmapped)


def _marks_end(rest: str) -> int:
    """Where the leading [P] / [USn] marks of a task's text end."""
    at = 0
    while True:
        m = _MARK.match(rest, at)
        if m is None:
            return at
        at = m.end()


def _order_tasks(tasks: list[Task], parallel: set[str]) -> None:
    """Add the order dependencies: phases one after the other, tasks without [P] in order."""
    phases: list[list[Task]] = []
    for t in tasks:
        if not phases or phases[-1][0].phase != t.phase:
            phases.append([])
        phases[-1].append(t)
    previous_ends: list[str] = []
    for group in phases:
        barrier: list[str] = previous_ends  # what the next task of this phase waits for
        since: list[str] = []  # tasks since the last barrier
        for t in group:
            if t.id in parallel:
                t.depends_on = (*barrier, *t.depends_on)
                since.append(t.id)
            else:
                t.depends_on = (*(barrier if not since else ()), *since, *t.depends_on)
                barrier, since = [t.id], []
        previous_ends = [*barrier, *since] if since else barrier


def _check_phase_order(tasks: list[Task], unmapped: list[str], source: str) -> None:
    """Drop (and list) a dependency on a later task that already waits for this one: with the
    phase and sequence order it would close a cycle."""
    by_id = {t.id: t for t in tasks}
    at = {t.id: i for i, t in enumerate(tasks)}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            tid = todo.pop()
            if tid == goal:
                return True
            if tid not in seen and tid in by_id:
                seen.add(tid)
                todo += by_id[tid].depends_on
        return False

    for t in tasks:
        for d in list(dict.fromkeys(t.depends_on)):
            if d in at and at[d] > at[t.id] and reaches(d, t.id):
                t.depends_on = tuple(x for x in t.depends_on if x != d)
                unmapped.append(f"{t.id}: dependency on {d} left out: {d} comes later in {source} and "
                                f"already waits for {t.id}")
