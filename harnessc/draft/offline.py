"""The offline draft (`--agent simulate`): a small roadmap made from a requirements
document's own headings and bullets, deterministic, with no model and no key - so the demo
and the tests run anywhere, and a user sees what `draft` writes before paying for it.

Each section of the document (a `##` or deeper heading) becomes a phase; each top-level
bullet in it a task (its text the title, its continuation lines the goal); a section with
no bullets is one task, its heading the title and its first paragraph the goal. A phase's
tasks depend on the phase before's. Every task asks for a completion promise, so the draft
lints with no warning (HC410) and runs on the simulate agent as it stands. The text is the
document's, so it is written the way the importers write text from outside (one_line,
goal_text: nothing in it can read as a task, a heading or a property) and read back with
the compiler's parser before it is used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..compiler.tasks import Roadmap, Task
from ..importers import Ids, Imported, NotImportable, goal_text, one_line, task_id
from ..vocab import ROADMAP
from .answer import Draft

MAX_TASKS = 40  # a draft to review, not the whole plan: the rest is counted in the overview
TITLE_CHARS = 100
ID_WORDS = 3  # words of a section's heading in its tasks' ids
CONTRACTS_TEXT = ("# Drafted by `harnessc draft` (offline): no task of the draft needs a contract of its own.\n"
                  "# Add contracts here (see docs/spec-reference.md#contractsyaml) and name them with `contract:`.\n"
                  "contracts: {}\n")

_HEADING = re.compile(r"(#{1,6})[ \t]+(.*)")
_BULLET = re.compile(r"(?: {0,3})(?:[-*+]|\d{1,9}[.)])[ \t]+(.*)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CHECKBOX = re.compile(r"\[[ xX]\][ \t]+")


@dataclass
class Section:
    heading: str
    bullets: list[list[str]] = field(default_factory=list)  # each bullet: its lines
    prose: list[str] = field(default_factory=list)  # lines outside bullets


def read_sections(text: str) -> tuple[str | None, list[str], list[Section]]:
    """(the first `#` heading, the prose under it, the sections), code blocks skipped."""
    title, intro, sections = None, [], []
    fence = None
    current: Section | None = None
    in_bullet = False
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        heading = _HEADING.fullmatch(line)
        if heading:
            level, words = len(heading.group(1)), heading.group(2).rstrip(" \t#")
            if level == 1 and title is None and current is None:
                title = words
            else:
                current = Section(words)
                sections.append(current)
            in_bullet = False
            continue
        bullet = _BULLET.fullmatch(line)
        if in_bullet and line.strip() and line[:1] in (" ", "\t"):
            current.bullets[-1].append(line.strip())  # a bullet's continuation, or a bullet nested in it
        elif bullet and current is not None and bullet.group(1).strip():
            current.bullets.append([_CHECKBOX.sub("", bullet.group(1), count=1)])
            in_bullet = True
        else:
            in_bullet = False
            (current.prose if current is not None else intro).append(line)
    return title, intro, sections


def first_paragraph(lines: list[str]) -> str:
    para: list[str] = []
    for line in lines:
        if line.strip():
            para.append(line.strip())
        elif para:
            break
    return " ".join(para)


def offline_draft(text: str, source: str, fallback_title: str) -> Draft:
    """The draft of the requirements document `text` (named `source` in the overview)."""
    title, intro, sections = read_sections(text)
    # a heading with nothing under it (a "Non-goals" left empty) is no task
    sections = [s for s in sections if s.bullets or first_paragraph(s.prose)]
    if not sections:  # no section says anything: the document is one task
        sections = [Section(title or fallback_title, prose=intro)]
    tasks: list[Task] = []
    ids, left = Ids([]), 0  # Ids: two sections of one heading still give unique ids
    before: list[str] = []
    for n, section in enumerate(sections, 1):
        name = _cut(one_line(section.heading), TITLE_CHARS) or f"Part {n}"
        phase = f"Phase {n}: {name}"
        stem = _stem(section.heading, n)
        items = section.bullets or [[section.heading, first_paragraph(section.prose) or section.heading]]
        made = []
        for k, lines in enumerate(items, 1):
            if len(tasks) >= MAX_TASKS:
                left += 1
                continue
            tid = ids.claim(task_id(f"{stem}-{k}"), f"{source}: {name}")
            first = one_line(lines[0]) or (f"{name}, item {k}" if section.bullets else name)
            said = lines if section.bullets else lines[1:]  # a section's task: its paragraph
            # the first line is harnessc's: the document's never reads as a property there
            goal = goal_text(f"From {one_line(source)}, section \"{name}\":",
                             " ".join(x.strip() for x in said if x.strip()))
            tasks.append(Task(id=tid, title=_cut(first, TITLE_CHARS), phase=phase, depends_on=tuple(before),
                              completion_promise=_promise(tid), goal=goal))
            made.append(tid)
        before = made or before
    overview = " ".join(filter(None, [
        f"Drafted from {one_line(source)} by `harnessc draft` (offline, from the document's headings and bullets):",
        "review every task, add `accept:` commands that check the work, then rename this file to roadmap.md.",
        _cut(one_line(first_paragraph(intro)), 600),
        f"({left} more bullet{'s' if left != 1 else ''} of the document not drafted: at most {MAX_TASKS} tasks.)"
        if left else ""]))
    roadmap = Roadmap(ROADMAP, title=_cut(one_line(title or fallback_title), TITLE_CHARS), overview=overview,
                      tasks=tasks)
    try:
        return Draft(Imported(roadmap).checked_text(), CONTRACTS_TEXT)
    except NotImportable as e:  # a bug here, never the document's fault: said, not hidden
        raise RuntimeError(f"the offline draft did not read back: {e}") from None


def _stem(heading: str, n: int) -> str:
    words = re.findall(r"[A-Za-z0-9]+", heading.lower())[:ID_WORDS]
    return "-".join(words)[:40].strip("-") or f"part{n}"


def _promise(tid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", tid).upper()[:60] + "_DONE"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
