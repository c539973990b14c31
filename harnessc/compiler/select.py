"""dbt-style task selection: `id`, `+id` (with ancestors), `id+` (with descendants), `tag:x`,
`phase:x` (the phase's slug, its leading words, or its number: phase:phase-1, phase:1);
space-separated selectors are a union, comma-joined ones an intersection. A selector that
matches no task is a SelectionError.

With no selector, every task is chosen except the open ones tagged `deferred` and the open
tasks that depend on them: work put off (an importer tags Taskmaster's deferred and blocked tasks so)
runs only when selected (`-s tag:deferred`, its id), and nothing waiting for it starts
first."""

from __future__ import annotations

import fnmatch
import re

from ..diagnostics import closest
from ..errors import HarnesscError


class SelectionError(HarnesscError, ValueError):
    """A selector that is empty or matches no task (a usage error: exit 2, as dbt warns of a
    criterion that matches nothing); `hint` names what there is to select."""


DEFERRED_TAG = "deferred"  # tasks not chosen unless a selector names them (nor what depends on them)
NAMES_LISTED = 20  # tags, phases or ids a hint lists; the rest are counted


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_LISTED])
    return shown + (f" and {len(names) - NAMES_LISTED} more" if len(names) > NAMES_LISTED else "")


def _nothing_matched(kind: str, want: str, tasks: list[dict]) -> SelectionError:
    """`tag:nosuch`: say so, with the closest selector and the tags and phases there are."""
    tags = sorted({tag for t in tasks for tag in t.get("tags") or []})
    phases = list(dict.fromkeys(_slug(t["phase"]) for t in tasks if t.get("phase")))
    if kind == "id":
        message, choices = f"no task matches '{want}'", [t["id"] for t in tasks]
    else:
        message, choices = (f"no task has a tag matching '{want}'" if kind == "tag"
                            else f"no phase matches '{want}'"), tags if kind == "tag" else phases
    near = closest(want, choices)
    known = (f"tags: {_listed(tags)}" if tags else "no task has tags") + "; " + (
        f"phases: {_listed(phases)}" if phases else "no task is in a phase")
    if near:
        known = f"did you mean '{near if kind == 'id' else f'{kind}:{near}'}'? " + known
    return SelectionError(message, known)


def _closure(start: set[str], edges: dict[str, list[str]]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for nxt in edges.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


# a run of characters other than letters and digits, except a '.' inside a number (1.5)
_SLUG_GAP = re.compile(r"(?:[^a-z0-9.]|(?<![0-9])\.|\.(?![0-9]))+")


def _slug(text: str) -> str:
    """'Phase 1: Foundations' -> 'phase-1-foundations'; 'Phase 1.5: Fixes' -> 'phase-1.5-fixes'."""
    return _SLUG_GAP.sub("-", text.lower()).strip("-")


phase_slug = _slug  # what `phase:` selects by, for shell completion (harnessc/completion.py)


_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def _phase_matches(phase: str, want: str) -> bool:
    """Whether `phase:want` selects a phase. Phase names have spaces but selectors are
    space-separated, so the slug is what is matched, and by whole words: phase-1 selects
    "Phase 1: Foundations", never "Phase 10". A number selects the phase numbered so; a
    glob is matched against the name and the slug."""
    slug = _slug(phase)
    if any(ch in want for ch in "*?["):
        return any(fnmatch.fnmatchcase(name, want.lower()) for name in (phase.lower(), slug))
    if _NUMBER.fullmatch(want):
        number = _NUMBER.search(phase)
        return number is not None and number.group() == want
    wanted = _slug(want)
    return bool(wanted) and (slug == wanted or slug.startswith(wanted + "-"))


def _atom(atom: str, tasks: list[dict], parents: dict, children: dict) -> set[str]:
    up = atom.startswith("+")
    down = atom.endswith("+") and len(atom) > 1
    core = atom[1 if up else 0: -1 if down else None]
    if not core:
        raise SelectionError(f"empty selector '{atom}'")
    if core.startswith("tag:"):
        kind, want = "tag", core[4:]
        base = {t["id"] for t in tasks if any(fnmatch.fnmatchcase(tag, want) for tag in t.get("tags") or [])}
    elif core.startswith("phase:"):
        kind, want = "phase", core[6:]
        base = {t["id"] for t in tasks if t.get("phase") and _phase_matches(t["phase"], want)}
    else:
        kind, want = "id", core
        base = {t["id"] for t in tasks if fnmatch.fnmatchcase(t["id"], core)}
    if not base:  # a typo, not a wish to select nothing: say so rather than run nothing
        raise _nothing_matched(kind, want, tasks)
    out = set(base)
    if up:
        out |= _closure(base, parents)
    if down:
        out |= _closure(base, children)
    return out


def _put_off(tasks: list[dict], children: dict[str, list[str]]) -> set[str]:
    """The open tasks tagged `deferred` and the open tasks that wait for them (a checked
    task is complete, whatever it depends on: what waits for it may run)."""
    done = {t["id"] for t in tasks if t.get("done")}
    start = {t["id"] for t in tasks if DEFERRED_TAG in (t.get("tags") or []) and t["id"] not in done}
    return _closure(start, {k: [c for c in v if c not in done] for k, v in children.items()}) if start else set()


def select_ids(tasks: list[dict], select: list[str] | None, exclude: list[str] | None = None) -> set[str]:
    """The ids chosen by `select` (all when empty) minus those chosen by `exclude`."""
    parents = {t["id"]: list(t.get("depends_on") or []) for t in tasks}
    children: dict[str, list[str]] = {t["id"]: [] for t in tasks}
    for t in tasks:
        for d in t.get("depends_on") or []:
            children.setdefault(d, []).append(t["id"])

    def evaluate(exprs: list[str]) -> set[str]:
        chosen: set[str] = set()
        for expr in " ".join(exprs).split():
            parts = [p for p in expr.split(",") if p]
            sets = [_atom(p, tasks, parents, children) for p in parts]
            if sets:
                chosen |= set.intersection(*sets)
        return chosen

    chosen = evaluate(select) if select else {t["id"] for t in tasks} - _put_off(tasks, children)
    if exclude:
        chosen -= evaluate(exclude)
    return chosen
