"""`harnessc doctor`: can every agent be used, before a long run finds out.

Runs the pre-flight checks of `run` (preflight.py: key, SDK, executable, cassettes) and
slower ones: each `base_url` reachable (a TCP connect to its host and port, nothing sent),
each coding CLI's `--version`, and, when some task commits (`git: commit`), that the project
is a git repository with an identity to commit as, and whether harnessc's sandbox
(bubblewrap) can start here. With the ray executor: Ray importable and
its version, the cluster's address reachable, and on each alive node git and the agents'
executables (check_workers). Calls no agent.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .. import __version__, gitcmd, providers
from ..planfile import Plan
from ..providers import AgentConfig, CliConfig
from ..vocab import ray_address
from ..workspace import Workspace
from .agents import anthropic_api
from .agents.cli import CodexAgent
from .children import procs, sandbox
from .executor import ExecutorError
from .executor.rayconfig import ExecutorSettings, auto_address, pinned_to, require_ray
from .preflight import RECORD_HINT, Check, Usability, agent_checks, check_run, config_of, executable
from .routing.router import Router

CONNECT_TIMEOUT = 2.0  # seconds for a base_url's (or a Ray address's) TCP connect
WORKERS_TIMEOUT = 60.0  # seconds for every node's answer to check_workers
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
    executor: list[Check] = field(default_factory=list)  # [] with the local executor
    # whether harnessc's sandbox can start here (a problem only for an agent asking for it:
    # that agent's own checks say so); `asked`: some agent of the plan asks for it
    sandbox: Check | None = None
    asked: bool = False
    programs: dict[str, list[str]] = field(default_factory=dict)  # task -> its checks that cannot start
    files: list[Check] = field(default_factory=list)  # a command agent's file isolated tasks lack

    @property
    def problems(self) -> int:
        return (sum(not c.ok for a in self.agents for c in a.checks) + sum(not c.ok for c in self.git)
                + sum(not c.ok for c in self.executor) + sum(not c.ok for c in self.files))

    @property
    def ok(self) -> bool:
        return not self.problems and not self.stranded and not self.programs

    def to_json(self) -> dict:
        return {"ok": self.ok,
                "agents": [{"agent": a.agent, "provider": a.provider, "verdict": a.verdict,
                            "checks": [_check_json(c) for c in a.checks]} for a in self.agents],
                "git": [_check_json(c) for c in self.git],
                "executor": [_check_json(c) for c in self.executor],
                "sandbox": _check_json(self.sandbox) if self.sandbox else None,
                "refused_tasks": self.stranded,
                "missing_programs": self.programs,
                "worktree_files": [_check_json(c) for c in self.files]}


def _check_json(c: Check) -> dict:
    return {"check": c.what, "ok": c.ok, "detail": c.detail}


def diagnose(root: Path, plan: Plan, executor: ExecutorSettings | None = None) -> Report:
    """Every agent of the plan checked, the git identity when a task commits, the Ray cluster
    when `executor` (the run's settings, rayconfig.resolve_executor) says ray."""
    return asyncio.run(_diagnose(root, plan, executor))


async def _diagnose(root: Path, plan: Plan, executor: ExecutorSettings | None = None) -> Report:
    workspace = Workspace(root)
    router = Router(plan.agents)
    todo = [n for n in plan.nodes if not n.done]
    routes = {n.id: router.chain(n) for n in todo}
    names = list(dict.fromkeys([*plan.agents, *(a for r in routes.values() for a in r)]))
    reports = await asyncio.gather(*(_agent(root, workspace, name, config_of(plan.agents, name),
                                            [t for t, r in routes.items() if name in r])
                                     for name in names))
    git = await _git_checks(root) if any(n.git == "commit" for n in todo) else []
    checked = check_run(plan, router, [n.id for n in todo], Usability(plan.agents, workspace))
    cluster = await _executor_checks(executor, plan) if executor is not None else []
    asked = any(getattr(config, "sandbox", False) for config in plan.agents.values())
    files = _worktree_files(root, plan, [n for n in todo if _isolated(n, executor)], routes)
    return Report(list(reports), git, checked.stranded, cluster, sandbox_check(), asked, checked.programs, files)


def _isolated(node, executor: ExecutorSettings | None) -> bool:
    """Whether the task's attempts work in a worktree (or a Ray worker's checkout)."""
    several = bool(node.approaches and (node.approaches.n > 1 or node.approaches.score))
    return executor is not None or node.isolation == "worktree" or several


def _worktree_files(root: Path, plan: Plan, isolated: list, routes: dict[str, list[str]]) -> list[Check]:
    """The files of the project a command agent of an isolated task runs (`python agent.py`)
    that a worktree will not have (untracked) or has another version of (modified)."""
    from ..gitrepo import IsolationError, open_repo
    from .plan import program_files, uncommitted

    agents = sorted({a for n in isolated for a in routes.get(n.id, [])})
    brought = [p.rstrip("/") for key in ("link", "copy") for p in (plan.worktrees or {}).get(key) or []]
    named: dict[str, list[str]] = {}
    for name in agents:
        config = plan.agents.get(name)
        if config is None or config.provider != "command" or not getattr(config, "command", None):
            continue
        for path in program_files(list(config.command), root):
            if not any(path == b or path.startswith(b + "/") for b in brought):
                named.setdefault(path, []).append(name)
    if not named:
        return []
    try:
        repo = open_repo(root)
    except IsolationError:
        return []  # run says why it cannot isolate
    status = uncommitted(repo, sorted(named)) or {}
    return [Check("worktree", False, f"agent {', '.join(named[p])} runs '{p}', which is {kind}: an isolated "
                  "task's worktree " + ("will not have it, and every call there fails" if kind == "untracked"
                                        else "has the committed version")
                  + " (commit it, or list it under harness.yaml `worktrees: link`)")
            for p, kind in sorted(status.items())]


def sandbox_check() -> Check:
    """Whether harnessc's sandbox (bubblewrap) can start on this machine."""
    why = sandbox.problem()
    if why is None:
        return Check("sandbox", True, f"available (bubblewrap {sandbox.bwrap_path()}): agents with "
                     "`sandbox: true` run under it")
    return Check("sandbox", False, f"not available: {why} ({sandbox.HINT}); agents with `sandbox: true` are refused")


async def _agent(root: Path, workspace: Workspace, name: str, config: AgentConfig | None,
                 tasks: list[str]) -> AgentReport:
    if config is None:
        return AgentReport(name, "?", [Check("defined", False, f"agent '{name}' is not defined in harness.yaml")])
    provider = config.provider
    checks = [_with_sdk_version(c, provider) for c in agent_checks(config, root)]
    slow = []
    if isinstance(config, CliConfig) and all(c.ok for c in checks if c.what == "executable"):
        slow.append(_version(root, config))
    if config.base_url:
        slow.append(_reachable(config.base_url))
    checks += await asyncio.gather(*slow)
    if provider == "codex" and all(c.ok for c in checks if c.what == "executable"):
        why = CodexAgent(name, config, root).own_sandbox_problem()
        if why:
            checks.append(Check("sandbox", False, why))
    checks += _model_deprecated(config, checks)
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


def _model_deprecated(config: AgentConfig, checks: list[Check]) -> list[Check]:
    """An anthropic agent whose model the installed SDK calls deprecated: said (not a problem,
    the model still answers until its end-of-life)."""
    sdk_ok = any(c.what == "sdk" and c.ok for c in checks)
    if config.provider != "anthropic" or not config.model or not sdk_ok:
        return []
    date = anthropic_api.end_of_life(config.model)
    if date is None:
        return []
    return [Check("model", True, f"model '{config.model}' is deprecated and reaches end-of-life on {date} "
                                 f"(the anthropic SDK says so): pick a newer model")]


def _cassettes(workspace: Workspace, name: str, config: AgentConfig, tasks: list[str]) -> Check:
    """A replay agent: the cassette of every task it may serve is there."""
    usability = Usability({name: config}, workspace)
    missing = [t for t in tasks if usability.missing_cassette(name, t)]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        return Check("cassettes", False, f"no cassette for {shown} ({RECORD_HINT})")
    return Check("cassettes", True, f"a cassette for each of its {len(tasks)} task(s)" if tasks
                 else "no task routes to it")


async def _version(root: Path, config: CliConfig) -> Check:
    """`<cli> --version` in the agent's restricted environment, with a timeout."""
    argv = list(config.command) if config.command else [executable(config)]
    res = await procs.run([*argv, "--version"], cwd=root, timeout=VERSION_TIMEOUT,
                          env=procs.child_env(config.pass_env, config.env))
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
    return await _connect("base_url", host, port)


async def _connect(what: str, host: str, port: int, label: str = "") -> Check:
    """Check `what`: a TCP connect to host:port, nothing sent."""
    where = label or (f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT)
    except asyncio.TimeoutError:
        return Check(what, False, f"{where} is unreachable (no answer within {CONNECT_TIMEOUT:g}s)")
    except socket.gaierror:
        return Check(what, False, f"{where} is unreachable (unknown host)")
    except OSError as e:  # asyncio words it "Connect call failed": say what the errno says
        why = os.strerror(e.errno) if e.errno else str(e)
        return Check(what, False, f"{where} is unreachable ({why[:1].lower() + why[1:]})")
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return Check(what, True, f"{where} is reachable")


# ------------------------------------------------------------------ the ray executor


async def _executor_checks(settings: ExecutorSettings, plan: Plan) -> list[Check]:
    """Ray importable (and its version), the address reachable, then each node's tools."""
    try:
        ray = require_ray()
    except ExecutorError as e:
        return [Check("ray", False, e.message)]
    checks = [Check("ray", True, f"ray {ray.__version__} is installed")]
    if settings.address is None:
        checks.append(Check("address", True, "none: each run starts a Ray cluster on this machine "
                                             "(the agent checks above are its worker's)"))
        return checks
    address = await _address_check(settings.address)
    checks.append(address)
    if address.ok:
        checks += await asyncio.to_thread(check_workers, ray, settings, plan)
    return checks


async def _address_check(address: str) -> Check:
    """The cluster's address answers: a TCP connect to the GCS port (HOST:PORT), the Ray
    Client port (ray://HOST:PORT, 10001 by default), or the cluster `auto` finds."""
    label = address
    try:
        form, host, port = ray_address(address)
    except ValueError as e:
        return Check("address", False, f"address '{address}' {e}")
    if form == "auto":
        found = auto_address()
        if found is None:
            return Check("address", False, "auto: no Ray cluster runs on this machine (start one with "
                                           "`ray start --head`, or name its address)")
        form, host, port = ray_address(found)
        label = f"auto ({found})"
    return await _connect("address", host, port, label if form == "gcs" and label != address else "")


def check_workers(ray, settings: ExecutorSettings, plan: Plan) -> list[Check]:
    """One check per alive node of the cluster at settings.address, naming it: git and the
    executables of the agents that run on the workers (command and CLI agents; API agents'
    SDKs too with `placement: all`), found by a tiny Ray task pinned to the node. Nothing of
    the agents' configuration but executable and module names leaves the driver."""
    import logging

    tools, sdks = _worker_needs(plan, settings.placement)

    def probe(tools: dict[str, str], sdks: dict[str, str]) -> dict:  # a closure: pickled by value,
        import importlib.util  # lazy: run on a worker, which needs no harnessc
        import shutil  # lazy: the same

        try:  # the attempt's function is imported there: the driver's harnessc is needed
            import harnessc

            version = harnessc.__version__
        except ImportError:
            version = None
        return {"harnessc": version,
                "missing": sorted(name for name, exe in tools.items() if shutil.which(exe) is None),
                "missing_sdks": sorted(name for name, module in sdks.items()
                                       if importlib.util.find_spec(module) is None)}

    try:
        ray.init(address=settings.address, logging_level=logging.ERROR, log_to_driver=False)
    except Exception as e:  # a version mismatch, a refused connection: Ray's words, first line
        return [Check("cluster", False, f"cannot connect to {settings.address}: {_first_line(str(e), 200)}")]
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        remote = ray.remote(num_cpus=0, max_retries=0)(probe)
        refs = [remote.options(scheduling_strategy=pinned_to(n["NodeID"])).remote(tools, sdks) for n in nodes]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=WORKERS_TIMEOUT) if refs else ([], [])
        checks = []
        for node, ref in zip(nodes, refs):
            name = f"node {node.get('NodeName') or node.get('NodeManagerAddress')} ({node['NodeID'][:8]})"
            if ref not in ready:
                checks.append(Check("worker", False, f"{name} did not answer within {WORKERS_TIMEOUT:g}s"))
                ray.cancel(ref, force=True)
                continue
            try:
                found = ray.get(ref)
            except Exception as e:
                checks.append(Check("worker", False, f"{name}: the check failed: {_first_line(str(e), 200)}"))
                continue
            checks.append(_worker_check(name, found, tools, sdks))
        return checks or [Check("cluster", False, "the cluster has no alive node")]
    finally:
        ray.shutdown()


def _worker_needs(plan: Plan, placement: str) -> tuple[dict[str, str], dict[str, str]]:
    """What an attempt needs on a worker: {what: executable} (git, each command or CLI agent's
    program) and, with placement all, {agent: SDK module} for the API agents."""
    tools = {"git": "git"}
    sdks: dict[str, str] = {}
    for name, config in sorted(plan.agents.items()):
        unit = providers.get(config.provider)
        exe = executable(config)
        if exe and ("/" not in exe or os.path.isabs(exe)):  # ./bin/agent: in the checkout, not on PATH
            tools[f"agent {name}"] = exe
        elif unit.sdk and placement == "all":
            sdks[f"agent {name}"] = unit.sdk
    return tools, sdks


def _worker_check(name: str, found: dict, tools: dict[str, str], sdks: dict[str, str]) -> Check:
    theirs = found.get("harnessc")
    missing = [] if theirs else [f"harnessc {__version__} (pip install 'harnessc[ray]' in the Python Ray runs)"]
    missing += [f"{tools[what]} ({what})" if what != "git" else "git" for what in found["missing"]]
    missing += [f"the {sdks[what]} SDK ({what})" for what in found["missing_sdks"]]
    problems = [f"harnessc {theirs} on it, this one is {__version__} (install the same version on every node)"
                ] if theirs and theirs != __version__ else []
    problems += [f"no {', no '.join(missing)} on it"] if missing else []
    if problems:
        return Check("worker", False, f"{name}: {'; '.join(problems)}")
    has = ", ".join(dict.fromkeys(tools.values()))
    return Check("worker", True, f"{name}: harnessc {theirs}, {has} found" + (", SDKs importable" if sdks else ""))


async def _git_checks(root: Path) -> list[Check]:
    """A run commits each succeeded `git: commit` task: the project must be a repository, and
    git must know whom to commit as."""
    if not (root / ".git").exists():
        return [Check("repository", False, "the project is not a git repository "
                      "(a `git: commit` task needs one: run `git init`)")]
    # the argv and environment of the run's own git (no hook, no key; the identity read as a run reads it)
    try:
        place = gitcmd.locate(root)
    except gitcmd.GitFailed as e:
        return [Check("identity", False, "git is not on PATH" if e.returncode is None else
                      f"git cannot read the repository: {e.stderr.strip()[:200]}")]
    git = gitcmd.Git(place.top, git_dir=place.git_dir, ident=gitcmd.identity(place.git_dir))
    res = await procs.run(git.argv("var", "GIT_COMMITTER_IDENT"), cwd=root, timeout=VERSION_TIMEOUT, env=git.env())
    if res.error:
        return [Check("identity", False, "git is not on PATH" if "not found" in res.error else res.error)]
    if not res.ok:
        return [Check("identity", False, "git does not know whom to commit as: set `git config user.name` "
                      "and `git config user.email`")]
    ident = res.stdout.strip().rsplit(" ", 2)[0]  # "Name <email> 1700000000 +0000"
    return [Check("identity", True, f"commits as {ident}")]
