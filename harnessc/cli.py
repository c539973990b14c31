"""The harnessc command line: click commands only. Parse flags, call the library, print.

Exit codes and summary lines come from harnessc/outcome.py (the one owner of both).
"""

from __future__ import annotations

import functools
import math
import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from . import __version__, completion
from .outcome import BROKEN, Exit, diagnostics_exit, diagnostics_summary
from .textsafe import json_text, visible
from .wording import plural
from .workspace import find_project_root


class Context:
    """What every command gets: the project directory."""

    def __init__(self, project: str | None):
        self.explicit = project

    def root(self, must_exist: bool = True) -> Path:
        if self.explicit:
            root = Path(self.explicit)
            if not root.is_dir():
                fail_usage(f"project directory '{self.explicit}' does not exist")
            return root.resolve()
        root = find_project_root(Path.cwd())
        if root is None:
            if must_exist:
                fail_usage(
                    "no harnessc project here: no roadmap.md or harness.yaml in this directory or above",
                    hint="run `harnessc init` to create one, or pass -C DIR",
                )
            return Path.cwd()
        return root


class USDParam(click.ParamType):
    """An amount of USD: a finite number >= 0 (`nan` and `inf` would turn a budget off)."""

    name = "usd"

    def convert(self, value, param, ctx):
        try:
            usd = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not an amount of USD", param, ctx)
        if not (math.isfinite(usd) and usd >= 0):
            self.fail(f"{value!r} is not an amount of USD (a finite number, 0 or more)", param, ctx)
        return usd


USD = USDParam()


def _read_input(path: str) -> str:
    """A file the user named on the command line, as text; unreadable: a usage error."""
    try:
        return Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail_usage(f"cannot read {path}: {e}")


def fail_usage(message: str, hint: str | None = None) -> NoReturn:
    click.echo(visible(f"harnessc: error: {message}"), err=True)
    if hint:
        click.echo(visible(f"  hint: {hint}"), err=True)
    sys.exit(Exit.USAGE)


def _echo_visible(text: str = "") -> None:
    """click.echo for text harnessc did not write: control characters shown, not obeyed."""
    click.echo(visible(text))


pass_ctx = click.make_pass_decorator(Context)


def output_option(*choices: str, old: str | None = None):
    """`--output CHOICE` (default: the first choice), the one spelling for machine output on
    every command.

    `old` names the spelling the command used before, kept working as a hidden alias:
    "--format" (an option with the same choices) or "--json" (a flag meaning `--output json`).
    The command receives the chosen value as `output`.
    """
    def decorate(f):
        @functools.wraps(f)
        def command(*args, output: str | None, output_alias=None, **kwargs):
            if output_alias:
                alias = "json" if output_alias is True else output_alias
                if output is not None and output != alias:
                    fail_usage(f"--output {output} and {old} {alias} disagree", hint="give --output only")
                output = alias
            return f(*args, output=output or choices[0], **kwargs)

        if old == "--json":
            command = click.option("--json", "output_alias", is_flag=True, hidden=True)(command)
        elif old:
            command = click.option(old, "output_alias", type=click.Choice(choices), default=None,
                                   hidden=True)(command)
        return click.option("--output", type=click.Choice(choices), default=None,
                            help=f"Output format (default: {choices[0]}).")(command)
    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="harnessc")
@click.option(
    "-C", "--project", metavar="DIR", default=None,
    help="Project directory (default: nearest directory upward with roadmap.md or harness.yaml).",
)
@click.pass_context
def cli(ctx: click.Context, project: str | None) -> None:
    """Compile roadmap.md + contracts.yaml into a checked plan, and run it."""
    ctx.obj = Context(project)


def main() -> None:
    from .workspace import WorkspaceError

    try:
        # the completion variable is _HARNESSC_COMPLETE however harnessc was started (python -m)
        cli.main(standalone_mode=False, complete_var="_HARNESSC_COMPLETE")
    except click.exceptions.Abort:
        click.echo("harnessc: aborted", err=True)
        sys.exit(Exit.STOPPED)
    except click.NoSuchOption as e:
        if e.option_name in ("-C", "--project"):
            fail_usage(f"{e.option_name} is an option of harnessc, not of the command",
                       hint=f"put -C before the command: {_project_first(sys.argv[1:])}")
        e.show()
        sys.exit(Exit.USAGE)
    except click.ClickException as e:
        e.show()
        sys.exit(Exit.USAGE)
    except SystemExit:
        raise
    except WorkspaceError as e:  # a link refused, a full disk, a read-only project
        fail_usage(str(e))
    except KeyboardInterrupt:
        click.echo("harnessc: interrupted", err=True)
        sys.exit(Exit.STOPPED)
    except Exception as e:
        if type(e).__module__ == "sqlite3" and not os.environ.get("HARNESSC_DEBUG"):
            # state.db is the only SQLite file: damaged in a way the check at open did not see
            damaged = type(e).__name__ == "DatabaseError"  # not locked, I/O or a full disk
            fail_usage(f".harness/state.db cannot be used ({e})",
                       "restore it from a backup, or move it aside to start fresh" if damaged else None)
        # an internal error: say so plainly, never a traceback
        click.echo(f"harnessc: internal error: {type(e).__name__}: {e}", err=True)
        click.echo("  hint: set HARNESSC_DEBUG=1 for the traceback, and please report it", err=True)
        if os.environ.get("HARNESSC_DEBUG"):
            raise
        sys.exit(Exit.USAGE)


def _project_first(args: list[str]) -> str:
    """The command line with a misplaced -C DIR (or --project[=]DIR) moved to the front."""
    import shlex

    rest, moved, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a in ("-C", "--project") and i + 1 < len(args):
            moved, i = ["-C", args[i + 1]], i + 2
            continue
        if a.startswith("--project="):
            moved = ["-C", a.split("=", 1)[1]]
        elif a.startswith("-C") and len(a) > 2:
            moved = ["-C", a[2:]]
        else:
            rest.append(a)
        i += 1
    return shlex.join(["harnessc", *moved, *rest])


# ============================================================== compiler commands
# (lint, build, ls, graph, validate, schema, contracts, init)

FORMATS = ("text", "json", "github", "sarif")


def shown_paths(diagnostics, root: Path | None) -> dict[str, str]:
    """Where each project file a diagnostic names is, from the invoking directory: with
    `-C specs/demo`, roadmap.md is specs/demo/roadmap.md (so editors and CI find it)."""
    import os

    from .compiler.project import SPEC_FILES

    if root is None:
        return {}
    base = Path(os.path.relpath(root, Path.cwd()))
    if base == Path("."):
        return {}
    # a missing spec file is still named where it belongs; built-in templates are not project files
    return {d.span.path: (base / d.span.path).as_posix() for d in diagnostics
            if d.span.path in SPEC_FILES or (root / d.span.path).is_file()}


def report(diags, sources: dict[str, str], fmt: str, strict: bool, quiet_ok: bool = False,
           root: Path | None = None) -> int:
    """Print diagnostics in the chosen format (paths relative to the invoking directory,
    the project's `root`); the exit code they call for."""
    from .diagnostics import render_github, render_json, render_sarif, render_text

    items = diags.sorted()
    paths = shown_paths(items, root)
    if fmt == "json":
        click.echo(render_json(items, paths), nl=False)
    elif fmt == "github":
        click.echo(render_github(items, paths), nl=False)
    elif fmt == "sarif":
        click.echo(render_sarif(items, __version__, paths, Path.cwd().as_uri() + "/"), nl=False)
    else:
        if items:
            click.echo(render_text(items, sources, paths), nl=False, err=False)
        line = diagnostics_summary(len(diags.errors), len(diags.warnings), strict)
        if line:
            click.echo(line)
        elif not quiet_ok:
            click.echo("ok: no problems found")
    return diagnostics_exit(len(diags.errors), len(diags.warnings), strict)


def ignored_codes(values: tuple[str, ...]) -> tuple[str, ...]:
    """The codes of `--ignore HC410 --ignore HC406,HC412` (any case, `410` for HC410); an
    unknown code is a usage error."""
    from .diagnostics import CODES, sole_match

    codes = []
    for value in values:
        for word in value.replace(",", " ").split():
            code = "HC" + word if word.isdigit() else word.upper()
            if code not in CODES:
                near = sole_match(code, CODES)
                near = f"did you mean '{near}'?" if near else None
                fail_usage(f"--ignore {word}: no such code", (f"{near} " if near else "") + "`harnessc explain` lists every code")
            codes.append(code)
    return tuple(codes)


def diagnostic_options(f):
    """--output (alias --format), --strict and --ignore, shared by the commands that report diagnostics."""
    f = click.option("--ignore", "ignore", multiple=True, metavar="CODE[,CODE]",
                     help="Ignore warnings of these codes (repeatable); errors are always reported.")(f)
    f = click.option("--strict", is_flag=True, help="Warnings fail too.")(f)
    return output_option(*FORMATS, old="--format")(f)


@cli.command()
@diagnostic_options
@click.option("--fix", is_flag=True, help="Apply the unambiguous fixes (a misspelt key, a property line written "
                                           "wrong) in place, say each, then report what remains.")
@pass_ctx
def lint(ctx: Context, output: str, strict: bool, ignore: tuple, fix: bool) -> None:
    """Check the specs: every problem at once, with file:line:col. Offline and fast."""
    from .compiler import lint_project

    codes = ignored_codes(ignore)
    root = ctx.root()
    project = lint_project(root, ignore=codes)
    if fix:
        project = _fix_and_relint(project, codes, to_stderr=output != "text")
    sys.exit(report(project.diags, project.sources, output, strict, root=project.root))


def _fix_and_relint(project, codes: tuple[str, ...], to_stderr: bool):
    """`lint --fix`: apply the fixes, print each (to stderr when stdout is for machines), and
    lint again."""
    from .compiler import lint_project
    from .compiler.fix import apply_fixes

    result = apply_fixes(project)
    paths = shown_paths(project.diags.items, project.root)
    for change in result.changes:
        click.echo(change.line(paths), err=to_stderr)
    for change in result.left:
        click.echo(change.refused(paths), err=to_stderr)
    for path, why in result.skipped.items():
        click.echo(f"{paths.get(path, path)}: not fixed: {why}", err=to_stderr)
    if not result.changes:
        return project
    click.echo(f"fixed {plural(len(result.changes), 'problem')}; linted again:", err=to_stderr)
    return lint_project(project.root, ignore=codes)


@cli.command()
@diagnostic_options
@pass_ctx
def build(ctx: Context, output: str, strict: bool, ignore: tuple) -> None:
    """Lint, then write .harness/build/plan.json and prompts/<task-id>.md."""
    from .compiler import compile_project, write_build

    project = compile_project(ctx.root(), write_prompts=True, ignore=ignored_codes(ignore))
    code = report(project.diags, project.sources, output, strict, quiet_ok=True, root=project.root)
    if code != Exit.OK or project.plan is None:
        sys.exit(code)
    out = write_build(project)
    if output == "text":
        click.echo(_build_summary(project.plan, out, project.root))
    sys.exit(Exit.OK)


def _build_summary(plan: dict, out: Path, root: Path) -> str:
    nodes = plan["nodes"]
    todo = [n for n in nodes if not n["done"]]
    agents = sorted({n["routing"]["agent"] for n in todo})
    cost = plan.get("estimate", {}).get("cost_usd")
    lines = [
        f"built {out.relative_to(root)}/plan.json",
        f"  tasks:         {len(nodes)} ({len(todo)} to run, {len(nodes) - len(todo)} done)",
        f"  waves:         {len(plan['waves'])}",
        f"  critical path: {' -> '.join(plan['critical_path']) if len(plan['critical_path']) <= 8 else ' -> '.join(plan['critical_path'][:4] + ['...'] + plan['critical_path'][-3:])} ({plural(len(plan['critical_path']), 'task')})",
        f"  agents:        {', '.join(agents) if agents else '-'}",
        "  estimated cost: " + (f"${cost:.4f} per attempt" if cost is not None else "unknown (set price: on agents)"),
    ]
    return "\n".join(lines)


def _compiled_or_exit(ctx: Context):
    """The compiled project; on spec errors print them and exit 1."""
    from .compiler import compile_project

    project = compile_project(ctx.root())
    if project.plan is None:
        report(project.diags, project.sources, "text", False, root=project.root)
        sys.exit(Exit.PROBLEMS)
    return project


SELECTOR_HINT = "selectors: id, +id, id+, tag:x, phase:x; space = union, comma = intersection"


@cli.command(name="ls")
@click.option("-s", "--select", "select", multiple=True, help="Selectors: id, +id, id+, tag:x, phase:x.",
              shell_complete=completion.selectors)
@click.option("--exclude", multiple=True, help="Selectors to leave out.", shell_complete=completion.selectors)
@output_option("text", "json")
@pass_ctx
def ls_cmd(ctx: Context, select: tuple, exclude: tuple, output: str) -> None:
    """List the tasks as resolved: agent, contract, effective limits, dependencies."""
    import json

    from .compiler import compile_project
    from .compiler.plan import task_view
    from .compiler.select import SelectionError, select_ids

    # JSON shows the values as written, plus the plan's analysis; the table shows what a run
    # would use (routing and defaults applied). Both take the compiled plan.
    project = compile_project(ctx.root())
    if project.roadmap is None or project.diags.has_errors():
        report(project.diags, project.sources, "text", False, root=project.root)
        sys.exit(Exit.PROBLEMS)
    views = [task_view(t) for t in project.tasks]
    try:
        chosen = select_ids(views, list(select), list(exclude))
    except SelectionError as e:
        fail_usage(str(e), e.hint or SELECTOR_HINT)
    views = [v for v in views if v["id"] in chosen]
    if output == "json":
        nodes = {n.id: n for n in project.plan.nodes}
        for v in views:
            v["analysis"] = dict(nodes[v["id"]].analysis)
        click.echo(json.dumps(views, indent=2))
        return
    nodes = {n["id"]: n for n in project.plan["nodes"]}
    if views:
        click.echo(_task_table([nodes[v["id"]] for v in views]))
    click.echo(f"{plural(len(views), 'task')}"
               + (f" of {len(project.tasks)} selected" if len(views) != len(project.tasks) else ""))


def _task_table(nodes: list[dict]) -> str:
    """`ls`: one row per task, with the agent, contract and limits a run would use."""
    from .wording import duration, table

    rows = []
    for n in nodes:
        lim = n["limits"]
        rows.append((
            "x" if n["done"] else " ", n["id"], n["routing"]["agent"], n["contract"] or "-",
            str(lim["max_iterations"]) if lim.get("max_iterations") is not None else "unlimited",
            duration(lim["max_time"]) if lim.get("max_time") is not None else "-",
            str(lim["stuck_after"]) if lim.get("stuck_after") is not None else "-",
            f"${lim['budget_usd']:.2f}" if lim.get("budget_usd") is not None else "-",
            ",".join(n["depends_on"]) or "-", n["title"]))
    return table(("done", "task", "agent", "contract", "iterations", "time", "stuck", "budget", "after", "title"),
                 rows, right=("iterations", "time", "stuck", "budget"))


@cli.command()
@output_option("mermaid", "dot", "json", old="--format")
@pass_ctx
def graph(ctx: Context, output: str) -> None:
    """Print the task DAG as Mermaid (default), Graphviz DOT or JSON."""
    from .compiler.graph import to_dot, to_json, to_mermaid

    project = _compiled_or_exit(ctx)
    render = {"mermaid": to_mermaid, "dot": to_dot, "json": to_json}[output]
    click.echo(render(project.plan["nodes"]), nl=False)


UNREADABLE_SPEC = ("HC002", "HC003")  # contracts.yaml or harness.yaml too large, or not UTF-8


@cli.command()
@click.option("--contract", "contract_name", required=True, help="A contract name (project or built-in).",
              shell_complete=completion.contracts)
@click.argument("file", type=click.Path(dir_okay=False))
@output_option("text", "json")
@pass_ctx
def validate(ctx: Context, contract_name: str, file: str, output: str) -> None:
    """Validate an output JSON file against a contract: exit 0 valid, 1 invalid, 2 when the
    contract or the file cannot be read. Works outside a project with a built-in contract."""
    import json

    from .compiler import check, load
    from .compiler.contract_schema import contract_plan_entry
    from .compiler.project import Project
    from .compiler.validate import NotJSON, OutOfTime, loads_json, validate_output
    from .diagnostics import did_you_mean

    root = ctx.root(must_exist=False)
    project = Project(root=root)
    for p in (load.discover_contracts, load.load_config, load.load_contracts, check.check_contracts):
        p(project)
    if project.diags.has_errors():  # a contract lint refuses is not one to validate against
        code = report(project.diags, project.sources, "text", False, root=project.root)
        unreadable = any(d.code in UNREADABLE_SPEC for d in project.diags.errors)
        sys.exit(Exit.USAGE if unreadable else code)
    load.to_models(project)
    if contract_name not in project.contracts:
        fail_usage(f"unknown contract '{contract_name}'",
                   did_you_mean(contract_name, project.contracts) or "`harnessc contracts` lists the built-ins")
    d = project.config.defaults
    entry = contract_plan_entry(contract_name, project.contracts[contract_name],
                                default_max_retries=d.max_retries,
                                default_on_failure=getattr(d.on_failure, "value", d.on_failure))
    text = _read_input(file)
    try:
        data = loads_json(text)
    except json.JSONDecodeError as e:
        errors = [{"path": "$", "kind": "json", "message": f"{file}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}", "rule": None}]
    except NotJSON as e:
        errors = [{"path": "$", "kind": "json", "message": f"{file}: not valid JSON: {e}", "rule": None}]
    else:
        try:
            errors = validate_output(entry, data)
        except OutOfTime as e:  # the rules together took too many steps
            errors = [{"path": "$", "kind": "rule", "message": f"$: {e}", "rule": None}]
    if output == "json":
        click.echo(json.dumps({"valid": not errors, "contract": contract_name, "errors": errors}, indent=2))
    elif errors:
        for e in errors:
            click.echo(e["message"] if e["message"].startswith(file) else f"{file}: {e['message']}")
        click.echo(f"invalid: {plural(len(errors), 'problem')} against contract '{contract_name}'")
    else:
        click.echo(f"valid: {file} satisfies contract '{contract_name}'")
    sys.exit(Exit.PROBLEMS if errors else Exit.OK)


@cli.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write the schemas into this directory instead of printing them.")
def schema(out_dir: str | None) -> None:
    """Print or write the JSON Schemas of contracts.yaml and harness.yaml."""
    from .compiler.schemas import dump, generate

    schemas = generate()
    if out_dir:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        for name, body in schemas.items():
            (d / name).write_text(dump(body), encoding="utf-8")
            click.echo(f"wrote {d / name}")
    else:
        import json

        click.echo(json.dumps(schemas, indent=2))


@cli.command()
@output_option("text", "json")
def contracts(output: str) -> None:
    """List the built-in contract library."""
    import json

    from .compiler.contract_schema import load_builtin_contracts

    lib = load_builtin_contracts()
    if output == "json":
        click.echo(json.dumps({n: c.model_dump(mode="json", by_alias=True, exclude_none=True) for n, c in lib.items()}, indent=2))
        return
    for name, c in lib.items():
        fields = ", ".join(c.output) if c.output else "(no output; verified by accept commands and the promise)"
        click.echo(f"{name}: {c.description}\n    output: {fields}\n    on_failure: {c.on_failure or 'retry'}, max_retries: {c.max_retries if c.max_retries is not None else 2}")


@cli.command()
@click.argument("code", required=False, shell_complete=completion.codes)
@output_option("text", "json")
def explain(code: str | None, output: str) -> None:
    """What a diagnostic CODE means, a minimal example and the fix (no CODE: every code)."""
    import json

    from .diagnostics import sole_match
    from .explain import explanations, lookup

    if code is None:
        rows = explanations().values()
        if output == "json":
            click.echo(json.dumps([e.to_json() for e in rows], indent=2))
        else:
            for e in rows:
                click.echo(f"{e.code}  {e.title}")
        return
    found = lookup(code)
    if found is None:
        near = sole_match(code.strip().upper(), explanations())
        near = f"did you mean '{near}'?" if near else None
        fail_usage(f"unknown code '{code}'", (f"{near} " if near else "") + "`harnessc explain` lists every code")
    click.echo(json.dumps(found.to_json(), indent=2) if output == "json" else found.text(), nl=output == "json")


@cli.command()
@click.argument("directory", required=False, default=".")
@click.option("--force", is_flag=True, help="Overwrite existing spec files.")
def init(directory: str, force: bool) -> None:
    """Scaffold a project: roadmap.md, contracts.yaml, harness.yaml; .harness/ ignored."""
    from .compiler.scaffold import ScaffoldError, scaffold

    try:
        written = scaffold(Path(directory), force=force)
    except ScaffoldError as e:
        fail_usage(str(e), "pass --force to overwrite, or choose another directory")
    for path in written:
        click.echo(f"created {path}")
    import shlex

    here = Path(directory).resolve() == Path.cwd().resolve()
    click.echo(("next: " if here else f"next: cd {shlex.quote(directory)} && ") + "harnessc lint && harnessc build")


@cli.group(name="import")
def import_cmd() -> None:
    """Write a roadmap.md from a task list another tool keeps (Taskmaster, spec-kit)."""


def _import_options(f):
    f = click.option("--force", is_flag=True, help="Overwrite an existing roadmap.md.")(f)
    f = click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default=None,
                     help="Where to write (default: roadmap.md in the project directory, -C, or here).")(f)
    return click.argument("path", type=click.Path(dir_okay=False))(f)


@import_cmd.command(name="taskmaster")
@_import_options
@click.option("--tag", default=None, help="The tagged task list to import (default: master).")
@pass_ctx
def import_taskmaster(ctx: Context, path: str, out: str | None, force: bool, tag: str | None) -> None:
    """Import Taskmaster's .taskmaster/tasks/tasks.json (tagged or older layout)."""
    from .importers import taskmaster

    _import(ctx, path, out, force, lambda text: taskmaster.read(text, path, tag))


@import_cmd.command(name="speckit")
@_import_options
@pass_ctx
def import_speckit(ctx: Context, path: str, out: str | None, force: bool) -> None:
    """Import spec-kit's specs/NNN-feature/tasks.md."""
    from .importers import speckit

    _import(ctx, path, out, force, lambda text: speckit.read(text, path))


def _import(ctx: Context, path: str, out: str | None, force: bool, read) -> None:
    """Read PATH, write the roadmap (never over one without --force), list what did not map,
    then lint what was written."""
    from .compiler.roadmap import parse_roadmap
    from .diagnostics import Diagnostics
    from .importers import NotImportable

    target = Path(out) if out else Path(ctx.explicit or ".") / "roadmap.md"
    if target.exists() and not force:
        fail_usage(f"{target} exists; not overwritten", "pass --force to replace it, or -o to write elsewhere")
    text = _read_input(path)
    try:
        imported = read(text)
    except NotImportable as e:
        fail_usage(str(e))
    roadmap_text = imported.text()
    check = Diagnostics()
    parse_roadmap(roadmap_text, "roadmap.md", check)
    if check.errors:  # an importer bug: say so rather than write a roadmap lint refuses
        fail_usage(f"the imported roadmap would not parse: {check.errors[0].message} (line {check.errors[0].span.line})",
                   "please report it with the file you imported")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(roadmap_text, encoding="utf-8")
    tasks = imported.roadmap.tasks
    done = sum(t.done for t in tasks)
    click.echo(f"wrote {target}: {plural(len(tasks), 'task')} ({done} done) from {path}")
    if imported.unmapped:
        click.echo(f"not mapped ({len(imported.unmapped)}):")
        for line in imported.unmapped:
            click.echo(f"  - {line}")
    click.echo(f"next: harnessc{' -C ' + str(target.parent) if target.parent != Path('.') else ''} lint "
               "(tasks without accept:, contract: or completion_promise: get warning HC410)")


# ============================================================== runtime commands
# (run, status, stop, retry, reset, log) — see below


def _runtime_plan(root: Path, no_build: bool) -> dict:
    from .runtime import plan as planmod

    try:
        return planmod.ensure_plan(root, no_build, say=lambda m: click.echo(f"harnessc: {m}", err=True))
    except planmod.BuildFailed as e:
        for line in e.lines:
            click.echo(line, err=True)
        click.echo("harnessc: the build failed; fix the errors above and run again", err=True)
        sys.exit(Exit.PROBLEMS)
    except planmod.PlanError as e:
        fail_usage(str(e))


def _executor_settings(plan, opts, need_ray: bool = False):
    """The run's executor settings (None: local) from the plan and `opts.executor` /
    `opts.ray_address`; exits with a usage error for flags that cannot be used, or, with
    `need_ray`, when Ray cannot be imported."""
    from .runtime.executor import ExecutorError
    from .runtime.executor.rayconfig import require_ray, resolve_executor

    try:
        settings = resolve_executor(plan, opts.executor, opts.ray_address)
        if settings is not None and need_ray:
            require_ray()
    except ExecutorError as e:
        fail_usage(e.message, hint=e.hint)
    return settings


def _execute(root: Path, plan: dict, opts) -> None:
    """Run with a display, print the summary, exit with the run's code."""
    from rich.console import Console

    _executor_settings(plan, opts, need_ray=True)  # before anything starts: Ray is importable

    from .runtime.observe import display as displaymod
    from .runtime.children import prctl

    # Before any child exists: our environment holds API keys, and a child running as the
    # same user could otherwise read it from /proc/<harnessc>/environ. (Only run and retry
    # start children; other commands keep their start-up cost and stay debuggable.)
    prctl.make_undumpable()
    from .runtime.store.lock import Locked
    from .runtime.preflight import Refused
    from .runtime.session import execute
    from .runtime.store.state import StateError
    from .runtime.executor import ExecutorError
    from .runtime.worktree.repo import IsolationError

    console = Console()
    view = displaymod.make_display(console)

    def on_start(runner, recovered):
        warning = runner.preflight.warning() if runner.preflight else None
        if warning:
            click.echo(f"warning: {warning}", err=True)
        if recovered["interrupted_attempts"]:
            n = len(recovered["interrupted_attempts"])
            click.echo(f"resuming: {plural(n, 'interrupted attempt')} will start again", err=True)
        if recovered.get("max_cost_kept") is not None:
            click.echo(f"budget: ${recovered['max_cost_kept']:g} from an earlier --max-cost "
                       "(pass --max-cost to change it; `harnessc reset --all` forgets it)", err=True)
        if recovered.get("max_cost_ignored"):
            click.echo(f"budget: the --max-cost kept from an earlier run was ignored and forgotten "
                       f"({recovered['max_cost_ignored']}); harness.yaml's budget applies", err=True)
        view.start(runner, 0)

    try:
        result = execute(root, plan, opts, listeners=[view.on_event],
                         on_start=on_start)
    except Locked as e:
        fail_usage(str(e), hint="wait for it, or stop it with `harnessc stop`")
    except Refused as e:  # nothing was called or charged
        for line in e.lines:
            click.echo(visible(f"harnessc: error: {line}"), err=True)
        click.echo("  hint: nothing was run; fix these agents or choose others with --agent/--agents "
                   "(`harnessc doctor` checks every agent)", err=True)
        sys.exit(Exit.USAGE)
    except StateError as e:
        fail_usage(str(e))
    except (IsolationError, ExecutorError) as e:
        fail_usage(e.message, hint=e.hint)
    finally:
        view.close()
    from .outcome import next_steps, run_summary_line
    from .runtime.observe.cachesaving import cache_line

    if result.run_id:
        displaymod.print_summary(console, result.tasks, title=f"run {result.run_id}")
    if result.stale:
        click.echo(f"stale: {', '.join(result.stale)} — use --rerun stale", err=True)
    if result.outputs:
        click.echo(f"outputs: {plural(result.outputs, 'result')} in .harness/outputs/<task>.json; "
                   "`harnessc show TASK` prints one and how it was verified")
    if result.simulated:
        click.echo("costs: simulated prices (every call went to a simulate agent); no money was spent")
    if result.outcome.nothing_to_run:
        click.echo(visible(result.outcome.headline()))
    else:
        click.echo(visible(run_summary_line(result.outcome, result.cost_usd, result.total_cost_usd, result.elapsed)))
        cached = cache_line(result.cache) if result.cache else None
        if cached:
            click.echo(cached)
    for line in result.notes:  # isolation: a landing's conflict names git's words
        click.echo(visible(line))
    for line in next_steps(result.outcome, result.tasks, result.budget_stop):  # skip reasons: agents' words
        click.echo(visible(line))
    # status "error": state.db was lost under the run, and no longer holds it to report on
    if result.run_id and not result.outcome.nothing_to_run and result.status != "error":
        _report_line(root, result.run_id)
    sys.exit(result.exit_code)


def _report_line(root: Path, run_id: str) -> None:
    """Where the run's HTML report goes. `run` does not draw it: the chart library costs a
    second of start-up that a short run (and `run`'s import budget) should not pay."""
    from .workspace import Workspace

    click.echo(f"report: `harnessc report` writes {_shown(root, Workspace(root).run_dir(run_id) / 'report.html')}")


@cli.command()
@click.option("-s", "--select", "select", multiple=True, metavar="SELECTOR", help="Tasks to run (repeatable).",
              shell_complete=completion.selectors)
@click.option("--exclude", multiple=True, metavar="SELECTOR", help="Tasks to leave out (repeatable).",
              shell_complete=completion.selectors)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Tasks at once (default: concurrency).")
@click.option("--fail-fast", is_flag=True, help="Stop starting tasks after the first failure.")
@click.option("--rerun", type=click.Choice(["stale", "failed", "all"]), default=None,
              help="Also re-run tasks that are stale, failed (and skipped), or all.")
@click.option("--max-cost", type=USD, default=None, metavar="USD",
              help="Run budget in USD (overrides harness.yaml), kept across resumes.")
@click.option("--no-build", is_flag=True, help="Refuse to run when the plan is missing or stale.")
@click.option("--dry-run", is_flag=True,
              help="Show what would run, on which agent, at what estimated cost; call nothing.")
@click.option("--record", is_flag=True, help="Store every agent call in .harness/cassettes/ (for --replay).")
@click.option("--replay", is_flag=True,
              help="Answer every agent call from .harness/cassettes/: no network, no keys.")
@click.option("--agent", "agent", default=None, metavar="NAME", shell_complete=completion.agents,
              help="Serve every task with this agent (one of harness.yaml's agents).")
@click.option("--agents", "agents", default=None, metavar="A,B", shell_complete=completion.agents,
              help="Use only these agents: each task's chain keeps the ones listed.")
@click.option("--max-time", "max_time", default=None, metavar="DURATION",
              help="Stop the run after this long (e.g. 8h); in-flight work finishes; `run` goes on.")
@click.option("--max-iterations", "max_iterations", default=None, metavar="N|unlimited",
              help="Iterations per task for this run, over the plan's.")
@click.option("--stuck-after", "stuck_after", type=click.IntRange(min=1), default=None, metavar="N",
              help="Iterations in a row without progress before a loop task is stuck (and climbs the "
                   "recovery ladder), for this run.")
@click.option("--progress-threshold", "progress_threshold", type=click.FloatRange(0, 1), default=None,
              metavar="X", help="A loop iteration scoring below this made no progress (loop.progress.threshold).")
@click.option("--autonomous", is_flag=True,
              help="Preset for a run left alone: --max-time 24h, every recovery step, no pause on alerts.")
@click.option("--conservative", is_flag=True,
              help="Preset with more oversight: at most 100 iterations a task, milestones every 5, "
                   "critical alerts pause the run.")
@click.option("--isolation", type=click.Choice(["worktree", "none"]), default=None,
              help="Every task's isolation for this run, over the plan's: worktree runs each task in its own "
                   "git worktree and lands verified changes on harnessc/run/<run-id>.")
@click.option("--keep-worktrees", is_flag=True,
              help="Keep the worktree of a task that did not succeed, for inspection (`log` says where).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="Where attempts run, over harness.yaml's `executor:`: local (this machine) or ray (a Ray "
                   "cluster: pip install 'harnessc[ray]').")
@click.option("--ray-address", "ray_address", default=None, metavar="ADDR",
              help="The Ray cluster (implies --executor ray): auto, HOST:PORT or ray://HOST:PORT; "
                   "without one a local cluster is started for the run.")
@pass_ctx
def run(ctx: Context, select, exclude, jobs, fail_fast, rerun, max_cost, no_build, dry_run,
        record, replay, agent, agents, max_time, max_iterations, stuck_after, progress_threshold,
        autonomous, conservative, isolation, keep_worktrees, executor, ray_address) -> None:
    """Run the compiled plan: route, call agents, verify, retry, checkpoint, resume."""
    from .runtime import plan as planmod
    from .runtime.scheduler import RunOptions

    from .runtime.routing.router import Router, RoutingError

    if record and replay:
        fail_usage("--record and --replay cannot be used together")
    if agent and agents:
        fail_usage("--agent and --agents cannot be used together")
    if autonomous and conservative:
        fail_usage("--autonomous and --conservative cannot be used together")
    if progress_threshold is not None and not 0 <= progress_threshold <= 1:  # nan passes FloatRange
        fail_usage(f"--progress-threshold {progress_threshold}: a number from 0 to 1, like 0.15")
    preset = "autonomous" if autonomous else "conservative" if conservative else None
    only = [a.strip() for a in agents.split(",") if a.strip()] if agents is not None else None
    if only == []:
        fail_usage("--agents needs at least one agent name (--agents a,b)")
    root = ctx.root()
    plan = _runtime_plan(root, no_build)
    opts = RunOptions(jobs=jobs, fail_fast=fail_fast, rerun=rerun, max_cost=max_cost,
                      select=list(select), exclude=list(exclude),
                      cassettes="record" if record else "replay" if replay else None,
                      agent=agent, agents=only, preset=preset, stuck_after=stuck_after,
                      progress_threshold=progress_threshold,
                      max_time=_duration_option("--max-time", max_time),
                      max_iterations=_iterations_option(max_iterations),
                      isolation=isolation, keep_worktrees=keep_worktrees,
                      executor=executor, ray_address=ray_address)
    _executor_settings(plan, opts)  # a bad --ray-address or flag pair: a usage error, even for --dry-run
    try:
        planmod.select_ids(plan, opts.select, opts.exclude)
        Router(plan.agents, force=opts.agent, only=opts.agents)
    except RoutingError as e:
        fail_usage(str(e))
    except planmod.PlanError as e:  # a selector that matches nothing, or a bad one
        fail_usage(str(e), e.hint or SELECTOR_HINT)
    if dry_run:
        _dry_run(root, plan, opts)
    _execute(root, plan, opts)


@cli.command()
@output_option("text", "json")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="Check this executor instead of harness.yaml's (as `run --executor`).")
@click.option("--ray-address", "ray_address", default=None, metavar="ADDR",
              help="Check this Ray cluster (implies --executor ray), as `run --ray-address`.")
@pass_ctx
def doctor(ctx: Context, output: str, executor: str | None, ray_address: str | None) -> None:
    """Check that every agent can be used (keys, SDKs, CLIs and their versions, base_url
    reachable, replay cassettes), the git identity when a task commits and, with the ray
    executor, Ray, the cluster's address and each node's git and agent CLIs; calls no agent."""
    import json
    from types import SimpleNamespace

    from .runtime import doctor as doctormod
    from .runtime.children import prctl

    root = ctx.root()
    plan = _runtime_plan(root, no_build=False)  # the plan `run` would use (built when stale)
    settings = _executor_settings(plan, SimpleNamespace(executor=executor, ray_address=ray_address))
    prctl.make_undumpable()  # before `<cli> --version` runs: our environment holds the keys
    result = doctormod.diagnose(root, plan, settings)
    if output == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for line in _doctor_lines(result):  # a CLI's --version output, an API's error: shown, not obeyed
            click.echo(visible(line))
    sys.exit(Exit.OK if result.ok else Exit.PROBLEMS)


def _doctor_lines(result) -> list[str]:
    """`doctor`: a row per agent (its verdict, then what was checked), git, and what a run
    would refuse."""
    from .wording import table

    rows = [(a.agent, a.provider, a.verdict, "; ".join(c.detail for c in a.checks) or "nothing to check (offline)")
            for a in result.agents]
    lines = [table(("agent", "provider", "verdict", "checks"), rows)]
    lines += [f"git: {c.detail}" for c in result.git]
    lines += [f"executor: {c.what}: {c.detail}" for c in result.executor]
    lines += [f"run would refuse: task '{task}' has no usable agent ({', '.join(route)})"
              for task, route in result.stranded.items()]
    lines.append("ok: no problems found" if result.ok else f"{plural(result.problems, 'problem')} found")
    return lines


def _duration_option(flag: str, text: str | None) -> float | None:
    from .compiler.vocab import parse_duration

    if text is None:
        return None
    try:
        seconds = float(parse_duration(text.strip()))
    except ValueError as e:
        fail_usage(f"{flag} {text!r}: {e}")
    if seconds <= 0:
        fail_usage(f"{flag} must be more than 0")
    return seconds


def _iterations_option(text: str | None) -> int | str | None:
    if text is None or text.strip() == "unlimited":
        return text and "unlimited"
    if not text.strip().isdigit() or int(text) < 1:
        fail_usage(f"--max-iterations {text!r}: a whole number of at least 1, or unlimited")
    return int(text)


def _dry_run(root: Path, plan: dict, opts) -> NoReturn:
    from .runtime.preview import preview
    from .runtime.routing.router import Router
    from .runtime.store.state import StateError

    try:
        view = preview(root, plan, opts.select, opts.exclude, opts.rerun, opts.max_cost,
                       Router(plan.agents, force=opts.agent, only=opts.agents),
                       replaying=opts.cassettes == "replay")
    except StateError as e:
        fail_usage(str(e))
    for line in view.lines():
        click.echo(visible(line))
    sys.exit(Exit.USAGE if view.check.refused else Exit.OK)  # the run would refuse to start


@cli.command()
@output_option("text", "json", old="--json")
@click.option("--watch", is_flag=True, help="Show it again every --interval seconds until the run ends (Ctrl-C quits).")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True, metavar="S",
              help="Seconds between two looks with --watch.")
@pass_ctx
def status(ctx: Context, output: str, watch: bool, interval: float) -> None:
    """Task states of the current or last run (works while a run goes on)."""
    from rich.console import Console

    from .runtime.observe import report
    from .runtime.store.state import StateError

    root = ctx.root()
    console = Console()
    try:
        if not watch:
            data = report.status(root)
            if output == "json":
                click.echo(json_text(data, indent=2, sort_keys=True, default=str))
            else:
                for part in _status_parts(data, console.is_terminal):
                    _echo_visible(part) if isinstance(part, str) else console.print(part)
        elif output == "json":  # a JSON document a line, a line per look
            for data in report.watch_status(root, interval):
                click.echo(json_text(data, sort_keys=True, default=str))
        elif console.is_terminal:
            _watch_status_live(console, report.watch_status(root, interval), interval)
        else:  # a block per look, with the time between two
            for n, data in enumerate(report.watch_status(root, interval)):
                if n:
                    click.echo(f"\n--- {_clock()}")
                for part in _status_parts(data, False):
                    _echo_visible(part)  # what agents and servers wrote is shown, never obeyed
    except StateError as e:
        fail_usage(str(e))
    except KeyboardInterrupt:
        if not watch:
            raise
        sys.exit(Exit.OK)  # Ctrl-C is how watching ends: not an interrupted command


def _clock() -> str:
    import time

    return time.strftime("%H:%M:%S")


def _watch_status_live(console, looks, interval: float) -> None:
    """`status --watch` on a terminal: the status redrawn in place; the last one stays."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    with Live(console=console, auto_refresh=False, transient=False) as live:
        for data in looks:
            parts = [Text(visible(p)) if isinstance(p, str) else p for p in _status_parts(data, True)]
            if data["run"] and data["run"]["active"]:  # the last look, the run's end, stays without it
                parts.insert(0, Text(f"every {interval:g}s, {_clock()} · Ctrl-C quits", style="dim"))
            live.update(Group(*parts), refresh=True)


def _status_parts(data: dict, terminal: bool) -> list:
    """What `status` prints, in order: lines, and the task table (a rich table on a terminal,
    aligned text otherwise)."""
    from .runtime.observe import report
    from .runtime.observe.display import plain_summary, summary_table
    from .wording import duration

    parts: list = []
    run_ = data["run"]
    if run_ is None:
        parts.append("no runs yet")
    else:
        state = f"running for {duration(run_['elapsed'])}" if run_.get("active") else run_["status"]
        if run_.get("paused"):
            state += ", paused (`harnessc resume` continues)"
        counts = ", ".join(f"{v} {k}" for k, v in sorted(run_["counts"].items()))
        parts.append(f"run {run_['id']}: {state} (pid {run_['pid']}) — {counts}; ${run_['cost_usd']:.4f}")
    running = [t for t in data["tasks"] if "elapsed" in t and "loop" not in t]
    if running:
        parts.append("running: " + ", ".join(f"{t['id']} ({duration(t['elapsed'])}, iteration {t['iterations']})"
                                             for t in running))
    for t in data["tasks"]:
        if "loop" in t:
            parts.append(_loop_line(t, duration))
    if data["tasks"]:
        # A running task's time column is its time so far.
        rows = [{**t, "duration": t["elapsed"]} if "elapsed" in t else t for t in data["tasks"]]
        parts.append(summary_table(rows) if terminal else plain_summary(rows))
    totals = data["totals"]
    if totals and totals["attempts"]:
        sources = ", ".join(f"{n} {src}" for src, n in sorted(totals["cost_sources"].items()))
        parts.append(f"total: {totals['tokens']:,} tokens = {report.usage_text(totals)}; "
                     f"${totals['cost_usd']:.4f} over {plural(totals['attempts'], 'attempt')} (cost: {sources})")
    assists = (totals or {}).get("assists") or {}
    if assists.get("calls"):
        parts.append(f"assist calls: {assists['tokens']:,} tokens; ${assists['cost_usd']:.4f} over "
                     f"{plural(assists['calls'], 'call')} (prompt mutations and summaries by cheap agents)")
    stale = [t["id"] for t in data["tasks"] if t.get("stale")]
    if stale:
        parts.append(f"stale: {', '.join(stale)} — use --rerun stale")
    parts += _agent_lines(data.get("agents") or {})
    return parts


def _agent_lines(agents: dict[str, dict]) -> list[str]:
    """`status`: agents with a daily limit, or whose breaker is not closed."""
    from .runtime.routing.health import clock_text

    out = []
    for name, a in agents.items():
        parts = []
        if a["breaker"] != "closed":
            until = clock_text(a["open_until"])
            parts.append(f"breaker {a['breaker']}" + (f" until {until}" if a["breaker"] == "open" else "")
                         + (f" ({a['reason']})" if a["reason"] else ""))
        for key, cap in a["limits"].items():
            field = {"daily_calls": "calls", "daily_tokens": "tokens", "daily_cost_usd": "cost_usd"}[key]
            parts.append(f"{field.replace('_usd', '')} today {a['today'][field]:g}/{cap:g}")
        if parts:
            out.append(f"agent {name}: " + "; ".join(parts))
    return out


def _progress_line(p: dict) -> str:
    """A loop iteration's progress evidence (runtime/loop/progress.py) in one line."""
    signals = ", ".join(f"{k} {v:.2f}" for k, v in sorted((p.get("signals") or {}).items()))
    files = p.get("files")
    what = [f"{files['files']} file(s) changed" + (f", +{files['added']} -{files['removed']} lines"
                                                 if files.get("source") == "git" else "")
            + (f", {files['commits']} commit(s)" if files.get("commits") else "")] if files else []
    what += [f"marker: {m}" for m in p.get("markers") or []]
    what += [f"done: {d}" for d in p.get("done") or []]
    return (f"--- progress {p.get('score', 0):.2f}" + (" (no progress)" if p.get("low") else "")
            + f": {signals}" + ("; " + "; ".join(what) if what else ""))


def _loop_line(t: dict, duration) -> str:
    """A running loop task in one line: iteration N/limit, last-5 progress, agent, elapsed, the
    recovery rung it is on (once it climbed one), marker."""
    loop = t["loop"]
    limit = loop["max_iterations"] if loop["max_iterations"] is not None else "unlimited"
    progress = f"{loop['progress']:.2f}" if loop["progress"] is not None else "-"
    marker = loop["last_marker"]
    if marker and len(marker) > 60:
        marker = marker[:57] + "..."
    rung = loop.get("recovery")
    return (f"loop {t['id']}: iteration {loop['iteration']}/{limit} · progress {progress} (last 5 avg) · "
            f"{t['agent']} · {duration(t['elapsed'])}"
            + (f" · recovery {rung['step']}/{rung['rungs']} ({rung['rung']})" if rung else "")
            + (f' · last marker: "{marker}"' if marker else ""))


@cli.command()
@click.option("--abort", is_flag=True, help="Cancel in-flight work now instead of finishing it.")
@pass_ctx
def stop(ctx: Context, abort: bool) -> None:
    """Ask the running `harnessc run` to stop (it checkpoints and exits 3)."""
    from .runtime.store.lock import holder
    from .workspace import Workspace

    workspace = Workspace(ctx.root())
    workspace.write_atomic(workspace.stop, "abort\n" if abort else "stop\n")
    pid = holder(workspace)
    if pid:
        click.echo(f"asked run (pid {pid}) to {'abort' if abort else 'stop'}")
    else:
        click.echo("no run is in progress; the request will be ignored by the next run")


def _to_inbox(ctx: Context, kind: str, data: dict, what: str, later: str) -> None:
    """Write one inbox file (runtime/steering.py) and say who will read it."""
    from .runtime.store.lock import holder
    from .runtime.steering import InboxError, write_inbox
    from .workspace import Workspace, WorkspaceError

    workspace = Workspace(ctx.root())
    try:
        path = write_inbox(workspace, kind, data)
    except WorkspaceError as e:
        fail_usage(str(e))
    except InboxError as e:  # what the run would refuse is refused now, not queued
        fail_usage(f"the {'instruction' if kind == 'tell' else kind} is not queued: it is {e}")
    pid = holder(workspace)
    if pid:
        click.echo(f"{what}: the run in progress (pid {pid}) reads it within a second ({workspace.rel(path)})")
    else:
        click.echo(f"{what}: no run is in progress; {later} ({workspace.rel(path)})")


@cli.command()
@click.argument("words", nargs=-1, required=True, metavar="[TASK] TEXT", shell_complete=completion.tell_task)
@click.option("--urgent", is_flag=True, help="Also cut the task's wait before its next iteration short.")
@pass_ctx
def tell(ctx: Context, words: tuple, urgent: bool) -> None:
    """Give the running tasks (or one TASK) an instruction for their next prompts."""
    if len(words) > 2:
        fail_usage("tell takes [TASK] TEXT", hint='quote the text: harnessc tell build "use the v2 API"')
    task, text = (None, words[0]) if len(words) == 1 else words
    if not text.strip():
        fail_usage("the instruction is empty")
    if task is None and text.strip() in (_plan_task_ids(ctx.root()) or ()):  # `tell TASK` without the text
        fail_usage(f"'{text.strip()}' is a task: the instruction is missing",
                   hint=f'harnessc tell {text.strip()} "what to do differently"')
    _instructions_on_or_exit(ctx.root(), task)
    _to_inbox(ctx, "tell", {"task": task, "text": text, "urgent": urgent},
              f"instruction for {task or 'every task'} queued",
              "the next run gives it to " + (f"{task}'s first prompt" if task else "every task it runs"))


@cli.command()
@pass_ctx
def pause(ctx: Context) -> None:
    """Pause the run: in-flight calls finish, nothing new starts until `harnessc resume`."""
    _to_inbox(ctx, "pause", {"command": "pause"}, "pause queued", "the next run starts paused")


@cli.command()
@pass_ctx
def resume(ctx: Context) -> None:
    """Resume a paused run."""
    _to_inbox(ctx, "resume", {"command": "resume"}, "resume queued",
              "the next run reads it after any earlier pause, and does not pause")


@cli.command()
@click.argument("tasks", nargs=-1, metavar="[TASK]...", shell_complete=completion.task_ids)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Tasks at once.")
@click.option("--max-cost", type=USD, default=None, metavar="USD",
              help="Run budget in USD (overrides harness.yaml), kept across resumes.")
@click.option("--no-build", is_flag=True, help="Refuse to run when the plan is missing or stale.")
@click.option("--record", is_flag=True, help="Store every agent call in .harness/cassettes/ (for --replay).")
@click.option("--replay", is_flag=True,
              help="Answer every agent call from .harness/cassettes/: no network, no keys.")
@pass_ctx
def retry(ctx: Context, tasks, jobs, max_cost, no_build, record, replay) -> None:
    """Re-run the failed, blocked and skipped tasks of the last run (or only TASK..., with
    the tasks skipped because of them)."""
    from .diagnostics import did_you_mean
    from .runtime.observe import report
    from .runtime.scheduler import RunOptions
    from .runtime.store.state import StateError

    root = ctx.root()
    try:
        data = report.status(root)
    except StateError as e:
        fail_usage(str(e))
    if data["run"] is None:
        fail_usage("nothing to retry: no run yet", hint="use `harnessc run`")
    if record and replay:
        fail_usage("--record and --replay cannot be used together")
    states = {t["id"]: t["state"] for t in data["tasks"] if not t.get("removed")}
    broken = {tid for tid, state in states.items() if state in BROKEN}
    for tid in tasks:
        if tid not in states:
            fail_usage(f"no task '{tid}' in the plan", did_you_mean(tid, list(states)) or "`harnessc ls` lists the tasks")
        if tid not in broken:
            fail_usage(f"'{tid}' is {states[tid]}: retry re-runs failed, blocked and skipped tasks",
                       f"`harnessc reset {tid}` makes it run again")
    plan = _runtime_plan(root, no_build) if tasks or broken else None
    ids = _with_skipped_dependents(plan, set(tasks), broken) if tasks else broken
    if not ids:
        click.echo("nothing to retry: no failed, blocked or skipped tasks")
        return
    _execute(root, plan, RunOptions(jobs=jobs, max_cost=max_cost, only=ids,
                                    cassettes="record" if record else "replay" if replay else None))


def _with_skipped_dependents(plan, named: set[str], broken: set[str]) -> set[str]:
    """The named tasks and, transitively, the broken tasks that depend on them (skipped
    because of them): retrying a blocked task lets its dependents run after it."""
    ids, grew = set(named), True
    while grew:
        more = {n.id for n in plan.nodes if n.id in broken and n.id not in ids and ids & set(n.depends_on)}
        ids |= more
        grew = bool(more)
    return ids


@cli.command()
@click.argument("tasks", nargs=-1, shell_complete=completion.task_ids)
@click.option("--all", "all_", is_flag=True,
              help="Forget every task, attempt, the budget ledger, the kept --max-cost and the agents' breakers.")
@click.option("--downstream", is_flag=True, help="Also reset every task that depends on TASK, transitively.")
@click.option("--breakers", is_flag=True, help="Close every agent's circuit breaker (alone, or with TASK/--all).")
@pass_ctx
def reset(ctx: Context, tasks, all_: bool, downstream: bool, breakers: bool) -> None:
    """Forget the state of the given tasks (or --all) so they run again."""
    from .diagnostics import did_you_mean
    from .runtime.store import reset as resetmod
    from .runtime.routing.health import clear_breakers
    from .runtime.store.lock import Locked, RunLock
    from .runtime.store.outputs import forget as forget_outputs
    from .runtime.store.state import NoState, StateError, StateStore
    from .workspace import Workspace, WorkspaceError

    if tasks and all_ or not (tasks or all_ or breakers):
        fail_usage("give task ids or --all (not both), or --breakers")
    if downstream and all_:
        fail_usage("--downstream goes with task ids; --all resets everything already")
    root = ctx.root()
    workspace = Workspace(root)
    project = resetmod.project_tasks(root) if tasks else None

    def check_known(rows: dict) -> None:
        known = [t["id"] for t in project or []] + sorted(set(rows) - {t["id"] for t in project or []})
        unknown = [t for t in tasks if t not in known]
        if unknown:
            fail_usage(f"no task {', '.join(repr(t) for t in unknown)} in the project",
                       did_you_mean(unknown[0], known) or "`harnessc ls` lists the tasks")

    if not workspace.state_db.exists():
        check_known({})
        click.echo("nothing to reset: no state yet")
        return
    try:
        with RunLock(workspace):
            try:
                store = StateStore(workspace, create=False)
            except NoState:  # a run is creating it right now
                check_known({})
                click.echo("nothing to reset: no state yet")
                return
            try:
                rows = store.tasks()
                check_known(rows)
                ids = None if all_ else resetmod.downstream(project, list(tasks)) if downstream else list(tasks)
                stale = resetmod.stale_dependents(project, rows, ids) if project and ids else []
                n = store.reset(ids) if tasks or all_ else None
                closed = clear_breakers(store) if breakers or all_ else []
            finally:
                store.close()
            try:
                forget_outputs(workspace, ids)  # their results no longer stand
            except WorkspaceError as e:
                click.echo(f"warning: {e}", err=True)
    except Locked as e:
        fail_usage(str(e), hint="stop it first with `harnessc stop`")
    except StateError as e:
        fail_usage(str(e))
    if n is not None:
        click.echo(f"reset {plural(n, 'task')}" + (f" (with --downstream: {', '.join(ids)})" if downstream else ""))
    if breakers or closed:
        click.echo(f"closed the breaker of {', '.join(closed)}" if closed else "no breaker was open")
    if stale:
        click.echo(f"warning: {', '.join(stale)} succeeded on the output of what was reset and "
                   f"{'is' if len(stale) == 1 else 'are'} now stale (a reset does not re-run dependents)",
                   err=True)
        click.echo(f"  hint: reset {'it' if len(stale) == 1 else 'them'} too with "
                   f"`harnessc reset --downstream {' '.join(tasks)}`", err=True)


@cli.command()
@click.option("--keep", type=click.IntRange(min=0), default=10, show_default=True, metavar="N",
              help="How many of the newest run directories to keep.")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@pass_ctx
def clean(ctx: Context, keep: int, dry_run: bool) -> None:
    """Remove old .harness/runs/<run-id>/ directories, keeping the newest N (never the run in progress),
    and stale .harness/loop/<task>.index files of earlier versions."""
    from .runtime.store.clean import prune, remove_stale_indexes
    from .runtime.worktree.isolation import clean_leftovers
    from .runtime.store.state import StateError
    from .workspace import Workspace, WorkspaceError

    try:
        workspace = Workspace(ctx.root())
        result = prune(workspace, keep, dry_run)
        indexes = remove_stale_indexes(workspace, dry_run)
        leftovers = clean_leftovers(workspace.root, dry_run)
    except (WorkspaceError, StateError) as e:
        fail_usage(str(e))
    for name in leftovers:
        click.echo(f"{'would remove' if dry_run else 'removed'} {name} (left by a run that stopped)")
    for link in result.links:
        click.echo(f"warning: left .harness/runs/{link} alone: a symbolic link, not a run directory", err=True)
    for name in indexes:
        click.echo(f"{'would remove' if dry_run else 'removed'} .harness/loop/{name} (a stale index of an earlier version)")
    if not result.removed:
        click.echo(f"{'no run to remove' if indexes or leftovers else 'nothing to clean'}: "
                   f"{plural(len(result.kept), 'run')} in .harness/runs/, keeping {keep}")
        return
    if dry_run:
        for run_id in result.removed:
            click.echo(f"would remove .harness/runs/{run_id}/")
    click.echo(f"{'would remove' if dry_run else 'removed'} {plural(len(result.removed), 'run')}, "
               f"kept {plural(len(result.kept), 'run')}" + (f" (newest: {result.kept[-1]})" if result.kept else ""))


def _instructions_on_or_exit(root: Path, task: str | None) -> None:
    """A usage error when the compiled plan refuses inbox instructions (loop.environment.inbox:
    false) or has no task `task`."""
    from .runtime.plan import PlanError, load_plan, loop_settings

    try:
        plan = load_plan(root)
    except PlanError:
        return  # no readable plan: nothing to compare with
    if not loop_settings(plan).environment.inbox:
        fail_usage("instructions are off in this project (harness.yaml loop.environment.inbox: false): "
                   "a run would refuse this one", "set loop.environment.inbox: true to steer agents from the inbox")
    if task is not None:
        _known_task_or_exit(root, task)


def _plan_task_ids(root: Path) -> list[str] | None:
    """The compiled plan's task ids; None without a readable plan."""
    from .runtime.plan import PlanError, load_plan

    try:
        return [n["id"] for n in load_plan(root)["nodes"]]
    except PlanError:
        return None


def _known_task_or_exit(root: Path, task: str) -> None:
    """A usage error (with did-you-mean) for a task id that the compiled plan does not have."""
    from .diagnostics import did_you_mean

    ids = _plan_task_ids(root)
    if ids is None:
        return  # no readable plan: nothing to compare with
    if task not in ids:
        fail_usage(f"no task '{task}' in the plan", did_you_mean(task, ids) or "`harnessc ls` lists the tasks")


@cli.command()
@output_option("text", "json")
@pass_ctx
def stats(ctx: Context, output: str) -> None:
    """How each agent has done per task complexity and per contract, across runs."""
    from .runtime.observe import report
    from .runtime.plan import PlanError
    from .runtime.store.state import StateError
    from .wording import table

    try:
        rows = report.stats(ctx.root())
    except (StateError, PlanError) as e:
        fail_usage(str(e))
    if output == "json":
        click.echo(json_text(rows, indent=2, sort_keys=True))
        return
    if not rows:
        click.echo("no verified or rejected attempts yet")
        return
    for i, kind in enumerate(k for k in ("complexity", "contract") if any(k in r for r in rows)):
        part = [r for r in rows if kind in r]
        if part:
            click.echo(("\n" if i else "") + table(("agent", kind, "attempts", "succeeded", "rate", "cost/success"), [
                (r["agent"] or "-", r[kind] if r[kind] is not None else "-", str(r["attempts"]),
                 str(r["successes"]), f"{r['success_rate']:.0%}",
                 f"${r['cost_per_success']:.4f}" if r["cost_per_success"] is not None else "-") for r in part],
                right=("attempts", "succeeded", "rate", "cost/success")))
    cache = [(r["agent"], r["cache"]) for r in rows if "cache" in r]
    if cache:
        columns = ("agent", "input tokens", "cache read", "cache written", "cached share", "saved")
        click.echo("\nprompt cache\n" + table(columns, [
            (agent, f"{c['input_tokens']:,}", f"{c['cache_read_tokens']:,}", f"{c['cache_write_tokens']:,}",
             f"{c['share']:.0%}", f"${c['saved_usd']:.4f}" if c["saved_usd"] is not None else "-")
            for agent, c in cache], right=columns[1:]))


@cli.command(name="report")
@click.option("--run", "run_id", default=None, metavar="ID", help="The run to report on (default: the last one).")
@click.option("--out", "out", default=None, metavar="FILE",
              help="Where to write it (default: .harness/runs/<run>/report.html or .md; - for stdout).")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default="html", show_default=True,
              help="html: one self-contained page; md: a summary for a CI job summary or a PR comment.")
@pass_ctx
def report_cmd(ctx: Context, run_id: str | None, out: str | None, fmt: str) -> None:
    """Write a run's report: summary, plan graph, timeline, cost and tokens, each task's
    verified output and failures, alerts."""
    from .nogc import no_cyclic_gc

    with no_cyclic_gc(freeze=True):  # the process ends after the report
        _report(ctx, run_id, out, fmt)


def _report(ctx: Context, run_id: str | None, out: str | None, fmt: str) -> None:
    from . import runreport
    from .runtime.store.state import StateError
    from .workspace import WorkspaceError

    root = ctx.root()
    try:
        if out == "-":
            click.echo(runreport.render(root, run_id, fmt), nl=False)
            return
        path = runreport.write(root, run_id, Path(out) if out else None, fmt)
    except runreport.MissingLibrary as e:
        fail_usage(str(e))
    except (runreport.ReportError, StateError, WorkspaceError) as e:
        fail_usage(str(e))
    except OSError as e:
        fail_usage(f"cannot write {out}: {e.strerror or e}")
    click.echo(f"report: {_shown(root, path)}")


def _shown(root: Path, path: Path) -> str:
    """A path relative to the project when it is inside it."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


@cli.command()
@click.argument("task", shell_complete=completion.task_ids)
@output_option("text", "json", old="--json")
@click.option("--last", is_flag=True, help="Only the task's latest attempt.")
@click.option("--attempt", "number", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the task's N-th attempt (1 is its first).")
@click.option("-f", "--follow", is_flag=True,
              help="Then print new attempts and events as they are recorded, until the task ends (Ctrl-C quits).")
@pass_ctx
def log(ctx: Context, task: str, output: str, last: bool, number: int | None, follow: bool) -> None:
    """Every attempt of TASK, numbered 1, 2, 3...: prompt, raw and parsed output, errors, agent,
    tokens, cost, time."""
    from .runtime.observe import report
    from .runtime.store.scoreboard import lines as scoreboard_lines
    from .runtime.store.state import StateError

    if last and number is not None:
        fail_usage("give --last or --attempt N, not both")
    if follow and (number is not None or output == "json"):
        fail_usage(f"--follow prints attempts as they come: it takes no {'--attempt' if number else '--output json'}")
    root = ctx.root()
    if follow:
        _known_task_or_exit(root, task)
        try:
            _follow_log(root, task, last)
        except StateError as e:
            fail_usage(str(e))
        except KeyboardInterrupt:
            sys.exit(Exit.OK)  # Ctrl-C is how following ends: not an interrupted command
        return
    try:
        attempts = report.log(root, task)
    except StateError as e:
        fail_usage(str(e))
    if not attempts:
        _known_task_or_exit(root, task)
    if number is not None and number > len(attempts):
        fail_usage(f"'{task}' has {plural(len(attempts), 'recorded attempt')}; there is no attempt {number}")
    total = len(attempts)
    if last:
        attempts = attempts[-1:]
    elif number is not None:
        attempts = [attempts[number - 1]]
    if output == "json":
        click.echo(json_text(attempts, indent=2, sort_keys=True, default=str))
        return
    if not attempts:
        click.echo(f"no attempts recorded for '{task}'")
        return
    for a in attempts:
        for line in _attempt_lines(a, total):
            _echo_visible(line)  # an agent's output and errors are shown, never obeyed
    board = report.approaches(root, task) if not last and number is None else None
    if board is not None:  # best-of-N: which approach did what, and which landed
        for line in scoreboard_lines(board):
            _echo_visible(line)  # an approach's why quotes agent output: shown, never obeyed


def _follow_log(root: Path, task: str, last: bool) -> None:
    """`log --follow`: the attempts so far (the last one only with --last), then each new one
    as it starts and as it ends, until the task ends."""
    import time

    from .runtime.observe import report

    past = len(report.log(root, task))
    skip = max(past - 1, 0) if last else 0  # --last: the attempts before the latest are not shown
    said = False
    for kind, item in report.follow_log(root, task, FOLLOW_POLL):
        if kind == "after":
            lines = [f"--- {line}" for line in item]
        elif item["attempt"] <= skip:
            continue
        elif kind == "started":
            lines = [f"--- {line}" for line in item.get("events") or ()]
            lines.append(f"=== attempt {item['attempt']} · run {item['run_id']} · iteration {item['iteration']}"
                         f" · level {item['level']} · {item['agent']} · started at "
                         f"{time.strftime('%H:%M:%S', time.localtime(item['started_at']))}, running")
        else:
            lines = _attempt_lines(item, max(past, item["attempt"]), events=not item["announced"])
        for line in lines:
            _echo_visible(line)  # an agent's output and errors are shown, never obeyed
        said = True
    if not said:
        click.echo(f"no attempts recorded for '{task}'")


FOLLOW_POLL = 0.5  # seconds between two looks at state.db for `log --follow`


def _attempt_lines(a: dict, total: int, events: bool = True) -> list[str]:
    """One attempt as `log` prints it; `events`: with the lines of what came before it."""
    import json as jsonlib

    from .runtime.observe import report

    tokens = (a["input_tokens"] or 0) + (a["output_tokens"] or 0)
    lines = [f"=== attempt {a['attempt']} of {total} · run {a['run_id']} · iteration {a['iteration']}"
             f" · level {a['level']} · {a['agent']} · {a['status']} · {tokens} tokens"
             f" · ${a['cost_usd'] or 0:.4f} · {a['latency'] or 0:.2f}s",
             f"ledger: {report.usage_text(a)}; ${a['cost_usd'] or 0:.6f} ({report.cost_source_text(a['cost_source'])})"]
    if events:
        lines += [f"--- {line}" for line in a.get("events") or ()]
    lines += ["--- prompt", a["prompt"] or "", "--- raw output",
              a["raw_output"] if a["raw_output"] is not None else "(none)"]
    if a["parsed_output"] is not None:
        lines += ["--- parsed output", jsonlib.dumps(a["parsed_output"], indent=2, sort_keys=True)]
    if a["errors"]:
        lines.append("--- errors")
        lines += [f"- {e}" for e in a["errors"]]
    lines += [f"--- denied: {d.get('tool')} {d.get('target')}".rstrip()  # tool calls its permissions refused
              for d in a.get("denials") or ()]
    lines += [f"--- check {c.get('id') or ' '.join(c['argv'])}: exit {c['returncode']}"
              + (" (timed out)" if c.get("timed_out") else "") for c in a["checks"] or []]
    if a.get("progress"):
        lines.append(_progress_line(a["progress"]))
    lines += [f"--- {line}" for line in a.get("after") or ()]
    return lines


@cli.command()
@click.argument("task")
@output_option("text", "json")
@pass_ctx
def show(ctx: Context, task: str, output: str) -> None:
    """TASK's result: its verified output (JSON, or the answer's text) and what verified it;
    a degraded task's fallback output and the fields filled from the contract."""
    import json as jsonlib

    from .diagnostics import did_you_mean
    from .runtime.observe import report
    from .runtime.store.outputs import text
    from .runtime.store.state import StateError

    try:
        rec = report.show(ctx.root(), task)
    except report.UnknownTask as e:
        fail_usage(f"no task '{task}' in the plan", did_you_mean(task, e.known) or "`harnessc ls` lists the tasks")
    except StateError as e:
        fail_usage(str(e))
    if output == "json":
        click.echo(json_text(rec, indent=2, sort_keys=True, ensure_ascii=False, default=str))
        return
    click.echo(visible(text(rec)))  # the agent's words: shown, never obeyed
