"""Fuzz the compiler's front end: no input makes lint raise; every problem is a located diagnostic.

Arbitrary text, raw bytes, and YAML-ish / roadmap-ish text built from the real keys, flow
syntax, anchors, tags and odd indentation are written as contracts.yaml, harness.yaml,
roadmap.md (and a user template) into a temp project; `lint_project` must return with only
diagnostics, each with a known code, a line and col >= 1 and a path that is a spec file or a
template. Plus the resource limits: a 10 MB file, an alias bomb and deep nesting.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harnessc.compiler import lint_project
from harnessc.diagnostics import CODES

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "specs" / "demo"
SPEC_FILES = ("roadmap.md", "contracts.yaml", "harness.yaml")

GOOD_ROADMAP = "# P\n\n## Tasks\n\n- [ ] **a-1**: Do a\n  - completion_promise: DONE\n"
GOOD_FILES = {"roadmap.md": GOOD_ROADMAP}

FUZZ = settings(
    max_examples=int(os.environ.get("HARNESSC_FUZZ_EXAMPLES", "60")),
    deadline=None,
    database=None,  # no replay of other runs' examples: the found crashes are explicit cases below
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _path_ok(path: str) -> bool:
    return path in SPEC_FILES or path.endswith(".j2") or "template" in path


def lint_files(files: dict[str, str | bytes]):
    """Write `files` into a fresh temp project, lint it, check every diagnostic; the project."""
    with tempfile.TemporaryDirectory(prefix="hc-fuzz-") as tmp:
        root = Path(tmp)
        for name, content in files.items():
            p = root / name
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content, encoding="utf-8", errors="surrogatepass")
        project = lint_project(root)
    for d in project.diags.items:
        assert d.code in CODES, d
        assert d.severity in ("error", "warning", "note"), d
        assert isinstance(d.span.line, int) and d.span.line >= 1, d
        assert isinstance(d.span.col, int) and d.span.col >= 1, d
        assert _path_ok(d.span.path), d
        assert isinstance(d.message, str) and d.message, d
    return project


def codes(project) -> set[str]:
    return {d.code for d in project.diags.items}


# ------------------------------------------------------------------ strategies

YAML_KEYS = [
    # contracts.yaml
    "contracts", "output", "type", "description", "rules", "example", "default", "enum", "items",
    "fields", "schema", "required", "extends", "output_rules", "accept", "run", "timeout",
    "allOf", "anyOf", "oneOf", "not", "if", "patternProperties", "dependencies", "properties",
    "constraints", "max_total_tokens", "on_failure", "max_retries", "tags", "version", "id",
    # harness.yaml
    "agents", "provider", "model", "price", "input", "routing", "default", "by_complexity",
    "escalation", "budget", "max_cost_usd", "defaults", "retry_delays", "max_time",
    "concurrency", "templates", "latency", "invalid_first", "command", "env",
    # noise
    "x", "lead_score", "", "a b", "0", "true", "null", "~", "é", "key:", "-",
]
YAML_SCALARS = [
    "str", "int", "float", "bool", "list", "dict", "any", "simulate", "anthropic", "retry", "fallback",
    "1", "-1", "0x1F", "1e309", "-.inf", ".nan", "1_000", "2024-01-01", "2024-01-01T00:00:00Z", "yes",
    "null", "~", "true", "''", '""', "'it''s'", '"\\u0000"', '"\\x"', "value >= 0", '"len(value) > 0"',
    "'value ** 99'", "'matches(value, \"(a+)+$\")'", "'unique(value)'", "\"output.a > output.b\"",
    "'(' ", "30m", "4h", "1h30m", "-5s", "|", ">-", "&a x", "*a", "!!python/object:os.system",
    "!tag x", "!!str 1", "!!binary aGk=", "? x", "[", "]", "{", "}", "[1, [2, [3]]]", "{a: 1, b: [x]}",
    "{a: 1, a: 2}", "[*a]", "'unterminated", '"unterminated', "#comment", "@x", "`x`", "%x", "\\t",
    "\u00a0", "\ufeff", "\u2028", "x" * 300,
]


@st.composite
def yamlish(draw) -> str:
    """Lines of YAML-ish text: keys, values, list items, flow collections, anchors, tags, junk."""
    lines = []
    for _ in range(draw(st.integers(1, 25))):
        indent = " " * draw(st.sampled_from([0, 0, 2, 2, 4, 4, 6, 8, 1, 3]))
        if draw(st.integers(0, 30)) == 0:
            indent = "\t" + indent
        kind = draw(st.integers(0, 9))
        key = draw(st.sampled_from(YAML_KEYS) | st.text(max_size=6))
        value = draw(st.sampled_from(YAML_SCALARS) | st.text(max_size=10))
        if kind <= 3:
            lines.append(f"{indent}{key}: {value}")
        elif kind == 4:
            lines.append(f"{indent}{key}:")
        elif kind == 5:
            lines.append(f"{indent}- {value}")
        elif kind == 6:
            lines.append(f"{indent}- {key}: {value}")
        elif kind == 7:
            items = draw(st.lists(st.sampled_from(YAML_SCALARS), max_size=4))
            flow = draw(st.sampled_from(["[{}]", "{{{}}}"]))
            lines.append(f"{indent}{key}: " + flow.format(", ".join(items)))
        elif kind == 8:
            lines.append(draw(st.sampled_from(["---", "...", "%YAML 1.1", "%TAG ! tag:x,2000:", "# c", "", "? k", ": v"])))
        else:
            lines.append(indent + draw(st.text(max_size=20)))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n"]))


ROADMAP_KEYS = [
    "depends_on", "after", "contract", "agent", "cli", "model", "complexity", "priority",
    "max_iterations", "max_time", "timeout", "stuck_after", "progress_threshold", "recovery",
    "completion_promise", "success",
    "accept", "context", "max_retries", "on_failure", "budget", "tags", "Depends_On", "bogus", "",
]
ROADMAP_VALUES = [
    "a-1", "a-1, a-2", "a-1,,", "b", "lead_score", "code_change", "nope", "rehearsal", "auto",
    "trivial", "epic", "high", "unlimited", "0", "-1", "99999999999999999999", "30m", "1h30m", "4x",
    "$1.50", "$", "pytest -q", "'unclosed", "\"", "data/*.json", "../etc/passwd", "/abs", "~/x",
    "**/*", "x, y, z", "DONE", "bad word", "fallback", "", " ", "é", "\u0000", "[[x]]",
    "0.2", "1.5", "20%", "rephrase, escalate, human", "human, fail", "negative, negative",
]
ROADMAP_LINES = [
    "## Tasks", "## Tasks ##", "# Title", "### Phase 1: Start", "####### too deep", "## Other",
    "```", "~~~", "```python", "Goal: do it", "  Goal: do it", "  more goal text", "", "---",
    "- [ ] **a-1**: First", "- [x] **a-2**: Second", "- [X] **a-1**: Duplicate", "- [ ] **-bad**: Bad id",
    "- [ ] **a-3**:", "- [ ] a-4: no bold", "- [ ]**a-5**: tight", "-[ ] **a-6**: tighter",
    "* [ ] **a-7**: star", "- [?] **a-8**: odd box", "- **a-9**: no box", "- [ ] **",
    "- [ ] [link](x)", "  * key: value", "    - nested: deeper", "\t- tab: indent", "> quote",
]


@st.composite
def roadmapish(draw) -> str:
    lines = []
    if draw(st.booleans()):
        lines.append("## Tasks")
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.integers(0, 5))
        if kind <= 1:
            lines.append(draw(st.sampled_from(ROADMAP_LINES)))
        elif kind <= 3:
            bullet = draw(st.sampled_from(["  - ", "  - ", "  * ", "    - ", "\t- ", "- ", "   + "]))
            key = draw(st.sampled_from(ROADMAP_KEYS) | st.text(max_size=8))
            value = draw(st.sampled_from(ROADMAP_VALUES) | st.text(max_size=15))
            lines.append(f"{bullet}{key}: {value}")
        elif kind == 4:
            tid = draw(st.sampled_from(["a-1", "a-2", "b.3", "c_4", "-x", "x y", "é", "a" * 80]) | st.text(max_size=6))
            box = draw(st.sampled_from(["[ ]", "[x]", "[X]", "[]", "[  ]", ""]))
            lines.append(f"- {box} **{tid}**: " + draw(st.text(max_size=15)))
        else:
            lines.append(draw(st.text(max_size=30)))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n", "\r"]))


# ------------------------------------------------------------------ arbitrary input never raises


@pytest.mark.parametrize("name", SPEC_FILES)
@FUZZ
@given(text=st.text(max_size=400))
@example(text="")
@example(text="\ufeff## Tasks\n- [ ] **a**: b\n")
@example(text="\x00\x01\x02")
def test_arbitrary_text_never_raises(name, text):
    lint_files({**GOOD_FILES, name: text})


@pytest.mark.parametrize("name", SPEC_FILES)
@settings(FUZZ, max_examples=max(10, FUZZ.max_examples // 3))
@given(data=st.binary(max_size=200))
@example(data=b"\xff\xfe## Tasks\n")
@example(data=b"contracts:\n  x: \xc3\x28\n")
def test_arbitrary_bytes_never_raise(name, data):
    project = lint_files({**GOOD_FILES, name: data})
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        assert "HC003" in codes(project)


@pytest.mark.parametrize("name", ["contracts.yaml", "harness.yaml"])
@FUZZ
@given(text=yamlish())
@example(text="contracts:\n  x:\n    output:\n      a: {type: int, rules: ['value >']}\n")
@example(text="contracts:\n  x:\n    output: &o {a: 1}\n  y:\n    output: *o\n")
@example(text="agents:\n  a: {provider: simulate}\nrouting: {default: b}\ntemplates: ../x\n")
@example(text="contracts:\n  x:\n    extends: y\n  y:\n    extends: x\n")
@example(text="contracts:\n  ? [a, b]\n  : 1\n")
@example(text="contracts:\n  x:\n    output:\n      a: {type: list, items: {type: dict, fields: {b: {type: int, rules: ['value > 0'], example: 0}}}}\n")
def test_yamlish_never_raises(name, text):
    lint_files({**GOOD_FILES, name: text})


@FUZZ
@given(text=roadmapish())
@example(text="## Tasks\n- [ ] **a**: x\n  - depends_on: b\n- [ ] **b**: y\n  - depends_on: a\n")
@example(text="## Tasks\n- [ ] **a**: x\n  - depends_on: a\n  - context: ../../x\n")
@example(text="## Tasks\n```\n- [ ] **a**: in a fence\n")
@example(text="## Tasks\n- [ ] **a-1**: First\n  - complexity: \n  - priority:\n  - on_failure: \n")
def test_roadmapish_never_raises(text):
    lint_files({"roadmap.md": text})


@settings(FUZZ, max_examples=max(10, FUZZ.max_examples // 2))
@given(template=st.text(max_size=120) | st.sampled_from([
    "{{ task.id }}", "{{ nope }}", "{% if %}", "{{ task.__class__ }}", "{{ 1/0 }}", "{% for x in 1 %}{% endfor %}",
    "{{ ''.__class__.__mro__ }}", "{{ task.id|json }}", "{% include 'nope.j2' %}",
    "{{ range(10**9)|list }}", "{{ 2.0 ** 10000 }}", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
]))
def test_user_template_never_raises(template):
    project = lint_files({
        **GOOD_FILES,
        "harness.yaml": "templates: prompts\n",
        "prompts/task.md.j2": template,
    })
    for d in project.diags.items:
        if d.code.startswith("HC5"):
            assert d.span.path.endswith(".j2") or "template" in d.span.path, d


# Crashes the fuzzing found in prompt rendering. OverflowError and RecursionError escaped
# prompts._render until 02d13f4; the NameError still does (Jinja's constant folding of
# `(1e400)|int` emits `inf` into the generated code, and NameError is not caught).
@pytest.mark.parametrize("template", [
    pytest.param("{{ range(10**6)|list }}", id="sandbox-range-OverflowError"),
    pytest.param("{{ 2.0 ** 10000 }}", id="float-pow-OverflowError"),
    pytest.param("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", id="recursive-macro-RecursionError"),
    pytest.param("{{ (1e400)|int }}", id="inf-constant-NameError"),
    pytest.param("{{ 'x' * 10**9 }}", id="huge-string-SecurityError"),
    pytest.param("{{ [1] * 10**8 }}", id="huge-list-SecurityError"),
])
def test_user_template_crash_is_hc503(template):
    project = lint_files({**GOOD_FILES, "harness.yaml": "templates: prompts\n", "prompts/task.md.j2": template})
    assert "HC503" in codes(project)


# Templates that ran for minutes or filled memory before compiler/sandbox.py bounded them.
DOUBLE = "{% set s = 'x' %}" + "{% set s = s OP s %}" * 32 + "{{ s|length }}"


@pytest.mark.parametrize("template,message", [
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "more than 1,000,000 steps"),
    ("{% for i in range(100000) %}{% if range(100000)|list|length > 5 %}{% endif %}{% endfor %}",
     "more than 1,000,000 steps"),
    ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
     "more than 1,000,000 steps"),
    ("{% for x in [[1]] * 100 recursive %}{{ loop([[1]] * 100) }}{% endfor %}", ""),
    ("{{ (((3 ** 100) ** 100) ** 100) }}", "** 100' is too large"),
    ("{% set x = 7 ** 3000 %}{{ x * x * x * x }}", "too large"),
    (DOUBLE.replace("OP", "~"), "a string joined with '~' is too large"),
    (DOUBLE.replace("OP", "+"), "a joined string or list is too large"),
    ("{% set ns = namespace(s='x') %}{% for i in range(32) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "too large"),
    ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "output is longer than 10,000,000"),
    ("{{ 'x'.ljust(10**9) }}", "too large for a template argument"),
    ("{{ 'x'|center(10**9) }}", "too large for a template argument"),
    ("{{ '%01000000000d' % 1 }}", "a width in this format string"),
    ("{{ '{:>1000000000}'.format(1) }}", "a width in this format string"),
    ("{{ '%01000000000d'|format(1) }}", "a width in this format string"),
])
def test_template_work_and_sizes_are_bounded(template, message):
    project = lint_files({**GOOD_FILES, "harness.yaml": "templates: prompts\n", "prompts/task.md.j2": template})
    errors = [d for d in project.diags.items if d.code == "HC503"]
    assert errors and message in errors[0].message, project.diags.items


def test_lipsum_is_gone_and_bounded_templates_still_render(tmp_path):
    from harnessc.compiler.prompts import TemplateProblem, _render

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.md.j2").write_text("{{ lipsum(n=1000000) }}")
    with pytest.raises(TemplateProblem) as info:
        _render({"templates": "t"}, tmp_path, "task.md.j2", {})
    assert info.value.code == "HC502" and "'lipsum' is undefined" in info.value.message
    (tmp_path / "t" / "task.md.j2").write_text(
        "{% for i in range(3) %}{{ i ~ '-' }}{{ '%3d' % i }}{{ '{:>2}'.format(i) }}{% endfor %}|"
        "{{ 'Order 12345678: %s' % 'a' }}|{{ 2 ** 10 * 3 }}|{{ 'ab' * 2 }}|{{ [1] + [2] }}|{{ 7 // 2 }}|"
        "{{ 'x'|center(5) }}|{% for x in [[1, [2]]] recursive %}{{ x if x is number else loop(x) }}{% endfor %}")
    out = _render({"templates": "t"}, tmp_path, "task.md.j2", {})
    assert out == "0-  0 01-  1 12-  2 2|Order 12345678: a|3072|abab|[1, 2]|3|  x  |12"


# ------------------------------------------------------------------ limits


def test_10mb_contracts_is_hc002():
    big = "# " + "x" * 98 + "\n"
    project = lint_files({**GOOD_FILES, "contracts.yaml": big * 100_000})
    assert "HC002" in codes(project)


def test_10mb_roadmap_line_does_not_raise():
    # one 10 MB line under the roadmap limit: must parse in reasonable time, no exception
    project = lint_files({"roadmap.md": GOOD_ROADMAP + "  Goal: " + "word " * 2_000_000 + "\n"})
    assert not any(d.code == "HC102" and d.span.line < 1 for d in project.diags.items)


def test_alias_bomb_is_hc203():
    bomb = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        bomb.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    project = lint_files({**GOOD_FILES, "contracts.yaml": "\n".join(bomb) + "\n"})
    assert "HC203" in codes(project)


@pytest.mark.parametrize("style", ["block", "flow-seq", "flow-map", "block-seq"])
def test_deep_nesting_is_hc205(style):
    depth = 100
    if style == "block":
        text = "contracts:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(depth)) + "  " * (depth + 1) + "v\n"
    elif style == "flow-seq":
        text = "contracts: " + "[" * depth + "]" * depth + "\n"
    elif style == "flow-map":
        text = "contracts: " + "{a: " * depth + "1" + "}" * depth + "\n"
    else:
        text = "".join("  " * i + "- \n" for i in range(depth)) + "  " * depth + "x\n"
    project = lint_files({**GOOD_FILES, "contracts.yaml": text})
    assert codes(project) & {"HC205", "HC201"}, codes(project)


def test_very_deep_flow_nesting_no_recursion_error():
    # far past Python's recursion limit: the YAML scanner itself must not blow the stack
    text = "contracts: " + "[" * 5000 + "]" * 5000 + "\n"
    project = lint_files({**GOOD_FILES, "contracts.yaml": text})
    assert codes(project) & {"HC205", "HC201"}, codes(project)


# ------------------------------------------------------------------ the real CLI


def test_cli_on_broken_project_has_no_traceback(tmp_path):
    for f in SPEC_FILES:
        (tmp_path / f).write_text((DEMO / f).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "roadmap.md").write_text(
        GOOD_ROADMAP + "  - colour: blue\n  - depends_on: nowhere\n", encoding="utf-8")
    (tmp_path / "contracts.yaml").write_text("contracts:\n  x: &a {}\n  y: *a\n", encoding="utf-8")
    harnessc = Path(sys.executable).parent / "harnessc"
    argv = [str(harnessc)] if harnessc.exists() else [sys.executable, "-m", "harnessc.cli"]
    proc = subprocess.run([*argv, "-C", str(tmp_path), "lint"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    out = proc.stdout + proc.stderr
    assert "HC103" in out and "HC203" in out, out


# ------------------------------------------------------------------ mutated real projects: lint and build


def _project_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "expected.txt" and ".harness" not in p.parts}


BASES = {"demo": _project_files(DEMO)} | {
    p.name: _project_files(p) for p in sorted((REPO / "tests" / "fixtures" / "projects").iterdir()) if p.is_dir()}
HOSTILE = [
    ".nan", "-.inf", "1.0e+400", "9" * 400, "9" * 4301, str(2**63), "{1: x}", "{true: a, ~: b, 1.5: c}",
    "{$ref: '#'}", "{$ref: 'http://127.0.0.1:9/x.json'}", "{type: dict, schema: {$ref: 'file:///etc/passwd'}}",
    "[" * 40 + "]" * 40, "{a: " * 40 + "1" + "}" * 40, "a" * 253, "$" + "9" * 400, "9" * 400 + "h",
    "'value ** 9 ** 9'", "[.nan, .inf]", "", "~", "!!float nan", "&a x", "\x00", "\udcff",
    # a schema keyword holding the wrong kind of value was an AttributeError in lint (issue 17)
    "{type: dict, schema: {allOf: s}}", "{type: dict, schema: {patternProperties: 3}}",
    "{type: dict, schema: {anyOf: [~]}}", "{type: dict, schema: {oneOf: [[1]]}}", "{type: dict, schema: {not: [1]}}",
    "{type: dict, schema: {if: 1, then: s}}", "{type: dict, schema: {dependencies: ~}}",
    "{type: list, schema: {items: [1], required: 3, enum: 3, type: 3}}", "{allOf: s, not: 3}",
    ", ".join(f"src/f{i}.py" for i in range(300)),  # a long comma list: one diagnostic per item
]
ALL_KEYS = sorted(set(YAML_KEYS + ROADMAP_KEYS) - {""})


@st.composite
def mutated_project(draw) -> dict[str, bytes]:
    """A real project (specs/demo or a golden fixture) with 1-4 mutations in one spec file."""
    files = dict(BASES[draw(st.sampled_from(["demo"] * 8 + sorted(BASES)))])  # the demo has every file
    name = draw(st.sampled_from([f for f in SPEC_FILES if f in files] or ["roadmap.md"]))
    data = files.get(name, b"")
    for _ in range(draw(st.integers(1, 4))):
        lines = data.split(b"\n")
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        kind = draw(st.sampled_from(["flip", "dup", "delete", "swap", "key", "value", "value", "value", "id", "nest"]))
        if kind == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
            continue
        if kind == "dup":
            lines.insert(i, lines[i])
        elif kind == "delete" and len(lines) > 1:
            del lines[i]
        elif kind == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind in ("key", "value") and b":" in lines[i]:
            key, _, value = lines[i].partition(b":")
            indent = key[: len(key) - len(key.lstrip(b" -*"))]
            if kind == "key":
                key = indent + draw(st.sampled_from(ALL_KEYS)).encode()
            else:
                value = b" " + draw(st.sampled_from(HOSTILE)).encode("utf-8", "surrogatepass")
            lines[i] = key + b":" + value
        elif kind == "id" and b"**" in lines[i]:
            head, _, rest = lines[i].partition(b"**")
            lines[i] = head + b"**" + draw(st.sampled_from([b"a" * 253, b"a" * 129, b"x/../y", b"1"])) + \
                b"**" + rest.partition(b"**")[2]
        elif kind == "nest":
            lines.insert(i, b"  " * draw(st.integers(0, 3)) + b"x: " + draw(st.sampled_from(HOSTILE[11:13])).encode())
        data = b"\n".join(lines)
    files[name] = data
    return files


@settings(FUZZ, max_examples=2 * FUZZ.max_examples)  # ~60 ms an example
@given(files=mutated_project())
def test_mutated_projects_lint_and_build_without_internal_error(files):
    """lint and build never raise; a project that lints clean builds and writes its plan."""
    from harnessc.compiler import compile_project, write_build

    with tempfile.TemporaryDirectory(prefix="hc-mutant-") as tmp:
        root = Path(tmp)
        for name, content in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(content)
        linted = lint_project(root)
        for d in linted.diags.items:
            assert d.code in CODES and d.span.line >= 1 and d.span.col >= 1, d
        built = compile_project(root, write_prompts=True)
        if not linted.diags.has_errors():
            assert built.plan is not None, [str(d) for d in built.diags.items]
        if built.plan is not None:
            assert (write_build(built) / "plan.json").is_file()
