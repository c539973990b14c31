"""Shared test helpers: golden files (HARNESSC_UPDATE_GOLDEN=1 rewrites them) and paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
UPDATE = os.environ.get("HARNESSC_UPDATE_GOLDEN") == "1"


def check_golden(path: Path, actual: str) -> None:
    """Compare `actual` with the golden file at `path`; rewrite it when updating."""
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"golden file {path} is missing; run with HARNESSC_UPDATE_GOLDEN=1 to create it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{path} differs (HARNESSC_UPDATE_GOLDEN=1 to accept the new output)"
