"""The built-in contract library's two files: builtin_contracts.yaml is the source (edit it),
builtin_contracts.json the same data as harnessc reads it - every lint loads the library, and
json.loads takes a twentieth of the YAML reader's time (~3 ms).

    python -m harnessc.compiler.builtin_library   # rewrite the JSON from the YAML

A test checks that the two agree.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..diagnostics import Diagnostics
from ..package_data import read_text
from .yamlsafe import load_yaml

SOURCE = "builtin_contracts.yaml"
COPY = "builtin_contracts.json"
NOTE = f"generated from {SOURCE} by `python -m harnessc.compiler.builtin_library`: edit the YAML"


def source_data() -> dict:
    """The library as the YAML says it, safe-loaded like a user's specs."""
    data, _ = load_yaml(read_text("compiler", SOURCE), "<builtin>", Diagnostics(fail_fast=True))
    return data


def copy_data() -> dict:
    """The library as harnessc reads it: the JSON copy (its `note` says where it comes from)."""
    return json.loads(read_text("compiler", COPY))


def copy_text() -> str:
    """What the JSON copy should hold."""
    return json.dumps({"note": NOTE, **source_data()}, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    path = Path(__file__).resolve().parent / COPY
    path.write_text(copy_text(), encoding="utf-8")
    print(f"wrote {path}")
