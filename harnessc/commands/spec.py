"""The compiler's commands: lint, build, ls, graph, validate, schema, contracts, explain, init."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import NoReturn

import click

from .. import __version__, completion
from ..exitcodes import Exit, diagnostics_exit, diagnostics_summary
from ..nogc import no_cyclic_gc
from ..textsafe import visible
from ..wording import duration, plural, table
from .common import SELECTOR_HINT, Context, fail_usage, output_option, pass_ctx, read_input

FORMATS = ("text", "json", "github", "sarif")


def shown_paths(diagnostics, root: Path | None) -> dict[str, str]:
    """Where each project file a diagnostic names is, from the invoking directory: with
    `-C specs/demo`, roadmap.md is specs/demo/roadmap.md (so editors and CI find it)."""
    from ..compiler.project import SPEC_FILES

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
    from ..diagnostics import REPEATS_SHOWN, render_github, render_json, render_sarif, render_text

    items = diags.sorted()
    paths = shown_paths(items, root)
    if fmt == "json":
        click.echo(render_json(items, paths), nl=False)
    elif fmt == "github":
        click.echo(render_github(items, paths), nl=False)
    elif fmt == "sarif":
        click.echo(render_sarif(items, __version__, paths, Path.cwd().as_uri() + "/"), nl=False)
    else:
        if items:  # quoted source lines may hold control characters: shown, as `log` shows them
            click.echo(visible(render_text(items, sources, paths, REPEATS_SHOWN)), nl=False, err=False)
        line = diagnostics_summary(len(diags.errors), len(diags.warnings), strict)
        if line:
            click.echo(line)
        elif not quiet_ok:
            click.echo("ok: no problems found")
    return diagnostics_exit(len(diags.errors), len(diags.warnings), strict)


def ignored_codes(values: tuple[str, ...]) -> tuple[str, ...]:
    """The codes of `--ignore HC410 --ignore HC406,HC412` (any case, `410` for HC410); an
    unknown code is a usage error."""
    from ..diagnostics import CODES, sole_match

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


@click.command()
@diagnostic_options
@click.option("--fix", is_flag=True, help="Apply the unambiguous fixes (a misspelt key, a property line written "
                                           "wrong) in place, say each, then report what remains.")
@pass_ctx
def lint(ctx: Context, output: str, strict: bool, ignore: tuple, fix: bool) -> None:
    """Check the specs: every problem at once, with file:line:col. Offline and fast."""
    # The process ends after the lint: no cyclic GC while the compiler is imported and runs
    # (each collection rescans what the imports built; with the one at exit, 7% of lint); see nogc.py.
    with no_cyclic_gc(freeze=True):
        _lint(ctx, output, strict, ignore, fix)


def _lint(ctx: Context, output: str, strict: bool, ignore: tuple, fix: bool) -> NoReturn:
    from ..compiler import lint_project

    codes = ignored_codes(ignore)
    root = ctx.root()
    project = lint_project(root, ignore=codes)
    if fix:
        project = _fix_and_relint(project, codes, to_stderr=output != "text")
    sys.exit(report(project.diags, project.sources, output, strict, root=project.root))


def _fix_and_relint(project, codes: tuple[str, ...], to_stderr: bool):
    """`lint --fix`: apply the fixes, print each (to stderr when stdout is for machines), and
    lint again."""
    from ..compiler import lint_project
    from ..compiler.fix import apply_fixes

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


@click.command()
@diagnostic_options
@pass_ctx
def build(ctx: Context, output: str, strict: bool, ignore: tuple) -> None:
    """Lint, then write .harness/build/plan.json and prompts/<task-id>.md."""
    with no_cyclic_gc(freeze=True):  # as lint: the process ends after the build
        _build(ctx, output, strict, ignore)


def _build(ctx: Context, output: str, strict: bool, ignore: tuple) -> NoReturn:
    from ..compiler import compile_project, write_build

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
    from ..compiler import compile_project

    project = compile_project(ctx.root())
    if project.plan is None:
        report(project.diags, project.sources, "text", False, root=project.root)
        sys.exit(Exit.PROBLEMS)
    return project


@click.command(name="ls")
@click.option("-s", "--select", "select", multiple=True, help="Selectors: id, +id, id+, tag:x, phase:x.",
              shell_complete=completion.selectors)
@click.option("--exclude", multiple=True, help="Selectors to leave out.", shell_complete=completion.selectors)
@output_option("text", "json")
@pass_ctx
def ls_cmd(ctx: Context, select: tuple, exclude: tuple, output: str) -> None:
    """List the tasks as resolved: agent, contract, effective limits, dependencies."""
    from ..compiler import compile_project
    from ..compiler.plan import task_view
    from ..compiler.select import SelectionError, select_ids
    from ..planfile import AutoStaging

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
        common = list(project.plan.protect or ())
        for v in views:
            v["analysis"] = dict(nodes[v["id"]].analysis)
            # what its agent may not change, and why (protectrules.py; allow_edit lifts per path)
            v["protected"] = [dict(e) for e in (*common, *nodes[v["id"]].protect)]
            staging = nodes[v["id"]].context_staging
            if isinstance(staging, AutoStaging):  # `context: auto`: what it chose, and why
                v["context_auto"] = staging.chosen()
        click.echo(json.dumps(views, indent=2))
        return
    nodes = {n["id"]: n for n in project.plan["nodes"]}
    if views:
        click.echo(_task_table([nodes[v["id"]] for v in views]))
        for n in (nodes[v["id"]] for v in views):
            staging = n.get("context_staging")
            if staging is not None and staging.get("auto") is not None:
                for line in auto_context_lines(n["id"], {**staging["auto"], "files": [
                        f for f in staging["files"] if f["priority"] == "auto"]}):
                    click.echo(line)
    click.echo(f"{plural(len(views), 'task')}"
               + (f" of {len(project.tasks)} selected" if len(views) != len(project.tasks) else ""))


def _task_table(nodes: list[dict]) -> str:
    """`ls`: one row per task, with the agent, contract and limits a run would use. Titles
    may come from anywhere (an import, a paste): their control characters are shown, as `log`
    shows an agent's output, never obeyed."""
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
        rows[-1] = tuple(visible(cell) for cell in rows[-1])
    return table(("done", "task", "agent", "contract", "iterations", "time", "stuck", "budget", "after", "title"),
                 rows, right=("iterations", "time", "stuck", "budget"))


def auto_context_lines(task_id: str, chosen: dict) -> list[str]:
    """`ls` and `show`: the files `context: auto` chose for a task and why (score, the words
    and paths that matched), from plan.json's record (planfile.AutoStaging.chosen)."""
    files = chosen["files"]
    return [visible(f"{task_id}: context auto chose {plural(len(files), 'file')} "
                    f"(~{chosen['used']:,} of {chosen['budget']:,} tokens, {chosen['indexed']:,} files indexed)"),
            *(visible(f"  {f['path']}  score {f['score']:g}: {', '.join(f['matched'])}") for f in files)]


@click.command()
@output_option("mermaid", "dot", "json", old="--format")
@pass_ctx
def graph(ctx: Context, output: str) -> None:
    """Print the task DAG as Mermaid (default), Graphviz DOT or JSON."""
    from ..compiler.graph import to_dot, to_json, to_mermaid

    project = _compiled_or_exit(ctx)
    render = {"mermaid": to_mermaid, "dot": to_dot, "json": to_json}[output]
    click.echo(render(project.plan["nodes"]), nl=False)


UNREADABLE_SPEC = ("HC002", "HC003")  # contracts.yaml or harness.yaml too large, or not UTF-8


@click.command()
@click.option("--contract", "contract_name", required=True, help="A contract name (project or built-in).",
              shell_complete=completion.contracts)
@click.argument("file", type=click.Path(dir_okay=False))
@output_option("text", "json")
@pass_ctx
def validate(ctx: Context, contract_name: str, file: str, output: str) -> None:
    """Validate an output JSON file against a contract: exit 0 valid, 1 invalid, 2 when the
    contract or the file cannot be read. Works outside a project with a built-in contract."""
    from ..compiler import check, load
    from ..compiler.contract_schema import contract_plan_entry
    from ..compiler.project import Project
    from ..compiler.validate import NotJSON, OutOfTime, loads_json, validate_output
    from ..diagnostics import did_you_mean

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
    text = read_input(file)
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


@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write the schemas into this directory instead of printing them.")
def schema(out_dir: str | None) -> None:
    """Print or write the JSON Schemas of contracts.yaml and harness.yaml."""
    from ..compiler.schemas import dump, generate

    schemas = generate()
    if out_dir:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        for name, body in schemas.items():
            (d / name).write_text(dump(body), encoding="utf-8")
            click.echo(f"wrote {d / name}")
    else:
        click.echo(json.dumps(schemas, indent=2))


@click.command()
@output_option("text", "json")
def contracts(output: str) -> None:
    """List the built-in contract library."""
    from ..compiler.contract_schema import load_builtin_contracts

    lib = load_builtin_contracts()
    if output == "json":
        click.echo(json.dumps({n: c.model_dump(mode="json", by_alias=True, exclude_none=True) for n, c in lib.items()}, indent=2))
        return
    for name, c in lib.items():
        fields = ", ".join(c.output) if c.output else "(no output; verified by accept commands and the promise)"
        click.echo(f"{name}: {c.description}\n    output: {fields}\n    on_failure: {c.on_failure or 'retry'}, max_retries: {c.max_retries if c.max_retries is not None else 2}")


@click.command()
@click.argument("code", required=False, shell_complete=completion.codes)
@output_option("text", "json")
def explain(code: str | None, output: str) -> None:
    """What a diagnostic CODE means, a minimal example and the fix (no CODE: every code)."""
    from ..diagnostics import sole_match
    from ..explain import explanations, lookup

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


@click.command()
@click.argument("directory", required=False, default=".")
@click.option("--force", is_flag=True, help="Overwrite existing spec files.")
def init(directory: str, force: bool) -> None:
    """Scaffold a project: roadmap.md, contracts.yaml, harness.yaml; .harness/ ignored."""
    from ..compiler.scaffold import scaffold

    written = scaffold(Path(directory), force=force)  # ScaffoldError: shown by cli.main
    for path in written:
        click.echo(f"created {path}")

    here = Path(directory).resolve() == Path.cwd().resolve()
    click.echo(("next: " if here else f"next: cd {shlex.quote(directory)} && ") + "harnessc lint && harnessc build")
