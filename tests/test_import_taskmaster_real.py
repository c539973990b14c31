"""`harnessc import taskmaster` on real tasks.json files (fixtures/import/real/taskmaster/,
see its README: Taskmaster's own task lists, its test fixtures, and two other projects'):
every task kept but the cancelled ones, dependencies as Taskmaster's `next` means them,
lint clean and short, and no absolute path in the roadmap or the prompts built from it.

The expected figures are worked out here from the JSON, independently of the importer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harnessc.compiler import lint_project
from harnessc.compiler.select import select_ids
from harnessc.importers import taskmaster
from inproc import harnessc as in_process

REAL = Path(__file__).parent / "fixtures" / "import" / "real" / "taskmaster"
FILES = sorted(p.name for p in REAL.glob("*.json"))


def harnessc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`harnessc ARGS` from `cwd`, in this process (tests/inproc.py)."""
    return in_process(*args, cwd=cwd)


def real_harnessc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`harnessc ARGS` from `cwd` in a fresh interpreter: two runs in one process within a
    second would share a run id (its second and the process id)."""
    return subprocess.run([sys.executable, "-m", "harnessc", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def _lists(name: str) -> dict[str | None, list]:
    """Each task list of a file: tag -> tasks (None: the older layout)."""
    data = json.loads((REAL / name).read_text(encoding="utf-8"))
    if isinstance(data.get("tasks"), list):
        return {None: data["tasks"]}
    return {tag: v["tasks"] for tag, v in data.items() if isinstance(v, dict) and isinstance(v.get("tasks"), list)}


CASES = [(name, tag) for name in FILES for tag in _lists(name)]


def _expected(tasks: list) -> tuple[Counter, dict[str, set[str]], set[str]]:
    """(Taskmaster ids kept, counted; id -> what it depends on, as `next` reads it; the ids
    put off: deferred or blocked, or under such a task). Cancelled tasks and their subtasks
    are not kept; a duplicate id's dependencies are merged (the test checks the first)."""
    kept: Counter = Counter()
    deps: dict[str, set[str]] = {}
    held: set[str] = set()

    def walk(raw: dict, parent: str | None, parent_deps: set[str], parent_held: bool) -> str | None:
        path = f"{parent}.{raw['id']}" if parent else str(raw["id"])
        status = raw.get("status") or "pending"
        if status == "cancelled":
            return None
        own = {f"tm-{d}" if parent is None or "." in str(d) else f"tm-{parent}.{d}" for d in raw.get("dependencies") or []}
        mine = parent_deps | own
        is_held = status in ("deferred", "blocked") or (parent_held and status != "done")
        children = [walk(s, path, mine, is_held) for s in raw.get("subtasks") or []]  # None: cancelled
        tid = f"tm-{path}"
        kept[tid] += 1
        deps.setdefault(tid, set()).update(mine | {c for c in children if c})
        if is_held:
            held.add(tid)
        return tid

    for raw in tasks:
        walk(raw, None, set(), False)
    return kept, deps, held


def _renamed(warnings: list[str]) -> dict[str, str]:
    """The ids a second task with a taken id was kept under -> the id it has in the file."""
    found = (re.search(r"a second task (\S+) \(.*\); kept as (\S+) ", w) for w in warnings)
    return {m.group(2): m.group(1) for m in found if m}


@pytest.mark.parametrize("name, tag", CASES, ids=[f"{n}:{t or 'tasks'}" for n, t in CASES])
def test_every_task_kept_with_the_dependencies_taskmaster_means(name, tag):
    tasks = _lists(name)[tag]
    imported = taskmaster.read((REAL / name).read_text(encoding="utf-8"), name, tag)
    got = imported.roadmap.tasks
    kept, deps, held = _expected(tasks)
    renamed = _renamed(imported.warnings)
    assert Counter(renamed.get(t.id, t.id) for t in got) == kept  # every task but the cancelled ones
    said = "\n".join(imported.summary())
    for t in got:
        if t.id in renamed:  # a second task with a taken id: kept, and said so
            continue
        # as the source means them, less only what the summary names (a cycle, a missing or cancelled task)
        assert {renamed.get(d, d) for d in t.depends_on} <= deps[t.id], t.id
        for gone in deps[t.id] - set(t.depends_on):  # said for the task, or for its task (it inherits the edge)
            why = [w for a in _ancestry(t.id) for w in (
                f"{a}: depends on itself", f"{a}: dependency on {gone} left out: it closes a cycle",
                f"{a}: dependency on {gone} dropped: {gone} is cancelled", f"{a}: dependency '{gone}' names no task")]
            assert any(w in said for w in why) or gone == t.id, (t.id, gone)
        assert ("deferred" in t.tags) == (t.id in held), t.id
    assert sum(imported.statuses.values()) == sum(kept.values()) + _cancelled(tasks)  # each counted once
    # nothing waiting for put-off work runs by default
    nodes = [{"id": t.id, "depends_on": list(t.depends_on), "tags": list(t.tags), "done": t.done} for t in got]
    chosen = select_ids(nodes, [])
    by_id = {t.id: t for t in got}
    for tid in (i for i in chosen if not by_id[i].done):  # a checked task never runs
        assert "deferred" not in by_id[tid].tags
        assert all(d in chosen or by_id[d].done for d in by_id[tid].depends_on), tid


def _ancestry(tid: str) -> list[str]:
    """tm-2.3.1 -> [tm-2.3.1, tm-2.3, tm-2]."""
    parts = tid.split(".")
    return [".".join(parts[:n]) for n in range(len(parts), 0, -1)]


def _cancelled(tasks: list) -> int:
    """Tasks left out as cancelled, with the subtasks under them."""
    def count(raw: dict, under: bool) -> int:
        out = under or raw.get("status") == "cancelled"
        return int(out) + sum(count(s, out) for s in raw.get("subtasks") or [])
    return sum(count(t, False) for t in tasks)


@pytest.mark.parametrize("name", FILES)
def test_a_real_file_imports_lints_clean_and_short_and_names_no_absolute_path(tmp_path, name):
    """The import as a user runs it: from outside the project, then lint and build; the
    roadmap, its prompts and the import's summary never hold the absolute source path."""
    project = tmp_path / "project"
    project.mkdir()
    r = harnessc("-C", str(project), "import", "taskmaster", str(REAL / name), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lists = _lists(name)
    kept, _, _ = _expected(lists["master"] if "master" in lists else lists[None])
    assert f"{sum(kept.values())} task" in r.stdout.splitlines()[0]
    lint = harnessc("-C", str(project), "lint", "--output", "json", cwd=tmp_path)
    assert lint.returncode == 0 and [d for d in json.loads(lint.stdout) if d["severity"] == "error"] == []
    text = harnessc("-C", str(project), "lint", cwd=tmp_path)
    assert text.returncode == 0 and len(text.stdout.splitlines()) <= 30, text.stdout  # HC410 on hundreds: summed up
    build = harnessc("-C", str(project), "build", cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    written = [project / "roadmap.md", *sorted((project / ".harness" / "build").rglob("*.md"))]
    assert len(written) > sum(kept.values())  # the roadmap and a prompt per task
    for path in written:
        content = path.read_text(encoding="utf-8")
        assert str(REAL) not in content and str(tmp_path) not in content, path
    assert f"Imported from Taskmaster ({name}," in (project / "roadmap.md").read_text(encoding="utf-8")


def test_a_file_inside_the_project_is_named_by_its_path_there(tmp_path):
    where = tmp_path / ".taskmaster" / "tasks"
    where.mkdir(parents=True)
    (where / "tasks.json").write_bytes((REAL / "fixture_sampleTasks.json").read_bytes())
    r = harnessc("import", "taskmaster", str(where / "tasks.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "roadmap.md").read_text()
    assert "Imported from Taskmaster (.taskmaster/tasks/tasks.json, the older layout)" in text
    assert str(tmp_path) not in text


def test_subtasks_wait_for_their_tasks_dependencies_as_taskmaster_offers_them(tmp_path):
    """Taskmaster's sample: task 3 depends on 2, and `next` offers 3's subtasks only once 3
    is in progress, which it cannot be before 2 is done. The import waited for nothing."""
    r = harnessc("import", "taskmaster", str(REAL / "fixture_sampleTasks.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    tasks = {t.id: t for t in lint_project(tmp_path).roadmap.tasks}
    assert tasks["tm-3.1"].depends_on == tasks["tm-3.2"].depends_on == ("tm-2",)
    assert tasks["tm-2.2"].depends_on == ("tm-1", "tm-2.1")  # its task's dependency, and sibling 1
    assert tasks["tm-3"].depends_on == ("tm-2", "tm-3.1", "tm-3.2")
    build = harnessc("build", cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    plan = json.loads((tmp_path / ".harness" / "build" / "plan.json").read_text())
    waves = {n["id"]: n for n in plan["nodes"]}
    assert set(waves["tm-3.1"]["depends_on"]) == {"tm-2"}


def test_the_real_file_with_duplicate_ids_keeps_all_eight_and_says_where_each_is(tmp_path):
    r = harnessc("import", "taskmaster", str(REAL / "taskmaster-self_tagged_tasks.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ids = [t.id for t in lint_project(tmp_path).roadmap.tasks]
    assert [i for i in ids if i.startswith("tm-42.42")] == ["tm-42.42"] + [f"tm-42.42-{n}" for n in range(2, 9)]
    assert ("master.tasks[41].subtasks[1]: a second task tm-42.42 (the first is master.tasks[41].subtasks[0]); "
            "kept as tm-42.42-2") in r.stdout
    assert "field 'parentTaskId' on 200 tasks (" in r.stdout and r.stdout.count("parentTaskId") == 1
    summary = r.stdout.split("statuses:")[1].split("warnings")[0]
    assert "3 cancelled -> left out" in summary and "5 deferred -> open, tag deferred" in summary
    assert "15 under a deferred or blocked task -> open, tag deferred" in summary
    assert len(r.stdout.splitlines()) < 50  # 334 lines before: 210 of them parentTaskId
    ls = harnessc("ls", cwd=tmp_path)
    assert ls.returncode == 0 and ls.stdout.splitlines()[-1] == "605 tasks of 625 selected", ls.stdout[-300:]
    deferred = harnessc("ls", "-s", "tag:deferred", cwd=tmp_path)
    assert deferred.stdout.splitlines()[-1] == "20 tasks of 625 selected"


def test_deferred_work_and_what_waits_for_it_run_only_when_selected(tmp_path):
    """A real run: the deferred tm-3 and tm-5 (which depends on it) are left for later, and
    the run succeeds; `-s tag:deferred` runs tm-3, `-s tag:deferred+` what waits for it too."""
    fixture = Path(__file__).parent / "fixtures" / "import" / "taskmaster-tagged.json"
    assert harnessc("import", "taskmaster", str(fixture), cwd=tmp_path).returncode == 0
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    run = real_harnessc("run", cwd=tmp_path)
    assert run.returncode == 0 and "succeeded: 3 tasks succeeded, 2 done" in run.stdout, run.stdout + run.stderr
    assert ("put off: 2 open tasks tagged deferred, or waiting for one, not selected (`-s tag:deferred+` runs them)"
            in run.stderr)
    states = {t["id"]: t["state"] for t in json.loads(harnessc("status", "--output", "json", cwd=tmp_path).stdout)["tasks"]}
    assert states["tm-3"] in ("pending", "ready") and states["tm-5"] == "pending"
    run = real_harnessc("run", "-s", "tag:deferred+", cwd=tmp_path)
    assert run.returncode == 0 and "succeeded: 2 tasks succeeded" in run.stdout, run.stdout + run.stderr
    assert "put off" not in run.stderr


def test_nested_subtasks_and_fields_of_the_wrong_shape():
    """A subtask's own subtasks (task 81 of Taskmaster's older file has one) are tasks too,
    their numbers siblings; a field of the wrong shape is listed, not iterated."""
    data = {"tasks": [{"id": 1, "title": "a", "subtasks": "oops", "dependencies": 5},
                      {"id": 2, "title": "b", "status": "weird", "dependencies": [1], "subtasks": [
                          {"id": 1, "title": "c", "subtasks": [{"id": 1, "title": "d", "dependencies": [2]},
                                                               {"id": 2, "title": "e"}]}]}]}
    imported = taskmaster.read(json.dumps(data), "tasks.json")
    deps = {t.id: t.depends_on for t in imported.roadmap.tasks}
    assert deps == {"tm-1": (), "tm-2": ("tm-1", "tm-2.1"), "tm-2.1": ("tm-1", "tm-2.1.1", "tm-2.1.2"),
                    "tm-2.1.1": ("tm-1", "tm-2.1.2"), "tm-2.1.2": ("tm-1",)}
    assert imported.unmapped == ["tm-1: dependencies '5' is not a list; left out",
                                 "tm-1: subtasks '\"oops\"' is not a list; left out",
                                 "tm-2: status 'weird' is not one of Taskmaster's; imported as an open task"]
    assert imported.roadmap.tasks[1].goal == "Taskmaster status: weird."
