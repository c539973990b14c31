"""`harnessc memory`: what run memory holds (.harness/memory/), and `memory forget ID`."""

from __future__ import annotations

import sys

import click

from ..exitcodes import Exit
from ..textsafe import json_text
from .common import Context, echo_visible, output_option, pass_ctx


def _store(ctx: Context):
    from ..runtime.memory.store import MemoryStore

    return MemoryStore(ctx.root(), say=lambda line: click.echo(line, err=True))


def _line(e: dict) -> str:
    extra = "".join(f"; {k}: {e[k]}" for k in ("cause", "fix") if e.get(k))
    if e.get("expires"):
        extra += " (until the run ends)" if e["expires"] == "run" else f" (until {e['expires']})"
    return f"{e['id']}  {e['kind']:<10}  task {e['task']}: {e['text']}{extra}"


def entries_of_task(root, task: str) -> list[dict]:
    """The memory entries a task produced (for `show TASK`); [] when memory holds none."""
    from ..runtime.memory.store import MemoryStore

    return [e for e in MemoryStore(root, say=lambda line: click.echo(line, err=True)).entries() if e["task"] == task and e["kind"] != "done"]


def memory_lines(entries: list[dict], given: str | None = None, task: str = "TASK") -> list[str]:
    """`show TASK`'s lines of what the task told memory, then of the memory section its last
    attempt's prompt carried (`given`)."""
    lines = [f"memory: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} (`harnessc memory forget ID` removes one)",
             *("  " + _line(e) for e in entries)] if entries else []
    if given:
        lines += [f"memory given to its last attempt (`harnessc log {task} --last` has the whole prompt):",
                  *(f"  {line}".rstrip() for line in given.split("\n"))]
    return lines


@click.group(invoke_without_command=True)
@output_option("text", "json")
@pass_ctx
@click.pass_context
def memory(click_ctx: click.Context, ctx: Context, output: str) -> None:
    """Run memory: the decisions, failures and constraints tasks recorded, and the running summary."""
    if click_ctx.invoked_subcommand is not None:
        return
    from ..runtime.memory.store import SummaryFile, active

    store = _store(ctx)
    entries = store.entries()
    summary = SummaryFile(store, lambda line: click.echo(line, err=True)).read()
    if output == "json":
        click.echo(json_text({"entries": entries, **({"summary": summary} if summary else {})}, indent=2, sort_keys=True))
        return
    knowledge = [e for e in entries if e["kind"] != "done"]
    if not entries:
        click.echo("memory is empty: tasks add to it with <decision>, <failure> and <constraint> markers")
        return
    for e in knowledge:
        gone = e["kind"] == "constraint" and e.get("expires") and e["expires"] != "run" and not active(e, None)
        echo_visible(_line(e) + (" [expired]" if gone else ""))
    done = [e for e in entries if e["kind"] == "done"]
    if done:
        click.echo(f"summary: {len(done)} task(s) ended well; the newest: {done[-1]['text']}")
    if summary.get("text"):
        by = "from the entries" if summary.get("by") == "entries" else f"by {summary.get('by')}"
        echo_visible(f"running summary ({by}, {summary.get('at', '?')}):\n{summary['text']}")


@memory.command()
@click.argument("entry_id", metavar="ID")
@pass_ctx
def forget(ctx: Context, entry_id: str) -> None:
    """Remove entry ID from memory (later prompts no longer carry it)."""
    gone = _store(ctx).forget(entry_id)
    if gone is None:
        click.echo(f"harnessc: error: no memory entry {entry_id} (`harnessc memory` lists them)", err=True)
        sys.exit(Exit.PROBLEMS)
    echo_visible(f"forgot {entry_id}: {gone['text']}")
