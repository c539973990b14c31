"""spec-kit specs/NNN-feature/tasks.md -> roadmap.md.

A task line is `- [ ] T001 [P] [US1] Description with a path (depends on T012, T013)`
(`[X]` when done). Each `## ` section holding tasks is a phase (`## Phase 3: User Story 1 -
...`). The order is spec-kit's own (templates/tasks-template.md, "Dependencies & Execution
Order"; templates/commands/tasks.md):

- a user-story phase (its heading names `User Story N`, or all its tasks carry one `[USn]`)
  waits for the phase before the stories (Foundational) and for earlier phases of the same
  story only: stories run side by side;
- another phase waits for the story phases since the last such phase, or for the phase
  before it (Setup, then Foundational; Polish after the stories);
- `**US8 (Phase 5)**: Depends on US6` lines (the file's "Phase Dependencies") add phases;
- inside a phase, a task without [P] waits for the tasks before it; a [P] task ("different
  files, no dependencies on incomplete tasks") waits only for what the phase waits for;
- `(depends on T027-T029)` in a task, `T008 blocks T009, T015`, `T010 before T011`,
  `T006-T010 depend on T001-T005` and `T004 should run after T001-T003` anywhere add
  dependencies.

[P] becomes the tag `parallel`, [USn] the tag `USn`. Each task's goal holds the text of its
phase (purpose, goal, independent test, sub-headings, checkpoint; the heading is the task's
phase), the overview only the text before the first section: a prompt holds what its task
needs, not the whole file. The other sections are kept after the tasks under `## Notes from
tasks.md` (one with nothing but its heading is left out). Prose goes in fenced code blocks
nothing inside can close.

Task lines inside fenced code blocks (``` and ~~~, read as the roadmap's own lexer reads
them) and HTML comments (<!-- ... -->, across lines, and one never closed) are no tasks;
they and the comments are listed, and the comments left out. `TXXX` lines (the template's
placeholders) and a second task with the same id are listed too; the second is kept as
`T021-2`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..compiler.roadmap import _fence, format_roadmap
from ..compiler.tasks import Roadmap, Task
from . import (
    Ids,
    Imported,
    NotImportable,
    goal_text,
    keep_known_dependencies,
    one_line,
    prose_line,
    task_id,
)

_TASK = re.compile(r"[-*][ \t]+\[([ xX])\][ \t]+(T\d+)\b[ \t]*(.*)")
_PLACEHOLDER = re.compile(r"[-*][ \t]+\[[ xX]\][ \t]+(T[0-9]*X[0-9X]*)\b")  # TXXX: the template's
_MARK = re.compile(r"\[(P|US\d+)\][ \t]*")
_DEPENDS_START = re.compile(r"\(\s*depends on\s", re.IGNORECASE)  # its ')' is found with str.find
_REF = re.compile(r"\b(T\d+)\b(?:[ \t]*[-–][ \t]*(T\d+)\b)?")  # T005, or a range T027-T029
_PHASE = re.compile(r"##[ \t]+(Phase\b.*)", re.IGNORECASE)
_TITLE = re.compile(r"#[ \t]+(?:Tasks:?[ \t]*)?(.*)")
_STORY = re.compile(r"\bUser[ \t]+Stor(?:y|ies)[ \t]+(\d+)|\bUS(\d+)\b", re.IGNORECASE)
_PHASE_NO = re.compile(r"\bPhase[ \t]+(\d+(?:\.\d+)*)\b", re.IGNORECASE)
# "- **US8 (Phase 5)**: Depends on US6 - Storage needs schema models"
_PHASE_DEPENDS = re.compile(r"[ \t]*[-*][ \t]+\*\*([^*\n]{1,200})\*\*[ \t]*:?[ \t]*depends?[ \t]+on\b(.*)",
                            re.IGNORECASE)
_REASON = re.compile(r"[ \t]+[-–—][ \t]|[(;]")  # where a dependency line's reason starts
# one token of a prose line: an id, a range dash, a list separator, a dependency phrase, a word
_TOKEN = re.compile(r"(T\d+)\b|([-–])|(,|&|/|\band\b)|(\bblocks?\b|\bbefore\b)|(\bdepends?[ \t]+(?:up)?on\b)"
                    r"|(\b(?:(?:should|must|can|will)[ \t]+)?(?:runs?|starts?|comes?)[ \t]+after\b)|\w+|\S",
                    re.IGNORECASE)
# words that say a line orders tasks: such a line not understood is listed
_ORDER_WORD = re.compile(r"\b(?:[Bb]efore|[Aa]fter|[Dd]epends?|[Dd]epending|blocks|blocked|[Rr]equires?|[Ww]aits?)\b")
_RULES = ("---", "***", "___")  # thematic breaks as spec-kit writes them between sections
NOTES_HEADING = "Notes from tasks.md"
MAX_REDUCED = 1_000  # phases: beyond, the implied phase edges are kept (n^2 sets)


@dataclass
class _Section:
    """A `## ` section of tasks.md (or the text before the first: heading None)."""
    heading: str | None
    no: int
    lines: list[str] = field(default_factory=list)  # its text, without task lines and comments
    tasks: list[Task] = field(default_factory=list)
    story: int | None = None
    after: list[int] = field(default_factory=list)  # the sections (indices) it waits for


@dataclass
class SpecKitImport(Imported):
    """An import with the sections of tasks.md no task needs, written after the tasks."""
    notes: str = ""

    def text(self) -> str:
        text = format_roadmap(self.roadmap)
        return (text + f"\n## {NOTES_HEADING}\n\n{self.notes}\n") if self.notes else text


def read(text: str, source: str) -> SpecKitImport:
    """The roadmap of a tasks.md text (`source` names it in messages and in the roadmap: pass
    it relative to the project)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    # Markdown's lines, each as the roadmap will hold it (other line breaks are spaces, control
    # characters shown), so what is read here is what the roadmap's parser will read
    lines = [prose_line(line) for line in text.split("\n")]
    title = None
    front: list[str] = []  # the lines before the title (front matter)
    sections = [_Section(None, 0)]
    unmapped: list[str] = []
    warnings: list[str] = []
    ids = Ids(warnings)
    parallel: set[str] = set()
    said: list[tuple[list, list, int]] = []  # "T001 blocks T002" and alike: (before, after, line)
    phase_says: list[tuple[str, str, int]] = []  # "**US8 (Phase 5)**: Depends on US6": (label, refs, line)
    for no, line, kind in _markdown_lines(lines, source, unmapped):
        if kind != "text":  # code, or what follows a comment on its last line: never a task or heading
            sections[-1].lines.append(line)
            continue
        m = _TASK.match(line)
        if m is None:
            p = _PLACEHOLDER.match(line)
            if p:
                warnings.append(f"{source}:{no}: '{one_line(line[p.start(1):])}': {p.group(1)} is the template's "
                                "placeholder, not a task id; left out (number it to import it)")
                continue
            _read_prose(line, no, source, said, phase_says, unmapped)
            if title is None and line.startswith("# "):
                title = one_line(_TITLE.match(line).group(1))
                if len(sections) == 1:
                    front, sections[0].lines = sections[0].lines, []
                continue
            if line.startswith("## "):
                sections.append(_Section(line, no))
            elif line.strip() not in _RULES:  # a rule only parts sections: no text of theirs
                sections[-1].lines.append(line)
            continue
        done, tid, rest = m.group(1) != " ", m.group(2), m.group(3)
        marks = _MARK.findall(rest[: _marks_end(rest)])
        rest = rest[_marks_end(rest):]
        deps, rest = _dependencies(rest)
        rest = one_line(rest)
        tid = ids.claim(task_id(tid), f"{source}:{no}")
        if "P" in marks:
            parallel.add(tid)
        tags = (("parallel",) if "P" in marks else ()) + tuple(m for m in marks if m != "P")
        section = sections[-1]
        task = Task(id=tid, title=rest or tid, done=done, depends_on=tuple(deps), tags=tags,
                    phase=_phase_name(section), line=no)
        section.tasks.append(task)
        if not rest:
            unmapped.append(f"{source}:{no}: {tid} has no description; its title is its id")
    tasks = [t for s in sections for t in s.tasks]
    if not tasks:
        raise NotImportable(f"{source}: no task lines like '- [ ] T001 Description' found")
    refs = _Refs(tasks)
    for t in tasks:  # "(depends on T027-T029)": each task of the range
        t.depends_on = tuple(refs.ids(t.depends_on, source, t.line, unmapped))
    groups = [s for s in sections if s.tasks]
    _phase_order(groups, phase_says, source, unmapped)
    _order_tasks(groups, parallel)
    by_id = {t.id: t for t in tasks}
    for before, after, no in said:
        firsts = refs.ids(before, source, no, unmapped)
        for a in refs.ids(after, source, no, unmapped):
            if a in by_id:
                by_id[a].depends_on = (*by_id[a].depends_on, *(b for b in firsts if refs.spend()))
            else:
                unmapped.append(f"{source}:{no}: '{a}' is named as waiting for {_some(firsts)}, but there is "
                                "no such task; left out")
    if refs.over:
        unmapped.append(f"{source}: more than {refs.budget_at_start} dependencies named in ranges and "
                        "prose; the rest left out")
    _check_phase_order(tasks, unmapped, source)
    for s in groups:
        goal = _goal(s)
        for t in s.tasks:
            t.line, t.goal = 1, goal
    roadmap = Roadmap(path="roadmap.md", title=title or "Imported from spec-kit",
                      overview=_overview(sections[0].lines, source, len(groups) > 0),
                      tasks=keep_known_dependencies(tasks, unmapped))
    notes = [*front, *(ln for s in sections[1:] if not s.tasks and _text_of(s) for ln in [s.heading, *s.lines])]
    notes = _trimmed(notes)
    return SpecKitImport(roadmap, unmapped, warnings, notes=_code_block(notes) if notes else "")


def _some(ids: list[str]) -> str:
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def _phase_name(section: _Section) -> str | None:
    """The phase a section's tasks get: its heading's text (no `## `), or None before the first."""
    if section.heading is None:
        return None
    h = _PHASE.match(section.heading)
    name = one_line(h.group(1) if h else section.heading[3:]).rstrip(" 🎯")
    return name or f"Section at line {section.no}"


def _read_prose(line: str, no: int, source: str, said: list, phase_says: list, unmapped: list[str]) -> None:
    """Collect what a prose line says about the order: `T008 blocks T009, T015`, `T010 before
    T011`, `T006-T010 depend on T001-T005`, `T004 should run after T001-T003` (task level) or
    `**US8 (Phase 5)**: Depends on US6` (phase level). A line that names tasks and speaks of order in
    another way is listed. One pass over its tokens."""
    p = _PHASE_DEPENDS.match(line)
    if p:
        phase_says.append((p.group(1), _REASON.split(p.group(2), 1)[0], no))
        return
    if "T" not in line:
        return
    found = 0
    group: list[tuple[str, str]] = []  # the ids being read: (first, last) of each, a range or one id
    before: list | None = None
    kind: str | None = None  # "blocks" (or "before") or "after" once a phrase follows a list of ids
    dash = False
    for m in _TOKEN.finditer(line):
        tid, is_dash, sep, blocks, depends, after = m.groups()
        if tid:
            if dash and group:
                group[-1] = (group[-1][0], tid)
            else:
                group.append((tid, tid))
            dash = False
        elif is_dash:
            dash = bool(group)
        elif sep:
            dash = False
        elif (blocks or depends or after) and group and kind is None:
            before, kind, group, dash = group, ("blocks" if blocks else "after"), [], False
        else:  # any other word ends a list of ids, and a statement
            if kind and group:
                said.append((before, group, no) if kind == "blocks" else (group, before, no))
                found += 1
            before, kind, group, dash = None, None, [], False
    if kind and group:
        said.append((before, group, no) if kind == "blocks" else (group, before, no))
        found += 1
    if not found and _REF.search(line) and _ORDER_WORD.search(line):
        unmapped.append(f"{source}:{no}: '{one_line(line).lstrip('-* ')}' names tasks but is not 'T001 blocks "
                        "T002', 'T002 depends on T001' or '(depends on T001)'; kept as text only")


class _Refs:
    """Ids and ranges named in the file, as the tasks they mean: `T5` and `T005` are one task,
    `T027-T029` each task numbered from 27 to 29. Ranges and prose can name n x n
    dependencies; a budget linear in the tasks bounds them."""

    def __init__(self, tasks: list[Task]):
        self.exact = {t.id for t in tasks}
        self.by_number: dict[int, str] = {}
        for t in tasks:
            if t.id[1:].isdigit():
                self.by_number.setdefault(int(t.id[1:]), t.id)
        self.numbers = sorted(self.by_number)
        self.budget = self.budget_at_start = 100_000 + 20 * len(tasks)
        self.over = False

    def spend(self) -> bool:
        self.budget -= 1
        self.over = self.over or self.budget < 0
        return not self.over

    def one(self, tid: str) -> str:
        return tid if tid in self.exact else self.by_number.get(int(tid[1:]), tid)

    def ids(self, named, source: str, no: int, unmapped: list[str]) -> list[str]:
        """The task ids `named` means: ids, or (first, last) pairs."""
        out: list[str] = []
        for ref in named:
            first, last = (ref, ref) if isinstance(ref, str) else ref
            if first == last:
                out.append(self.one(first))
                continue
            a, b = sorted((int(first[1:]), int(last[1:])))
            lo, hi = bisect.bisect_left(self.numbers, a), bisect.bisect_right(self.numbers, b)
            if lo == hi:
                unmapped.append(f"{source}:{no}: '{first}-{last}' names no task; left out")
            for n in self.numbers[lo:hi]:
                if not self.spend():
                    return out
                out.append(self.by_number[n])
        return out


def _phase_order(groups: list[_Section], phase_says: list, source: str, unmapped: list[str]) -> None:
    """Which phases each phase waits for (see the module's docstring)."""
    index: dict[tuple[str, object], list[int]] = {}  # ("phase", "5") or ("story", 6) -> phases, in order
    for i, g in enumerate(groups):
        number = _PHASE_NO.match(g.tasks[0].phase or "")
        story = _STORY.search(g.heading or "")
        labels = {t for task in g.tasks for t in task.tags if t.startswith("US")}
        if story:
            g.story = int(story.group(1) or story.group(2))
        elif len(labels) == 1 and all(any(x.startswith("US") for x in t.tags) for t in g.tasks):
            g.story = int(labels.pop()[2:])
        if number:
            index.setdefault(("phase", number.group(1)), []).append(i)
        if g.story is not None:
            index.setdefault(("story", g.story), []).append(i)
    base: int | None = None  # the last phase that is no story's
    stories: list[int] = []  # story phases since
    last_of: dict[int, int] = {}  # story -> its last phase so far (which waits for its earlier ones)
    for i, g in enumerate(groups):
        if g.story is not None:
            g.after = ([base] if base is not None else []) + ([last_of[g.story]] if g.story in last_of else [])
            stories.append(i)
            last_of[g.story] = i
        else:
            g.after = stories or ([base] if base is not None else [])
            base, stories = i, []
    budget = 100_000 + 20 * len(groups)  # phases named in all such lines together
    for label, said, no in phase_says:
        which = _phases(label, index, len(groups), prefer_number=True)
        if not which and (_STORY.search(label) or _PHASE_NO.search(label)):
            unmapped.append(f"{source}:{no}: '{one_line(label)}' names no phase with tasks; its dependency left out")
        for i in which:
            named = _phases(said, index, i, prefer_number=False)
            budget -= len(named) + 1
            if budget < 0:
                unmapped.append(f"{source}:{no}: more phase dependencies than {100_000 + 20 * len(groups)}; "
                                "the rest left out")
                return _without_implied(groups)
            if not named and (_STORY.search(said) or _PHASE_NO.search(said)):
                unmapped.append(f"{source}:{no}: '{one_line(said).strip()}' names no earlier phase with tasks; "
                                "left out")
            groups[i].after = list(dict.fromkeys([*groups[i].after, *named]))
    _without_implied(groups)


def _without_implied(groups: list[_Section]) -> None:
    """Drop from each phase's `after` a phase another one there already waits for, so a task
    is not given the ends of Foundational beside those of the story that waited for them.
    Phases are few; past MAX_REDUCED the edges stay as they are (right, only longer)."""
    if len(groups) > MAX_REDUCED:
        return
    below: list[set[int]] = []  # the phases each waits for, directly or not
    for g in groups:
        below.append({j for k in g.after for j in (k, *below[k])})
        g.after = [j for j in g.after if not any(j in below[k] for k in g.after if k != j)]


def _phases(text: str, index: dict, before: int, prefer_number: bool) -> list[int]:
    """The phases (indices under `before`) `text` names: `Phase 5`, `User Story 6`, `US6`. A
    label (`prefer_number`) that says `US8 (Phase 5)` means Phase 5 alone."""
    def under(key) -> list[int]:
        found = index.get(key, [])
        return found[: bisect.bisect_left(found, before)]

    by_number = [i for n in dict.fromkeys(_PHASE_NO.findall(text)) for i in under(("phase", n))]
    if prefer_number and by_number:
        return by_number
    stories = dict.fromkeys(int(a or b) for a, b in _STORY.findall(text))
    return list(dict.fromkeys(by_number + [i for n in stories for i in under(("story", n))]))


def _order_tasks(groups: list[_Section], parallel: set[str]) -> None:
    """Add the order dependencies: each phase's first tasks wait for the ends of the phases it
    waits for; inside it, a task without [P] for the tasks before it, a [P] task for none."""
    ends: list[list[str]] = []
    for g in groups:
        entry = list(dict.fromkeys(e for j in g.after for e in ends[j]))
        last: str | None = None  # the last task without [P]
        since: list[str] = []  # [P] tasks since it
        for t in g.tasks:
            if t.id in parallel:
                t.depends_on = (*entry, *t.depends_on)
                since.append(t.id)
            else:
                before = [last, *since] if last else since or entry
                t.depends_on = (*before, *t.depends_on)
                last, since = t.id, []
        ends.append([last, *since] if last else since)


def _goal(section: _Section) -> str:
    """A task's goal: the text of its phase in tasks.md, in a code block (the phase's
    heading is the task's phase, which the prompt names)."""
    lines = _trimmed(section.lines)
    return goal_text(_code_block(lines)) if lines else ""


def _overview(intro: list[str], source: str, phased: bool) -> str:
    intro = _trimmed(intro)
    text = f"Imported from spec-kit ({one_line(source)}) by `harnessc import`."
    if phased:
        text += " Each task's goal holds the text of its phase in tasks.md."
    if intro:
        text += " Its introduction:\n\n" + _code_block(intro)
    return text


def _text_of(section: _Section) -> bool:
    """Whether a section holds text besides its heading."""
    return any(ln.strip() for ln in section.lines)


def _trimmed(lines: list[str]) -> list[str]:
    """The lines without blank lines at the ends, and runs of blank lines as one."""
    out: list[str] = []
    for line in lines:
        if not line.strip() and (not out or not out[-1].strip()):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def _markdown_lines(lines: list[str], source: str, unmapped: list[str]) -> Iterator[tuple[int, str, str]]:
    """(line number, text, kind) of each line that is not all HTML comment, comments cut out:
    kind "code" inside a fenced block, "rest" after a comment's end on its last line (prose,
    as in Markdown), else "text". Task lines in code and comments, and the comments, are
    listed in `unmapped`."""
    fence: tuple[str, int] | None = None  # an open fenced code block: (character, length)
    comment_at = 0  # the line an open HTML comment started on (0: none)
    for no, line in enumerate(lines, 1):
        if fence is not None:
            if _closes(line, fence):
                fence = None
            elif _TASK.match(line):
                unmapped.append(f"{source}:{no}: a task line inside a fenced code block; left out")
            yield no, line, "code"
        elif comment_at:
            if _TASK.match(line):
                unmapped.append(f"{source}:{no}: a task line inside an HTML comment; left out")
            rest, still_open = _uncommented(line, True)
            if not still_open:
                unmapped.append(f"{source}:{comment_at}-{no}: an HTML comment; left out")
                comment_at = 0
                if rest.strip():
                    yield no, rest, "rest"
        elif _opens_fence(line):
            fence = _fence(line.lstrip(" \t"))
            yield no, line, "code"
        elif "<!--" in line:
            text, still_open = _uncommented(line, False)
            if still_open:
                comment_at = no
            else:
                unmapped.append(f"{source}:{no}: an HTML comment; left out")
            if text.strip():
                yield no, text, "text"
        else:
            yield no, line, "text"
    if comment_at:
        unmapped.append(f"{source}:{comment_at}: an HTML comment that is never closed; the rest of the file left out")


def _opens_fence(line: str) -> bool:
    """Whether a line opens a fenced code block, as the roadmap's own lexer reads it."""
    s = line.lstrip(" \t")
    return len(line) - len(s) <= 3 and s[:1] in ("`", "~") and _fence(s) is not None


def _closes(line: str, fence: tuple[str, int]) -> bool:
    """Whether a line closes the fenced block `fence`, as the roadmap's own lexer reads it."""
    s = line.lstrip(" ")
    ch, n = fence
    return len(line) - len(s) <= 3 and s.startswith(ch * n) and not s.lstrip(ch).strip()


def _uncommented(line: str, inside: bool) -> tuple[str, bool]:
    """(the line without its HTML comments, whether one is still open at its end); `inside`:
    the line starts inside a comment. `<!-->` is a whole comment, as in HTML."""
    out, at = [], 0
    while True:
        if inside:
            end = line.find("-->", at)
            if end < 0:
                return "".join(out), True
            at, inside = end + 3, False
        else:
            start = line.find("<!--", at)
            if start < 0:
                out.append(line[at:])
                return "".join(out), False
            out.append(line[at:start])
            at, inside = start + 2, True


def _code_block(lines: list[str]) -> str:
    """The lines as one fenced code block that no line of theirs can close (its fence is
    longer than any run of backticks a line starts with): in the roadmap nothing inside
    reads as a heading, a task or a fence, and no comment inside hides what follows."""
    longest = max((len(s) - len(s.lstrip("`")) for s in (line.lstrip(" \t") for line in lines)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + "markdown", *lines, fence])


def _dependencies(text: str) -> tuple[list[tuple[str, str]], str]:
    """(ids and ranges named in the "(depends on T001, T027-T029)" groups of a task's text, the
    text without them). One pass: once no ')' follows, no later group can close either."""
    deps: list[tuple[str, str]] = []
    kept: list[str] = []
    at = 0
    for m in _DEPENDS_START.finditer(text):
        if m.start() < at:
            continue
        close = text.find(")", m.end())
        if close < 0:
            break
        deps += [(a, b or a) for a, b in _REF.findall(text, m.end(), close)]
        kept.append(text[at : m.start()])
        at = close + 1
    kept.append(text[at:])
    return deps, "".join(kept)


def _marks_end(rest: str) -> int:
    """Where the leading [P] / [USn] marks of a task's text end."""
    at = 0
    while True:
        m = _MARK.match(rest, at)
        if m is None:
            return at
        at = m.end()


def _check_phase_order(tasks: list[Task], unmapped: list[str], source: str) -> None:
    """Drop (and list) a dependency on a later task that already waits for this one: with the
    phase and sequence order it would close a cycle.

    Each check walks the graph, so the walks share a budget linear in the tasks: a file with
    thousands of such dependencies (`T999 blocks T1, ..., T998`) is not checked here past it,
    and keep_known_dependencies drops what still closes a cycle (listed too)."""
    by_id = {t.id: t for t in tasks}
    at = {t.id: i for i, t in enumerate(tasks)}
    budget = 100_000 + 20 * sum(len(t.depends_on) + 1 for t in tasks)  # steps of all walks together

    def reaches(start: str, goal: str) -> bool | None:
        """Whether `start` waits for `goal`; None once the budget is spent."""
        nonlocal budget
        seen, todo = set(), [start]
        while todo:
            tid = todo.pop()
            if tid == goal:
                return True
            if tid not in seen and tid in by_id:
                seen.add(tid)
                budget -= 1 + len(by_id[tid].depends_on)
                if budget < 0:
                    return None
                todo += by_id[tid].depends_on
        return False

    for t in tasks:
        for d in list(dict.fromkeys(t.depends_on)):
            if not (d in at and at[d] > at[t.id]):
                continue
            found = reaches(d, t.id)
            if found is None:
                return
            if found:
                t.depends_on = tuple(x for x in t.depends_on if x != d)
                unmapped.append(f"{t.id}: dependency on {d} left out: {d} comes later in {source} and "
                                f"already waits for {t.id}")
