"""The Ray executor, driver side: connect, ship base commits, run attempts remotely, cancel.

The remote boundary is one attempt (remote.run_attempt): the agent's call when it is a
program agent (command, CLI; any agent with `placement: all`), and always the checks of
its answer (contract, accept commands, `score:`). Everything that decides stays here: the
TaskRun asks `RemoteAttempts.call` for the answer and `RemoteAttempts.verdict` for its
verification, and the change the worker returns is applied to the attempt's local
worktree, which commits and lands it exactly as a local isolated task does.

One retry loop: Ray's retries are off (max_retries=0, retry_exceptions=False); a worker or
node that dies raises AttemptLost, and the TaskRun runs the iteration again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import pickle
import socket
import time
from pathlib import Path
from typing import Any

from ... import providers
from ..agents.base import AgentError, Request, Response
from ..agents.command import SubprocessAgent
from ..children.procs import BASE_ENV
from ..loop.returned import ReturnedChange
from ..verify import Verdict
from . import AttemptLost, ExecutorError
from .bundle import ShipError, apply_change, bundle_commit, change_of
from .rayconfig import ExecutorSettings, require_ray
from .remote import pack, run_packed

PROBE_TIMEOUT = 5.0  # seconds an address has to answer before the run refuses to start
CANCEL_GRACE = 5.0  # seconds a cancelled attempt has to kill its processes before force=True
NODES_TTL = 1.0  # seconds a read of the cluster's nodes serves placement checks
LOST_VERIFY_TRIES = 3  # a verification whose worker died runs again up to this many times

# seconds per phase summed over this process's remote calls, the workers' (remote.py) and
# the driver's own ("placeable", "ship", "roundtrip", "apply"); "calls" counts them. bench/ray.py shows it.
PHASES: dict[str, float] = {}


def _count(phases: dict[str, float]) -> None:
    for k, v in phases.items():
        PHASES[k] = PHASES.get(k, 0.0) + v


class RayExecutor:
    """One run's connection to Ray and what it has shipped there."""

    def __init__(self, settings: ExecutorSettings, top: Path, prefix: str, forwarded: dict[str, list[str]],
                 git_dir: Path | None = None):
        self.settings, self.top, self.prefix = settings, Path(top), prefix
        self.git_dir = git_dir  # the user's tree's git directory (gitrepo.py found it once)
        self.forwarded = forwarded  # agent -> the variable names its calls forward
        self.ray: Any = None
        self.owned = False  # we started the cluster (no address): we shut it down
        self.bundles: dict[str, Any] = {}  # base commit -> [ObjectRef of its bundle]
        self._bundling: dict[str, asyncio.Lock] = {}
        self._fns: dict[tuple, Any] = {}
        self._offers: list[dict] = []  # the resources of each alive node, as last read
        self._nodes_at = -math.inf  # when that read began (monotonic)
        self._reading = asyncio.Lock()  # one read at a time: the attempts waiting share it

    # ------------------------------------------------------------------ the run's start and end

    def start(self) -> None:
        """Connect (or start a local cluster); ExecutorError before any task starts."""
        ray = self.ray = require_ray()
        address = self.settings.address or os.environ.get("RAY_ADDRESS") or None
        if address:
            probe(address)
        if ray.is_initialized():
            return  # a caller (tests, an embedding program) connected already: theirs to end
        try:
            if address:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            else:  # "local": a plain ray.init() would join the last `ray start` cluster of this machine
                ray.init(address="local", log_to_driver=False, configure_logging=False, include_dashboard=False)
                self.owned = True
        except Exception as e:  # ConnectionError, RuntimeError("Version mismatch ..."), ValueError
            raise connect_error(address, e) from None
        self.remote = ray.remote(max_retries=0, retry_exceptions=False)(run_packed)

    def close(self) -> None:
        if self.ray is not None and self.owned and self.ray.is_initialized():
            self.ray.shutdown()
        self.owned = False

    def _fn(self, resources: dict) -> Any:
        """The remote function with the attempt's placement (one wrapper per placement)."""
        key = tuple(sorted(resources.items()))
        fn = self._fns.get(key)
        if fn is None:
            if not hasattr(self, "remote"):
                self.remote = self.ray.remote(max_retries=0, retry_exceptions=False)(run_packed)
            fn = self._fns[key] = self.remote.options(num_cpus=self.settings.num_cpus_per_attempt,
                                                       resources=resources or None)
        return fn

    async def source(self, base: str) -> dict:
        """How a worker gets `base`: the configured clone URL, else its bundle (put in the
        object store once per commit)."""
        if self.settings.clone_url:
            return {"url": self.settings.clone_url}
        lock = self._bundling.setdefault(base, asyncio.Lock())
        async with lock:
            if base not in self.bundles:
                data = await asyncio.to_thread(bundle_commit, self.top, base, self.git_dir)
                self.bundles[base] = [self.ray.put(data)]  # in a list: workers fetch it only on a cache miss
        return {"bundle": self.bundles[base]}

    def attempts(self, run: Any) -> "RemoteAttempts":
        return RemoteAttempts(self, run)

    # ------------------------------------------------------------------ one remote call

    async def unplaceable(self, resources: dict) -> str | None:
        """Why no alive node can run an attempt asking for `resources` (Ray would queue it
        for ever), or None. The cluster's nodes are read at most every NODES_TTL seconds
        (a read costs the driver and the GCS ~3 ms), again before an attempt is refused (a
        node may have joined) and after a worker was lost (a node may have gone)."""
        need = {"CPU": self.settings.num_cpus_per_attempt, **resources}
        asked = time.monotonic()
        await self._read_nodes(since=asked - NODES_TTL)
        why = no_node_offers(need, self._offers)
        if why:
            await self._read_nodes(since=asked)
            why = no_node_offers(need, self._offers)
        return why

    async def _read_nodes(self, since: float) -> None:
        """Read the alive nodes' resources, unless a read that began at `since` or later did."""
        async with self._reading:
            if self._nodes_at < since:
                began = time.monotonic()
                nodes = await asyncio.to_thread(self.ray.nodes)
                self._offers = [n.get("Resources") or {} for n in nodes if n.get("Alive")]
                self._nodes_at = began

    async def submit(self, job: dict, resources: dict) -> dict:
        """Run one job remotely; its record. Cancelled: Ray's cancel, force after a grace."""
        started = time.perf_counter()
        source = job.pop("source")
        ref = self._fn(resources).remote(pack(job), source)
        try:
            out = pickle.loads(await ref)
            _count({"calls": 1, "roundtrip": time.perf_counter() - started, **(out.get("phases") or {})})
            return out
        except asyncio.CancelledError:
            await asyncio.shield(self.cancel(ref))
            raise
        except self.ray.exceptions.RayError as e:
            self._nodes_at = -math.inf  # a node may have gone: the next placement check reads them
            raise AttemptLost(lost_message(e)) from None

    async def cancel(self, ref: Any) -> None:
        """ray.cancel without force (the worker kills its processes), force after CANCEL_GRACE."""
        ray = self.ray
        try:
            ray.cancel(ref)
        except Exception:
            return
        done, _ = await asyncio.wait({asyncio.wrap_future(ref.future())}, timeout=CANCEL_GRACE)
        if not done:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass


class RemoteAttempts:
    """One TaskRun's remote side: what its attempt's worktree holds and its last checks."""

    def __init__(self, executor: RayExecutor, run: Any):
        self.ex, self.run = executor, run
        self.applied: tuple[Any, bytes] = (None, b"")  # (the worktree, the change it holds over its base)
        self.checked: Verdict | None = None  # the last call's verification, done with it remotely
        self.score: Any = None  # the last call's score command result (procs.ProcResult)

    def runs_agent(self, agent: Any) -> bool:
        """Whether the agent's call goes to the worker: program agents always; any plain
        agent (not a cassette's) with `placement: all`."""
        if isinstance(agent, SubprocessAgent):
            return True
        return self.ex.settings.placement == "all" and type(agent).__module__.startswith("harnessc.runtime.agents.")

    async def call(self, name: str, agent: Any, cfg: Any, request: Request) -> Response:
        """The agent's answer (verified remotely with it when it runs remotely); AgentError,
        or AttemptLost when the worker died."""
        self.checked = self.score = None
        if not self.runs_agent(agent):
            return await agent.call(request)
        request = dataclasses.replace(request, on_line=None, root=Path("."), workdir=None)
        out = await self.send(agent={"name": name, "config": cfg}, request=request,
                              env=self.env_for(name, cfg), verify=True)
        if out.get("error"):
            raise AgentError(**out["error"])
        self.checked, self.score = out.get("verdict"), out.get("score")
        return out["response"]

    async def verdict(self, resp: Response, time_left: float) -> Verdict:
        """The answer's verification: the one made with the call, else a remote check now.
        A check that cannot run (its worker lost again and again, an unplaceable or unshippable
        attempt) leaves the answer unverified: a rejected answer, never the run's crash."""
        if self.checked is not None:
            verdict, self.checked = self.checked, None
            return verdict
        why = ""
        for _ in range(LOST_VERIFY_TRIES):
            try:
                out = await self.send(answer=resp, verify=True, time_left=time_left)
            except AttemptLost as e:
                why = e.message
                continue
            except AgentError as e:  # the node or the shipping failed: the answer stays unverified
                why = e.message
                break
            self.score = out.get("score")
            return out["verdict"]
        return Verdict(claim=True, errors=[f"could not verify the answer: {why}"])

    def held(self) -> bytes:
        """The change the attempt's worktree holds over its base (made or not; a fresh one: none)."""
        worktree, change = self.applied
        return change if worktree is self.run.attempt else b""

    def evidence(self) -> ReturnedChange:
        """A loop task's file evidence: what each call's returned change changed (loop/returned.py)."""
        return ReturnedChange(self.held, self.ex.prefix)

    def take_score(self) -> Any:
        score, self.score = self.score, None
        return score

    async def send(self, time_left: float | None = None, **job: Any) -> dict:
        """Ship the attempt (base commit, change so far) with `job`; apply the change it comes
        back with to the local worktree. AgentError for a failure of the node or the shipping."""
        run, attempt = self.run, self.run.attempt
        base = attempt.base
        change = self.held()
        resources = self.ex.settings.resources_for(run.node.resources)
        started = time.perf_counter()
        why = await self.ex.unplaceable(resources)
        if why:
            raise AgentError(why, kind="invalid_request")  # final: retrying cannot place it
        _count({"placeable": time.perf_counter() - started})
        started = time.perf_counter()
        try:
            source = await self.ex.source(base)
        except ShipError as e:
            raise AgentError(f"could not ship the base commit {base[:10]} to Ray: {e}") from None
        _count({"ship": time.perf_counter() - started})
        score = getattr(run.node, "approaches", None)
        if job.get("verify"):  # min_passed: base - measured here, on the driver, once per base
            job["floors"] = await run.floors()
        job.update(base=base, source=source, change=change, prefix=self.ex.prefix, node=run.node,
                   contract=run.contract, time_left=max(0.1, time_left if time_left is not None else run.time_left()),
                   score={"command": score.score, "k": run.k} if score is not None and score.score is not None
                   and hasattr(run, "k") else None)
        out = await self.ex.submit(job, resources)
        if out.get("cancelled"):
            raise AttemptLost(f"the attempt was cancelled on Ray node {out.get('node')}")
        if out.get("failure"):
            raise AgentError(out["failure"])
        new = out.get("change")
        # the attempt's worktree holds `change` (a fresh one, made or not, its base): the same
        # change back (most often none) leaves nothing to apply
        if new is not None and new != change:
            started = time.perf_counter()
            try:
                await run.iso.make(attempt)  # an attempt's first change: its worktree on disk
                await asyncio.to_thread(apply_change, attempt.path, base, new, attempt.brought,
                                        attempt.git.git_dir)
            except ShipError as e:
                raise AgentError(f"could not apply the change from Ray node {out.get('node')}: {e}") from None
            self.applied = (attempt, new)
            _count({"apply": time.perf_counter() - started})
        return out

    async def took_over(self) -> None:
        """The attempt's worktree was changed here, not by a worker (explore.py put a branch's
        files in it): what it holds over its base is what the next remote call starts from."""
        attempt = self.run.attempt
        change, _ = await asyncio.to_thread(change_of, attempt.path, attempt.base, attempt.git.git_dir)
        self.applied = (attempt, change)

    def env_for(self, name: str, cfg: Any) -> dict[str, str]:
        """The values the agent's call forwards, read here (the driver) and shipped in the
        call's own arguments: never in runtime_env, names or metadata."""
        return {k: os.environ[k] for k in self.ex.forwarded.get(name, ()) if k in os.environ}


def no_node_offers(need: dict[str, float], offers: list[dict]) -> str | None:
    """Why none of the nodes' `offers` has all of `need` at once, or None."""
    if any(all(have.get(k, 0) >= v for k, v in need.items() if v) for have in offers):
        return None
    asked = ", ".join(f"{k}: {v:g}" for k, v in need.items() if v)
    missing = [k for k in need if need[k] and not any(k in have for have in offers)]
    if missing:
        why = f"no alive node of the Ray cluster offers the resource {', '.join(repr(k) for k in missing)}"
    else:
        why = "no alive node of the Ray cluster has all of them at once"
    return f"an attempt asks Ray for {{{asked}}} and {why} (the task's `resources:` and `executor:` settings)"


def forwarded_names(agents: Any) -> dict[str, list[str]]:
    """Agent -> the variables of ours its calls may read: `pass_env:`, its key, and a CLI's
    own (agents/cli.py ENV_VARS); procs' base list is the worker's own."""
    from ..agents.cli import ENV_VARS

    out = {}
    for name, cfg in agents.items():
        names = set(getattr(cfg, "pass_env", None) or ()) | providers.key_envs({name: cfg})
        names |= set(ENV_VARS.get(str(cfg.provider), ()))
        out[name] = sorted(n for n in names if n not in BASE_ENV)
    return out


def probe(address: str) -> None:
    """A host:port (or ray://host:port) address answers a TCP connect within PROBE_TIMEOUT:
    ray.init would otherwise retry an address nobody listens on for a minute."""
    if address == "auto" or ":" not in address:
        return
    hostport = address.removeprefix("ray://").rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=PROBE_TIMEOUT):
            pass
    except (OSError, ValueError) as e:
        raise ExecutorError(f"could not connect to the Ray cluster at {address}: {e}",
                            "check the address (`ray status` on the head node), or drop it to run a "
                            "local cluster") from None


def connect_error(address: str | None, e: Exception) -> ExecutorError:
    text = str(e).strip().splitlines()[0][:400] if str(e).strip() else type(e).__name__
    if "version mismatch" in str(e).lower():
        # Ray's text spans lines ("The cluster was started with:\n    Ray: 2.x\n ..."): one line here
        versions = " ".join(str(e).split()).removeprefix("Version mismatch: ")[:400]
        return ExecutorError(f"the Ray cluster at {address} runs another Ray or Python version than this "
                             f"harnessc: {versions}", "install the cluster's Ray and Python versions here "
                             "(or the other way round)")
    where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
    return ExecutorError(f"could not connect to {where}: {text}",
                         "check the address (`ray status` on the head node), or drop it to run a local cluster")


def lost_message(e: Exception) -> str:
    """What a Ray failure says, short (its first line; a node's id and address when given)."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    return f"the Ray worker running the attempt was lost ({type(e).__name__}): {first}"
