"""SDK provider benchmark: harnessc's cost per call against a bare SDK loop, under faults.

    python bench/providers.py [--calls 1000] [--concurrency 32] [--faults 0.2] [--repeat 3]

For each SDK provider (anthropic, openai chat) the same fault server (tests/runtime/fakeapi.py,
in its own process so its CPU is not the client's) answers `--calls` contract tasks at
`--concurrency`, failing a seeded `--faults` share of requests with 429, 500, 503 or 529 in
equal parts. Every fault carries `retry-after-ms: 2`, so every loop waits exactly as long and
the figures measure work, not sleep. Three clients are timed, each the best of `--repeat`:

1. bare: the SDK alone (max_retries=0) with the retry policy harnessc applies, written as a
   user would - retry 429/5xx after retry-after-ms, at most 5 in a row - plus json.loads of
   the answer. The floor.
2. agent: harnessc's agent (make_agent -> AnthropicAgent / OpenAIAgent: its request params,
   classify() of every failure, retry_delay()) in the same loop. No state, no scheduler.
3. run: `execute()` of a plan of `--calls` contract tasks - what `harnessc run` does after
   start-up: scheduler, prompt rendering, one attempt row per request in state.db (group
   commit), contract verification of the answer, usage and cost ledger. The plan and its
   prompt files are written before the clock starts.

Per-call time is ((calls run) - (small run)) / (calls - small) for every client, so fixed
costs (client construction, opening state.db) are not charged per call; the client's CPU
time is printed next to the wall time (a loaded machine inflates wall time, not CPU). The
overhead is run - bare (and agent - bare). requests == attempts compares the server's request
count with the attempt rows the run wrote. Last, the import time `run` adds for one provider:
whole `harnessc run` processes of a one-task plan on openai / anthropic vs on simulate, and
`-X importtime`'s cumulative figure for the SDK package in that process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import harnessc_env  # noqa: E402  (bench/: this script's directory)

harnessc_env.require("aiohttp", "anthropic", "openai")

from harnessc.compiler.contract_schema import PROVIDERS, is_strict, provider_schema  # noqa: E402
from harnessc import providers  # noqa: E402
from harnessc.runtime.agents.base import Request, make_agent  # noqa: E402
from harnessc.runtime.agents.errors import AgentError, retry_delay  # noqa: E402
from harnessc.runtime.iteration import TRANSIENT_LIMIT  # noqa: E402
from harnessc.runtime.scheduler import RunOptions  # noqa: E402
from harnessc.runtime.session import execute  # noqa: E402
from tests.runtime.helpers import CLI, SIMPLE_CONTRACT, node, write_project  # noqa: E402

KEYS = {"ANTHROPIC_API_KEY": "bench-anthropic-key-0000", "OPENAI_API_KEY": "bench-openai-key-0000"}
ANSWER = '{"title": "Q3 report", "score": 4}'
FAULTS = ((429, "rate_limit_error"), (500, "api_error"), (503, "api_error"), (529, "overloaded_error"))
RETRY_AFTER_MS = "2"
RETRIED_STATUS = {429, 500, 503, 529}
MAX_IN_A_ROW = 3  # harnessc gives a task up after TRANSIENT_LIMIT (5) in a row
SYSTEM = "You are a careful analyst. Answer with the JSON object the contract asks for."
MODEL = {"anthropic": "claude-bench", "openai": "gpt-bench"}


def contract() -> dict:
    """SIMPLE_CONTRACT with the provider wire schemas the compiler would store in plan.json."""
    c = dict(SIMPLE_CONTRACT, provider_schemas={})
    for p in PROVIDERS:
        sub, moved = provider_schema(c["json_schema"], p)
        c["provider_schemas"][p] = {"schema": sub, "moved": moved, "strict": is_strict(moved)}
    return c


# ---------------------------------------------------------------- the fault server (own process)

def serve(rate: float, seed: int) -> None:
    """Run the fault server until stdin closes; print its base URL first.
    POST /_reset restarts the seeded fault sequence; GET /_count gives the requests since."""
    from aiohttp import web

    from tests.runtime.fakeapi import FakeAPI, Reply

    class FaultyAPI(FakeAPI):
        def __init__(self) -> None:
            super().__init__()
            self.rng = random.Random(seed)
            self.served = 0
            self.in_a_row: dict[str, int] = {}

        def next_reply(self, body: Any) -> Reply:
            self.served += 1
            self.requests.clear()  # nothing reads them here; keep memory flat
            # At most MAX_IN_A_ROW faults for one task (its prompt), so no loop gives up.
            key = json.dumps((body.get("messages") or [None])[-1] if isinstance(body, dict) else None)
            if self.rng.random() < rate and self.in_a_row.get(key, 0) < MAX_IN_A_ROW:
                self.in_a_row[key] = self.in_a_row.get(key, 0) + 1
                status, etype = self.rng.choice(FAULTS)
                return Reply.error(status, etype, headers={"retry-after-ms": RETRY_AFTER_MS})
            self.in_a_row.pop(key, None)
            return Reply.ok(ANSWER, usage={"input": 120, "output": 12})

        def routes(self, app: web.Application) -> None:
            super().routes(app)
            app.router.add_post("/_reset", self._reset)
            app.router.add_get("/_count", self._count)

        async def _reset(self, request: web.Request) -> web.Response:
            self.rng, self.served, self.in_a_row = random.Random(seed), 0, {}
            return web.json_response({})

        async def _count(self, request: web.Request) -> web.Response:
            return web.json_response({"count": self.served})

    async def main() -> None:
        api = FaultyAPI()
        print(await api.start(), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until closed
        await api.close()

    asyncio.run(main())


class Server:
    """The fault server's process, and its control endpoints (stdlib HTTP, off the timed path)."""

    def __init__(self, rate: float, seed: int = 1):
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--faults", str(rate),
                                      "--seed", str(seed)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        self.base = self.proc.stdout.readline().strip()
        if not self.base.startswith("http"):
            raise SystemExit("the fault server did not start")

    def _control(self, method: str, path: str) -> dict:
        import urllib.request

        req = urllib.request.Request(self.base + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        self._control("POST", "/_reset")

    def count(self) -> int:
        return self._control("GET", "/_count")["count"]

    def url(self, provider: str) -> str:
        return self.base if provider == "anthropic" else self.base + "/v1"

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


# ---------------------------------------------------------------- the three clients

def prompt(i: int) -> str:
    return f"# Task t{i:05d}: Task t{i:05d}\n\nDo the work for task t{i:05d}.\n"


def bare_call(provider: str, base: str):
    """The floor: one SDK client (max_retries=0) and the request harnessc sends, built by hand."""
    schema = contract()["provider_schemas"][provider]["schema"]
    if provider == "anthropic":
        import anthropic

        client = anthropic.AsyncAnthropic(api_key=KEYS["ANTHROPIC_API_KEY"], base_url=base, max_retries=0)
        system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
        fmt = {"format": {"type": "json_schema", "schema": schema}}

        async def call(i: int) -> str:
            m = await client.messages.create(model=MODEL[provider], max_tokens=8192, system=system,
                                             messages=[{"role": "user", "content": prompt(i)}],
                                             output_config=fmt, timeout=600)
            return m.content[0].text
        return call, anthropic.APIStatusError
    import openai

    client = openai.AsyncOpenAI(api_key=KEYS["OPENAI_API_KEY"], base_url=base, max_retries=0)
    fmt = {"type": "json_schema", "json_schema": {"name": "summary", "schema": schema, "strict": True}}

    async def call(i: int) -> str:
        c = await client.chat.completions.create(
            model=MODEL[provider], response_format=fmt, timeout=600,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt(i)}])
        return c.choices[0].message.content
    return call, openai.APIStatusError


async def bare_loop(provider: str, base: str, n: int, concurrency: int) -> int:
    call, status_error = bare_call(provider, base)
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            for _ in range(TRANSIENT_LIMIT + 1):
                try:
                    json.loads(await call(i))
                    return
                except status_error as e:
                    if e.status_code not in RETRIED_STATUS:
                        raise
                    await asyncio.sleep(float(e.response.headers.get("retry-after-ms", "1000")) / 1000)
            raise RuntimeError("too many faults in a row")

    await asyncio.gather(*(one(i) for i in range(n)))
    return n


def agent_config(provider: str, base: str) -> dict:
    return {"provider": provider, "model": MODEL[provider], "base_url": base,
            "price": {"input": 3.0, "output": 15.0}}


async def agent_loop(provider: str, base: str, n: int, concurrency: int) -> int:
    """harnessc's agent and its error handling, in the loop the scheduler runs around it."""
    agent = make_agent("llm", providers.agent_config("llm", agent_config(provider, base)), REPO)
    c = contract()
    sem = asyncio.Semaphore(concurrency)
    calls = 0

    async def one(i: int) -> None:
        nonlocal calls
        async with sem:
            req = Request(task_id=f"t{i}", prompt=prompt(i), system=SYSTEM, contract=c,
                          output_schema=c["json_schema"], timeout=600)
            for attempt in range(1, TRANSIENT_LIMIT + 2):
                calls += 1
                try:
                    json.loads((await agent.call(req)).text)
                    return
                except AgentError as e:
                    if not e.transient:
                        raise
                    await asyncio.sleep(retry_delay(e, attempt))
            raise RuntimeError("too many faults in a row")

    await asyncio.gather(*(one(i) for i in range(n)))
    return calls


def run_plan(provider: str, base: str, n: int, concurrency: int) -> tuple[Callable[[], int], Callable[[], None]]:
    """execute() of an n-task plan, as `harnessc run` after start-up (returns its attempt
    rows). The project is written before, and removed after, the timed part."""
    d = tempfile.TemporaryDirectory(prefix="hc-bench-")
    root = Path(d.name)
    nodes = [node(f"t{i:05d}", contract="summary", routing={"agent": "llm", "chain": ["llm"]},
                  retry={"max_retries": 2, "delays": [0]}) for i in range(n)]
    plan = write_project(root, nodes, agents={"llm": agent_config(provider, base)},
                         contracts={"summary": contract()}, concurrency=concurrency)

    def go() -> int:
        result = execute(root, plan, RunOptions(jobs=concurrency))
        if result.exit_code != 0:
            raise SystemExit(f"the {provider} run failed: {result.message}")
        con = sqlite3.connect(root / ".harness" / "state.db")
        attempts = con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
        con.close()
        return attempts
    return go, d.cleanup


def in_loop(loop):
    """A client made of one async loop: nothing to prepare or remove."""
    def client(provider: str, base: str, n: int, concurrency: int):
        return (lambda: asyncio.run(loop(provider, base, n, concurrency))), (lambda: None)
    return client


def timed(server: Server, client, provider: str, n: int, concurrency: int) -> tuple[float, float, int, int]:
    """(wall s, CPU s, requests the server saw, calls/attempts the client counted)."""
    go, cleanup = client(provider, server.url(provider), n, concurrency)
    server.reset()
    c0, t0 = time.process_time(), time.perf_counter()
    calls = go()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    cleanup()
    gc.collect()  # the SDK clients close now, with no loop running (not in the next client's loop)
    return wall, cpu, server.count(), calls


def per_call(server: Server, clients: dict, provider: str, n: int, small: int, concurrency: int,
             repeat: int) -> dict[str, tuple[float, float, int, int]]:
    """Per client: best-of-repeat (wall, CPU) per call between an n-call and a small-call run,
    and the big run's (requests, calls). The clients take turns in each round, so a change in
    the machine's load falls on all of them."""
    big: dict[str, list] = {name: [] for name in clients}
    little: dict[str, list] = {name: [] for name in clients}
    for fn in clients.values():
        timed(server, fn, provider, small, concurrency)  # warm-up: imports, first connections
    for _ in range(repeat):
        for name, fn in clients.items():
            big[name].append(timed(server, fn, provider, n, concurrency))
            little[name].append(timed(server, fn, provider, small, concurrency))
    return {name: ((min(b[0] for b in big[name]) - min(s[0] for s in little[name])) / (n - small),
                   (min(b[1] for b in big[name]) - min(s[1] for s in little[name])) / (n - small),
                   big[name][-1][2], big[name][-1][3]) for name in clients}


# ---------------------------------------------------------------- import time of `run`

def run_process(provider: str, base: str, importtime: bool = False) -> tuple[float, str]:
    """Wall time of a whole `harnessc run` process on a one-task plan (and its stderr)."""
    with tempfile.TemporaryDirectory(prefix="hc-bench-") as d:
        root = Path(d)
        if provider == "simulate":
            write_project(root, [node("t00000", contract="summary")], contracts={"summary": contract()})
        else:
            write_project(root, [node("t00000", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                          agents={"llm": agent_config(provider, base)}, contracts={"summary": contract()})
        argv = [sys.executable, *(["-X", "importtime"] if importtime else []), *CLI[1:], "-C", str(root), "run"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        env.update(KEYS, PYTHONPATH=str(REPO))
        t0 = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        took = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"harnessc run ({provider}) failed: {r.stdout}{r.stderr}")
        return took, r.stderr


def import_cost(stderr: str, package: str) -> float:
    """Cumulative seconds of `import <package>` in a -X importtime log (its top-level line)."""
    best = 0.0
    for line in stderr.splitlines():
        m = re.match(r"import time:\s*\d+\s*\|\s*(\d+)\s*\|(\s*)(\S+)$", line)
        if m and m.group(3) == package:
            best = max(best, int(m.group(1)) / 1e6)
    return best


# ---------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--faults", type=float, default=0.2, help="share of requests that fail (0.2)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the best counts (3)")
    ap.add_argument("--providers", default="anthropic,openai")
    ap.add_argument("--imports", type=int, default=5, help="processes per import-time figure (5)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.faults, args.seed)
        return
    for var in list(os.environ):
        if var.startswith(("ANTHROPIC_", "OPENAI_")):
            del os.environ[var]
    os.environ.update(KEYS)
    n, conc = args.calls, args.concurrency
    small = max(min(n // 10, 100), 1)
    server = Server(args.faults)
    try:
        print(f"{n} calls per client, concurrency {conc}, {args.faults:.0%} faults (429/500/503/529, "
              f"retry-after-ms {RETRY_AFTER_MS}); per call = ({n} - {small} calls) / {n - small}, "
              f"best of {args.repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        for provider in args.providers.split(","):
            got = per_call(server, {"bare": in_loop(bare_loop), "agent": in_loop(agent_loop), "run": run_plan},
                           provider, n, small, conc, args.repeat)
            bare, agent, run = got["bare"], got["agent"], got["run"]
            print(f"{provider}:")
            print(f"  bare SDK loop:  {bare[0] * 1e3:.3f} ms/call wall, {bare[1] * 1e3:.3f} ms CPU;"
                  f" {bare[2]} requests for {n} calls")
            print(f"  harnessc agent: {agent[0] * 1e3:.3f} ms/call wall, {agent[1] * 1e3:.3f} ms CPU;"
                  f" overhead {(agent[0] - bare[0]) * 1e3:+.3f} ms wall, {(agent[1] - bare[1]) * 1e3:+.3f} ms CPU;"
                  f" requests {agent[2]} == calls {agent[3]}: {agent[2] == agent[3]}")
            print(f"  harnessc run:   {run[0] * 1e3:.3f} ms/call wall, {run[1] * 1e3:.3f} ms CPU;"
                  f" overhead {(run[0] - bare[0]) * 1e3:+.3f} ms wall, {(run[1] - bare[1]) * 1e3:+.3f} ms CPU"
                  f" (target <= 1.5 ms); requests {run[2]} == attempts {run[3]}: {run[2] == run[3]}")
        if args.imports:
            print(f"import time `run` adds (whole `harnessc run` process, one-task plan, median of {args.imports}):")
            sim = statistics.median(run_process("simulate", "")[0] for _ in range(args.imports))
            print(f"  simulate: {sim * 1e3:.0f} ms")
            for provider in args.providers.split(","):
                url = server.url(provider)
                whole = statistics.median(run_process(provider, url)[0] for _ in range(args.imports))
                imp = statistics.median(import_cost(run_process(provider, url, importtime=True)[1], provider)
                                        for _ in range(args.imports))
                print(f"  {provider}: {whole * 1e3:.0f} ms (+{(whole - sim) * 1e3:.0f} ms: import, client,"
                      f" one request); `import {provider}` alone {imp * 1e3:.0f} ms (-X importtime)")
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
