"""The importers' shared pieces (harnessc/importers/__init__.py): ids kept distinct, the
source named relative to the project, and the summary `import` prints."""

from __future__ import annotations

from collections import Counter

from harnessc.compiler.tasks import Roadmap
from harnessc.importers import Ids, Imported, source_name


def test_a_second_task_with_a_taken_id_is_kept_with_a_suffix_and_a_warning_naming_both_places():
    warnings: list[str] = []
    ids = Ids(warnings)
    assert [ids.claim("T021", f"tasks.md:{n}") for n in (10, 20, 30)] == ["T021", "T021-2", "T021-3"]
    assert ids.claim("T022", "tasks.md:40") == "T022"
    assert warnings == [
        "tasks.md:20: a second task T021 (the first is tasks.md:10); kept as T021-2 (a dependency on T021 means the first)",
        "tasks.md:30: a second task T021 (the first is tasks.md:10); kept as T021-3 (a dependency on T021 means the first)",
    ]


def test_the_source_is_named_relative_to_the_project_never_by_an_absolute_path(tmp_path):
    (tmp_path / ".taskmaster" / "tasks").mkdir(parents=True)
    inside = tmp_path / ".taskmaster" / "tasks" / "tasks.json"
    assert source_name(inside, tmp_path) == ".taskmaster/tasks/tasks.json"
    assert source_name(str(inside), str(tmp_path / ".")) == ".taskmaster/tasks/tasks.json"
    assert source_name("/elsewhere/specs/001/tasks.md", tmp_path) == "tasks.md"


def test_the_summary_counts_statuses_and_lists_each_unmapped_field_once():
    imported = Imported(Roadmap(path="roadmap.md"), unmapped=["tm-4: priority 'urgent' is not high, medium or low"],
                        warnings=["tm-5: dependency on tm-4 dropped"],
                        fields={"parentTaskId": [f"tm-3.{i}" for i in range(1, 203)], "complexityScore": ["tm-4"]},
                        statuses=Counter({"done -> [x]": 3, "pending -> open": 2}))
    assert imported.summary() == [
        "statuses:",
        "  - 3 done -> [x]",
        "  - 2 pending -> open",
        "warnings (1):",
        "  - tm-5: dependency on tm-4 dropped",
        "not mapped (3):",
        "  - field 'parentTaskId' on 202 tasks (tm-3.1, tm-3.2, tm-3.3, ...): not imported",
        "  - field 'complexityScore' on 1 task (tm-4): not imported",
        "  - tm-4: priority 'urgent' is not high, medium or low",
    ]
