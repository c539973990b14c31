"""Reading the files that ship inside the package (grammars, schemas, templates, contracts)."""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent


def read_text(*parts: str) -> str:
    """A package data file's text, e.g. read_text("grammar", "rules.lark").

    Installed packages are plain directories, so a path next to this module is the fast way
    (importlib.resources costs ~2 ms of imports on the first call, and every lint pays it);
    importlib.resources stays the fallback for zipped installs.
    """
    path = _ROOT.joinpath(*parts)
    try:
        return path.read_text("utf-8")
    except (FileNotFoundError, NotADirectoryError):
        from importlib import resources  # lazy: a fallback (a zipped install); it loads tempfile

        return resources.files("harnessc").joinpath(*parts).read_text("utf-8")
