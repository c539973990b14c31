"""`harnessc lint --fix`: apply the fixes diagnostics carry (diagnostics.Fix), in place.

Only fixes with one clear answer are ever attached (a misspelt key, a property line missing
its bullet, indentation or ':'). A file is rewritten only when every byte outside the fixed
spots stays as it was, and when the fixed text, parsed again, has no problem the old text did
not have; a YAML file that does not load (aliases, anchors, tags, syntax errors) is left alone.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..diagnostics import Diagnostics, Fix
from .project import CONTRACTS, HARNESS, ROADMAP, Project
from .yamlsafe import load_yaml

_YAML_UNREADABLE = {"HC201", "HC202", "HC203", "HC205", "HC206"}  # the loader refused the file


@dataclass
class Change:
    code: str
    fix: Fix

    def line(self, paths: dict[str, str]) -> str:
        """`roadmap.md:12:5: fixed HC103: max_iteration -> max_iterations`"""
        f = self.fix
        return f"{paths.get(f.path, f.path)}:{f.line}:{f.col}: fixed {self.code}: {f.what}"

    def refused(self, paths: dict[str, str]) -> str:
        f = self.fix
        return (f"{paths.get(f.path, f.path)}:{f.line}:{f.col}: not fixed {self.code}: {f.what} "
                "would make a new problem (a key set twice?)")


@dataclass
class FixResult:
    changes: list[Change] = field(default_factory=list)
    left: list[Change] = field(default_factory=list)  # fixes that would have made a new problem
    skipped: dict[str, str] = field(default_factory=dict)  # file -> why it was left alone


def apply_fixes(project: Project) -> FixResult:
    """Apply the fixes of project.diags to the project's files; what changed, what was left."""
    result = FixResult()
    by_file: dict[str, list[tuple[str, Fix]]] = {}
    for d in project.diags.sorted():
        if d.fix is not None:
            by_file.setdefault(d.fix.path, []).append((d.code, d.fix))
    for name, fixes in by_file.items():
        why = _unfixable(project, name)
        if why is None:
            why = _fix_file(project, name, fixes, result)
        if why is not None:
            result.skipped[name] = why
    return result


def _unfixable(project: Project, name: str) -> str | None:
    if name not in (ROADMAP, CONTRACTS, HARNESS) or name not in project.sources:
        return "not a spec file"
    if name != ROADMAP and any(d.span.path == name and d.code in _YAML_UNREADABLE for d in project.diags.errors):
        return "the YAML does not load (syntax, aliases, anchors or tags); fix that first"
    return None


def _fix_file(project: Project, name: str, fixes: list[tuple[str, Fix]], result: FixResult) -> str | None:
    """Rewrite one file with its fixes; None when done, else why not."""
    path = project.root / name
    data = path.read_bytes()
    text = data.decode("utf-8")
    if text != project.sources[name]:
        return "the file changed since it was read; run lint --fix again"
    lines = text.splitlines(keepends=True)
    before = _problems(name, text)
    done: list[tuple[str, Fix]] = []
    # right to left within a line, so earlier columns stay where they were; one fix per spot
    for code, fix in sorted(fixes, key=lambda cf: (cf[1].line, -cf[1].col)):
        if done and done[-1][1].line == fix.line and done[-1][1].col < fix.col + len(fix.old):
            continue  # overlaps the fix already made on this line
        if not 1 <= fix.line <= len(lines):
            continue
        line = lines[fix.line - 1]
        at = fix.col - 1
        if line[at : at + len(fix.old)] != fix.old:
            continue  # the text is not written as the fix expects (a quoted YAML key): leave it
        lines[fix.line - 1] = line[:at] + fix.new + line[at + len(fix.old):]
        if _problems(name, "".join(lines)) - before:  # e.g. the key it becomes is set already
            lines[fix.line - 1] = line
            result.left.append(Change(code, fix))
            continue
        done.append((code, fix))
    if not done:
        return "no fix could be made without a new problem; fix it by hand"
    _write(path, "".join(lines).encode("utf-8"))
    result.changes += [Change(code, fix) for code, fix in sorted(done, key=lambda cf: (cf[1].line, cf[1].col))]
    return None


def _problems(name: str, text: str) -> set[tuple[str, int, str]]:
    """What parsing (not the project checks) says about one file's text."""
    diags = Diagnostics()
    if name == ROADMAP:
        from .roadmap import parse_roadmap

        parse_roadmap(text, name, diags)
    else:
        load_yaml(text, name, diags)
    return {(d.code, d.span.line, d.message) for d in diags.items}


def _write(path: Path, data: bytes) -> None:
    """Replace the file at once (a temporary file renamed over it), keeping its mode."""
    mode = path.stat().st_mode
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
