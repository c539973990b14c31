"""min_passed: an accept command whose test runner reports too few passing tests fails, so an
agent cannot make its check pass by deleting the tests (`min_passed: base`: no fewer than
at the task's base commit, measured once per base and kept).

Real projects built from roadmap.md, real git, a real command agent and real test runners
(pytest and unittest, run by this venv's python)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from .helpers import PY, env, git, git_repo, harnessc

TESTS = "import unittest\n\n\nclass Calc(unittest.TestCase):\n" + "".join(
    f"    def test_{i}(self):\n        self.assertEqual({i} + 1, {i + 1})\n\n" for i in range(5))
FEWER = "import unittest\n\n\nclass Calc(unittest.TestCase):\n" + "".join(
    f"    def test_{i}(self):\n        self.assertEqual({i} + 1, {i + 1})\n\n" for i in range(2))

# The agent: `cut` tasks delete 3 of the 5 tests (the 2 left pass), the others leave them;
# every task writes a file of its own and prints the promise.
AGENT = f"""\
import os, pathlib
task = os.environ["HARNESSC_TASK"]
if task.startswith("cut"):
    pathlib.Path("test_calc.py").write_text({FEWER!r})
if task.startswith("plant"):  # a JUnit file saying 9 tests passed, for a command that writes none
    pathlib.Path("build").mkdir(exist_ok=True)
    pathlib.Path("build", "junit.xml").write_text("<testsuite>" + "<testcase name='t'/>" * 9 + "</testsuite>")
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".txt").write_text("made by " + task + "\\n")
print("done <promise>DONE</promise>")
"""

# pytest's conftest: each test run adds its directory to a counter file outside the project
CONFTEST = """\
import os, pathlib
pathlib.Path({counter!r}).open("a").write(os.getcwd() + "\\n")
"""

PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"
# The checks' pytest without this venv's plugins (hypothesis, xdist: half its start-up), which
# the counted tests do not use; the accept commands inherit the run's environment.
def plain_pytest() -> dict:
    return env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")

UNITTEST = f"{PY} -m unittest"


def project(root: Path, tasks: dict[str, dict], contracts: str | None = None) -> Path:
    """A git project with 5 passing tests in test_calc.py; `tasks`: id -> properties."""
    root.mkdir(parents=True, exist_ok=True)
    counter = root.parent / (root.name + "-runs.txt")
    (root / "test_calc.py").write_text(TESTS)
    (root / "conftest.py").write_text(CONFTEST.format(counter=str(counter)))
    (root / "agent.py").write_text(AGENT)
    (root / "harness.yaml").write_text(
        f"agents:\n  bot:\n    provider: command\n    command: [{json.dumps(PY)}, agent.py]\n"
        "routing:\n  default: bot\ndefaults:\n  max_retries: 0\n")
    lines = ["# Tests that count", "", "## Tasks", ""]
    for tid, props in tasks.items():
        lines.append(f"- [ ] **{tid}**: Task {tid}")
        lines += [f"  - {key}: {value}" for key, value in {"completion_promise": "DONE", **props}.items()]
    (root / "roadmap.md").write_text("\n".join(lines) + "\n")
    if contracts:
        (root / "contracts.yaml").write_text(contracts)
    git_repo(root, commit=False)
    with (root / ".gitignore").open("a") as f:
        f.write(".harness/\n__pycache__/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return counter


def run(root: Path, *args: str):
    return harnessc(root, "run", *args, timeout=600, env=plain_pytest())


def states(root: Path) -> dict[str, str]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    return dict(db.execute("SELECT id, state FROM tasks"))


def errors(root: Path, tid: str) -> str:
    db = sqlite3.connect(root / ".harness" / "state.db")
    return "\n".join(e or "" for (e,) in db.execute("SELECT errors FROM attempts WHERE task_id = ?", (tid,)))


def events(root: Path, kind: str) -> list[dict]:
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id, data FROM events WHERE kind = ? ORDER BY id", (kind,)).fetchall()
    return [{"task": t, **json.loads(d or "{}")} for t, d in rows]


def base_runs(counter: Path) -> list[str]:
    """The test runs in a checkout of the base (worktree 0-<k>), from pytest's counter."""
    return [d for d in counter.read_text().splitlines() if Path(d).name.startswith("0-")] if counter.exists() else []


ISOLATED = {"accept": PYTEST, "isolation": "worktree"}


def test_deleting_tests_fails_min_passed_base_and_the_base_is_measured_once(tmp_path: Path) -> None:
    root = tmp_path / "p"
    counter = project(root, {
        "cut": {**ISOLATED, "min_passed": "base"},
        "keep1": {**ISOLATED, "min_passed": "base"},
        "keep2": {**ISOLATED, "min_passed": "base"},
        "keep3": {**ISOLATED, "min_passed": "base"},
    })
    r = run(root)
    got = states(root)
    assert got == {"cut": "failed", "keep1": "succeeded", "keep2": "succeeded", "keep3": "succeeded"}, \
        r.stdout + r.stderr
    assert "2 passed, 5 required (as many as at the base commit)" in errors(root, "cut")
    # the cut never landed: the user's branch still has the 5 tests
    assert (root / "test_calc.py").read_text() == TESTS
    # four tasks on one base commit: the base's tests ran once
    measured = events(root, "min_passed_base")
    assert [e["passed"] for e in measured] == [5], measured
    assert len(base_runs(counter)) == 1, counter.read_text()


def test_a_fixed_minimum_fails_the_same_cut_and_passes_kept_tests(tmp_path: Path) -> None:
    root = tmp_path / "p"
    project(root, {"cut": {**ISOLATED, "min_passed": 5}, "keep": {**ISOLATED, "min_passed": 5}})
    r = run(root)
    assert states(root) == {"cut": "failed", "keep": "succeeded"}, r.stdout + r.stderr
    assert "accept check 'task-accept-1': 2 passed, 5 required" in errors(root, "cut")
    assert events(root, "min_passed_base") == []  # a number needs no base run


def test_unittest_counts_and_a_contract_entry_holds_its_own_minimum(tmp_path: Path) -> None:
    root = tmp_path / "p"
    contracts = ("contracts:\n  tested:\n    accept:\n"
                 f"      - {{id: unit, run: {json.dumps(UNITTEST)}, min_passed: base}}\n")
    project(root, {"cut": {"contract": "tested", "isolation": "worktree"},
                   "keep": {"contract": "tested", "isolation": "worktree"}}, contracts)
    r = run(root)
    assert states(root) == {"cut": "failed", "keep": "succeeded"}, r.stdout + r.stderr
    assert "accept check 'unit': 2 passed, 5 required" in errors(root, "cut")


def test_the_shared_tree_is_measured_before_the_first_attempt_and_kept_across_runs(tmp_path: Path) -> None:
    root = tmp_path / "p"
    counter = project(root, {"cut": {"accept": PYTEST, "min_passed": "base"}})
    r = run(root)
    assert states(root) == {"cut": "failed"}, r.stdout + r.stderr
    assert "2 passed, 5 required" in errors(root, "cut")
    assert (root / "test_calc.py").read_text() == FEWER  # the shared tree holds the cut
    # tried again: the tree now has 2 tests, but the count before the first attempt is kept
    r = harnessc(root, "retry", "cut", timeout=600, env=plain_pytest())  # runs it again
    assert states(root) == {"cut": "failed"}, r.stdout + r.stderr
    assert errors(root, "cut").count("2 passed, 5 required") == 2
    assert [e["passed"] for e in events(root, "min_passed_base")] == [5]
    assert len(counter.read_text().splitlines()) == 3  # one base run, two checks


def test_a_check_whose_output_has_no_count_fails(tmp_path: Path) -> None:
    root = tmp_path / "p"
    project(root, {"quiet": {**ISOLATED, "accept": f"{PY} -c pass", "min_passed": 1}})
    run(root)
    assert states(root) == {"quiet": "failed"}
    assert "no test count found in the output of" in errors(root, "quiet")


def test_a_junit_file_gives_the_count_and_a_planted_one_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "p"
    writes = json.dumps(PYTEST + " --junitxml=build/junit.xml")
    contracts = ("contracts:\n"
                 f"  tested:\n    accept:\n      - {{id: junit, run: {writes}, min_passed: 5, junit: build/junit.xml}}\n"
                 f"  unwritten:\n    accept:\n      - {{id: junit, run: {json.dumps(PYTEST)}, min_passed: 5, "
                 "junit: build/junit.xml}\n")
    root.mkdir()
    (root / ".gitignore").write_text("build/\n")
    project(root, {"cut": {"contract": "tested", "isolation": "worktree"},
                   "keep": {"contract": "tested", "isolation": "worktree"},
                   "plant": {"contract": "unwritten", "isolation": "worktree"}}, contracts)
    r = run(root)
    assert states(root) == {"cut": "failed", "keep": "succeeded", "plant": "failed"}, r.stdout + r.stderr
    assert "accept check 'junit': 2 passed, 5 required" in errors(root, "cut")
    assert "accept check 'junit': no test count: junit.xml was not written" in errors(root, "plant")


def _held(cmd, out: str, root: Path, floors=None) -> list[str]:
    from harnessc.runtime.children.procs import ProcResult
    from harnessc.runtime.verify import held_to_count

    return held_to_count(cmd, ProcResult(argv=cmd.argv, returncode=0, stdout=out), root, floors, {})


def test_a_junit_path_through_a_link_out_of_the_checkout_is_not_read(tmp_path: Path) -> None:
    from harnessc.planfile import CountedAccept

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "junit.xml").write_text("<testsuite>" + "<testcase name='t'/>" * 9 + "</testsuite>")
    root = tmp_path / "p"
    root.mkdir()
    (root / "build").symlink_to(outside)
    cmd = CountedAccept("tests", ["pytest"], None, 5, "build/junit.xml")
    assert _held(cmd, "", root) == ["accept check 'tests': its JUnit file build/junit.xml is not inside the checkout"]


def test_base_unknown_fails_as_not_proven_and_a_base_without_count_asks_for_any(tmp_path: Path) -> None:
    from harnessc.planfile import CountedAccept

    cmd = CountedAccept("tests", ["pytest"], None, "base", None)
    assert "cannot be proven" in _held(cmd, "5 passed in 0.1s", tmp_path, floors={})[0]
    assert _held(cmd, "0 passed, 1 skipped in 0.1s", tmp_path, floors={"tests": None}) == []
    assert _held(cmd, "4 passed in 0.1s", tmp_path, floors={"tests": 5}) == [
        "accept check 'tests': 4 passed, 5 required (as many as at the base commit)"]


def test_a_counted_check_keeps_the_end_of_a_huge_output(tmp_path: Path) -> None:
    import asyncio

    from harnessc.planfile import CountedAccept
    from harnessc.runtime.verify import passed_count_of, run_accept

    noisy = "import sys\nfor i in range(100000): sys.stdout.write('x' * 30 + '\\n')\nprint('5 passed in 0.1s')"
    cmd = CountedAccept("tests", [PY, "-c", noisy], None, 5, None)
    res = asyncio.run(run_accept(cmd, tmp_path, 300))
    assert res.ok and res.truncated  # 3 MB printed, the last 1 MiB kept
    assert passed_count_of(cmd, res, tmp_path) == (5, None)
