"""Passes that check the IR: references, context paths, rules, examples, cycles, verification."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from ..argv import split_command
from ..diagnostics import Span, closest, did_you_mean
from ..providers import clis
from ..vocab import BUILTIN_AGENT, ERROR_KINDS
from . import contextentry, contextglob, userregex
from .project import Project
from .specview import raw
from .tasks import approaches_of


def _value_span(task, key: str, index: int = 0) -> Span:
    spans = task.value_spans.get(key) or []
    if index < len(spans):
        return spans[index]
    return task.spans.get(key, task.span)


def resolve_references(project: Project) -> None:
    """depends_on, contract and agent names must exist (with did-you-mean)."""
    ids = [t.id for t in project.tasks]
    known = set(ids)
    agents = set(project.agent_names)  # a view of harness.yaml: read it once, not per task
    for task in project.tasks:
        for i, dep in enumerate(task.depends_on):
            if dep == task.id:
                project.diags.error("HC407", f"task '{task.id}' depends on itself", _value_span(task, "depends_on", i),
                                    "remove it from depends_on")
            elif dep not in known:
                project.diags.error("HC401", f"unknown dependency '{dep}'", _value_span(task, "depends_on", i),
                                    did_you_mean(dep, ids) or "depends_on lists task ids from this roadmap")
        if task.contract and task.contract not in project.contracts and not project.contracts_unreadable:
            project.diags.error("HC402", f"unknown contract '{task.contract}'", _value_span(task, "contract"),
                                did_you_mean(task.contract, project.contracts)
                                or "define it in contracts.yaml; `harnessc contracts` lists the built-ins")
        for i, name in enumerate(task.agent):
            if name != "auto" and name not in agents and not project.config_unreadable:
                names = project.agent_names
                project.diags.error("HC403", f"unknown agent '{name}'", _value_span(task, "agent", i),
                                    did_you_mean(name, names)
                                    or f"define it under agents: in harness.yaml (known: {', '.join(names)})")


def resolve_context(project: Project) -> None:
    """Context paths and globs must stay inside the project: no absolute path, `..`, or
    symbolic link (context files are read without following links), at most
    contextglob.MAX_MATCHES files per pattern."""
    root = str(project.root)
    expanded: dict[str, contextglob.Expansion] = {}  # pattern -> expansion: tasks repeat them
    for task in project.tasks:
        files: list[str] = []
        priority: dict[str, str] = {}  # file -> the highest priority of the entries naming it
        for i, entry in enumerate(task.context):
            pattern, level = contextentry.split_priority(entry)

            def span(task=task, i=i) -> Span:  # looked up only for a diagnostic
                return _value_span(task, "context", i)

            is_auto, tokens, wrong = contextentry.auto_entry(entry)
            if is_auto:
                if wrong:
                    project.diags.error("HC490", f"bad context entry '{entry.strip()}': {wrong}", span(),
                                        f"write {contextentry.AUTO_FORMS}; a file named auto is `./auto`")
                elif task.id in project.context_auto:
                    project.diags.error("HC491", f"context names auto twice in task '{task.id}'", span(),
                                        "write one `auto` or `auto(N)` entry")
                else:
                    project.context_auto[task.id] = tokens
                continue
            if "\0" in pattern:  # no file name has one (and the OS refuses to look it up)
                project.diags.error("HC405", f"context path {pattern!r} has a NUL byte", span(),
                                    "write the path as plain text")
                continue
            if os.path.isabs(pattern) or pattern.startswith("~") or Path(pattern).drive:
                project.diags.error("HC405", f"context path '{pattern}' is absolute", span(),
                                    "use a path relative to the project directory")
                continue
            if ".." in Path(pattern).parts:
                project.diags.error("HC405", f"context path '{pattern}' leaves the project", span(),
                                    "context files must be inside the project directory")
                continue
            if pattern not in expanded:
                expanded[pattern] = contextglob.expand(pattern, root)
            found = expanded[pattern]
            if found.link is not None:
                project.diags.error("HC405", f"context path '{found.link}' is a symbolic link", span(),
                                    "context files are read without following links: name the file "
                                    "it points to, or narrow the pattern")
            elif found.capped:
                project.diags.error("HC411", f"context pattern '{pattern}' matches more than "
                                    f"{contextglob.MAX_MATCHES:,} files", span(),
                                    "narrow the pattern: every file goes into the prompt")
            elif not found.found and (unknown := contextentry.unknown_priority(entry)):
                path, word = unknown
                project.diags.error("HC105", f"unknown context priority '{word}' in '{entry}'", span(),
                                    f"did you mean `{path} ({near})`?" if (near := closest(word.lower(), contextentry.PRIORITIES))
                                    else f"a priority is one of {', '.join(contextentry.PRIORITIES)}: `{path} (high)`")
            elif not found.found:
                project.diags.warning("HC406", f"context path '{pattern}' matches no file", span(),
                                      "check the path; it is relative to the project directory")
            files += found.files
            for f in found.files:
                if f not in priority or contextentry.PRIORITIES.index(level) < contextentry.PRIORITIES.index(priority[f]):
                    priority[f] = level
        if files:
            project.context_files[task.id] = list(dict.fromkeys(files))
            if any(p != "medium" for p in priority.values()):
                project.context_priority[task.id] = priority


def check_accept_commands(project: Project) -> None:
    """Accept commands must split into an argv (they never run through a shell)."""
    for task in project.tasks:
        for i, cmd in enumerate(task.accept):
            try:
                argv = split_command(cmd)
            except ValueError as e:
                project.diags.error("HC105", f"accept command cannot be split: {e}", _value_span(task, "accept", i),
                                    "close the quotes; commands run without a shell")
                continue
            if not argv:
                project.diags.error("HC105", "empty accept command", _value_span(task, "accept", i),
                                    "write the command to run, e.g. `accept: pytest -q`")
        if task.score is not None:
            try:
                ok = bool(split_command(task.score))
                why = "empty score command"
            except ValueError as e:
                ok, why = False, f"score command cannot be split: {e}"
            if not ok:
                project.diags.error("HC105", why, _value_span(task, "score"),
                                    "a command whose last output line is a number, e.g. `score: python bench.py`; "
                                    "commands run without a shell")


def check_accept_programs(project: Project) -> None:
    """HC455 (warning): an accept or score command whose program is a bare name not on PATH
    (`pytset`) fails every attempt, after the agent's call. `run` refuses such a task."""
    missing: dict[str, str | None] = {}  # program -> its hint, None when found (one lookup each)
    for task in project.tasks:
        if task.done:
            continue
        commands = [("accept", i, c) for i, c in enumerate(task.accept)]
        if task.score is not None:
            commands.append(("score", 0, task.score))
        for key, i, cmd in commands:
            try:
                argv = split_command(cmd)
            except ValueError:
                continue  # HC105
            if not argv or "/" in argv[0]:
                continue
            program = argv[0]
            if program not in missing:
                mean = None if shutil.which(program) else did_you_mean(program, _programs_like(program)) or ""
                missing[program] = None if mean is None else \
                    f"install '{program}', or correct the command" + (f" ({mean})" if mean else "")
            if missing[program] is not None:
                project.diags.warning(
                    "HC455", f"{key} command of task '{task.id}' runs '{program}', which is not on PATH: "
                             "every attempt would fail its check (`harnessc run` refuses the task)",
                    _value_span(task, key, i), missing[program])


def _programs_like(name: str) -> list[str]:
    """Programs on PATH whose names are close to `name` (for did-you-mean; one directory
    listing per PATH entry)."""
    names = set()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names.update(e for e in os.listdir(directory or ".") if e[:1] == name[:1])
        except OSError:
            continue
    return sorted(names)


def check_approaches(project: Project) -> None:
    """Best-of-N settings that cannot work together: several approaches in the task's own
    `isolation: none` (HC416: they need worktrees); `min_score` without a `score` command,
    `select`/`min_score` where one approach runs (HC415)."""
    default = 1 if project.config_unreadable else project.config.defaults.approaches
    for task in project.tasks:
        if task.done:
            continue
        n = approaches_of(task, default)
        if task.approaches and task.approaches > 1 and getattr(task.isolation, "value", None) == "none":
            project.diags.error(
                "HC416", f"task '{task.id}' runs {task.approaches} approaches at once, but says isolation: none",
                _value_span(task, "isolation"),
                "approaches need their own worktrees: remove `isolation: none` (approaches imply worktree), "
                "or set approaches: 1")
        elif task.score is not None and getattr(task.isolation, "value", None) == "none":
            project.diags.error(
                "HC416", f"task '{task.id}' has a score command, but says isolation: none",
                _value_span(task, "isolation"),
                "a score runs on an approach's worktree: remove `isolation: none` (a score implies worktree)")
        if task.min_score is not None and task.score is None:
            project.diags.error("HC415", f"min_score needs a score: task '{task.id}' has no score command",
                                _value_span(task, "min_score"),
                                "add `score: COMMAND` (its last output line is the approach's score), or remove min_score")
        if task.select is not None and n <= 1:
            project.diags.warning("HC415", f"select does nothing here: task '{task.id}' runs one approach",
                                  _value_span(task, "select"), "add `approaches: 3`, or remove select")


def check_review(project: Project) -> None:
    """`review: true` (the task's, else its contract's) on a task that shares the working tree
    (HC460, a warning): its change is in the tree once verified; review only holds its dependents."""
    default = None if project.config_unreadable else project.config.defaults.isolation
    for task in project.tasks:
        contract = project.contracts.get(task.contract) if task.contract else None
        said = task.review if task.review is not None else getattr(contract, "review", None)
        if task.done or not said or task.approaches or task.score:  # approaches and a score imply worktree
            continue
        mode = getattr(task.isolation or default, "value", task.isolation or default)
        if mode != "worktree":
            span = _value_span(task, "review") if task.review is not None else task.span
            project.diags.warning(
                "HC460", f"task '{task.id}' waits for review, but works in the shared tree: its change is there "
                "as soon as it is verified, and review only holds its dependents", span,
                "add `isolation: worktree` to land its change only when approved (`harnessc approve`)")


def check_resources(project: Project) -> None:
    """A task's `resources:` place its attempts on a Ray cluster; with the local executor
    nothing reads them (warning HC419, once per task)."""
    if project.executor_kind != "local":
        return
    for task in project.tasks:
        if task.resources and not task.done:
            project.diags.warning(
                "HC419", f"resources do nothing here: task '{task.id}' runs on the local executor",
                _value_span(task, "resources"),
                "they place attempts on a Ray cluster: a run reads them with `executor: ray` in harness.yaml or "
                "`harnessc run --executor ray`; otherwise remove the line")


def check_protect(project: Project) -> None:
    """`protect:`, `allow_edit:` and `write_scope:` (protectrules.py): every item a glob
    inside the project (HC420, in roadmap.md and harness.yaml `defaults`); an allow_edit that
    lifts nothing (HC421) or names harnessc's own `.harness/`, which stays protected (HC422);
    a write_scope where nothing checks it, a task in the shared tree (HC423). Warnings but HC420."""
    from .. import protectrules as protect

    defaults = None if project.config_unreadable else project.config.defaults
    marks = project.config_marks
    for key in ("protect", "allow_edit", "write_scope"):
        for i, pattern in enumerate((getattr(defaults, key, None) or ()) if defaults is not None else ()):
            if isinstance(pattern, str) and (why := protect.glob_problem(pattern)) is not None:
                project.diags.error("HC420", f"defaults.{key} item {pattern!r} {why}",
                                    marks.value(("defaults", key, i)) if marks else Span("harness.yaml", 1, 1),
                                    "write a glob relative to the project, like tests/** or src/*.py")
    common = protect.plan_entries(None if project.config_unreadable else project.config.templates,
                                  [p for p in (defaults.protect if defaults is not None else ()) if isinstance(p, str)])
    isolation = getattr(getattr(defaults, "isolation", None), "value", getattr(defaults, "isolation", None))
    n_default = 1 if defaults is None else defaults.approaches
    for task in project.tasks:
        if task.done or not (task.protect or task.allow_edit or task.write_scope):
            continue
        bad = False
        for key in ("protect", "allow_edit", "write_scope"):
            for i, pattern in enumerate(getattr(task, key)):
                if (why := protect.glob_problem(pattern)) is not None:
                    bad = True
                    project.diags.error("HC420", f"{key} item {pattern!r} {why}", _value_span(task, key, i),
                                        "write a glob relative to the project, like tests/** or src/*.py")
        if bad:
            continue
        if task.allow_edit:
            accept = []
            for cmd in task.accept:
                try:
                    accept.append(split_command(cmd))
                except ValueError:
                    pass  # HC105, reported by check_accept_commands
            try:
                score = split_command(task.score) if task.score else None
            except ValueError:
                score = None
            entries = [*common, *protect.task_entries(task.protect, accept, score, project.root, common)]
            for i, allow in enumerate(task.allow_edit):
                if any(e.why == protect.OWN and protect.overlaps(allow, e.path) for e in entries) \
                        and protect.matches(protect.HARNESS_DIR, protect.normal(allow) or "."):
                    project.diags.warning("HC422", f"allow_edit '{allow}' names harnessc's own .harness/, which stays "
                                          "protected", _value_span(task, "allow_edit", i),
                                          "an agent never changes .harness/: remove the item")
                elif not any(protect.overlaps(allow, e.path) for e in entries if e.why != protect.OWN):
                    project.diags.warning("HC421", f"allow_edit '{allow}' lifts nothing: no protected file of task "
                                          f"'{task.id}' is there", _value_span(task, "allow_edit", i),
                                          "protected are the spec files, CI configuration, the files its accept and "
                                          "score commands name and `protect:` globs; remove the item or fix the path")
        worktree = getattr(task.isolation, "value", task.isolation) == "worktree" or (
            task.isolation is None and (isolation == "worktree" or approaches_of(task, n_default) > 1
                                        or task.score is not None))
        if task.write_scope and not worktree:
            project.diags.warning("HC423", f"write_scope is not checked here: task '{task.id}' works in the "
                                  "project's own tree", _value_span(task, "write_scope"),
                                  "add `isolation: worktree` (an isolated attempt's change is known exactly), "
                                  "or remove the line")


def _walk_deliverables(output: dict, loc: tuple):
    """(path, deliverable) for every deliverable, nested fields and list items included."""
    for name, d in output.items():
        here = loc + (name,)
        yield here, d
        if d.fields:
            yield from _walk_deliverables(d.fields, here + ("fields",))
        if d.items is not None and not isinstance(d.items, str):
            yield here + ("items",), d.items
            if d.items.fields:
                yield from _walk_deliverables(d.items.fields, here + ("items", "fields"))


def _rule_span(project: Project, marks, loc: tuple, offset: int, length: int) -> Span:
    span = marks.value(loc)
    text = project.sources.get(span.path, "")
    lines = text.splitlines()
    quoted = 0
    if 0 < span.line <= len(lines) and span.col - 1 < len(lines[span.line - 1]):
        quoted = 1 if lines[span.line - 1][span.col - 1] in "'\"" else 0
    return span.shifted(quoted + offset, length)


def check_contracts(project: Project) -> None:
    """Rules parse and type-check; examples and defaults satisfy their own type and rules."""
    from .contract_schema import schema_refs
    from .validate import check_example

    for name in sorted(project.contract_marks):
        contract = project.contracts.get(name)
        marks = project.contract_marks[name]
        base = project.contract_paths[name]
        if contract is None or not contract.output:
            continue
        # a keyword of the wrong kind (`allOf: "s"`) breaks every later use of the schema
        # (examples are then not checked: jsonschema and the simulate agent would trip on it)
        shapeless = [loc for loc, d in _walk_deliverables(contract.output, base + ("output",))
                     if not _check_schema_shape(project, marks, loc + ("schema",), raw(d.schema_))]
        # a $ref reaches jsonschema through every enclosing deliverable's example check too
        refs = [loc + ("schema",) + ref for loc, d in _walk_deliverables(contract.output, base + ("output",))
                for ref in schema_refs(raw(d.schema_))]
        for loc in refs:
            _refuse_ref(project, marks, loc)
        sound = not refs and not shapeless  # every rule parses and type-checks, every example is valid, no $ref
        for loc, d in _walk_deliverables(contract.output, base + ("output",)):
            for key, wanted in (("fields", "dict"), ("items", "list")):
                if getattr(d, key) is not None and d.type not in (wanted, "any"):
                    project.diags.error("HC217", f"'{key}' applies to {wanted} deliverables, and '{loc[-1]}' is {d.type}",
                                        marks.key(loc + (key,)), f"set `type: {wanted}` or remove `{key}`")
            results = [_check_rule(project, marks, loc + ("rules", i), text, d) for i, text in enumerate(d.rules)]
            results.append(_check_schema_patterns(project, marks, loc + ("schema",), raw(d.schema_)))
            if not all(results) or refs or shapeless:
                sound = False
                continue
            for key in ("example", "default"):
                value = getattr(d, key)
                if value is None:
                    continue
                problems = check_example(d, value)
                if problems:
                    sound = False
                    project.diags.error("HC213", f"{key} of '{loc[-1]}' breaks its own contract: {problems[0]}",
                                        marks.value(loc + (key,)),
                                        "fix the value or the rule; fallbacks and the simulate agent use it")
        for i, text in enumerate(contract.output_rules):
            sound = _check_rule(project, marks, base + ("output_rules", i), text, contract.output) and sound
        if sound and name not in project.broken_contracts:  # a cut-down contract is not what was meant
            _check_simulate(project, contract, marks, base)


def _check_simulate(project: Project, contract, marks, base: tuple) -> None:
    """HC306: a rule the simulate agent cannot satisfy without an `example` to answer with.

    Always checked, not only when harness.yaml names a simulate agent: every project has the
    built-in `rehearsal` agent, and rehearsing is how a harness is tried before paying."""
    from .contract_schema import _dump
    from .synth import synthesize_output

    entry: dict[str, Any] = {"output": {name: _dump(d) for name, d in contract.output.items()},
             "output_rules": list(contract.output_rules)}
    for miss in synthesize_output(entry, examples_checked=True).unsatisfied:
        if miss.index is not None:
            loc = base + ("output",) + miss.loc + ("rules", miss.index)
        elif miss.rule in entry["output_rules"] and not miss.loc:
            loc = base + ("output_rules", entry["output_rules"].index(miss.rule))
        else:
            continue  # not a rule (a raw `schema:`): nothing to point at that the user wrote
        if loc not in marks.values:
            continue  # inherited through `extends`: warned at its own contract
        field = next((k for k in reversed(miss.loc) if k not in ("fields", "items")), None)
        subject = f"'{field}'" if field else "the output"
        span = _rule_span(project, marks, loc, 0, len(miss.rule))
        project.diags.warning("HC306", f"the simulate agent cannot satisfy rule '{miss.rule}' of "
                              f"{subject} by itself", span,
                              f"give '{field}' an `example:` that satisfies its rules; rehearsals answer with it"
                              if miss.loc else "give the fields `example:` values that satisfy this rule")


def _refuse_ref(project: Project, marks, loc: tuple) -> None:
    project.diags.error("HC218", "$ref is not allowed in a deliverable's schema", marks.key(loc),
                        "write the sub-schema out in full; references are never followed or fetched")


# What each draft-07 keyword holds, for HC220's message (else jsonschema's own words).
_KEYWORD_KINDS = {
    **dict.fromkeys(("additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if",
                     "then", "else"), "a schema (a mapping, or true or false)"),
    **dict.fromkeys(("properties", "patternProperties", "definitions"), "a mapping of names to schemas"),
    **dict.fromkeys(("allOf", "anyOf", "oneOf"), "a non-empty list of schemas"),
    "items": "a schema, or a list of schemas",
    "dependencies": "a mapping of names to schemas or to lists of property names",
    "type": "a type name (string, number, integer, boolean, array, object, null) or a list of them",
    "required": "a list of distinct property names",
    "enum": "a non-empty list of values",
}
MAX_SHAPE_ERRORS = 20  # per schema: the first ones say what is wrong


def _check_schema_shape(project: Project, marks, loc: tuple, schema) -> bool:
    """A `schema:` escape hatch must be a draft-07 JSON Schema: each keyword holds what the
    meta-schema says (HC220); True when it does. jsonschema is imported only for a project
    that has one."""
    if not schema:
        return True
    from jsonschema import Draft7Validator

    seen: set[tuple] = set()
    for e in Draft7Validator(Draft7Validator.META_SCHEMA).iter_errors(schema):
        where = tuple(e.absolute_path)
        if where in seen or any(where[:i] in seen for i in range(len(where))):
            continue  # one error a place, the outermost
        seen.add(where)
        if len(seen) > MAX_SHAPE_ERRORS:
            break
        keyword = next((k for k in reversed(where) if isinstance(k, str) and k in _KEYWORD_KINDS), None)
        if where and where[-1] == keyword:
            message = f"`{keyword}` must be {_KEYWORD_KINDS[keyword]}, not {_kind(e.instance)}"
        elif keyword and isinstance(where[-1], int) and keyword in ("allOf", "anyOf", "oneOf", "items"):
            message = f"item {where[-1] + 1} of `{keyword}` must be a schema (a mapping, or true or false), not {_kind(e.instance)}"
        elif where and isinstance(where[-1], str) and e.validator == "type":
            wanted = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
            message = f"`{where[-1]}` must be of type {' or '.join(wanted)}, not {_kind(e.instance)}"
        else:
            message = e.message if len(e.message) <= 200 else e.message[:197] + "..."
        project.diags.error("HC220", f"the schema of '{_owner(loc)}' is not a valid JSON Schema: {message}",
                            marks.value(loc + where),
                            "write the keyword as draft-07 JSON Schema defines it "
                            "(https://json-schema.org/draft-07/json-schema-validation)")
    return not seen


def _owner(loc: tuple) -> str:
    """The deliverable a `schema:` belongs to: the last name in its path."""
    return next((k for k in reversed(loc[:-1]) if k not in ("fields", "items") and isinstance(k, str)), "?")


def _kind(value) -> str:
    """A YAML value's kind, as a user reads it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return "a string" if len(value) > 40 else f"the string {value!r}"
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _check_schema_patterns(project: Project, marks, loc: tuple, schema: dict) -> bool:
    """Every regex of a `schema:` escape hatch must run on RE2 (HC305); True when all do."""
    from .contract_schema import schema_patterns

    ok = True
    for where, pattern, is_key in schema_patterns(schema, loc):
        refused = userregex.check(pattern)
        if refused:
            ok = False
            span = marks.key(where) if is_key else marks.value(where)
            project.diags.error("HC305", refused.message, span, refused.hint)
    return ok


def _check_rule(project: Project, marks, loc: tuple, text: str, subject) -> bool:
    """Parse and type-check one rule against its subject; report problems where they are."""
    from . import rules as rules_mod

    try:
        errors = rules_mod.check_rule(rules_mod.parse_rule(text), subject)
    except rules_mod.RuleError as e:
        errors = [e]
    for e in errors:
        project.diags.error(e.code, e.message, _rule_span(project, marks, loc, e.offset, e.length), e.hint)
    return not errors


def check_cycles(project: Project) -> None:
    """Every dependency cycle, reported at each task on it with the cycle's path."""
    tasks = {t.id: t for t in project.tasks}
    color: dict[str, int] = {}  # 0 unseen, 1 on stack, 2 done
    reported: set[frozenset] = set()
    for start in tasks:
        if color.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                color[node] = 1
                path.append(node)
            deps = [d for d in tasks[node].depends_on if d in tasks and d != node]
            if i < len(deps):
                stack.append((node, i + 1))
                nxt = deps[i]
                state = color.get(nxt, 0)
                if state == 0:
                    stack.append((nxt, 0))
                elif state == 1:
                    cycle = path[path.index(nxt):]
                    key = frozenset(cycle)
                    if key not in reported:
                        reported.add(key)
                        _report_cycle(project, tasks, cycle)
            else:
                color[node] = 2
                path.pop()


def _report_cycle(project: Project, tasks, cycle: list[str]) -> None:
    # cycle[k] depends on cycle[k+1]; print it in "runs before" order
    shown = " -> ".join(reversed(cycle + [cycle[0]]))
    for k, tid in enumerate(cycle):
        nxt = cycle[(k + 1) % len(cycle)]
        task = tasks[tid]
        idx = task.depends_on.index(nxt)
        project.diags.error("HC404", f"dependency cycle: {shown}", _value_span(task, "depends_on", idx),
                            f"'{tid}' depends on '{nxt}'; remove one dependency on the cycle")


def check_verification(project: Project) -> None:
    """Warn about open tasks that nothing verifies: any agent answer would count as done.

    A contract verifies only through its output (and output rules) or its accept commands:
    `contract: code_change` alone checks nothing.
    """
    verifies = _Verifies(project)
    for task in project.tasks:
        if task.done or task.accept or task.completion_promise or task.split:  # split: its subtasks verify
            continue
        if not task.contract:
            project.diags.warning("HC410", f"nothing verifies task '{task.id}'", task.span,
                                  "add a contract:, accept: or completion_promise: so a claim of success is checked")
            continue
        contract = project.contracts.get(task.contract)
        if contract is not None and task.contract not in project.broken_contracts and not verifies[task.contract]:
            project.diags.warning(
                "HC410", f"nothing verifies task '{task.id}': contract '{task.contract}' has no output and no accept commands",
                _value_span(task, "contract"),
                "add accept: (a command that must exit 0, e.g. `accept: pytest -q`) or completion_promise:",
            )


def check_loop_settings(project: Project) -> None:
    """A task's own loop settings (progress_threshold, recovery) apply to loop tasks only:
    on a task without a completion_promise they do nothing (warning HC412)."""
    for task in project.tasks:
        if task.done or task.completion_promise:
            continue
        for key in ("progress_threshold", "recovery"):
            if getattr(task, key) not in (None, ()):
                project.diags.warning(
                    "HC412", f"{key} does nothing here: task '{task.id}' is not a loop task",
                    task.spans.get(key, task.span),
                    "add completion_promise: WORD (the task iterates until it prints <promise>WORD</promise>), "
                    f"or remove {key}")


def check_recovery_escalation(project: Project) -> None:
    """A loop task's own `recovery:` naming `escalate` while its route has no stronger agent
    after its own: at run time the step is passed over (warning HC413). Only a task's own list
    is checked - harness.yaml's `loop.recovery.escalate` is every task's default - and only
    where the route is sure at lint (agents named by the task, or no routing.escalation or
    max_fallbacks 0); `agent: auto` and complexity routing are decided later."""
    if project.config_unreadable:
        return
    routing = project.config.routing
    escalation = list(routing.escalation)
    for task in project.tasks:
        if task.done or not task.completion_promise or "escalate" not in (task.recovery or ()):
            continue
        if "auto" in task.agent or _stronger_agents(task, escalation, routing.max_fallbacks) is not None:
            continue
        project.diags.warning(
            "HC413", f"recovery step 'escalate' does nothing here: task '{task.id}' has no stronger agent to go to",
            _value_span(task, "recovery", list(task.recovery).index("escalate")),
            "name the agents it may move to, strongest last (`agent: a, b`), or drop escalate from recovery")


# Words that ask for files to change: verbs that always do (implement, fix, refactor...), and
# verbs that do when the goal names code, a file or a path (write, add, update...).
_CHANGE_ALWAYS = re.compile(r"\b(implement|refactor|fix|edit|modify|patch|rename|delete|migrate|scaffold)\w*",
                            re.IGNORECASE)
_CHANGE_VERB = re.compile(r"\b(write|create|add|update|change|remove|generate|build|replace)\w*", re.IGNORECASE)
_FILE_WORDS = re.compile(r"\b(files?|code|function|module|class|tests?|script|config\w*|repo\w*|director\w+)\b"
                         r"|\b[\w.-]+/[\w./-]+|\b\w+\.(py|js|ts|go|rs|md|json|yaml|yml|toml|html|css|sh|java|c|h)\b",
                         re.IGNORECASE)


def check_read_only_changes(project: Project) -> None:
    """A task whose goal asks for file changes, run by a CLI agent with `permissions:
    read-only` (the default) and verified by its completion promise alone: the agent's
    writes are refused, yet its promise would pass the task (warning HC414). Only the agent
    lint is sure runs the task first is checked (compiler/plan.py's route decides the rest)."""
    if project.config_unreadable:
        return
    read_only = _read_only_cli_agents(project)
    routed = _routed_agent(project)
    verifies = _Verifies(project)
    for task in project.tasks:
        if task.done or not task.completion_promise or task.accept:
            continue
        # the agent first, the wording last: most tasks' agent is no read-only CLI, and the
        # wording's regexes cost the most (a 10k-task build ran them for every task)
        name = _first_agent(task, routed)
        if name not in read_only:
            continue
        contract = project.contracts.get(task.contract) if task.contract else None
        if (contract is not None and verifies[task.contract]) or not _asks_for_changes(task):
            continue
        where = _value_span(task, "agent") if task.agent and task.agent[0] == name else task.span
        project.diags.warning(
            "HC414", f"task '{task.id}' asks for file changes, but its agent '{name}' is read-only "
                     "and only the completion promise verifies it",
            where, f"give '{name}' `permissions: edit` in harness.yaml, or add accept: (a command that checks "
                   "the change, e.g. `accept: pytest -q`)")


def _read_only_cli_agents(project: Project) -> frozenset[str]:
    """The agents of harness.yaml that are CLI agents with `permissions: read-only` (the default)."""
    cli_providers = clis()
    return frozenset(name for name, config in project.config.agents.items()
                     if config.provider in cli_providers and (config.permissions or "read-only") == "read-only")


def _asks_for_changes(task) -> bool:
    text = f"{task.title} {task.goal}"
    return bool(_CHANGE_ALWAYS.search(text) or (_CHANGE_VERB.search(text) and _FILE_WORDS.search(text)))


def _first_agent(task, routed: str | None) -> str | None:
    """The agent that surely runs `task` first, as compiler/plan.py's route picks it; None
    when lint cannot tell (`auto`, a task model). routed: _routed_agent(project)."""
    named = [a for a in task.agent if a != "auto"]
    if named:
        return named[0]
    return None if task.agent or task.model else routed


def _routed_agent(project: Project) -> str | None:
    """The agent routing surely gives a task that names neither agent nor model (once per
    build: harness.yaml's views are made anew on each read); None when lint cannot tell."""
    routing = project.config.routing
    if routing.by_complexity:
        return None
    if routing.default != "auto":
        return routing.default
    if routing.escalation:
        return routing.escalation[0]
    user_agents = [a for a in project.config.agents if a != BUILTIN_AGENT]
    return user_agents[0] if len(user_agents) == 1 else None


def _stronger_agents(task, escalation: list[str], max_fallbacks: int) -> bool | None:
    """True when the task's route surely has an agent after its first; None when it surely
    has none; False when lint cannot tell (compiler/plan.py's route decides)."""
    if max_fallbacks == 0:
        return None
    if task.agent:
        first = task.agent[0]
        after = [*task.agent[1:], *escalation[escalation.index(first) + 1:]] if first in escalation else task.agent[1:]
        return True if any(a != first for a in after) else None
    return None if not escalation else False


class _Verifies(dict):
    """contract name -> _contract_verifies(the contract), worked out once per contract, not
    once per task that names it (its views are made anew on each attribute read)."""

    def __init__(self, project: Project):
        super().__init__()
        self.contracts = project.contracts

    def __missing__(self, name: str) -> bool:
        self[name] = verifies = _contract_verifies(self.contracts[name])
        return verifies


def _contract_verifies(contract) -> bool:
    """Whether a contract checks anything: a declared output, output rules or accept commands."""
    return bool(contract.output or contract.output_rules or contract.accept)


def check_min_passed(project: Project) -> None:
    """`min_passed:` and `junit:` (bad values are HC425, read with the rest): a JUnit path
    must stay inside the project (HC426); a task's min_passed with no accept command to
    count has nothing to hold (HC427, a warning)."""
    for name in sorted(project.contract_marks):
        contract = project.contracts.get(name)
        if contract is None or name in project.broken_contracts:
            continue  # a contract cut into has lost entries: their places are not where they were written
        marks = project.contract_marks[name]
        for i, entry in enumerate(raw(contract.accept)):
            path = entry.get("junit") if isinstance(entry, dict) else None
            problem = junit_problem(path) if isinstance(path, str) else None
            if problem:
                project.diags.error("HC426", f"junit path '{path[:80]}' {problem}",
                                    marks.value(project.contract_paths[name] + ("accept", i, "junit")),
                                    "name the file the command writes, relative to the project, "
                                    "e.g. `junit: build/junit.xml`")
    for task in project.tasks:
        if task.min_passed is None or task.done or task.accept:
            continue
        contract = project.contracts.get(task.contract) if task.contract else None
        if contract is None or not contract.accept:
            project.diags.warning("HC427", f"min_passed does nothing here: task '{task.id}' has no accept command",
                                  _value_span(task, "min_passed"),
                                  "add `accept: pytest -q` (a test run whose passing tests are counted), "
                                  "or remove min_passed")


def check_retry_kinds(project: Project) -> None:
    """A contract's `retry_on` / `dont_retry` name kinds of failure the runtime tells apart
    (HC451; a task's are read with the roadmap, roadmap.py)."""
    for name in sorted(project.contract_marks):
        contract = project.contracts.get(name)
        if contract is None or name in project.broken_contracts:
            continue
        marks = project.contract_marks[name]
        for key in ("retry_on", "dont_retry"):
            for i, kind in enumerate(raw(getattr(contract, key, None)) or ()):
                if not isinstance(kind, str) or kind.lower() in ERROR_KINDS:
                    continue
                near = did_you_mean(kind, list(ERROR_KINDS))
                allowed = "kinds: " + ", ".join(ERROR_KINDS) + " (`harnessc explain HC451`)"
                project.diags.error("HC451", f"unknown error kind '{kind[:80]}' in {key}",
                                    marks.value(project.contract_paths[name] + (key, i)),
                                    f"{near} {allowed}" if near else allowed)


def junit_problem(path: str) -> str | None:
    """What keeps a `junit:` path from naming a file inside the project; None when it does."""
    if not path.strip() or "\0" in path:
        return "is empty" if not path.strip() else "holds a NUL byte"
    p = PurePosixPath(path)
    if p.is_absolute() or path.startswith("~"):
        return "is absolute: it must be inside the project"
    if ".." in p.parts:
        return "goes through `..`: it must stay inside the project"
    if p.parts and p.parts[0] == ".harness":
        return "is inside .harness/, harnessc's own directory"
    return None
