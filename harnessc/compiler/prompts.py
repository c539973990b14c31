"""Prompt rendering: sandboxed Jinja, StrictUndefined, user overrides from `templates:`.

Build and run render through the same functions, from plan.json alone, so the prompt a task
gets at run time is the one `harnessc build` showed (plus its dependencies' real outputs).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import traceback
from collections import Counter
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

from ..diagnostics import Diagnostics, Span, did_you_mean
from ..estimates import CHARS_PER_TOKEN
from ..states import TaskState
from ..workspace import UnsafePath, Workspace, WorkspaceError
from .contextentry import PRIORITIES

TEMPLATE_NAMES = ("system.md.j2", "task.md.j2", "refine.md.j2", "memory.md.j2")
MAX_CONTEXT_FILE = 200_000  # characters of one context file given to the agent
# A loop task's prompt asks for the markers runtime/loop/progress.py scores, from its first
# iteration (later ones repeat it at the end of their memory section, memory.md.j2).
PROGRESS_REQUEST = "Report each step you complete as `<progress>what you did</progress>`."
# What task.md.j2's `{{ cache_break }}` prints: the end of a part of the prompt that other tasks
# share. render_prompt_parts splits the text there and removes it, so no prompt (file, request,
# hash) contains it; random, so no context file or answer quoted in a prompt holds it.
CACHE_BREAK = f"\x00cache-break-{os.urandom(8).hex()}\x00"


class TemplateProblem(Exception):
    """A template failed; carries a located diagnostic's parts."""

    def __init__(self, code: str, message: str, span: Span, hint: str | None = None):
        super().__init__(message)
        self.code, self.message, self.span, self.hint = code, message, span, hint


@lru_cache(maxsize=8)
def _environment(root: str, templates: str | None):
    from . import sandbox  # Jinja, met here: when a template is first rendered

    env = sandbox.environment(root, templates)
    env.filters["json"] = lambda v: v if isinstance(v, str) else json.dumps(v, indent=2, sort_keys=True)
    env.filters["shell_join"] = _shell_join
    return env


def _shell_join(argv) -> str:
    """An accept command's argv as a shell command line that runs as written when pasted:
    words without shell syntax stay bare, so simple commands read as before."""
    return shlex.join(map(str, argv))


def _template_span(exc: BaseException, root: str, templates: str | None) -> Span:
    """Where in a template file an error happened (Jinja keeps template lines in tracebacks)."""
    lineno = getattr(exc, "lineno", None)
    filename = getattr(exc, "filename", None) or getattr(exc, "name", None)
    if not lineno:
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if frame.filename.endswith(".j2"):
                filename, lineno = frame.filename, frame.lineno
                break
    path = filename or "<template>"
    p = Path(path)
    try:
        path = p.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        if templates and not p.is_absolute():
            path = (Path(templates) / path).as_posix()
        elif p.is_absolute():
            path = "harnessc/templates/" + p.name
    return Span(path, lineno or 1, 1)


def _render(plan: dict, root: Path, name: str, context: dict) -> str:
    from .sandbox import SecurityError, TemplateError, TemplateSyntaxError, UndefinedError

    templates = plan.get("templates")
    env = _environment(str(root), templates)
    try:
        return env.get_template(name).render(**context)
    except UnsafePath as e:
        raise TemplateProblem("HC216", str(e), Span(f"{templates}/{name}", 1, 1),
                              "template files are read without following links: "
                              "put the template itself in the templates directory") from None
    except TemplateSyntaxError as e:
        raise TemplateProblem("HC501", f"template syntax error: {e.message}",
                              _template_span(e, str(root), templates), "fix the Jinja syntax") from None
    except UndefinedError as e:
        message, hint = _undefined_explained(e, context)
        span = _template_span(e, str(root), templates)
        raise TemplateProblem("HC502", f"undefined variable in template: {message}",
                              _at_name(span, root, getattr(e, "name", None)), hint) from None
    except SecurityError as e:  # unsafe access, or a bound of compiler/sandbox.py
        raise TemplateProblem("HC503", f"{getattr(e, 'what', 'template did something unsafe')}: {e}",
                              _at_name(_template_span(e, str(root), templates), root, getattr(e, "name", None)),
                              getattr(e, "hint", "templates run sandboxed")) from None
    except TemplateError as e:
        raise TemplateProblem("HC503", f"template error: {e}", _template_span(e, str(root), templates)) from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError,
            OverflowError, RecursionError, NameError, MemoryError) as e:  # NameError: Jinja compiles 1e400 to `inf`
        raise TemplateProblem("HC503", f"template error: {type(e).__name__}: {e}",
                              _template_span(e, str(root), templates)) from None


def _undefined_explained(e, context: dict) -> tuple[str, str]:
    """(message, hint) for an undefined name: which object lacked it, and what it has."""
    from .sandbox import missing

    obj, name = getattr(e, "obj", missing), getattr(e, "name", None)
    if obj is missing or name is None:  # a top-level name
        names = list(context)
        near = did_you_mean(str(name), names) if name is not None else None
        return e.message or "undefined", (f"{near} " if near else "") + "available: " + ", ".join(names)
    where = _name_of(obj, context)
    if isinstance(obj, dict):
        fields = [str(k) for k in obj]
        near = did_you_mean(str(name), fields)
        shown = ", ".join(fields) if fields else "(none)"
        return (f"{where} has no field '{name}'",
                (f"{near} " if near else "") + f"{where} has: {shown}")
    return e.message or f"{where} has no attribute '{name}'", f"{where} is a {type(obj).__name__}"


def _name_of(obj, context: dict) -> str:
    """How a template names an object of its context: task, task.output, an item of deps."""
    for key, value in context.items():
        if value is obj:
            return key
        if isinstance(value, dict):
            for sub, inner in value.items():
                if inner is obj:
                    return f"{key}.{sub}"
        if isinstance(value, list) and any(item is obj for item in value):
            return f"an item of {key}"
    return "the object"


def _at_name(span: Span, root: Path, name) -> Span:
    """The span moved onto the name on its template line, when the line is a project file."""
    if name is None:
        return span
    try:
        lines = (root / span.path).read_text("utf-8", errors="replace").splitlines()
    except OSError:
        return span
    if not 0 < span.line <= len(lines):
        return span

    m = re.search(rf"(?<![\w]){re.escape(str(name))}(?![\w])", lines[span.line - 1])
    return Span(span.path, span.line, m.start() + 1, span.line, m.end() + 1) if m else span


def _context_files(plan: dict, node: dict, root: Path) -> list[dict]:
    """The task's context files, read again now (a build's check may be old) and without
    following links: a link put in place of a context file since the build raises
    workspace.UnsafePath, which fails the task, instead of handing its target to the agent."""
    if not node.get("context"):
        return []  # most tasks: no Workspace to look up

    workspace = _workspace(plan, root)
    staged = {f["path"]: f for f in (node.get("context_staging") or {}).get("files", ())}
    out = []
    for rel in node.get("context", []):
        try:
            # 4 bytes a character at most: enough for MAX_CONTEXT_FILE characters and the cut
            data = workspace.read_bytes(Path(root) / rel, limit=4 * MAX_CONTEXT_FILE + 4)
            text = data.decode("utf-8", errors="replace")
        except UnsafePath:
            raise
        except FileNotFoundError:
            text = "(could not read: No such file or directory)"
        except WorkspaceError as e:
            text = f"(could not read: {str(e).rpartition(': ')[2]})"
        if len(text) > MAX_CONTEXT_FILE:
            text = text[:MAX_CONTEXT_FILE] + f"\n... (cut at {MAX_CONTEXT_FILE} characters)"
        fate = staged.get(rel)
        if fate and fate["kept"] == "cut":
            keep = fate["allowed"] * CHARS_PER_TOKEN
            text = text[:keep] + f"\n... (cut to ~{fate['allowed']:,} of ~{fate['tokens']:,} tokens: the context budget)"
        out.append({"path": rel, "text": text.rstrip("\n")})
    return out


def _context_left_out(node: dict) -> list[dict]:
    """The context files the task's budget had no room for: {path, priority, tokens}."""
    staging = node.get("context_staging") or {}
    return [{"path": f["path"], "priority": f["priority"], "tokens": f["tokens"], "budget": staging["budget"]}
            for f in staging.get("files", ()) if f["kept"] == "left out"]


MAX_DEP_REASON = 300  # characters of a degraded dependency's error quoted in the note


def _dep_view(plan_nodes: dict, dep_id: str, dep: dict | None) -> dict:
    """What a prompt shows of one dependency: {title, state, data, output, verified, note}."""
    title = plan_nodes[dep_id]["title"] if dep_id in plan_nodes else dep_id
    if dep is None:
        if plan_nodes.get(dep_id, {}).get("done"):
            return {"title": title, "state": TaskState.DONE, "data": None, "verified": True, "note": "",
                    "output": "(checked off in roadmap.md before this run; no output recorded)"}
        return {"title": title, "state": "not run yet", "data": None, "verified": True, "note": "",
                "output": f"(the output of task {dep_id}, filled in at run time)"}
    data = dep.get("output")
    text = "(no structured output)" if data is None else json.dumps(data, indent=2, sort_keys=True)
    state = dep.get("state", TaskState.SUCCEEDED)
    return {"title": title, "state": state, "data": data, "output": text,
            "verified": state != TaskState.DEGRADED,
            "note": _unverified_note(dep_id, dep) if state == TaskState.DEGRADED else ""}


def _dep_views(plan: dict, node: dict, deps: dict[str, dict]) -> dict[str, dict]:
    """dependency id -> _dep_view. A dependency without a result (every one, at build time)
    looks the same to each task that depends on it: its view is made once per plan (templates
    cannot change it: their environment is immutable)."""
    cache = _plan_cache(plan)
    nodes, pending = cache.nodes, cache.pending_deps
    views = {}
    for dep_id in node.get("depends_on", []):
        dep = deps.get(dep_id)
        if dep is not None:
            views[dep_id] = _dep_view(nodes, dep_id, dep)
        elif dep_id in pending:
            views[dep_id] = pending[dep_id]
        else:
            views[dep_id] = pending[dep_id] = _dep_view(nodes, dep_id, None)
    return views


def _unverified_note(dep_id: str, dep: dict) -> str:
    """A degraded dependency's output is the fallback on_failure allowed, not a verified
    result: it may break its own contract, and the dependent should know."""
    reason = " ".join(str(dep.get("error") or "").split())
    if len(reason) > MAX_DEP_REASON:
        reason = reason[:MAX_DEP_REASON] + "..."
    from .validate import filled_text

    filled = filled_text(dep.get("filled"))
    return (f"Unverified output: task {dep_id} failed verification and this is its fallback"
            + (f" ({reason})" if reason else "") + ". It may break its contract; check it before you rely on it."
            + (f" Not from the agent (filled from the contract): {filled}." if filled else ""))


def _base_context(plan: dict, node: dict, root: Path) -> dict:
    contract = plan["contracts"].get(node["contract"]) if node.get("contract") else None
    output_format = ""
    if contract and contract.get("output"):
        output_format = _output_format(plan, node["contract"], contract)
    return {
        "project": plan.get("project", {}),
        "task": node,
        "contract": contract,
        "accept": node.get("accept", []),
        "output_format": output_format,
    }


def render_system(plan: dict, root: Path) -> str:
    project = plan.get("project", {})
    if not _user_template(plan, root, "system.md.j2") and "title" in project:
        return builtin_system_prompt(project)
    return _render(plan, root, "system.md.j2", {"project": project})


def builtin_system_prompt(project: dict) -> str:
    """What the built-in system.md.j2 renders, written out in Python: a run whose templates
    are all built in never imports Jinja (tests/test_prompts.py checks both give the same text)."""
    title = project.get("title")
    who = f'the project "{title}"' if title else "a project"
    return (f"You are an agent working on {who}, driven by harnessc.\n"
            "Each task states its goal and how your work is verified. Claims are checked: output JSON is\n"
            "validated against its contract, accept commands are run, and a completion promise counts only\n"
            "when every other check passes. Do the work; do not claim what you have not done.\n")


# What every prompt of one plan shares, computed once per plan (one plan at a time): building
# renders every task, which must stay linear and not redo per-contract work.
_CACHE = SimpleNamespace(plan=None, nodes={}, formats={}, user_templates={}, shared_context=None,
                         workspaces={}, pending_deps={})


def _plan_cache(plan: dict) -> SimpleNamespace:
    if _CACHE.plan is not plan or len(_CACHE.nodes) != len(plan["nodes"]):
        _CACHE.plan, _CACHE.nodes, _CACHE.formats = plan, {n["id"]: n for n in plan["nodes"]}, {}
        _CACHE.user_templates, _CACHE.shared_context, _CACHE.workspaces = {}, None, {}
        _CACHE.pending_deps = {}
    return _CACHE


def _forget_plan() -> None:
    """Drop the cache: a build is done with its plan, which must not outlive the project."""
    _CACHE.plan, _CACHE.nodes, _CACHE.formats, _CACHE.user_templates = None, {}, {}, {}
    _CACHE.shared_context, _CACHE.workspaces, _CACHE.pending_deps = None, {}, {}


def _workspace(plan: dict, root: Path):
    """The Workspace of `root` that reads context files, one per plan and root (a Workspace
    holds only paths, but makes a dozen of them)."""
    workspaces = _plan_cache(plan).workspaces
    key = str(root)
    if key not in workspaces:
        workspaces[key] = Workspace(root)
    return workspaces[key]


def _node_index(plan: dict) -> dict[str, dict]:
    """id -> node, built once per plan dict."""
    return _plan_cache(plan).nodes


def _output_format(plan: dict, name: str, contract: dict) -> str:
    """prompt_format(contract), once per contract of the plan."""
    from .contract_schema import prompt_format

    formats = _plan_cache(plan).formats
    cached = formats.get(name)
    if cached is None or cached[0] is not contract:
        cached = formats[name] = (contract, prompt_format(contract))
    return cached[1]


def render_prompt(plan: dict, node_id: str, deps: dict[str, dict] | None, root: Path,
                  files_root: Path | None = None) -> str:
    """The task prompt; `deps` maps dependency id -> {"output", "state"} (None at build time).
    files_root: where the context files are read (an isolated task's worktree); else root."""
    return "".join(render_prompt_parts(plan, node_id, deps, root, files_root))


def render_prompt_parts(plan: dict, node_id: str, deps: dict[str, dict] | None, root: Path,
                        files_root: Path | None = None) -> list[str]:
    """The task prompt in parts whose concatenation is the prompt: the parts the template ends
    with `{{ cache_break }}` (text other tasks share: the built-in template's overview, shared
    context and contract format), then the rest (the task's own). A provider may cache the
    prompt up to the end of a shared part (runtime/agents: Request.cache_breaks)."""
    node = _node_index(plan)[node_id]
    context = _base_context(plan, node, root)
    context["deps"] = _dep_views(plan, node, deps or {})
    files = context["context_files"] = _context_files(plan, node, files_root or root)
    context["shared_context"], context["task_context"] = _split_context(plan, node, files)
    context["context_left_out"] = _context_left_out(node)
    context["cache_break"] = CACHE_BREAK
    if not _user_template(plan, root, "task.md.j2"):
        text = builtin_task_prompt(context)
    else:
        if type(node) is not dict:  # a plan node of a build: templates see what a run shows them
            context["task"] = dict(node)
        text = _render(plan, root, "task.md.j2", context)
    return [part for part in text.split(CACHE_BREAK) if part] or [""]


def _split_context(plan: dict, node: dict, files: list[dict]) -> tuple[list[dict], list[dict]]:
    """(shared, the task's own) of a task's context files. Shared: read by more tasks than
    this one and given whole (a cut depends on the task's budget), sorted by priority then
    path so every task that reads them has the same text; the task's own keep their order."""
    if not files:
        return [], []
    shared_paths = _shared_context_paths(plan)
    staged = {f["path"]: f for f in (node.get("context_staging") or {}).get("files", ())}
    shared, own = [], []
    for f in files:
        fate = staged.get(f["path"]) or {}
        (shared if f["path"] in shared_paths and fate.get("kept") != "cut" else own).append(f)
    rank = {p: i for i, p in enumerate(PRIORITIES)}
    shared.sort(key=lambda f: (rank.get((staged.get(f["path"]) or {}).get("priority"), 2), f["path"]))
    return shared, own


def _shared_context_paths(plan: dict) -> frozenset[str]:
    """The context files more than one task of the plan reads (once per plan)."""
    cache = _plan_cache(plan)
    if cache.shared_context is None:
        counts = Counter(path for n in plan["nodes"] for path in (n.get("context") or ()))
        cache.shared_context = frozenset(path for path, k in counts.items() if k > 1)
    return cache.shared_context


def _user_template(plan: dict, root: Path, name: str) -> bool:
    """Whether the project's `templates:` directory overrides template `name` (looked up
    once per plan and root, not once per task)."""
    seen = _plan_cache(plan).user_templates
    key = (str(root), name)
    if key not in seen:
        templates = plan.get("templates")
        seen[key] = bool(templates) and os.path.lexists(Path(root) / templates / name)  # a link is refused when read
    return seen[key]


def builtin_task_prompt(c: dict) -> str:
    """What the built-in task.md.j2 renders, written out in Python: a build renders every
    task's prompt, and this is several times faster than Jinja. The built-in template stays
    the reference (users copy it to override it); tests/test_prompts.py checks that both
    give the same text (cache_break markers included)."""
    task, brk = c["task"], str(c["cache_break"])
    out = []
    if c["project"].get("overview"):
        out += ["# Project\n\n", str(c["project"]["overview"]), "\n\n", brk]
    if c["shared_context"]:
        out.append("## Context files\n")
        out += _files_text(c["shared_context"])
        out += ["\n", brk]
    if c["contract"] and c["contract"]["output"]:
        out += [str(c["output_format"]), "\n\nReturn the JSON object in a ```json fenced block.\n\n", brk]
    out += ["# Task ", str(task["id"]), ": ", str(task["title"]), "\n"]
    if task["phase"]:
        out += ["\nPhase: ", str(task["phase"]), "\n"]
    if task["goal"]:
        out += ["\n", str(task["goal"]), "\n"]
    if task["success"]:
        out += ["\n## Success criterion\n\n", str(task["success"]), "\n"]
    if c["task_context"]:
        out.append("\n## Context files for this task\n")
        out += _files_text(c["task_context"])
    if c.get("context_left_out"):
        left = c["context_left_out"]
        out.append(f"\n## Context left out\n\nThe context budget ({left[0]['budget']} tokens) had no room for"
                   " these files; read them yourself if you need them:\n\n")
        out += [f"- {f['path']} ({f['priority']}, ~{f['tokens']} tokens)\n" for f in left]
    if c["deps"]:
        out.append("\n## Results of the tasks this one depends on\n")
        for id_, dep in c["deps"].items():
            out += ["\n### ", str(id_), ": ", str(dep["title"]), " (", str(dep["state"]), ")\n"]
            if dep["note"]:
                out += ["\n", str(dep["note"]), "\n"]
            out += ["\n", str(dep["output"]), "\n"]
    if c["accept"]:
        out.append("\n## Verification\n\nThese commands must exit 0 when you are done:\n\n")
        out += [f"- `{_shell_join(a['argv'])}`\n" for a in c["accept"]]
    if task["completion_promise"]:
        out += ["\n", PROGRESS_REQUEST, "\nWhen the task is complete and verified, print `<promise>",
                str(task["completion_promise"]), "</promise>`.\n"]
    return "".join(out)


def _files_text(files: list[dict]) -> list[str]:
    out = []
    for f in files:
        out += ["\n### ", str(f["path"]), "\n\n```\n", str(f["text"]), "\n```\n"]
    return out


def render_operator(plan: dict, instructions: list, root: Path) -> str:
    """The operator's instructions (runtime/steering.py) as the section a task's next
    prompts end with: operator.md.j2, sandboxed and overridable like the others."""
    items = [{"text": i.text, "urgent": i.urgent, "for_all": i.task is None} for i in instructions]
    return _render(plan, root, "operator.md.j2", {"instructions": items}) if items else ""


def render_refinement(plan: dict, node_id: str, base_prompt: str, level: int, errors: list[str],
                      last_output: str | None, root: Path) -> str:
    """The retry prompt at refinement level 1 (errors), 2 (+ explicit format), 3 (+ exact template)."""
    from .validate import template_output

    node = next(n for n in plan["nodes"] if n["id"] == node_id)
    context = _base_context(plan, node, root)
    contract = context["contract"]
    missing = []
    for e in errors:
        if isinstance(e, dict) and e.get("kind") == "missing":
            missing.append(e.get("field") or e.get("path"))
    messages = [e["message"] if isinstance(e, dict) else str(e) for e in errors]
    tail = None
    if last_output:
        tail = last_output[-2000:]
    context.update(
        base_prompt=base_prompt, level=max(1, min(3, level)), errors=messages, missing=missing,
        last_output=tail,
        template_output=json.dumps(template_output(contract), indent=2) if contract and contract.get("output") else "",
    )
    return _render(plan, root, "refine.md.j2", context)


def render_memory(plan: dict, node_id: str, memory: dict, iteration: int, root: Path) -> str:
    """The memory section of a loop task's next prompt (runtime/loop/memory.py's view of it)."""
    node = _node_index(plan)[node_id]
    return _render(plan, root, "memory.md.j2", {"task": node, "memory": memory, "iteration": iteration})


def render_assist(plan: dict, node_id: str, kind: str, context: dict, root: Path) -> str:
    """What a cheap agent is asked for a loop task (runtime/loop/assist.py): `mutation.md.j2` (a
    rewrite of a stuck task's instructions) or `summary.md.j2` (its running summary)."""
    node = _node_index(plan)[node_id]
    return _render(plan, root, f"{kind}.md.j2", {"task": node, **context})


def template_files_hash(plan: dict, root: Path) -> str:
    """A hash of the templates in effect (user overrides and built-ins), for fingerprints."""
    from importlib import resources  # lazy: built-ins from a zipped install only; it loads tempfile

    h = hashlib.sha256()
    templates = plan.get("templates")
    for name in TEMPLATE_NAMES:
        data = None
        if templates:
            try:  # a link raises workspace.UnsafePath: lint reported it (HC216) before any build
                data = Workspace(root).read_bytes(Path(root) / templates / name)
            except FileNotFoundError:
                pass
        h.update(data if data is not None else resources.files("harnessc").joinpath("templates", name).read_bytes())
    return h.hexdigest()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render_all(project, plan: dict, diags: Diagnostics) -> None:
    """Build pass: render the system prompt and each task's first prompt, setting their
    references (path, sha256) in the plan and noting each task prompt's length for
    finish_plan; the text goes to project.prompt_files (a build) or project.prompts."""
    from ..planfile import PromptRef

    root = project.root

    def report(p: TemplateProblem) -> None:
        diags.error(p.code, p.message, p.span, p.hint)
        source = root / p.span.path
        if p.span.path not in project.sources and source.is_file():
            project.sources[p.span.path] = source.read_text("utf-8", errors="replace")

    try:
        project.system_prompt = render_system(plan, root)
        plan["system"] = PromptRef("_system", _sha256(project.system_prompt))
    except TemplateProblem as p:
        report(p)
    if _user_template(plan, root, "task.md.j2"):
        from .promptorder import check_task_template

        check_task_template(project, plan, _environment(str(root), plan.get("templates")))
    files = project.prompt_files
    try:
        for node in plan["nodes"]:
            tid = node["id"]
            try:
                text = render_prompt(plan, tid, None, root)
            except TemplateProblem as p:
                report(p)
                if p.code == "HC501" or len(diags.errors) > 20:
                    return  # the same template error would repeat for every task
                continue
            node["prompt"] = PromptRef(tid, _sha256(text))
            project.prompt_chars.append(len(text))
            if files is not None:
                files.write(f"{tid}.md", text)
            else:
                project.prompts[tid] = text
    finally:
        _forget_plan()
