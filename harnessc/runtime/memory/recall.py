"""A task's memory section: the running summary, the decisions most related to the task
(files it shares with them, then words), the failures on its files, every active
constraint — at most `inject_tokens` (the summary itself at most `summary_tokens`). It goes
after the prompt's cacheable prefix (the task's own part), so prompt caching is kept.

"So far" is the running summary (summary.py: by `memory.agent`, or from the entries) and the
lines of the tasks that ended since it was written, oldest dropped first."""

from __future__ import annotations

import re
from typing import Any

from ...estimates import estimate_tokens
from .store import Settings, active, pending

WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{3,}")
STOP = frozenset("""this that with from have will your they them their there what when which into
than then also each only more most must should would could been were does done make made
uses used using task tasks file files code test tests agent agents need needs about after
before other some such like just over under where while return returns write writes""".split())
MAX_DECISIONS = 8
MAX_FAILURES = 5


def words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text or "")} - STOP


def task_files(node: Any) -> list[str]:
    """The files a task names: its context, write scope and what its accept commands name."""
    files = list(node.context or ())
    files += [g for g in (node.write_scope or ()) if not any(c in g for c in "*?[")]
    for cmd in node.accept or ():
        files += [a for a in cmd.argv[1:] if "/" in a and not a.startswith("-") or re.match(r"^[\w./-]+\.\w{1,5}$", a)]
    return list(dict.fromkeys(f.strip("./") if f.startswith("./") else f for f in files))


def _related(entry: dict, files: set[str], said: set[str]) -> tuple[int, int]:
    return len(files & set(entry.get("files") or ())), len(said & words(entry["text"]))


def select(entries: list[dict], node: Any, run_id: str | None, summary: dict | None = None) -> dict[str, list[dict]]:
    """The entries a task is shown, before the budget."""
    files = set(task_files(node))
    said = words(" ".join([node.title or "", node.goal or "", node.success or "", *files]))
    mine = [e for e in entries if e["task"] != node.id]
    ranked = []
    for i, e in enumerate(mine):
        if e["kind"] == "decision":
            f, w = _related(e, files, said)
            ranked.append(((f, w, i), e))
    ranked.sort(key=lambda r: r[0], reverse=True)
    return {
        "summary": ([{"text": summary["text"], "written": summary.get("by", "entries")}] if summary and summary.get("text") else [])
        + pending(entries, (summary or {}).get("upto")),
        "decisions": [e for _, e in ranked[:MAX_DECISIONS]],
        "failures": [e for e in mine if e["kind"] == "failure" and files & set(e.get("files") or ())][-MAX_FAILURES:],
        "constraints": [e for e in entries if e["kind"] == "constraint" and active(e, run_id)],
    }


def _line(e: dict) -> str:
    text = e["text"]
    if e["kind"] == "failure":
        text += "".join(f"; {k}: {e[k]}" for k in ("cause", "fix") if e.get(k))
    if e["kind"] == "constraint" and e.get("expires"):
        text += " (until the run ends)" if e["expires"] == "run" else f" (until {e['expires']})"
    return f"- {text} [{e['id']}, task {e['task']}]\n"


HEADING = "## Memory of earlier tasks"
SUMMARY_OPEN, SUMMARY_CLOSE = "(the running summary, written by ", "(end of the summary)"


def render(view: dict[str, list[dict]]) -> str:
    if not (view["decisions"] or view["failures"] or view["constraints"] or view["summary"]):
        return ""
    out = [f"\n{HEADING}\n\nWhat earlier tasks of this project recorded (`harnessc memory`). "
           "Keep to the decisions and constraints unless your task says otherwise; report your own with "
           "<decision>...</decision>, <failure cause=\"...\" fix=\"...\">...</failure> and "
           "<constraint expires=\"...\">...</constraint>.\n"]
    if view["summary"]:
        out.append("\nSo far:\n")
        for e in view["summary"]:
            if "written" in e:  # the running summary: an agent's words are shown as quoted data
                by = "its summary agent" if e["written"] != "entries" else "harnessc, from the entries"
                out.append(f"{SUMMARY_OPEN}{by})\n{e['text']}\n{SUMMARY_CLOSE}\n")
            else:
                out.append(f"- {e['text']}\n")
    for key, head in (("decisions", "Decisions"), ("failures", "Failures on your files"),
                      ("constraints", "Active constraints")):
        if view[key]:
            out.append(f"\n{head}:\n")
            out += [_line(e) for e in view[key]]
    return "".join(out)


def section(entries: list[dict], node: Any, settings: Settings, run_id: str | None, summary: dict | None = None) -> str:
    """The task's memory section within its budget ("" when memory holds nothing to tell it,
    or only the summary): the oldest summary lines go first, then the least related
    decisions, the oldest failures, then constraints."""
    view = select(entries, node, run_id, summary)
    told = [e for e in view["summary"] if e.get("written", "entries") != "entries"]  # an agent's summary
    if not (view["decisions"] or view["failures"] or view["constraints"] or told):
        return ""  # harnessc's own summary alone tells a task nothing it can act on
    lines = view["summary"]
    while lines and estimate_tokens("".join(e["text"] for e in lines)) > settings.summary_tokens:
        lines.pop(0 if "written" not in lines[0] or len(lines) == 1 else 1)  # the running summary goes last
    text = render(view)
    while estimate_tokens(text) > settings.inject_tokens:
        for key, end in (("summary", 0), ("decisions", -1), ("failures", 0), ("constraints", 0)):
            if view[key]:
                view[key].pop(end)
                break
        else:
            return ""
        text = render(view)
    return text


def given(prompt: str | None) -> str:
    """The memory section a prompt carried, as `render` wrote it, without its heading and the
    lines that say what memory is ("" when it carried none): up to the prompt's next `## `
    part (the loop's memory, a refinement, the operator's words), the summary's lines whole."""
    head = f"\n{HEADING}\n"
    if not prompt or head not in prompt:
        return ""
    lines = prompt.split(head, 1)[1].split("\n")
    kept, quoted = [], False
    for line in lines:
        if quoted:
            quoted = line != SUMMARY_CLOSE
        elif line.startswith(("# ", "## ")):
            break
        else:
            quoted = line.startswith(SUMMARY_OPEN)
        kept.append(line)
    body = "\n".join(kept).strip("\n")
    return body.split("\n\n", 1)[1] if body.startswith("What earlier tasks") and "\n\n" in body else body


def done_line(node: Any, outcome: str, told: list[dict]) -> dict:
    """A task's line of the running summary."""
    said = "; ".join(f"decided: {e['text'][:80]}" for e in told if e["kind"] == "decision")
    text = f"task {node.id} ({node.title[:80]}) {outcome}" + (f" - {said}" if said else "")
    return {"kind": "done", "text": text, "task": node.id, "files": task_files(node)}
