"""roadmap.md -> Roadmap IR (parse_roadmap), and Roadmap IR -> canonical roadmap.md (format_roadmap).

Three stages, each linear in the input, run as one stream (a 100k-task roadmap is never
held as lines or tokens, only as its text and its tasks):

1. A line lexer reads every line once and turns it into a whole-line token (heading, task
   item with its property lines, goal block with its lines, prose run). It is the only
   place that knows about indentation and fenced code blocks, and where a task's property
   block ends (_property_line): lines meant as properties but written wrong stay in it, as
   do properties after blank lines, so a typo is an error, never goal text in silence.
2. The LALR grammar in harnessc/grammar/roadmap.lark arranges those tokens into sections,
   phases and tasks; each `task` it reduces goes to the builder at once.
3. The builder types every property value in Python. It keeps one position per task, that
   of its id (Task.span); Task.spans[key] (the key as written) and Task.value_spans[key]
   (one span per value, per list element for comma lists) are found again on demand by
   locate_spans, which reads the task's lines through the same builder code.

Bad input never raises: every problem is a diagnostic (HC101-HC108) and parsing goes on.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator

from ..diagnostics import CODES, CompileError, Diagnostics, Fix, Span, closest, did_you_mean, sole_match
from ..nogc import no_cyclic_gc
from ..textsafe import char_name, title_flaw
from ..vocab import (
    ERROR_KINDS,
    ID_PATTERN,
    LADDER_ENDS,
    MAX_APPROACHES,
    MAX_ID_LENGTH,
    MIN_RESOURCE,
    MUTATIONS,
    RAY_RESERVED_RESOURCES,
    RUNGS,
    START_LEVELS,
    USD_FORMAT,
    Complexity,
    FailureStrategy,
    GitMode,
    IsolationMode,
    Priority,
    SelectMode,
    parse_duration,
    parse_usd,
)
from .tasks import Roadmap, Task, TaskSource

__all__ = ["parse_roadmap", "format_roadmap", "PROPERTY_KEYS", "KEY_ALIASES", "ID_PATTERN"]

_ID = re.compile(ID_PATTERN)
_WORD = re.compile(r"[A-Za-z0-9_-]+")
# "  - key: value" (also "*" or "+" bullets). Anchored and free of nested quantifiers, so a
# non-matching line costs one linear scan.
_PROP = re.compile(r"([ \t]+)[-*+][ \t]+([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(.*)")
# A well-formed task line; anything else goes through the checks of _Builder.task_line.
_CLEAN_TASK_LINE = re.compile(rf"[-*+] \[([ xX])\] \*\*({ID_PATTERN})\*\*:(.*)")
# Lines that may be a property written wrong: indentation, bullet, a key of up to three
# words, ':' and the value; or a bullet, a key and the value with no ':'.
_LOOSE_COLON = re.compile(
    r"([ \t]*)(?:([-*+])[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*(?:[ \t]+[A-Za-z_][A-Za-z0-9_.-]*){0,2})[ \t]*:(.*)")
_LOOSE_NO_COLON = re.compile(r"([ \t]*)[-*+][ \t]+([A-Za-z_][A-Za-z0-9_.-]*)[ \t]+([^ \t:].*)")
# A per-task ignore comment (harnessc/compiler/ignore.py): `<!-- harnessc: ignore[HC410] -->`
# or `# harnessc: ignore[HC410, HC406]`, at the end of the task line or as a property line.
IGNORE_COMMENT = re.compile(
    r"(?:<!--[ \t]*harnessc:[ \t]*ignore\[([^\]\n]*)\][ \t]*-->|#[ \t]*harnessc:[ \t]*ignore\[([^\]\n]*)\])[ \t]*$")

# canonical key -> the kind of value (see _READERS)
PROPERTY_KEYS: dict[str, str] = {
    "depends_on": "ids",
    "contract": "name",
    "agent": "agents",
    "model": "name",
    "complexity": "enum",
    "priority": "enum",
    "max_iterations": "iterations",
    "max_time": "duration",
    "stuck_after": "posint",
    "progress_threshold": "fraction",
    "recovery": "rungs",
    "completion_promise": "word",
    "success": "text",
    "accept": "text",
    "context": "paths",
    "context_tokens": "posint",
    "max_retries": "int0",
    "on_failure": "enum",
    "budget": "usd",
    "tags": "words",
    "git": "enum",
    "isolation": "enum",
    "approaches": "approaches",
    "select": "enum",
    "score": "text",
    "min_score": "number",
    "resources": "resources",
    "min_passed": "min_passed",
    "retry_on": "errkinds",
    "dont_retry": "errkinds",
    "start_level": "level",
    "protect": "paths",
    "allow_edit": "paths",
    "write_scope": "paths",
    "review": "bool",
    "split": "bool",
}
KEY_ALIASES: dict[str, str] = {"after": "depends_on", "cli": "agent", "timeout": "max_time"}
_ALL_KEYS = [*PROPERTY_KEYS, *KEY_ALIASES]
_KEY_SET = frozenset(_ALL_KEYS)
_REPEATABLE = {"accept"}
_ENUMS: dict[str, Any] = {
    "complexity": Complexity,
    "priority": Priority,
    "on_failure": FailureStrategy,
    "git": GitMode,
    "isolation": IsolationMode,
    "select": SelectMode,
}
_ENUM_WORDS = {key: {member.value: member for member in enum} for key, enum in _ENUMS.items()}
_ID_HINT = "an id starts with a letter or digit and has only letters, digits, '.', '_' and '-'"
_TASK_FORM = "- [ ] **id**: Title"
_MINIMAL = "e.g. a line '## Tasks' followed by '- [ ] **setup-001**: Scaffold the project'"


# ------------------------------------------------------------------ the line lexer


def _heading(s: str) -> tuple[int, str, int] | None:
    """(level, text, offset of text in s) for an ATX heading line s (starting with '#'), else None.

    Done with string operations, not a regex: a regex for the optional closing '#'s
    backtracks quadratically on long runs of spaces.
    """
    level = len(s) - len(s.lstrip("#"))
    if level > 6 or (len(s) > level and s[level] not in " \t"):
        return None
    rest = s[level:]
    text = rest.strip(" \t")
    offset = level + (len(rest) - len(rest.lstrip(" \t")))
    if text.endswith("#"):  # optional closing sequence: "## Tasks ##"
        bare = text.rstrip("#")
        if not bare:
            text = ""
        elif bare[-1] in " \t":
            text = bare.rstrip(" \t")
    return level, text, offset


def _fence(s: str) -> tuple[str, int] | None:
    """(char, length) when s opens a fenced code block (``` or ~~~), else None."""
    ch = s[0]
    n = len(s) - len(s.lstrip(ch))
    if n < 3 or (ch == "`" and "`" in s[n:]):
        return None
    return ch, n


def _checkbox_end(s: str, i: int) -> int:
    """Index after a checkbox-like '[..]' (at most 2 chars inside) starting at s[i], else -1."""
    if i >= len(s) or s[i] != "[":
        return -1
    j = s.find("]", i + 1, i + 4)
    if j < 0 or s[j + 1 : j + 2] in ("(", "[", ":"):  # a Markdown link, not a checkbox
        return -1
    return j + 1


def _task_like(line: str) -> bool:
    """Whether a column-0 line starting with -, * or + is (an attempt at) a task item."""
    rest = line[1:].lstrip(" \t")
    if len(rest) == len(line) - 1:  # no space after the bullet: only "-[ ] ..." counts
        return rest[:3] in ("[ ]", "[x]", "[X]")
    return _checkbox_end(rest, 0) > 0 or rest.startswith("**")


def _is_blank(stripped: str) -> bool:
    return not stripped or stripped.isspace()


_CHUNK = 1 << 20  # characters of text split into lines at a time


def _iter_lines(text: str) -> Iterator[str]:
    """text.splitlines(), a chunk at a time: the lines of a large roadmap are never all held.

    Chunks end just after a '\\n', so no line break (not even '\\r\\n') is cut in two.
    """
    start, n = 0, len(text)
    while start < n:
        end = text.find("\n", start + _CHUNK)
        end = n if end < 0 else end + 1
        yield from text[start:end].splitlines()
        start = end


# The line breaks str.splitlines() knows besides \n and \r\n (and \r alone in a file whose
# lines end in \n): a title holding one is cut there, and the rest of it read as a line of
# its own (a task line, even).
_ODD_BREAK = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]|\r(?!\n)")


def _odd_breaks(text: str) -> dict[int, str]:
    """Line number -> the odd line break ending that line (lines as _iter_lines counts them);
    one scan of the text, and no more when it holds none (the usual case)."""
    if _ODD_BREAK.search(text) is None:
        return {}
    lone_cr = "\n" in text  # a file of \r line ends (classic Mac) means them
    out: dict[int, str] = {}
    for no, line in enumerate(text.splitlines(keepends=True), 1):
        end = line[-1:]
        if (end == "\r" and lone_cr) or (end and end != "\r" and _ODD_BREAK.fullmatch(end)):
            out[no] = end
    return out


class _Misformed:
    """A line of a task's property block meant as a property but written wrong.

    It reads like a _PROP match of the property meant (groups 1-3: indentation, key,
    value), so the builder reads its value as usual after reporting the problem; `key` is
    None when the key is only a guess (then only the problem is reported).
    """

    __slots__ = ("indent", "bullet", "key", "raw", "key_at", "raw_at", "written",
                 "code", "message", "col", "length", "hint", "line")
    indent: str
    bullet: str
    key: str | None
    raw: str
    key_at: int
    raw_at: int
    written: str
    code: str
    message: str
    col: int
    length: int
    hint: str
    line: str

    def fix(self, path: str, no: int) -> Fix | None:
        """The line up to its value, rewritten as '  - key: ' (`lint --fix`), when the key is known
        or a typo of one key only."""
        key = self.key or sole_match("_".join(self.written.split()), _ALL_KEYS)
        if key is None:
            return None
        old = self.line[: self.raw_at]
        new = f"{self.indent or '  '}{self.bullet or '-'} {key}:"
        if self.raw[:1] not in (" ", "\t") or old.endswith((" ", "\t")):  # no ':' written, or 'key:value'
            new += " "
        rest = self.line[self.raw_at:].rstrip()
        return Fix(path, no, 1, old, new, f"'{_short(old + rest)}' -> '{_short(new + rest)}'")

    def group(self, *i: int):
        parts = (None, self.indent, self.key, self.raw)
        return tuple(parts[k] for k in i) if len(i) > 1 else parts[i[0]]

    def start(self, i: int) -> int:
        return self.key_at if i == 2 else self.raw_at


def _near_key(word: str) -> str | None:
    """The property key a lowercase word is a typo of. Capitalised words are left alone:
    'Context:' or 'Status:' starting a goal are headings, not keys."""
    return closest(word, _ALL_KEYS) if word[:1].islower() else None


def _misformed(line: str, gap: bool) -> _Misformed | None:
    """The property a line that _PROP refuses was meant as, or None (not a property line).

    Caught: no indentation ('- contract: x' at column 1), no bullet ('  contract: x'),
    spaces in the key ('  - depends on: a'), no ':' ('  - depends_on a'), and typos of a
    key written one of those ways. After a blank line (`gap`) only a known key continues the
    property block: what follows a blank line may be the goal, in any words.
    """
    word = line.lstrip(" \t")
    if word[:1] in ("-", "*", "+"):
        word = word[1:].lstrip(" \t")
    if not "a" <= word[:1] <= "z":  # keys are lowercase, and capitalised words are never taken for keys
        return None
    m = _LOOSE_COLON.match(line)
    if m is not None:
        indent, bullet, written, raw, raw_at = m.group(1), m.group(2), m.group(3), m.group(4), m.start(4)
        key_at = m.start(3)
        if not indent and not bullet:
            return None
        key = "_".join(written.split())  # 'depends on' -> depends_on
        if key in _KEY_SET:
            if gap and not indent:
                return None
            message = ("property line is not indented" if not indent
                       else "property line has no '- ' bullet" if not bullet
                       else f"key '{written}' has a space")
            col, length = (1, 1) if not indent else (key_at + 1, len(written))
            near, code = None, "HC102"
        else:
            near = None if gap else _near_key(key)
            if near is None:
                return None
            key, code, message = None, "HC103", f"unknown key '{written}'"
            col, length = key_at + 1, len(written)
    else:
        m = _LOOSE_NO_COLON.match(line)
        if m is None or gap or m.group(2) not in _KEY_SET:
            return None
        indent, written, raw, raw_at = m.group(1), m.group(2), m.group(3), m.start(3)
        bullet = line[len(indent)]
        key_at = m.start(2)
        key, near, code = written, None, "HC102"
        message = f"missing ':' after '{written}'"
        col, length = m.end(2) + 1, 1
    value = raw.strip()
    shown = value if len(value) <= 40 else value[:37] + "..."
    fix = f"write '  - {key or near}: {shown or 'VALUE'}'"
    p = _Misformed()
    p.indent, p.key, p.raw, p.key_at, p.raw_at, p.written = indent, key, raw, key_at, raw_at, written
    p.bullet, p.line = bullet, line
    p.code, p.message, p.col, p.length = code, message, col, length
    p.hint = f"did you mean '{near}'? {fix}" if near else fix
    return p


class _Ignore:
    """An ignore comment line of a task's property block: the codes it names and where."""

    __slots__ = ("codes", "col")

    def __init__(self, codes: str, col: int):
        self.codes, self.col = codes, col


def _ignore_line(line: str) -> _Ignore | None:
    """The ignore comment an indented line holds alone, else None."""
    s = line.lstrip(" \t")
    if s[:1] not in ("<", "#") or len(s) == len(line):
        return None
    m = IGNORE_COMMENT.match(s)
    if m is None:
        return None
    return _Ignore(m.group(1) if m.group(1) is not None else m.group(2), len(line) - len(s) + m.start(m.lastindex) + 1)


def _short(text: str) -> str:
    return text if len(text) <= 50 else text[:47] + "..."


def _property_line(line: str, gap: bool):
    """What a line of a task's property block holds: a _PROP match, a _Misformed, an
    _Ignore, or None when the block ends there (the goal starts). `gap`: a blank line came
    before it."""
    m = _PROP.match(line)
    if m is not None:
        return m if not gap or m.group(2) in _KEY_SET else None
    return _misformed(line, gap) or _ignore_line(line)


class _Source:
    """The lexer's input, a document's text, and what the lexer learns beyond its tokens."""

    __slots__ = ("text", "indented_tasks", "line_count", "head")

    def __init__(self, text: str):
        self.text = text
        self.indented_tasks: list[tuple[int, int]] = []  # (line, col): prose, maybe a mistake
        self.line_count = 0
        self.head: list[str] = []  # the lines before the first '## Tasks' (the overview is there)

    def tokens(self) -> Iterator[Any]:
        """Classify each line once; yield whole-line tokens (lines are 1-based in tokens).

        A TASK token's data is the list of its property lines as (line number, match), a
        BODY token's its lines (blank ones as ""): each token is yielded once complete.
        """
        tok = _TOKEN_CLASS.make
        prop_match = _PROP.match
        title_seen = False
        fence: tuple[str, int] | None = None  # an open top-level fenced block
        props: list | None = None  # the open task's property lines, while they continue
        gap = False  # a blank line since the last property line (the goal may start)
        task_open = False
        text_at = 0  # first line of an open prose run (0: none)
        body: list[str] = []  # the open goal block's lines
        body_at = body_end = 0  # first and last non-blank line of an open goal block
        head: list[str] | None = self.head  # None once '## Tasks' is seen
        no = 0
        for line in _iter_lines(self.text):
            no += 1
            if head is not None:
                head.append(line)
            if fence is not None:
                s = line.lstrip(" ")
                ch, n = fence
                if len(line) - len(s) <= 3 and s.startswith(ch * n) and not s.lstrip(ch).strip():
                    fence = None
                continue  # inside a fence: part of the prose run
            s = line.lstrip(" \t")
            if not s or s.isspace():  # blank
                gap = True
                continue
            indent = len(line) - len(s)
            if indent and task_open:
                if props is not None:
                    m = prop_match(line)
                    if m is None:
                        m = _misformed(line, gap) or _ignore_line(line)
                    elif gap and m.group(2) not in _KEY_SET:  # after a blank line: the goal
                        m = None
                    if m is not None:
                        props.append((no, m))
                        gap = False
                        continue
                    props = None
                if not body_at:
                    body_at, body = no, [line]
                else:
                    if no > body_end + 1:  # the blank lines in between
                        body.extend([""] * (no - body_end - 1))
                    body.append(line)
                body_end = no
                continue
            if props is not None and not gap and s[0] in "-*+":  # '- key: value' at column 1?
                m = _misformed(line, False)
                if m is not None:
                    props.append((no, m))
                    continue
            if task_open:  # anything else ends the task
                if body_at:
                    t = tok("BODY", "", body_at, body_end)
                    t.data = body
                    yield t
                    body_at = 0
                task_open = False
                props = None
            if indent <= 3:
                ch = s[0]
                if ch == "#":
                    h = _heading(s)
                    if h is not None and h[0] <= 3:
                        if text_at:
                            yield tok("_TEXT", "", text_at, no - 1)
                            text_at = 0
                        level = h[0]
                        if level == 1:
                            kind = "H1" if title_seen else "TITLE"
                            title_seen = True
                        elif level == 2:
                            kind = "TASKS" if h[1].lower() == "tasks" else "H2"
                            if kind == "TASKS" and head is not None:
                                head.pop()  # the heading itself
                                head = None
                        else:
                            kind = "H3"
                        t = tok(kind, line, no, no, indent + 1)
                        t.data = (h[1], indent + h[2])
                        yield t
                        continue
                elif ch == "`" or ch == "~":
                    fence = _fence(s)
                elif not indent and ch in "-*+" and _task_like(line):
                    if text_at:
                        yield tok("_TEXT", "", text_at, no - 1)
                        text_at = 0
                    t = tok("TASK", line, no, no)
                    t.data = props = []
                    gap = False
                    yield t
                    task_open = True
                    continue
            if indent and s[0] in "-*+" and _task_like(s):  # e.g. nested under a prose bullet
                self.indented_tasks.append((no, indent + 1))
            if not text_at:
                text_at = no
        self.line_count = no
        if body_at:
            t = tok("BODY", "", body_at, body_end)
            t.data = body
            yield t
        if text_at:
            yield tok("_TEXT", "", text_at, no)


_TOKEN_CLASS: Any = None  # the line lexer's token class, a lark Token (defined with the parser)
_TASKS_CLASS: Any = None  # the transformer that hands each `task` reduction to a _Builder


def _parser(builder: "_Builder | None" = None):
    """An LALR parser of grammar/roadmap.lark (its tables are generated into
    harnessc/grammar/lark_parsers.py). With a builder, each `task` reduction becomes a Task
    at once, so a task's lines and tokens are dropped as soon as it is read."""
    global _TOKEN_CLASS, _TASKS_CLASS
    from ..grammar import lark_parsers

    if _TOKEN_CLASS is None:
        class _LineToken(lark_parsers.Token):
            """A whole-line token; `data` carries what the lexer already worked out."""

            __slots__ = ("data",)

            @classmethod
            def make(cls, type: str, value: str, line: int, end_line: int, column: int = 1):
                # Token() checks for deprecated keyword arguments on every call; this sets
                # the same public attributes directly, at a third of the cost
                t = str.__new__(cls, value)
                t.type, t.value, t.line, t.end_line, t.column = type, value, line, end_line, column
                t.start_pos = t.end_pos = t.end_column = None
                return t

        class _Tasks(lark_parsers.Transformer):
            def __init__(self, builder: _Builder):
                super().__init__()
                self.builder = builder

            def task(self, children):
                return self.builder.task(children)

        _TOKEN_CLASS, _TASKS_CLASS = _LineToken, _Tasks
    if builder is None:
        return lark_parsers.load(lark_parsers.ROADMAP)
    return lark_parsers.load(lark_parsers.ROADMAP, transformer=_TASKS_CLASS(builder))


def _parse_tree(src: _Source, builder: "_Builder | None" = None):
    """The parse tree of the line lexer's tokens, fed to the parser one by one (the lexer
    is ours, so lark's own lexer never runs); with a builder, tasks are Task objects."""
    parser = _parser(builder).parse_interactive()
    feed = parser.parser_state.feed_token  # what parser.feed_token calls, one call less per token
    for tok in src.tokens():
        feed(tok)
    return parser.feed_eof()


# ------------------------------------------------------------------ the builder


class _Builder:
    """Turns the parse tree into Tasks, typing values and reporting problems."""

    def __init__(self, path: str, diags: Diagnostics, source: TaskSource | None = None):
        # ids and names, one string object per distinct value: a roadmap names the same
        # dependencies, contracts and tags thousands of times
        self.names: dict[str, str] = {}
        self.ignores: dict[str, tuple[str, ...]] = {}  # task id -> codes its ignore comments name
        self.path = path
        self.diags = diags
        self.source = source
        self.odd_breaks: dict[int, str] = {}  # line -> the line break other than \n, \r\n, \r ending it

    def span(self, line: int, col: int, length: int) -> Span:
        return Span(self.path, line, col, line, col + max(length, 1))

    def error(self, code: str, msg: str, line: int, col: int, length: int, hint: str | None = None,
              fix: Fix | None = None):
        self.diags.error(code, msg, self.span(line, col, length), hint, fix)

    # -------------------------------------------------------------- task line

    def task(self, children: list[Any], phase: str | None = None) -> Task | None:
        """A task from its TASK (with property lines) and BODY tokens; None if it has no usable id."""
        head = children[0]
        parsed = self.task_line(head.value, head.line)
        props = head.data
        body = children[1] if len(children) > 1 else None
        if not parsed:
            if parsed is None:  # a broken task: still check its lines, lint reports all at once
                for p in props:
                    self.prop(p, {}, {})
            return None
        id_, id_col, title, title_col, done = parsed
        id_ = self.names.setdefault(id_, id_)
        self.check_title(id_, title, head.line, title_col, len(head.value))
        fields: dict[str, Any] = {}
        first_line: dict[str, tuple[int, str]] = {}
        if "harnessc:" in title:  # an ignore comment at the end of the task line
            m = IGNORE_COMMENT.search(title)
            if m is not None:
                codes = m.group(1) if m.group(1) is not None else m.group(2)
                at = head.value.rindex(codes) + 1
                title = title[: m.start()].rstrip()
                self.ignore(_Ignore(codes, at), head.line, fields)
        for p in props:
            self.prop(p, fields, first_line)
        ignored = fields.pop("_ignore", None)
        if ignored:
            self.ignores.setdefault(id_, tuple(sorted(set(ignored))))
        if "accept" in fields:
            fields["accept"] = tuple(fields["accept"])
        fields.update(
            id=id_, title=title, phase=phase, done=done, line=head.line, col=id_col,
            goal=self.goal(body.line, body.data) if body is not None else "", source=self.source,
        )
        return _new_task(fields)

    def task_line(self, line: str, no: int):
        """(id, id col, title, title col, done) of '- [ ] **id**: Title', reporting HC102/HC106.

        None: a task too broken to keep; False: a bold list item, maybe prose, not a task.
        """
        m = _CLEAN_TASK_LINE.fullmatch(line)
        if m is not None and not _is_blank(m.group(3)) and len(m.group(2)) <= MAX_ID_LENGTH:  # the usual case
            title_at = m.start(3)
            return m.group(2), m.start(2) + 1, m.group(3).strip(), self.col_of(line, title_at), m.group(1) != " "
        pos = 1
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos == 1:
            self.error("HC102", "missing space after the list bullet", no, 1, 1, f"write '{_TASK_FORM}'")
        end = _checkbox_end(line, pos)
        done = False
        if end < 0:  # "- **id**: Title": maybe prose, so only a warning, and not a task
            self.diags.warning(
                "HC102", "list item with a bold id but no checkbox is not read as a task",
                self.span(no, pos + 1, 2), f"write '{_TASK_FORM}' for a task",
            )
            return False
        box = line[pos + 1 : end - 1]
        if box in ("x", "X"):
            done = True
        elif box != " ":
            self.error(
                "HC102", f"bad checkbox '[{box}]'", no, pos + 1, end - pos,
                "write '[ ]' for an open task or '[x]' for a done one",
            )
        pos = end
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        rest = line[pos:]
        if not rest.startswith("**"):
            colon = rest.find(":")
            guess = rest[:colon].strip() if colon > 0 else ""
            if guess and _ID.fullmatch(guess):
                title = rest[colon + 1 :].strip()
                self.error(
                    "HC102", "task id must be bold", no, pos + 1, len(guess),
                    f"write '- [ ] **{guess}**: {title or 'Title'}'",
                )
                col = pos + 1 + rest.index(guess)
                return guess, col, title, self.col_of(line, pos + colon + 1), done
            self.error(
                "HC102", "task has no id", no, pos + 1, len(rest.rstrip()),
                f"write '- [ ] **some-id**: {rest.strip() or 'Title'}'",
            )
            return None
        close = line.find("**", pos + 2)
        if close < 0:
            self.error("HC102", "unclosed '**' around the task id", no, pos + 1, 2, f"write '{_TASK_FORM}'")
            return None
        id_ = line[pos + 2 : close]
        id_col = pos + 3
        after = close + 2
        if id_.endswith(":") and not line[after:].startswith(":"):  # "**id:** Title"
            id_ = id_[:-1]
            title_at = after
            self.error(
                "HC102", "the ':' goes after the closing '**'", no, close, 1,
                f"write '- [ ] **{id_}**: {line[after:].strip() or 'Title'}'",
            )
        elif line[after : after + 1] == ":":
            title_at = after + 1
        else:
            title_at = after
            self.error(
                "HC102", "expected ':' after the task id", no, after + 1, 1,
                f"write '- [ ] **{id_}**: {line[after:].strip() or 'Title'}'",
            )
        if not id_:
            self.error("HC106", "empty task id", no, pos + 1, 4, _ID_HINT)
            return None
        if not _ID.fullmatch(id_):
            self.error("HC106", f"bad task id '{id_}'", no, id_col, len(id_), _ID_HINT)
        elif len(id_) > MAX_ID_LENGTH:
            self.error("HC106", f"task id is {len(id_)} characters long, over the limit of {MAX_ID_LENGTH}",
                       no, id_col, len(id_), "shorten the id; the title can say the rest")
        title = line[title_at:].strip()
        if not title:
            self.error(
                "HC102", f"task '{id_}' has no title", no, len(line.rstrip()) + 1, 1,
                f"write '- [ ] **{id_}**: What to do'",
            )
        return id_, id_col, title, self.col_of(line, title_at), done

    def check_title(self, id_: str, title: str, no: int, col: int, end: int) -> None:
        """HC108: a title is one line of plain text (it becomes a commit's subject, a line of
        the terminal): no control character, no line break other than the line's end."""
        flaw = title_flaw(title)
        if flaw is not None:
            self.error("HC108", f"the title of task '{id_}' holds {flaw[1]}", no, col + flaw[0], 1,
                       "remove it: a title is one line of plain text")
        if no in self.odd_breaks:
            self.error("HC108", f"{char_name(self.odd_breaks[no])} ends the line of task '{id_}': what follows "
                       "it is read as another line", no, end + 1, 1,
                       "remove it, or end the line with a plain line break")

    @staticmethod
    def col_of(line: str, i: int) -> int:
        """1-based column of the first non-blank character at or after index i."""
        return i + 1 + (len(line) - i - len(line[i:].lstrip()))

    # -------------------------------------------------------------- property lines

    def prop(self, prop, fields: dict, first: dict, spans: dict | None = None,
             value_spans: dict | None = None) -> None:
        """Read one '- key: value' line (line number, match) into fields, or report why not.

        With `spans` and `value_spans` (locate_spans), also where the key and its values are.
        """
        no, m = prop
        if type(m) is _Ignore:
            self.ignore(m, no, fields)
            return
        if type(m) is _Misformed:
            self.error(m.code, m.message, no, m.col, m.length, m.hint, m.fix(self.path, no))
            if m.key is None:
                return
        indent, key, raw = m.group(1, 2, 3)
        if "\t" in indent:
            self.error("HC102", "tab in indentation", no, indent.index("\t") + 1, 1, "indent with spaces")
        key_col = m.start(2) + 1
        canon = KEY_ALIASES.get(key, key)
        kind = PROPERTY_KEYS.get(canon)
        if kind is None:
            hint = did_you_mean(key, _ALL_KEYS) or ("known keys: " + ", ".join(PROPERTY_KEYS))
            sure = sole_match(key, _ALL_KEYS)
            fix = Fix(self.path, no, key_col, key, sure, f"{key} -> {sure}") if sure else None
            self.error("HC103", f"unknown key '{key}'", no, key_col, len(key), hint, fix)
            return
        if canon not in first:
            first[canon] = (no, key)  # even when the value is bad: it is still a repeat
        elif canon not in _REPEATABLE:
            first_no, first_key = first[canon]
            same = "" if first_key == key else f" (same as '{first_key}')"
            self.error(
                "HC104", f"duplicate key '{key}'{same}", no, key_col, len(key),
                f"'{first_key}' is already set on line {first_no}; keep one",
            )
            return
        value = raw.strip()
        if not value:
            self.error("HC105", f"'{key}' has no value", no, m.start(3) + 1, 1,
                       "expected " + (_FORMATS.get(canon) or _FORMATS[kind]))
            return
        col = m.start(3) + 1 + raw.index(value[0])  # value[0]: the first non-blank character
        val = _READERS[kind](self, canon, key, value, no, col)
        if val is None:
            return
        where = None if spans is None else _value_spans(self.path, kind, value, no, col)
        if canon in _REPEATABLE:
            if canon in fields:
                fields[canon].append(val)
                if where is not None:
                    value_spans[canon] += where
                return
            val = [val]
        fields[canon] = val
        if where is not None:
            value_spans[canon] = where
            spans[canon] = Span(self.path, no, key_col, no, key_col + len(key))

    def ignore(self, comment: _Ignore, no: int, fields: dict) -> None:
        """Record the codes of an ignore comment in fields["_ignore"]; warn about unknown ones."""
        codes = fields.setdefault("_ignore", [])
        col = comment.col
        for word in re.split(r"([ \t,]+)", comment.codes):
            code = word.upper()
            if code in CODES:
                codes.append(code)
            elif word.strip(" \t,"):
                near = sole_match(code, CODES)
                self.diags.warning("HC102", f"unknown code '{word}' in an ignore comment", self.span(no, col, len(word)),
                                   f"did you mean '{near}'?" if near else "codes look like HC410; `harnessc explain` lists them")
            col += len(word)
        if not comment.codes.strip(" \t,"):
            self.diags.warning("HC102", "ignore comment names no code", self.span(no, comment.col, 1),
                               "name the codes to ignore: <!-- harnessc: ignore[HC410] -->")

    # -------------------------------------------------------------- the goal

    def goal(self, start: int, block: list[str]) -> str:
        """The goal block (its lines from line `start`), verbatim minus its common indentation
        (tabs: next multiple of 4)."""
        leads: list[int] = []
        tabbed = False
        for i, ln in enumerate(block):
            s = ln.lstrip(" \t")
            if _is_blank(s):
                leads.append(-1)
                continue
            n = len(ln) - len(s)
            if "\t" in ln[:n]:
                tabbed = True
                self.error(
                    "HC102", "tab in indentation", start + i, ln.index("\t") + 1, 1,
                    "indent with spaces",
                )
            leads.append(n)
        if tabbed:  # re-indent with spaces so the common indentation is measured in columns
            block = list(block)
            for i, ln in enumerate(block):
                if leads[i] > 0:
                    width = 0
                    for ch in ln[: leads[i]]:
                        width = (width // 4 + 1) * 4 if ch == "\t" else width + 1
                    block[i] = " " * width + ln[leads[i] :]
                    leads[i] = width
        common = min(n for n in leads if n >= 0)
        out = [ln[common:] if n >= 0 else "" for ln, n in zip(block, leads)]
        self.property_like_goal(start, block[0])
        return "\n".join(out)

    def property_like_goal(self, no: int, line: str) -> None:
        """Warn when the goal starts with what would be a property (with a mistake) without
        the blank line before it: after a blank line only well-formed known keys are read."""
        rule = "after a blank line, only '  - key: value' lines with a known key are properties"
        m = _PROP.match(line)
        if m is not None:
            near = _near_key(m.group(2))
            where, written = m.start(2) + 1, m.group(2)
            hint = f"did you mean '{near}'? {rule[0].upper()}{rule[1:]}" if near else None
        else:
            p = _misformed(line, False)
            where, written = (p.key_at + 1, p.written) if p else (0, "")
            hint = f"{p.hint} to make it a property ({rule})" if p else None
        if hint is not None:
            self.diags.warning("HC102", f"'{written}' here is goal text, not a property",
                               self.span(no, where, len(written)), hint)


def _new_task(values: dict[str, Any]) -> Task:
    """A Task from already-checked values."""
    return Task(**values)


# ------------------------------------------------------------------ typed values
#
# One reader per kind of value: (builder, canonical key, key as written, value, line, col)
# -> typed value, or None after reporting HC105 at the value's column.

_FORMATS = {
    "ids": "task ids, comma-separated, like setup-001, auth-002",
    "name": "one name, without spaces",
    "agents": "agent names, comma-separated, or auto",
    "iterations": "a positive whole number, like 50, or unlimited",
    "duration": "a duration like 45s, 30m, 4h, 1d or 1h30m",
    "posint": "a positive whole number, like 3",
    "int0": "a whole number, 0 or more",
    "min_passed": "a whole number of passing tests, like 5, or base (no fewer than pass at the task's base commit)",
    "word": "one word of letters, digits, '_' and '-', like AUTH_COMPLETE",
    "text": "some text",
    "paths": "files or globs, comma-separated, like src/auth/*.py, docs/api.md",
    "usd": USD_FORMAT,
    "words": "labels, comma-separated, like backend, auth",
    "complexity": "one of " + ", ".join(c.value for c in Complexity),
    "priority": "one of " + ", ".join(p.value for p in Priority),
    "on_failure": "one of " + ", ".join(f.value for f in FailureStrategy),
    "git": "one of " + ", ".join(g.value for g in GitMode),
    "isolation": "one of " + ", ".join(m.value for m in IsolationMode),
    "select": "one of " + ", ".join(m.value for m in SelectMode),
    "approaches": f"a whole number from 1 to {MAX_APPROACHES}, like 3",
    "fraction": "a number from 0 to 1, like 0.2",
    "number": "a number, like 0.8 or -120",
    "bool": "true or false",
    "resources": "custom Ray resources and amounts, like {gpu_box: 1} or gpu_box=1, big_disk=2",
    "errkinds": "kinds of failure, comma-separated: " + ", ".join(ERROR_KINDS),
    "level": "a refinement level: 1, 2 or 3",
    "rungs": "recovery steps, comma-separated, in the order tried: prompt mutations (" + ", ".join(MUTATIONS)
             + "), explore and escalate, then " + " or ".join(LADDER_ENDS) + " last",
}


def _bad(b: _Builder, key: str, value: str, no: int, col: int, hint: str) -> None:
    shown = value if len(value) <= 40 else value[:37] + "..."
    b.error("HC105", f"bad {key} '{shown}'", no, col, len(value), hint)


def _split(value: str, col: int) -> list[tuple[str, int]]:
    """Comma-separated items with their columns; commas inside {...} (globs) do not split."""
    if "{" in value:
        cuts, depth = [], 0
        for i, ch in enumerate(value):
            if ch == "{":
                depth += 1
            elif ch == "}" and depth:
                depth -= 1
            elif ch == "," and not depth:
                cuts.append(i)
        pieces = [value[a + 1 : z] for a, z in zip([-1, *cuts], [*cuts, len(value)])]
    else:
        pieces = value.split(",")
    out, at = [], col
    for piece in pieces:
        text = piece.strip()
        out.append((text, at + len(piece) - len(piece.lstrip()) if text else at))
        at += len(piece) + 1
    return out


# Comma lists with nothing to report (the usual case) are split directly; the item-by-item
# reading below is for lists with a problem to locate, and gives the same items otherwise.
_CLEAN_LISTS = {
    "ids": re.compile(rf"{ID_PATTERN}(?:[ \t]*,[ \t]*{ID_PATTERN})*"),
    "words": re.compile(r"[^\s,{]+(?:[ \t]*,[ \t]*[^\s,{]+)*"),
}
_CLEAN_LISTS["agents"] = _CLEAN_LISTS["words"]


def _read_list(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    kind = PROPERTY_KEYS[canon]
    clean = _CLEAN_LISTS.get(kind)
    if clean is not None and clean.fullmatch(value):
        names = b.names
        if "," not in value:
            return (names.setdefault(value, value),)
        vals = tuple([names.setdefault(v, v) for v in [v.strip(" \t") for v in value.split(",")]])
        if kind != "agents" or "auto" not in vals:
            return vals
    return _read_list_item_by_item(b, canon, key, value, no, col)


def _read_list_item_by_item(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    kind = PROPERTY_KEYS[canon]
    vals, ok = [], True
    for text, c in _split(value, col):
        if not text:
            b.error("HC105", f"empty item in {key}", no, c, 1, "expected " + _FORMATS[kind])
            ok = False
        elif kind == "ids" and not _ID.fullmatch(text):
            b.error("HC105", f"bad task id '{text}' in {key}", no, c, len(text), _ID_HINT)
            ok = False
        elif kind != "paths" and (" " in text or "\t" in text):
            b.error("HC105", f"bad {key} item '{text}'", no, c, len(text),
                    "expected " + _FORMATS[kind])
            ok = False
        else:
            vals.append(text)
    if ok and kind == "agents" and "auto" in vals and len(vals) > 1:
        b.error("HC105", f"bad {key} '{value}': auto cannot be combined with agent names",
                no, col, len(value), "write either auto or a list of agent names")
        ok = False
    return tuple(vals) if ok else None


def _read_enum(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    member = _ENUM_WORDS[canon].get(value.lower())  # case-insensitive: "Complex" means complex
    if member is not None:
        return member
    enum = _ENUMS[canon]
    near = did_you_mean(value.lower(), [e.value for e in enum])
    allowed = "allowed: " + ", ".join(e.value for e in enum)
    _bad(b, key, value, no, col, f"{near} {allowed}" if near else allowed)
    return None


_MAX_INT = 2**31 - 1


def _read_int(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    kind = PROPERTY_KEYS[canon]
    if kind == "iterations" and value.lower() == "unlimited":
        return "unlimited"
    n = -1
    if value.isascii() and value.isdigit():
        try:
            n = int(value)
        except ValueError:  # more digits than int() will read
            n = -1
    if n < (0 if kind == "int0" else 1):
        _bad(b, key, value, no, col, "expected " + _FORMATS[kind])
        return None
    if n > _MAX_INT:  # the run state stores these as 64-bit integers; no sane limit is near
        b.error("HC105", f"{key} is too large", no, col, len(value), f"at most {_MAX_INT}")
        return None
    return n


_UNIT_WORDS = {
    "ms": "ms", "msec": "ms", "msecs": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d",
}
_DURATION_WORDS = re.compile(r"(\d+(?:\.\d+)?)[ \t]*([A-Za-z]*)[ \t,]*(?:and[ \t]+)?")


def _duration_hint(value: str) -> str:
    """'use 4h' for '4 hours', 'use 1h30m' for '1 hour 30 min', 'use 90s' for '90'."""
    parts, pos = [], 0
    while pos < len(value):
        m = _DURATION_WORDS.match(value, pos)
        unit = _UNIT_WORDS.get(m.group(2).lower() or "s") if m and m.end() > pos else None
        if unit is None:
            return "use " + _FORMATS["duration"]
        parts.append(m.group(1) + unit)
        pos = m.end()
    return f"use {''.join(parts)}" if parts else "use " + _FORMATS["duration"]


_MAX_SECONDS = 100 * 365 * 86400  # also keeps float overflow (inf) out


def _read_duration(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    try:
        seconds = parse_duration(value)
    except ValueError:
        _bad(b, key, value, no, col, _duration_hint(value))
        return None
    if not 0 < seconds < _MAX_SECONDS:
        b.error("HC105", f"{key} must be longer than 0" if seconds <= 0 else f"{key} is too long",
                no, col, len(value), "use " + _FORMATS["duration"])
        return None
    return seconds


def _read_usd(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    usd = parse_usd(value)
    if usd is None:
        _bad(b, key, value, no, col, "expected " + _FORMATS["usd"])
    return usd


def _read_word(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    if PROPERTY_KEYS[canon] == "word":
        ok = _WORD.fullmatch(value) is not None
    else:  # a name: contract or model
        ok = not (" " in value or "\t" in value or "," in value)
    if not ok:
        _bad(b, key, value, no, col, "expected " + _FORMATS[PROPERTY_KEYS[canon]])
        return None
    return b.names.setdefault(value, value)


def _read_text(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    return value


_FRACTION = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")


def _read_fraction(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    """A number from 0 to 1 (progress_threshold); '20%' is pointed to 0.2."""
    if _FRACTION.fullmatch(value) is None:
        percent = value.endswith("%") and _FRACTION.fullmatch(value[:-1].strip())
        hint = (f"write it as a fraction: {_fmt_number(float(value[:-1]) / 100)}" if percent
                else "expected " + _FORMATS["fraction"])
        _bad(b, key, value, no, col, hint)
        return None
    x = float(value)
    if not 0 <= x <= 1:
        b.error("HC105", f"{key} must be between 0 and 1", no, col, len(value),
                "expected " + _FORMATS["fraction"] + ": an iteration scoring under it made no progress")
        return None
    return x


def _read_min_passed(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    """Passing tests the task's checks must report: a whole number, or `base` (HC425)."""
    if value.lower() == "base":
        return "base"
    n = int(value) if value.isascii() and value.isdigit() and len(value) < 10 else -1
    if n < 0:
        shown = value if len(value) <= 40 else value[:37] + "..."
        b.error("HC425", f"bad min_passed '{shown}'", no, col, len(value), "expected " + _FORMATS["min_passed"])
        return None
    return n


def _read_approaches(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    """How many approaches of the task run at once: 1 to MAX_APPROACHES (each is a worktree)."""
    n = int(value) if value.isascii() and value.isdigit() and len(value) < 10 else -1
    if n < 1:
        _bad(b, key, value, no, col, "expected " + _FORMATS["approaches"])
        return None
    if n > MAX_APPROACHES:
        b.error("HC105", f"{key} is {n}, over the limit of {MAX_APPROACHES}", no, col, len(value),
                f"each approach is a git worktree and an agent at work; use at most {MAX_APPROACHES}")
        return None
    return n


def _read_number(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    """Any finite decimal number (min_score: scores may be negative, like a negative diff size)."""
    if _FRACTION.fullmatch(value) is None:
        _bad(b, key, value, no, col, "expected " + _FORMATS["number"])
        return None
    return float(value)


def _read_bool(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    word = value.strip().lower()
    if word in ("true", "yes"):
        return True
    if word in ("false", "no"):
        return False
    _bad(b, key, value, no, col, "expected " + _FORMATS["bool"])
    return None


def _read_rungs(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    """The recovery ladder's steps, in order: each known, once, and nothing after human or fail."""
    steps: list[str] = []
    end: str | None = None
    ok = True
    for text, c in _split(value, col):
        word = text.lower()
        if not text:
            b.error("HC105", f"empty item in {key}", no, c, 1, "expected " + _FORMATS["rungs"])
        elif word not in RUNGS:
            near = did_you_mean(word, list(RUNGS))
            allowed = "steps: " + ", ".join(RUNGS)
            b.error("HC105", f"unknown recovery step '{text}'", no, c, len(text), f"{near} {allowed}" if near else allowed)
        elif end is not None:
            b.error("HC105", f"recovery step '{text}' after '{end}'", no, c, len(text),
                    f"'{end}' ends the ladder: nothing after it is ever tried; put it last")
        elif word in steps:
            b.error("HC105", f"recovery step '{text}' listed twice", no, c, len(text),
                    "each step is tried once, in order; keep one")
        else:
            steps.append(b.names.setdefault(word, word))
            if word in LADDER_ENDS:
                end = text
            continue
        ok = False
    return tuple(steps) if ok else None


def _read_errkinds(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    """retry_on / dont_retry: kinds of failure (vocab.ERROR_KINDS), each known (HC451), once."""
    kinds: list[str] = []
    ok = True
    for text, c in _split(value, col):
        word = text.lower()
        if not text:
            b.error("HC105", f"empty item in {key}", no, c, 1, "expected " + _FORMATS["errkinds"])
            ok = False
        elif word not in ERROR_KINDS:
            near = did_you_mean(word, list(ERROR_KINDS))
            allowed = "kinds: " + ", ".join(ERROR_KINDS) + " (`harnessc explain HC451`)"
            b.error("HC451", f"unknown error kind '{text}' in {key}", no, c, len(text),
                    f"{near} {allowed}" if near else allowed)
            ok = False
        elif word not in kinds:
            kinds.append(b.names.setdefault(word, word))
    return tuple(kinds) if ok else None


def _read_level(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    if not (value.isascii() and value.isdigit() and len(value) < 3 and int(value) in START_LEVELS):
        _bad(b, key, value, no, col, "expected " + _FORMATS["level"])
        return None
    return int(value)


_RESOURCE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]*")  # Ray's own include node:10.0.0.5


def _resource_items(value: str, col: int) -> list[tuple[str, int]]:
    """The `name: amount` items of a resources value with their columns; the braces of
    `{gpu_box: 1, big_disk: 2}` are optional."""
    if value.startswith("{") and value.endswith("}"):
        value, col = value[1:-1], col + 1
    out, at = [], col
    for piece in value.split(","):
        text = piece.strip()
        out.append((text, at + len(piece) - len(piece.lstrip()) if text else at))
        at += len(piece) + 1
    return out


def _read_resources(b: _Builder, canon: str, key: str, value: str, no: int, col: int):
    """Custom Ray resources for the task's attempts: `{gpu_box: 1}` or `gpu_box=1, big_disk=2`
    -> {name: amount}, each amount a positive number (whole numbers as int)."""
    if value.startswith("{") != value.endswith("}"):
        _bad(b, key, value, no, col, "write the resources inside one pair of braces, like {gpu_box: 1, big_disk: 2}")
        return None
    items = _resource_items(value, col)
    if items == [("", items[0][1])]:  # {}
        _bad(b, key, value, no, col, "name at least one, like {gpu_box: 1}, or remove the line")
        return None
    found: dict[str, int | float] = {}
    ok = True
    for text, c in items:
        sep = "=" if "=" in text else ":"
        name, cut, amount = (part.strip() for part in text.rpartition(sep))
        problem = None
        if not text:
            problem = f"empty item in {key}", "expected " + _FORMATS["resources"]
        elif not cut or not name:
            problem = f"bad {key} item '{text}'", "write a name and an amount, like gpu_box: 1"
        elif not _RESOURCE_NAME.fullmatch(name):
            problem = (f"bad resource name '{name}'",
                       "a name starts with a letter or '_' and has letters, digits, '_', '.', ':', '/' and '-'")
        elif name in RAY_RESERVED_RESOURCES:
            problem = (f"'{name}' is one of Ray's own resources, not a custom one",
                       "CPUs come from harness.yaml executor.num_cpus_per_attempt; for a GPU, start the GPU "
                       "nodes with a custom resource (ray start --resources='{\"gpu_box\": 1}') and ask for that")
        elif name in found:
            problem = f"resource '{name}' listed twice", "keep one"
        elif _FRACTION.fullmatch(amount) is None or float(amount) < MIN_RESOURCE or float(amount) > 1e9:
            problem = (f"bad amount '{amount}' of resource '{name}'",
                       f"a positive number from {MIN_RESOURCE} up, like 1 or 0.5")
        if problem is not None:
            b.error("HC105", problem[0], no, c, max(len(text), 1), problem[1])
            ok = False
            continue
        x = float(amount)
        found[b.names.setdefault(name, name)] = int(x) if x.is_integer() else x
    return found if ok else None


_READERS: dict[str, Callable[..., Any]] = {
    "ids": _read_list, "agents": _read_list, "paths": _read_list, "words": _read_list,
    "enum": _read_enum,
    "iterations": _read_int, "posint": _read_int, "int0": _read_int,
    "duration": _read_duration,
    "usd": _read_usd,
    "word": _read_word, "name": _read_word,
    "text": _read_text,
    "fraction": _read_fraction,
    "number": _read_number,
    "approaches": _read_approaches,
    "rungs": _read_rungs,
    "errkinds": _read_errkinds,
    "level": _read_level,
    "resources": _read_resources,
    "min_passed": _read_min_passed,
    "bool": _read_bool,
}


def _value_spans(path: str, kind: str, value: str, no: int, col: int) -> list[Span]:
    """Where a property's values are: one span per item of a comma list, else one."""
    if kind in _LIST_KINDS:
        return [Span(path, no, c, no, c + len(text)) for text, c in _split(value, col) if text]
    return [Span(path, no, col, no, col + len(value))]


_LIST_KINDS = {kind for kind, reader in _READERS.items() if reader in (_read_list, _read_rungs, _read_errkinds)}


def locate_spans(source: TaskSource, task: Task) -> tuple[dict[str, Span], dict[str, list[Span]]]:
    """(spans, value_spans) of a parsed task: its task and property lines read again, with
    the same code that read them first, this time keeping positions."""
    lines, no = source.lines, task.line
    b = _Builder(source.path, Diagnostics())
    spans: dict[str, Span] = {"id": task.span}
    value_spans: dict[str, list[Span]] = {}
    parsed = b.task_line(lines[no - 1], no)
    if parsed:
        spans["title"] = b.span(no, parsed[3], len(parsed[2]))
    fields: dict[str, Any] = {}
    first: dict[str, tuple[int, str]] = {}
    gap = False
    for i in range(no, len(lines)):  # its property block, as the lexer reads it
        line = lines[i]
        if _is_blank(line.lstrip(" \t")):
            gap = True
            continue
        m = _property_line(line, gap)
        if m is None:
            break
        gap = False
        b.prop((i + 1, m), fields, first, spans, value_spans)
    return spans, value_spans


# ------------------------------------------------------------------ parse_roadmap


def parse_roadmap(text: str, path: str, diags: Diagnostics) -> Roadmap:
    """Parse roadmap.md text; problems go to diags (HC101-HC108), never raised.

    (A fail-fast Diagnostics raises CompileError at the first error, by its own design.)
    """
    # The parse allocates many long-lived objects and no cycles: the cyclic GC would only
    # rescan them again and again (it doubles the time of a 10k-task roadmap).
    with no_cyclic_gc():
        return _parse(text, path, diags)


def _parse(text: str, path: str, diags: Diagnostics) -> Roadmap:
    if text.startswith("\ufeff"):
        text = text[1:]
    # lines as splitlines() cuts them, like render_text, so line numbers agree with the
    # rendered diagnostics
    src = _Source(text)
    b = _Builder(path, diags, TaskSource(text, path, locate_spans))
    b.odd_breaks = _odd_breaks(text)
    try:
        tree = _parse_tree(src, b)
        from ..grammar.lark_parsers import Tree  # already imported by _parser()
    except CompileError:  # a fail-fast Diagnostics stopping at the first problem the builder reports
        raise
    except Exception as e:  # the grammar accepts every token stream; keep the promise anyway
        diags.error("HC102", f"cannot parse roadmap: {type(e).__name__}", Span(path, 1, 1))
        return Roadmap(path=path)

    title = None
    title_line = 0
    tasks_at: list[int] = []  # line of each '## Tasks' heading
    tasks: list[Task] = []
    seen: dict[str, int] = {}  # id -> line
    near_misses: list[tuple[int, str]] = []

    def add(t: Task | None, phase: str | None) -> None:
        """Keep a task built during the parse (None: one too broken to keep)."""
        if t is None:
            return
        t.phase = phase
        first = seen.get(t.id)
        if first is not None:
            diags.error(
                "HC107", f"duplicate task id '{t.id}'", t.span,
                f"'{t.id}' is already defined on line {first}; ids must be unique",
            )
            return
        seen[t.id] = t.line
        tasks.append(t)

    def near_miss(tok) -> None:
        """Remember headings that were probably meant as '## Tasks' (for the HC101 hint)."""
        text = tok.data[0].lower()
        if text in ("tasks", "task", "todo") or (tok.type == "H2" and did_you_mean(text, ["tasks"])):
            near_misses.append((tok.line, tok.value.strip()))

    sections: list[tuple[int, int]] = []  # first and last line of each '## Tasks' section
    for node in tree.children:
        if not isinstance(node, Tree):  # prose before the first heading
            if node.type == "H3":
                near_miss(node)
            continue
        head = node.children[0]
        if sections and sections[-1][1] == 0:
            sections[-1] = (sections[-1][0], head.line - 1)
        if node.data == "other_section":
            near_miss(head)
            for tok in node.children[1:]:
                if tok.type == "H3":
                    near_miss(tok)
            if head.type == "TITLE":
                title, title_line = head.data[0], head.line
                if not title:
                    b.error("HC102", "empty title", head.line, head.data[1] + 1, 1,
                            "write '# Project name'")
                    title = None
            continue
        if tasks_at:  # tasks_section
            diags.warning(
                "HC102", "second '## Tasks' section",
                b.span(head.line, head.column, len(head.value.strip())),
                f"the first is on line {tasks_at[0]}; tasks of both are read, but keep one",
            )
        tasks_at.append(head.line)
        sections.append((head.line, 0))
        for child in node.children[1:]:
            if not isinstance(child, Tree):  # a task, built during the parse
                add(child, None)
                continue
            h3 = child.children[0]  # a phase
            phase, pcol = h3.data
            if not phase:
                b.error("HC102", "empty phase heading", h3.line, pcol + 1, 1,
                        "write '### Phase 1: Foundations'")
            for t in child.children[1:]:
                add(t, phase or None)

    if src.indented_tasks and sections:
        if sections[-1][1] == 0:
            sections[-1] = (sections[-1][0], src.line_count)
        for no, col in src.indented_tasks:
            if any(a < no <= z for a, z in sections):  # a dropped task would go unnoticed
                b.error("HC102", "indented task item is not read as a task", no, col, 1,
                        f"task items start at column 1: '{_TASK_FORM}'")

    if not tasks_at:
        hint = "add a '## Tasks' section, " + _MINIMAL
        if near_misses:
            no, written = near_misses[0]
            hint = f"line {no} says '{written}': the tasks heading must be exactly '## Tasks'"
        diags.error("HC101", "roadmap has no '## Tasks' section", Span(path, 1, 1, 1, 2), hint)

    overview = ""
    end = tasks_at[0] - 1 if tasks_at else src.line_count  # src.head: the lines up to there
    start = title_line if title_line and (not tasks_at or title_line < tasks_at[0]) else 0
    if end > start:
        overview = "\n".join(src.head[start:end]).strip()
    return Roadmap(path=path, title=title, overview=overview, tasks=tasks, ignores=b.ignores)


# ------------------------------------------------------------------ format_roadmap


def _fmt_duration(seconds: int | float) -> str:
    if isinstance(seconds, int) or float(seconds).is_integer():
        s = int(seconds)
        parts = []
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
            if s >= size:
                parts.append(f"{s // size}{unit}")
                s %= size
        return "".join(parts) or "0s"
    return _fmt_number(seconds) + "s"


def _fmt_number(x: float) -> str:
    """A plain decimal (no exponent) that reads back as the same float."""
    from decimal import Decimal  # formatting only (format_roadmap); parsing stays light

    text = format(Decimal(repr(float(x))), "f")
    return text[:-2] if text.endswith(".0") else text


def _fmt_value(key: str, value: Any) -> str | None:
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return None
    if isinstance(value, (list, tuple)):
        return ", ".join(value)
    if isinstance(value, bool):  # review
        return "true" if value else "false"
    if isinstance(value, dict):  # resources
        return "{" + ", ".join(f"{name}: {_fmt_number(x)}" for name, x in value.items()) + "}"
    if key == "max_time":
        return _fmt_duration(value)
    if key in ("budget", "progress_threshold", "min_score"):
        return _fmt_number(value)
    if hasattr(value, "value"):  # an enum
        return value.value
    return str(value)


def format_roadmap(roadmap: Roadmap) -> str:
    """The roadmap as canonical roadmap.md text: parse_roadmap reads it back to the same IR.

    Tasks with no phase must come before the first phased task (Markdown cannot express
    a return to "no phase"); such tasks are written under the phase before them.
    """
    out: list[str] = []
    if roadmap.title:
        out += [f"# {roadmap.title}", ""]
    if roadmap.overview.strip():
        out += [roadmap.overview.strip(), ""]
    out += ["## Tasks", ""]
    phase = None
    for t in roadmap.tasks:
        if t.phase and t.phase != phase:
            out += [f"### {t.phase}", ""]
            phase = t.phase
        out.append(f"- [{'x' if t.done else ' '}] **{t.id}**: {t.title}")
        for key in PROPERTY_KEYS:
            value = getattr(t, key)
            if key in _REPEATABLE:
                out += [f"  - {key}: {v}" for v in value]
                continue
            text = _fmt_value(key, value)
            if text is not None:
                out.append(f"  - {key}: {text}")
        if t.id in roadmap.ignores:
            out.append(f"  <!-- harnessc: ignore[{', '.join(roadmap.ignores[t.id])}] -->")
        if t.goal.strip():
            out.append("")
            out += [f"  {ln}" if ln.strip() else "" for ln in t.goal.strip("\n").split("\n")]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
