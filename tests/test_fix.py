"""`harnessc lint --fix`: golden before/after files, byte for byte, and what it refuses to touch."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from inproc import harnessc as in_process

FIXTURES = Path(__file__).parent / "fixtures" / "fix"
UPDATE = os.environ.get("HARNESSC_UPDATE_GOLDEN") == "1"


def _lint(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`harnessc -C root lint ARGS`, in this process (tests/inproc.py)."""
    return in_process("-C", str(root), "lint", *args)


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


@pytest.mark.parametrize("case", ["typos", "aliases"])
def test_fix_rewrites_to_the_golden_files(tmp_path, case):
    root = tmp_path / case
    shutil.copytree(FIXTURES / case / "before", root)
    r = _lint(root, "--fix")
    if UPDATE:
        shutil.rmtree(FIXTURES / case / "after", ignore_errors=True)
        shutil.copytree(root, FIXTURES / case / "after")
    assert _files(root) == _files(FIXTURES / case / "after")
    assert r.returncode == 1  # what cannot be fixed is still an error


def test_fix_says_what_it_changed_and_what_remains(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "typos" / "before", root)
    r = _lint(root, "--fix")
    out = r.stdout
    assert "roadmap.md:14:5: fixed HC103: max_iteration -> max_iterations" in out
    assert "roadmap.md:15:1: fixed HC102: '- contract: code_change' -> '  - contract: code_change'" in out
    assert "harness.yaml:5:1: fixed HC210: concurency -> concurrency" in out
    # max_iter is as close to max_time as to max_iterations: not fixed, still reported
    assert "fixed HC103: max_iter " not in out and "unknown key 'max_iter'" in out
    # timeout would set max_time twice
    assert "roadmap.md:27:5: not fixed HC103: timout -> timeout would make a new problem" in out
    # a quoted YAML key is left as written
    assert "unknown key 'defualts'" in out
    assert "fixed 10 problems; linted again:" in out and out.rstrip().endswith("3 errors, 0 warnings")
    again = _lint(root, "--fix")
    assert "fixed" not in again.stdout.replace("not fixed", "")  # a second run has nothing to do


def test_fix_keeps_crlf_line_ends_and_the_file_mode(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    before = (FIXTURES / "typos" / "before" / "roadmap.md").read_bytes().replace(b"\n", b"\r\n")
    after = (FIXTURES / "typos" / "after" / "roadmap.md").read_bytes().replace(b"\n", b"\r\n")
    (root / "roadmap.md").write_bytes(before)
    (root / "roadmap.md").chmod(0o640)
    _lint(root, "--fix")
    assert (root / "roadmap.md").read_bytes() == after
    assert stat.S_IMODE((root / "roadmap.md").stat().st_mode) == 0o640


def test_fix_with_json_output_keeps_stdout_json(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "aliases" / "before", root)
    r = _lint(root, "--fix", "--output", "json")
    assert "fixed HC103: max_iteration -> max_iterations" in r.stderr
    data = json.loads(r.stdout)
    assert [d["code"] for d in data] == ["HC203"] and all("fix" not in d for d in data)


def test_without_fix_nothing_is_written(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "typos" / "before", root)
    _lint(root)
    assert _files(root) == _files(FIXTURES / "typos" / "before")
