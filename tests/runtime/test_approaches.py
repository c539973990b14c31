"""Best-of-N (`approaches: N`, runtime/approaches.py): N approaches of a task at once, each in
its own git worktree, one lands. Real git, real worktrees, real command agents."""

from __future__ import annotations

import json
import os
import signal
import sqlite3

from . import virtual
from .helpers import PY, git, git_repo, harnessc, node, spawn, write_project

# The agent: records what it saw (approach, cwd, prompt) in <marks>/<agent>-<k>-<iteration>.json,
# writes solution.txt (its approach's lines) and score.txt, then prints the promise - or
# waits, or fails, as agent.cfg says for its approach.
AGENT = """\
import ast, json, os, pathlib, sys, time
k = os.environ.get("HARNESSC_APPROACH", "-")
it = os.environ["HARNESSC_ITERATION"]
name = sys.argv[1]
cfg = ast.literal_eval(pathlib.Path(sys.argv[2]).read_text())
marks = pathlib.Path(cfg["marks"])
prompt = sys.stdin.read()
seen = marks / f"{name}-{k}-{it}.json"
pathlib.Path(str(seen) + ".tmp").write_text(json.dumps({"approach": k, "cwd": os.getcwd(), "pid": os.getpid(),
                                                         "prompt": prompt, "agent": name}))
os.replace(str(seen) + ".tmp", seen)  # whole, even when the process is killed
if k in cfg.get("kill", []) and not (marks / "killed").exists():
    (marks / "killed").write_text("x")
    os.kill(os.getppid(), 9)
    time.sleep(5)
for other in cfg.get("await", {}).get(k, []):  # until that approach's agent has started
    for _ in range(600):
        if list(marks.glob(f"*-{other}-*.json")):
            break
        time.sleep(0.05)
if k in cfg.get("wait", {}):
    time.sleep(cfg["wait"][k])
pathlib.Path("solution.txt").write_text("".join(f"line {i} of approach {k}\\n" for i in range(cfg.get("lines", {}).get(k, 1))))
pathlib.Path("score.txt").write_text(str(cfg.get("score", {}).get(k, "0")))
if k in cfg.get("fail", []):
    print("no promise from approach", k)
else:
    print("done <promise>DONE</promise>")
"""
SCORE = [PY, "-c", "import pathlib; print('scoring...'); print(pathlib.Path('score.txt').read_text())"]


def project(root, cfg, approaches, n_agents=1, concurrency=2, price=None, **kw):
    agents = {}
    for name in ["bot", "other"][:n_agents]:
        agents[name] = {"provider": "command", "command": [PY, str(root / "agent.py"), name, str(root / "agent.cfg")]}
        if price:
            agents[name]["price"] = price.get(name)
    routing = {"agent": "bot", "chain": ["other"] if n_agents > 1 else [], "reason": "test"}
    task = node("t", routing=routing, completion_promise="DONE", isolation="worktree",
                approaches={"n": 3, "select": "first", "score": None, "min_score": None,
                            "agents": list(agents), **approaches}, **kw)
    write_project(root, [task], agents=agents, concurrency=concurrency)
    (root / "agent.py").write_text(AGENT)
    marks = root.parent / "marks"
    marks.mkdir(exist_ok=True)
    (root / "agent.cfg").write_text(repr({"marks": str(marks), **cfg}))
    (root / "notes.txt").write_text("mine\n")
    git_repo(root)
    return marks


def run(root, *args):
    return virtual.harnessc(root, "run", "--no-build", *args)


def seen(marks) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(marks.glob("*.json"))]


def worktrees(root) -> list[str]:
    return [line for line in git(root, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


def own_refs(root) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname)", "refs/harnessc/").split()


def landed(root) -> list[str]:
    return [s for s in git(root, "log", "--format=%s", "HEAD").splitlines() if s.startswith("harnessc: t:")]


def board(root) -> dict:
    db = sqlite3.connect(root / ".harness" / "state.db")
    return json.loads(db.execute("SELECT value FROM meta WHERE key='approaches.t'").fetchone()[0])


def task_row(root) -> dict:
    db = sqlite3.connect(root / ".harness" / "state.db")
    db.row_factory = sqlite3.Row
    return dict(db.execute("SELECT * FROM tasks WHERE id='t'").fetchone())


def test_approaches_run_at_once_each_in_its_own_worktree_on_the_kth_agent(tmp_path):
    root = tmp_path / "p"
    # each waits a little so all three are running at the same time
    marks = project(root, {"wait": {"1": 1, "2": 1, "3": 1}}, {"select": "best"}, n_agents=2, concurrency=1)
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    calls = {c["approach"]: c for c in seen(marks)}
    assert sorted(calls) == ["1", "2", "3"]
    # -j 1: one task at a time, but its approaches run at once, each in worktree <n>-<k>
    assert len({c["cwd"] for c in calls.values()}) == 3
    assert all(c["cwd"].endswith(f"/1-{k}") and "/.harness/worktrees/" in c["cwd"] for k, c in calls.items())
    assert [calls[k]["agent"] for k in "123"] == ["bot", "other", "bot"]
    assert "Approach 2 of 3" in calls["2"]["prompt"]
    # one lands: one commit with its change; nothing else left behind
    assert len(landed(root)) == 1
    assert "of approach" in (root / "solution.txt").read_text()
    assert worktrees(root) == [f"worktree {root}"] and own_refs(root) == []
    assert task_row(root)["state"] == "succeeded"


def test_select_first_lands_the_first_verified_and_cancels_the_rest_killing_their_processes(tmp_path):
    root = tmp_path / "p"
    # approach 1 verifies once 2 and 3 are at work (on a loaded machine 3 had not started yet)
    marks = project(root, {"wait": {"2": 60, "3": 60}, "await": {"1": ["2", "3"]}, "lines": {"1": 2}},
                    {"select": "first"})
    r = harnessc(root, "run", "--no-build", timeout=50)  # a process: its agents wait 60 s unless killed
    assert r.returncode == 0, r.stdout + r.stderr
    assert (root / "solution.txt").read_text() == "line 0 of approach 1\nline 1 of approach 1\n"
    slow = [c for c in seen(marks) if c["approach"] in ("2", "3")]
    assert len(slow) == 2
    for c in slow:  # their agent processes were killed, not left to finish
        try:
            os.kill(c["pid"], 0)
            alive = True
        except ProcessLookupError:
            alive = False
        assert not alive, c
    assert worktrees(root) == [f"worktree {root}"] and own_refs(root) == []
    b = board(root)
    states = {a["approach"]: (a["state"], a["selected"]) for a in b["approaches"]}
    assert states == {1: ("verified", True), 2: ("cancelled", False), 3: ("cancelled", False)}
    db = sqlite3.connect(root / ".harness" / "state.db")
    assert sorted(s for (s,) in db.execute("SELECT status FROM attempts WHERE task_id='t'")) == \
        ["interrupted", "interrupted", "succeeded"]


def test_select_best_lands_the_highest_score_and_says_so_in_log_and_status(tmp_path):
    root = tmp_path / "p"
    project(root, {"score": {"1": "3", "2": "7.5", "3": "-1"}}, {"select": "best", "score":
            {"id": "score", "argv": SCORE, "timeout": 60}})
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (root / "solution.txt").read_text() == "line 0 of approach 2\n"
    assert "score 7.5" in git(root, "log", "-1", "--format=%B")
    b = board(root)
    assert [(a["approach"], a["score"], a["verified"], a["selected"]) for a in b["approaches"]] == \
        [(1, 3.0, True, False), (2, 7.5, True, True), (3, -1.0, True, False)]
    log = virtual.harnessc(root, "log", "t")
    assert log.returncode == 0, log.stderr
    assert "approach" in log.stdout and "7.5" in log.stdout and "selected" in log.stdout, log.stdout
    status = virtual.harnessc(root, "status", "--output", "json")
    data = json.loads(status.stdout)
    task = next(t for t in data["tasks"] if t["id"] == "t")
    assert [a["selected"] for a in task["approaches"]["approaches"]] == [False, True, False]


def test_a_tie_goes_to_the_cheaper_then_the_smaller_diff(tmp_path):
    root = tmp_path / "p"
    # same score; approach 1 and 3 cost the same (one agent), 3 changes fewer lines than 1;
    # approach 2 is on the dearer agent
    project(root, {"score": {"1": "5", "2": "5", "3": "5"}, "lines": {"1": 9, "2": 1, "3": 2}},
            {"select": "best", "score": {"id": "score", "argv": SCORE, "timeout": 60}}, n_agents=2,
            price={"bot": {"input": 1.0, "output": 1.0}, "other": {"input": 50.0, "output": 50.0}})
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    b = {a["approach"]: a for a in board(root)["approaches"]}
    assert b[2]["cost_usd"] > b[1]["cost_usd"] == b[3]["cost_usd"]
    assert b[3]["diff_lines"] < b[1]["diff_lines"]
    assert b[3]["selected"] and (root / "solution.txt").read_text() == "line 0 of approach 3\nline 1 of approach 3\n"


def test_min_score_rejects_approaches_below_it(tmp_path):
    root = tmp_path / "p"
    project(root, {"score": {"1": "0.9", "2": "0.2", "3": "0.95"}},
            {"select": "first", "score": {"id": "score", "argv": SCORE, "timeout": 60}, "min_score": 0.5},
            retry={"max_retries": 0})
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    b = {a["approach"]: a for a in board(root)["approaches"]}
    assert not b[2]["verified"] and b[2]["state"] in ("failed", "cancelled")
    if b[2]["state"] == "failed":
        assert "below min_score 0.5" in b[2]["why"]
    assert b[1]["selected"] or b[3]["selected"]


def test_a_failing_or_non_numeric_score_is_an_approach_not_verified_saying_why(tmp_path):
    root = tmp_path / "p"
    project(root, {"score": {"1": "fast", "2": "nan", "3": "fail"}},
            {"select": "best", "score": {"id": "score", "argv": [
                PY, "-c", "import pathlib, sys; s = pathlib.Path('score.txt').read_text(); "
                          "sys.exit(3) if s == 'fail' else print(s)"], "timeout": 60}},
            retry={"max_retries": 0})
    r = run(root)
    assert r.returncode == 1, r.stdout + r.stderr
    row = task_row(root)
    assert row["state"] == "failed"
    error = row["error"]
    assert "no approach verified" in error
    assert "approach 1 (bot): " in error and "not a number: 'fast'" in error
    assert "not a number: 'nan'" in error
    assert "score command failed: " in error and "exited with 3" in error, error
    assert landed(root) == [] and worktrees(root) == [f"worktree {root}"] and own_refs(root) == []


def test_kill_9_while_approaches_run_then_resume_lands_exactly_one(tmp_path):
    root = tmp_path / "p"
    marks = project(root, {"kill": ["2"], "wait": {"1": 2, "3": 2}}, {"select": "best"})
    p = spawn(root, "run", "--no-build")
    out, err = p.communicate(timeout=120)
    assert p.returncode == -signal.SIGKILL, out + err
    assert len(worktrees(root)) >= 2  # the approaches' worktrees left behind
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(landed(root)) == 1
    assert worktrees(root) == [f"worktree {root}"] and own_refs(root) == []
    assert task_row(root)["state"] == "succeeded"
    assert sum(a["selected"] for a in board(root)["approaches"]) == 1
    assert (marks / "killed").exists()
