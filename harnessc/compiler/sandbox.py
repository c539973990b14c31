"""The Jinja sandbox prompt templates render in, with their work and sizes bounded.

Jinja's sandbox stops unsafe attribute access, not work: nested `range(100000)` loops,
`lipsum(n=1000000)`, `((3**100)**100)**100`, a string doubled 32 times or a macro that calls
itself twice per call ran for minutes and filled memory. Here every render has bounds:

- output: at most MAX_OUTPUT characters (so has each `{% set %}` block and macro result);
- values: `+ - * / // % **` and `~` check the size of their result before building it:
  strings, lists and tuples up to MAX_VALUE items, integers up to MAX_INT_BITS bits;
  a `%` or `str.format` width and any int passed to a call or filter (`'x'.ljust(10**9)`,
  `|center(10**9)`) at most MAX_VALUE;
- work: loop iterations, calls (macros, methods, filters) and the size of what they take and
  build count against MAX_STEPS per render (`range` is Jinja's: at most 100,000 items);
- `lipsum` is gone.

Going past a bound raises TemplateTooCostly (a SecurityError): HC503 at lint and build, a
clear error at run time.
"""

from __future__ import annotations

import os
import re
import string
from contextvars import ContextVar
from functools import partial
from pathlib import Path

# Jinja comes through harnessc/jinja.py (prompts.py imports this module when a template is
# first rendered): lint and the run's start never pay for it.
from ..jinja import (  # noqa: F401  (TemplateError & co. re-exported for prompts.py)
    BaseLoader,
    ChoiceLoader,
    CodeGenerator,
    ImmutableSandboxedEnvironment,
    LoopContext,
    Macro,
    PackageLoader,
    SecurityError,
    StrictUndefined,
    Template,
    TemplateError,
    TemplateNotFound,
    TemplateSyntaxError,
    UndefinedError,
    missing,
    nodes,
    split_template_path,
)
from ..workspace import Workspace

MAX_OUTPUT = 10_000_000  # characters one render produces
MAX_VALUE = 1_000_000  # characters or items one expression builds; largest int argument or width
MAX_INT_BITS = 10_000  # bits of an integer a template computes (about 3,000 digits)
MAX_STEPS = 1_000_000  # loop iterations + calls + (items taken or built) / ITEMS_PER_STEP, per render
ITEMS_PER_STEP = 16
MACRO_CALL_STEPS = 10  # a macro call costs about as much as ten loop iterations

_PERCENT_SPEC = r"%(?:\([^)]*\))?[-#0 +]*(\d*)(?:\.(\d*))?"  # groups: width, precision


def _size(x) -> int:
    return len(x) if isinstance(x, (str, list, tuple, dict, set, frozenset, range)) else 0


class _Budget:
    """The steps one render may still take."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = MAX_STEPS


_BUDGET: ContextVar[_Budget | None] = ContextVar("template_budget", default=None)


class TemplateTooCostly(SecurityError):
    what = "template is too costly"  # how prompts.py words the HC503 diagnostic
    hint = "templates are bounded: see 'Prompt templates' in docs/spec-reference.md"


def charge(steps: int) -> None:
    budget = _BUDGET.get()
    if budget is None:  # rendering outside BoundedTemplate.render (e.g. a stream): own budget
        budget = _Budget()
        _BUDGET.set(budget)
    budget.left -= steps
    if budget.left < 0:
        raise TemplateTooCostly(f"more than {MAX_STEPS:,} steps (loop iterations, calls and the data "
                                "they handle)")


def too_big(what: str) -> TemplateTooCostly:
    return TemplateTooCostly(f"{what} is too large for a template (at most {MAX_VALUE:,} characters or items)")


def check_int_args(args, kwargs) -> None:
    for a in (*args, *kwargs.values()):
        if type(a) is int and abs(a) > MAX_VALUE:
            raise TemplateTooCostly(f"the number {a} is too large for a template argument (at most {MAX_VALUE:,})")


def check_widths(numbers) -> None:
    """`'%01000000000d' % 1`, `'{:>1000000000}'.format(1)`: refuse a huge width first."""
    if any(n and (len(n) > 7 or int(n) > MAX_VALUE) for n in numbers):
        raise too_big("a width in this format string")


_PERCENT, _NUMBER = re.compile(_PERCENT_SPEC), re.compile(r"\d+")


def percent_widths(fmt: str):
    for m in _PERCENT.finditer(fmt):
        yield from m.groups()


def format_widths(fmt: str):
    for _, _, spec, _ in string.Formatter().parse(fmt):
        yield from _NUMBER.findall(spec or "")


def check_int(x) -> None:
    if type(x) is int and x.bit_length() > MAX_INT_BITS:
        raise TemplateTooCostly(f"a number of more than {MAX_INT_BITS:,} bits is too large for a template")


def short(x) -> str:
    text = str(x)
    return text if len(text) <= 20 else f"{text[:8]}...({len(text)} digits)"


def bits(x) -> int:
    return abs(int(x)).bit_length() if isinstance(x, int) else 0


def bounded_join(chunks) -> str:
    """Jinja's concat (the output, `{% set %}` blocks, macro results) with a size limit."""
    out, total = [], 0
    for chunk in chunks:
        total += len(chunk)
        if total > MAX_OUTPUT:
            raise TemplateTooCostly(f"its output is longer than {MAX_OUTPUT:,} characters")
        out.append(chunk)
    return "".join(out)


def bounded_filter(f):
    def filter_(*args, **kwargs):
        check_int_args(args, kwargs)
        charge(1 + max(map(_size, args), default=0) // ITEMS_PER_STEP)
        result = f(*args, **kwargs)
        charge(_size(result) // ITEMS_PER_STEP)
        return result

    filter_.__dict__.update(getattr(f, "__dict__", {}))  # keeps Jinja's pass_context & co.
    filter_.__name__ = getattr(f, "__name__", "filter")
    return filter_


class BoundedFilters(dict):
    """Every filter, also one added after the environment is made, is bounded."""

    def __setitem__(self, name, f):
        super().__setitem__(name, bounded_filter(f))


class BoundedCodeGenerator(CodeGenerator):
    counted: set[int] | None = None  # id()s of loop iterables still to be written

    def visit_For(self, node, frame):
        # Each iteration of every loop is a step: the iterable is written as
        # `environment.bounded_iter(...)`. (A recursive loop's `loop(...)` calls are counted in
        # BoundedSandbox.call.)
        if not node.recursive:
            self.counted = (self.counted or set()) | {id(node.iter)}
        super().visit_For(node, frame)

    def visit(self, node, *args, **kwargs):
        if self.counted and id(node) in self.counted:
            self.counted.discard(id(node))
            self.write("environment.bounded_iter(")
            super().visit(node, *args, **kwargs)
            self.write(")")
            return None
        return super().visit(node, *args, **kwargs)

    def visit_Concat(self, node, frame):
        # `a ~ b`: Jinja joins without asking the sandbox; here its size is checked first.
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedTemplate(Template):
    def render(self, *args, **kwargs):
        token = _BUDGET.set(_Budget())
        try:
            return super().render(*args, **kwargs)
        finally:
            _BUDGET.reset(token)

DICT_ATTRIBUTES = frozenset(dir(dict))


class BoundedSandbox(ImmutableSandboxedEnvironment):
    code_generator_class = BoundedCodeGenerator
    template_class = BoundedTemplate
    intercepted_binops = frozenset(["+", "-", "*", "/", "//", "%", "**"])
    concat = staticmethod(bounded_join)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.globals.pop("lipsum", None)
        filters, self.filters = self.filters, BoundedFilters()
        for name, f in filters.items():
            self.filters[name] = f
        percent_format = filters["format"]

        def format_(value, *args, **kwargs):  # `'%0999999999d'|format(1)`
            check_widths(percent_widths(str(value)))
            return percent_format(value, *args, **kwargs)

        self.filters["format"] = format_

    def getattr(self, obj, attribute):
        # The sandbox tries getattr(obj, name) first and catches the AttributeError, for
        # every `task.x` of every prompt. A plain dict has no attributes beyond dir(dict),
        # so for any other name the item is what the sandbox would return.
        if type(obj) is dict and attribute not in DICT_ATTRIBUTES and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (Jinja's signature)
        check_int_args(args, kwargs)
        charge(MACRO_CALL_STEPS if isinstance(__obj, Macro) else 1)
        if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level
            args = (__self.bounded_iter(args[0]), *args[1:])
        result = super().call(__context, __obj, *args, **kwargs)
        charge(_size(result) // ITEMS_PER_STEP)
        return result

    def wrap_str_format(self, value):
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None

        def checked(*args, **kwargs):
            check_widths(format_widths(value.__self__))
            return wrapper(*args, **kwargs)

        return checked

    def bounded_iter(self, iterable):
        for item in iterable:
            charge(1)
            yield item

    def bounded_concat(self, items) -> str:
        parts = [str(x) for x in items]
        if sum(map(len, parts)) > MAX_VALUE:
            raise too_big("a string joined with '~'")
        charge(sum(map(len, parts)) // ITEMS_PER_STEP)
        return "".join(parts)

    def call_binop(self, context, operator, left, right):
        seqs = (str, list, tuple)
        if operator == "**":
            if isinstance(left, int) and isinstance(right, int) and right > 0 and bits(left) > 1 \
                    and bits(left) * right > MAX_INT_BITS:
                raise TemplateTooCostly(f"'{short(left)} ** {short(right)}' is too large for a template")
        elif operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, seqs) and isinstance(n, int) and len(seq) * n > MAX_VALUE:
                    raise too_big("a repeated string or list")
            if isinstance(left, int) and isinstance(right, int) and bits(left) + bits(right) > MAX_INT_BITS:
                raise TemplateTooCostly("the product is too large for a template")
        elif operator == "+":
            if isinstance(left, seqs) and isinstance(right, seqs) and len(left) + len(right) > MAX_VALUE:
                raise too_big("a joined string or list")
        elif operator == "%" and isinstance(left, str):
            check_widths(percent_widths(left))
            check_int_args(right if isinstance(right, tuple) else (right,), {})
        result = super().call_binop(context, operator, left, right)
        check_int(result)
        charge(_size(result) // ITEMS_PER_STEP)
        return result


# ------------------------------------------------------------------ names and files


class UndefinedIn(UndefinedError):
    """An undefined name, knowing the object it was looked for in (HC502 lists its fields)."""

    def __init__(self, obj, name, message=None):
        super().__init__(message)
        self.obj, self.name = obj, name


class UnsafeAccess(SecurityError):
    hint = "templates run sandboxed: attributes starting with '_' and methods that change a value are not available"

    def __init__(self, name, message=None):
        super().__init__(message)
        self.name = name


class LocatedUndefined(StrictUndefined):
    """StrictUndefined whose error knows the object it looked in and the name it looked for,
    so HC502 can say `task has no field 'deadline'` and list task's fields."""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The sandbox's unsafe access (`''.__class__`) is an Undefined that raises
        # SecurityError: it stays one (HC503), not an undefined name (HC502).
        if issubclass(self._undefined_exception, SecurityError):
            self._undefined_exception = partial(UnsafeAccess, self._undefined_name)
        else:
            self._undefined_exception = partial(UndefinedIn, self._undefined_obj, self._undefined_name)


class ProjectLoader(BaseLoader):
    """The project's `templates:` directory, read without following links (harnessc.workspace):
    `task.md.j2 -> /etc/passwd`, or `etc -> /etc` with `{% include 'etc/passwd' %}`, raise
    workspace.UnsafePath instead of reading /etc."""

    def __init__(self, root: str, templates: str):
        self.workspace, self.directory = Workspace(root), Path(root) / templates

    def get_source(self, environment, template):
        path = self.directory.joinpath(*split_template_path(template))  # refuses `..`
        try:
            source = self.workspace.read_text(path)
        except FileNotFoundError:
            raise TemplateNotFound(template) from None
        except UnicodeDecodeError as e:
            raise TemplateNotFound(f"{template} (not UTF-8: {e.reason})") from None
        mtime = _mtime(path)
        return source, str(path), lambda: _mtime(path) == mtime


def _mtime(path: Path) -> float | None:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return None


def environment(root: str, templates: str | None) -> BoundedSandbox:
    """The bounded sandbox prompts render in: the project's templates first, then harnessc's."""
    loaders: list[BaseLoader] = [ProjectLoader(root, templates)] if templates else []
    loaders.append(PackageLoader("harnessc", "templates"))
    return BoundedSandbox(loader=ChoiceLoader(loaders), undefined=LocatedUndefined, autoescape=False,
                          keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
