"""Passes that read the project: discover files, parse the roadmap, load config and contracts.

Lint works on checked views of the YAML (specview.py); `to_models` turns them into the
pydantic IR when a build needs it.
"""

from __future__ import annotations

import copy
import os
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from .. import providers
from ..diagnostics import Span, did_you_mean
from ..vocab import (
    BUILTIN_AGENT,
    MIN_RESOURCE,
    NOTIFY_KINDS,
    RAY_ADDRESS_FORMS,
    RAY_RESERVED_RESOURCES,
    clone_url_problem,
    is_usd_place,
    otlp_endpoint_problem,
    parse_duration,
    parse_usd,
    ray_address,
)
from .project import CONTRACTS, HARNESS, ROADMAP, Project
from .specview import SpecView, bad_places, check_spec, raw, validator
from .yamlsafe import MAX_BYTES, load_yaml

MAX_ROADMAP_BYTES = 50_000_000  # roadmaps grow with the project; YAML specs stay small
BUILTIN_AGENT_SPEC = {"provider": "simulate"}


def _read(project: Project, name: str, limit: int) -> str | None:
    if name in project.sources:  # given in place of the file (lint_project's `texts`: a draft)
        return project.sources[name]
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
    return text


def discover(project: Project) -> None:
    """Read and hash the spec files; roadmap.md is required."""
    if _read(project, ROADMAP, MAX_ROADMAP_BYTES) is None and ROADMAP not in project.sources:
        if not any(d.span.path == ROADMAP for d in project.diags.items):
            project.diags.error("HC001", "roadmap.md not found", Span(ROADMAP, 1, 1),
                                "create one with `harnessc init`, or pass -C DIR to point at the project")
    discover_contracts(project)


def discover_contracts(project: Project) -> None:
    """Read contracts.yaml and harness.yaml, when there are any: all `validate` needs (it
    works outside a project, against the built-in contracts)."""
    for name in (CONTRACTS, HARNESS):
        _read(project, name, MAX_BYTES)


def parse_roadmap(project: Project) -> None:
    from .roadmap import parse_roadmap as parse

    text = project.sources.get(ROADMAP)
    if text is not None:
        project.roadmap = parse(text, ROADMAP, project.diags)


def _salvage(kind: str, data: dict, depth: int) -> dict:
    """`data` without the entries that fail validation (already reported), so the rest is checked.

    An unknown key goes alone; a bad value takes its entry at `depth` (an agent, a
    deliverable) with it; a missing key takes its parent. A cut deliverable stays defined,
    as `any`: rules that name it are not wrong because of a mistake elsewhere.
    """
    data = copy.deepcopy(data)
    for _ in range(50):
        places = bad_places(kind, data)
        if not places:
            return data
        path, keyword = max(places, key=lambda p: len(p[0]))
        if keyword == "additionalProperties":
            cut = path
        else:
            cut = path[:depth] if len(path) > depth else path[:-1] if keyword == "required" else path
        if not cut:
            return {}
        node = data
        for part in cut[:-1]:
            node = node[part]
        if kind == "contracts" and len(cut) == 4 and cut[2] == "output" and node[cut[-1]] != _ANY:
            node[cut[-1]] = dict(_ANY)
        else:
            del node[cut[-1]]
    return {}


_ANY = {"type": "any"}  # what a cut deliverable becomes


def _cut_entries(written, salvaged) -> set[str]:
    """Names of the entries of a written mapping that _salvage cut into (or out)."""
    if not isinstance(written, dict):
        return set()
    kept = salvaged if isinstance(salvaged, dict) else {}
    return {name for name, body in written.items() if name not in kept or kept[name] != body}


def load_config(project: Project) -> None:
    """harness.yaml -> a checked view; the built-in `rehearsal` simulate agent is always there."""
    text = project.sources.get(HARNESS)
    data: dict = {}
    if text is not None:
        loaded, marks = load_yaml(text, HARNESS, project.diags)
        project.config_marks = marks
        project.config_unreadable = loaded is None and text.strip() != ""
        _read_usd_text(loaded)
        if loaded is not None:
            if check_spec("harness", loaded, marks, project.diags, HARNESS) is not None:
                data = loaded
            elif isinstance(loaded, dict):
                data = _salvage("harness", loaded, depth=2)
                project.broken_agents = _cut_entries(loaded.get("agents"), data.get("agents"))
                project.executor_broken = loaded.get("executor") != data.get("executor")
    agents = data.get("agents") if isinstance(data.get("agents"), dict) else {}
    data = {**data, "agents": {**agents, BUILTIN_AGENT: agents.get(BUILTIN_AGENT, BUILTIN_AGENT_SPEC)}}
    v = validator("harness")
    project.config = SpecView(data, v.root, v)
    _check_routing_names(project)
    _check_agent_keys(project)
    _check_templates_dir(project)
    _check_replay_agents(project)
    _check_telemetry(project)
    _check_notify(project)
    _check_executor(project)


def _read_usd_text(node, path: tuple = ()) -> None:
    """Dollar amounts written as text ("$5", "2.50") become numbers, as roadmap.md reads them."""
    if not isinstance(node, dict) or len(path) > 3:
        return
    for key, value in node.items():
        here = (*path, key)
        if isinstance(value, str) and is_usd_place(here):
            usd = parse_usd(value)
            if usd is not None:
                node[key] = usd
        else:
            _read_usd_text(value, here)


def _check_agent_keys(project: Project) -> None:
    """Each agent has the keys its provider needs (HC215: a command agent's argv, an API
    agent's model - without them it would fail only when a task runs) and no `permissions`
    unless it is a coding CLI (HC217: an API agent only answers, nothing would read it)."""
    marks = project.config_marks
    if marks is None:
        return
    for name, agent in project.config.agents.items():
        unit = providers.get(agent.provider) if isinstance(agent.provider, str) else None
        if unit is None:
            continue
        loc = ("agents", name)
        written = agent.raw()
        for key, hint in unit.requires.items():
            if written.get(key):
                continue
            where = marks.value(loc + (key,)) if key in written else marks.key(loc)
            project.diags.error("HC215", f"agent '{name}' has provider {unit.name} but no {key}", where, hint)
        if "permissions" in written and not unit.cli:
            clis = providers.clis()
            hint = ("remove `permissions`: a command agent runs its argv as written (put the program's own"
                    " permission flags in `command:`)" if unit.name == "command" else
                    "remove `permissions` (this agent only answers; it never acts in the project)")
            project.diags.error("HC217", f"'permissions' applies to {', '.join(clis[:-1])} and {clis[-1]} agents,"
                                f" and '{name}' is {unit.name}", marks.key(loc + ("permissions",)), hint)
        if written.get("sandbox") is True and not providers.runs_programs(unit.name):
            project.diags.error("HC430", f"'sandbox' applies to agents that run a program on this machine (command,"
                                f" {', '.join(providers.clis())}), and '{name}' is {unit.name}",
                                marks.key(loc + ("sandbox",)),
                                "remove `sandbox: true` (this agent only answers; it runs nothing here to confine)")


def _check_templates_dir(project: Project) -> None:
    """`templates:` names a directory inside the project."""
    name = project.config.templates
    if not name or project.config_marks is None:
        return
    span = project.config_marks.value(("templates",))
    root = project.root.resolve()
    try:
        path = (root / name).resolve()
        is_dir = path.is_dir()
    except (OSError, ValueError) as e:  # a name too long for the file system, a NUL byte, ...
        project.diags.error("HC216", f"templates directory '{name}' cannot be used: {_why(e)}", span,
                            "name a directory inside the project")
        return
    if not path.is_relative_to(root):
        project.diags.error("HC216", f"templates directory '{name}' is outside the project", span,
                            "keep template overrides inside the project directory")
    elif not is_dir:
        project.diags.error("HC216", f"templates directory '{name}' does not exist", span,
                            "create it with overrides named like harnessc/templates (task.md.j2, ...), or remove the key")
    elif (link := _first_link(root, name)) is not None:
        project.diags.error("HC216", f"templates directory '{name}' holds a symbolic link: {link}", span,
                            "template files are read without following links: put the file itself there")


def _check_replay_agents(project: Project) -> None:
    """A `replay` agent's `cassette:` names a directory inside the project, as the runtime
    reads it: relative, without `..`, through no link (a missing one is a warning: every
    task on that agent would fail until the cassettes are there)."""
    marks = project.config_marks
    if marks is None:
        return
    root = project.root.resolve()
    for name, agent in project.config.agents.items():
        if agent.provider != "replay" or not agent.cassette:
            continue
        directory = str(agent.cassette)
        span = marks.value(("agents", name, "cassette"))
        rel = Path(directory)
        try:
            outside = rel.is_absolute() or not (root / rel).resolve().is_relative_to(root)
            exists = (root / rel).is_dir()
        except (OSError, ValueError) as e:  # a name too long for the file system, a NUL byte, ...
            project.diags.error("HC219", f"agent '{name}': cassette directory '{directory}' cannot be used: "
                                f"{_why(e)}", span, "name a directory inside the project, e.g. tests/cassettes")
            continue
        if outside:
            project.diags.error("HC219", f"agent '{name}': cassette directory '{directory}' is outside the project",
                                span, "a relative path without `..`, e.g. tests/cassettes")
        elif ".." in rel.parts:
            project.diags.error("HC219", f"agent '{name}': cassette directory '{directory}' goes through `..`",
                                span, f"write it without `..`: {(root / rel).resolve().relative_to(root).as_posix()}")
        elif (link := _first_link(root, directory)) is not None:
            project.diags.error("HC219", f"agent '{name}': cassette directory '{directory}' holds a symbolic "
                                f"link: {link}", span, "cassettes are read without following links: put the files there")
        elif not exists:
            project.diags.warning("HC219", f"agent '{name}': cassette directory '{directory}' does not exist",
                                  span, "record with `harnessc run --record` and copy .harness/cassettes/ there")


def _check_telemetry(project: Project) -> None:
    """`telemetry.otlp_endpoint` is an http(s) base URL without credentials (they would be
    written into plan.json)."""
    url = project.config.telemetry.otlp_endpoint
    if not isinstance(url, str) or project.config_marks is None:
        return
    problem = otlp_endpoint_problem(url)
    if problem:
        project.diags.error("HC211", f"telemetry.otlp_endpoint {problem[0]}",
                            project.config_marks.value(("telemetry", "otlp_endpoint")), problem[1])


def _check_notify(project: Project) -> None:
    """HC440-HC444: what the schema cannot say about `notify:` - an event kind that does not
    exist, a webhook that is no http(s) URL, a command that is empty, a notifier that sends
    nothing, a provider's key in its pass_env."""
    marks, written = project.config_marks, project.config.raw().get("notify")
    if marks is None or not isinstance(written, dict):
        return
    where = lambda *loc: marks.value(("notify", *loc))  # noqa: E731
    on = written.get("on", list(NOTIFY_KINDS))
    for i, kind in enumerate(on if isinstance(on, list) else []):
        if isinstance(kind, str) and kind not in NOTIFY_KINDS:
            project.diags.error("HC440", f"notify.on: '{kind}' is no event harnessc notifies of", where("on", i),
                                did_you_mean(kind, NOTIFY_KINDS) or f"use {', '.join(NOTIFY_KINDS)}")
    url = written.get("webhook")
    if isinstance(url, str):
        problem = _webhook_problem(url)
        if problem:
            project.diags.error("HC441", f"notify.webhook {problem[0]}", where("webhook"), problem[1])
    command = written.get("command")
    if isinstance(command, list) and (not command or not str(command[0]).strip()):
        project.diags.error("HC442", "notify.command " + ("is empty" if not command else "has no program"),
                            where("command"), "write the program and its arguments, e.g. [notify-send, harnessc]")
    if not command and not url:
        project.diags.warning("HC443", "notify has neither a command nor a webhook: nothing is sent",
                              marks.key(("notify",)), "add command: [PROGRAM, ARGS...] or webhook: URL")
    elif isinstance(on, list) and not on:
        project.diags.warning("HC443", "notify.on is empty: nothing is sent", where("on"),
                              f"list the events, e.g. [{', '.join(NOTIFY_KINDS)}], or leave `on` out for all")
    if _seconds(written.get("timeout")) == 0:
        project.diags.error("HC443", "notify.timeout is 0: every notification would be killed at once",
                            where("timeout"), "leave it out (10s) or give the time one event may take, e.g. 30s")
    agents = {name: body.get("api_key_env") for name, body in (project.config.raw().get("agents") or {}).items()
              if isinstance(body, dict)}
    keys = providers.provider_key_names() | {k for k in agents.values() if isinstance(k, str)}
    pass_env = written.get("pass_env")
    for i, name in enumerate(pass_env if isinstance(pass_env, list) else []):
        if name in keys:
            project.diags.error("HC444", f"notify.pass_env: {name} holds a provider's key, which a notifier "
                                "never gets", where("pass_env", i), "remove it: a notifier needs no model key")


def _seconds(value) -> float | None:
    """A duration as written, in seconds; None when it is none (the schema says so)."""
    try:
        return None if value is None or isinstance(value, bool) else float(parse_duration(value))
    except (ValueError, TypeError):
        return None


def _webhook_problem(url: str) -> tuple[str, str] | None:
    """(what is wrong, what to write) for `notify.webhook`; None when it can be used."""
    example = "an http:// or https:// URL, e.g. https://hooks.example.com/harnessc"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is no number)
    except ValueError:
        return "is not a URL", example
    if any(c.isspace() for c in url) or parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http:// or https:// URL", example
    if parts.username is not None or parts.password is not None:
        return "holds credentials", ("harness.yaml and plan.json would hold them: use a command notifier that reads "
                                     "them from its environment (notify.pass_env)")
    return None


def _check_executor(project: Project) -> None:
    """HC230: what the schema cannot say about `executor:` - an address Ray cannot use, Ray's
    own resource names, credentials in clone_url (plan.json would hold them), settings that
    `kind: local` ignores (a warning)."""
    marks, executor = project.config_marks, project.config.executor
    if marks is None or isinstance(executor, str) or project.executor_broken:
        return
    written = executor.raw()
    if executor.kind == "local":
        ignored = [key for key in written if key != "kind"]
        if ignored:
            project.diags.warning("HC230", f"executor.{ignored[0]} does nothing with kind: local",
                                  marks.key(("executor", ignored[0])), "set kind: ray to run on a Ray cluster, "
                                  "or remove the Ray settings")
        return
    address = executor.address
    if isinstance(address, str):
        try:
            ray_address(address)
        except ValueError as e:
            project.diags.error("HC230", f"executor.address '{address}' {e}", marks.value(("executor", "address")),
                                f"write {RAY_ADDRESS_FORMS}; or remove it to start a local cluster for each run")
    for name in written.get("resources") or {}:
        if name in RAY_RESERVED_RESOURCES:
            project.diags.error("HC230", f"executor.resources: '{name}' is one of Ray's own resources, not a custom one",
                                marks.key(("executor", "resources", name)),
                                "set num_cpus_per_attempt for CPUs" if name == "CPU" else
                                "name a custom resource the nodes offer (ray start --resources='{\"gpu_box\": 1}')")
        elif 0 < written["resources"][name] < MIN_RESOURCE:
            project.diags.error("HC230", f"executor.resources: the amount of {name} is finer than Ray's "
                                f"precision ({MIN_RESOURCE})", marks.value(("executor", "resources", name)),
                                f"use {MIN_RESOURCE} or more")
    url = executor.clone_url
    if isinstance(url, str):
        problem = clone_url_problem(url)
        if problem:
            project.diags.error("HC230", f"executor.clone_url {problem[0]}", marks.value(("executor", "clone_url")),
                                problem[1])


def _why(e: Exception) -> str:
    return getattr(e, "strerror", None) or str(e)


def _first_link(root: Path, name: str) -> str | None:
    """The first symbolic link (by name) at or below root/name, the directory itself and the
    directories leading to it included, without following any; None when there is none."""
    here = root
    for part in Path(name).parts:
        here = here / part
        if here.is_symlink():
            return here.relative_to(root).as_posix()
    for directory, subdirs, files in os.walk(root / name):  # os.walk never enters linked directories
        subdirs.sort()
        for entry in sorted(subdirs + files):
            if os.path.islink(os.path.join(directory, entry)):
                return Path(directory, entry).relative_to(root).as_posix()
    return None


def _check_routing_names(project: Project) -> None:
    """Agent names used inside harness.yaml (routing, the loop's mutation and summary agents,
    memory's summary agent)
    must exist: defined under `agents:`, or the built-in `rehearsal`."""
    marks, cfg = project.config_marks, project.config
    if marks is None:
        return
    names = list(cfg.agents)
    uses = [(("routing", "default"), cfg.routing.default)]
    uses += [(("routing", "by_complexity", k), v) for k, v in cfg.routing.by_complexity.items()]
    uses += [(("routing", "escalation", i), v) for i, v in enumerate(cfg.routing.escalation)]
    uses = [(loc, name) for loc, name in uses if name != "auto"]  # the router chooses
    uses += [(("loop", "recovery", "mutation_agent"), cfg.loop.recovery.mutation_agent),
             (("loop", "context", "summary_agent"), cfg.loop.context.summary_agent)]
    uses.append((("memory", "agent"), getattr(cfg.memory, "agent", None)))  # "off": none
    for loc, name in uses:
        if name is not None and not project.defines_agent(name):
            fallback = (f"agents defined: {', '.join(names)}" if loc[0] == "routing" else
                        f"name an agent defined under agents: ({', '.join(names)}), or remove the key "
                        "for the deterministic text")
            project.diags.error("HC403", f"unknown agent '{name}'", marks.value(loc),
                                did_you_mean(name, names) or fallback)


@lru_cache(maxsize=1)
def builtin_contract_data() -> dict[str, dict]:
    """The built-in contract library (builtin_library.py: read from its JSON copy), once per
    process; callers copy what they change."""
    from .builtin_library import copy_data

    return copy_data()["contracts"]


def load_contracts(project: Project) -> None:
    """contracts.yaml + the built-in library, with `extends` applied."""
    builtins = builtin_contract_data()
    project.builtin_names = set(builtins)
    bodies: dict[str, dict] = {name: copy.deepcopy(body) for name, body in builtins.items()}
    text = project.sources.get(CONTRACTS)
    if text is not None:
        data, marks = load_yaml(text, CONTRACTS, project.diags)
        project.contracts_unreadable = data is None and text.strip() != ""
        if data is not None:
            written = data.get("contracts") if isinstance(data, dict) else None
            if check_spec("contracts", data, marks, project.diags, CONTRACTS) is None:
                data = _salvage("contracts", data, depth=4) if isinstance(data, dict) else {}
                project.broken_contracts = _cut_entries(written, data.get("contracts"))
                # a contract cut out whole was reported already; its name still resolves
                for name in project.broken_contracts:
                    data.setdefault("contracts", {}).setdefault(name, {})
            for name, body in (data.get("contracts") or {}).items():
                bodies[name] = body if isinstance(body, dict) else {}
                project.contract_marks[name] = marks
                project.contract_paths[name] = ("contracts", name)
    v = validator("contracts")
    schema = v.root["definitions"]["Contract"]
    for name in bodies:
        project.contracts[name] = SpecView(_resolve_extends(project, name, bodies, ()), schema, v)


def _resolve_extends(project: Project, name: str, bodies: dict[str, dict], seen: tuple) -> dict:
    body = bodies[name]
    base_name = body.get("extends")
    if not base_name:
        return body
    own = {k: val for k, val in body.items() if k != "extends"}
    marks = project.contract_marks.get(name)
    span = marks.value(project.contract_paths[name] + ("extends",)) if marks else Span(CONTRACTS, 1, 1)
    if base_name in seen or base_name == name:
        chain = " -> ".join((*seen, name, base_name))
        project.diags.error("HC214", f"contracts extend each other in a cycle: {chain}", span,
                            "break the cycle: one of them must stand alone")
        return own
    if base_name not in bodies:
        project.diags.error("HC214", f"contract '{name}' extends unknown contract '{base_name}'", span,
                            did_you_mean(base_name, bodies) or "define it in contracts.yaml or use a built-in")
        return own
    merged = dict(_resolve_extends(project, base_name, bodies, seen + (name,)))
    if own.get("output") and merged.get("output"):
        own["output"] = {**merged["output"], **own["output"]}
    merged.update(own)
    return merged


def to_models(project: Project) -> None:
    """Build pass: the checked views become the pydantic IR that plan.py works with."""
    from pydantic import ValidationError

    from .ir import Contract, HarnessConfig

    try:
        project.config = HarnessConfig.model_validate(raw(project.config))
    except ValidationError as e:  # the schema and the model disagree: a bug, said plainly
        project.diags.error("HC211", f"harness.yaml: {e.errors()[0]['msg']}", Span(HARNESS, 1, 1))
    models = {}
    for name, view in project.contracts.items():
        try:
            models[name] = Contract.model_validate(raw(view))
        except ValidationError as e:
            project.diags.error("HC211", f"contract '{name}': {e.errors()[0]['msg']}", Span(CONTRACTS, 1, 1))
    project.contracts = models
