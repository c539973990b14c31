"""Budgets that mean what users think (issue 27 item 4): `defaults.budget` gives every task a
ceiling, a budget too small for one call is warned of before any call (HC450, `run
--dry-run`), and a call cut off by kill -9 is recorded as cost unknown, never charged.

Real projects built from roadmap.md and harness.yaml, a real command agent with a price, real
processes and the real state.db. That `defaults.budget` caps every task and a task's budget wins
is the scenario defaults-budget-caps-every-task (tests/runtime/scenarios/)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

from . import virtual
from .helpers import PY, spawn

# The agent: writes a file of its own and prints the promise; while sleep.flag exists it
# first writes its pid to the file sleep.flag names and sleeps (to be killed mid-call).
AGENT = """\
import os, pathlib, sys, time
task = os.environ["HARNESSC_TASK"]
if pathlib.Path("sleep.flag").exists():
    pathlib.Path(pathlib.Path("sleep.flag").read_text()).write_text(str(os.getpid()))
    time.sleep(600)
pathlib.Path(task + ".txt").write_text("made by " + task + "\\n")
print("done <promise>DONE</promise>")
"""

PRICE = "{input: 100, output: 100}"  # $100 per million tokens: a call costs ~$0.16


def project(root: Path, tasks: dict[str, dict], defaults: str = "", price: str = PRICE) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agent.py").write_text(AGENT)
    (root / "harness.yaml").write_text(
        f"agents:\n  bot:\n    provider: command\n    command: [{json.dumps(PY)}, agent.py]\n"
        f"    price: {price}\n"
        f"routing:\n  default: bot\ndefaults:\n  max_retries: 0\n{defaults}")
    lines = ["# Budgets", "", "## Tasks", ""]
    for tid, props in tasks.items():
        lines.append(f"- [ ] **{tid}**: Task {tid}")
        lines += [f"  - {key}: {value}" for key, value in {"completion_promise": "DONE", **props}.items()]
    (root / "roadmap.md").write_text("\n".join(lines) + "\n")
    return root


def rows(root: Path) -> dict[str, dict]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    db.row_factory = sqlite3.Row
    return {r["id"]: dict(r) for r in db.execute("SELECT * FROM tasks")}


def test_without_defaults_budget_the_plan_has_no_budget_key(tmp_path):
    root = project(tmp_path / "p", {"plain": {}})
    r = virtual.harnessc(root, "build")
    assert r.returncode == 0, r.stdout + r.stderr
    plan = json.loads((root / ".harness" / "build" / "plan.json").read_text())
    assert "budget" not in plan["defaults"] and plan["nodes"][0]["limits"]["budget_usd"] is None


def test_a_budget_below_one_call_is_warned_by_build_run_and_dry_run(tmp_path):
    root = project(tmp_path / "p", {"tiny": {"budget": "$0.001"}, "rich": {"budget": "$5"}, "plain": {}},
                   defaults="  budget: $0.002\n")
    r = virtual.harnessc(root, "build")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    # at the task's budget: line, and at the task itself for defaults.budget
    assert "roadmap.md:7:5: warning[HC450]: task 'tiny' cannot afford one call" in out, out
    assert "its budget is $0.0010" in out and "hint: raise its budget: to at least $0." in out
    assert "roadmap.md:11:9: warning[HC450]: task 'plain' cannot afford one call" in out, out
    assert "defaults.budget in harness.yaml is $0.0020" in out
    assert "'rich'" not in out
    r = virtual.harnessc(root, "run", "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("cannot afford one call")]
    assert [x.split(": ", 1)[1].split(" ")[0] for x in lines] == ["tiny", "plain"], r.stdout
    (root / "roadmap.md").write_text((root / "roadmap.md").read_text() + "\n")  # run builds again
    r = virtual.harnessc(root, "run")
    assert "warning[HC450]: task 'tiny' cannot afford one call" in r.stdout + r.stderr


def _wait_for(path: Path, proc) -> None:
    """Poll (no timed assertion) until the agent marks that its call started."""
    while not path.exists() or not path.read_text():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def test_a_call_cut_off_by_kill_9_is_cost_unknown_never_charged_its_estimate(tmp_path):
    root = project(tmp_path / "p", {"slow": {}})
    mark = tmp_path / "started"
    (root / "sleep.flag").write_text(str(mark))
    proc = spawn(root, "run")
    try:
        _wait_for(mark, proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # harnessc dies mid-call; its agent sleeps on
        proc.communicate()
    agent_pid = int(mark.read_text())
    (root / "sleep.flag").unlink()
    try:
        r = virtual.harnessc(root, "run")  # resumes: settles the cut-off call, runs the task again
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        try:
            os.kill(agent_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the resume ended it (reaper.py)
    db = sqlite3.connect(root / ".harness" / "state.db")
    attempts = db.execute("SELECT status, cost_source, cost_usd FROM attempts ORDER BY id").fetchall()
    assert [a[:2] for a in attempts] == [("interrupted", "unknown"), ("succeeded", "price")], attempts
    assert attempts[0][2] == 0.0 and attempts[1][2] > 0
    ledger = db.execute("SELECT reserved, actual, settled FROM ledger ORDER BY id").fetchall()
    assert ledger[0][0] > 0.1 and ledger[0][1:] == (None, 1), ledger
    # spent is the one call that reported; the cut-off one is shown apart, as an estimate
    status = json.loads(virtual.harnessc(root, "status", "--output", "json").stdout)
    assert status["run"]["cost_usd"] == round(attempts[1][2], 6), status["run"]
    assert status["totals"]["unknown"] == {"calls": 1, "estimated_usd": round(ledger[0][0], 6)}
    text = virtual.harnessc(root, "status").stdout
    assert f"1 call cut off: cost unknown, ~${ledger[0][0]:.4f} estimated (not counted in spent)" in text, text
    assert "1 cut off with cost unknown" in text, text
    log = virtual.harnessc(root, "log", "slow").stdout
    assert " · interrupted · " in log and " · cost unknown · " in log, log
    assert f"cost unknown, ~${ledger[0][0]:.6f} estimated (unknown: the run ended during the call" in log, log
