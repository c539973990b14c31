"""harnessc/schemas/ is generated from the IR models; regenerating must not change it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from harnessc.compiler.schemas import SCHEMA_FILES, dump, generate

from conftest import REPO


SCHEMAS = REPO / "harnessc" / "schemas"  # ships in the package, for lint's validator


@pytest.mark.parametrize("name", SCHEMA_FILES)
def test_committed_schema_is_current(name: str) -> None:
    committed = (SCHEMAS / name).read_text("utf-8")
    assert committed == dump(generate()[name]), f"run `harnessc schema --out harnessc/schemas` and commit {name}"


def test_top_level_schemas_is_the_package_copy() -> None:
    """schemas/ (for editors' `$schema=../schemas/...` modelines) is a link, not a twin."""
    top = REPO / "schemas"
    assert top.is_symlink() and top.resolve() == SCHEMAS.resolve()
    for spec in ("contracts.yaml", "harness.yaml"):
        modeline = (REPO / "specs" / "demo" / spec).read_text("utf-8").splitlines()[0]
        target = modeline.split("$schema=", 1)[1]
        assert (REPO / "specs" / "demo" / target).is_file(), modeline


@pytest.mark.parametrize("name", SCHEMA_FILES)
def test_schema_is_valid_draft07_with_descriptions(name: str) -> None:
    schema = json.loads((SCHEMAS / name).read_text("utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    for defname, body in schema.get("definitions", {}).items():
        if body.get("type") == "object":
            assert body.get("additionalProperties") is False, defname
            assert body.get("description"), defname
            for prop, sub in body.get("properties", {}).items():
                assert sub.get("description"), f"{defname}.{prop} has no description"


def _yaml(path):
    import yaml

    return yaml.safe_load(path.read_text("utf-8"))


def test_demo_specs_validate_against_schemas() -> None:
    for spec, name in (("contracts.yaml", "contracts.schema.json"), ("harness.yaml", "harness.schema.json")):
        schema = json.loads((SCHEMAS / name).read_text("utf-8"))
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(_yaml(REPO / "specs" / "demo" / spec)))
        assert errors == [], errors


def test_schema_rejects_unknown_key() -> None:
    schema = json.loads((SCHEMAS / "harness.schema.json").read_text("utf-8"))
    errors = list(jsonschema.Draft7Validator(schema).iter_errors({"agents": {"a": {"provider": "simulate", "latncy": "1s"}}}))
    assert errors and "latncy" in errors[0].message


def test_lint_imports_neither_pydantic_nor_jsonschema_nor_sdks(tmp_path) -> None:
    """Lint's start-up cost is a feature: the heavy libraries load only for build and run
    (and lark never: the parsers are generated into harnessc/grammar/lark_parsers.py)."""
    import shutil
    import subprocess
    import sys

    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))
    code = (
        "import sys\n"
        "from harnessc.cli import main\n"
        "sys.argv = ['harnessc', '-C', sys.argv[1], 'lint']\n"
        "try:\n    main()\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "heavy = sorted(m for m in ('pydantic', 'jsonschema', 'anthropic', 'openai', 'jinja2', 'lark', 'git') if m in sys.modules)\n"
        "print('HEAVY:' + ','.join(heavy))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "HEAVY:\n" in r.stdout, f"lint imported: {r.stdout}"


def test_build_imports_no_sdk(tmp_path) -> None:
    """build computes every provider's schema subset from the registry, without the SDKs."""
    import shutil
    import subprocess
    import sys

    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))
    code = (
        "import sys\n"
        "from harnessc.cli import main\n"
        "sys.argv = ['harnessc', '-C', sys.argv[1], 'build']\n"
        "try:\n    main()\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "print('SDKS:' + ','.join(m for m in ('anthropic', 'openai', 'httpx2', 'git') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "SDKS:\n" in r.stdout, f"build imported: {r.stdout}"
    assert (root / ".harness" / "build" / "plan.json").exists()
