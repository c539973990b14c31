"""spec-kit specs/NNN-feature/tasks.md -> roadmap.md.

A task line is `- [ ] T001 [P] [US1] Description with a path (depends on T012, T013)`
(`[X]` when done). Each `## Phase N: Name` is a phase and depends on the phase before (its
first tasks wait for the earlier phase's last ones). Inside a phase, a task without [P] runs
after the tasks before it, and a [P] task after the last task without [P] before it.
[P] becomes the tag `parallel`, [USn] the tag `USn`; "(depends on T005)" and "T005 blocks
T006" lines anywhere become dependencies. The prose (purpose, checkpoints, the notes on
execution order) is kept in the roadmap's overview, as a code block nothing inside can close.

Task lines inside fenced code blocks (``` and ~~~, read as the roadmap's own lexer reads
them) and HTML comments (<!-- ... -->, across lines, and one never closed) are no tasks;
they and the comments are listed, and the comments left out.
"""

from __future__ import annotations

import re
from typing import Iterator

from ..compiler.roadmap import _fence
from ..compiler.tasks import Roadmap, Task
from . import NotImportable, Imported, keep_known_dependencies, one_line, prose_line, task_id

_TASK = re.compile(r"[-*][ \t]+\[([ xX])\][ \t]+(T\d+)\b[ \t]*(.*)")
_MARK = re.compile(r"\[(P|US\d+)\][ \t]*")
_DEPENDS_START = re.compile(r"\(\s*depends on\s", re.IGNORECASE)  # its ')' is found with str.find
_BLOCKS = re.compile(r"\b(T\d+)\s+blocks\s+((?:T\d+)(?:\s*(?:,|and)\s*T\d+)*)", re.IGNORECASE)
_IDS = re.compile(r"\bT\d+\b")
_PHASE = re.compile(r"##[ \t]+(Phase\b.*)", re.IGNORECASE)
_TITLE = re.compile(r"#[ \t]+(?:Tasks:?[ \t]*)?(.*)")


def read(text: str, source: str) -> Imported:
    """The roadmap of a tasks.md text (`source` names it in messages)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    # Markdown's lines, each as the roadmap will hold it (other line breaks are spaces, control
    # characters shown), so what is read here is what the roadmap's parser will read
    lines = [prose_line(line) for line in text.split("\n")]
    title, phase = None, None
    tasks: list[Task] = []
    prose: list[str] = []
    unmapped: list[str] = []
    order: dict[str, int] = {}
    phase_of: dict[str, str | None] = {}
    parallel: set[str] = set()
    blocks: list[tuple[str, str, int]] = []  # (before, after, line)
    for no, line, kind in _markdown_lines(lines, source, unmapped):
        if kind != "text":  # code, or what follows a comment on its last line: never a task or heading
            prose.append(line)
            continue
        m = _TASK.match(line)
        if m is None:
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
        deps, rest = _dependencies(rest)
        rest = one_line(rest)
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
    while prose and not prose[-1].strip():
        prose.pop()
    start = next((i for i, line in enumerate(prose) if line.strip()), len(prose))
    roadmap = Roadmap(path="roadmap.md", title=title or "Imported from spec-kit",
                      overview=f"Imported from spec-kit ({one_line(source)}) by `harnessc import`."
                               + (" The text of tasks.md without its task lines and comments:\n\n"
                                  + _code_block(prose[start:]) if start < len(prose) else ""),
                      tasks=keep_known_dependencies(tasks, unmapped))
    return Imported(roadmap, unmapped)


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


def _dependencies(text: str) -> tuple[list[str], str]:
    """(ids named in the "(depends on T001, T002)" groups of a task's text, the text without
    them). One pass: once no ')' follows, no later group can close either."""
    deps: list[str] = []
    kept: list[str] = []
    at = 0
    for m in _DEPENDS_START.finditer(text):
        if m.start() < at:
            continue
        close = text.find(")", m.end())
        if close < 0:
            break
        deps += _IDS.findall(text, m.end(), close)
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
