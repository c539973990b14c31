"""The built-in prompts: builtin_task_prompt and builtin_system_prompt (Python) render exactly
what task.md.j2 and system.md.j2 (Jinja) do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES, REPO
from harnessc.compiler import compile_project
from harnessc.compiler.prompts import _render, builtin_system_prompt, builtin_task_prompt, render_prompt

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
maybe = lambda s: st.none() | s  # noqa: E731

contexts = st.fixed_dictionaries({
    "project": st.fixed_dictionaries({"overview": st.just("") | text}),
    "task": st.fixed_dictionaries({
        "id": text, "title": text, "phase": maybe(text), "goal": text, "success": maybe(text),
        "completion_promise": maybe(text),
    }),
    "contract": maybe(st.fixed_dictionaries({"output": st.just({}) | st.just({"x": {"type": "str"}})})),
    "output_format": text,
    "accept": st.lists(st.fixed_dictionaries({"argv": st.lists(text, max_size=3)}), max_size=3),
    "deps": st.dictionaries(text, st.fixed_dictionaries({"title": text, "state": text, "output": text, "note": st.just("") | text}), max_size=3),
    "context_files": st.lists(st.fixed_dictionaries({"path": text, "text": text}), max_size=2),
    "shared_context": st.lists(st.fixed_dictionaries({"path": text, "text": text}), max_size=2),
    "task_context": st.lists(st.fixed_dictionaries({"path": text, "text": text}), max_size=2),
    "cache_break": st.just("<BREAK>"),
    "context_left_out": st.lists(st.fixed_dictionaries({
        "path": text, "priority": st.sampled_from(["critical", "high", "medium", "low"]),
        "tokens": st.integers(0, 10**6), "budget": st.integers(1, 10**6)}), max_size=2),
})


def jinja_task_prompt(context: dict, root: Path) -> str:
    return _render({"templates": None}, root, "task.md.j2", context)


@settings(max_examples=300, deadline=None)
@given(contexts)
def test_builtin_task_prompt_is_the_template(tmp_path_factory, context):
    assert builtin_task_prompt(context) == jinja_task_prompt(context, Path("."))


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({"title": maybe(text | st.integers())}, optional={"overview": text}))
def test_builtin_system_prompt_is_the_template(project):
    assert builtin_system_prompt(project) == _render({"templates": None}, Path("."), "system.md.j2",
                                                     {"project": project})


def _own_templates(project: Path) -> bool:
    return (project / "harness.yaml").is_file() and "templates:" in (project / "harness.yaml").read_text("utf-8")


# the projects that build with the built-in templates: the demo and the fixtures whose lint passes
PROJECTS = [REPO / "specs" / "demo"] + sorted(
    p for p in (FIXTURES / "projects").iterdir()
    if p.is_dir() and (p / "expected.txt").read_text("utf-8").endswith("exit: 0\n") and not _own_templates(p))


@pytest.mark.parametrize("source", PROJECTS, ids=[p.name for p in PROJECTS])
def test_every_prompt_of_the_fixture_projects(tmp_path: Path, source: Path) -> None:
    root = tmp_path / source.name
    shutil.copytree(source, root, ignore=shutil.ignore_patterns(".harness"))
    project = compile_project(root)
    assert project.plan is not None, project.diags.items
    from harnessc.compiler import prompts

    for node in project.plan["nodes"]:
        fast = render_prompt(project.plan, node["id"], None, root)
        context = prompts._base_context(project.plan, node, root)
        nodes = prompts._node_index(project.plan)
        context["deps"] = {d: prompts._dep_view(nodes, d, None) for d in node["depends_on"]}
        files = context["context_files"] = prompts._context_files(project.plan, node, root)
        context["shared_context"], context["task_context"] = prompts._split_context(project.plan, node, files)
        context["context_left_out"] = prompts._context_left_out(node)
        context["cache_break"] = prompts.CACHE_BREAK
        assert fast == jinja_task_prompt(context, root).replace(prompts.CACHE_BREAK, "") == project.prompts[node["id"]]


def test_a_user_task_template_is_rendered_by_jinja(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))
    (root / "templates").mkdir()
    (root / "templates" / "task.md.j2").write_text("Do {{ task.id }}.\n")
    with (root / "harness.yaml").open("a") as f:
        f.write("\ntemplates: templates\n")
    project = compile_project(root)
    assert project.plan is not None, project.diags.items
    assert {text for text in project.prompts.values()} == {f"Do {tid}.\n" for tid in project.prompts}


def test_accept_commands_are_shown_as_command_lines_that_run_as_written(tmp_path: Path) -> None:
    """A quoted accept command keeps its quoting in the prompt; a plain one reads as before."""
    import subprocess
    import sys

    (tmp_path / "roadmap.md").write_text(
        "# P\n\n## Tasks\n\n- [ ] **t-001**: Check\n"
        "  - accept: python3 -m json.tool data.json\n"
        """  - accept: python3 -c "print('1 passed')"\n\n  Goal: Check it.\n""")
    project = compile_project(tmp_path)
    assert project.plan is not None, project.diags.items
    prompt = project.prompts["t-001"]
    lines = [line[3:-1] for line in prompt.splitlines() if line.startswith("- `")]
    assert lines == ["python3 -m json.tool data.json", """python3 -c 'print('"'"'1 passed'"'"')'"""]
    run = subprocess.run(["sh", "-c", lines[1].replace("python3", sys.executable, 1)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == "1 passed\n", run


@pytest.mark.parametrize("template, warned", [
    ("# Task {{ task.id }}\n{{ project.overview }}\n", ("task", "project")),
    ("{% if task.phase %}{{ task.phase }}{% endif %}\n{{ output_format }}\n", ("task", "output_format")),
    ("{% for id, dep in deps.items() %}{{ dep.output }}{% endfor %}{% for f in shared_context %}{{ f.text }}"
     "{% endfor %}", ("deps", "shared_context")),
    ("{{ project.overview }}{{ cache_break }}{{ output_format }}{{ cache_break }}# Task {{ task.id }}\n", None),
    ("{% set t = 1 %}{{ project.title }} {{ task.title }}\n", None),
    ((REPO / "harnessc" / "templates" / "task.md.j2").read_text("utf-8"), None),
])
def test_a_task_template_with_its_own_text_before_the_shared_text_is_warned_about(tmp_path, template, warned):
    """HC504, from the template's syntax tree: a variable of the task's own text used before
    one of the shared text."""
    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))
    (root / "templates").mkdir()
    (root / "templates" / "task.md.j2").write_text(template)
    with (root / "harness.yaml").open("a") as f:
        f.write("\ntemplates: templates\n")
    project = compile_project(root)
    found = [d for d in project.diags.items if d.code == "HC504"]
    if warned is None:
        assert not found
        return
    assert len(found) == 1 and found[0].severity == "warning" and found[0].span.path == "templates/task.md.j2"
    assert f"(`{warned[0]}`)" in found[0].message and f"(`{warned[1]}`)" in found[0].message
