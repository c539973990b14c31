"""Verification of one agent response: is it a claim, and does the claim hold?

A claim holds when the contract output validates, every accept command exits 0 and the
completion promise matches (when declared). A promise alone never completes a task whose
other checks fail.

The checks of the response text (JSON extraction, schema, rules) run in a worker thread
with a deadline, so a huge output or a costly rule never blocks the event loop: `harnessc
stop`, abort, SIGTERM and max_time keep working while they run. (A short answer with no
contract output, only a promise to find, is checked on the loop's thread.)
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from ..argv import split_command
from ..planfile import AcceptCommand, Contract, PlanNode
from ..wording import accept_name, command_text
from . import clock, testcounts
from . import plan as planmod
from .children import procs
from .loop.progress import SMALL_TEXT, passed_count
from .plan import Deadline, OutOfTime

_PROMISE = re.compile(r"<promise>\s*(.*?)\s*</promise>", re.S)
DEFAULT_ACCEPT_TIMEOUT = 600.0
TAIL_CHARS = 1500  # of an accept command's output kept with its result (the report shows it)


class NoJSON(ValueError):
    pass


def extract_json(text: str):
    """The output object in a response; raises NoJSON saying why there is none."""
    value, why = planmod.extract_json(text)
    if why is not None:
        raise NoJSON(why)
    return value


def find_promise(text: str) -> str | None:
    found = _PROMISE.findall(text)
    return found[-1] if found else None


@dataclass
class Verdict:
    claim: bool  # the response claims completion (so it is verified)
    ok: bool = False
    errors: list[str] = field(default_factory=list)
    output: object = None  # the parsed output (validated when ok)
    parsed: object = None  # whatever JSON was found, valid or not (for partial fallbacks)
    contract_errors: int | None = None  # how far `parsed` is from the contract (None: no JSON)
    checks: list[dict] = field(default_factory=list)  # accept command results
    kinds: list[str] = field(default_factory=list)  # what kinds of failure the errors are (vocab.ERROR_KINDS)

    def failed(self, kind: str, *errors: str) -> None:
        """Add errors of one kind of failure (retry_on / dont_retry read the kinds)."""
        self.errors += errors
        if kind not in self.kinds:
            self.kinds.append(kind)


def is_claim(node: PlanNode, contract: Contract | None, text: str) -> bool:
    """A task with a promise claims when it prints a promise (or output JSON); others always claim."""
    if not node.completion_promise:
        return True
    if find_promise(text) is not None:
        return True
    if contract and contract.output:
        try:
            extract_json(text)
            return True
        except NoJSON:
            return False
    return False


async def verify(node: PlanNode, contract: Contract | None, text: str, root: Path,
                 time_left: float | None, truncated: str | None = None,
                 floors: dict[str, int | None] | None = None) -> Verdict:
    """`truncated`: why the text is only the start of the answer; a cut answer is a claim
    that fails, never checked (its JSON is cut, or a part of it could pass for the whole).
    `floors`: what each `min_passed: base` check passed at the task's base commit, by
    check id (baseline.py; None: the base printed no count)."""
    if truncated:
        return Verdict(claim=True, errors=[f"{truncated}; a cut answer is not verified (ask for a shorter one)"],
                       kinds=["truncated"])
    deadline = Deadline(time_left)
    try:
        # a short answer with no contract output to validate is checked on the loop's thread
        small = len(text) <= SMALL_TEXT and not (contract and contract.output)
        v = (check_text(node, contract, text) if small
             else await asyncio.to_thread(check_text, node, contract, text, deadline))
    except asyncio.CancelledError:
        deadline.cancel()  # the worker stops at its next check instead of running on
        raise
    if not v.claim or v.errors:
        return v
    # accept commands are slow; run them only for an otherwise valid claim
    for cmd in node.accept:
        started = clock.time()  # wall clock, as the attempt's (the trace's accept spans)
        res = await run_accept(cmd, root, time_left)
        tail = (res.stdout + res.stderr).strip()[-TAIL_CHARS:]
        v.checks.append({"id": cmd.id, "argv": res.argv, "returncode": res.returncode,
                         "timed_out": res.timed_out, "started": round(started, 3), "duration": round(res.duration, 3),
                         "passed": passed_count(res.stdout + res.stderr), "tail": tail})
        if not res.ok:
            # the command, not only its program: `'python3' exited with 1` tells nobody which check
            name, command = accept_name({"id": cmd.id, "argv": res.argv}), command_text(res.argv)
            what = res.describe(f"`{command}`")
            msg = f"accept check '{name}' failed: {what}" if name != command else f"accept check failed: {what}"
            v.failed(accept_kind(res, tail), msg + (f"\n{tail}" if tail else ""))
        elif cmd.min_passed:
            counted = held_to_count(cmd, res, root, floors, v.checks[-1])
            if counted:
                v.failed("min_passed", *counted)
    v.ok = not v.errors
    return v


_NO_FILE = re.compile(r"No such file or directory|FileNotFoundError|can't open file|cannot find the (file|path)"
                      r"|command not found", re.I)
_DENIED = re.compile(r"Permission denied|PermissionError|Operation not permitted", re.I)


def accept_kind(res: procs.ProcResult, tail: str) -> str:
    """The kind of an accept command's failure (vocab.ERROR_KINDS), from how it ended and the
    end of its output: timeout, missing_file, permission, else accept."""
    if res.timed_out:
        return "timeout"
    if (res.error or "").startswith("command not found") or res.returncode == 127:
        return "missing_file"
    if (res.error or "").startswith("command not executable") or res.returncode == 126:
        return "permission"
    if _DENIED.search(tail):
        return "permission"
    if _NO_FILE.search(tail):
        return "missing_file"
    return "accept"


def held_to_count(cmd: AcceptCommand, res: procs.ProcResult, root: Path, floors: dict[str, int | None] | None,
                  check: dict) -> list[str]:
    """`min_passed`: the errors of a check that exited 0 but whose runner reports fewer
    passing tests than required, or no count at all (a check that cannot be proven fails)."""
    name = cmd.id or " ".join(res.argv)
    if cmd.min_passed == "base":
        if floors is None or cmd.id not in floors:
            return [f"accept check '{name}': the count of passing tests at the base commit is not known "
                    "(min_passed: base), so the check cannot be proven"]
        required, why = floors[cmd.id] or 0, " (as many as at the base commit)"
    else:
        required, why = int(cmd.min_passed), ""
    count, problem = passed_count_of(cmd, res, root)
    check.update(min_passed=required, counted=count)
    if count is None:
        return [f"accept check '{name}': {problem}"]
    if count < required:
        return [f"accept check '{name}': {count} passed, {required} required{why}"]
    return []


def passed_count_of(cmd: AcceptCommand, res: procs.ProcResult, root: Path) -> tuple[int | None, str | None]:
    """(passing tests, None), or (None, why there is no count): from the check's JUnit XML
    file when it names one (`junit:`), else from its runner's last summary line."""
    if cmd.junit:
        path = junit_path(cmd, root)
        if path is None:
            return None, f"its JUnit file {cmd.junit} is not inside the checkout"
        try:
            return testcounts.junit_passed(path), None
        except testcounts.JUnitError as e:
            return None, f"no test count: {e}"
    count = testcounts.passed(res.stdout + "\n" + res.stderr)
    if count is None:
        cut = " (only the last 1 MiB of its output was kept: have the runner write a JUnit XML file and name it " \
              "with junit:)" if res.truncated else ""
        return None, f"no test count found in the output of {' '.join(res.argv)[:200]}{cut}"
    return count, None


def junit_path(cmd: AcceptCommand, root: Path) -> Path | None:
    """Where a check's JUnit file is, inside `root` (its directories not reached through a
    link out of it); None when it would be elsewhere."""
    path = Path(root) / cmd.junit
    try:
        parent = path.parent.resolve()
        top = Path(root).resolve()
    except (OSError, RuntimeError):
        return None
    if parent != top and top not in parent.parents:
        return None
    return parent / path.name


def check_text(node: PlanNode, contract: Contract | None, text: str, deadline: Deadline | None = None) -> Verdict:
    """The checks of the response text alone: claim, output JSON, contract, promise."""
    if not is_claim(node, contract, text):
        return Verdict(claim=False)
    v = Verdict(claim=True)
    if not text.strip():
        v.failed("promise", "the agent printed nothing")
        return v
    if contract and contract.output:
        try:
            data = extract_json(text)
            v.parsed = data
            problems = planmod.validate_output(contract, data, deadline)
            for e in problems:
                path, msg = e.get("path") or "$", str(e.get("message"))
                v.failed("contract", msg if msg.startswith(path) else f"{path}: {msg}")
            v.contract_errors = len(problems)
            if not v.errors:
                v.output = data
        except NoJSON as e:
            v.failed("contract", str(e))
        except OutOfTime as e:
            v.failed("contract", str(e))
    promise = node.completion_promise
    if promise:
        got = find_promise(text)
        if got is None:
            v.failed("promise", f"completion promise missing: print <promise>{promise}</promise> when done")
        elif got != promise:
            v.failed("promise", f"completion promise is '{got}', expected <promise>{promise}</promise>")
    v.ok = not v.errors
    return v


async def run_accept(cmd: AcceptCommand, root: Path, time_left: float | None) -> procs.ProcResult:
    if cmd.junit:  # a file left from before (or planted) is never read as this run's
        path = junit_path(cmd, root)
        if path is not None and (path.is_file() or path.is_symlink()):
            path.unlink()
    argv = split_command(cmd.argv)
    timeout = float(cmd.timeout or DEFAULT_ACCEPT_TIMEOUT)
    if time_left is not None:
        timeout = max(0.1, min(timeout, time_left))
    # a counted check keeps the end of its output: the runner's summary is printed last
    async with fresh_pycache() as extra:
        return await procs.run(argv, cwd=root, timeout=timeout, stdin=None, env=procs.child_env(extra=extra),
                               keep_end=bool(cmd.min_passed))


@asynccontextmanager
async def fresh_pycache() -> AsyncIterator[dict[str, str]]:
    """A check's environment: Python's bytecode cache in a new, empty directory of its own
    (PYTHONPYCACHEPREFIX; pytest's rewritten tests go there too). A `__pycache__` an agent
    wrote next to a protected test - compiled from other source, stamped with the test's
    time and size - would otherwise run in its place."""
    path = tempfile.mkdtemp(prefix="harnessc-pycache-")
    try:
        yield {"PYTHONPYCACHEPREFIX": path}
    finally:
        # a pytest check leaves thousands of files there: removed off the event loop, which
        # every other task's calls share (a min_passed run was held 1.5 s)
        await asyncio.to_thread(shutil.rmtree, path, True)
