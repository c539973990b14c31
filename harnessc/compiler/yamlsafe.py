"""Safe YAML with source positions.

Built from PyYAML's event stream rather than its constructor so that anchors, aliases and
tags are refused before anything is expanded (an alias bomb costs nothing), duplicate keys
are caught, and every key and value keeps its line and column. Keys are text as written (specs
are JSON data, whose keys are strings) and numbers must fit JSON, pydantic and SQLite. Returns plain Python data and
a `Marks` table from a path like ("contracts", "x", "output", "score") to where it was written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..diagnostics import Diagnostics, Span

MAX_BYTES = 1_000_000
MAX_DEPTH = 32
MAX_NODES = 200_000
# Numbers must survive the trip through JSON, pydantic and SQLite: whole numbers fit in a
# signed 64-bit integer, other numbers are finite doubles (no .nan, .inf or 1e400).
MAX_INT = 2**63 - 1
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")

Path = tuple[Any, ...]


@dataclass
class Marks:
    """Where each key and value of a YAML document was written."""

    path: str
    keys: dict[Path, Span] = field(default_factory=dict)
    values: dict[Path, Span] = field(default_factory=dict)

    def value(self, loc: Path) -> Span:
        """The span of the value at `loc`, or of its nearest located ancestor."""
        return self._nearest(self.values, loc)

    def key(self, loc: Path) -> Span:
        """The span of the key at `loc` (falls back to the value, then ancestors)."""
        if loc in self.keys:
            return self.keys[loc]
        return self.value(loc)

    def _nearest(self, table: dict[Path, Span], loc: Path) -> Span:
        loc = tuple(loc)
        while loc:
            if loc in table:
                return table[loc]
            loc = loc[:-1]
        return table.get((), Span(self.path, 1, 1))


class _Reject(Exception):
    def __init__(self, code: str, message: str, span: Span, hint: str | None = None):
        self.code, self.message, self.span, self.hint = code, message, span, hint


def _span(path: str, start, end=None) -> Span:
    if end is not None and end.line == start.line:
        return Span(path, start.line + 1, start.column + 1, end.line + 1, end.column + 1)
    return Span(path, start.line + 1, start.column + 1)


# libyaml's parser when PyYAML was built with it: the same events and marks, ~10x faster.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_constructor = yaml.SafeLoader.__new__(yaml.SafeLoader)  # only used to type scalars
yaml.constructor.SafeConstructor.__init__(_constructor)
_resolver = yaml.resolver.Resolver()


def _scalar(event, path: str) -> Any:
    tag = _resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == "tag:yaml.org,2002:str":  # most scalars: what the constructor would return
        return event.value
    if tag == "tag:yaml.org,2002:timestamp":
        return event.value  # dates stay strings: outputs and examples are JSON
    if tag in _NUMBER_TAGS and sum(c.isdigit() for c in event.value) > 400:
        value = None  # past Python's int-parsing limit (4,300 digits), and quadratic to parse
    else:
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        value = _constructor.construct_object(node, deep=True)
    if tag in _NUMBER_TAGS and not _fits(value):
        raise _Reject("HC206", f"number {_short(event.value)} is out of range", _span(path, event.start_mark, event.end_mark),
                      f"numbers are finite and whole numbers are at most {MAX_INT:,} in size; "
                      "quote the value if it is meant as text")
    return value


def _fits(value: Any) -> bool:
    if isinstance(value, int):
        return -MAX_INT <= value <= MAX_INT
    return isinstance(value, float) and math.isfinite(value)


def _short(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-6:]} ({len(text)} characters)"


def load_yaml(text: str, path: str, diags: Diagnostics) -> tuple[Any, Marks]:
    """Parse `text`; problems go to `diags` and the result is (None, marks) on error."""
    marks = Marks(path)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        diags.error(
            "HC002", f"{path} is larger than {MAX_BYTES // 1_000_000} MB", Span(path, 1, 1),
            "spec files are small by design; split the data out or reference files with context:",
        )
        return None, marks
    tab_found = False
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip(" ")
        if stripped.startswith("\t"):
            diags.error(
                "HC202", "tab used for indentation", Span(path, lineno, len(line) - len(stripped) + 1),
                "YAML indents with spaces only; replace the tab with spaces",
            )
            tab_found = True
    if tab_found:
        return None, marks
    try:
        data = _build(yaml.parse(text, Loader=_LOADER), path, marks)
    except _Reject as r:
        diags.error(r.code, r.message, r.span, r.hint)
        return None, marks
    except yaml.MarkedYAMLError as e:
        from .yamlerrors import explain  # only when there is an error to explain

        plain = explain(e, text)
        if plain is not None:
            span = Span(path, plain.line, plain.col, plain.line, plain.col + plain.length)
            diags.error("HC201", f"YAML syntax error: {plain.message}", span, plain.hint)
            return None, marks
        mark = e.problem_mark or e.context_mark
        span = Span(path, mark.line + 1, mark.column + 1) if mark else Span(path, 1, 1)
        problem = e.problem or "invalid YAML"
        hint = None
        if e.context:
            hint = f"{e.context}" + (f" (started at line {e.context_mark.line + 1})" if e.context_mark else "")
        diags.error("HC201", f"YAML syntax error: {problem}", span, hint)
        return None, marks
    except yaml.YAMLError as e:
        diags.error("HC201", f"YAML error: {e}", Span(path, 1, 1))
        return None, marks
    return data, marks


def _build(events, path: str, marks: Marks) -> Any:
    """Turn an event stream into plain data, recording marks and refusing unsafe constructs."""
    stack: list[list] = []  # frames: [kind, container, loc, pending_key, key_span, seen_keys]
    root: Any = None
    nodes = 0
    documents = 0

    def check(event) -> None:
        if getattr(event, "anchor", None):
            raise _Reject("HC203", f"YAML anchor '&{event.anchor}' is not allowed", _span(path, event.start_mark),
                          "write the value out in full; anchors and aliases are refused to keep specs reviewable and safe")
        tag = getattr(event, "tag", None)
        implicit = getattr(event, "implicit", True)
        explicit = (isinstance(implicit, tuple) and not any(implicit)) or implicit is False
        if tag and tag != "!" and explicit:
            raise _Reject("HC203", f"YAML tag '{tag}' is not allowed", _span(path, event.start_mark),
                          "remove the tag; values are typed by the schema")

    def attach(value: Any, start, end) -> None:
        nonlocal root
        if not stack:
            root = value
            marks.values[()] = _span(path, start, end)
            return
        frame = stack[-1]
        kind, container, loc = frame[0], frame[1], frame[2]
        if kind == "seq":
            sub = loc + (len(container),)
            container.append(value)
            marks.values[sub] = _span(path, start, end)
        elif frame[3] is _NO_KEY:
            if isinstance(value, (dict, list)):
                raise _Reject("HC211", "a mapping key must be a plain value", _span(path, start), None)
            key_span = _span(path, start, end)
            if value in frame[5]:
                first = frame[5][value]
                raise _Reject("HC204", f"duplicate key '{value}'", key_span,
                              f"'{value}' is already set on line {first.line}; keep one")
            frame[3], frame[4] = value, key_span
        else:
            key = frame[3]
            sub = loc + (key,)
            container[key] = value
            frame[5][key] = frame[4]
            marks.keys[sub] = frame[4]
            marks.values[sub] = _span(path, start, end)
            frame[3] = _NO_KEY

    for event in events:
        nodes += 1
        if nodes > MAX_NODES:
            raise _Reject("HC205", f"more than {MAX_NODES} YAML nodes", _span(path, event.start_mark),
                          "spec files are small by design")
        if isinstance(event, yaml.AliasEvent):
            raise _Reject("HC203", f"YAML alias '*{event.anchor}' is not allowed", _span(path, event.start_mark),
                          "write the value out in full; aliases are refused (they can expand without bound)")
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise _Reject("HC201", "more than one YAML document in the file", _span(path, event.start_mark),
                              "remove the '---' separator; a spec file holds one document")
        elif isinstance(event, yaml.ScalarEvent):
            check(event)
            if stack and stack[-1][0] == "map" and stack[-1][3] is _NO_KEY:
                value = event.value  # a key is text as written: `1:`, `true:`, `~:` are '1', 'true', '~'
            else:
                try:
                    value = _scalar(event, path)
                except yaml.YAMLError as e:
                    raise _Reject("HC201", f"bad scalar: {e}", _span(path, event.start_mark)) from None
            attach(value, event.start_mark, event.end_mark)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            check(event)
            if len(stack) >= MAX_DEPTH:
                raise _Reject("HC205", f"YAML nested deeper than {MAX_DEPTH} levels", _span(path, event.start_mark),
                              "flatten the structure")
            is_map = isinstance(event, yaml.MappingStartEvent)
            container: Any = {} if is_map else []
            if stack:
                parent = stack[-1]
                if parent[0] == "map" and parent[3] is _NO_KEY:
                    raise _Reject("HC211", "a mapping key must be a plain value", _span(path, event.start_mark))
                loc = parent[2] + ((parent[3],) if parent[0] == "map" else (len(parent[1]),))
            else:
                loc = ()
            stack.append(["map" if is_map else "seq", container, loc, _NO_KEY, None, {}, event.start_mark])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame = stack.pop()
            attach(frame[1], frame[6], event.end_mark)
    return root


class _NoKey:
    def __repr__(self) -> str:
        return "<no key>"


_NO_KEY = _NoKey()
