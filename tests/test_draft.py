"""`harnessc draft PRD.md`: a real command agent (a script run as `provider: command`) drafts,
lint's diagnostics go back to it, and the result is written next to the specs, never over
them; the offline simulate draft lints clean; an agent with nothing usable ends with exit 1.
The answer is hostile text: read, never run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harnessc.compiler import lint_project
from harnessc.draft.answer import MAX_ANSWER_CHARS, Unusable, blocks, read_answer
from harnessc.draft.offline import offline_draft
from inproc import harnessc as in_process

PRD = """# Photo albums

Users keep their photos in albums. This document lists what v1 needs.

## Albums

- Create an album with a name and a cover photo
- [ ] Rename and delete albums
  (deleting an album keeps its photos)
1. Share an album by link

## Uploads

Photos are uploaded from the browser, up to 20 MB each.

```
- not a requirement: a code block
```

## Non-goals
"""

ROADMAP = """# Albums

Photo albums.

## Tasks

- [ ] **a-1**: Create albums
  - completion_promise: A1

  Goal: albums.

- [ ] **b-1**: Share albums
  - depends_on: {dep}
  - completion_promise: B1

  Goal: share.
"""

# The agent: records each prompt it is given (prompt<N>.txt, N = the round), then answers as
# ANSWERS[N] says: "bad" a draft with an unknown dependency, "good" the fixed draft, anything
# else printed as it is.
AGENT = f"""
import os, sys
n = int(os.environ["HARNESSC_ITERATION"])
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, f"prompt{{n}}.txt"), "w") as f:
    f.write(open(sys.argv[1]).read())
with open(os.path.join(here, "purpose.txt"), "w") as f:
    f.write(os.environ.get("HARNESSC_PURPOSE", ""))
answers = open(os.path.join(here, "answers.txt")).read().split("\\n===\\n")
kind = answers[min(n, len(answers)) - 1]
roadmap = {ROADMAP!r}
if kind in ("bad", "good"):
    dep = "nowhere-001" if kind == "bad" else "a-1"
    print("Here is the draft.\\n\\n```markdown roadmap.md\\n" + roadmap.format(dep=dep)
          + "```\\n\\n```yaml contracts.yaml\\ncontracts: {{}}\\n```\\n")
elif kind == "fail":
    sys.exit(3)
elif kind == "context":  # a task naming a file of the project as its context
    print("```markdown roadmap.md\\n" + roadmap.format(dep="a-1").replace("  - completion_promise: A1",
          "  - completion_promise: A1\\n  - context: src/app.py") + "```\\n```yaml contracts.yaml\\ncontracts: {{}}\\n```")
elif kind == "huge":  # more than a command agent's output cap: only its start is kept
    print("```markdown roadmap.md\\n## Tasks\\n" + "x" * 1_200_000 + "\\n```")
elif kind == "edit":  # an agent that writes the user's roadmap.md itself, then answers
    open(os.path.join(here, "roadmap.md"), "w").write("written by the agent\\n")
    print("```markdown roadmap.md\\n" + roadmap.format(dep="a-1") + "```")
else:
    print(kind)
"""


def harnessc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`harnessc ARGS` from `cwd`, in this process (tests/inproc.py); the agent is a real process."""
    return in_process(*args, cwd=cwd)


def project(tmp_path: Path, *answers: str, default: bool = True) -> Path:
    """A project whose harness.yaml defines the command agent `drafter` (the routing
    default unless `default` is False), a PRD, and a roadmap.md of the user's own."""
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "answers.txt").write_text("\n===\n".join(answers))
    routing = "routing:\n  default: drafter\n" if default else ""
    (tmp_path / "harness.yaml").write_text(
        f"agents:\n  drafter: {{provider: command, command: [{sys.executable!r}, agent.py, '{{prompt_file}}'], "
        f"price: {{input: 3.0, output: 15.0}}}}\n{routing}")
    (tmp_path / "PRD.md").write_text(PRD)
    (tmp_path / "roadmap.md").write_text("# My own roadmap\n\nNot to be touched.\n")
    return tmp_path


def test_the_agent_fixes_its_draft_after_seeing_lints_diagnostics(tmp_path):
    root = project(tmp_path, "bad", "good")
    mine = (root / "roadmap.md").read_bytes()
    r = harnessc("draft", "PRD.md", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "round 1: 1 error, 0 warnings" in r.stdout and "round 2: clean" in r.stdout
    # the second prompt carried lint's diagnostic of the first draft, the draft itself, and the PRD
    second = (root / "prompt2.txt").read_text()
    assert "roadmap.md:13:17: error[HC401]: unknown dependency 'nowhere-001'" in second
    assert "depends_on: nowhere-001" in second and "Share an album by link" in second
    assert "HC401" not in (root / "prompt1.txt").read_text()
    assert (root / "purpose.txt").read_text() == "draft"
    assert not (root / "prompt3.txt").exists()  # clean after round 2: no third call
    assert (root / "roadmap.draft.md").read_text() == ROADMAP.format(dep="a-1")
    assert (root / "contracts.draft.yaml").read_text() == "contracts: {}\n"
    assert (root / "roadmap.md").read_bytes() == mine and not (root / "contracts.yaml").exists()
    # what the two calls used, priced at the agent's price
    assert "spent: 2 calls, " in r.stdout and "tokens (" in r.stdout and "$0.0" in r.stdout
    assert "has no price" not in r.stdout


def test_a_draft_still_wrong_after_the_last_round_is_written_with_its_diagnostics_and_exit_1(tmp_path):
    root = project(tmp_path, "bad")
    r = harnessc("draft", "PRD.md", "--max-rounds", "2", cwd=root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert (root / "prompt2.txt").exists() and not (root / "prompt3.txt").exists()
    # the diagnostics name the written draft, where the line is
    assert "roadmap.draft.md:13:17: error[HC401]" in r.stdout
    assert (root / "roadmap.draft.md").read_text() == ROADMAP.format(dep="nowhere-001")
    assert "not clean" in r.stdout and "--max-rounds" in r.stderr
    assert (root / "roadmap.md").read_text().startswith("# My own roadmap")


def test_an_agent_answering_nothing_usable_ends_with_exit_1_and_its_last_rounds_problem(tmp_path):
    root = project(tmp_path, "I would rather not write a roadmap today.")
    r = harnessc("draft", "PRD.md", cwd=root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "round 3: the answer could not be used: the answer holds no fenced block" in r.stdout
    assert "no usable draft after 3 rounds" in r.stderr and "nothing written" in r.stderr
    # each later round was told why the answer before could not be used
    assert "It could not be used: the answer holds no fenced block" in (root / "prompt2.txt").read_text()
    assert not (root / "roadmap.draft.md").exists() and not (root / "contracts.draft.yaml").exists()
    assert "spent: 3 calls" in r.stdout


def test_an_answer_cut_at_the_output_cap_says_so(tmp_path):
    root = project(tmp_path, "huge")
    r = harnessc("draft", "PRD.md", "--max-rounds", "1", cwd=root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the roadmap.md block is not closed" in r.stdout and "over the 1,048,576-byte cap" in r.stdout


def test_a_failing_agent_ends_with_exit_1_and_nothing_written(tmp_path):
    root = project(tmp_path, "fail")
    r = harnessc("draft", "PRD.md", cwd=root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the agent failed: agent 'drafter'" in r.stderr and "exit" in r.stderr
    assert not (root / "roadmap.draft.md").exists()
    assert not (root / "prompt2.txt").exists()  # a failed call is not retried with the same prompt


def test_the_draft_is_linted_in_place_of_the_specs_against_the_real_project(tmp_path):
    """The user's own roadmap.md and contracts.yaml, broken here, are not what is linted;
    a context file of the project is found where it is."""
    root = project(tmp_path, "context")
    (root / "roadmap.md").write_text("# Mine\n\n## Tasks\n\n- [ ] **x**: X\n  - depends_on: nope\n")
    (root / "contracts.yaml").write_text("contracts:\n  mine: {description: kept, output: {n: {type: int}}}\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('app')\n")
    r = harnessc("draft", "PRD.md", cwd=root)
    assert r.returncode == 0 and "round 1: clean" in r.stdout, r.stdout + r.stderr
    assert "  - context: src/app.py" in (root / "roadmap.draft.md").read_text()
    # the project's contracts are shown to the agent (it may name them; its file replaces them)
    assert "mine: {description: kept" in (root / "prompt1.txt").read_text()
    (root / "src" / "app.py").unlink()
    r = harnessc("draft", "PRD.md", "--force", "--max-rounds", "1", "--strict", cwd=root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "roadmap.draft.md:9:14: warning[HC406]: context path 'src/app.py' matches no file" in r.stdout


def test_a_spec_file_an_agent_changed_is_said(tmp_path):
    root = project(tmp_path, "edit")
    r = harnessc("draft", "PRD.md", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning: roadmap.md changed while the agent drafted; harnessc never writes it" in r.stderr
    assert "contracts.yaml changed" not in r.stderr and "harness.yaml changed" not in r.stderr


def test_an_earlier_draft_is_kept_unless_force_and_no_agent_is_paid_first(tmp_path):
    root = project(tmp_path, "good")
    (root / "roadmap.draft.md").write_text("my notes on the last draft\n")
    r = harnessc("draft", "PRD.md", cwd=root)
    assert r.returncode == 2 and "roadmap.draft.md exists" in r.stderr and "--force" in r.stderr
    assert (root / "roadmap.draft.md").read_text() == "my notes on the last draft\n"
    assert not (root / "prompt1.txt").exists()  # refused before the agent was called
    r = harnessc("draft", "PRD.md", "--force", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (root / "roadmap.draft.md").read_text() == ROADMAP.format(dep="a-1")


def test_a_draft_file_that_is_a_link_is_never_written_through(tmp_path):
    root = project(tmp_path, "good")
    (root / "contracts.draft.yaml").symlink_to(root / "roadmap.md")
    for extra in ((), ("--force",)):
        r = harnessc("draft", "PRD.md", *extra, cwd=root)
        assert r.returncode == 2 and "symbolic link" in r.stderr
    assert (root / "roadmap.md").read_text().startswith("# My own roadmap")


def test_the_simulate_draft_lints_clean_and_is_the_default_without_a_routing_default(tmp_path):
    root = project(tmp_path, "good", default=False)
    r = harnessc("draft", "PRD.md", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "agent 'simulate' (offline" in r.stdout and "spent: nothing" in r.stdout
    assert not (root / "prompt1.txt").exists()
    draft = (root / "roadmap.draft.md").read_text()
    assert "**albums-1**: Create an album with a name and a cover photo" in draft
    assert "not a requirement" not in draft and "Non-goals" not in draft  # code and an empty section
    # renamed into a project of its own, the draft is a clean project: `harnessc lint` says so
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "roadmap.md").write_text(draft)
    (fresh / "contracts.yaml").write_text((root / "contracts.draft.yaml").read_text())
    lint = harnessc("lint", cwd=fresh)
    assert lint.returncode == 0 and "ok: no problems found" in lint.stdout, lint.stdout
    # and it builds and runs on the simulate agent as it stands
    run = harnessc("run", cwd=fresh)
    assert run.returncode == 0, run.stdout + run.stderr


def test_agent_simulate_overrides_the_routing_default(tmp_path):
    root = project(tmp_path, "good")
    r = harnessc("draft", "PRD.md", "--agent", "simulate", cwd=root)
    assert r.returncode == 0 and "offline" in r.stdout and not (root / "prompt1.txt").exists()


def test_bad_input_is_one_clear_line(tmp_path):
    root = project(tmp_path, "good")
    r = harnessc("draft", "PRD.md", "--agent", "nobody", cwd=root)
    assert r.returncode == 2 and "--agent nobody: no such agent in harness.yaml" in r.stderr
    assert "drafter" in r.stderr and "Traceback" not in r.stderr
    (root / "empty.md").write_text("  \n")
    r = harnessc("draft", "empty.md", cwd=root)
    assert r.returncode == 2 and "empty.md is empty" in r.stderr
    (root / "binary.md").write_bytes(b"\xff\xfe\x00")
    r = harnessc("draft", "binary.md", cwd=root)
    assert r.returncode == 2 and "not UTF-8" in r.stderr
    r = harnessc("draft", "missing.md", cwd=root)
    assert r.returncode == 2 and "cannot read missing.md" in r.stderr
    # a harness.yaml with errors: its diagnostics, and no agent is called
    (root / "harness.yaml").write_text("agents:\n  drafter: {provider: nosuch}\n")
    r = harnessc("draft", "PRD.md", "--agent", "drafter", cwd=root)
    assert r.returncode == 1 and "harness.yaml:2:" in r.stdout and "harness.yaml has errors" in r.stderr
    assert not (root / "prompt1.txt").exists()


def test_hostile_yaml_in_an_answer_is_parsed_safely_never_run(tmp_path):
    """A contracts.yaml asking YAML to build a Python object: lint reports it, nothing runs."""
    marker = tmp_path / "pwned"
    hostile = (f"```markdown roadmap.md\n{ROADMAP.format(dep='a-1')}```\n\n```yaml contracts.yaml\n"
               f"contracts: !!python/object/apply:os.system ['touch {marker}']\n```\n")
    root = project(tmp_path, hostile, hostile)
    r = harnessc("draft", "PRD.md", "--max-rounds", "1", cwd=root)
    assert r.returncode == 1 and "contracts.draft.yaml:1:" in r.stdout, r.stdout + r.stderr
    assert not marker.exists()


# ---------------------------------------------------------------- the answer, read as text


def test_a_roadmap_holding_a_code_block_is_read_from_a_longer_fence():
    roadmap = "# T\n\n```sh\nmake\n```\n\n## Tasks\n\n- [ ] **a**: A\n  - accept: make\n"
    answer = f"Sure.\n\n````markdown roadmap.md\n{roadmap}````\n\n~~~yaml contracts.yaml\ncontracts: {{}}\n~~~\n"
    draft = read_answer(answer)
    assert draft.roadmap == roadmap and draft.contracts == "contracts: {}\n"


def test_control_characters_in_an_answer_are_written_shown_not_kept():
    draft = read_answer("```markdown roadmap.md\n# T\x1b]52;c;cm0gLXJm\x07\n\n## Tasks\n```\n```yaml contracts.yaml\n"
                        "contracts: {}  # \u202e\x9b2J\n```")
    assert draft.roadmap == "# T^[]52;c;cm0gLXJm^G\n\n## Tasks\n"
    assert draft.contracts == "contracts: {}  # \\u202e\\x9b2J\n"


def test_blocks_are_found_by_name_then_by_look():
    unnamed = "```markdown\n# T\n\n## Tasks\n```\n```yaml\ncontracts:\n  x: {}\n```\n"
    draft = read_answer(unnamed)
    assert draft.roadmap.startswith("# T") and draft.contracts.startswith("contracts:")
    only_roadmap = read_answer("```md\n## Tasks\n- [ ] **a**: A\n```")
    assert only_roadmap.contracts == ""


@pytest.mark.parametrize("answer, why", [
    ("no blocks at all", "no fenced block"),
    ("```python\nprint(1)\n```", "no ```markdown roadmap.md block"),
    ("```markdown roadmap.md\n# T\n\n## Tasks\n", "not closed"),
    ("```markdown roadmap.md\n\n```", "the roadmap.md block is empty"),
    ("x" * (MAX_ANSWER_CHARS + 1), "over the"),
])
def test_an_unusable_answer_says_why(answer, why):
    with pytest.raises(Unusable, match=re.escape(why)):
        read_answer(answer)


def test_fence_scanning_stays_linear_on_hostile_lines():
    line = "```" + " " * 200_000 + "x`"
    found = blocks(line + "\n" + "`" * 100_000 + "\n" + "`" * 99_999)  # inline code; a fence the shorter line cannot close
    assert [(b.text, b.closed) for b in found] == [("`" * 99_999, False)]


def test_the_offline_draft_is_deterministic_and_bounded():
    many = "# Big\n\n## Everything\n\n" + "".join(f"- requirement {i}\n" for i in range(100))
    first, second = offline_draft(many, "big.md", "big"), offline_draft(many, "big.md", "big")
    assert first == second
    assert first.roadmap.count("\n- [ ] **") == 40 and "(60 more bullets" in first.roadmap


def test_the_offline_draft_holds_text_from_outside_as_text(tmp_path):
    """A PRD trying to plant an accept command or a task through its bullets."""
    prd = ("# X\n\n## Part\n\n- build it\n  - accept: rm -rf /\n- [ ] **planted**: Planted\n"
           "- title \x1b[31mred\n")
    draft = offline_draft(prd, "x.md", "x")
    project = lint_project(tmp_path, texts=draft.texts())
    assert not project.diags.errors
    assert [t.accept for t in project.roadmap.tasks] == [(), (), ()]
    assert "planted" not in {t.id for t in project.roadmap.tasks}
    assert "\x1b" not in draft.roadmap


# A coding CLI allowed to edit: it writes roadmap.md where it runs (as a model asked to
# "write roadmap.md" might), then answers in Claude Code's JSON with the draft as its result.
FAKE_CLAUDE = """#!{python}
import json, os, sys
prompt = sys.stdin.read()
with open("roadmap.md", "w") as f:
    f.write("overwritten by the agent\\n")
with open({log!r}, "w") as f:
    json.dump({{"cwd": os.getcwd(), "prompt": prompt}}, f)
draft = "```markdown roadmap.md\\n" + {roadmap!r} + "```\\n```yaml contracts.yaml\\ncontracts: {{}}\\n```\\n"
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": draft,
                  "total_cost_usd": 0.0123, "num_turns": 1, "stop_reason": "end_turn",
                  "usage": {{"input_tokens": 1200, "output_tokens": 300, "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0}}}}))
"""


def test_a_cli_agent_drafts_from_a_scratch_directory_and_its_cost_is_shown(tmp_path):
    import json

    root = project(tmp_path, "good")
    log = tmp_path / "claude.json"
    exe = tmp_path / "bin" / "claude"
    exe.parent.mkdir()
    exe.write_text(FAKE_CLAUDE.format(python=sys.executable, log=str(log), roadmap=ROADMAP.format(dep="a-1")))
    exe.chmod(0o755)
    (root / "harness.yaml").write_text(f"agents:\n  cc: {{provider: claude-code, command: [{str(exe)!r}], "
                                       "permissions: edit}\n")
    r = harnessc("draft", "PRD.md", "--agent", "cc", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = json.loads(log.read_text())
    assert Path(seen["cwd"]).resolve() != root.resolve() and "Share an album by link" in seen["prompt"]
    assert (root / "roadmap.md").read_text().startswith("# My own roadmap")  # it edited its scratch copy
    assert "changed while the agent drafted" not in r.stderr
    assert not Path(seen["cwd"]).exists()  # the scratch directory is gone
    assert (root / "roadmap.draft.md").read_text() == ROADMAP.format(dep="a-1")
    assert "spent: 1 call, 1,500 tokens (1,200 in, 300 out), $0.0123" in r.stdout


_PIECES = st.sampled_from(["# ", "## ", "### ", "- ", "  - ", "1. ", "[ ] ", "**a-1**: ", "accept: ", "```", "````",
                           "~~~", "markdown roadmap.md", "yaml contracts.yaml", "## Tasks", "contracts:", "\n", "\n\n",
                           "\t", "\r", "\x1b[2J", "\u2028", "harnessc: ignore[HC410]", "<!--", "é", " "])
_TEXT = st.lists(st.one_of(_PIECES, st.text(max_size=12)), max_size=60).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT)
def test_any_answer_is_a_draft_or_unusable_never_a_crash(text):
    try:
        draft = read_answer(text)
    except Unusable:
        return
    assert draft.roadmap.strip() and len(draft.roadmap) <= len(text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT)
@example(text="## \n\t# ")  # a heading with no words: its task was titled "Part 1 of " (no read-back)
def test_any_document_makes_an_offline_draft_that_lints_without_errors(tmp_path, text):
    if not text.strip():
        return  # refused before drafting (the command says the document is empty)
    draft = offline_draft(text, "prd.md", "prd")
    project = lint_project(tmp_path, texts=draft.texts())
    assert [d.message for d in project.diags.items] == [] and project.roadmap.tasks


def test_agent_names_complete_in_the_shell(tmp_path):
    root = project(tmp_path, "good")
    env = {**os.environ, "_HARNESSC_COMPLETE": "bash_complete", "COMP_WORDS": "harnessc draft PRD.md --agent d",
           "COMP_CWORD": "4", "PYTHONPATH": str(Path(__file__).parents[1])}
    r = subprocess.run([sys.executable, "-m", "harnessc"], cwd=root, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and [line.split(",", 1)[1] for line in r.stdout.splitlines()] == ["drafter"]
