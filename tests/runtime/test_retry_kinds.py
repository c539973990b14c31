"""retry_on / dont_retry / start_level (issue 27 item 4, seed 002): a rejection whose kind is
not to be retried goes to on_failure at once, saying why; start_level sets the first retry's
refinement level.

Real projects built from roadmap.md and contracts.yaml, a real command agent, real accept
commands and the real state.db."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from .helpers import PY, harnessc

# The agent: `json-*` tasks print a promise but never the output JSON their contract asks for;
# the others print the promise.
AGENT = """\
import os
task = os.environ["HARNESSC_TASK"]
print("working on " + task)
print("<promise>DONE</promise>")
"""

CONTRACTS = """\
contracts:
  counted:
    output:
      n: {type: int, example: 1}
  strict:
    accept: ["false"]
    dont_retry: [accept]
"""


def project(root: Path, tasks: dict[str, dict]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agent.py").write_text(AGENT)
    (root / "harness.yaml").write_text(
        f"agents:\n  bot:\n    provider: command\n    command: [{json.dumps(PY)}, agent.py]\n"
        "routing:\n  default: bot\ndefaults:\n  max_retries: 2\n  retry_delays: [0]\n")
    (root / "contracts.yaml").write_text(CONTRACTS)
    lines = ["# Retries", "", "## Tasks", ""]
    for tid, props in tasks.items():
        lines.append(f"- [ ] **{tid}**: Task {tid}")
        lines += [f"  - {key}: {value}" for key, value in props.items()]
    (root / "roadmap.md").write_text("\n".join(lines) + "\n")
    return root


def attempts(root: Path) -> dict[str, list[dict]]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    db.row_factory = sqlite3.Row
    out: dict[str, list[dict]] = {}
    for r in db.execute("SELECT task_id, level, prompt, status FROM attempts ORDER BY id"):
        out.setdefault(r["task_id"], []).append(dict(r))
    return out


def errors(root: Path) -> dict[str, str]:
    db = sqlite3.connect(root / ".harness" / "state.db")
    return dict(db.execute("SELECT id, error FROM tasks"))


MISSING = f"{PY} -c \"open('data/input.csv')\""  # an accept command reading a file nobody makes


def test_a_missing_file_is_not_retried_under_dont_retry_missing_file(tmp_path):
    root = project(tmp_path / "p", {
        "kept": {"completion_promise": "DONE", "accept": MISSING, "dont_retry": "missing_file"},
        "plain": {"completion_promise": "DONE", "accept": MISSING},  # every kind retried, as before
        "other": {"completion_promise": "DONE", "accept": "false", "dont_retry": "missing_file"},
    })
    r = harnessc(root, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    tries = attempts(root)
    assert [len(tries[t]) for t in ("kept", "plain", "other")] == [1, 3, 3], tries
    why = errors(root)
    assert why["kept"].startswith("not retried (missing_file is in dont_retry); "), why["kept"]
    assert "No such file or directory" in why["kept"]
    assert "not retried" not in why["plain"] and "not retried" not in why["other"]


def test_retry_on_contract_retries_contract_failures_only(tmp_path):
    root = project(tmp_path / "p", {
        "json-a": {"contract": "counted", "retry_on": "contract"},  # no JSON: a contract failure
        "accept-a": {"completion_promise": "DONE", "accept": "false", "retry_on": "contract"},
        "by-contract": {"contract": "strict", "completion_promise": "DONE"},  # the contract's dont_retry: accept
    })
    r = harnessc(root, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    tries = attempts(root)
    assert {t: len(a) for t, a in tries.items()} == {"json-a": 3, "accept-a": 1, "by-contract": 1}, tries
    why = errors(root)
    assert why["accept-a"].startswith("not retried (accept is not in retry_on (contract)); "), why["accept-a"]
    assert why["by-contract"].startswith("not retried (accept is in dont_retry); "), why["by-contract"]
    assert "not retried" not in why["json-a"]


def test_start_level_3_gives_the_first_retry_the_exact_structure(tmp_path):
    root = project(tmp_path / "p", {"json-a": {"contract": "counted", "start_level": 3, "max_retries": 1},
                                    "json-b": {"contract": "counted", "max_retries": 1}})
    r = harnessc(root, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    tries = attempts(root)
    assert [a["level"] for a in tries["json-a"]] == [0, 3] and [a["level"] for a in tries["json-b"]] == [0, 1]
    assert "EXACT OUTPUT STRUCTURE REQUIRED" in tries["json-a"][1]["prompt"]
    assert "REQUIRED OUTPUT FORMAT" in tries["json-a"][1]["prompt"]
    assert "EXACT OUTPUT STRUCTURE REQUIRED" not in tries["json-b"][1]["prompt"]


def test_unknown_kinds_and_levels_are_lint_errors_with_a_did_you_mean(tmp_path):
    root = project(tmp_path / "p", {"a": {"completion_promise": "DONE", "dont_retry": "missing_fle, accept",
                                          "start_level": "4"}})
    (root / "contracts.yaml").write_text("contracts:\n  c:\n    accept: ['true']\n    retry_on: [contrat]\n")
    r = harnessc(root, "lint")
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "roadmap.md:7:17: error[HC451]: unknown error kind 'missing_fle' in dont_retry" in out, out
    assert "hint: did you mean 'missing_file'?" in out
    assert "roadmap.md:8:18: error[HC105]: bad start_level '4'" in out
    assert "contracts.yaml:4:16: error[HC451]: unknown error kind 'contrat' in retry_on" in out, out
    assert "did you mean 'contract'?" in out
