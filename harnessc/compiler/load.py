"""Passes that read the project: discover files, parse the roadmap, load config and contracts."""

from __future__ import annotations

import hashlib
from importlib import resources

from ..diagnostics import Diagnostics, Span, did_you_mean
from .ir import BUILTIN_AGENT, Contract, ContractsFile, HarnessConfig, builtin_agents
from .project import CONTRACTS, HARNESS, ROADMAP, Project
from .yamlmodel import validate_model
from .yamlsafe import MAX_BYTES, load_yaml

MAX_ROADMAP_BYTES = 50_000_000  # roadmaps grow with the project; YAML specs stay small


def _read(project: Project, name: str, limit: int) -> str | None:
    path = project.root / name
    if not path.is_file():
        return None
    size = path.stat().st_size
    if size > limit:
        project.diags.error("HC002", f"{name} is {size / 1e6:.1f} MB, over the {limit / 1e6:.0f} MB limit",
                            Span(name, 1, 1), "split it up; spec files are meant to be read by people")
        return None
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        project.diags.error("HC003", f"{name} is not UTF-8 text (byte {e.start})", Span(name, line, col),
                            "save the file as UTF-8")
        return None
    project.sources[name] = text
    project.hashes[name] = hashlib.sha256(data).hexdigest()
    return text


def discover(project: Project) -> None:
    """Read and hash the spec files; roadmap.md is required."""
    if _read(project, ROADMAP, MAX_ROADMAP_BYTES) is None and ROADMAP not in project.sources:
        if not any(d.span.path == ROADMAP for d in project.diags.items):
            project.diags.error("HC001", "roadmap.md not found", Span(ROADMAP, 1, 1),
                                "create one with `harnessc init`, or pass -C DIR to point at the project")
    for name in (CONTRACTS, HARNESS):
        _read(project, name, MAX_BYTES)


def parse_roadmap(project: Project) -> None:
    from .roadmap import parse_roadmap as parse

    text = project.sources.get(ROADMAP)
    if text is not None:
        project.roadmap = parse(text, ROADMAP, project.diags)


def load_config(project: Project) -> None:
    """harness.yaml -> HarnessConfig; without it, the built-in `rehearsal` simulate agent."""
    text = project.sources.get(HARNESS)
    config = None
    if text is not None:
        data, marks = load_yaml(text, HARNESS, project.diags)
        project.config_marks = marks
        if data is not None or not project.diags.errors:
            config = validate_model(HarnessConfig, data, marks, project.diags, HARNESS)
    config = config or HarnessConfig()
    if not config.agents:
        config.agents = builtin_agents()
    elif BUILTIN_AGENT not in config.agents:
        config.agents = {**config.agents, **builtin_agents()}
    project.config = config
    _check_routing_names(project)


def _check_routing_names(project: Project) -> None:
    """Agent names used inside harness.yaml must exist."""
    marks, cfg = project.config_marks, project.config
    if marks is None:
        return
    names = list(cfg.agents)
    uses = [(("routing", "default"), cfg.routing.default)]
    uses += [(("routing", "by_complexity", k), v) for k, v in cfg.routing.by_complexity.items()]
    uses += [(("routing", "escalation", i), v) for i, v in enumerate(cfg.routing.escalation)]
    for loc, name in uses:
        if name != "auto" and name not in cfg.agents:
            project.diags.error("HC403", f"unknown agent '{name}'", marks.value(loc),
                                did_you_mean(name, names) or f"agents defined: {', '.join(names)}")


def _builtin_contracts() -> dict[str, Contract]:
    text = resources.files("harnessc.compiler").joinpath("builtin_contracts.yaml").read_text("utf-8")
    diags = Diagnostics(fail_fast=True)
    data, marks = load_yaml(text, "<builtin>", diags)
    return validate_model(ContractsFile, data, marks, diags, "builtin").contracts


def load_contracts(project: Project) -> None:
    """contracts.yaml + the built-in library, with `extends` applied."""
    builtins = _builtin_contracts()
    project.builtin_names = set(builtins)
    raw: dict[str, Contract] = dict(builtins)
    text = project.sources.get(CONTRACTS)
    if text is not None:
        data, marks = load_yaml(text, CONTRACTS, project.diags)
        project.contracts_unreadable = data is None and text.strip() != ""
        if data is not None:
            parsed = validate_model(ContractsFile, data, marks, project.diags, CONTRACTS)
            if parsed is None and isinstance(data, dict) and isinstance(data.get("contracts"), dict):
                # Keep the contracts that are fine so references to them still resolve.
                for name, body in data["contracts"].items():
                    raw[name] = _salvage_contract(body)
                    project.contract_marks[name] = marks
                    project.contract_paths[name] = ("contracts", name)
            elif parsed is not None:
                for name, contract in parsed.contracts.items():
                    raw[name] = contract
                    project.contract_marks[name] = marks
                    project.contract_paths[name] = ("contracts", name)
    for name in raw:
        project.contracts[name] = _resolve_extends(project, name, raw, ())


def _salvage_contract(body) -> Contract:
    """A contract with its invalid parts left out (already reported), so the rest is still checked."""
    from pydantic import ValidationError

    from .ir import Deliverable

    if not isinstance(body, dict):
        return Contract()
    body = dict(body)
    if isinstance(body.get("output"), dict):
        good = {}
        for field, spec in body["output"].items():
            try:
                Deliverable.model_validate(spec)
                good[field] = spec
            except ValidationError:
                pass
        body["output"] = good
    try:
        return Contract.model_validate(body)
    except ValidationError:
        keep = {k: body[k] for k in ("output", "extends") if k in body}
        try:
            return Contract.model_validate(keep)
        except ValidationError:
            return Contract()


def _resolve_extends(project: Project, name: str, raw: dict[str, Contract], seen: tuple) -> Contract:
    contract = raw[name]
    base_name = contract.extends
    if not base_name:
        return contract
    marks = project.contract_marks.get(name)
    span = marks.value(project.contract_paths[name] + ("extends",)) if marks else Span(CONTRACTS, 1, 1)
    if base_name in seen or base_name == name:
        chain = " -> ".join((*seen, name, base_name))
        project.diags.error("HC214", f"contracts extend each other in a cycle: {chain}", span,
                            "break the cycle: one of them must stand alone")
        return contract
    if base_name not in raw:
        project.diags.error("HC214", f"contract '{name}' extends unknown contract '{base_name}'", span,
                            did_you_mean(base_name, raw) or "define it in contracts.yaml or use a built-in")
        return contract
    base = _resolve_extends(project, base_name, raw, seen + (name,))
    merged = base.model_dump(by_alias=True, exclude_unset=True)
    own = contract.model_dump(by_alias=True, exclude_unset=True)
    if "output" in own and "output" in merged and own["output"] is not None and merged["output"]:
        own["output"] = {**merged["output"], **own["output"]}
    merged.update(own)
    merged.pop("extends", None)
    return Contract.model_validate(merged)
