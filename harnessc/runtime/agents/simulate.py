"""simulate: an offline, deterministic agent for rehearsals, tests and benchmarks.

It answers with output that satisfies the contract (simulated_output: valid examples and
defaults, else values built from the rules and checked by the validator; compiler/synth.py),
prints the completion promise, and misbehaves on request:
latency, invalid_first, fail_rate (transient errors, seeded), progress steady/none,
complete_after (iterations before claiming), skill (by complexity: the chance an attempt
answers validly, to rehearse routing), seed. Asked to write a prompt mutation or a memory
summary (runtime/loop/assist.py), it answers with a short fixed text of that kind, without
counting it as one of the task's answers.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from ...estimates import estimate_tokens
from ...planfile import Contract, plain
from ...providers import SimulateConfig
from .. import clock
from ..plan import simulated_output
from .base import AgentError, Request, Response, Usage, priced


class SimulateAgent:
    writes_files = False  # it only answers: a shared tree's protected files need no guard (iteration.py)

    def __init__(self, name: str, config: SimulateConfig, root: Path):
        self.name = name
        self.config = config
        self.latency = config.latency
        self.invalid_first = config.invalid_first
        self.fail_rate = config.fail_rate
        self.progress = config.progress
        self.complete_after = config.complete_after
        self.seed = config.seed
        self.skill = config.skill
        self.calls: dict[str, int] = {}  # task id -> answers given (errors excluded)
        self.tries: dict[str, int] = {}  # task id -> calls, for the seeded failure draw
        self.outputs: dict[str, str] = {}  # contract (as JSON) -> the answer's JSON body

    async def call(self, request: Request) -> Response:
        start = clock.monotonic()
        if self.latency:
            await clock.sleep(self.latency)
        tid = request.task_id if request.purpose == "task" else f"{request.task_id}:{request.purpose}"
        self.tries[tid] = self.tries.get(tid, 0) + 1
        # Seeded per task and call, so the outcome does not depend on scheduling order.
        if self.fail_rate:
            rng = random.Random(f"{self.seed}:{tid}:{self.tries[tid]}")
            if rng.random() < self.fail_rate:
                raise AgentError("simulate: transient failure (overloaded)", kind="overloaded",
                                 retry_after=0)
        n = self.calls[tid] = self.calls.get(tid, 0) + 1
        text = self._answer(request, n) if request.purpose == "task" else self._assist(request, n)
        usage = Usage(estimate_tokens(request.system + request.prompt), estimate_tokens(text))
        cost, source = priced(self.config, usage)
        return Response(text=text, usage=usage, cost_usd=cost, cost_source=source,
                        latency=clock.monotonic() - start, tool_calls=0)  # it has no tools

    def _answer(self, request: Request, n: int) -> str:
        if n <= self.complete_after:
            # Progress work without a claim: steady progress reports a new step each time
            # (a <progress> marker: evidence, see runtime/loop/progress.py); none repeats itself.
            if self.progress == "steady":
                return f"Working on {request.task_id}. <progress>step {n} of {request.task_id}</progress> Not done yet."
            return f"Working on {request.task_id}. Not done yet."
        if n - self.complete_after <= self.invalid_first or not self._skilled(request):
            return self._invalid(request)
        parts = [f"Completed {request.task_id}."]
        contract = request.contract
        if contract is not None and contract.output:
            body = self._output(contract)
            parts.append(f"```json\n{body}\n```")
        if request.promise:
            parts.append(f"<promise>{request.promise}</promise>")
        return "\n\n".join(parts)

    def _assist(self, request: Request, n: int) -> str:
        if request.purpose == "mutation":
            return (f"(simulated rewrite {n} by {self.name}) Stop and list what blocks task {request.task_id}; "
                    "then change one thing you have not changed before, and report it with <progress>.")
        if request.purpose == "memory_summary":  # the run memory's summary: its entries' first lines, kept
            said = [line for line in request.prompt.splitlines() if line.startswith("- decision ")][:5]
            return "\n".join([f"- (simulated memory summary {n} by {self.name}) the project's tasks so far:", *said])
        return (f"(simulated summary {n} by {self.name}) Task {request.task_id}, up to iteration "
                f"{request.iteration}: earlier iterations worked on it; see the most recent ones below.")

    def _skilled(self, request: Request) -> bool:
        """Whether this attempt succeeds at the task's complexity (seeded: the same seed,
        task and iteration always draw the same)."""
        chance = self.skill.get(request.complexity or "")
        if chance is None:
            return True
        # each approach of a best-of-N task (approaches.py) is a draw of its own
        approach = f":approach:{request.approach}" if request.approach is not None else ""
        return random.Random(f"{self.seed}:{request.task_id}:skill:{request.iteration}{approach}").random() < chance

    def _output(self, contract: Contract) -> str:
        # Synthesis validates every candidate: once per contract, not once per call.
        key = json.dumps(contract, sort_keys=True, default=plain)
        if key not in self.outputs:
            self.outputs[key] = json.dumps(simulated_output(contract), indent=2, sort_keys=True)
        return self.outputs[key]

    def _invalid(self, request: Request) -> str:
        if request.contract is not None and request.contract.output:
            return 'Here it is:\n\n```json\n{"simulated_invalid": true}\n```'
        if request.promise:
            return "Done, I think. <promise>NOT-YET</promise>"
        return "Done, I think."
