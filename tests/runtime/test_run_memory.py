"""Run memory (issue 30 item 1): what a task decides, fails at or constrains reaches the later
tasks of the run and of later runs (`.harness/memory/`), within the prompt's memory budget.

Real projects, a real command agent (each task's answer comes from answers/<task>.txt and
its prompt is saved to prompts/<task>.txt) and the real memory file; harnessc itself runs
in-process in virtual time (virtual.harnessc): what memory holds and tells is logic, not
process behaviour."""

from __future__ import annotations

import json
from pathlib import Path

from . import virtual
from .helpers import PY

AGENT = """\
import os, pathlib, sys
task = os.environ["HARNESSC_TASK"]
pathlib.Path("prompts").mkdir(exist_ok=True)
with open("prompts/" + task + ".txt", "a") as f:
    f.write(sys.stdin.read() + "\\n=====\\n")
answer = pathlib.Path("answers/" + task + ".txt")
print(answer.read_text() if answer.exists() else "")
print("<promise>DONE</promise>")
"""


def project(root: Path, tasks: dict[str, str], answers: dict[str, str], harness: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agent.py").write_text(AGENT)
    (root / "answers").mkdir(exist_ok=True)
    for tid, text in answers.items():
        (root / "answers" / f"{tid}.txt").write_text(text)
    (root / "harness.yaml").write_text(
        f"agents:\n  bot:\n    provider: command\n    command: [{json.dumps(PY)}, agent.py]\n"
        f"routing:\n  default: bot\ndefaults:\n  max_retries: 0\n{harness}")
    lines = ["# Memory", "", "## Tasks", ""]
    for k, (tid, goal) in enumerate(tasks.items()):  # -j 1 and priorities: the first task runs first
        lines += [f"- [ ] **{tid}**: Task {tid}", "  - completion_promise: DONE",
                  f"  - priority: {'high' if k == 0 else 'low'}", "", f"  {goal}", ""]
    (root / "roadmap.md").write_text("\n".join(lines) + "\n")
    return root


def prompt(root: Path, tid: str) -> str:
    return (root / "prompts" / f"{tid}.txt").read_text()


def run(root: Path, *args: str):
    r = virtual.harnessc(root, "run", "-j", "1", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def entries(root: Path) -> list[dict]:
    r = virtual.harnessc(root, "memory", "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["entries"]


def test_a_decision_reaches_an_independent_later_task(tmp_path):
    root = project(tmp_path / "p", {"a": "Create the ids module.", "b": "Store orders with their ids."},
                   {"a": "Done. <decision>we use UUIDv7 ids</decision>"})
    run(root)
    assert "we use UUIDv7 ids" not in prompt(root, "a")
    b = prompt(root, "b")
    assert "## Memory of earlier tasks" in b and "we use UUIDv7 ids" in b and "task a]" in b
    # after the cacheable prefix: the task's own part comes first, memory last
    assert b.index("# Task b") < b.index("## Memory of earlier tasks")
    listed = entries(root)
    decision = next(e for e in listed if e["kind"] == "decision")
    assert decision["text"] == "we use UUIDv7 ids" and decision["task"] == "a"
    # across runs: a new task of a later run is told too; forget removes it
    (root / "roadmap.md").write_text((root / "roadmap.md").read_text()
                                     + "- [ ] **c**: Task c\n  - completion_promise: DONE\n\n  Export ids.\n")
    r = virtual.harnessc(root, "memory", "forget", decision["id"])
    assert r.returncode == 0 and decision["id"] in r.stdout, r.stdout + r.stderr
    assert all(e["id"] != decision["id"] for e in entries(root))
    r = virtual.harnessc(root, "memory", "forget", "d-nosuchid")
    assert r.returncode == 1 and "no memory entry d-nosuchid" in r.stderr
    run(root, "-s", "c")
    assert "UUIDv7" not in prompt(root, "c")


def test_constraints_hold_until_they_expire(tmp_path):
    root = project(tmp_path / "p", {"a": "Set up.", "b": "Build the API.", "c": "Build the UI."},
                   {"a": '<constraint>the API returns problem+json</constraint>'
                         '<constraint expires="2000-01-01">freeze the schema</constraint>'
                         '<constraint expires="run">do not touch vendor/</constraint>'})
    run(root)
    b = prompt(root, "b")
    assert "Active constraints:" in b and "the API returns problem+json" in b
    assert "do not touch vendor/ (until the run ends)" in b
    assert "freeze the schema" not in b  # expired in 2000
    # the next run: the run-only constraint is gone, the lasting one stays
    (root / "prompts" / "c.txt").unlink()
    run(root, "--rerun", "all", "-s", "c")
    c = prompt(root, "c")
    assert "the API returns problem+json" in c and "vendor/" not in c


def test_a_rejected_attempt_failure_reaches_tasks_on_its_files(tmp_path):
    root = project(tmp_path / "p", {"a": "Make the db.", "b": "Query the db."}, {
        "a": '<failure cause="foreign keys are off by default" fix="PRAGMA foreign_keys=ON">'
             'the test DB dropped cascades</failure>'})
    # both tasks name the same file: a failure on it is shown to the other
    text = (root / "roadmap.md").read_text().replace("  - completion_promise: DONE",
                                                     "  - completion_promise: DONE\n  - context: db.sql")
    (root / "roadmap.md").write_text(text)
    (root / "db.sql").write_text("create table t (id int);\n")
    run(root)
    b = prompt(root, "b")
    assert "Failures on your files:" in b
    assert ("the test DB dropped cascades; cause: foreign keys are off by default; fix: PRAGMA foreign_keys=ON"
            in b)


def test_a_damaged_memory_file_is_set_aside_and_memory_starts_empty(tmp_path):
    root = project(tmp_path / "p", {"a": "Set up.", "b": "Build."}, {"a": "<decision>tabs, not spaces</decision>"})
    memdir = root / ".harness" / "memory"
    memdir.mkdir(parents=True)
    (memdir / "memory.jsonl").write_text('{"id": "d-1", "kind": "decision", "text": "old", "task": "x"}\n'
                                         "this line was edited by hand\n")
    r = run(root)
    assert "memory.jsonl: line 2 is not JSON" in r.stderr and "memory starts empty" in r.stderr
    assert "this line was edited by hand" in (memdir / "memory.jsonl.damaged").read_text()  # nothing lost
    b = prompt(root, "b")
    assert "tabs, not spaces" in b and "old" not in b.split("## Memory of earlier tasks")[1]
    assert [e["text"] for e in entries(root) if e["kind"] == "decision"] == ["tabs, not spaces"]


def test_memory_off_records_and_tells_nothing(tmp_path):
    root = project(tmp_path / "p", {"a": "Set up.", "b": "Build."}, {"a": "<decision>we use UUIDv7 ids</decision>"},
                   harness="memory: off\n")
    run(root)
    assert "UUIDv7" not in prompt(root, "b") and "Memory of earlier tasks" not in prompt(root, "b")
    assert not (root / ".harness" / "memory" / "memory.jsonl").exists()
    plan = json.loads((root / ".harness" / "build" / "plan.json").read_text())
    assert plan["memory"] == {"on": False}


def test_the_memory_section_stays_within_inject_tokens(tmp_path):
    many = "".join(f"<decision>decision number {i} about the orders service and its storage layout</decision>"
                   for i in range(20))
    root = project(tmp_path / "p", {"a": "Set up.", "b": "Build the orders service."}, {"a": many},
                   harness="memory:\n  inject_tokens: 120\n")
    run(root)
    section = prompt(root, "b").split("## Memory of earlier tasks")[1].split("\n=====")[0]
    from harnessc.estimates import estimate_tokens
    assert "decision number" in section and estimate_tokens("## Memory of earlier tasks" + section) <= 120


def test_a_rejected_attempt_is_remembered_as_a_failure_on_its_files(tmp_path):
    root = project(tmp_path / "p", {"a": "Make the db.", "b": "Query the db."}, {})
    # a's first answer fails its accept command (no a.ok yet); its second passes
    (root / "agent.py").write_text(AGENT.replace('print("<promise>DONE</promise>")', (
        'tries = pathlib.Path(task + ".tries")\n'
        'tries.write_text(str(int(tries.read_text() if tries.exists() else 0) + 1))\n'
        'if task != "a" or tries.read_text() == "2":\n'
        '    pathlib.Path(task + ".ok").write_text("ok")\n'
        'print("<promise>DONE</promise>")')))
    text = (root / "roadmap.md").read_text().replace(
        "  - completion_promise: DONE", "  - completion_promise: DONE\n  - context: db.sql\n  - max_retries: 2", 1)
    text = text.replace("  - priority: high", "  - priority: high\n  - accept: test -f a.ok", 1)
    (root / "roadmap.md").write_text(text)
    (root / "db.sql").write_text("create table t (id int);\n")
    text = (root / "roadmap.md").read_text()
    (root / "roadmap.md").write_text(text.replace("  - priority: low", "  - priority: low\n  - context: db.sql"))
    run(root)
    failure = next(e for e in entries(root) if e["kind"] == "failure")
    assert failure["task"] == "a" and "test -f a.ok" in failure["text"] and failure["files"] == ["db.sql", "a.ok"]  # its context, what its accept names
    b = prompt(root, "b")
    assert "Failures on your files:" in b and failure["id"] in b


def test_show_lists_what_a_task_told_memory(tmp_path):
    root = project(tmp_path / "p", {"a": "Set up.", "b": "Build."}, {"a": "<decision>we use UUIDv7 ids</decision>"})
    run(root)
    r = virtual.harnessc(root, "show", "a")
    assert r.returncode == 0 and "memory: 1 entry" in r.stdout and "we use UUIDv7 ids" in r.stdout, r.stdout
    r = virtual.harnessc(root, "show", "a", "--output", "json")
    assert [e["text"] for e in json.loads(r.stdout)["memory"]] == ["we use UUIDv7 ids"]
    assert "memory:" not in virtual.harnessc(root, "show", "b").stdout


def test_show_prints_the_memory_section_the_task_was_given(tmp_path):
    root = project(tmp_path / "p", {"a": "Set up the ids.", "b": "Build the ids API."}, {
        "a": '<decision>we use UUIDv7 ids</decision><constraint expires="run">keep vendor/ as it is</constraint>'})
    run(root)
    decision = next(e for e in entries(root) if e["kind"] == "decision")
    r = virtual.harnessc(root, "show", "b")
    assert r.returncode == 0, r.stdout + r.stderr
    given = r.stdout.split("memory given to its last attempt (`harnessc log b --last` has the whole prompt):\n")[1]
    assert f"  Decisions:\n  - we use UUIDv7 ids [{decision['id']}, task a]\n" in given, r.stdout
    assert "  Active constraints:\n  - keep vendor/ as it is (until the run ends)" in given
    assert "What earlier tasks" not in given and "<promise>" not in given  # the section only
    shown = json.loads(virtual.harnessc(root, "show", "b", "--output", "json").stdout)["memory_given"]
    assert shown.startswith("So far:\n- task a (Task a) succeeded") and shown in prompt(root, "b")
    assert "memory given" not in virtual.harnessc(root, "show", "a").stdout  # memory was empty when a ran


def test_the_memory_section_of_a_prompt_ends_where_its_next_part_starts():
    from harnessc.runtime.memory import recall

    summary = "- ids are UUIDv7\n## not a heading of the prompt: the summary's own line\n- more"
    section = recall.render({"summary": [{"text": summary, "written": "cheap"}],
                             "decisions": [{"id": "d-1", "kind": "decision", "text": "x", "task": "a"}],
                             "failures": [], "constraints": []})
    prompt = "Task b.\n" + section + "\n## Your previous attempt did not pass verification\n\n- an error\n"
    given = recall.given(prompt)
    assert given == ("So far:\n(the running summary, written by its summary agent)\n" + summary
                     + "\n(end of the summary)\n\nDecisions:\n- x [d-1, task a]")
    assert recall.given("Task b.\n") == "" and recall.given(None) == ""


def test_memory_lists_say_a_hand_edited_file_once_and_keep_it(tmp_path):
    root = project(tmp_path / "p", {"a": "Set up."}, {})
    memdir = root / ".harness" / "memory"
    memdir.mkdir(parents=True)
    for bad, why in ((b'{"kind": "decision", "text": "no id", "task": "a"}\n', "line 1: an entry needs a string 'id'"),
                     (b'{"id": "x", "kind": "rumour", "text": "t", "task": "a"}\n', "line 1: unknown kind 'rumour'"),
                     (b"\xff\xfe not text\n", "it is not UTF-8 text"), (b"[1, 2]\n", "line 1 is not a JSON object")):
        (memdir / "memory.jsonl").write_bytes(bad)
        r = virtual.harnessc(root, "memory")
        assert r.returncode == 0 and why in r.stderr and "memory starts empty" in r.stderr, (bad, r.stderr)
        assert "Traceback" not in r.stderr and "memory is empty" in r.stdout
        assert (memdir / "memory.jsonl.damaged").read_bytes() == bad
        assert virtual.harnessc(root, "memory").stderr == ""  # said once: the file is aside now


def test_isolated_tasks_remember_what_landed(tmp_path):
    from .helpers import git, git_repo

    root = project(tmp_path / "p", {"a": "Create the ids module.", "b": "Store orders with their ids."},
                   {"a": "Done. <decision>we use UUIDv7 ids</decision>"}, harness="defaults:\n  isolation: worktree\n")
    # in a worktree the agent's directory is the checkout: prompts and answers by absolute path
    (root / "agent.py").write_text(AGENT.replace('"prompts', repr(str(root)) + ' + "/prompts')
                                   .replace('"answers/', repr(str(root)) + ' + "/answers/'))
    (root / "harness.yaml").write_text((root / "harness.yaml").read_text().replace(
        "defaults:\n  max_retries: 0\ndefaults:\n  isolation: worktree\n", "defaults:\n  max_retries: 0\n  isolation: worktree\n"))
    (root / ".gitignore").write_text(".harness/\nprompts/\n")
    git_repo(root)
    run(root)
    assert "we use UUIDv7 ids" in prompt(root, "b") and "we use UUIDv7 ids" not in prompt(root, "a")
    assert "a" in git(root, "log", "--format=%s")
