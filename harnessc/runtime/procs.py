"""Subprocess hygiene, shared by accept commands and the command agent.

Every child gets an argv list (never a shell), its own process group (so a timeout or an
abort kills grandchildren too), a scrubbed environment, a timeout and capped output.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass, field


MAX_OUTPUT = 1 << 20  # bytes kept per stream; the rest is drained and dropped
KILL_GRACE = 1.0  # seconds between SIGTERM and SIGKILL
_SECRET_MARKS = ("API_KEY", "TOKEN", "SECRET")


def is_secret_name(name: str) -> bool:
    """Environment variables that must never reach a child or the disk."""
    upper = name.upper()
    return any(mark in upper for mark in _SECRET_MARKS)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """os.environ without secrets, plus what the agent config passes explicitly."""
    env = {k: v for k, v in os.environ.items() if not is_secret_name(k)}
    if extra:
        env.update({str(k): str(v) for k, v in extra.items()})
    return env


def secret_values(min_len: int = 6) -> list[str]:
    """Values of secret-looking variables in our environment, for redaction before writes."""
    return sorted(
        {v for k, v in os.environ.items() if is_secret_name(k) and len(v) >= min_len},
        key=len, reverse=True,
    )


@dataclass
class ProcResult:
    argv: list[str]
    returncode: int | None  # None when it never started or was killed on timeout
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False
    duration: float = 0.0
    error: str | None = None  # could not start: missing executable, permission...
    pid: int | None = None  # also the process group id
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.returncode == 0

    def describe(self) -> str:
        """One line saying what went wrong (or 'exit 0')."""
        name = self.argv[0] if self.argv else "?"
        if self.error:
            return self.error
        if self.timed_out:
            return f"'{name}' timed out after {self.duration:.1f}s (process group killed)"
        return f"'{name}' exited with {self.returncode}"


async def _drain(stream: asyncio.StreamReader | None, cap: int, flags: dict) -> bytes:
    """Read a stream to EOF, keeping the first `cap` bytes."""
    if stream is None:
        return b""
    kept = bytearray()
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return bytes(kept)
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room:
            flags["truncated"] = True


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _kill_group(proc: asyncio.subprocess.Process, grace: float = KILL_GRACE) -> None:
    """SIGTERM the whole group, then SIGKILL whatever is left after a grace period."""
    _killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        await asyncio.sleep(0.05)
    _killpg(proc.pid, signal.SIGKILL)


async def run(
    argv: list[str],
    *,
    cwd: str | os.PathLike,
    timeout: float | None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    max_output: int = MAX_OUTPUT,
) -> ProcResult:
    """Run argv to completion (or timeout), never blocking the event loop.

    stdin=None gives the child /dev/null. On cancellation (abort, Ctrl-C) the process group
    is killed before the CancelledError propagates.
    """
    start = time.monotonic()
    result = ProcResult(argv=list(argv), returncode=None)
    if not argv:
        result.error = "empty command"
        return result
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            env=env if env is not None else clean_env(),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # own process group: killpg reaches grandchildren
        )
    except FileNotFoundError:
        result.error = f"command not found: '{argv[0]}'"
        return result
    except PermissionError:
        result.error = f"command not executable: '{argv[0]}'"
        return result
    except OSError as e:
        result.error = f"could not start '{argv[0]}': {e.strerror or e}"
        return result

    result.pid = proc.pid
    flags: dict = {}
    readers = asyncio.gather(
        _drain(proc.stdout, max_output, flags), _drain(proc.stderr, max_output, flags)
    )
    # A cancelled gather ends with a CancelledError set as its exception; asyncio logs
    # "exception was never retrieved" for it unless someone looks. Look, always.
    readers.add_done_callback(_retrieve)

    async def feed() -> None:
        if stdin is not None and proc.stdin is not None:
            try:
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the child did not want its stdin; that is its business
            finally:
                proc.stdin.close()

    async def body():
        await feed()
        # asyncio's proc.wait() only returns once the pipes close, and a background child can
        # hold them open forever: watch the leader's exit status instead.
        while not readers.done():
            if proc.returncode is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(readers), 0.5)
                except asyncio.TimeoutError:
                    _killpg(proc.pid, signal.SIGKILL)
                    result.notes.append("background processes still holding output were killed")
                break
            await asyncio.wait({readers}, timeout=0.05)
        out_err = await readers
        await proc.wait()
        return out_err

    try:
        out, err = await asyncio.wait_for(body(), timeout)
        _killpg(proc.pid, signal.SIGKILL)  # leftovers that closed their pipes
        result.returncode = proc.returncode
    except asyncio.TimeoutError:
        result.timed_out = True
        await _kill_group(proc)
        try:
            out, err = await asyncio.wait_for(readers, 2.0)
        except asyncio.TimeoutError:
            out, err = b"", b""
        await proc.wait()
    except asyncio.CancelledError:
        _killpg(proc.pid, signal.SIGKILL)
        readers.cancel()
        try:  # reap it, so no transport outlives the event loop
            await asyncio.wait_for(proc.wait(), 2.0)
        except BaseException:
            pass
        raise
    result.stdout = out.decode("utf-8", "replace")
    result.stderr = err.decode("utf-8", "replace")
    if flags.get("truncated"):
        result.truncated = True
        result.notes.append(f"output over {max_output} bytes was discarded")
    result.duration = time.monotonic() - start
    return result
