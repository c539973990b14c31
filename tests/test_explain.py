"""`harnessc explain`: every code has an explanation, and its example shows that code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harnessc.compiler import lint_project
from harnessc.diagnostics import CODES
from harnessc.explain import explanations

from inproc import harnessc

PACKAGE = Path(__file__).resolve().parents[1] / "harnessc"
# Where a task is verified, so that an example about a YAML file shows that file's code only.
DEFAULT_ROADMAP = "## Tasks\n\n- [ ] **t1**: Say hello\n  - accept: true\n"


def emitted_codes() -> set[str]:
    """Every code written as a string literal in the package's source: what it can report."""
    codes = set()
    for path in PACKAGE.rglob("*.py"):
        codes |= set(re.findall(r"[\"'](HC\d{3})[\"']", path.read_text("utf-8")))
    return codes


def test_every_code_has_an_explanation():
    known = set(explanations())
    assert emitted_codes() - known == set(), "add these codes to harnessc/explain.yaml"
    assert set(CODES) == known
    assert len(known) > 40  # the grep found the codes, not nothing


def test_every_explanation_has_meaning_example_and_fix():
    for code, e in explanations().items():
        assert e.meaning and e.fix and e.title, code
        assert e.example or code == "HC004", code  # HC004 is reserved: the CLI never reports it


def _project(tmp: Path, files: dict[str, str], code: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    if "roadmap.md" not in files and code != "HC001":  # HC001's example is a project without one
        files = {"roadmap.md": DEFAULT_ROADMAP, **files}
    for name, text in files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp


CHECKED = [code for code, e in explanations().items() if e.checked]


@pytest.mark.parametrize("code", CHECKED)
def test_example_reports_its_code_and_the_fix_removes_it(tmp_path, code):
    e = explanations()[code]
    root = _project(tmp_path, dict(e.example), code)
    found = {d.code for d in lint_project(root).diags.items}
    assert code in found, (code, found)
    assert e.fixed, f"{code}: a checked example needs its fixed files"
    _project(tmp_path, dict(e.fixed), code)
    after = lint_project(root).diags.items
    assert code not in {d.code for d in after}, [str(d) for d in after]


def _harnessc(*args: str) -> subprocess.CompletedProcess:
    """`harnessc ARGS`, in this process (tests/inproc.py)."""
    return harnessc(*args)


def test_explain_cli_prints_meaning_example_and_fix():
    r = _harnessc("explain", "HC410")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("HC410: nothing verifies this task\n")
    assert "Example:" in r.stdout and "Fix:" in r.stdout and "- [ ] **t1**: Write the release notes" in r.stdout
    assert _harnessc("explain", "hc410").stdout == r.stdout
    assert _harnessc("explain", "410").stdout == r.stdout


def test_explain_unknown_code_is_a_usage_error_with_did_you_mean():
    r = _harnessc("explain", "HC4100")
    assert r.returncode == 2
    assert "unknown code 'HC4100'" in r.stderr and "did you mean 'HC410'?" in r.stderr
    r = _harnessc("explain", "HC999")
    assert r.returncode == 2 and "unknown code 'HC999'" in r.stderr and "harnessc explain" in r.stderr


def test_explain_lists_codes_and_speaks_json():
    r = _harnessc("explain")
    assert r.returncode == 0
    assert "HC410  nothing verifies this task" in r.stdout and r.stdout.count("\n") == len(CODES)
    import json

    r = _harnessc("explain", "HC103", "--output", "json")
    data = json.loads(r.stdout)
    assert data["code"] == "HC103" and "max_iterations" in data["fixed"]["roadmap.md"]


def test_explain_imports_no_sdk():
    code = ("import sys\nfrom harnessc.cli import main\nsys.argv=['harnessc','explain','HC410']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('anthropic','openai','pydantic') if m in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stderr.strip().endswith("[]"), r.stderr
