"""The docs against the code: each command's synopsis in docs/cli.md names the options it has,
and the cookbook's `jq` recipes, run as written on real output, show what they say."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess

import click
import pytest

from harnessc.cli import cli

from .helpers import REPO, harnessc, node, write_project

CLI_MD = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
COOKBOOK = (REPO / "docs" / "cookbook.md").read_text(encoding="utf-8")
SYNOPSES = dict(re.findall(r"^## (\S+)\n\n```\n(harnessc [^`]*?)\n```", CLI_MD, re.M))


@pytest.mark.parametrize("name", sorted(SYNOPSES))
def test_each_synopsis_names_the_options_the_command_has(name):
    command = cli.get_command(click.Context(cli), name)
    synopsis = SYNOPSES[name]
    written = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", synopsis))
    # a group (import, memory): its own options and its subcommands'
    commands = [command, *command.commands.values()] if isinstance(command, click.Group) else [command]
    options = [p for c in commands for p in c.params if p.param_type_name == "option" and not p.hidden]
    assert [p.opts for p in options if not set(p.opts) & written] == [], synopsis  # undocumented
    assert written - {o for p in options for o in p.opts} == set(), synopsis  # documented, not there


def test_retry_is_said_to_take_only_its_own_options():
    # "same options as `run`" sent users to `retry -s TASK` and `retry --agent X`: usage errors.
    section = CLI_MD.split("\n## retry\n", 1)[1].split("\n## ", 1)[0]
    assert "same options as `run`" not in section
    for option in ("--select", "--rerun", "--agent", "--fail-fast"):
        r = harnessc(REPO, "retry", option, "x")
        assert r.returncode == 2 and "No such option" in r.stderr, (option, r.stderr)


def _jq_recipe(pattern: str) -> list[str]:
    """The cookbook's jq command line that matches `pattern` (the text between backticks or
    after `# or:`), as argv."""
    m = re.search(pattern, COOKBOOK)
    assert m, pattern
    return shlex.split(" ".join(m.group(1).split()))


needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


@needs_jq
def test_the_extends_recipe_lists_the_merged_fields(tmp_path):
    # cookbook §5: the contract as written there, then `harnessc build`, then its jq command
    contracts = re.search(r"## 5\. Extend a built-in contract.*?```yaml\n(.*?)```", COOKBOOK, re.S).group(1)
    (tmp_path / "contracts.yaml").write_text(contracts)
    (tmp_path / "roadmap.md").write_text("# P\n\n## Tasks\n\n- [ ] **lead-001**: Score the lead\n"
                                         "  - contract: lead_score\n")
    assert harnessc(tmp_path, "build").returncode == 0
    argv = _jq_recipe(r"`(jq '\.contracts\.lead_score[^`]*)`")
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["bant_assessment", "confidence", "qualification_score",
                                    "recommended_action", "tier"]
    plan = json.loads((tmp_path / ".harness" / "build" / "plan.json").read_text())
    assert plan["contracts"]["lead_score"]["output"]["confidence"]["rules"] == ["value >= 0.5", "value <= 1.0"]


@needs_jq
def test_the_alerts_recipe_keeps_what_is_not_info(tmp_path):
    stuck = {"provider": "simulate", "complete_after": 99, "progress": "none"}
    write_project(tmp_path, [node("loop", completion_promise="DONE", limits={"stuck_after": 2})],
                  agents={"rehearsal": stuck},
                  loop={"recovery": {"prompt_mutations": 0, "escalate": False, "human": False}})
    harnessc(tmp_path, "run")
    argv = _jq_recipe(r"# or: (jq -c [^\n]*alerts\.log)")
    r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    shown = [json.loads(line) for line in r.stdout.splitlines()]
    every = [json.loads(line) for line in (tmp_path / ".harness" / "alerts.log").read_text().splitlines()]
    assert shown == [a for a in every if a["level"] != "info"]
    assert {a["kind"] for a in shown} >= {"stuck"} and "run_finished" in {a["kind"] for a in every}
