"""roadmap.md parser: golden cases, exact spans, round trips through format_roadmap, fuzzing.

Golden cases: each directory under fixtures/roadmap holds roadmap.md, expected.json (the
parsed roadmap, spans as "line:col-end_col") and expected.txt (the diagnostics as
render_text prints them). HARNESSC_UPDATE_GOLDEN=1 rewrites the expected files.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessc.vocab import LADDER_ENDS, MIN_RESOURCE, MUTATIONS, RAY_RESERVED_RESOURCES
from harnessc.compiler.ir import Complexity, FailureStrategy, Priority, Roadmap, Task, parse_duration
from harnessc.compiler.roadmap import KEY_ALIASES, PROPERTY_KEYS, format_roadmap, parse_roadmap
from harnessc.diagnostics import CompileError, Diagnostics, Span, render_text

from conftest import FIXTURES, REPO, check_golden

CASES = sorted(p for p in (FIXTURES / "roadmap").iterdir() if p.is_dir())
PATH = "roadmap.md"
SPAN_FIELDS = {"line", "col", "source"}


def parse(text: str) -> tuple[Roadmap, Diagnostics]:
    diags = Diagnostics()
    return parse_roadmap(text, PATH, diags), diags


def fmt_span(s: Span) -> str:
    assert s.path == PATH and s.end_line == s.line
    return f"{s.line}:{s.col}-{s.end_col}"


def fields(t: Task, mode: str = "python") -> dict:
    """A task's fields without spans (enum members as words in json mode)."""
    d = {k: v for k, v in dataclasses.asdict(t).items() if k not in SPAN_FIELDS}
    if mode == "json":
        d = {k: getattr(v, "value", v) for k, v in d.items()}
    return d


def assert_typed(t: Task) -> None:
    """What validation would guarantee: every value has its declared type."""
    for key in ("depends_on", "agent", "accept", "context", "tags", "recovery"):
        assert isinstance(getattr(t, key), tuple) and all(isinstance(x, str) for x in getattr(t, key)), key
    for key in ("contract", "model", "completion_promise", "success", "phase"):
        assert getattr(t, key) is None or isinstance(getattr(t, key), str), key
    for key, enum in (("complexity", Complexity), ("priority", Priority), ("on_failure", FailureStrategy)):
        assert getattr(t, key) is None or isinstance(getattr(t, key), enum), key
    for key in ("stuck_after", "max_retries"):
        assert getattr(t, key) is None or type(getattr(t, key)) is int, key
    assert t.max_iterations is None or t.max_iterations == "unlimited" or type(t.max_iterations) is int
    assert t.max_time is None or type(t.max_time) in (int, float)
    assert t.budget is None or type(t.budget) is float
    assert t.progress_threshold is None or (type(t.progress_threshold) is float and 0 <= t.progress_threshold <= 1)
    assert t.resources is None or (t.resources and all(
        isinstance(k, str) and type(v) in (int, float) and v > 0 for k, v in t.resources.items()))
    assert isinstance(t.goal, str) and isinstance(t.done, bool)


def task_json(t: Task) -> dict:
    """A task as compact JSON: fields that differ from the defaults, then the spans."""
    d = fields(t, "json")
    out = {k: v for k, v in d.items() if k in ("id", "title") or not (
        v is None or v is False or v == () or v == "")}
    out["span"] = fmt_span(t.span)
    out["spans"] = {k: fmt_span(s) for k, s in t.spans.items()}
    out["value_spans"] = {k: [fmt_span(s) for s in v] for k, v in t.value_spans.items()}
    return out


def ir(roadmap: Roadmap) -> dict:
    """The roadmap without spans, for round-trip comparisons."""
    return {
        "title": roadmap.title,
        "overview": roadmap.overview,
        "tasks": [fields(t) for t in roadmap.tasks],
    }


# ------------------------------------------------------------------ golden cases


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(case: Path) -> None:
    text = (case / "roadmap.md").read_text(encoding="utf-8")
    roadmap, diags = parse(text)
    doc = {
        "title": roadmap.title,
        "overview": roadmap.overview,
        "tasks": [task_json(t) for t in roadmap.tasks],
    }
    check_golden(case / "expected.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    check_golden(case / "expected.txt", render_text(diags.sorted(), {PATH: text}))
    # tasks are built without validation: every value must still have its declared type
    for t in roadmap.tasks:
        assert_typed(t)


def test_golden_cases_cover_every_roadmap_code() -> None:
    seen = "".join((c / "expected.txt").read_text() for c in CASES)
    for code in ("HC101", "HC102", "HC103", "HC104", "HC105", "HC106", "HC107", "HC108"):
        assert f"[{code}]" in seen, code


def test_seed_roadmaps_keep_their_meaning() -> None:
    text = (FIXTURES / "roadmap" / "seed-appendix-a" / "roadmap.md").read_text()
    roadmap, diags = parse(text)
    assert not diags.items
    auth, perf = roadmap.tasks
    assert auth.agent == ("codex", "gemini") and perf.agent == ("auto",)
    assert auth.max_time == 14400 and perf.max_iterations == "unlimited"
    assert auth.success == "All auth tests pass, tokens validate correctly"
    assert perf.success == "P95 latency < 100ms"
    assert auth.goal.startswith("Goal: Create a complete JWT authentication system including:\n1.")
    assert auth.goal.endswith("Output `<promise>AUTH_COMPLETE</promise>` when all tests pass.")
    roadmap, diags = parse((FIXTURES / "roadmap" / "seed-8.2" / "roadmap.md").read_text())
    assert not diags.items and roadmap.title is None
    (task,) = roadmap.tasks
    assert (task.max_time, task.max_iterations, task.agent) == (14400, 200, ("codex", "gemini"))


# ------------------------------------------------------------------ details


def test_a_lone_carriage_return_in_a_title_is_hc108_where_lines_end_in_newlines() -> None:
    """The golden case title-controls reads its file with newline translation: a lone CR is
    checked here. It cuts the title and plants the rest as a line of its own; a file whose
    lines all end in CR (classic Mac) or CRLF is no mistake."""
    roadmap, diags = parse("## Tasks\n\n- [ ] **a**: Carriage\r- [ ] **b**: planted\n  - accept: true\n")
    assert [(d.code, d.span.line, d.span.col) for d in diags.items] == [("HC108", 3, 22)]
    assert "U+000D (CR) ends the line of task 'a'" in diags.items[0].message
    for text in ("## Tasks\r\r- [ ] **a**: Old\r  - accept: true\r",
                 "## Tasks\r\n\r\n- [ ] **a**: Windows\r\n  - accept: true\r\n"):
        roadmap, diags = parse(text)
        assert not diags.items and [t.title for t in roadmap.tasks] in (["Old"], ["Windows"])



def test_value_spans_point_at_each_list_item() -> None:
    text = "## Tasks\n\n- [ ] **auth-001**: Auth\n  - depends_on: setup-001, auht-001\n"
    (task,) = parse(text)[0].tasks
    assert task.depends_on == ("setup-001", "auht-001")
    first, second = task.value_spans["depends_on"]
    assert (second.line, second.col, second.end_col) == (4, 28, 36)
    assert text.splitlines()[3][second.col - 1 : second.end_col - 1] == "auht-001"
    assert text.splitlines()[3][first.col - 1 : first.end_col - 1] == "setup-001"
    assert (task.spans["depends_on"].col, task.spans["depends_on"].end_col) == (5, 15)
    assert (task.span.line, task.span.col, task.span.end_col) == (3, 9, 17)


def test_alias_span_covers_the_key_as_written() -> None:
    (task,) = parse("## Tasks\n- [ ] **a**: A\n  - cli: auto\n")[0].tasks
    assert task.agent == ("auto",)
    assert (task.spans["agent"].col, task.spans["agent"].end_col) == (5, 8)


def test_crlf_bom_and_lf_agree() -> None:
    text = (FIXTURES / "roadmap" / "design-example" / "roadmap.md").read_text()
    want = ir(parse(text)[0])
    assert ir(parse(text.replace("\n", "\r\n"))[0]) == want
    assert ir(parse("\ufeff" + text)[0]) == want


def test_goal_is_verbatim_minus_common_indentation() -> None:
    text = "## Tasks\n- [ ] **a**: A\n\n    one\n      two  \n\n\n    ```\n    code\n    ```\n\n"
    (task,) = parse(text)[0].tasks
    assert task.goal == "one\n  two  \n\n\n```\ncode\n```"


def test_fail_fast_collector_stops_at_the_first_error() -> None:
    with pytest.raises(CompileError) as e:
        parse_roadmap("## Tasks\n- [ ] **a**: A\n  - max_iteration: 5\n", PATH, Diagnostics(fail_fast=True))
    assert e.value.diagnostic.code == "HC103"


def test_unknown_key_hint_names_the_closest_key() -> None:
    _, diags = parse("## Tasks\n- [ ] **a**: A\n  - max_iteration: 5\n")
    (d,) = diags.items
    assert d.code == "HC103" and d.message == "unknown key 'max_iteration'"
    assert d.hint == "did you mean 'max_iterations'?"
    assert (d.span.line, d.span.col, d.span.end_col) == (3, 5, 18)


def test_the_parser_loads_on_first_use_and_never_imports_lark() -> None:
    code = (
        "import sys, harnessc.compiler.roadmap as r\n"
        "print('harnessc.grammar.lark_parsers' in sys.modules)\n"
        "r.parse_roadmap('## Tasks\\n- [ ] **a**: A\\n', 'roadmap.md', r.Diagnostics())\n"
        "print('harnessc.grammar.lark_parsers' in sys.modules, 'lark' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.split() == ["False", "True", "False"], out.stderr


def test_generated_parsers_are_up_to_date() -> None:
    """lark_parsers.py was made by `python -m harnessc.grammar.generate` from the grammars as they are."""
    from harnessc.grammar import generate

    assert generate.up_to_date(), "run: python -m harnessc.grammar.generate"


def test_generated_runtime_is_what_generate_writes() -> None:
    """The runtime part of lark_parsers.py (all but the tables, whose state numbers vary) is
    the generator's text: nobody edited it by hand, and its logger is the quiet one that
    spares lint the logging import."""
    from harnessc.grammar import generate

    def runtime(text: str) -> str:
        return text[: text.index("GRAMMAR_SHA256 = ")]

    committed = runtime(generate.OUT.read_text(encoding="utf-8"))
    assert committed == runtime(generate.generate()), "run: python -m harnessc.grammar.generate"
    assert "import logging" not in committed and "logger = _QuietLogger()" in committed
    assert committed.count("from __future__ import annotations") == 1


def test_generated_parsers_never_unpickle(tmp_path: Path) -> None:
    """The generated runtime keeps Lark's code for cached parsers; it refuses to unpickle."""
    import pickle

    from harnessc.grammar import lark_parsers

    path = tmp_path / "parser.cache"
    path.write_bytes(pickle.dumps({"data": {}, "memo": {}}))
    with path.open("rb") as f, pytest.raises(RuntimeError, match="never from pickles"):
        lark_parsers.Lark.load(f)


def test_generated_parsers_parse_as_lark_does() -> None:
    """The generated tables and a Lark parser built from roadmap.lark give the same trees."""
    import lark

    from harnessc.compiler import roadmap
    from harnessc.package_data import read_text

    fresh = lark.Lark(read_text("grammar", "roadmap.lark"), parser="lalr", lexer="basic")
    for case in CASES:
        text = (case / "roadmap.md").read_text("utf-8")
        ours = roadmap._parse_tree(roadmap._Source(text))
        interactive = fresh.parse_interactive()
        for tok in roadmap._Source(text).tokens():
            interactive.feed_token(lark.Token(tok.type, tok.value, line=tok.line))
        theirs = interactive.feed_eof()
        assert shape(ours) == shape(theirs), case.name


def shape(node) -> tuple:
    """A parse tree as nested tuples (lark's own trees name rules with Token('RULE', ...))."""
    if hasattr(node, "children"):
        return (str(node.data), [shape(c) for c in node.children])
    return (node.type, str(node), node.line)


def test_large_roadmap_parses_quickly() -> None:
    lines = ["# Big", "", "## Tasks", ""]
    for i in range(5000):
        lines += [
            f"- [ ] **t-{i}**: Task {i}", f"  - depends_on: t-{max(i - 1, 0)}",
            "  - agent: codex, gemini", "  - max_time: 1h30m", "  - accept: pytest -q", "",
            "  Goal text.", "  1. step", "",
        ]
    parse("\n".join(lines[:40]))  # build the parser outside the timing
    start = time.process_time()
    roadmap, diags = parse("\n".join(lines))
    elapsed = time.process_time() - start
    assert len(roadmap.tasks) == 5000 and not diags.items
    assert elapsed < 5, f"5000 tasks took {elapsed:.2f}s"  # about 0.3 s on a slow machine


def test_a_long_property_list_is_diagnosed_in_linear_work(tmp_path: Path, monkeypatch) -> None:
    """4,000 context paths on one line, none found: 4,000 warnings, each at its own path, with
    the line split a few times in all (each diagnostic re-read the whole list: 19 s) and a
    report whose size grows with the number of paths, not with it times the line's length."""
    from harnessc.compiler import lint_project, roadmap as roadmap_mod

    n = 4000
    names = [f"src/f{i}.py" for i in range(n)]
    line = "  - context: " + ", ".join(names)
    (tmp_path / "roadmap.md").write_text(f"# x\n\n## Tasks\n\n- [ ] **a**: A\n{line}\n  - accept: true\n")
    split_chars = 0
    real_split = roadmap_mod._split

    def counting_split(value: str, col: int):
        nonlocal split_chars
        split_chars += len(value)
        return real_split(value, col)

    monkeypatch.setattr(roadmap_mod, "_split", counting_split)
    project = lint_project(tmp_path)
    found = [d for d in project.diags.sorted() if d.code == "HC406"]
    assert len(found) == n
    assert [line[d.span.col - 1:d.span.end_col - 1] for d in found] == sorted(names, key=line.index)
    assert split_chars <= 4 * len(line)
    report = render_text(project.diags.sorted(), project.sources)
    assert len(report) < n * 600
    assert f"'{names[2000]}' matches no file\n 6 | ..." in report  # the line shown around the caret


# ------------------------------------------------------------------ round trips

_LINE_CHARS = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))
# one line of free text: no line breaks, no surrounding blanks
line_text = st.text(_LINE_CHARS, min_size=1, max_size=30).map(str.strip).filter(bool)
ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,12}", fullmatch=True)
names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_./:@+-]{0,15}", fullmatch=True)
heading_text = line_text.filter(lambda s: not s.endswith("#"))
paths = st.from_regex(r"[A-Za-z0-9_./*?-]{1,12}(\{[a-z]{1,3},[a-z]{1,3}\})?", fullmatch=True)
durations = st.integers(1, 10**7) | st.integers(1, 10**6).map(lambda n: parse_duration(f"{n}ms"))
goal_line = st.one_of(
    st.just(""),
    line_text,
    st.sampled_from([
        "Output `<promise>DONE</promise>` when done.", "1. a step", "- [ ] a sub-item",
        "### a heading in the goal", "```", "~~~", "**bold**: text", "- note: not a property",
        "# x", "<progress>...</progress>",
    ]),
    line_text.map(lambda s: "    " + s),
)


_goal_first = line_text.filter(lambda s: not s.startswith(("-", "*", "+")))
_goal_rest = st.lists(goal_line, max_size=6)


@st.composite
def goals(draw) -> str:
    first = draw(_goal_first)
    rest = draw(_goal_rest)
    while rest and not rest[-1]:
        rest.pop()
    return "\n".join([first, *rest])


# a recovery ladder: distinct steps in any order, at most one end and it last
ladders = st.tuples(st.lists(st.sampled_from((*MUTATIONS, "escalate")), unique=True, max_size=6),
                    st.sampled_from(((), *((e,) for e in LADDER_ENDS)))).map(lambda t: (*t[0], *t[1]))


def _opt(strategy):
    return st.none() | strategy


# A task's properties, each strategy built once: built afresh for every task drawn, they were
# most of the round-trip tests' time (hypothesis validates every new strategy).
_TASK_FIELDS = dict(
    title=line_text, done=st.booleans(),
    depends_on=st.lists(ids, max_size=3).map(tuple),
    contract=_opt(names),
    agent=st.just(("auto",)) | st.lists(names.filter(lambda n: n != "auto"), max_size=3).map(tuple),
    model=_opt(names),
    complexity=_opt(st.sampled_from(Complexity)), priority=_opt(st.sampled_from(Priority)),
    max_iterations=_opt(st.integers(1, 10**6) | st.just("unlimited")),
    max_time=_opt(durations), stuck_after=_opt(st.integers(1, 999)),
    progress_threshold=_opt(st.floats(0, 1, allow_nan=False)),
    recovery=st.just(()) | ladders,
    completion_promise=_opt(st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)),
    success=_opt(line_text), accept=st.lists(line_text, max_size=3).map(tuple),
    context=st.lists(paths, max_size=3).map(tuple), max_retries=_opt(st.integers(0, 99)),
    on_failure=_opt(st.sampled_from(FailureStrategy)),
    budget=_opt(st.floats(0, 1e6, allow_nan=False, allow_infinity=False)),
    tags=st.lists(names, max_size=3).map(tuple),
    resources=_opt(st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:/-]{0,12}", fullmatch=True)
                                   .filter(lambda n: n not in RAY_RESERVED_RESOURCES),
                                   st.integers(1, 10**6) | st.floats(MIN_RESOURCE, 1e6), min_size=1, max_size=3)),
    goal=st.just("") | goals(),
)


def task(draw, id_: str, phase: str | None) -> Task:
    """One task of a roadmap being drawn (`draw`: the roadmap's)."""
    return Task(id=id_, phase=phase, **{key: draw(strategy) for key, strategy in _TASK_FIELDS.items()})


@st.composite
def roadmaps(draw) -> Roadmap:
    task_ids = draw(st.lists(ids, max_size=8, unique=True))
    phases = [None] + draw(st.lists(heading_text, max_size=3))
    # phases only move forward: Markdown cannot go back to "no phase"
    cuts = sorted(draw(st.lists(st.integers(0, len(task_ids)), min_size=len(phases) - 1,
                                max_size=len(phases) - 1)))
    bounds = [0, *cuts, len(task_ids)]
    items = [
        task(draw, task_ids[j], phase)
        for i, phase in enumerate(phases)
        for j in range(bounds[i], bounds[i + 1])
    ]
    overview = draw(st.lists(
        st.from_regex(r"[A-Za-z][A-Za-z0-9 ,.()'<>:]{0,30}", fullmatch=True) | st.just(""),
        max_size=4,
    ))
    return Roadmap(
        path=PATH, title=draw(st.none() | heading_text),
        overview="\n".join(overview).strip(), tasks=items,
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(roadmaps())
def test_format_then_parse_gives_the_same_ir(roadmap: Roadmap) -> None:
    text = format_roadmap(roadmap)
    back, diags = parse(text)
    assert not diags.items, render_text(diags.sorted(), {PATH: text}) + text
    assert ir(back) == ir(roadmap), text
    assert format_roadmap(back) == text  # canonical: formatting is a fixed point


def test_every_property_is_formatted() -> None:
    task = Task(id="a", title="A",  depends_on=("b",), contract="c", agent=("x",),
                model="m", complexity="epic", priority="low", max_iterations=3, max_time=5400,
                stuck_after=2, progress_threshold=0.05, recovery=("negative", "fail"), completion_promise="OK", success="s", accept=("x", "y"),
                context=("src/**",), max_retries=0, on_failure="fail", budget=1e-7, tags=("t",), git="commit", isolation="worktree",
                context_tokens=500, approaches=3, select="best", score="python bench.py", min_score=-0.5,
                resources={"gpu_box": 1, "node:10.0.0.5": 0.01}, min_passed="base",
                retry_on=("contract", "accept"), dont_retry=("missing_file",), start_level=2,
                protect=("docs/**",), allow_edit=("tests/test_a.py",), write_scope=("src/**", "tests/"), review=True, split=True)
    text = format_roadmap(Roadmap(path=PATH, tasks=[task]))
    assert "  - review: true\n" in text and "  - split: true\n" in text
    assert "  - max_time: 1h30m\n" in text and "  - budget: 0.0000001\n" in text
    assert "  - progress_threshold: 0.05\n" in text and "  - recovery: negative, fail\n" in text
    assert "  - min_score: -0.5\n" in text and "  - approaches: 3\n" in text
    assert "  - resources: {gpu_box: 1, node:10.0.0.5: 0.01}\n" in text
    assert "  - retry_on: contract, accept\n" in text and "  - start_level: 2\n" in text
    written = {ln.split(":")[0].strip(" -") for ln in text.splitlines() if ln.startswith("  - ")}
    assert written == set(PROPERTY_KEYS)
    assert not set(KEY_ALIASES) & written


# ------------------------------------------------------------------ where the property block ends


def _loosen(text: str, blanks: list[bool]) -> str:
    """The roadmap with a blank line before some property lines (one flag per property line)."""
    out, flags, in_block = [], iter(blanks), False
    for ln in text.splitlines():
        in_block = ln.startswith(("- [", "  - ")) and (in_block or ln.startswith("- ["))
        if in_block and ln.startswith("  - ") and next(flags, False):
            out.append("")
        out.append(ln)
    return "\n".join(out) + "\n"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(roadmaps(), st.lists(st.booleans(), max_size=60))
def test_blank_lines_between_properties_keep_them_properties(roadmap: Roadmap, blanks: list[bool]) -> None:
    # Markdown's loose lists: a blank line between items does not end the list
    text = _loosen(format_roadmap(roadmap), blanks)
    back, diags = parse(text)
    assert not diags.items, render_text(diags.sorted(), {PATH: text}) + text
    assert ir(back) == ir(roadmap), text


heading_words = st.sampled_from(["Goal", "Note", "Context", "Success", "Status", "Tags", "Agent", "Priority",
                                 "Output", "Steps", "Budget", "Model"]) | st.from_regex(r"[A-Z][a-z]{1,10}", fullmatch=True)
labelled_line = st.builds(lambda w, t: f"{w}: {t}", heading_words, line_text)


@settings(max_examples=100, deadline=None)
@given(st.lists(labelled_line, min_size=1, max_size=5), st.booleans())
def test_labelled_goal_lines_after_the_properties_stay_goal_text(goal: list[str], blank: bool) -> None:
    # "Goal: Create ...", "Context: ...": goal text, whether or not a blank line comes first
    text = "## Tasks\n\n- [ ] **a**: A\n  - agent: codex\n" + ("\n" if blank else "")
    text += "".join(f"  {ln}\n" for ln in goal)
    roadmap, diags = parse(text)
    assert not diags.items, render_text(diags.sorted(), {PATH: text})
    (task,) = roadmap.tasks
    assert task.agent == ("codex",) and task.goal == "\n".join(goal)


@pytest.mark.parametrize("line, key", [
    ("  - depends on: b", "depends_on"), ("  - depends_on b", "depends_on"), ("  depends_on: b", "depends_on"),
    ("- depends_on: b", "depends_on"), ("  - Depends_on: b", None), ("  contrct: b", None),
])
def test_a_misformed_property_line_is_an_error_and_the_block_goes_on(line: str, key: str | None) -> None:
    text = f"## Tasks\n\n- [ ] **a**: A\n{line}\n  - agent: codex\n\n  Goal.\n- [ ] **b**: B\n"
    roadmap, diags = parse(text)
    (error,) = diags.errors
    assert error.span.line == 4 and error.hint and error.code in ("HC102", "HC103")
    task = roadmap.tasks[0]
    assert task.agent == ("codex",) and task.goal == "Goal."
    assert task.depends_on == (("b",) if key else ())


# ------------------------------------------------------------------ fuzzing

ROADMAP_LINES = [
    "# Title", "#", "## Tasks", "## tasks ##", "## Notes", "### Phase 1", "###", "#### deep",
    "- [ ] **a**: A", "- [x] **b**: B", "- [ ] **a**: again", "- [ ] c: not bold", "- [] **d**:",
    "- **e**: no box", "-[ ] **f**: x", "- [ ] ****: x", "- [ ] **g** no colon", "* [ ] **h**: H",
    "  - depends_on: a, b, , c d", "  - after: a", "  - max_time: 4 hours", "  - timeout: 4h",
    "  - cli: auto, codex", "  - max_iterations: unlimited", "  - max_iteration: 5",
    "  - budget: $-1", "  - context: src/{a,b}/*.py", "  - accept: pytest", "  - success:",
    "  - complexity: Epic", "  - stuck_after: 99999999999999999999999", "\t- agent: codex",
    "  goal text", "    deeper", "\tTabbed goal", "```", "~~~", "   ```python", "", "   ", "prose",
    "  - note: x", "- [ ] **" + "x" * 50, "- [ ] **a**: " + " " * 40 + "#",
    "  - depends on: a", "  - depends_on a", "  contract: x", "- contract: x", "  contrct: x",
    "  Goal: text", "- depnds on:", "  - max iterations:", "\tdepends_on: a",
]


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises(text: str) -> None:
    roadmap, diags = parse(text)
    check_spans(text, diags)
    assert all(t.id for t in roadmap.tasks)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(ROADMAP_LINES) | st.text(max_size=20), max_size=40),
       st.sampled_from(["\n", "\r\n"]))
def test_roadmap_like_lines_never_raise(lines: list[str], newline: str) -> None:
    text = newline.join(lines)
    roadmap, diags = parse(text)
    check_spans(text, diags)
    ids_ = [t.id for t in roadmap.tasks]
    assert len(ids_) == len(set(ids_))


def check_spans(text: str, diags: Diagnostics) -> None:
    """Every diagnostic points inside the file (a line that exists, or 1:1)."""
    n = max(1, len(text.lstrip("\ufeff").splitlines()))
    for d in diags.items:
        assert d.code.startswith("HC10") and d.span.path == PATH
        assert not d.message.startswith("cannot parse"), d  # the lexer or grammar failed
        assert 1 <= d.span.line <= n and 1 <= d.span.col < d.span.end_col, d
    render_text(diags.sorted(), {PATH: text})


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \t\n\r\x0b\x0c\x1c\x85\u2028")), max_size=60),
       st.integers(1, 8))
def test_lines_are_read_a_chunk_at_a_time_as_splitlines_cuts_them(text, chunk) -> None:
    from harnessc.compiler import roadmap

    saved, roadmap._CHUNK = roadmap._CHUNK, chunk
    try:
        assert list(roadmap._iter_lines(text)) == text.splitlines()
    finally:
        roadmap._CHUNK = saved


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden_cases_parse_the_same_in_small_chunks(case: Path, monkeypatch) -> None:
    from harnessc.compiler import roadmap

    text = (case / "roadmap.md").read_text(encoding="utf-8")
    whole, whole_diags = parse(text)
    monkeypatch.setattr(roadmap, "_CHUNK", 7)
    chunked, chunked_diags = parse(text)
    assert [task_json(t) for t in chunked.tasks] == [task_json(t) for t in whole.tasks]
    assert (chunked.title, chunked.overview) == (whole.title, whole.overview)
    assert chunked_diags.sorted() == whole_diags.sorted()
