"""The runtime's only doorway to the compiler: loading plan.json and the compiler functions.

Every compiler call the runtime makes goes through this module. Where a compiler function
does not exist yet, a small local stand-in keeps the runtime usable (and its tests honest);
switching to the compiler's version needs no change elsewhere.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

PLAN_VERSION = 1
BUILD_DIR = Path(".harness") / "build"


class PlanError(Exception):
    """The plan cannot be used: missing, unreadable, wrong version, or failed to build."""


def _compiler(module: str, name: str):
    """The compiler's function `name` from harnessc.compiler[.module], or None."""
    import importlib

    try:
        mod = importlib.import_module(f"harnessc.compiler{'.' + module if module else ''}")
    except ImportError:
        return None
    return getattr(mod, name, None)


# ------------------------------------------------------------------ plan loading


def plan_path(root: Path) -> Path:
    return root / BUILD_DIR / "plan.json"


def load_plan(root: Path) -> dict:
    path = plan_path(root)
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanError(f"no compiled plan at {path.relative_to(root)}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PlanError(f"{path.relative_to(root)} is unreadable: {e}") from None
    if not isinstance(plan, dict) or plan.get("version") != PLAN_VERSION:
        got = plan.get("version") if isinstance(plan, dict) else None
        raise PlanError(
            f"{path.relative_to(root)} has plan version {got!r}; this harnessc reads version {PLAN_VERSION}"
        )
    return plan


def stale_sources(plan: dict, root: Path) -> list[str]:
    """Source files whose sha256 differs from the one the plan was built from."""
    changed = []
    for rel, digest in sorted((plan.get("metadata") or {}).get("sources", {}).items()):
        try:
            now = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        except OSError:
            now = None
        if now != digest:
            changed.append(rel)
    # A spec file that appeared since the build also makes the plan stale.
    for name in ("roadmap.md", "contracts.yaml", "harness.yaml"):
        if (root / name).is_file() and name not in (plan.get("metadata") or {}).get("sources", {}):
            if (plan.get("metadata") or {}).get("sources"):
                changed.append(name)
    return changed


def build(root: Path) -> tuple[dict | None, list[str]]:
    """Lint + build through the compiler. Returns (plan or None, rendered diagnostics)."""
    build_project = _compiler("", "build_project")
    if build_project is None:
        raise PlanError("the compiler (harnessc build) is not available in this installation")
    plan, diags = build_project(root)
    lines = []
    for d in getattr(diags, "items", []) or []:
        lines.append(f"{d.span}: {d.severity}[{d.code}]: {d.message}")
    return plan, lines


def prompt_text(plan: dict, node: dict, root: Path) -> str:
    """The first prompt the compiler rendered for a node."""
    rel = (node.get("prompt") or {}).get("path") or f"prompts/{node['id']}.md"
    path = root / BUILD_DIR / rel
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        raise PlanError(
            f"prompt for task '{node['id']}' is missing ({path.relative_to(root)}); run `harnessc build`"
        ) from None


# ------------------------------------------------------------------ compiler functions


def render_prompt(plan: dict, node_id: str, deps: dict[str, dict], root: Path) -> str:
    fn = _compiler("prompts", "render_prompt")
    if fn is not None:
        return fn(plan, node_id, deps, root)
    node = next(n for n in plan["nodes"] if n["id"] == node_id)
    text = prompt_text(plan, node, root)
    outputs = {k: v.get("output") for k, v in deps.items() if v.get("output") is not None}
    if outputs:
        text += "\n\n## Outputs of the tasks this one depends on\n\n```json\n"
        text += json.dumps(outputs, indent=2, sort_keys=True) + "\n```\n"
    return text


def render_refinement(plan: dict, node_id: str, base_prompt: str, level: int,
                      errors: list[str], last_output: str | None, root: Path) -> str:
    fn = _compiler("prompts", "render_refinement")
    if fn is not None:
        return fn(plan, node_id, base_prompt, level, errors, last_output, root)
    node = next(n for n in plan["nodes"] if n["id"] == node_id)
    contract = plan.get("contracts", {}).get(node.get("contract") or "", None)
    lines = [base_prompt, "", "## Your previous answer was not accepted", ""]
    lines += [f"- {e}" for e in errors]
    if level >= 2 and contract and contract.get("json_schema"):
        lines += ["", "Answer with one JSON object in a ```json fenced block, matching this schema:",
                  "```json", json.dumps(contract["json_schema"], indent=2, sort_keys=True), "```"]
    if level >= 3 and contract and contract.get("output"):
        lines += ["", "Fill in exactly this template:", "```json",
                  json.dumps(template_output(contract), indent=2, sort_keys=True), "```"]
    if node.get("completion_promise"):
        lines += ["", f"When done, print <promise>{node['completion_promise']}</promise>."]
    return "\n".join(lines) + "\n"


def render_system(plan: dict, root: Path) -> str:
    fn = _compiler("prompts", "render_system")
    return fn(plan, root) if fn is not None else ""


def extract_json(text: str) -> tuple[Any | None, str | None]:
    """(the output object in a response, None) or (None, why there is none)."""
    fn = _compiler("validate", "extract_json")
    if fn is not None:
        return fn(text)
    from .verify import local_extract_json, NoJSON

    try:
        return local_extract_json(text), None
    except NoJSON as e:
        return None, str(e)


def validate_output(contract: dict, data: Any) -> list[dict]:
    fn = _compiler("validate", "validate_output")
    if fn is not None:
        return fn(contract, data)
    import jsonschema

    schema = contract.get("json_schema") or {}
    errors = []
    for err in jsonschema.Draft7Validator(schema).iter_errors(data):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        kind = {"required": "missing", "type": "type", "enum": "enum"}.get(err.validator, "schema")
        errors.append({"path": path, "kind": kind, "message": err.message, "rule": None})
    return sorted(errors, key=lambda e: (e["path"], e["message"]))


_ZERO = {"str": "", "int": 0, "float": 0.0, "bool": False, "list": [], "dict": {}, "any": None}


def _fill(d: dict) -> Any:
    if d.get("example") is not None:
        return copy.deepcopy(d["example"])
    if d.get("default") is not None:
        return copy.deepcopy(d["default"])
    if d.get("enum"):
        return d["enum"][0]
    if d.get("type") == "dict" and d.get("fields"):
        return {k: _fill(v) for k, v in d["fields"].items()}
    return copy.deepcopy(_ZERO.get(d.get("type") or "any"))


def template_output(contract: dict) -> dict:
    fn = _compiler("validate", "template_output")
    if fn is not None:
        return fn(contract)
    return {k: _fill(v) for k, v in (contract.get("output") or {}).items()}


def partial_output(contract: dict, data: Any) -> dict:
    """The best output completed from defaults and examples (the compiler's warnings dropped)."""
    fn = _compiler("validate", "partial_output")
    if fn is not None:
        out = fn(contract, data)
        return out[0] if isinstance(out, tuple) else out
    out = template_output(contract)
    if isinstance(data, dict):
        bad = {e["path"].split(".")[1].split("[")[0] for e in validate_output(contract, data)
               if e["path"].startswith("$.")}
        for k, v in data.items():
            if k in out and k not in bad:
                out[k] = v
    return out


def select_ids(plan: dict, selectors: list[str], exclude: list[str]) -> set[str]:
    fn = _compiler("select", "select_ids")
    if fn is not None:
        try:
            return set(fn(plan["nodes"], selectors, exclude))
        except ValueError as e:  # the compiler's SelectionError
            raise PlanError(str(e)) from None
    ids = [n["id"] for n in plan["nodes"]]
    chosen = set(ids) if not selectors else set()
    for s in selectors:
        if s not in ids:
            raise PlanError(f"--select '{s}' matches no task")
        chosen.add(s)
    return chosen - set(exclude)


def ensure_plan(root: Path, no_build: bool, say) -> dict:
    """A plan that matches the specs: loaded, or (re)built. `say` prints progress notes.

    Raises PlanError (usage problem: exit 2) or BuildFailed (spec errors: exit 1).
    """
    try:
        plan = load_plan(root)
        changed = stale_sources(plan, root)
        if not changed:
            return plan
        why = f"the plan is older than {', '.join(changed)}"
    except PlanError as e:
        why = str(e)
    if no_build:
        raise PlanError(f"{why}; run `harnessc build` (or drop --no-build)")
    say(f"{why}: building")
    plan, lines = build(root)
    if plan is None:
        raise BuildFailed(lines)
    return plan


class BuildFailed(Exception):
    def __init__(self, lines: list[str]):
        super().__init__("the build failed")
        self.lines = lines
