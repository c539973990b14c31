"""The user's edits during a run (runtime/useredits.py): a person edits the task's files
between its attempts, from outside the run, and the next prompt carries the diff with
"keep these changes"; the agent's own writes and an unrelated file are never shown as the
user's. Real specs built by `harnessc build`, real git, a real command agent, the real CLI;
waits poll the run's events."""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time
from pathlib import Path

import inproc

from .helpers import PY, git, git_repo, spawn

KEEP = "Changed by the user since your last attempt: keep these changes"

# The agent writes what agent.cfg says for its iteration ({"1": {"path": "text"}}, or
# {"<task><iteration>": ...}) and
# claims the promise whatever it did.
AGENT = """\
import ast, os, pathlib, sys
it, task = os.environ["HARNESSC_ITERATION"], os.environ["HARNESSC_TASK"]
cfg = ast.literal_eval(pathlib.Path(sys.argv[1]).read_text())
for path, text in cfg.get(task + it, cfg.get(it, {})).items():
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
print("done <promise>DONE</promise>")
"""
# The accept check: passes once calc.add adds; writes a log each time it runs (a check's own write).
CHECK = """\
import pathlib, sys
sys.path.insert(0, "src")
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out/check.log").write_text("ran\\n", encoding="utf-8")
import calc
assert calc.add(2, 3) == 5, "add is wrong"
"""


def make(root: Path, steps: dict, isolation: str = "none", more: str = "", in_git: bool = True,
         promise: str = "DONE") -> None:
    """A project whose task `calc` fails its accept check until calc.add adds; `promise`:
    its completion promise (a loop task), "" for none."""
    root.mkdir(parents=True)
    (root / "roadmap.md").write_text(textwrap.dedent(f"""\
        ## Tasks

        - [ ] **calc**: Make calc.add add
          - agent: bot
          {f"- completion_promise: {promise}" if promise else "- tags: plain"}
          - accept: {PY} check.py
          - context: notes/design.md, out/check.log
          - isolation: {isolation}
        """) + more)
    (root / "harness.yaml").write_text(
        f"agents:\n  bot: {{provider: command, command: [{PY}, {root / 'agent.py'}, {root.parent / 'agent.cfg'}]}}\n"
        "defaults:\n  max_retries: 3\n  retry_delays: [1000]\n")
    (root / "agent.py").write_text(AGENT)
    (root.parent / "agent.cfg").write_text(repr(steps))
    (root / "check.py").write_text(CHECK)
    (root / "notes").mkdir()
    (root / "notes" / "design.md").write_text("# Design\n\nadd(a, b) returns a sum.\n")
    (root / "out").mkdir()
    (root / "out" / "check.log").write_text("never ran\n")
    (root / "unrelated.txt").write_text("old\n")
    if not in_git:
        return
    git_repo(root)
    (root / ".gitignore").write_text(".harness/\n__pycache__/\n")
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "ignore caches")


def events(root: Path) -> list[dict]:
    out = []
    for d in sorted((root / ".harness" / "runs").glob("*")):
        path = d / "events.jsonl"
        if path.exists():
            out += [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return out


def wait_rejected(root: Path, proc) -> None:
    """Until the first attempt is rejected (its checks over: the tree is the user's now)."""
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if any(e["kind"] == "attempt_finished" and e.get("status") == "rejected" for e in events(root)):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"no rejected attempt: {proc.communicate(timeout=30)}")


def prompts(root: Path) -> list[str]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    try:
        return [r[0] for r in db.execute("SELECT prompt FROM attempts WHERE task_id='calc' ORDER BY id")]
    finally:
        db.close()


def run_with_an_edit_between_attempts(root: Path, edit, jobs: str = "1") -> list[str]:
    """`harnessc run`; after the first attempt's rejection the user edits (edit()), then an
    urgent instruction cuts the 1000 s retry delay short. The attempts' prompts."""
    assert inproc.harnessc("-C", str(root), "build").returncode == 0
    p = spawn(root, "run", "--jobs", jobs)  # a real run: the edit comes from outside it
    wait_rejected(root, p)
    edit()
    r = inproc.harnessc("-C", str(root), "tell", "calc", "go on", "--urgent")
    assert r.returncode == 0, r
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, (out, err)
    return prompts(root)


def test_the_users_edit_between_attempts_is_in_the_next_prompt_and_the_agents_writes_are_not(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"src/calc.py": "def add(a, b):\n    return a - b\n",
                      "src/helper.py": "HELP = 1\n"},
                "2": {"src/calc.py": "def add(a, b):\n    # the user's note stays\n    return a + b\n"}})

    def edit():  # the person, from outside the run
        (root / "notes" / "design.md").write_text("# Design\n\nadd(a, b) returns a sum; ints only.\n")
        (root / "src" / "calc.py").write_text("def add(a, b):\n    # the user's note stays\n    return a - b\n")
        (root / "unrelated.txt").write_text("new\n")

    first, second = run_with_an_edit_between_attempts(root, edit)
    assert KEEP not in first
    assert KEEP in second
    section = second[second.index(KEEP):]
    # a context file and a file its earlier attempt changed, each with its diff
    assert "- notes/design.md: changed" in section
    assert "+add(a, b) returns a sum; ints only." in section and "-add(a, b) returns a sum." in section
    assert "- src/calc.py: changed" in section and "+    # the user's note stays" in section
    # the agent's own writes, the check's log and a file not the task's: not the user's
    assert "src/helper.py" not in section and "out/check.log" not in section
    assert "unrelated.txt" not in section
    assert "changed by the user" not in section.split("## Instructions from the operator")[0].lower().replace(
        KEEP.lower(), "")


def test_nothing_edited_between_attempts_adds_nothing(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"src/calc.py": "def add(a, b):\n    return a - b\n"},
                "2": {"src/calc.py": "def add(a, b):\n    return a + b\n"}})
    first, second = run_with_an_edit_between_attempts(root, lambda: None)
    assert KEEP not in first and KEEP not in second


def test_binary_and_large_edits_are_named_only(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"src/calc.py": "def add(a, b):\n    return a - b\n"},
                "2": {"src/calc.py": "def add(a, b):\n    return a + b\n"}})
    text = (root / "roadmap.md").read_text().replace("out/check.log", "out/check.log, data/blob.bin, data/big.txt")
    (root / "roadmap.md").write_text(text)
    (root / "data").mkdir()
    (root / "data" / "blob.bin").write_text("not yet\n")
    (root / "data" / "big.txt").write_text("small\n")

    def edit():
        (root / "data" / "blob.bin").write_bytes(b"\0\1\2" * 100)
        (root / "data" / "big.txt").write_text("line of text\n" * 5000)  # 65,000 characters: past the budget

    _, second = run_with_an_edit_between_attempts(root, edit)
    section = second[second.index(KEEP):]
    assert "- data/blob.bin: changed (a binary file: not shown)" in section
    assert "- data/big.txt: changed (its diff is past this section's budget: read the file)" in section
    assert "line of text" not in section


def test_an_isolated_task_is_told_of_uncommitted_edits_to_its_files(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"src/calc.py": "def add(a, b):\n    return a - b\n"},
                "2": {"src/calc.py": "def add(a, b):\n    return a + b\n"}}, isolation="worktree")

    def edit():
        (root / "notes" / "design.md").write_text("# Design\n\nints only.\n")
        (root / "unrelated.txt").write_text("new\n")

    first, second = run_with_an_edit_between_attempts(root, edit)
    assert "not committed" not in first
    note = second[second.index("## Edited by the user, not committed"):]
    assert "- notes/design.md" in note and "committed, they are in the task's base on its next run" in note
    assert "unrelated.txt" not in note
    assert KEEP not in second


def test_another_tasks_agent_writing_the_tasks_file_is_not_the_users(tmp_path):
    root = tmp_path / "p"
    other = textwrap.dedent("""\

        - [ ] **docs**: Reword the design notes
          - agent: bot
          - context: notes/design.md
        """)
    make(root, {"calc1": {"src/calc.py": "def add(a, b):\n    return a - b\n"},
                "calc2": {"src/calc.py": "def add(a, b):\n    return a + b\n"},
                "docs1": {"notes/design.md": "# Design\n\nreworded by the docs agent\n"}}, more=other)

    def edit():  # once the other task is done: its agent's write came in a busy spell
        end = time.monotonic() + 120
        while not any(e["kind"] == "attempt_finished" and e.get("task") == "docs" for e in events(root)):
            assert time.monotonic() < end, events(root)
            time.sleep(0.05)
        (root / "src" / "calc.py").write_text("def add(a, b):\n    # mine\n    return a - b\n")

    _, second = run_with_an_edit_between_attempts(root, edit, jobs="2")
    assert (root / "notes" / "design.md").read_text() == "# Design\n\nreworded by the docs agent\n"
    section = second[second.index(KEEP):]
    assert "- src/calc.py: changed" in section and "+    # mine" in section
    assert "notes/design.md" not in section and "reworded" not in section


def test_outside_git_the_edited_file_is_shown_as_it_now_reads_and_a_link_is_never_followed(tmp_path):
    root = tmp_path / "p"
    (tmp_path / "secret.txt").write_text("outside the project\n")
    make(root, {"1": {"src/calc.py": "def add(a, b):\n    return a - b\n"},
                "2": {"src/calc.py": "def add(a, b):\n    return a + b\n"}}, in_git=False)
    text = (root / "roadmap.md").read_text().replace("out/check.log", "out/check.log, notes/extra.md")
    (root / "roadmap.md").write_text(text)
    (root / "notes" / "extra.md").write_text("extra\n")

    def edit():
        (root / "notes" / "design.md").write_text("# Design\n\nints only.\n")
        (root / "notes" / "extra.md").unlink()
        (root / "notes" / "extra.md").symlink_to(tmp_path / "secret.txt")  # a link out of the project
        (root / "unrelated.txt").write_text("new\n")

    first, second = run_with_an_edit_between_attempts(root, edit)
    assert KEEP not in first
    section = second[second.index(KEEP):]
    assert "- notes/design.md: changed; it now reads" in section and "ints only." in section
    assert "- notes/extra.md: changed (not a regular file: not shown)" in section
    assert "outside the project" not in second
    assert "unrelated.txt" not in section


def test_a_link_in_git_is_named_with_nothing_read_through_it(tmp_path):
    root = tmp_path / "p"
    (tmp_path / "secret.txt").write_text("outside the project\n")
    make(root, {"1": {"src/calc.py": "def add(a, b):\n    return a - b\n"},
                "2": {"src/calc.py": "def add(a, b):\n    return a + b\n"}})

    def edit():
        (root / "notes" / "design.md").unlink()
        (root / "notes" / "design.md").symlink_to(tmp_path / "secret.txt")

    _, second = run_with_an_edit_between_attempts(root, edit)
    section = second[second.index(KEEP):]
    assert "- notes/design.md: changed (a symbolic link: not shown)" in section
    assert "outside the project" not in second


def test_a_file_the_tasks_first_attempt_wrote_is_its_own_without_a_loop(tmp_path):
    root = tmp_path / "p"
    make(root, {"1": {"src/calc.py": "def add(a, b):\n    return a - b\n"},
                "2": {"src/calc.py": "def add(a, b):\n    # mine\n    return a + b\n"}}, promise="")

    def edit():
        (root / "src" / "calc.py").write_text("def add(a, b):\n    # mine\n    return a - b\n")

    _, second = run_with_an_edit_between_attempts(root, edit)
    section = second[second.index(KEEP):]
    assert "- src/calc.py: changed" in section and "+    # mine" in section
