"""The review gate (`review: true`): a verified task waits in state `review`, its change kept
off the integration branch, until `harnessc approve` (the running run lands it, or the next
run does); `reject` runs it again with the reason in its prompt. Real git, real worktrees,
a real command agent; real CLI processes where one talks to a run going on (approve,
reject) or two act at once, in-process runs (virtual.harnessc) elsewhere."""

from __future__ import annotations

import json
import sqlite3
import threading

from . import virtual
from .helpers import PY, git, git_repo, harnessc, node, spawn, write_project

# Writes out/<task>.txt, keeps each prompt it got in <marks>/<task>.prompt<iteration>, prints
# the promise. A task named in cfg["hold"] waits (up to 5 minutes) for the file <marks>/go.
AGENT = """\
import ast, os, pathlib, sys, time
task, it = os.environ["HARNESSC_TASK"], os.environ["HARNESSC_ITERATION"]
cfg = ast.literal_eval(pathlib.Path(sys.argv[1]).read_text())
marks = pathlib.Path(cfg["marks"])
prompt = sys.stdin.read()
n = len(list(marks.glob(task + ".prompt*"))) + 1
(marks / f"{task}.prompt{n}").write_text(prompt)
if task in cfg.get("hold", []):
    for _ in range(6000):
        if (marks / "go").exists():
            break
        time.sleep(0.05)
pathlib.Path("out").mkdir(exist_ok=True)
pathlib.Path("out", task + ".txt").write_text("made by " + task + "\\n")
print("done <promise>DONE</promise>")
"""


def project(root, tasks, review=(), hold=(), concurrency=2, **extra):
    """A git project whose tasks all run isolated on the agent above; `review`: the tasks
    with `review: true`; `extra`: task -> more of its plan fields."""
    bot = {"routing": {"agent": "bot"}, "completion_promise": "DONE", "isolation": "worktree"}
    nodes = [node(t, depends_on=list(deps), **bot, **({"review": True} if t in review else {}), **extra.get(t, {}))
             for t, deps in tasks.items()]
    write_project(root, nodes, agents={"bot": {"provider": "command", "command": [PY, str(root / "agent.py"),
                                                                                  str(root / "agent.cfg")]}},
                  concurrency=concurrency)
    (root / "agent.py").write_text(AGENT)
    marks = root.parent / (root.name + "-marks")
    marks.mkdir(exist_ok=True)
    (root / "agent.cfg").write_text(repr({"marks": str(marks), "hold": list(hold)}))
    git_repo(root)
    return marks


def run(root, *args):
    """`harnessc run --no-build ARGS`, in-process in virtual time: what the gate decides is
    logic; runs that another process talks to while they go on are real (spawn)."""
    return virtual.harnessc(root, "run", "--no-build", *args)


def states(root) -> dict[str, str]:
    db = sqlite3.connect(root / ".harness" / "state.db", timeout=30)
    try:
        return dict(db.execute("SELECT id, state FROM tasks").fetchall())
    except sqlite3.OperationalError:  # a run is creating it right now
        return {}
    finally:
        db.close()


def landed(root) -> list[str]:
    """The subjects of the commits on the integration branches."""
    out = git(root, "log", "--format=%s", "--branches=harnessc/run/*")
    return [s for s in out.splitlines() if s.startswith("harnessc: ")]


def poll(check, what: str, tries: int = 6000):
    """Wait for `check()` to be true (state, not time: many short looks)."""
    import time

    for _ in range(tries):
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_a_review_task_is_held_and_a_run_with_only_review_left_exits_3(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": ["a"]}, review={"a"})
    res = run(root)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "1 task waits for review" in res.stdout
    assert states(root) == {"a": "review", "b": "pending"}
    assert landed(root) == []  # nothing landed: a's change waits on its ref
    listed = virtual.harnessc(root, "review")
    assert listed.returncode == 0, listed.stderr
    assert "a: Task a" in listed.stdout and "git diff " in listed.stdout and "1 file changed" in listed.stdout
    data = json.loads(virtual.harnessc(root, "review", "--output", "json").stdout)
    diff = subprocess_out(root, data[0]["diff"])
    assert "out/a.txt" in diff and "made by a" in diff
    status = virtual.harnessc(root, "status")
    assert "review" in status.stdout


def subprocess_out(root, command: str) -> str:
    return git(root, *command.split()[1:])


def test_approved_with_no_run_going_on_lands_in_the_next_run(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": ["a"]}, review={"a"})
    assert run(root).returncode == 3
    res = virtual.harnessc(root, "approve", "a")
    assert res.returncode == 0, res.stderr
    assert "next `harnessc run`" in res.stdout
    assert states(root)["a"] == "review"  # recorded, not landed by the command
    assert landed(root) == []
    res = run(root)
    assert res.returncode == 0, res.stdout + res.stderr
    assert states(root) == {"a": "succeeded", "b": "succeeded"}
    subjects = landed(root)
    assert subjects.count("harnessc: a: Task a") == 1 and subjects.index("harnessc: a: Task a") > \
        subjects.index("harnessc: b: Task b")  # newest first: a landed before b ran
    assert "made by a" in git(root, "show", "HEAD:out/a.txt")  # the user's branch followed


def test_approved_from_another_process_while_the_run_waits(tmp_path):
    """a waits for review while c (independent) still works: `approve a` from another
    process is applied by the running run, which lands a and then runs b."""
    root = tmp_path / "p"
    marks = project(root, {"a": [], "b": ["a"], "c": []}, review={"a"}, hold={"c"})
    proc = spawn(root, "run", "--no-build")
    try:
        poll(lambda: (root / ".harness" / "state.db").exists() and states(root).get("a") == "review",
             "a in review")
        assert "a:" in harnessc(root, "review").stdout
        res = harnessc(root, "approve", "a")
        assert res.returncode == 0, res.stderr
        assert "the run in progress" in res.stdout
        poll(lambda: states(root).get("a") == "succeeded", "a approved by the run")
        (marks / "go").write_text("x")  # c may end now
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    assert states(root) == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    assert sorted(landed(root)) == ["harnessc: a: Task a", "harnessc: b: Task b", "harnessc: c: Task c"]


def test_reject_runs_the_task_again_with_the_reason_in_its_prompt(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"a": []}, review={"a"})
    assert run(root).returncode == 3
    res = virtual.harnessc(root, "reject", "a", "the greeting must be in French")
    assert res.returncode == 0, res.stderr
    assert run(root).returncode == 3  # ran again, waits for review again
    first, second = (marks / "a.prompt1").read_text(), (marks / "a.prompt2").read_text()
    assert "French" not in first
    assert "A reviewer rejected your last result" in second and "the greeting must be in French" in second
    assert states(root) == {"a": "review"}


def test_two_approves_at_once_land_once(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": []}, review={"a"})
    assert run(root).returncode == 3
    results = []

    def approve():
        results.append(harnessc(root, "approve", "a"))

    threads = [threading.Thread(target=approve) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    assert sum("already decided" in r.stdout for r in results) == 1
    res = run(root)
    assert res.returncode == 0, res.stdout + res.stderr
    assert landed(root) == ["harnessc: a: Task a"]


def test_approve_or_reject_of_an_unknown_task_or_one_not_in_review_is_an_error(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": []}, review={"a"})
    assert run(root).returncode == 3
    for args in (("approve", "nope"), ("reject", "nope", "why"), ("approve", "b"), ("reject", "b", "why"),
                 ("approve", "a", "b")):
        res = virtual.harnessc(root, *args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert "error:" in res.stderr and "hint: `harnessc review`" in res.stderr and "Traceback" not in res.stderr
    assert "not in review (it is succeeded)" in virtual.harnessc(root, "approve", "b").stderr
    assert states(root)["a"] == "review"  # nothing recorded by the refused `approve a b`
    assert virtual.harnessc(root, "run", "--no-build").returncode == 3


def test_auto_approve_lands_review_tasks_as_any_other(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": [], "b": ["a"]}, review={"a"})
    res = run(root, "--auto-approve")
    assert res.returncode == 0, res.stdout + res.stderr
    assert states(root) == {"a": "succeeded", "b": "succeeded"}


def test_best_of_n_holds_the_selected_approach_for_review(tmp_path):
    root = tmp_path / "p"
    project(root, {"a": []}, review={"a"})
    plan = root / ".harness" / "build" / "plan.json"
    data = json.loads(plan.read_text())
    data["nodes"][0]["approaches"] = {"n": 2, "select": "first", "score": None, "min_score": None, "agents": ["bot"]}
    plan.write_text(json.dumps(data))
    assert run(root).returncode == 3
    assert states(root) == {"a": "review"} and landed(root) == []
    assert virtual.harnessc(root, "approve", "a").returncode == 0
    assert run(root).returncode == 0
    assert landed(root) == ["harnessc: a: Task a"]


def test_review_is_read_from_the_task_or_its_contract_and_lint_warns_in_the_shared_tree(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "roadmap.md").write_text(
        "## Tasks\n\n- [ ] **a**: A\n  - completion_promise: DONE\n  - review: true\n\n"
        "- [ ] **b**: B\n  - contract: looked_at\n\n"
        "- [ ] **c**: C\n  - contract: looked_at\n  - review: false\n\n"
        "- [ ] **d**: D\n  - completion_promise: DONE\n  - review: maybe\n")
    (root / "contracts.yaml").write_text("contracts:\n  looked_at:\n    accept: ['true']\n    review: true\n")
    res = virtual.harnessc(root, "lint")
    assert res.returncode == 1 and "roadmap.md:16:13: error[HC105]: bad review 'maybe'" in res.stdout, res.stdout
    (root / "roadmap.md").write_text((root / "roadmap.md").read_text().replace("review: maybe", "review: no"))
    res = virtual.harnessc(root, "build")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "roadmap.md:5:13: warning[HC460]: task 'a' waits for review, but works in the shared tree" in res.stdout
    assert "warning[HC460]: task 'b'" in res.stdout and "task 'c' waits" not in res.stdout
    nodes = {n["id"]: n for n in json.loads((root / ".harness" / "build" / "plan.json").read_text())["nodes"]}
    assert {t: n["review"] for t, n in nodes.items()} == {"a": True, "b": True, "c": None, "d": None}


def test_rejected_from_another_process_while_the_run_waits_runs_again_in_that_run(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"a": [], "c": []}, review={"a"}, hold={"c"})
    proc = spawn(root, "run", "--no-build")
    try:
        poll(lambda: states(root).get("a") == "review", "a in review")
        res = harnessc(root, "reject", "a", "use tabs, not spaces")
        assert res.returncode == 0 and "the run in progress" in res.stdout, res.stdout + res.stderr
        poll(lambda: (marks / "a.prompt2").exists() and states(root).get("a") == "review", "a ran again")
        (marks / "go").write_text("x")
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, out + err
    assert "use tabs, not spaces" in (marks / "a.prompt2").read_text()
    assert states(root) == {"a": "review", "c": "succeeded"} and landed(root) == ["harnessc: c: Task c"]


def test_in_the_shared_tree_review_only_holds_the_dependents(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"a": [], "b": ["a"]}, review={"a"})
    plan = root / ".harness" / "build" / "plan.json"
    data = json.loads(plan.read_text())
    for n in data["nodes"]:
        n["isolation"] = None
    plan.write_text(json.dumps(data))
    assert run(root).returncode == 3
    assert states(root) == {"a": "review", "b": "pending"}
    assert (root / "out" / "a.txt").exists() and not (marks / "b.prompt1").exists()
    assert "not isolated" in virtual.harnessc(root, "review").stdout
    assert virtual.harnessc(root, "approve", "a").returncode == 0
    assert run(root).returncode == 0
    assert states(root) == {"a": "succeeded", "b": "succeeded"}


def test_an_approved_change_whose_base_moved_is_checked_again_on_the_merged_tree(tmp_path):
    """a waits for review; c lands meanwhile and makes a's check fail on the merged tree (it
    passed on a's own base): approving a blocks it with the check's failure, nothing lands."""
    root = tmp_path / "p"
    no_c = [{"id": "no-c", "argv": [PY, "-c", "import os, sys; sys.exit(os.path.exists('out/c.txt'))"],
             "timeout": 60}]
    project(root, {"a": [], "c": []}, review={"a"}, a={"accept": no_c})
    assert run(root, "-s", "a").returncode == 3
    assert run(root, "-s", "c").returncode == 0
    assert landed(root) == ["harnessc: c: Task c"]
    assert virtual.harnessc(root, "approve", "a").returncode == 0
    res = run(root)
    assert res.returncode == 1, res.stdout + res.stderr
    assert states(root) == {"a": "blocked", "c": "succeeded"}
    assert landed(root) == ["harnessc: c: Task c"]  # a's change did not land
    shown = virtual.harnessc(root, "show", "a")
    assert "its checks fail on the integration branch merged with its change" in shown.stdout + shown.stderr
