"""Shell completion of what a project names: task ids, selectors (tag:x, phase:x), agents
and contracts, for click's `shell_complete=` (bash, zsh and fish; see docs/cli.md).

Completion runs on every Tab, so it reads the spec files directly and cheaply: the roadmap
through the parser (no build, no pydantic, no SDK), the YAML files for their names only.
A broken or missing file completes nothing from it; completion never fails.
"""

from __future__ import annotations

from pathlib import Path

import click

from .workspace import find_project_root


def _root(ctx: click.Context) -> Path | None:
    """The project directory: `-C DIR` when given, else the nearest one upward."""
    project = ctx.find_root().params.get("project")
    if project:
        return Path(project) if Path(project).is_dir() else None
    return find_project_root(Path.cwd())


def _read(root: Path | None, name: str) -> str | None:
    if root is None:
        return None
    try:
        return (root / name).read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _yaml_names(text: str | None, key: str) -> list[str]:
    """The keys of the top-level mapping `key` of a YAML text ([] when it does not load, as
    lint loads it: no aliases, no tags, size and depth caps)."""
    if not text:
        return []
    from .compiler.yamlsafe import load_yaml
    from .diagnostics import Diagnostics

    data, _ = load_yaml(text, key, Diagnostics())
    section = data.get(key) if isinstance(data, dict) else None
    return [str(k) for k in section] if isinstance(section, dict) else []


def _tasks(ctx: click.Context):
    from .compiler.roadmap import parse_roadmap
    from .diagnostics import Diagnostics

    text = _read(_root(ctx), "roadmap.md")
    return parse_roadmap(text, "roadmap.md", Diagnostics()).tasks if text else []


def _matching(words, incomplete: str) -> list[str]:
    return [w for w in dict.fromkeys(words) if w.startswith(incomplete)]


def task_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """TASK arguments: the roadmap's task ids."""
    return _matching((t.id for t in _tasks(ctx)), incomplete)


def selectors(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """-s/--select and --exclude: ids, +id, id+, tag:x and phase:x; after a comma (an
    intersection), the next selector."""
    from .compiler.select import phase_slug

    head, _, word = incomplete.rpartition(",")
    prefix = head + "," if head else ""
    tasks = _tasks(ctx)
    if word.startswith("tag:"):
        words = ["tag:" + tag for t in tasks for tag in t.tags]
    elif word.startswith("phase:"):
        words = ["phase:" + phase_slug(t.phase) for t in tasks if t.phase]
    elif word.startswith("+"):
        words = ["+" + t.id for t in tasks]
    else:
        words = [t.id for t in tasks] + [t.id + "+" for t in tasks if t.id == word]  # with its descendants
        words += [w for w in ("tag:", "phase:") if any(t.tags if w == "tag:" else t.phase for t in tasks)]
    taken = set(head.split(",")) if head else set()
    return [prefix + w for w in _matching(words, word) if w not in taken]


def agents(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """--agent NAME and --agents A,B: harness.yaml's agents and the built-in rehearsal."""
    from .vocab import BUILTIN_AGENT

    head, _, word = incomplete.rpartition(",")
    prefix = head + "," if head else ""
    taken = set(head.split(",")) if head else set()
    names = [*_yaml_names(_read(_root(ctx), "harness.yaml"), "agents"), BUILTIN_AGENT]
    return [prefix + n for n in _matching(names, word) if n not in taken]


def contracts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """--contract NAME: contracts.yaml's contracts and the built-in library."""
    from .package_data import read_text

    names = _yaml_names(_read(_root(ctx), "contracts.yaml"), "contracts")
    names += _yaml_names(read_text("compiler", "builtin_contracts.yaml"), "contracts")
    return _matching(names, incomplete)


def tell_task(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """`tell [TASK] TEXT`: a task id while no word is typed yet."""
    return [] if ctx.params.get(param.name) else task_ids(ctx, param, incomplete)


def codes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """`explain CODE`: the diagnostic codes."""
    from .diagnostics import CODES

    return _matching(CODES, incomplete.upper())
