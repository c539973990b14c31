"""`harnessc import speckit` on real tasks.md files (tests/fixtures/import/speckit-real/, from
spec-kit's own repository and projects that use it; README.md there names each source).

Each one, imported into a project for real, built and linted: every task line of the file is
a task (counted here by a regex of its own), the order is the one the file and spec-kit's
template mean (user stories side by side after Foundational, Polish after them, [P] tasks
beside the tasks of their phase, ranges and prose dependencies), each prompt holds its
task's phase and not the whole file, and no absolute path is written anywhere."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from harnessc.compiler import lint_project
from harnessc.importers import speckit
from inproc import harnessc as in_process

REAL = Path(__file__).parent / "fixtures" / "import" / "speckit-real"
# a task line as spec-kit writes it: checkbox, then the id (the importer's own regex is not used)
TASK_LINE = re.compile(r"^- \[[ xX]\] T\d+ ", re.MULTILINE)



def harnessc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`harnessc ARGS` from `cwd`, in this process (tests/inproc.py)."""
    return in_process(*args, cwd=cwd)

# per file: (a, b) in "waits" means task a waits for b (directly or not); "apart": neither
# waits for the other; "deps": a task's own depends_on, exactly; "said": lines `import` prints
CASES = {
    "aikit_002-rust-spec-kit-complete_tasks.md": {
        "done": 133, "max_waves": 40,  # 137 tasks were 102 waves: every phase after the one before
        "apart": [("T052", "T051"), ("T063", "T062"), ("T082", "T070"), ("T089", "T088"), ("T031", "T052"),
                  ("T004", "T001"), ("T015", "T013")],  # stories; [P] beside the tasks before them
        "waits": [("T031", "T030"), ("T031", "T014"), ("T126", "T125"), ("T126", "T051"), ("T137", "T107")],
        # "User Story 4: Depends on User Story 1", "File Merging (Phase 9): Depends on User
        # Story 1", "Release Command (Phase 10): Depends on User Story 6"
        "deps": {"T071": ("T051",), "T108": ("T051",), "T115": ("T107",), "T002": ("T001",), "T004": ()},
        # a prompt holds its own phase's text, not another's
        "prompt": {"T031": ["**Independent Test**: Run `aikit init test-project --ai claude`", "### Implementation for "
                            "User Story 1", "**Checkpoint**: At this point, User Story 1 should be fully functional"]},
        "not_in_prompt": {"T031": ["Run `aikit check`", "**Purpose**: Core infrastructure", "Parallel Team Strategy"]},
    },
    "speckit-pr1396_python-litellm-library_tasks.md": {
        "done": 104,
        "deps": {"T030": ("T026", "T027", "T028", "T029"),  # before it in its phase, and "(depends on T027-T029)"
                 # [P]: what the phase waits for (Foundational's ends), not T030 before it
                 "T031": ("T009", "T010", "T011", "T012", "T013", "T014", "T015"),
                 "T041": ("T039", "T040")},  # "US8 (Phase 5): Depends on US6"
        "waits": [("T056", "T055"), ("T056", "T050"), ("T056", "T025"),  # US1: "Depends on US2, US6, US7, US8"
                  ("T063", "T062"), ("T107", "T106")],
        "apart": [("T051", "T041"), ("T016", "T026"), ("T082", "T063")],  # US7 beside US8; US2 beside US6; US4/US3
    },
    "speckit-pr1489_ralph-loop-implement_tasks.md": {
        "done": 53, "ids": ["T021-2", "T022-2"],  # T021 and T022 twice: both kept
        "said": ["tasks.md:80: a second task T021 (the first is specs/001-feature/tasks.md:65); kept as T021-2",
                 "tasks.md:81: a second task T022 (the first is specs/001-feature/tasks.md:66); kept as T022-2"],
        "titles": {"T021": "Implement iteration summary output in ralph-loop.sh",
                   "T021-2": "Create initial progress.txt with header on first iteration in ralph-loop.ps1"},
        "apart": [("T021-2", "T010"), ("T028", "T027"), ("T044", "T043"), ("T017", "T016")],  # T043 ∥ T044
        "waits": [("T022-2", "T021-2"), ("T043", "T042"), ("T043", "T022")],
    },
    "speckit-pr165_self-specification_tasks.md": {
        "done": 20,  # "T006-T010 depend on T001-T005", "T011 depends on T001-T005", "T012-T015 depend on T011"
        "waits": [("T010", "T001"), ("T010", "T005"), ("T011", "T005"), ("T015", "T011"), ("T016", "T015")],
        "deps_include": {t: ("T001", "T002", "T003", "T004", "T005") for t in ("T006", "T007", "T008", "T009", "T010")},
    },
    "speckit-2025-08_tasks-template.md": {
        "done": 0,  # "T008 blocks T009, T015", "T016 blocks T018"; phases 3.1 to 3.5 one after another
        "deps_include": {"T009": ("T008",), "T015": ("T008",), "T018": ("T016",)},
        "waits": [("T004", "T002"), ("T008", "T007"), ("T015", "T014"), ("T019", "T018")],
        "apart": [("T009", "T010")],
    },
    "speckit_tasks-template.md": {
        "done": 0,
        "said": [f"tasks.md:{n}: 'TXXX" for n in range(154, 160)] + ["TXXX is the template's placeholder"],
        "deps": {"T014": ("T010", "T011", "T012", "T013"), "T010": ("T009",), "T018": ("T009",), "T024": ("T009",),
                 "T005": ("T002", "T003"), "T004": ("T002", "T003")},
        "apart": [("T018", "T017"), ("T024", "T023"), ("T024", "T017")],
    },
    "speckit_tests-hooks_tasks.md": {"done": 0, "deps": {"T001": ()}},
    "speckit-pr945_git-worktree-support_tasks.md": {
        "done": 58,
        "apart": [("T018", "T017"), ("T025", "T024"), ("T034", "T033"), ("T045", "T044"), ("T007", "T006")],
        "waits": [("T056", "T017"), ("T056", "T055"), ("T010", "T009"), ("T010", "T006")],
    },
    "hackathon-todo_001-env-setup_tasks.md": {
        "done": 6, "deps": {"T004": ("T001", "T002", "T003")},  # "T004 should run after T001-T003"
        "waits": [("T005", "T004")],
    },
    "hackathon-todo_003-backend-api_tasks.md": {
        "done": 0,
        "apart": [("T014", "T013"), ("T020", "T019"), ("T024", "T023"), ("T027", "T026"), ("T034", "T033")],
        "waits": [("T038", "T013"), ("T038", "T037"), ("T010", "T009")],
    },
}


def _ancestors(nodes: dict[str, dict], tid: str) -> set[str]:
    seen: set[str] = set()
    todo = list(nodes[tid]["depends_on"])
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo += nodes[d]["depends_on"]
    return seen


def test_every_real_file_has_a_case():
    assert sorted(p.name for p in REAL.glob("*.md") if p.name != "README.md") == sorted(CASES)


@pytest.mark.parametrize("name", CASES)
def test_a_real_speckit_file_imports_as_its_source_means_it(tmp_path, name):
    case = CASES[name]
    source = (REAL / name).read_bytes()
    project = tmp_path / "project"
    spec = project / "specs" / "001-feature" / "tasks.md"
    spec.parent.mkdir(parents=True)
    spec.write_bytes(source)
    r = harnessc("-C", str(project), "import", "speckit", str(spec.resolve()), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for needle in case.get("said", ()):
        assert needle in r.stdout, needle

    # every task line of the file is a task; lint has nothing but HC410 to say
    lint = harnessc("-C", str(project), "lint", "--output", "json", cwd=tmp_path)
    problems = json.loads(lint.stdout)
    assert lint.returncode == 0 and {d["code"] for d in problems} <= {"HC410"}, problems[:3]
    roadmap = lint_project(project).roadmap
    tasks = {t.id: t for t in roadmap.tasks}
    assert len(tasks) == len(TASK_LINE.findall(source.decode())) and sum(t.done for t in tasks.values()) == case["done"]
    assert set(case.get("ids", ())) <= set(tasks)
    for tid, title in case.get("titles", {}).items():
        assert tasks[tid].title == title

    # the order the file means
    build = harnessc("-C", str(project), "build", cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    plan = json.loads((project / ".harness" / "build" / "plan.json").read_text())
    nodes = {n["id"]: n for n in plan["nodes"]}
    for tid, deps in case.get("deps", {}).items():
        assert tuple(nodes[tid]["depends_on"]) == deps, tid
    for tid, deps in case.get("deps_include", {}).items():
        assert set(deps) <= set(nodes[tid]["depends_on"]), tid
    for a, b in case.get("waits", ()):
        assert b in _ancestors(nodes, a), f"{a} should wait for {b}"
    for a, b in case.get("apart", ()):
        assert b not in _ancestors(nodes, a) and a not in _ancestors(nodes, b), f"{a} and {b} should run side by side"
    if "max_waves" in case:
        assert len(plan["waves"]) <= case["max_waves"]

    # each prompt holds its own phase's text, not the whole file; no absolute path anywhere
    written = (project / "roadmap.md").read_text()
    assert "Imported from spec-kit (specs/001-feature/tasks.md)" in roadmap.overview
    prompts = {p.stem: p.read_text() for p in (project / ".harness" / "build" / "prompts").glob("*.md")}
    for text in (written, *prompts.values()):
        assert str(tmp_path) not in text and str(REAL) not in text
    title = re.search(r"^# (?:Tasks: )?(.*)", source.decode(), re.MULTILINE)
    if title:  # the feature's title: in the system prompt every call gets
        assert f'working on the project "{title.group(1)}"' in prompts.pop("_system")
    for tid, prompt in prompts.items():
        own = prompt.split("## Results of the tasks this one depends on", 1)[0]  # what its dependencies did
        assert len(own.encode()) < max(3_000, len(source) // 4), (tid, len(own), len(source))
        assert "## Notes from tasks.md" not in prompt and "Implementation Strategy" not in prompt
    for tid, needles in case.get("prompt", {}).items():
        assert all(n in prompts[tid] for n in needles), tid
    for tid, needles in case.get("not_in_prompt", {}).items():
        assert not any(n in prompts[tid] for n in needles), tid
    # the phase headings are the roadmap's: none is left empty in its text
    assert not re.search(r"^## Phase[^\n]*\n+(?:---\n+)*(?:## |```)", written, re.MULTILINE)


# ---------------------------------------------------------------- the same rules, small and hostile

def test_a_section_that_is_no_phase_is_the_phase_of_its_tasks():
    """A task under `## Other` after a phased task (no phase would be written under the
    phase before it, and the roadmap would not read back: nothing imported)."""
    imported = speckit.read("# X\n\n## Phase 1\n\n- [ ] T001 a\n\n## Later work\n\n- [ ] T002 b\n", "tasks.md")
    imported.checked_text()
    assert [(t.id, t.phase, t.depends_on) for t in imported.roadmap.tasks] == [
        ("T001", "Phase 1", ()), ("T002", "Later work", ("T001",))]


def test_phase_dependency_lines_that_name_no_phase_are_listed():
    text = ("# X\n\n## Phase 1: Foundational\n\n- [ ] T001 a\n\n## Phase 2: User Story 1\n\n- [ ] T002 [US1] b\n\n"
            "## Phase 3: User Story 2\n\n- [ ] T003 [US2] c\n\n## Dependencies\n\n"
            "- **US2 (Phase 3)**: Depends on US1 - needs its models\n- **US9 (Phase 9)**: Depends on US1\n"
            "- **User Story 1**: Depends on US7\n")
    imported = speckit.read(text, "tasks.md")
    tasks = {t.id: t for t in imported.roadmap.tasks}
    assert tasks["T002"].depends_on == ("T001",) and tasks["T003"].depends_on == ("T002",)
    assert "tasks.md:18: 'US9 (Phase 9)' names no phase with tasks; its dependency left out" in imported.unmapped
    assert "tasks.md:19: 'US7' names no earlier phase with tasks; left out" in imported.unmapped


def test_ranges_in_prose_name_a_bounded_number_of_dependencies():
    """Every line `T1-T2000 depend on T1-T2000` names 4 million dependencies: past a budget
    linear in the tasks the rest is left out, and said."""
    n = 2000
    text = ("# X\n\n## Phase 1\n\n" + "".join(f"- [ ] T{i} t\n" for i in range(1, n + 1)) + "\n## Dependencies\n\n"
            + f"- T1-T{n} depend on T1-T{n}\n" * 200)
    imported = speckit.read(text, "tasks.md")
    assert f"tasks.md: more than {100_000 + 20 * n} dependencies named in ranges and prose; the rest left out" \
        in imported.unmapped
    assert len(imported.roadmap.tasks) == n
    imported.checked_text()
