"""What runs on a Ray worker: one attempt of one task, in a checkout of its base commit.

`run_attempt(job)` (the executor calls it as `run_packed`) materialises the checkout
(bundle.py), runs the agent when the job carries one (else takes the driver's answer),
verifies a claim (contract, accept commands) and scores it (`score:`), and returns what
happened with the change the checkout now holds.
It never raises: a secret could ride an exception's text into Ray's task table and logs,
so every failure comes back as a record whose text is scrubbed of the forwarded values.
A cancel (`ray.cancel` without force: `_thread.interrupt_main()`, a SIGINT that no signal
carries) wakes the attempt's event loop (`_hear_cancels`) and cancels the attempt, which kills
the agent's and the checks' process groups (procs.run).

Imports little at load (Ray itself only on first use, through rayconfig.py); harnessc's agents
and checks on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pickle
import shutil
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from . import bundle, rayconfig
from .bundle import NodeCache, ShipError

_cache: NodeCache | None = None  # this worker process's: its repositories and kept checkouts
_node_name = ""  # this worker process's node, once known (a worker process stays on its node)
_has_git = False  # git was found on this worker's PATH (looked for again until it is)


def node_name() -> str:
    """This node as messages name it: host and Ray node id (short)."""
    global _node_name
    if _node_name:
        return _node_name
    node_id = ""
    try:
        node_id = rayconfig.worker_node_id()
    except Exception:  # outside a Ray worker (tests call the function directly)
        pass
    name = f"{socket.gethostname()}" + (f" (node {node_id[:12]})" if node_id else "")
    if node_id:
        _node_name = name
    return name


def pack(value: Any) -> bytes:
    """`value` pickled by the standard pickler (in C: Ray's cloudpickle, in Python, took
    several times as long for a job or a record), by cloudpickle when that cannot.

    Only harnessc's driver and its remote function unpickle these, and only from each other
    through Ray, which unpickles whatever crosses it anyway (its arguments and results are
    cloudpickled): no bytes a spec or an agent wrote are ever unpickled."""
    try:
        return pickle.dumps(value, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return rayconfig.cloudpickled(value)


def run_packed(payload: bytes, source: dict) -> bytes:
    """run_attempt as the Ray executor calls it: the job pickled (`pack`), but its source,
    whose object refs travel as Ray's own; the record pickled back."""
    try:
        job = pickle.loads(payload)
    except Exception as e:  # noqa: BLE001 - a record, never an exception (its type only: no value)
        return pack({"node": node_name(), "failure": f"could not read the attempt's job ({type(e).__name__})"})
    return pack(run_attempt({**job, "source": source}))


def run_attempt(job: dict) -> dict:
    """The Ray task's body: a result record, never an exception."""
    started, git_before = time.perf_counter(), bundle.git_calls
    where = node_name()
    from ..children import procs

    secrets = _secret_forms(job.get("env") or {})
    phases: dict[str, float] = {}
    try:
        out = _run(_attempt(job, where, phases))
    except (KeyboardInterrupt, asyncio.CancelledError):
        return {"node": where, "cancelled": True}
    except BaseException as e:  # noqa: BLE001 - the record says what, scrubbed
        if type(e).__name__ == "TaskCancelledError":
            return {"node": where, "cancelled": True}
        out = {"failure": f"{type(e).__name__}: {e}"}
    out["node"] = where
    phases["total"] = time.perf_counter() - started
    phases["git"] = bundle.git_calls - git_before
    out["phases"] = phases
    for key in ("failure",):
        if out.get(key):
            out[key] = procs.scrubbed(out[key], secrets)
    if out.get("error"):
        out["error"] = procs.scrubbed(out["error"], secrets)
    return out


_loop: tuple[asyncio.Runner, contextlib.ExitStack] | None = None  # this worker process's, kept between attempts


def _run(coro: Any) -> Any:
    """asyncio.run on a kept loop (its threads and child watcher set up once per worker
    process). Anything but an answer (a cancel, an error) closes it as asyncio.run would:
    what is still running is cancelled, which kills its process groups (procs.run).

    While the loop is kept, the worker process adopts its commands' orphans and a lifeline
    watcher ends their groups if the worker dies (reaper.adopting, as a run does): a
    command then starts without the death-signal shim, and its end looks at the worker's
    own children instead of scanning every process's environment (~100 files a command
    on a Ray node). Closing the loop kills whatever its commands left."""
    global _loop
    from ..children import procs, reaper

    if _loop is None:
        watching = contextlib.ExitStack()
        watching.enter_context(reaper.adopting(f"h{os.getpid()}"))  # the markers of our commands
        watching.enter_context(procs.child_watching())  # before the loop: it attaches to it
        runner = asyncio.Runner()
        watching.enter_context(_hear_cancels(runner.get_loop()))
        _loop = (runner, watching)
    try:
        return _loop[0].run(_alone(coro))
    except BaseException:
        (runner, watching), _loop = _loop, None
        try:
            runner.close()
        finally:
            watching.close()
        raise


@contextlib.contextmanager
def _hear_cancels(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """While the loop is kept, a SIGINT wakes it.

    Ray's cancel is `_thread.interrupt_main()`: it marks SIGINT pending and sends no signal,
    so a loop asleep in epoll, waiting on an agent that prints nothing, would run the
    handler (and cancel the attempt) only when something else woke it: after the driver's
    grace, when Ray force-kills the worker and its children, but not theirs. Python writes
    a pending signal's number to the wake-up fd; the loop reads it here, and the handler
    runs (asyncio.Runner's: it cancels the attempt). A stale byte only wakes the loop once.
    Only the main thread has a wake-up fd (Ray runs tasks there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ours, its = socket.socketpair()
    with ours, its:
        ours.setblocking(False)
        its.setblocking(False)
        before = signal.set_wakeup_fd(its.fileno(), warn_on_full_buffer=False)
        loop.add_reader(ours.fileno(), _drain, ours)
        try:
            yield
        finally:
            loop.remove_reader(ours.fileno())
            signal.set_wakeup_fd(before)


def _drain(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while sock.recv(4096):
            pass


async def _alone(coro: Any) -> Any:
    """Await `coro`, then cancel whatever it left running: as asyncio.run's end does, no task
    of one attempt lives on into the next."""
    try:
        return await coro
    finally:
        left = asyncio.all_tasks() - {asyncio.current_task()}
        for task in left:
            task.cancel()
        if left:
            await asyncio.gather(*left, return_exceptions=True)


def _secret_forms(env: dict[str, str]) -> list[str]:
    from ..children import procs

    forms: set[str] = set()
    for value in env.values():
        if len(value) >= 6:
            forms |= {value, value[::-1], *procs.base64_forms(value.encode("utf-8"))}
    return sorted(forms, key=len, reverse=True)


class _Phases:
    """Seconds per phase of one attempt (the record's `phases`: bench/ray.py sums them)."""

    def __init__(self, into: dict[str, float]):
        self.into, self.at = into, time.perf_counter()

    def done(self, phase: str) -> None:
        now = time.perf_counter()
        self.into[phase] = self.into.get(phase, 0.0) + now - self.at
        self.at = now


async def _attempt(job: dict, where: str, phases: dict[str, float]) -> dict:
    global _cache, _has_git
    if not _has_git and shutil.which("git") is None:
        return {"failure": f"git is not installed on Ray node {where} (not found on its PATH: "
                           f"{os.environ.get('PATH', '')})"}
    _has_git = True
    sha, change = job["base"], job.get("change") or b""
    cache = _cache = _cache or NodeCache()
    clock = _Phases(phases)
    try:
        # in a thread when git has to run; a commit the node holds and a clean kept checkout need none
        repo = cache.holding(job["source"], sha) or await asyncio.to_thread(_source_repo, cache, job["source"], sha)
        clock.done("source")
        top = cache.kept(repo, sha, change) or await asyncio.to_thread(cache.checkout, repo, sha, change)
        clock.done("checkout")
    except ShipError as e:
        return {"failure": f"could not check out {sha[:10]} on Ray node {where}: {e}"}
    kept = False
    try:
        workdir = top / job.get("prefix", "")
        out = await _work(job, workdir, where, clock)
        # here, not in a thread: nothing else runs on this loop now, and most often (the files
        # as they were) no git runs either
        out["change"], clean = cache.change(top, sha)
        clock.done("diff")
        cache.release(repo, top, sha if clean else None)
        kept = True
        return out
    finally:
        if not kept:  # cancelled or failed: its processes may still write there
            cache.drop(top)


def _source_repo(cache: NodeCache, source: dict, sha: str) -> Path:
    if source.get("url"):
        return cache.from_url(source["url"], sha)

    def fetch() -> bytes:
        return rayconfig.fetch(source["bundle"][0])  # nested in a list: fetched only on a cache miss

    return cache.from_bundle(sha, fetch)


async def _work(job: dict, workdir: Path, where: str, clock: _Phases) -> dict:
    """The agent's call (when the job carries the agent), then the checks of its answer."""
    from ..agents.base import AgentError, make_agent
    from ..children import procs

    token = procs.forwarding(job.get("env") or {})
    started = time.monotonic()
    try:
        out: dict[str, Any] = {}
        resp = job.get("answer")
        spec = job.get("agent")
        if spec is not None:
            try:
                agent = make_agent(spec["name"], spec["config"], workdir)
                request = dataclasses.replace(job["request"], root=workdir, workdir=workdir)
                resp = await agent.call(request)
                clock.done("agent")
            except AgentError as e:
                if "command not found" in e.message or "not executable" in e.message:
                    e.message += f" (on Ray node {where})"
                out["error"] = vars(e).copy()
                return out
            out["response"] = resp
        if job.get("verify") and resp is not None:
            job["time_left"] = max(0.1, job["time_left"] - (time.monotonic() - started))
            out["verdict"] = verdict = await _verify(job, resp, workdir)
            if verdict.claim and verdict.ok and job.get("score") is not None:
                out["score"] = await _score(job, workdir)
            clock.done("verify")
        return out
    finally:
        procs.stop_forwarding(token)


async def _verify(job: dict, resp: Any, workdir: Path) -> Any:
    from ..verify import verify

    return await verify(job["node"], job["contract"], resp.text, workdir, job["time_left"],
                        truncated=resp.truncated, floors=job.get("floors"))


async def _score(job: dict, workdir: Path) -> Any:
    from ..approaches import run_score

    score = job["score"]
    return await run_score(score["command"], workdir, job["node"].id, score["k"], job["time_left"])
