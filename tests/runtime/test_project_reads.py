"""Files harnessc reads from the project — context files, template overrides — are read
without following links, at build and again at run time; a context glob is finite and bounded."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from harnessc.compiler import lint_project
from harnessc.compiler.contextglob import MAX_MATCHES

from . import virtual


def starter(tmp_path: Path, context: str) -> Path:
    """The `harnessc init` project, its first task given `context`."""
    root = tmp_path / "p"
    assert virtual.harnessc(tmp_path, "init", str(root)).returncode == 0
    roadmap = root / "roadmap.md"
    text = roadmap.read_text()
    roadmap.write_text(text.replace("  - complexity: simple\n",
                                    f"  - complexity: simple\n  - context: {context}\n", 1))
    return root


def test_a_context_file_replaced_by_a_link_after_build_fails_the_task(tmp_path):
    root = starter(tmp_path, "data/leads.json")
    (root / "data").mkdir()
    (root / "data/leads.json").write_text('{"lead": "ok"}\n')
    r = virtual.harnessc(root, "build")
    assert r.returncode == 0, r.stdout + r.stderr
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE\n")
    (root / "data/leads.json").unlink()
    (root / "data/leads.json").symlink_to(secret)
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    task = {t["id"]: t for t in json.loads(virtual.harnessc(root, "status", "--json").stdout)["tasks"]}["research-001"]
    assert task["state"] == "failed"
    assert task["error"] == ("could not render the prompt: refusing to read through a symbolic link: "
                             f"data/leads.json -> {secret}")
    db = sqlite3.connect(root / ".harness/state.db")
    dump = "\n".join(db.iterdump())
    assert "TOP-SECRET-LINE" not in dump  # never in a prompt, an attempt or an event
    assert not any("TOP-SECRET-LINE" in p.read_text() for p in (root / ".harness").rglob("*.md"))


def test_a_linked_directory_on_the_way_is_refused_too(tmp_path):
    root = starter(tmp_path, "data/leads.json")
    (root / "data").mkdir()
    (root / "data/leads.json").write_text("{}\n")
    assert virtual.harnessc(root, "build").returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "leads.json").write_text("TOP-SECRET-LINE\n")
    (root / "data/leads.json").unlink()
    (root / "data").rmdir()
    (root / "data").symlink_to(elsewhere)
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 1
    task = {t["id"]: t for t in json.loads(virtual.harnessc(root, "status", "--json").stdout)["tasks"]}["research-001"]
    assert task["error"].endswith(f"refusing to read through a symbolic link: data -> {elsewhere}")


def test_a_missing_context_file_at_run_time_is_said_in_the_prompt(tmp_path):
    root = starter(tmp_path, "notes.md")
    (root / "notes.md").write_text("remember this\n")
    assert virtual.harnessc(root, "build").returncode == 0
    (root / "notes.md").unlink()
    assert virtual.harnessc(root, "run", "--no-build").returncode == 0
    log = json.loads(virtual.harnessc(root, "log", "research-001", "--json").stdout)
    assert "(could not read: No such file or directory)" in log[0]["prompt"]


def test_context_glob_does_not_follow_directory_links(tmp_path):
    root = starter(tmp_path, "**")
    (root / "x").symlink_to(".")
    (root / "y").symlink_to(".")
    project = lint_project(root)  # would walk x/y/x/y/... for ever if links were followed
    assert [(d.code, d.message) for d in project.diags.errors] == [
        ("HC405", "context path 'x' is a symbolic link")]


def test_context_glob_is_capped(tmp_path):
    root = starter(tmp_path, "data/**")
    data = root / "data"
    for d in range(11):
        (data / f"d{d}").mkdir(parents=True)
        for f in range(1000):
            (data / f"d{d}" / f"{f}.txt").touch()
    project = lint_project(root)
    [d] = project.diags.errors
    assert (d.code, d.message) == ("HC411", f"context pattern 'data/**' matches more than {MAX_MATCHES:,} files")
    assert (d.span.path, d.span.line) == ("roadmap.md", 13)  # the context: line
    # At the cap exactly, it is fine.
    for f in range(1000):
        (data / "d10" / f"{f}.txt").unlink()
    project = lint_project(root)
    assert not project.diags.errors
    assert len(project.context_files["research-001"]) == MAX_MATCHES


def templated(tmp_path: Path) -> Path:
    root = starter(tmp_path, "notes.md")
    (root / "notes.md").write_text("n\n")
    (root / "harness.yaml").write_text((root / "harness.yaml").read_text() + "templates: prompts\n")
    (root / "prompts").mkdir()
    (root / "prompts/task.md.j2").write_text("Task {{ task.id }}{% include 'part.md' %}\n")
    (root / "prompts/part.md").write_text(" (with a part)")
    r = virtual.harnessc(root, "build")
    assert r.returncode == 0, r.stdout + r.stderr
    return root


def test_a_template_replaced_by_a_link_after_build_fails_the_task(tmp_path):
    root = templated(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE\n")
    (root / "prompts/task.md.j2").unlink()
    (root / "prompts/task.md.j2").symlink_to(secret)
    r = virtual.harnessc(root, "run", "--no-build")
    assert r.returncode == 1, r.stdout + r.stderr
    tasks = {t["id"]: t for t in json.loads(virtual.harnessc(root, "status", "--json").stdout)["tasks"]}
    assert tasks["research-001"]["error"] == ("could not render the prompt: refusing to read through "
                                              f"a symbolic link: prompts/task.md.j2 -> {secret}")
    assert "TOP-SECRET-LINE" not in "\n".join(sqlite3.connect(root / ".harness/state.db").iterdump())


def test_an_included_template_through_a_linked_directory_is_refused(tmp_path):
    root = templated(tmp_path)
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    (elsewhere / "passwd").write_text("TOP-SECRET-LINE\n")
    (root / "prompts/etc").symlink_to(elsewhere)
    (root / "prompts/task.md.j2").write_text("{% include 'etc/passwd' %}\n")
    r = virtual.harnessc(root, "build")  # lint: HC216 at harness.yaml's templates:
    assert r.returncode == 1 and "error[HC216]: templates directory 'prompts' holds a symbolic link: prompts/etc" in r.stdout
    r = virtual.harnessc(root, "run", "--no-build")  # the plan built before the link: refused when rendering
    tasks = {t["id"]: t for t in json.loads(virtual.harnessc(root, "status", "--json").stdout)["tasks"]}
    assert tasks["research-001"]["error"] == ("could not render the prompt: refusing to read through "
                                              f"a symbolic link: prompts/etc -> {elsewhere}")
    assert "TOP-SECRET-LINE" not in "\n".join(sqlite3.connect(root / ".harness/state.db").iterdump())
