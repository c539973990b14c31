"""Importers: task lists other tools keep, as a roadmap.md (`harnessc import taskmaster|speckit`).

Each importer reads its format into Tasks and a list of what did not map (never dropped in
silence); format_roadmap writes them. The result lints with no errors: ids are valid and
unique, and dependencies name tasks that exist (others are listed instead).

What `import` prints after the roadmap (Imported.summary) is shared: how many tasks each
source status became (`statuses`), what was kept but changed (`warnings`: a second task
with an id taken is kept under a suffixed id by Ids, naming both places), and what did not
map: each field not imported once, with how many tasks have it (`fields`), then one line
per other thing (`unmapped`). The roadmap names its source relative to the project
(source_name), never by an absolute path: the overview goes into every prompt.

The files come from outside, so their text is held as text (one_line, goal_text,
prose_line): a field never becomes more than one roadmap line, whatever line break it holds
(every one str.splitlines knows), control characters are shown as `log` shows them (^[),
and nothing in it reads as a task, a heading or a property. Imported.checked_text proves it:
the roadmap is read back with the compiler's own parser and must hold exactly the tasks
the importer made.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..compiler.roadmap import ID_PATTERN, IGNORE_COMMENT, _property_line, format_roadmap, parse_roadmap
from ..compiler.tasks import Roadmap, Task
from ..diagnostics import Diagnostics
from ..textsafe import visible

MAX_IMPORT_BYTES = 50_000_000  # as a roadmap.md (compiler/load.py): the roadmap written is no smaller
MAX_DEPTH = 100  # arrays and objects nested deeper: not a task list (Taskmaster's nest about 6 deep)


class NotImportable(ValueError):
    """The file cannot be read as the format claims: a one-line reason naming the place."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


@dataclass
class Imported:
    roadmap: Roadmap
    unmapped: list[str] = field(default_factory=list)  # what did not map, one line each
    warnings: list[str] = field(default_factory=list)  # what was kept but changed (a suffixed id, a dropped edge)
    fields: dict[str, list[str]] = field(default_factory=dict)  # a field not imported -> the tasks that have it
    statuses: Counter = field(default_factory=Counter)  # "pending -> open" -> how many tasks

    def summary(self) -> list[str]:
        """What `import` prints after its first line: the status mapping counted, the
        warnings, and what did not map (each unmapped field once, with a count)."""
        out = []
        if self.statuses:
            out.append("statuses:")
            out += [f"  - {n} {what}" for what, n in self.statuses.items()]
        if self.warnings:
            out.append(f"warnings ({len(self.warnings)}):")
            out += [f"  - {line}" for line in self.warnings]
        lines = [field_line(name, where) for name, where in self.fields.items()] + self.unmapped
        if lines:
            out.append(f"not mapped ({len(lines)}):")
            out += [f"  - {line}" for line in lines]
        return out

    def text(self) -> str:
        return format_roadmap(self.roadmap)

    def checked_text(self) -> str:
        """The roadmap's text, read back with the compiler's parser first: it must hold exactly
        the imported tasks, nothing more (a planted task), less or different, and parse with
        no error. Otherwise NotImportable: an importer bug, nothing is written."""
        text = self.text()
        diags = Diagnostics()
        read = parse_roadmap(text, "roadmap.md", diags)
        hint = "nothing was written; please report it with the file you imported"
        if diags.errors:
            e = diags.errors[0]
            raise NotImportable(f"the imported roadmap would not parse: {e.message} (line {e.span.line})", hint)
        if read.ignores:  # an importer writes no ignore comment: one would silence warnings
            raise NotImportable("the imported roadmap would hold an ignore comment", hint)
        meant = [_comparable(t) for t in self.roadmap.tasks]
        got = [_comparable(t) for t in read.tasks]
        if meant != got:
            at = next((i for i, (a, b) in enumerate(zip(meant, got)) if a != b), min(len(meant), len(got)))
            which = got[at].id if at < len(got) else meant[at].id
            raise NotImportable(f"the imported roadmap would not read back as imported: {len(got)} task(s) "
                                f"instead of {len(meant)}, first difference at task {visible(which)}", hint)
        return text


def _comparable(t: Task) -> Task:
    """A task with what writing and reading it back may change made equal: its position,
    and whitespace in its goal (the written goal is indented)."""
    return dataclasses.replace(t, line=1, col=1, goal=" ".join(t.goal.split()), source=None)


FIELD_EXAMPLES = 3  # tasks a "not mapped" field line names; the rest are counted


def field_line(name: str, where: list[str]) -> str:
    """`field 'parentTaskId' on 202 tasks (tm-3.1, tm-3.2, tm-3.3, ...): not imported`."""
    shown = ", ".join(where[:FIELD_EXAMPLES]) + (", ..." if len(where) > FIELD_EXAMPLES else "")
    count = f"{len(where)} task{'s' if len(where) != 1 else ''}"
    return f"field '{one_line(name)}' on {count} ({shown}): not imported"


class Ids:
    """Task ids as an importer hands them out. A second task with an id already given is
    kept (a real task, not a typo to drop) under the id with a suffix, -2, -3, ..., and a
    warning names both places; a dependency on the id means the first task."""

    def __init__(self, warnings: list[str]):
        self.warnings = warnings
        self.place: dict[str, str] = {}  # id given -> where its task is in the source

    def claim(self, tid: str, place: str) -> str:
        if tid not in self.place:
            self.place[tid] = place
            return tid
        n = 2
        while f"{tid}-{n}" in self.place:
            n += 1
        new = f"{tid}-{n}"
        self.place[new] = place
        self.warnings.append(f"{place}: a second task {tid} (the first is {self.place[tid]}); kept as {new} "
                             f"(a dependency on {tid} means the first)")
        return new


def source_name(path: str | Path, project: str | Path) -> str:
    """How the roadmap names the file it was imported from: its path relative to the
    project when it is inside it (`.taskmaster/tasks/tasks.json`), else its file name. Never
    an absolute path: it would go into every prompt, and differ from machine to machine."""
    source, root = Path(os.path.abspath(path)), Path(os.path.abspath(project))
    try:
        return source.relative_to(root).as_posix()
    except ValueError:
        return source.name


_ID = re.compile(ID_PATTERN)
_NOT_ID = re.compile(r"[^A-Za-z0-9._-]+")


def task_id(text: str) -> str:
    """A valid harnessc id made of `text` (characters an id cannot hold become '-')."""
    tid = _NOT_ID.sub("-", text).strip("-._") or "task"
    return tid if _ID.fullmatch(tid) else "t" + tid


def one_line(text: str) -> str:
    """Text for a title or a property value: one line (every line break and run of white
    space is one space), control characters shown (^[, ^@), and no ignore comment."""
    return _no_directive(visible(" ".join(str(text).split())))


# the line breaks str.splitlines knows but Markdown (and so a tasks.md line) does not
_OTHER_BREAKS = re.compile("[\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def prose_line(line: str) -> str:
    """A line of a Markdown file (split at \\n, \\r\\n, \\r) as one roadmap line: the other
    line breaks become spaces, control characters are shown; tabs stay."""
    return visible(_OTHER_BREAKS.sub(" ", line))


def _no_directive(text: str) -> str:
    """Text with a `harnessc: ignore[...]` comment broken, so it silences no warning."""
    if "harnessc:" in text and IGNORE_COMMENT.search(text):
        return text.replace("harnessc:", "harnessc\\:")
    return text


def goal_text(*parts: str) -> str:
    """A goal from paragraphs: every line break made '\\n' (each written line is indented
    under its task, so none can start a task or a heading), control characters shown, tabs
    expanded (tabs in indentation are an error), and never starting with a line the parser
    would read as a property ('- accept: ...', an ignore comment)."""
    text = "\n\n".join(p.strip("\n") for p in parts if p and p.strip())
    text = visible("\n".join(text.splitlines())).expandtabs(4)
    first = next((ln for ln in text.split("\n") if ln.strip()), "")
    if first.lstrip()[:1] in ("-", "*", "+") or _property_line("  " + first, True) is not None:
        text = "Details:\n\n" + text
    return text


def bounded_depth(text: str, source: str) -> None:
    """NotImportable when JSON `text` nests arrays and objects more than MAX_DEPTH deep (the
    json module would recurse until Python's limit); one pass, strings skipped."""
    depth = 0
    for m in _JSON_NESTING.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
                raise NotImportable(f"{source}:{line}:{col}: arrays and objects nested more than {MAX_DEPTH} deep",
                                    "a task list nests a few levels deep; is this the right file?")
        elif c in "]}":
            depth -= 1


# a string (skipped; an unclosed one runs to the end, so no quote is scanned twice) or a bracket
_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def keep_known_dependencies(tasks: list[Task], unmapped: list[str],
                            left_out: dict[str, str] | None = None, warnings: list[str] | None = None) -> list[Task]:
    """Tasks whose depends_on names only tasks that exist (and not themselves); the rest is
    listed. `left_out`: tasks not imported on purpose (id -> why, e.g. "cancelled"): an edge
    to one is dropped with a warning."""
    known = {t.id for t in tasks}
    left_out = left_out or {}
    out = []
    for t in tasks:
        deps = []
        for d in dict.fromkeys(t.depends_on):
            if d in left_out and d not in known:
                (warnings if warnings is not None else unmapped).append(
                    f"{t.id}: dependency on {d} dropped: {d} is {left_out[d]} (left out)")
            elif d not in known:
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
