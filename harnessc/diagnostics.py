"""Diagnostics: where a problem is (Span), what it is (Diagnostic), the collector and renderers.

Every user-facing problem in harnessc is a Diagnostic. The collector is the one place
that decides whether a problem is collected (lint: report everything) or raised at once
(``fail_fast``: e.g. validating a single file in the runtime).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Iterable, Iterator, Literal, Mapping
from urllib.parse import quote

Severity = Literal["error", "warning", "note"]

# Each code, with the one-line title used by --format sarif and docs/spec-reference.md.
CODES: dict[str, str] = {
    # files
    "HC001": "spec file missing",
    "HC002": "file too large",
    "HC003": "file is not valid UTF-8 text",
    "HC004": "no project found",
    # roadmap.md
    "HC101": "roadmap has no '## Tasks' section",
    "HC102": "roadmap syntax error",
    "HC103": "unknown task property",
    "HC104": "duplicate task property",
    "HC105": "bad property value",
    "HC106": "bad task id",
    "HC107": "duplicate task id",
    "HC108": "control character or line break in a task title",
    # YAML and its models
    "HC201": "YAML syntax error",
    "HC202": "tab used for indentation",
    "HC203": "YAML alias, anchor or tag not allowed",
    "HC204": "duplicate YAML key",
    "HC205": "YAML nesting or size limit exceeded",
    "HC206": "number out of range",
    "HC210": "unknown key",
    "HC211": "bad value",
    "HC212": "unknown deliverable type",
    "HC213": "example or default breaks its own type or rules",
    "HC214": "bad contract extends",
    "HC215": "missing required key",
    "HC216": "templates directory missing or outside the project",
    "HC217": "key does not apply here (deliverable type, agent provider)",
    "HC218": "$ref in a deliverable's schema",
    "HC219": "replay agent's cassette directory outside the project, linked or missing",
    "HC220": "a deliverable's schema is not a valid JSON Schema",
    "HC230": "executor setting Ray cannot use (address, resource name, clone_url), or one kind: local ignores",
    # rules
    "HC301": "rule syntax error",
    "HC302": "rule does not type-check",
    "HC303": "unknown name or function in rule",
    "HC304": "rule rejected: unsafe or too costly",
    "HC305": "regular expression RE2 cannot run",
    "HC306": "the simulate agent cannot satisfy this rule by itself (warning)",
    # references and graph
    "HC401": "unknown dependency",
    "HC402": "unknown contract",
    "HC403": "unknown agent",
    "HC404": "dependency cycle",
    "HC405": "context path outside the project",
    "HC406": "context path matches nothing",
    "HC407": "task depends on itself",
    "HC410": "nothing verifies this task",
    "HC411": "context pattern names too many files",
    "HC412": "loop setting on a task that does not loop",
    "HC413": "escalate in a recovery ladder with no stronger agent",
    "HC414": "a read-only agent asked for file changes, verified by its promise alone",
    "HC415": "approach settings that do not fit together (min_score without score, select with one approach)",
    "HC416": "several approaches in a task that says isolation: none",
    "HC417": "isolation: worktree cannot work in this repository",
    "HC418": "a file a worktree will not have (untracked or modified) named by context, accept or score",
    "HC419": "task resources with the local executor, which ignores them",
    "HC420": "protect, allow_edit or write_scope item outside the project",
    "HC421": "allow_edit lifts nothing",
    "HC422": "allow_edit cannot lift .harness/",
    "HC423": "write_scope on a task in the shared tree, where it is not checked",
    "HC425": "bad min_passed value (a whole number, or base)",
    "HC426": "junit path outside the project",
    "HC427": "min_passed on a task with no accept command to count",
    "HC430": "sandbox on an agent that runs no program (an API agent)",
    "HC440": "notify.on names an event harnessc does not notify of",
    "HC441": "notify.webhook is not an http(s) URL or holds credentials",
    "HC442": "notify.command is empty",
    "HC443": "notify sends nothing (no command or webhook, empty on, zero timeout)",
    "HC444": "notify.pass_env names a provider's key",
    # budgets and retries
    "HC450": "a task budget smaller than one call's estimate",
    "HC451": "unknown error kind in retry_on or dont_retry",
    "HC455": "an accept or score program that is not on PATH",
    "HC456": "a command agent's file a worktree will not have (untracked or modified)",
    "HC460": "review: true on a task in the shared tree (review only holds its dependents)",
    # context by retrieval
    "HC490": "bad context auto entry (auto or auto(N), N tokens >= 1)",
    "HC491": "context auto written twice in one task",
    # a plan that grows under review (proposals.py): reported on proposed tasks, in .harness/proposals/
    "HC495": "a proposed task over plan.max_new_tasks (per run)",
    "HC496": "a proposed task deeper than plan.max_depth generations",
    "HC497": "a proposed task id another task already proposed",
    "HC498": "a split task's subtask that depends on the split task or on a task after it",
    # templates
    "HC501": "template syntax error",
    "HC502": "undefined variable in template",
    "HC503": "template error",
    "HC504": "task template puts a task's own text before the shared text",
    # output validation (harnessc validate, the runtime)
    "HC601": "output is not valid JSON",
    "HC602": "output does not match the contract schema",
    "HC603": "output breaks a contract rule",
    # a running plan's growth (runtime/growth/): reported by the run, not the lint
    "HC716": "a task added to the running plan needs a setting the run did not start with: it waits for the next run",
}


@dataclass(frozen=True, order=True, slots=True)  # slots: a roadmap holds ~12 spans a task
class Span:
    """A place in a source file; line and col are 1-based, end is exclusive."""

    path: str
    line: int = 1
    col: int = 1
    end_line: int | None = None
    end_col: int | None = None

    def shifted(self, chars: int, length: int | None = None) -> "Span":
        """The span `chars` characters to the right on the same line (for spots inside a value)."""
        col = self.col + chars
        return Span(self.path, self.line, col, self.line, col + length if length else None)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Fix:
    """A fix `lint --fix` may apply on its own: on line `line` of `path`, the text `old` at
    column `col` becomes `new`. Only for fixes with one clear answer (a misspelt key)."""

    path: str
    line: int
    col: int
    old: str
    new: str
    what: str  # what changes, as `lint --fix` says it: "max_iteration -> max_iterations"


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: Severity
    message: str
    span: Span
    hint: str | None = None
    fix: Fix | None = field(default=None, compare=False)

    def sort_key(self):
        return (self.span.path, self.span.line, self.span.col, self.code, self.message)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["span"] = asdict(self.span)
        del d["fix"]  # the --output json format names no fixes
        return d


class CompileError(Exception):
    """Raised by a fail-fast collector; carries the diagnostic that stopped compilation."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(f"{diagnostic.span}: {diagnostic.message}")
        self.diagnostic = diagnostic


@dataclass
class Diagnostics:
    """Collects diagnostics; with fail_fast the first error raises CompileError."""

    fail_fast: bool = False
    items: list[Diagnostic] = field(default_factory=list)
    _seen: set[Diagnostic] = field(default_factory=set, repr=False)
    ignored: int = 0  # warnings dropped by --ignore or an ignore comment

    def add(self, diagnostic: Diagnostic) -> None:
        if diagnostic in self._seen:
            return
        self._seen.add(diagnostic)
        self.items.append(diagnostic)
        if self.fail_fast and diagnostic.severity == "error":
            raise CompileError(diagnostic)

    def error(self, code: str, message: str, span: Span, hint: str | None = None, fix: Fix | None = None) -> None:
        self.add(Diagnostic(code, "error", message, span, hint, fix))

    def warning(self, code: str, message: str, span: Span, hint: str | None = None, fix: Fix | None = None) -> None:
        self.add(Diagnostic(code, "warning", message, span, hint, fix))

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        for d in diagnostics:
            self.add(d)

    def drop(self, predicate) -> int:
        """Remove the diagnostics `predicate` is true of (ignored ones); how many went."""
        kept = [d for d in self.items if not predicate(d)]
        dropped = len(self.items) - len(kept)
        self.items = kept
        self.ignored += dropped
        return dropped

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.items if d.severity == "warning"]

    def has_errors(self, strict: bool = False) -> bool:
        return any(d.severity == "error" or (strict and d.severity == "warning") for d in self.items)

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.items, key=Diagnostic.sort_key)

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self.sorted())

    def __len__(self) -> int:
        return len(self.items)


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to word, if one is close enough to be what was meant."""
    import difflib  # only when a hint is needed: lint start-up stays cheap

    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def sole_match(word: str, choices: Iterable[str]) -> str | None:
    """The choice `word` is a typo of, when there is one clear answer: close (ratio >= 0.75)
    and well ahead of the next (by 0.15). `max_iteration` -> max_iterations, `max_iter` -> None
    (max_time is as close). What `lint --fix` may change on its own."""
    import difflib

    ratios = []
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word)
    for choice in choices:
        matcher.set_seq1(choice)
        ratios.append((matcher.ratio(), choice))
    ratios.sort(reverse=True)
    if not ratios or ratios[0][0] < 0.75 or ratios[0][1] == word:
        return None
    if len(ratios) > 1 and ratios[0][0] - ratios[1][0] < 0.15:
        return None
    return ratios[0][1]


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A hint naming the closest choice, or None."""
    match = closest(word, choices)
    return f"did you mean '{match}'?" if match else None


# ---------------------------------------------------------------- renderers
#
# Spans hold paths relative to the project; `paths` maps them to the paths shown (relative
# to where harnessc was invoked, see cli.report), so editors and CI find the files.


REPEATS_SHOWN = 5  # a warning code seen more often (HC410 on each of 600 imported tasks): the rest summed up
LINES_NAMED = 10  # lines a summed-up warning names; the rest are counted


def render_text(diagnostics: Iterable[Diagnostic], sources: dict[str, str],
                paths: Mapping[str, str] | None = None, repeats: int | None = None) -> str:
    """`path:line:col: severity[CODE]: message`, the source line with a caret, then the hint.
    With `repeats`, a warning code reported more often is shown that many times and the
    rest summed up in one line per code and file (errors are always shown in full)."""
    out: list[str] = []
    lines_cache: dict[str, list[str]] = {}
    paths = paths or {}
    diagnostics, more = _repeats_summed(list(diagnostics), repeats)
    for d in diagnostics:
        s = d.span
        out.append(f"{paths.get(s.path, s.path)}:{s.line}:{s.col}: {d.severity}[{d.code}]: {d.message}")
        text = sources.get(s.path)
        if text is not None:
            lines = lines_cache.get(s.path)
            if lines is None:
                lines = lines_cache[s.path] = text.splitlines()
            if 1 <= s.line <= len(lines):
                src = lines[s.line - 1].replace("\t", " ")
                width = 1
                if s.end_col and (s.end_line in (None, s.line)) and s.end_col > s.col:
                    width = s.end_col - s.col
                width = max(1, min(width, max(1, len(src) - s.col + 1)))
                src, col, width = _excerpt(src, s.col, width)
                gutter = str(s.line)
                out.append(f" {gutter} | {src}")
                out.append(f" {' ' * len(gutter)} | {' ' * (col - 1)}{'^' * width}")
        if d.hint:
            out.append(f"  hint: {d.hint}")
    for (path, code), rest in more.items():
        lines = ", ".join(str(d.span.line) for d in rest[:LINES_NAMED])
        lines += f" and {len(rest) - LINES_NAMED} more" if len(rest) > LINES_NAMED else ""
        out.append(f"{paths.get(path, path)}: warning[{code}]: {len(rest)} more like the above "
                   f"({CODES.get(code, code)}), at line{'s' if len(rest) > 1 else ''} {lines}")
        out.append(f"  hint: `--output json` lists each; `--ignore {code}` leaves them out")
    return "\n".join(out) + ("\n" if out else "")


def _repeats_summed(items: list[Diagnostic], repeats: int | None
                    ) -> tuple[list[Diagnostic], dict[tuple[str, str], list[Diagnostic]]]:
    """(the diagnostics shown in full, (file, code) -> the warnings summed up)."""
    if repeats is None:
        return items, {}
    seen: dict[tuple[str, str], int] = {}
    shown, more = [], {}
    for d in items:
        key = (d.span.path, d.code)
        seen[key] = seen.get(key, 0) + 1
        if d.severity == "warning" and seen[key] > repeats:
            more.setdefault(key, []).append(d)
        else:
            shown.append(d)
    return shown, more


SHOWN_LINE = 300  # a longer source line is shown as an excerpt around the caret
EXCERPT = 160


def _excerpt(src: str, col: int, width: int) -> tuple[str, int, int]:
    """(the part of a source line shown, the caret's column in it, its width): all of a line
    up to SHOWN_LINE characters, else EXCERPT of them around the caret, so that a report on
    each of 4,000 values of one line stays linear in size."""
    if len(src) <= SHOWN_LINE:
        return src, col, width
    start = max(0, min(col - 1 - EXCERPT // 4, len(src) - EXCERPT))
    head = "..." if start else ""
    tail = "..." if start + EXCERPT < len(src) else ""
    width = max(1, min(width, start + EXCERPT - (col - 1)))
    return head + src[start:start + EXCERPT] + tail, col - start + len(head), width


def render_json(diagnostics: Iterable[Diagnostic], paths: Mapping[str, str] | None = None) -> str:
    out = []
    for d in diagnostics:
        item = d.to_dict()
        item["span"]["path"] = (paths or {}).get(d.span.path, d.span.path)
        out.append(item)
    return json.dumps(out, indent=2) + "\n"


def _github_escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def render_github(diagnostics: Iterable[Diagnostic], paths: Mapping[str, str] | None = None) -> str:
    """GitHub Actions workflow commands: annotations on the pull request."""
    out = []
    paths = paths or {}
    for d in diagnostics:
        level = {"error": "error", "warning": "warning"}.get(d.severity, "notice")
        msg = d.message + (f" (hint: {d.hint})" if d.hint else "")
        s = d.span
        out.append(
            f"::{level} file={paths.get(s.path, s.path)},line={s.line},col={s.col},title={d.code}::{_github_escape(msg)}"
        )
    return "\n".join(out) + ("\n" if out else "")


def render_sarif(diagnostics: Iterable[Diagnostic], version: str, paths: Mapping[str, str] | None = None,
                 src_root: str | None = None) -> str:
    """SARIF 2.1.0, the format code-scanning UIs read. Locations are relative URIs against
    the base id %SRCROOT%, which `src_root` (a file: URI of the invoking directory) defines."""
    diagnostics = list(diagnostics)
    paths = paths or {}
    used = sorted({d.code for d in diagnostics})
    results = []
    for d in diagnostics:
        s = d.span
        region = {"startLine": s.line, "startColumn": s.col}
        if s.end_line:
            region["endLine"] = s.end_line
        if s.end_col:
            region["endColumn"] = s.end_col
        message = d.message + (f"\nhint: {d.hint}" if d.hint else "")
        results.append(
            {
                "ruleId": d.code,
                "level": {"error": "error", "warning": "warning"}.get(d.severity, "note"),
                "message": {"text": message},
                "locations": [
                    {"physicalLocation": {
                        "artifactLocation": {"uri": quote(paths.get(s.path, s.path)), "uriBaseId": "%SRCROOT%"},
                        "region": region,
                    }}
                ],
            }
        )
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "harnessc",
                        "version": version,
                        "rules": [
                            {"id": c, "shortDescription": {"text": CODES.get(c, c)}} for c in used
                        ],
                    }
                },
                "results": results,
            }
        ],
    }
    if src_root is not None:
        doc["runs"][0]["originalUriBaseIds"] = {"%SRCROOT%": {"uri": src_root}}
    return json.dumps(doc, indent=2) + "\n"
