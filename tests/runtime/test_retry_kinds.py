"""retry_on / dont_retry / start_level (issue 27 item 4, seed 002): unknown kinds and levels
are lint errors. What a run does with them (a rejection whose kind is not to be retried goes
to on_failure at once, saying why; start_level sets the first retry's refinement level) is in
the scenarios dont-retry-missing-file, retry-on-contract and start-level
(tests/runtime/scenarios/)."""

from __future__ import annotations

import json
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
