"""Hostile spec values and outputs: each is a located diagnostic or a clear error, and a
project that lints clean always builds (issue 7). The located messages are goldens under
fixtures/projects/ (yaml-numbers*, yaml-keys, long-task-id, schema-ref); these tests check
what goldens cannot: that build and `harnessc validate` end cleanly."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from harnessc.compiler import compile_project, lint_project
from harnessc.compiler.validate import NotJSON, extract_json, loads_json

from conftest import FIXTURES, REPO
from inproc import harnessc as in_process

DEMO = REPO / "specs" / "demo"
CASES = sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir())


def project(tmp_path: Path, **files: str) -> Path:
    root = tmp_path / "p"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns(".harness"))  # not a demo run's state
    for name, text in files.items():
        (root / name.replace("_", ".")).write_text(text, encoding="utf-8")
    return root


def codes(root: Path) -> set[str]:
    return {d.code for d in lint_project(root).diags.items}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_build_never_fails_where_lint_passed(case: Path, tmp_path: Path) -> None:
    root = tmp_path / case.name
    shutil.copytree(case, root, ignore=shutil.ignore_patterns("expected.txt"))
    linted = lint_project(root)
    built = compile_project(root)  # raises on an internal error
    if not linted.diags.has_errors():
        assert built.plan is not None, [str(d) for d in built.diags.items]


HARNESS = (DEMO / "harness.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("value", [".nan", ".NaN", ".inf", "-.inf", "1.0e+400", "9" * 400, "9" * 4301,
                                   str(2**63), str(-(2**63)), "0x" + "f" * 17])
@pytest.mark.parametrize("where", ["concurrency", "budget", "price"])
def test_number_out_of_range_is_hc206(tmp_path: Path, value: str, where: str) -> None:
    text = {
        "concurrency": HARNESS.replace("concurrency: 4", f"concurrency: {value}"),
        "budget": HARNESS.replace("max_cost_usd: 1.0", f"max_cost_usd: {value}"),
        "price": HARNESS.replace("input: 3.0", f"input: {value}", 1),
    }[where]
    root = project(tmp_path, harness_yaml=text)
    assert "HC206" in codes(root)
    assert compile_project(root).plan is None


@pytest.mark.parametrize("value", ["9223372036854775807", "1.5e300", "-0.0", "0o17"])
def test_numbers_in_range_pass(tmp_path: Path, value: str) -> None:
    root = project(tmp_path, harness_yaml=HARNESS.replace("max_cost_usd: 1.0", f"max_cost_usd: {value}"))
    assert "HC206" not in codes(root)


def test_keys_are_text_and_build(tmp_path: Path) -> None:
    # `1:`, `true:`, `~:` crashed `sorted` when they were an int, a bool and None
    contracts = (DEMO / "contracts.yaml").read_text(encoding="utf-8") + "".join(
        f"  {k}:\n    output:\n      n: {{type: int, example: 1}}\n" for k in ("1", "true", "~"))
    harness = HARNESS.replace("agents:\n", "agents:\n  1: {provider: simulate}\n  true: {provider: simulate}\n"
                                           "  ~: {provider: simulate}\n")
    roadmap = (DEMO / "roadmap.md").read_text(encoding="utf-8").replace("contract: market_notes", "contract: 1") \
        .replace("agent: careful", "agent: true")
    root = project(tmp_path, contracts_yaml=contracts, harness_yaml=harness, roadmap_md=roadmap)
    built = compile_project(root)
    assert built.plan is not None, [str(d) for d in built.diags.items]
    assert {"1", "true", "~"} <= set(built.contracts)
    node = next(n for n in built.plan["nodes"] if n["id"] == "market-001")
    assert node["contract"] == "1"


def test_task_id_at_the_limit_builds(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "long-task-id", root, ignore=shutil.ignore_patterns("expected.txt"))
    text = (root / "roadmap.md").read_text(encoding="utf-8")
    (root / "roadmap.md").write_text(text.split("- [ ] **bbb")[0], encoding="utf-8")
    built = compile_project(root, write_prompts=True)
    assert built.plan is not None
    from harnessc.compiler import write_build
    out = write_build(built)
    assert (out / "prompts" / ("a" * 128 + ".md")).is_file()


# ------------------------------------------------------------------ strict JSON for outputs


@pytest.mark.parametrize("text, why", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"a": NaN}', "NaN is not a JSON value"),
    ('{"a": -Infinity}', "-Infinity is not a JSON value"),
    ('{"a": 1e400}', "out of range"),
    ('{"a": ' + "1" * 5000 + "}", "more than 4,300 digits"),
])
def test_loads_json_refuses_what_json_cannot_hold(text: str, why: str) -> None:
    with pytest.raises(NotJSON, match=why):
        loads_json(text)
    value, message = extract_json(text)
    assert value is None and message


def test_extract_json_skips_a_nan_object_for_a_valid_one() -> None:
    assert extract_json('{"a": NaN} then {"a": 1}') == ({"a": 1}, None)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """`harnessc ARGS`, in this process (tests/inproc.py)."""
    return in_process(*args)


@pytest.mark.parametrize("body, message", [
    ("[" * 100_000 + "]" * 100_000, "not valid JSON: nested too deeply"),
    ('{"headline": "x", "actions": [NaN]}', "not valid JSON: NaN is not a JSON value"),
    ('{"headline": 1e999}', "not valid JSON: number 1e999 is out of range"),
    ('{"headline": ' + "7" * 5000 + "}", "not valid JSON: a number has more than 4,300 digits"),
])
def test_validate_cli_on_hostile_json(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "out.json"
    f.write_text(body, encoding="utf-8")
    r = run_cli("-C", str(DEMO), "validate", "--contract", "weekly_brief", str(f))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"out.json: {message}" in r.stdout
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    r = run_cli("-C", str(DEMO), "validate", "--contract", "weekly_brief", str(f), "--output", "json")
    assert r.returncode == 1 and json.loads(r.stdout)["errors"][0]["kind"] == "json"


def test_validate_refuses_a_contract_lint_refuses(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "schema-ref", root, ignore=shutil.ignore_patterns("expected.txt"))
    f = tmp_path / "out.json"
    f.write_text('{"node": {}}', encoding="utf-8")
    r = run_cli("-C", str(root), "validate", "--contract", "tree", str(f))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "HC218" in r.stdout and "Traceback" not in r.stderr


def test_schema_refs_are_never_retrieved(tmp_path: Path) -> None:
    # lint refuses $ref (HC218); should one reach the validator, jsonschema must not read it
    from harnessc.compiler.validate import _schema_errors

    target = tmp_path / "schema.json"
    target.write_text('{"type": "string"}', encoding="utf-8")
    with pytest.raises(Exception, match="Unresolvable"):
        _schema_errors({"properties": {"a": {"$ref": target.as_uri()}}}, {"a": 1})


def test_templates_name_too_long_for_the_file_system(tmp_path: Path) -> None:
    # found by test_mutated_projects_...: is_dir() raised ENAMETOOLONG
    root = project(tmp_path, harness_yaml=HARNESS + "templates: " + "x" * 300 + "\n")
    assert "HC216" in codes(root)
    assert compile_project(root).plan is None


@pytest.mark.parametrize("value, ok", [("9" * 400 + "h", False), ("1234567890s", False), ("1.0123456789m", False),
                                       ("999999999d", True), ("1h30m", True), ("0.5s", True)])
def test_duration_digits_are_bounded(tmp_path: Path, value: str, ok: bool) -> None:
    # 400 nines of hours were inf seconds, which plan.json wrote as max_time: null (no limit)
    root = project(tmp_path, harness_yaml=HARNESS.replace("max_time: 5m", f"max_time: {value}"))
    assert ("HC211" not in codes(root)) == ok
    built = compile_project(root)
    assert (built.plan is not None) == ok
    if ok:
        assert all(isinstance(n["limits"]["max_time"], (int, float)) for n in built.plan["nodes"])
