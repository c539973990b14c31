"""`harnessc doctor`: can every agent be used, before a long run finds out.

Runs the pre-flight checks of `run` (preflight.py: key, SDK, executable, cassettes) and
slower ones: each `base_url` reachable (a TCP connect to its host and port, nothing sent),
each coding CLI's `--version`, and, when some task commits (`git: commit`), that the project
is a git repository with an identity to commit as. Calls no agent.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .. import providers
from ..compiler.argv import split_command
from ..planfile import Plan
from ..workspace import Workspace
from .worktree import gitcmd
from .children import procs
from .preflight import RECORD_HINT, Check, Usability, agent_checks, agent_config, check_run, executable
from .routing.router import Router

CONNECT_TIMEOUT = 2.0  # seconds for a base_url's TCP connect
VERSION_TIMEOUT = 10.0  # seconds for `<cli> --version` (and the git identity)
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass
class AgentReport:
    agent: str
    provider: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def verdict(self) -> str:
        return "ok" if self.ok else "unusable"


@dataclass
class Report:
    agents: list[AgentReport]
    git: list[Check] = field(default_factory=list)  # [] when no task commits
    stranded: dict[str, list[str]] = field(default_factory=dict)  # task -> its route, none usable

    @property
    def problems(self) -> int:
        return sum(not c.ok for a in self.agents for c in a.checks) + sum(not c.ok for c in self.git)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.stranded

    def to_json(self) -> dict:
        return {"ok": self.ok,
                "agents": [{"agent": a.agent, "provider": a.provider, "verdict": a.verdict,
                            "checks": [_check_json(c) for c in a.checks]} for a in self.agents],
                "git": [_check_json(c) for c in self.git],
                "refused_tasks": self.stranded}


def _check_json(c: Check) -> dict:
    return {"check": c.what, "ok": c.ok, "detail": c.detail}


def diagnose(root: Path, plan: Plan) -> Report:
    """Every agent of the plan checked, the git identity when a task commits."""
    return asyncio.run(_diagnose(root, plan))


async def _diagnose(root: Path, plan: Plan) -> Report:
    workspace = Workspace(root)
    router = Router(plan.agents)
    todo = [n for n in plan.nodes if not n.done]
    routes = {n.id: router.chain(n) for n in todo}
    names = list(dict.fromkeys([*plan.agents, *(a for r in routes.values() for a in r)]))
    reports = await asyncio.gather(*(_agent(root, workspace, name, agent_config(plan.agents, name) or {},
                                            [t for t, r in routes.items() if name in r])
                                     for name in names))
    git = await _git_checks(root) if any(n.git == "commit" for n in todo) else []
    stranded = check_run(plan, router, [n.id for n in todo], Usability(plan.agents, workspace)).stranded
    return Report(list(reports), git, stranded)


async def _agent(root: Path, workspace: Workspace, name: str, config: dict, tasks: list[str]) -> AgentReport:
    provider = config.get("provider") or "?"
    if not config:
        return AgentReport(name, provider, [Check("defined", False, f"agent '{name}' is not defined in harness.yaml")])
    checks = [_with_sdk_version(c, provider) for c in agent_checks(config, root)]
    unit = providers.get(provider)
    slow = []
    if unit is not None and unit.cli and all(c.ok for c in checks if c.what == "executable"):
        slow.append(_version(root, config))
    if config.get("base_url"):
        slow.append(_reachable(config["base_url"]))
    checks += await asyncio.gather(*slow)
    if provider == "replay" and all(c.ok for c in checks):
        checks.append(_cassettes(workspace, name, config, tasks))
    return AgentReport(name, provider, checks)


def _with_sdk_version(check: Check, provider: str) -> Check:
    """An installed SDK's check says which version is installed."""
    if check.what != "sdk" or not check.ok:
        return check
    sdk = providers.get(provider).sdk
    try:
        return Check("sdk", True, f"{sdk} {importlib.metadata.version(sdk)} is installed")
    except importlib.metadata.PackageNotFoundError:  # importable, but not an installed distribution
        return check


def _cassettes(workspace: Workspace, name: str, config: dict, tasks: list[str]) -> Check:
    """A replay agent: the cassette of every task it may serve is there."""
    usability = Usability({name: config}, workspace)
    missing = [t for t in tasks if usability.missing_cassette(name, t)]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        return Check("cassettes", False, f"no cassette for {shown} ({RECORD_HINT})")
    return Check("cassettes", True, f"a cassette for each of its {len(tasks)} task(s)" if tasks
                 else "no task routes to it")


async def _version(root: Path, config: dict) -> Check:
    """`<cli> --version` in the agent's restricted environment, with a timeout."""
    argv = split_command(config["command"]) if config.get("command") else [executable(config)]
    res = await procs.run([*argv, "--version"], cwd=root, timeout=VERSION_TIMEOUT,
                          env=procs.child_env(config.get("pass_env") or (), config.get("env")))
    first = _first_line(res.stdout) or _first_line(res.stderr)
    if res.ok:
        return Check("version", True, first or f"{argv[0]} --version printed nothing")
    return Check("version", False, f"`{' '.join([*argv, '--version'])}` failed: {res.describe()}"
                 + (f": {first}" if first and not res.timed_out else ""))


def _first_line(text: str, width: int = 80) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[:width - 3] + "..."


async def _reachable(base_url: str) -> Check:
    """A TCP connect to base_url's host and port: no request, no key sent."""
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError as e:  # a port that is not a number
        return Check("base_url", False, f"base_url {base_url!r} is not a URL ({e})")
    if not host or not port:
        return Check("base_url", False, f"base_url {base_url!r} is not an http(s) URL with a host")
    where = f"{host}:{port}"
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT)
    except asyncio.TimeoutError:
        return Check("base_url", False, f"{where} is unreachable (no answer within {CONNECT_TIMEOUT:g}s)")
    except socket.gaierror:
        return Check("base_url", False, f"{where} is unreachable (unknown host)")
    except OSError as e:  # asyncio words it "Connect call failed": say what the errno says
        why = os.strerror(e.errno) if e.errno else str(e)
        return Check("base_url", False, f"{where} is unreachable ({why[:1].lower() + why[1:]})")
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return Check("base_url", True, f"{where} is reachable")


async def _git_checks(root: Path) -> list[Check]:
    """A run commits each succeeded `git: commit` task: the project must be a repository, and
    git must know whom to commit as."""
    if not (root / ".git").exists():
        return [Check("repository", False, "the project is not a git repository "
                      "(a `git: commit` task needs one: run `git init`)")]
    git = gitcmd.Git(root)  # the argv and environment of the run's own git (no hook, no key)
    res = await procs.run(git.argv("var", "GIT_COMMITTER_IDENT"), cwd=root, timeout=VERSION_TIMEOUT, env=git.env())
    if res.error:
        return [Check("identity", False, "git is not on PATH" if "not found" in res.error else res.error)]
    if not res.ok:
        return [Check("identity", False, "git does not know whom to commit as: set `git config user.name` "
                      "and `git config user.email`")]
    ident = res.stdout.strip().rsplit(" ", 2)[0]  # "Name <email> 1700000000 +0000"
    return [Check("identity", True, f"commits as {ident}")]
