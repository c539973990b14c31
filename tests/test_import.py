"""`harnessc import taskmaster|speckit`: golden roadmaps from files in those tools' formats,
each linted for real; what does not map is listed; an existing roadmap.md is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessc.compiler import lint_project
from harnessc.importers import taskmaster

FIXTURES = Path(__file__).parent / "fixtures" / "import"
UPDATE = os.environ.get("HARNESSC_UPDATE_GOLDEN") == "1"
SPECKIT = "specs/001-photo-albums/tasks.md"


def harnessc(*args: str, cwd: Path = FIXTURES) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harnessc", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


CASES = {
    "taskmaster-tagged": ("taskmaster", "taskmaster-tagged.json"),
    "taskmaster-billing": ("taskmaster", "taskmaster-tagged.json", "--tag", "feature-billing"),
    "taskmaster-legacy": ("taskmaster", "taskmaster-legacy.json"),
    "speckit": ("speckit", SPECKIT),
}


@pytest.mark.parametrize("case", CASES)
def test_import_writes_the_golden_roadmap_and_it_lints_without_errors(tmp_path, case):
    out = tmp_path / "roadmap.md"
    r = harnessc("import", *CASES[case], "-o", str(out))
    assert r.returncode == 0, r.stderr
    golden = FIXTURES / "golden" / f"{case}.roadmap.md"
    if UPDATE:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(out.read_text())
    assert out.read_text() == golden.read_text()
    lint = harnessc("-C", str(tmp_path), "lint", "--output", "json")
    problems = json.loads(lint.stdout)
    assert lint.returncode == 0 and [d for d in problems if d["severity"] == "error"] == []
    assert {d["code"] for d in problems} <= {"HC410"}


def test_taskmaster_mapping(tmp_path):
    r = harnessc("import", "taskmaster", "taskmaster-tagged.json", "-o", str(tmp_path / "roadmap.md"))
    tasks = {t.id: t for t in lint_project(tmp_path).roadmap.tasks}
    assert list(tasks) == ["tm-1", "tm-2", "tm-2.1", "tm-2.2", "tm-2.3", "tm-3", "tm-4"]
    assert tasks["tm-1"].done and tasks["tm-2.1"].done and not tasks["tm-2"].done
    assert tasks["tm-2"].depends_on == ("tm-1", "tm-2.1", "tm-2.2", "tm-2.3")  # a task waits for its subtasks
    assert tasks["tm-2.3"].depends_on == ("tm-2.2",)  # "2.2" and sibling 2 are the same task
    assert tasks["tm-2"].priority.value == "normal" and tasks["tm-1"].priority.value == "high"
    assert tasks["tm-3"].priority.value == "low" and tasks["tm-4"].priority is None
    assert tasks["tm-2"].success == ("Unit tests for token issue and expiry; an integration test logs in "
                                     "and refreshes a token.")
    assert tasks["tm-2"].accept == ()  # testStrategy is what the agent is told, not a command
    assert tasks["tm-1"].goal.startswith("Initialise the repository") and "2. Add a GitHub Actions" in tasks["tm-1"].goal
    assert tasks["tm-4"].done and tasks["tm-4"].tags == ("cancelled",) and tasks["tm-3"].tags == ("deferred",)
    listed = r.stdout.split("not mapped", 1)[1]
    for needle in ("tag 'feature-billing': 1 task(s) not imported (import it with --tag feature-billing)",
                   "tm-4: priority 'urgent' is not high, medium or low", "tm-4: field 'complexityScore' not imported",
                   "tm-4: dependency 'tm-99' names no task", "tm-3: status deferred", "tm-4: status cancelled",
                   "tag 'master' metadata: created, description, updated not imported"):
        assert needle in listed, needle


def test_speckit_mapping(tmp_path):
    r = harnessc("import", "speckit", SPECKIT, "-o", str(tmp_path / "roadmap.md"))
    roadmap = lint_project(tmp_path).roadmap
    tasks = {t.id: t for t in roadmap.tasks}
    assert roadmap.title == "Photo Albums" and len(tasks) == 17 and "T999" not in tasks  # T999 is in a code block
    assert tasks["T001"].done and tasks["T002"].done and not tasks["T003"].done
    assert tasks["T001"].phase == "Phase 1: Setup (Shared Infrastructure)"
    assert tasks["T002"].depends_on == ("T001",)  # in order inside a phase
    assert tasks["T004"].depends_on == ("T002", "T003")  # a phase waits for the one before
    assert tasks["T005"].depends_on == tasks["T006"].depends_on == ("T004",)  # [P]: side by side
    assert tasks["T007"].depends_on == ("T005", "T006")
    assert tasks["T008"].tags == ("parallel", "US1") and tasks["T011"].tags == ("US1",)
    assert tasks["T011"].title == "Implement AlbumService in src/services/albums.py"  # "(depends on T010)" read
    assert "T010" in tasks["T011"].depends_on
    assert {"T005", "T006"} <= set(tasks["T012"].depends_on) and "T006" in tasks["T015"].depends_on  # "blocks"
    assert "Models before services" in roadmap.overview and "**Checkpoint**" in roadmap.overview
    listed = r.stdout.split("not mapped", 1)[1]
    assert "T014: dependency 'T099' names no task" in listed
    assert "T013: dependency on T016 left out" in listed  # "T016 blocks T013" would close a cycle
    assert "'Models before services (T010 before T011)' names tasks" in listed


def test_an_existing_roadmap_is_kept_without_force(tmp_path):
    (tmp_path / "roadmap.md").write_text("mine\n")
    r = harnessc("-C", str(tmp_path), "import", "speckit", str(FIXTURES / SPECKIT), cwd=tmp_path)
    assert r.returncode == 2 and "roadmap.md exists; not overwritten" in r.stderr and "--force" in r.stderr
    assert (tmp_path / "roadmap.md").read_text() == "mine\n"
    r = harnessc("-C", str(tmp_path), "import", "speckit", str(FIXTURES / SPECKIT), "--force", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "roadmap.md").read_text().startswith("# Photo Albums\n")


@pytest.mark.parametrize("args, message", [
    (("taskmaster", "taskmaster-tagged.json", "--tag", "nosuch"), "no tag 'nosuch'; the tags are: master, feature-billing"),
    (("taskmaster", "taskmaster-legacy.json", "--tag", "feature"), "no tag 'feature'"),
    (("taskmaster", SPECKIT), "tasks.md:1:1: not valid JSON"),
    (("speckit", "taskmaster-legacy.json"), "no task lines like '- [ ] T001 Description' found"),
    (("taskmaster", "missing.json"), "cannot read missing.json"),
])
def test_unreadable_input_is_a_usage_error(tmp_path, args, message):
    r = harnessc("import", *args, "-o", str(tmp_path / "roadmap.md"))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "roadmap.md").exists()


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_ids = st.integers(1, 6)
_tasks = st.lists(st.fixed_dictionaries({
    "id": _ids, "title": _text, "description": _text, "details": _text, "testStrategy": _text,
    "status": st.sampled_from(["pending", "done", "in-progress", "review", "deferred", "cancelled", "blocked", "x"]),
    "priority": st.sampled_from(["high", "medium", "low", "urgent"]),
    "dependencies": st.lists(st.one_of(_ids, st.builds(lambda a, b: f"{a}.{b}", _ids, _ids)), max_size=3),
    "subtasks": st.lists(st.fixed_dictionaries({
        "id": _ids, "title": _text, "details": _text, "status": st.sampled_from(["pending", "done"]),
        "dependencies": st.lists(st.one_of(_ids, st.builds(lambda a, b: f"{a}.{b}", _ids, _ids)), max_size=2)}),
        max_size=3),
}), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks=_tasks)
def test_any_taskmaster_file_imports_to_a_roadmap_without_errors(tmp_path, tasks):
    """Duplicate ids, cycles, unknown and self dependencies, any text: never a lint error."""
    imported = taskmaster.read(json.dumps({"master": {"tasks": tasks}}), "tasks.json")
    (tmp_path / "roadmap.md").write_text(imported.text(), encoding="utf-8")
    project = lint_project(tmp_path)
    assert [str(d.span) + " " + d.message for d in project.diags.errors] == []
    assert len(project.roadmap.tasks) == len(imported.roadmap.tasks)
