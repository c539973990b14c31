"""A plan that grows under review (issue 30 item 4): tasks an agent proposes.

A succeeded task's agent may propose follow-up tasks, as a `next_tasks` list in its
contract output (items `{id, title, goal, depends_on, contract?}`) or as
`<task id=".." depends_on="a,b">goal</task>` markers in its text. Each proposal is checked
(`extract`: ids in the roadmap's grammar, sizes and counts capped: the text is an agent's,
so hostile), then linted against the current roadmap with the proposals before it
(`Batch.lint`), and written to `.harness/proposals/<proposing task>.md` (roadmap syntax,
for people) and `.json` (for `review` and `accept-proposal`). A proposal that does not lint,
would make a cycle, duplicates an id, or exceeds harness.yaml's `plan.max_new_tasks` (per
run) or `plan.max_depth` (generations) is kept as rejected, with its diagnostics.

`accept` appends a waiting proposal to roadmap.md, at the end of its tasks section: a plain
text diff the user can read and revert. How many generations deep a task is lives in
`.harness/proposals/accepted.json` (a task the author wrote is generation 0).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Container, Iterable

from .diagnostics import did_you_mean
from .vocab import ID_PATTERN, MAX_ID_LENGTH, ROADMAP
from .workspace import Workspace, WorkspaceError, task_file_name

GROW_MODES = ("review", "auto", "off")
DEFAULTS = {"grow": "review", "max_new_tasks": 10, "max_depth": 2}
MAX_SCAN = 200_000  # characters of an agent's text looked at for markers
MAX_PER_TASK = 20  # proposals one task may make (more are ignored, and said so)
MAX_TITLE, MAX_GOAL = 200, 4000
_ID = re.compile(ID_PATTERN)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# <task id="x" depends_on="a,b">goal</task>: the opening tag by a bounded pattern, its end by
# str.find (markers(): linear on any text)
_OPEN = re.compile(r"<task\b([^<>]{0,600})>", re.I)
_CLOSE = re.compile(r"</task[ \t]*>", re.I)
MAX_MARKER_GOAL = 8000
_ATTR = re.compile(r"""([A-Za-z_]+)[ \t]*=[ \t]*(?:"([^"]{0,1000})"|'([^']{0,1000})')""")
_TASKS_HEADING = re.compile(r"^##[ \t]+tasks[ \t]*$", re.I | re.M)
_H2 = re.compile(r"^##[ \t]", re.M)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029]")

WAITING, REJECTED, ACCEPTED, ADDED = "waiting", "rejected", "accepted", "added"
# being added by a run (plan.grow: auto, split: true): recorded before roadmap.md is written,
# ADDED once it is; a run killed in between finds it (settle())
ADDING = "adding"


class ProposalError(Exception):
    """A proposal cannot be accepted (the message says why, one line)."""


@dataclass
class Proposal:
    id: str
    title: str
    goal: str
    depends_on: list[str]
    contract: str | None = None
    proposed_by: str = ""
    generation: int = 1
    run: str | None = None
    status: str = WAITING
    diagnostics: list[str] = field(default_factory=list)
    dismissed: bool = False  # rejected by a person (`harnessc reject-proposal`): no longer shown in review

    def block(self) -> str:
        """The task in roadmap syntax (one goal paragraph: an agent's text cannot start a
        line of its own, so it cannot write a second task or a heading)."""
        lines = [f"- [ ] **{self.id}**: {self.title}"]
        if self.depends_on:
            lines.append(f"  - depends_on: {', '.join(self.depends_on)}")
        if self.contract:
            lines.append(f"  - contract: {self.contract}")
        lines += ["", f"  Goal: {self.goal}", ""]
        return "\n".join(lines)


def settings(plan_growth: dict | None) -> dict:
    """harness.yaml `plan:` as plan.json holds it, with the defaults filled in."""
    return {**DEFAULTS, **{k: v for k, v in (plan_growth or {}).items() if v is not None}}


# ------------------------------------------------------------------ reading proposals

def _line(text: Any, limit: int) -> str:
    text = _CONTROL.sub(" ", str(text)).replace("<!--", "&lt;!--")
    return " ".join(text.split())[:limit]


def _ids(value: Any) -> list[str] | None:
    """depends_on as a list of ids, or None when it is not one."""
    if value is None or value == "":
        return []
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > 50:
        return None
    out = [str(i).strip() for i in items if isinstance(i, (str, int)) and str(i).strip()]
    if len(out) != len(items) or not all(_valid_id(i) for i in out):
        return None
    return list(dict.fromkeys(out))


def _valid_id(tid: str) -> bool:
    return len(tid) <= MAX_ID_LENGTH and _ID.fullmatch(tid) is not None


def _first_sentence(goal: str, limit: int = 80) -> str:
    """A title for a proposal without one: the goal's first sentence, cut at a word."""
    first = re.split(r"(?<=[.;:!?])\s", goal, maxsplit=1)[0].rstrip(".;:")
    return first if len(first) <= limit else first[:limit].rsplit(" ", 1)[0] + "..."


def _item(raw: Any, where: str) -> tuple[Proposal | None, str | None]:
    if not isinstance(raw, dict):
        return None, f"{where}: not a mapping with id and goal"
    tid = raw.get("id")
    if not isinstance(tid, str) or not _valid_id(tid):
        return None, f"{where}: id {str(tid)[:60]!r} is not a task id (letters, digits, . _ -, at most {MAX_ID_LENGTH})"
    goal = _line(raw.get("goal") or "", MAX_GOAL)
    if not goal:
        return None, f"{where}: task '{tid}' has no goal"
    deps = _ids(raw.get("depends_on"))
    if deps is None:
        return None, f"{where}: task '{tid}': depends_on is not a list of task ids"
    contract = raw.get("contract")
    if contract is not None and (not isinstance(contract, str) or not _NAME.fullmatch(contract) or len(contract) > 100):
        return None, f"{where}: task '{tid}': contract {str(contract)[:60]!r} is not a contract name"
    title = _line(raw.get("title") or _first_sentence(goal), MAX_TITLE) or tid
    return Proposal(tid, title, goal, deps, contract), None


def markers(text: str) -> list[tuple[str, str]]:
    """(attributes, goal) of each `<task ...>goal</task>` in the first MAX_SCAN characters."""
    text, out, at = text[:MAX_SCAN], [], 0
    while len(out) < 4 * MAX_PER_TASK:
        m = _OPEN.search(text, at)
        if m is None:
            break
        end = _CLOSE.search(text, m.end())
        if end is None:
            break  # no end after this opening: none after a later one either
        if end.start() - m.end() <= MAX_MARKER_GOAL:
            out.append((m.group(1), text[m.end():end.start()].strip()))
        at = end.end()
    return out


def extract(text: str | None, output: Any) -> tuple[list[Proposal], list[str]]:
    """The proposals in a succeeded attempt: `next_tasks` of its output, then the `<task>`
    markers of its text. Returns (proposals, problems): a malformed item is a problem line,
    never an exception."""
    found: list[Proposal] = []
    problems: list[str] = []
    items = output.get("next_tasks") if isinstance(output, dict) else None
    if items is not None and not isinstance(items, list):
        problems.append("next_tasks: not a list")
        items = None
    for i, raw in enumerate(items or []):
        p, why = _item(raw, f"next_tasks[{i}]")
        found.append(p) if p else problems.append(why)
    for tag, goal in markers(text or ""):
        attrs = {k.lower(): a if a is not None else b for k, a, b in _ATTR.findall(tag)}
        p, why = _item({**attrs, "goal": goal}, "<task> marker")
        found.append(p) if p else problems.append(why)
    seen: set[str] = set()
    unique = []
    for p in found:
        if p.id in seen:
            problems.append(f"task '{p.id}' proposed twice by the same answer: the first kept")
            continue
        seen.add(p.id)
        unique.append(p)
    if len(unique) > MAX_PER_TASK:
        problems.append(f"{len(unique)} tasks proposed: the first {MAX_PER_TASK} kept")
        unique = unique[:MAX_PER_TASK]
    return unique, problems


# ------------------------------------------------------------------ the roadmap and lint

def insertion_line(text: str) -> int:
    """Where a new task goes: before the heading that ends the Tasks section (or at the end)."""
    start = _TASKS_HEADING.search(text)
    nxt = _H2.search(text, start.end()) if start else None
    return text.count("\n", 0, nxt.start()) if nxt else len(text.splitlines())


def with_blocks(text: str, blocks: list[str]) -> tuple[str, list[int]]:
    """roadmap.md's text with `blocks` inserted at the end of its tasks section, and each
    block's first line (1-based) in the result."""
    lines = text.splitlines()
    at = insertion_line(text)
    head, tail = lines[:at], lines[at:]
    while head and not head[-1].strip():
        head.pop()
    out, starts = list(head), []
    for b in blocks:
        out.append("")
        starts.append(len(out) + 1)
        out.extend(b.rstrip("\n").splitlines())
    if tail:
        out.append("")
        out.extend(tail)
    return "\n".join(out) + "\n", starts


def _lint_text(root: Path, roadmap_text: str):
    """Lint the project as if roadmap.md were `roadmap_text` (the files on disk are not touched)."""
    from .compiler import CHECK_PASSES, _run, load  # lazy: `show` and `status` read proposals; only this lints
    from .compiler.project import Project  # lazy: the same

    def discover(project: Project) -> None:
        project.sources[ROADMAP] = roadmap_text
        load.discover_contracts(project)

    project = Project(root=Path(root))
    _run(project, (discover, *CHECK_PASSES[1:]))
    return project


HERE = "\x00"  # a diagnostic's file until the proposal's place in its .md is known (markdown())


def _said(d, line: int) -> str:
    hint = f" (hint: {d.hint})" if d.hint else ""
    return f"{HERE}:{line}:{d.span.col}: error[{d.code}]: {d.message}{hint}"


def _placed(diagnostic: str, path: str, start: int) -> str:
    """A diagnostic with its line in the proposal's block made a line of `path` (block at `start`)."""
    if not diagnostic.startswith(HERE + ":"):
        return diagnostic
    line, rest = diagnostic[2:].split(":", 1)
    return f"{path}:{start + int(line) - 1}:{rest}"


class Batch:
    """Lints proposals one after another against roadmap.md plus the ones that passed."""

    def __init__(self, root: Path, roadmap_text: str):
        self.root, self.text = Path(root), roadmap_text
        base = _lint_text(root, roadmap_text)
        self.baseline = {(d.code, d.message) for d in base.diags.errors}
        self.ids = {t.id for t in base.tasks}
        self.passed: list[Proposal] = []

    def lint(self, group: list[Proposal], path: str) -> bool:
        """Lint `group` (one proposal, or the ones left in a cycle) with those passed so far;
        each gets the new errors (lines in `path`'s block); True when there were none."""
        text, starts = with_blocks(self.text, [p.block() for p in [*self.passed, *group]])
        project = _lint_text(self.root, text)
        new = [d for d in project.diags.errors if (d.code, d.message) not in self.baseline]
        got = {t.id: t for t in project.tasks}
        mine = starts[len(self.passed):]
        for p, start in zip(group, mine):
            task = got.get(p.id)
            if task is None:  # (the block is built so that it parses: a guard against surprises)
                p.diagnostics.append(f"{HERE}:1:1: error: task '{p.id}' does not read back as one task of roadmap.md")
        for d in new:
            owner = next((i for i, s in enumerate(mine) if s <= d.span.line < s + p_len(group[i])), None)
            targets = [group[owner]] if owner is not None else group
            for p in targets:
                line = d.span.line - mine[owner] + 1 if owner is not None else 1
                p.diagnostics.append(_said(d, line))
        ok = not any(p.diagnostics for p in group)
        if ok:
            self.passed += group
        return ok


def p_len(p: Proposal) -> int:
    return len(p.block().rstrip("\n").splitlines())


def _over(p: Proposal, cfg: dict) -> str:
    return (f"{HERE}:1:1: error[HC495]: task '{p.id}' is over plan.max_new_tasks ({cfg['max_new_tasks']} per run) "
            "(hint: raise plan.max_new_tasks in harness.yaml, or add the task to roadmap.md yourself)")


def _topo(group: list[Proposal], known: set[str]) -> tuple[list[Proposal], list[Proposal]]:
    """The proposals in the agent's order, each after those of the group it depends on, and
    those left in a cycle. A dependency on an id the roadmap has is on the roadmap's task
    (a proposal reusing that id is rejected by lint)."""
    ids = {p.id for p in group} - known
    done: set[str] = set()
    order, left = [], list(group)
    while True:
        ready = next((p for p in left if all(d in done or d not in ids for d in p.depends_on)), None)
        if ready is None:
            return order, left
        done.add(ready.id)
        order.append(ready)
        left.remove(ready)


# ------------------------------------------------------------------ files

class Store:
    """.harness/proposals/: <task>.json and <task>.md per proposing task, accepted.json."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.ws = Workspace(self.root)
        self.dir = self.ws.harness / "proposals"

    def _file(self, task: str, ext: str) -> Path:
        return self.dir / f"{task_file_name(task)}.{ext}"

    def all(self) -> list[Proposal]:
        out = []
        try:
            names = sorted(p for p in self.dir.glob("*.json") if p.name != "accepted.json")
        except OSError:
            return []
        for path in names:
            try:
                data = json.loads(self.ws.read_bytes(path))
                out += [Proposal(**{k: v for k, v in item.items() if k in Proposal.__dataclass_fields__})
                        for item in data.get("proposals", [])]
            except (OSError, ValueError, TypeError, AttributeError):
                continue  # damaged by hand: that file's proposals are not shown, the rest are
        return out

    def of(self, task: str) -> list[Proposal]:
        return [p for p in self.all() if p.proposed_by == task]

    def generations(self) -> dict[str, int]:
        try:
            data = json.loads(self.ws.read_bytes(self.dir / "accepted.json"))
            return {k: int(v) for k, v in data.items()} if isinstance(data, dict) else {}
        except (OSError, ValueError, TypeError):
            return {}

    def save(self, task: str, proposals: list[Proposal]) -> None:
        self.ws.make_dir(self.dir)
        text = markdown(task, proposals, self.path(task))  # first: it places the diagnostics
        self.ws.write_atomic(self._file(task, "json"), json.dumps(
            {"proposed_by": task, "proposals": [asdict(p) for p in proposals]}, indent=2) + "\n")
        self.ws.write_atomic(self._file(task, "md"), text)

    def remember(self, generations: dict[str, int]) -> None:
        """Record the generations of tasks now in roadmap.md (task id -> generation)."""
        gens = self.generations()
        gens.update(generations)
        self.ws.make_dir(self.dir)
        self.ws.write_atomic(self.dir / "accepted.json", json.dumps(gens, indent=2, sort_keys=True) + "\n")

    def path(self, task: str) -> str:
        return self.ws.rel(self._file(task, "md"))


def markdown(task: str, proposals: list[Proposal], path: str) -> str:
    """The .md of a proposing task's proposals, each diagnostic placed at its line in it."""
    out = [f"# Tasks proposed by {task}", "",
           "Roadmap syntax; `harnessc review` lists them, `harnessc accept-proposal ID` appends one to roadmap.md.",
           ""]
    for p in proposals:
        out.append(f"<!-- {p.status}" + (" by `harnessc reject-proposal`" if p.dismissed else "")
                   + (f": {len(p.diagnostics)} problem(s) below" if p.diagnostics else "") + " -->")
        start = len(out) + 1
        out += p.block().rstrip("\n").split("\n")
        p.diagnostics = [_placed(d, path, start) for d in p.diagnostics]
        out += [f"<!-- {d.replace('--', '- -')} -->" for d in p.diagnostics]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# ------------------------------------------------------------------ a run's side

UNREAD = object()  # Filing.read: the attempt's text is read there


class Filing:
    """One run's filing of proposals: what it counts against plan.max_new_tasks, which ids
    waiting proposals hold, the generations of accepted and added tasks."""

    def __init__(self, root: Path, cfg: dict, store, run_id: str | None):
        self.root, self.cfg, self.store, self.run_id = Path(root), cfg, store, run_id
        self.files = Store(root)
        earlier = self.files.all()
        self.gens = self.files.generations()
        self.this_run = sum(1 for p in earlier if p.run == run_id and p.status != REJECTED)
        self.taken = {p.id: p.proposed_by for p in earlier if p.status == WAITING}

    def read(self, tid: str, output: Any = None, text: Any = UNREAD) -> list[Proposal]:
        """The proposals of `tid`'s final attempt (text and `output`); malformed ones are events.
        `text`: that attempt's raw output when the caller read it already (None: it has none)."""
        if text is UNREAD:
            attempt = self.store.final_attempt(tid)
            text = attempt and attempt.get("raw_output")
        found, problems = extract(text, output)
        for line in problems:
            self.store.event("proposal_ignored", tid, reason=line)
        return found

    def check(self, tid: str, found: list[Proposal], batch: Batch, limit: int | None = None) -> None:
        """Lint `found` (proposed by `tid`) with `batch`, within the run's limits (`limit`:
        the most of them that may pass, else plan.max_new_tasks); a proposal that fails gets
        its diagnostics and is REJECTED, the others are WAITING."""
        path = self.files.path(tid)
        generation = self.gens.get(tid, 0) + 1
        cap = self.cfg["max_new_tasks"] if limit is None else self.this_run + limit
        for p in found:
            p.proposed_by, p.generation, p.run = tid, generation, self.run_id
            if generation > self.cfg["max_depth"]:
                p.diagnostics.append(f"{HERE}:1:1: error[HC496]: task '{p.id}' would be generation {generation}, "
                                     f"over plan.max_depth ({self.cfg['max_depth']}) (hint: raise plan.max_depth "
                                     "in harness.yaml, or add the task to roadmap.md yourself)")
            elif p.id in self.taken and self.taken[p.id] != tid:
                p.diagnostics.append(f"{HERE}:1:1: error[HC497]: task '{p.id}' is already proposed by "
                                     f"'{self.taken[p.id]}' (hint: `harnessc review` shows it)")
        candidates = [p for p in found if not p.diagnostics]
        order, cycle = _topo(candidates, batch.ids)
        for p in order:
            if self.this_run >= cap:
                p.diagnostics.append(_over(p, self.cfg))
            elif batch.lint([p], path):
                self.this_run += 1
        for p in cycle[max(cap - self.this_run, 0):]:
            p.diagnostics.append(_over(p, self.cfg))
        cycle = [p for p in cycle if not p.diagnostics]
        if cycle and batch.lint(cycle, path):  # (a cycle never lints: a guard)
            self.this_run += len(cycle)
        for p in found:
            p.status = REJECTED if p.diagnostics else WAITING

    def save(self, tid: str, found: list[Proposal], events: bool = True) -> None:
        """Record `found` (their events, the ids waiting ones hold) and write tid's files."""
        for p in found:
            if p.status == WAITING:
                self.taken.setdefault(p.id, tid)
            if events:
                self.store.event("proposal_filed", tid, proposed=p.id, status=p.status, diagnostics=p.diagnostics[:5])
        kept = [p for p in self.files.of(tid) if p.status != WAITING and p.id not in {q.id for q in found}]
        self.files.save(tid, kept + found)


def collect(root: Path, growth: dict | None, store, tasks: Iterable[str], run_id: str | None) -> list[str]:
    """Read, check, lint and file the proposals of `tasks` (succeeded in this run); returns the
    run's closing lines. `store` is the run's StateStore (the attempts' text and outputs)."""
    cfg = settings(growth)
    if cfg["grow"] in ("off", False):  # YAML reads a bare `off` as false
        return []
    try:
        roadmap_text = (Path(root) / ROADMAP).read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    filing = Filing(root, cfg, store, run_id)
    batch: Batch | None = None
    waiting = rejected = 0
    tasks = list(tasks)
    outputs = store.outputs(tasks)  # (their outputs alone: a 1,000-task run's end read whole rows)
    texts = store.final_answers(tasks)  # (one query: a 1,000-task run asked once per task)
    for tid in tasks:
        found = filing.read(tid, outputs.get(tid), texts.get(tid))
        if not found:
            continue
        if batch is None:
            batch = Batch(root, roadmap_text)
        filing.check(tid, found, batch)
        waiting += sum(p.status == WAITING for p in found)
        rejected += sum(p.status == REJECTED for p in found)
        filing.save(tid, found)
    return closing_lines(waiting, rejected)


def closing_lines(waiting: int, rejected: int, added: int = 0) -> list[str]:
    lines = []
    if added:
        lines.append(f"proposals: {added} proposed task{'s' if added != 1 else ''} added to the plan and roadmap.md"
                     " (plan.grow: auto or split: true): `git diff roadmap.md` shows them")
    if waiting:
        lines.append(f"proposals: {waiting} proposed task{'s' if waiting != 1 else ''} wait{'s' if waiting == 1 else ''}"
                     " for review (not part of this run): `harnessc review`, then `harnessc accept-proposal ID`")
    if rejected:
        lines.append(f"proposals: {rejected} proposed task{'s' if rejected != 1 else ''} rejected with diagnostics:"
                     " `harnessc review` shows them")
    return lines


def grow(filing: Filing, tid: str, output: Any = None, limit: int | None = None,
         found: list[Proposal] | None = None) -> list[Proposal]:
    """plan.grow: auto (and split: true): lint the proposals of `tid` against roadmap.md as it
    is now, append those that pass to it at once (status ADDED: the running plan takes them,
    runtime/growth/), file the rest as rejected. Returns the added ones, in dependency order.

    The proposals' record is written first (the added ones ADDING), then roadmap.md, then the
    record again (ADDED): a run killed at any point resumes from what is on disk (settle()):
    a task in roadmap.md is added, its proposer (a split task) is not asked again; one that
    never reached roadmap.md waits for review."""
    roadmap = filing.root / ROADMAP
    found = filing.read(tid, output) if found is None else found
    if not found:
        return []
    text = roadmap.read_text("utf-8")
    batch = Batch(filing.root, text)
    filing.check(tid, found, batch, limit)
    added = list(batch.passed)
    if not added:
        filing.save(tid, found)
        return []
    for p in added:
        p.status = ADDING
        filing.gens[p.id] = p.generation
    filing.files.remember({p.id: p.generation for p in added})
    filing.save(tid, found, events=False)  # the intent, before roadmap.md changes
    filing.files.ws.write_atomic(roadmap, with_blocks(text, [p.block() for p in added])[0])
    for p in added:
        p.status = ADDED
    filing.save(tid, found)
    return added


# ------------------------------------------------------------------ accepting

def accept(root: Path, tid: str) -> tuple[Proposal, int]:
    """Append waiting proposal `tid` to roadmap.md (after linting it against the roadmap as it
    is now); returns it and the line its task starts at. Raises ProposalError."""
    files = Store(root)
    every = files.all()
    matches = [p for p in every if p.id == tid]
    if not matches:
        near = did_you_mean(tid, [p.id for p in every])
        raise ProposalError(f"no proposed task '{tid}'" + (f" ({near})" if near else ""))
    p = next((m for m in matches if m.status == WAITING), matches[0])
    if p.status != WAITING:
        raise ProposalError(f"proposed task '{tid}' was {p.status}" +
                            (f": {p.diagnostics[0]}" if p.diagnostics else ""))
    roadmap = Path(root) / ROADMAP
    text = roadmap.read_text("utf-8")
    pending = {q.id: q.proposed_by for q in every if q.status == WAITING and q.id != tid}
    for dep in p.depends_on:
        if dep in pending:
            raise ProposalError(f"'{tid}' depends on proposed task '{dep}': accept that one first")
    p.diagnostics = []
    batch = Batch(root, text)
    new_text, starts = with_blocks(text, [p.block()])
    if not batch.lint([p], files.path(p.proposed_by)):
        said = [_placed(d, f"{ROADMAP} (as it would be)", starts[0]) for d in p.diagnostics[:3]]
        raise ProposalError("it no longer lints against roadmap.md: " + "; ".join(said))
    files.ws.write_atomic(roadmap, new_text)
    _mark(files, p, ACCEPTED)
    files.remember({p.id: p.generation})
    return p, starts[0]


def reject(root: Path, tid: str) -> Proposal:
    """A person rejects proposed task `tid` (waiting, or rejected by lint): it leaves
    `harnessc review` and stays in .harness/proposals/ marked rejected. Raises ProposalError."""
    files = Store(root)
    every = files.all()
    matches = [p for p in every if p.id == tid and not p.dismissed]
    if not matches:
        near = did_you_mean(tid, [p.id for p in every if not p.dismissed])
        raise ProposalError(f"no proposed task '{tid}' in review" + (f" ({near})" if near else ""))
    p = next((m for m in matches if m.status == WAITING), matches[0])
    if p.status not in (WAITING, REJECTED):
        raise ProposalError(f"proposed task '{tid}' was {p.status}: it is a task of roadmap.md now "
                            "(remove it there to drop it)")
    mine = files.of(p.proposed_by)
    for q in mine:
        if q.id == p.id and q.status == p.status and not q.dismissed:
            q.status, q.dismissed = REJECTED, True
            break
    files.save(p.proposed_by, mine)
    return p


def _mark(files: Store, p: Proposal, status: str) -> None:
    mine = files.of(p.proposed_by)
    for q in mine:
        if q.id == p.id and q.status == WAITING:
            q.status = status
    files.save(p.proposed_by, mine)


def waiting_count(root: Path) -> int:
    return sum(1 for p in Store(root).all() if p.status == WAITING)


def unadd(filing: Filing, tid: str, added: list[Proposal], why: str) -> None:
    """Proposals grow() added whose plan did not build (roadmap.md was put back): rejected, with why."""
    ids = {p.id for p in added}
    for p in added:
        p.status = REJECTED
        p.diagnostics.append(f"{filing.files.path(tid)}:1:1: error: {why}")
        filing.gens.pop(p.id, None)
        filing.this_run -= 1
    gens = filing.files.generations()
    for i in ids:
        gens.pop(i, None)
    filing.files.ws.write_atomic(filing.files.dir / "accepted.json", json.dumps(gens, indent=2, sort_keys=True) + "\n")
    mine = filing.files.of(tid)
    for q in mine:
        if q.id in ids and q.status == ADDED:
            q.status, q.diagnostics = REJECTED, [*q.diagnostics, f"{filing.files.path(tid)}:1:1: error: {why}"]
    filing.files.save(tid, mine)


def settle(root: Path, in_plan: Container[str]) -> None:
    """Proposals a killed run left ADDING (grow() wrote their record, maybe not roadmap.md):
    those the plan built from roadmap.md has (`in_plan`) are ADDED, the others wait for review."""
    files = Store(root)
    for task in sorted({p.proposed_by for p in files.all() if p.status == ADDING}):
        mine = files.of(task)
        for p in mine:
            if p.status == ADDING:
                p.status = ADDED if p.id in in_plan else WAITING
        try:
            files.save(task, mine)
        except (OSError, WorkspaceError):  # left ADDING: subtasks() still reads them, the next run tries again
            return


def subtasks(root: Path, split: Container[str], in_plan: Container[str]) -> dict[str, list[str]]:
    """Split task -> its subtasks in the plan (the tasks it added: ADDED, or ADDING when a
    run was killed before it could say so), for the split tasks `split`."""
    out: dict[str, list[str]] = {}
    for p in Store(root).all():
        if p.status in (ADDED, ADDING) and p.proposed_by in split and p.id in in_plan:
            out.setdefault(p.proposed_by, []).append(p.id)
    return out


def lineage(root: Path, tid: str) -> list[str]:
    """`harnessc show TASK`'s lines on the plan's growth: who proposed the task, and what it
    added to the plan (a split task's subtasks)."""
    lines = []
    every = Store(root).all()
    mine = next((p for p in every if p.id == tid and p.status in (ADDED, ACCEPTED)), None)
    if mine is not None:
        how = "added by the run" if mine.status == ADDED else "accepted with `harnessc accept-proposal`"
        lines.append(f"proposed by: {mine.proposed_by} (generation {mine.generation}; {how})")
    added = [p.id for p in every if p.proposed_by == tid and p.status in (ADDED, ACCEPTED)]
    if added:
        lines.append(f"it proposed, now in the plan: {', '.join(added)}")
    return lines
