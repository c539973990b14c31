"""The CLI's exit codes, formats, ls/graph/validate/schema/init: run in this process
(tests/inproc.py); the version through a real `python -m harnessc` process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harnessc import planfile

from conftest import FIXTURES, REPO, check_golden
from inproc import harnessc

HARNESSC = [sys.executable, "-m", "harnessc"]
DEMO = REPO / "specs" / "demo"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`harnessc ARGS` in this process, from `cwd` (default: the repository), without
    HARNESSC_DEBUG: an internal error is a message, not a traceback."""
    env = {k: v for k, v in os.environ.items() if k != "HARNESSC_DEBUG"}
    return harnessc(*args, cwd=cwd or REPO, env=env)


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns(".harness"))
    return root


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    root = tmp_path / "seed"
    root.mkdir()
    shutil.copy(FIXTURES / "seed" / "appendix_a.md", root / "roadmap.md")
    (root / "harness.yaml").write_text(
        "agents:\n  codex: {provider: command, command: [codex, exec, '{prompt}']}\n"
        "  gemini: {provider: command, command: [gemini, -p, '{prompt}']}\n"
    )
    return root


def test_version() -> None:
    """Through a real process: `python -m harnessc` starts and exits 0."""
    env = {k: v for k, v in os.environ.items() if k != "HARNESSC_DEBUG"}
    r = subprocess.run([*HARNESSC, "--version"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and "harnessc" in r.stdout


def test_lint_demo_is_clean(demo: Path) -> None:
    r = run("-C", str(demo), "lint")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok" in r.stdout


def test_lint_finds_project_upward(demo: Path) -> None:
    r = run("lint", cwd=demo / "data")
    assert r.returncode == 0, r.stdout + r.stderr


def test_lint_outside_a_project_is_a_usage_error(tmp_path: Path) -> None:
    r = run("lint", cwd=tmp_path)
    assert r.returncode == 2
    assert "no harnessc project" in r.stderr and "Traceback" not in r.stderr
    r = run("-C", str(tmp_path / "nope"), "lint")
    assert r.returncode == 2 and "does not exist" in r.stderr


@pytest.mark.parametrize("args, moved", [
    (["lint", "-C", "DIR"], "harnessc -C DIR lint"),
    (["lint", "--project=DIR", "--format", "json"], "harnessc -C DIR lint --format json"),
    (["ls", "--project", "DIR", "-s", "a"], "harnessc -C DIR ls -s a"),
])
def test_project_option_after_the_command_says_where_it_goes(demo: Path, args: list[str], moved: str) -> None:
    args = [a.replace("DIR", str(demo)) for a in args]
    r = run(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert "harnessc: error: " in r.stderr and "is an option of harnessc, not of the command" in r.stderr
    assert f"hint: put -C before the command: {moved.replace('DIR', str(demo))}" in r.stderr


def test_lint_reports_every_problem_with_location(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "unknown-keys", root, ignore=shutil.ignore_patterns("expected.txt"))
    r = run("-C", str(root), "lint")
    assert r.returncode == 1
    assert "roadmap.md:6:5: error[HC103]: unknown key 'max_iteration'" in r.stdout
    assert "harness.yaml:3:11: error[HC210]" in r.stdout
    assert "hint: did you mean 'max_iterations'?" in r.stdout
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_lint_formats_name_files_from_the_invoking_directory(tmp_path: Path, fmt: str) -> None:
    # `harnessc -C specs/p lint` in CI: annotations must name specs/p/roadmap.md (issue 11, bug 5)
    root = tmp_path / "specs" / "p"
    shutil.copytree(FIXTURES / "projects" / "unknown-refs", root, ignore=shutil.ignore_patterns("expected.txt"))
    r = run("-C", "specs/p", "lint", "--output", fmt, cwd=tmp_path)
    assert r.returncode == 1
    if fmt == "text":
        assert "specs/p/roadmap.md:8:28: error[HC401]: unknown dependency 'setpu-001'" in r.stdout
    elif fmt == "json":
        data = json.loads(r.stdout)
        assert {d["code"] for d in data} == {"HC401", "HC402", "HC403"}
        assert data[0]["span"]["path"] == "specs/p/roadmap.md" and data[0]["span"]["line"] == 8
    elif fmt == "github":
        assert "::error file=specs/p/roadmap.md,line=8,col=28,title=HC401::unknown dependency 'setpu-001'" in r.stdout
    else:
        sarif = json.loads(r.stdout)
        assert sarif["version"] == "2.1.0"
        run_ = sarif["runs"][0]
        assert {x["ruleId"] for x in run_["results"]} == {"HC401", "HC402", "HC403"}
        where = run_["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
        assert where == {"uri": "specs/p/roadmap.md", "uriBaseId": "%SRCROOT%"}
        assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"


def test_lint_from_inside_the_project_names_files_from_there(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "unknown-refs", root, ignore=shutil.ignore_patterns("expected.txt"))
    (root / "src").mkdir()
    assert "roadmap.md:8:28: error[HC401]" in run("lint", cwd=root).stdout.splitlines()[0]
    assert run("lint", cwd=root / "src").stdout.startswith("../roadmap.md:8:28: error[HC401]")


def test_output_json_is_one_spelling_and_old_spellings_are_hidden_aliases(demo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text('{"score": 5}')
    for args in (["lint"], ["build"], ["ls"], ["graph"], ["contracts"], ["doctor"],
                 ["validate", "--contract", "research_report", str(out)]):
        r = run("-C", str(demo), *args, "--output", "json")
        assert r.returncode in (0, 1), (args, r.stderr)
        json.loads(r.stdout)  # JSON and nothing else
        assert "--output" in run("-C", str(demo), args[0], "-h").stdout
    graph = json.loads(run("-C", str(demo), "graph", "--output", "json").stdout)
    assert ["data-001", "qualify-001"] in graph["edges"] and graph["nodes"][0]["id"] == "setup-001"
    # The old spellings still work, and are no longer advertised.
    assert json.loads(run("-C", str(demo), "lint", "--format", "json").stdout) == []
    assert run("-C", str(demo), "graph", "--format", "dot").stdout.startswith("digraph")
    assert run("-C", str(demo), "lint", "--output", "sarif").stdout.startswith("{")
    assert "--format" not in run("-C", str(demo), "lint", "-h").stdout
    # Both spellings, disagreeing: a usage error rather than a guess.
    r = run("-C", str(demo), "lint", "--format", "json", "--output", "text")
    assert r.returncode == 2 and "--output text and --format json disagree" in r.stderr


def test_plural_wording() -> None:
    from harnessc.wording import plural

    assert [plural(n, "task") for n in (0, 1, 2)] == ["0 tasks", "1 task", "2 tasks"]
    assert plural(1, "dependency", "dependencies") == "1 dependency"
    assert plural(3, "dependency", "dependencies") == "3 dependencies"


def test_strict_turns_warnings_into_failures(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "unverified", root, ignore=shutil.ignore_patterns("expected.txt"))
    assert run("-C", str(root), "lint").returncode == 0
    r = run("-C", str(root), "lint", "--strict")
    assert r.returncode == 1 and "HC410" in r.stdout


def test_build_writes_plan_and_prompts(demo: Path) -> None:
    r = run("-C", str(demo), "build")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "critical path" in r.stdout and "waves" in r.stdout
    plan = json.loads((demo / ".harness/build/plan.json").read_text())
    assert plan["version"] == 1
    ids = [n["id"] for n in plan["nodes"]]
    assert ids == ["setup-001", "data-001", "market-001", "qualify-001", "brief-001"]
    assert plan["waves"] == [["setup-001"], ["data-001"], ["market-001", "qualify-001"], ["brief-001"]]
    assert plan["critical_path"][-1] == "brief-001"
    for n in plan["nodes"]:
        prompt = demo / ".harness/build" / n["prompt"]["path"]
        assert prompt.is_file()
    qualify = next(n for n in plan["nodes"] if n["id"] == "qualify-001")
    assert qualify["routing"] == {"agent": "careful", "chain": [], "reason": "task agent", "auto": False}
    assert qualify["contract"] == "lead_score"
    assert "tier" in plan["contracts"]["lead_score"]["json_schema"]["properties"]
    # extends kept the base contract's fields
    assert "qualification_score" in plan["contracts"]["lead_score"]["json_schema"]["required"]


def test_build_is_deterministic_golden(demo: Path) -> None:
    assert run("-C", str(demo), "build").returncode == 0
    first = (demo / ".harness/build/plan.json").read_text()
    assert run("-C", str(demo), "build").returncode == 0
    assert (demo / ".harness/build/plan.json").read_text() == first
    check_golden(FIXTURES / "plans" / "demo.plan.json", first)
    check_golden(FIXTURES / "plans" / "demo.brief-001.md", (demo / ".harness/build/prompts/brief-001.md").read_text())


def test_fingerprint_changes_with_the_task_only(demo: Path) -> None:
    assert run("-C", str(demo), "build").returncode == 0
    before = {n["id"]: n["fingerprint"] for n in json.loads((demo / ".harness/build/plan.json").read_text())["nodes"]}
    text = (demo / "roadmap.md").read_text().replace("Score the Acme Corp lead", "Score the Acme lead")
    (demo / "roadmap.md").write_text(text)
    assert run("-C", str(demo), "build").returncode == 0
    after = {n["id"]: n["fingerprint"] for n in json.loads((demo / ".harness/build/plan.json").read_text())["nodes"]}
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"qualify-001"}


def test_a_tasks_loop_settings_are_typed_on_its_node_and_not_fingerprinted(demo: Path) -> None:
    assert run("-C", str(demo), "build").returncode == 0
    before = {n["id"]: n for n in json.loads((demo / ".harness/build/plan.json").read_text())["nodes"]}
    text = (demo / "roadmap.md").read_text().replace(
        "  - completion_promise: DATA_OK\n",
        "  - completion_promise: DATA_OK\n  - progress_threshold: 0.3\n  - recovery: negative, escalate\n")
    (demo / "roadmap.md").write_text(text)
    (demo / "harness.yaml").write_text((demo / "harness.yaml").read_text() + "loop: {recovery: {human: false}}\n")
    assert run("-C", str(demo), "build").returncode == 0
    plan = planfile.loads((demo / ".harness/build/plan.json").read_text())
    node = plan.node("data-001")
    # a list without an end gets harness.yaml's: fail, since `human: false`
    assert node.loop == planfile.NodeLoop(progress_threshold=0.3, recovery=["negative", "escalate", "fail"])
    assert all(n.loop is None for n in plan.nodes if n.id != "data-001")
    # how a stuck task is helped along is not what its result must be: results stay fresh
    assert {n.id: n.fingerprint for n in plan.nodes} == {i: n["fingerprint"] for i, n in before.items()}


def test_run_that_builds_shows_the_builds_warnings_and_errors_as_build_does(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "unverified", root, ignore=shutil.ignore_patterns("expected.txt"))
    built = run("-C", str(root), "build", cwd=tmp_path)
    shutil.rmtree(root / ".harness")
    r = run("-C", str(root), "run", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = built.stdout[:built.stdout.index("0 errors, 2 warnings")]
    assert "warning[HC410]" in warnings and "hint:" in warnings, built.stdout
    assert warnings.strip() in r.stderr, r.stderr  # the same lines: source, caret, hint
    shutil.copy(FIXTURES / "projects" / "cycle" / "roadmap.md", root / "roadmap.md")
    r = run("-C", str(root), "run", cwd=tmp_path)
    assert r.returncode == 1 and "error[HC404]" in r.stderr and "hint:" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("harnessc: the build failed; fix the errors above and run again")


def test_build_with_errors_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "cycle", root, ignore=shutil.ignore_patterns("expected.txt"))
    r = run("-C", str(root), "build")
    assert r.returncode == 1 and "HC404" in r.stdout
    assert not (root / ".harness/build/plan.json").exists()


LS_KEYS = ["id", "title", "phase", "done", "depends_on", "contract", "agent", "model", "complexity",
           "priority", "max_iterations", "max_time", "stuck_after", "progress_threshold", "recovery",
           "completion_promise", "success", "accept", "context", "context_tokens", "tags", "git", "isolation",
           "approaches", "select", "score", "min_score", "resources", "min_passed", "retry_on", "dont_retry",
           "start_level", "protect", "allow_edit", "write_scope", "review", "split", "goal"]


def test_ls_json_seed_roadmap_keeps_its_meaning(seed: Path) -> None:
    r = run("-C", str(seed), "ls", "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    tasks = json.loads(r.stdout)
    assert [list(t) for t in tasks] == [LS_KEYS + ["analysis", "protected"]] * 2
    assert {"path": "tests/test_auth.py", "why": "named in the accept command", "new": True} not in tasks[0]["protected"]
    assert {"path": "roadmap.md", "why": "a spec file", "new": True} in tasks[0]["protected"]
    auth, perf = tasks
    assert auth["agent"] == ["codex", "gemini"]
    assert auth["max_time"] == 4 * 3600 and auth["max_iterations"] == 200 and auth["stuck_after"] == 5
    assert auth["completion_promise"] == "AUTH_COMPLETE"
    assert auth["success"] == "All auth tests pass, tokens validate correctly"
    assert auth["goal"].startswith("Goal: Create a complete JWT authentication system including:\n1. User registration endpoint")
    assert perf["agent"] == ["auto"] and perf["max_iterations"] is None and perf["max_time"] == 8 * 3600
    assert perf["success"] == "P95 latency < 100ms"
    assert perf["depends_on"] == [] and perf["contract"] is None and perf["tags"] == []


def test_ls_seed_section_8_2(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    shutil.copy(FIXTURES / "seed" / "section_8_2.md", root / "roadmap.md")
    (root / "harness.yaml").write_text(
        "agents:\n  codex: {provider: command, command: [codex]}\n  gemini: {provider: command, command: [gemini]}\n")
    r = run("-C", str(root), "ls", "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    (task,) = json.loads(r.stdout)
    assert task["max_time"] == 14400 and task["agent"] == ["codex", "gemini"] and task["phase"] is None


@pytest.mark.parametrize("args, expected", [
    (["-s", "qualify-001"], ["qualify-001"]),
    (["-s", "+qualify-001"], ["setup-001", "data-001", "qualify-001"]),
    (["-s", "market-001+"], ["market-001", "brief-001"]),
    (["-s", "tag:analysis"], ["market-001", "qualify-001"]),
    (["-s", "tag:analysis,tag:sales"], ["qualify-001"]),
    (["-s", "tag:sales market-001"], ["market-001", "qualify-001", "brief-001"]),
    (["-s", "phase:phase-1"], ["setup-001", "data-001"]),
    (["-s", "phase:*brief"], ["brief-001"]),
    (["-s", "data-001+", "--exclude", "brief-001"], ["data-001", "market-001", "qualify-001"]),
])
def test_ls_selection(demo: Path, args: list[str], expected: list[str]) -> None:
    r = run("-C", str(demo), "ls", "--output", "json", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [t["id"] for t in json.loads(r.stdout)] == expected


def test_ls_text_shows_agent_contract_and_effective_limits_golden(demo: Path) -> None:
    r = run("-C", str(demo), "ls")
    assert r.returncode == 0, r.stderr
    check_golden(FIXTURES / "cli" / "ls-demo.txt", r.stdout)
    # qualify-001 routes to `careful` with a 3m max_time; the others take the defaults.
    row = next(ln for ln in r.stdout.splitlines() if "qualify-001 " in ln)
    assert row.split()[:6] == ["qualify-001", "careful", "lead_score", "10", "3m", "3"]
    r = run("-C", str(demo), "ls", "-s", "brief-001")
    assert r.stdout.endswith("1 task of 5 selected\n")


def test_ls_unknown_selector_is_usage_error(demo: Path) -> None:
    r = run("-C", str(demo), "ls", "-s", "nope")
    assert r.returncode == 2 and "no task matches 'nope'" in r.stderr


@pytest.mark.parametrize("command", [["ls"], ["run", "--dry-run"], ["run"]])
def test_a_tag_or_phase_that_matches_nothing_says_so_with_what_there_is(demo: Path, command) -> None:
    # `run -s tag:nosuch` ran nothing and exited 0, as if the work were done.
    known = "tags: analysis, sales; phases: phase-1-inputs, phase-2-analysis, phase-3-brief"
    r = run("-C", str(demo), *command, "-s", "tag:nosuch")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "harnessc: error: no task has a tag matching 'nosuch'" in r.stderr and f"hint: {known}" in r.stderr
    r = run("-C", str(demo), *command, "-s", "phase:phase-2-analysys")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"hint: did you mean 'phase:phase-2-analysis'? {known}" in r.stderr
    assert not (demo / ".harness" / "runs").exists()


def test_graph_mermaid_and_dot(demo: Path) -> None:
    r = run("-C", str(demo), "graph")
    assert r.returncode == 0 and r.stdout.startswith("flowchart TD")
    assert "t_market_001 --> t_brief_001" in r.stdout
    r = run("-C", str(demo), "graph", "--output", "dot")
    assert r.returncode == 0 and '"qualify-001" -> "brief-001";' in r.stdout


def test_validate_output_against_contracts(demo: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"headline": "Acme is ready", "actions": ["Book a demo"]}))
    r = run("-C", str(demo), "validate", "--contract", "weekly_brief", str(good))
    assert r.returncode == 0, r.stdout + r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"qualification_score": 150, "bant_assessment": {"budget": "high"}}))
    r = run("-C", str(demo), "validate", "--contract", "lead_qualification", str(bad), "--output", "json")
    assert r.returncode == 1
    errors = json.loads(r.stdout)["errors"]
    paths = {e["path"] for e in errors}
    assert "$.qualification_score" in paths and "$.recommended_action" in paths
    assert any(e["rule"] == "value <= 100" for e in errors)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    r = run("-C", str(demo), "validate", "--contract", "weekly_brief", str(broken))
    assert r.returncode == 1 and "not valid JSON" in r.stdout
    r = run("-C", str(demo), "validate", "--contract", "weekly_brif", str(good))
    assert r.returncode == 2 and "did you mean 'weekly_brief'" in r.stderr


def test_validate_outside_a_project_uses_the_builtins(tmp_path: Path) -> None:
    # docs/cli.md: a built-in contract needs no project; it failed with HC001 "roadmap.md not found".
    out = tmp_path / "out.json"
    out.write_text(json.dumps({"title": "T", "summary": "S"}))
    r = run("validate", "--contract", "research_report", "out.json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "HC001" not in r.stdout + r.stderr
    assert "out.json: $.findings: required field is missing" in r.stdout
    # the contract or the file cannot be read: exit 2, as docs/cli.md says
    r = run("validate", "--contract", "research_reprt", "out.json", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean 'research_report'" in r.stderr
    r = run("validate", "--contract", "research_report", "missing.json", cwd=tmp_path)
    assert r.returncode == 2 and "cannot read missing.json" in r.stderr
    (tmp_path / "latin1.json").write_bytes(b'{"title": "caf\xe9"}')
    r = run("validate", "--contract", "research_report", "latin1.json", cwd=tmp_path)
    assert r.returncode == 2 and "cannot read latin1.json" in r.stderr
    (tmp_path / "contracts.yaml").write_bytes(b"contracts:\n  x: {description: caf\xe9}\n")
    r = run("validate", "--contract", "research_report", "out.json", cwd=tmp_path)
    assert r.returncode == 2 and "HC003" in r.stdout, r.stdout + r.stderr


def test_validate_bounds_hostile_regexes_and_costly_rules(tmp_path: Path) -> None:
    # Each of these hung `validate` (backtracking regexes, rules whose cost grew with the data).
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "regex-hangs", root, ignore=shutil.ignore_patterns("expected.txt"))
    (root / "contracts.yaml").write_text("""contracts:
  hostile:
    output:
      alternation: {type: str, rules: ["matches(value, '^(a|aa)*c$')"]}
      stars: {type: str, rules: ["matches(value, 'a*a*a*a*a*b')"]}
      nested: {type: str, schema: {pattern: '^(a+)+$'}}
      keys:
        type: dict
        schema: {patternProperties: {'^(a|aa)*c$': {type: integer}}, additionalProperties: false}
      rows: {type: list, rules: ["unique(value)", "[1] * 99999 + [2] in [[1] * 100000] * 100000"]}
""")
    long = "a" * 100_000
    out = tmp_path / "out.json"
    out.write_text(json.dumps({"alternation": long, "stars": long, "nested": long + "!", "keys": {long: 1},
                               "rows": [[1] * 10] * 100_000}))
    r = run("-C", str(root), "validate", "--contract", "hostile", str(out), "--output", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    errors = {e["path"]: e["message"] for e in json.loads(r.stdout)["errors"]}
    assert "breaks rule 'matches(value, '^(a|aa)*c$')'" in errors["$.alternation"]
    assert "breaks rule 'matches(value, 'a*a*a*a*a*b')'" in errors["$.stars"]
    assert "does not match '^(a+)+$'" in errors["$.nested"]
    assert any(p.startswith("$.keys") for p in errors)  # the long key matches no pattern
    rows = [e for e in json.loads(r.stdout)["errors"] if e["path"] == "$.rows"]
    assert len(rows) == 2 and all("rule is too costly for this data" in e["message"] for e in rows)
    # a pattern RE2 refuses is the contract's problem, reported where it is written
    (root / "contracts.yaml").write_text("contracts:\n  hostile:\n    output:\n"
                                         "      backref: {type: str, schema: {pattern: '(a)\\1'}}\n")
    r = run("-C", str(root), "validate", "--contract", "hostile", str(out))
    assert r.returncode == 1 and "contracts.yaml:4:" in r.stdout + r.stderr and "HC305" in r.stdout + r.stderr


def test_schema_and_contracts_commands(tmp_path: Path) -> None:
    r = run("schema")
    assert r.returncode == 0 and set(json.loads(r.stdout)) == {"contracts.schema.json", "harness.schema.json"}
    r = run("schema", "--out", str(tmp_path / "s"))
    assert r.returncode == 0 and (tmp_path / "s" / "harness.schema.json").is_file()
    r = run("contracts", "--output", "json")
    assert set(json.loads(r.stdout)) == {"lead_qualification", "research_report", "appointment_booking",
                                         "market_analysis", "compliance_check", "code_change"}


def test_init_scaffolds_a_project_that_lints(tmp_path: Path) -> None:
    root = tmp_path / "new"
    r = run("init", str(root))
    assert r.returncode == 0, r.stderr
    for name in ("roadmap.md", "contracts.yaml", "harness.yaml", ".gitignore", ".schemas/contracts.schema.json"):
        assert (root / name).exists(), name
    assert (root / "contracts.yaml").read_text().startswith("# yaml-language-server: $schema=")
    assert ".harness/" in (root / ".gitignore").read_text()
    r = run("-C", str(root), "build")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("init", str(root))
    assert r.returncode == 2 and "already exist" in r.stderr


def test_init_says_the_right_next_command_and_writes_a_real_overview(tmp_path: Path) -> None:
    here = tmp_path / "here"
    here.mkdir()
    r = run("init", cwd=here)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "next: harnessc lint && harnessc build"
    r = run("init", "my project", cwd=tmp_path)
    assert r.stdout.splitlines()[-1] == "next: cd 'my project' && harnessc lint && harnessc build"
    assert run("build", cwd=here).returncode == 0
    prompt = (here / ".harness" / "build" / "prompts" / "research-001.md").read_text()
    assert "{{" not in prompt and "A starter project made by `harnessc init`" in prompt


def test_every_command_is_in_the_lazy_table_and_listed_by_help() -> None:
    """cli.COMMANDS names each command's module (imported when it is used): a command defined
    in harnessc/commands/ but missing from the table would never be reachable."""
    import importlib
    import pkgutil

    import click

    from harnessc import commands
    from harnessc.cli import COMMANDS, cli

    defined = {}
    for info in pkgutil.iter_modules(commands.__path__):
        module = importlib.import_module(f"harnessc.commands.{info.name}")
        for attr, value in vars(module).items():
            if isinstance(value, click.Command) and value.name not in ("taskmaster", "speckit", "forget"):  # import's and memory's own
                defined[value.name] = f"{info.name}:{attr}"
    assert defined == COMMANDS
    ctx = click.Context(cli)
    assert all(cli.get_command(ctx, name).name == name for name in COMMANDS)
    r = run("--help")
    assert r.returncode == 0
    listed = r.stdout.split("Commands:\n", 1)[1]
    for name in COMMANDS:  # each with its short help, taken from the command itself
        assert f"  {name} " in listed and cli.get_command(ctx, name).get_short_help_str(45)[:20] in listed, name


def test_a_misspelt_command_is_offered_the_one_meant() -> None:
    r = run("stauts")
    assert r.returncode == 2 and "No such command 'stauts'" in r.stderr
    import click

    if hasattr(click.exceptions, "NoSuchCommand"):  # click >= 8.2 suggests, among every command
        assert "Did you mean" in r.stderr and "'status'" in r.stderr
