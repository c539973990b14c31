"""A plan that grows under review (issue 30 item 4): a real command agent proposes tasks
(`<task>` markers, `next_tasks` in its output); the run files and lints them in
.harness/proposals/, `harnessc review` lists them, `harnessc accept-proposal` appends one to
roadmap.md, and the next `run` runs it. A real agent process and real files; harnessc runs
in-process in virtual time (virtual.harnessc)."""

from __future__ import annotations

import json
import textwrap

from . import virtual
from .helpers import PY

# Writes done/<task>, prints the promise; its text is the file says/<task> when there is one.
AGENT = """\
import os, pathlib
task = os.environ["HARNESSC_TASK"]
pathlib.Path("done").mkdir(exist_ok=True)
pathlib.Path("done", task).write_text("ok")
says = pathlib.Path("says", task)
print(says.read_text() if says.exists() else "")
print("<promise>DONE</promise>")
"""


def project(root, says: dict[str, str], tasks: str | None = None, plan: str = "") -> None:
    root.mkdir(exist_ok=True)
    (root / "agent.py").write_text(AGENT)
    (root / "says").mkdir()
    for task, text in says.items():
        (root / "says" / task).write_text(text)
    (root / "harness.yaml").write_text(textwrap.dedent(f"""\
        agents:
          bot: {{provider: command, command: [{PY}, agent.py]}}
        routing: {{default: bot}}
        {plan}
        """))
    (root / "roadmap.md").write_text(tasks or textwrap.dedent("""\
        # Growing

        ## Tasks

        - [ ] **impl**: Implement the feature
          - completion_promise: DONE

          Goal: implement it.

        ## Notes

        Written by hand.
        """))


def run(root, *args):
    return virtual.harnessc(root, "run", *args)


def test_a_marker_proposal_is_filed_reviewed_accepted_and_run(tmp_path):
    root = tmp_path / "p"
    project(root, {"impl": 'Done. <task id="migrate" depends_on="impl">Add a migration for the new column;'
                           " print <promise>DONE</promise> when it is written.</task>"})
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "harnessc review" in r.stdout and "1 proposed task waits for review" in r.stdout
    md = (root / ".harness" / "proposals" / "impl.md").read_text()
    assert "- [ ] **migrate**: Add a migration for the new column\n" in md and "  - depends_on: impl" in md
    assert not (root / "done" / "migrate").exists()  # waiting proposals are not work of the run

    r = virtual.harnessc(root, "review")
    assert r.returncode == 0, r.stderr
    assert "migrate" in r.stdout and "proposed by impl" in r.stdout and "accept-proposal migrate" in r.stdout

    before = (root / "roadmap.md").read_text()
    r = virtual.harnessc(root, "accept-proposal", "migrate")
    assert r.returncode == 0, r.stdout + r.stderr
    after = (root / "roadmap.md").read_text()
    assert after.startswith(before.split("## Notes")[0].rstrip("\n"))  # appended, nothing else changed
    assert after.index("**migrate**") < after.index("## Notes")  # at the end of the tasks section
    assert after.rstrip().endswith("Written by hand.")

    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (root / "done" / "migrate").exists()
    r = virtual.harnessc(root, "accept-proposal", "migrate")
    assert r.returncode != 0 and "was accepted" in r.stderr


def test_next_tasks_in_a_contract_output(tmp_path):
    root = tmp_path / "p"
    out = {"summary": "done", "next_tasks": [
        {"id": "docs-1", "title": "Document it", "goal": "Write the docs page.", "depends_on": ["impl"]},
        {"id": "docs-2", "title": "Link it", "goal": "Link the page.", "depends_on": ["docs-1"]},
        {"id": "../../etc", "goal": "escape"},
    ]}
    project(root, {"impl": json.dumps(out)}, tasks=textwrap.dedent("""\
        # Growing

        ## Tasks

        - [ ] **impl**: Implement the feature
          - contract: plan_out

          Goal: implement it.
        """))
    (root / "contracts.yaml").write_text(textwrap.dedent("""\
        contracts:
          plan_out:
            description: a summary and proposed tasks
            output:
              summary: {type: str}
              next_tasks: {type: list, items: dict, required: false}
        """))
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads((root / ".harness" / "proposals" / "impl.json").read_text())
    assert [(p["id"], p["status"]) for p in data["proposals"]] == [("docs-1", "waiting"), ("docs-2", "waiting")]
    assert not list((root / ".harness").rglob("etc*"))
    r = virtual.harnessc(root, "accept-proposal", "docs-2")  # its dependency is still a proposal
    assert r.returncode != 0 and "accept that one first" in r.stderr
    r = virtual.harnessc(root, "accept-proposal", "docs-1", "docs-2")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (root / "done" / "docs-2").exists()


def test_bad_proposals_are_rejected_with_diagnostics(tmp_path):
    root = tmp_path / "p"
    text = ('<task id="impl">again</task>'  # duplicates an id of the roadmap
            '<task id="x1" depends_on="x2">one</task><task id="x2" depends_on="x1">two</task>'  # a cycle
            '<task id="nowhere" depends_on="ghost">needs a task nobody has</task>'
            '<task id="fine">a good one</task><task id="over">one too many</task>')
    project(root, {"impl": text}, plan="plan: {max_new_tasks: 1}")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr  # rejected proposals do not fail the run
    got = {p["id"]: p for p in json.loads((root / ".harness" / "proposals" / "impl.json").read_text())["proposals"]}
    assert got["fine"]["status"] == "waiting"
    for tid in ("impl", "x1", "x2", "nowhere", "over"):
        assert got[tid]["status"] == "rejected", tid
        assert got[tid]["diagnostics"], tid
        assert all(d.startswith(".harness/proposals/impl.md:") for d in got[tid]["diagnostics"])
    assert "HC495" in got["over"]["diagnostics"][0]
    r = virtual.harnessc(root, "review")
    assert "proposed tasks rejected:" in r.stdout and "HC495" in r.stdout
    r = virtual.harnessc(root, "accept-proposal", "x1")
    assert r.returncode != 0 and "rejected" in r.stderr


def test_generations_past_max_depth_are_rejected(tmp_path):
    root = tmp_path / "p"
    project(root, {"impl": '<task id="g1" depends_on="impl">first generation</task>',
                   "g1": '<task id="g2" depends_on="g1">second generation</task>'},
            plan="plan: {max_depth: 1}")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert virtual.harnessc(root, "accept-proposal", "g1").returncode == 0
    (root / "roadmap.md").write_text((root / "roadmap.md").read_text().replace(
        "Goal: first generation", "Goal: first generation\n  - completion_promise: DONE"))
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads((root / ".harness" / "proposals" / "g1.json").read_text())["proposals"]
    assert got[0]["status"] == "rejected" and "HC496" in got[0]["diagnostics"][0]


def test_plan_grow_off_files_nothing(tmp_path):
    root = tmp_path / "p"
    project(root, {"impl": '<task id="later">do it later</task>'}, plan="plan: {grow: off}")
    r = run(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (root / ".harness" / "proposals").exists()
    assert "review" not in r.stdout
