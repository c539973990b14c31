"""Pre-flight: what can be known about an agent before its first call (`run` and `doctor`).

An agent is unusable when the variable holding its key is unset, its SDK is not installed,
its executable is not on PATH, or - replay, and every agent of `run --replay` - the task's
cassette is missing. The checks are cheap (os.environ, importlib.util.find_spec,
shutil.which, a stat) and import no SDK.

`run` refuses to start when a task it would run has only unusable agents on its route (one
line per problem, nothing called, nothing charged); otherwise the router passes the
unusable agents over (`Router.unusable`) and the run says so in one warning line.
`harnessc doctor` (runtime/doctor.py) runs the same checks and slower ones.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from .. import providers
from ..argv import split_command
from ..planfile import Plan, PlanNode
from ..providers import AgentConfig, ProgramConfig, ReplayConfig
from ..workspace import Workspace
from .children import sandbox
from .routing.router import REHEARSAL, Router

SDK_HINT = "pip install 'harnessc[llm]'"
RECORD_HINT = "record it with `harnessc run --record`"


@dataclass(frozen=True)
class Check:
    """One thing checked about an agent: what, whether it passed, and what was found."""

    what: str  # key | sdk | executable | sandbox | cassettes | version | base_url
    ok: bool
    detail: str


REHEARSAL_CONFIG = providers.agent_config(REHEARSAL, {"provider": "simulate"})


def config_of(agents: Mapping[str, AgentConfig], name: str) -> AgentConfig | None:
    """An agent's settings; the built-in rehearsal agent's when it is not defined."""
    if name in agents:
        return agents[name]
    return REHEARSAL_CONFIG if name == REHEARSAL else None


def executable(config: AgentConfig) -> str | None:
    """The program a command or CLI agent runs (its argv[0]); None for other providers."""
    if not isinstance(config, ProgramConfig):
        return None
    if config.command:
        return config.command[0]
    unit = providers.get(config.provider)
    if unit.cli:  # the CLI's own executable (claude, codex, gemini), as its agent class names it
        return unit.agent_factory().executable
    return None


def find_executable(program: str, config: ProgramConfig, root: Path) -> str | None:
    """Where `program` is found as the agent would run it: on the PATH its environment gets
    (`env: {PATH: ...}` wins), or, as a path, from the project directory it runs in."""
    if os.sep in program:
        path = Path(program) if os.path.isabs(program) else root / program
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    search = config.env.get("PATH", os.environ.get("PATH", os.defpath))
    return shutil.which(program, path=search)


def agent_checks(config: AgentConfig, root: Path, replaying: bool = False,
                 remote_programs: bool = False) -> list[Check]:
    """The cheap checks of one agent, whatever task it serves (`run --replay` needs no key,
    SDK or program: every call is answered from the cassettes). `remote_programs`: program
    agents run on Ray workers (executor ray), so this machine's PATH does not say; a worker
    without the program fails its attempt naming the node."""
    unit = providers.get(config.provider)
    if replaying or unit.name == "replay":
        return cassette_dir_checks(config)
    checks = []
    env = config.api_key_env
    if env:
        ok = bool(os.environ.get(env))
        checks.append(Check("key", ok, f"{env} is {'set' if ok else 'not set'}"))
    if unit.sdk:
        ok = importlib.util.find_spec(unit.sdk) is not None
        checks.append(Check("sdk", ok, f"the {unit.sdk} SDK is installed" if ok
                            else f"the {unit.sdk} SDK is not installed ({SDK_HINT})"))
    if isinstance(config, ProgramConfig) and config.sandbox and not remote_programs:
        why = sandbox.problem()  # never run without it: refused, not passed through unconfined
        checks.append(Check("sandbox", why is None, "bubblewrap can sandbox it" if why is None
                            else f"it asks for the sandbox, and {why} ({sandbox.HINT})"))
    program = None if remote_programs else executable(config)
    if program:
        found = find_executable(program, config, root)
        if found:
            checks.append(Check("executable", True, f"{program} is an executable file" if os.sep in program
                                else f"{program} is {found}"))
        else:
            checks.append(Check("executable", False, f"'{program}' is not an executable file" if os.sep in program
                                else f"'{program}' is not on PATH"))
    return checks


def cassette_dir_checks(config: AgentConfig) -> list[Check]:
    """A replay agent's `cassette:` directory must be inside the project (as ReplayAgent insists)."""
    directory = config.cassette if isinstance(config, ReplayConfig) else None
    if directory and not _inside(directory):
        return [Check("cassettes", False, f"cassette {directory!r} must be a directory inside the project")]
    return []


def _inside(directory: str) -> bool:
    rel = Path(directory)
    return not (rel.is_absolute() or ".." in rel.parts or "\0" in directory)


def cassette_path(workspace: Workspace, config: AgentConfig, task_id: str) -> Path:
    """The cassette a replayed call of `task_id` is served from (runtime/agents/cassettes.py)."""
    directory = config.cassette if isinstance(config, ReplayConfig) else None
    return workspace.cassette(task_id, workspace.root / directory if directory else None)


class Usability:
    """Which agents can serve which task in this run; the cheap checks, each agent's once."""

    def __init__(self, agents: Mapping[str, AgentConfig], workspace: Workspace, replaying: bool = False,
                 remote_programs: bool = False):
        self.agents, self.workspace, self.replaying = agents, workspace, replaying
        self.remote_programs = remote_programs
        self._problems: dict[str, list[str]] = {}

    def problems(self, agent: str) -> list[str]:
        """Why `agent` cannot serve any task ([] when it can)."""
        if agent not in self._problems:
            config = config_of(self.agents, agent)
            self._problems[agent] = (
                [c.detail for c in agent_checks(config, self.workspace.root, self.replaying, self.remote_programs) if not c.ok]
                if config is not None else [f"agent '{agent}' is not defined in harness.yaml"])
        return self._problems[agent]

    def missing_cassette(self, agent: str, task_id: str) -> str | None:
        """For a replayed agent: why `task_id`'s cassette cannot be served (it is missing)."""
        config = config_of(self.agents, agent)
        if config is None or not (self.replaying or isinstance(config, ReplayConfig)):
            return None
        path = cassette_path(self.workspace, config, task_id)
        return None if path.is_file() else f"{self.workspace.rel(path)} does not exist ({RECORD_HINT})"

    def why(self, agent: str, task_id: str) -> str | None:
        """Why `agent` cannot serve `task_id`, or None when it can."""
        problems = self.problems(agent)
        if problems:
            return "; ".join(problems)
        return self.missing_cassette(agent, task_id)

    def unusable(self, agent: str, task_id: str) -> bool:
        return self.why(agent, task_id) is not None


@dataclass
class RunCheck:
    """What the pre-flight found for the tasks a run would start."""

    stranded: dict[str, list[str]] = field(default_factory=dict)  # task -> its route: nothing usable
    passed_over: dict[str, dict[str, str]] = field(default_factory=dict)  # agent -> {task: why}
    programs: dict[str, list[str]] = field(default_factory=dict)  # task -> its checks that cannot start

    @property
    def refused(self) -> bool:
        return bool(self.stranded or self.programs)

    def problem_lines(self) -> list[str]:
        """One line per problem behind a refusal: an agent and why, with the tasks it strands."""
        lines: dict[tuple[str, str], list[str]] = {}
        for task, route in self.stranded.items():
            for agent in route:
                why = self.passed_over[agent][task]
                lines.setdefault((agent, why), []).append(task)
        out = []
        for (agent, why), tasks in lines.items():
            only = "the only agent" if all(len(self.stranded[t]) == 1 for t in tasks) else "no other usable agent"
            out.append(f"agent '{agent}' cannot be used: {why} ({only} of {_task_list(tasks)})")
        out += [f"task '{task}': {why} (every attempt would fail its check: install it or fix the command)"
                for task, whys in self.programs.items() for why in whys]
        return out

    def warning(self) -> str | None:
        """The one line a run starts with when it passes agents over."""
        if not self.passed_over:
            return None
        parts = []
        for agent, whys in self.passed_over.items():
            reasons = sorted(set(whys.values()))
            parts.append(f"{agent} ({reasons[0]}" + (f"; and {len(reasons) - 1} more" if len(reasons) > 1 else "")
                         + ")")
        return "passing over unusable agents: " + ", ".join(parts) + " (`harnessc doctor` checks the setup)"


def _task_list(tasks: list[str]) -> str:
    shown = ", ".join(f"'{t}'" for t in tasks[:5])
    more = f" and {len(tasks) - 5} more" if len(tasks) > 5 else ""
    return ("task " if len(tasks) == 1 else "tasks ") + shown + more


def check_run(plan: Plan, router: Router, tasks: Iterable[str], usability: Usability) -> RunCheck:
    """The pre-flight of the tasks a run would start, on their routes as `router` builds them."""
    nodes: dict[str, PlanNode] = {n.id: n for n in plan.nodes}
    result = RunCheck()
    for tid in tasks:
        route = router.chain(nodes[tid])
        usable = False
        for agent in route:
            why = usability.why(agent, tid)
            if why is None:
                usable = True
            else:
                result.passed_over.setdefault(agent, {})[tid] = why
        if not usable:
            result.stranded[tid] = route
        missing = missing_programs(nodes[tid])
        if missing:
            result.programs[tid] = missing
    return result


def missing_programs(node: PlanNode) -> list[str]:
    """The task's accept and score commands whose program is a bare name not on PATH
    (`pytset`): each would fail every attempt, after the agent's call. A program named by
    a path (`./check.sh`) is not looked for: an earlier task may make it."""
    commands = [("accept", c) for c in node.accept]
    if node.approaches and node.approaches.score:
        commands.append(("score", node.approaches.score))
    out = []
    for what, cmd in commands:
        try:
            argv = split_command(cmd.argv)
        except ValueError:
            continue  # lint says so (HC105)
        if argv and "/" not in argv[0] and not _on_path(argv[0], os.environ.get("PATH", os.defpath)):
            out.append(f"{what} command `{' '.join(argv)[:80]}` runs '{argv[0]}', which is not on PATH")
    return list(dict.fromkeys(out))


@functools.lru_cache(maxsize=256)
def _on_path(program: str, path: str) -> bool:
    return shutil.which(program, path=path) is not None


class Refused(Exception):
    """`run` will not start: some task it would run has no usable agent."""

    def __init__(self, lines: list[str]):
        super().__init__("; ".join(lines))
        self.lines = lines
