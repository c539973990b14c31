"""`harnessc draft PRD.md`: roadmap.draft.md and contracts.draft.yaml from a requirements
document, written by an agent and linted until clean (harnessc/draft/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .. import completion
from ..exitcodes import Exit, diagnostics_summary
from ..textsafe import visible
from ..wording import plural
from .common import Context, echo_visible, fail_usage, pass_ctx, read_bounded

MAX_DOCUMENT_BYTES = 1_000_000  # a requirements document sent whole in every round's prompt


@click.command()
@click.argument("document", metavar="PRD.md", type=click.Path(dir_okay=False))
@click.option("--agent", "agent", metavar="NAME", default=None, shell_complete=completion.agents,
              help="The agent that drafts (default: harness.yaml's routing.default, else `simulate`: "
                   "an offline draft from the document's headings and bullets).")
@click.option("--max-rounds", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Rounds of draft and lint: the agent is sent lint's problems until the draft is clean.")
@click.option("--strict", is_flag=True, help="Warnings must go too before the draft is clean.")
@click.option("--force", is_flag=True, help="Replace an earlier roadmap.draft.md / contracts.draft.yaml.")
@pass_ctx
def draft(ctx: Context, document: str, agent: str | None, max_rounds: int, strict: bool, force: bool) -> None:
    """Draft roadmap.md and contracts.yaml from a requirements document, for review.

    The agent's draft is linted against the project (its harness.yaml, its files) and the
    problems are sent back to it until it is clean or --max-rounds is reached. The result is
    written next to the specs as roadmap.draft.md and contracts.draft.yaml: roadmap.md and
    contracts.yaml are never touched. Exit 1 when no clean draft came back.
    """
    from ..draft import files
    from ..draft.rounds import Drafter, DraftSetupError, choose_agent

    root = ctx.root(must_exist=False)
    text = _read_document(document)
    files.check_targets(root, force)  # before any agent is paid
    try:
        choice = choose_agent(root, agent)
    except DraftSetupError as e:
        if e.diags is None:
            raise
        _report_diags(root, e.diags, e.sources, {})
        _fail_problems(e.message, e.hint)
    how = "offline, from the document's headings and bullets" if choice.offline else f"up to {plural(max_rounds, 'round')}"
    click.echo(visible(f"draft: agent '{choice.name}' ({how})"))
    source = _source_name(document, root)
    outcome = Drafter(root, text, source, choice, max_rounds, strict, on_round=_said).run()
    sys.exit(_finish(root, outcome, strict, force))


def _said(r) -> None:
    """One line per round as it ends."""
    if r.draft is None:
        click.echo(visible(f"round {r.number}: the answer could not be used: {r.problem}"))
        return
    counts = diagnostics_summary(len(r.diags.errors), len(r.diags.warnings), False)
    click.echo(f"round {r.number}: " + (counts or "clean"))


def _finish(root: Path, outcome, strict: bool, force: bool) -> int:
    from ..draft import files

    result, last = outcome.result, outcome.last
    for name in outcome.changed:  # harnessc wrote none of them: say so, the user looks
        click.echo(f"harnessc: warning: {name} changed while the agent drafted; harnessc never writes it "
                   f"(the agent, or someone, did): check it, e.g. `git diff {name}`", err=True)
    if outcome.failure:
        click.echo(visible(f"draft: the agent failed: {outcome.failure}"), err=True)
    if result is None:
        if last is not None:
            click.echo(visible(f"draft: no usable draft after {plural(len(outcome.rounds), 'round')}: {last.problem}"),
                       err=True)
        click.echo("draft: nothing written", err=True)
        _spent(outcome)
        return Exit.PROBLEMS
    written = files.write_draft(root, result.draft.texts(), force)
    _report(root, result)
    clean = result.clean(strict)
    names = " and ".join(_shown(root, p) for p in written)
    echo_visible(f"wrote {names}" + ("" if clean else f" (round {result.number}: not clean, see above)"))
    _spent(outcome)
    if clean:
        click.echo(f"next: review the draft ({plural(result.tasks, 'task')}); then `mv {_shown(root, written[0])} "
                   f"{_shown(root, root / 'roadmap.md')}` (and the contracts) and `harnessc lint`"
                   + (": roadmap.md exists, compare them first" if (root / "roadmap.md").exists() else ""))
        return Exit.OK
    click.echo("draft: fix what is left by hand, or run draft again with more --max-rounds (and --force)", err=True)
    return Exit.PROBLEMS


def _report(root: Path, r) -> None:
    """The written draft's diagnostics, with the draft files' names as seen from here."""
    from ..draft.files import targets

    _report_diags(root, r.diags, r.sources, {name: _shown(root, p) for name, p in targets(root).items()})


def _report_diags(root: Path, diags, sources: dict[str, str], renamed: dict[str, str]) -> None:
    from ..diagnostics import REPEATS_SHOWN, render_text
    from .spec import shown_paths

    if diags.items:
        paths = {**shown_paths(diags.items, root), **renamed}
        click.echo(visible(render_text(diags.sorted(), sources, paths, REPEATS_SHOWN)), nl=False)


def _fail_problems(message: str, hint: str | None) -> None:
    click.echo(visible(f"harnessc: error: {message}"), err=True)
    if hint:
        click.echo(visible(f"  hint: {hint}"), err=True)
    sys.exit(Exit.PROBLEMS)


def _spent(outcome) -> None:
    s = outcome.spent
    if outcome.offline:
        click.echo("spent: nothing (offline draft, no agent called)")
        return
    from ..outcome import money

    priced = "price" in s.sources or "cli" in s.sources
    note = "" if priced else f" (agent '{outcome.agent}' has no price: set its `price:` to count the cost)"
    click.echo(f"spent: {plural(s.calls, 'call')}, {s.input_tokens + s.output_tokens:,} tokens "
               f"({s.input_tokens:,} in, {s.output_tokens:,} out), {money(s.cost_usd)}{note}")


def _read_document(path: str) -> str:
    text = read_bounded(path, MAX_DOCUMENT_BYTES, "not drafted from", "a requirements document is sent whole in "
                        "every round: shorten it, or draft part by part", reason=True)
    if not text.strip():
        fail_usage(f"{path} is empty; nothing to draft from")
    return text


def _source_name(path: str, root: Path) -> str:
    """The document as the draft names it: relative to the project, else its file name."""
    from ..importers import source_name

    return source_name(path, root)


def _shown(root: Path, path: Path) -> str:
    return os.path.relpath(path, Path.cwd()) if root != Path.cwd() else path.name
