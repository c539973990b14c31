"""Subprocess hygiene, shared by accept commands and the command agent.

Every child gets an argv list (never a shell), its own process group (so a timeout or an
abort kills grandchildren too), an environment built from an allow-list, a timeout and
capped output; whatever it leaves behind is ended when it ends (reaper.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import urlsplit

from ...childenv import (  # noqa: F401 - procs.child_env & co: the names its callers use
    BASE_ENV,
    child_env,
    forwarded_env,
    forwarding,
    stop_forwarding,
)
from . import reaper

MAX_OUTPUT = 1 << 20  # bytes kept per stream; the rest is drained and dropped
KILL_GRACE = 1.0  # seconds between SIGTERM and SIGKILL
_SECRET_MARKS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL",
                 "PRIVATE_KEY", "ACCESS_KEY")


@contextlib.contextmanager
def child_watching() -> Iterator[None]:
    """For a run (its asyncio.run): asyncio learns that a child exited from a pidfd on the
    event loop, as Python 3.12+ does by itself, instead of from a thread per child, whose
    start every spawn waits for. Where there are no pidfds (Linux < 5.3), outside the main
    thread (asyncio attaches a watcher to the main thread's loop only), on 3.12+ (which has
    it, and deprecates the watcher API) or with a watcher someone chose, nothing changes."""
    policy = asyncio.get_event_loop_policy()
    if (sys.version_info >= (3, 12) or threading.current_thread() is not threading.main_thread()
            or not _has_pidfd() or not isinstance(policy.get_child_watcher(), asyncio.ThreadedChildWatcher)):
        yield
        return
    policy.set_child_watcher(_Watcher())
    try:
        yield
    finally:
        policy.set_child_watcher(None)  # the next use makes the default one again


class _Watcher(asyncio.PidfdChildWatcher):
    """asyncio's pidfd watcher, which tells the reaper when a child is handed to it (right
    after its start) and when it took its exit status: a quick child may be reaped before
    procs.run registers it, and a child whose spawn is still in flight is no orphan."""

    def add_child_handler(self, pid: int, callback: Callable[..., object], *args: Any) -> None:  # type: ignore[override]  # typeshed's is generic over the callback's args
        reaper.born(pid)
        super().add_child_handler(pid, callback, *args)

    def _do_wait(self, pid: int) -> None:
        try:
            super()._do_wait(pid)  # type: ignore[misc]  # (3.11's, fixed: this watcher is used before 3.12 only)
        finally:
            reaper.waited(pid)


def _has_pidfd() -> bool:
    try:
        os.close(os.pidfd_open(os.getpid()))
        return True
    except (AttributeError, OSError):
        return False


def is_secret_name(name: str) -> bool:
    """Environment variables whose values must never reach the disk."""
    upper = name.upper()
    return any(mark in upper for mark in _SECRET_MARKS)


def secret_values(min_len: int = 6, names: Iterable[str] = ()) -> list[str]:
    """Every form of our secrets a child could print, longest first, for redaction before writes.

    Secrets: values of secret-looking variables and of the variables in `names` (an agent's
    api_key_env, whatever it is called), and passwords inside URLs (DATABASE_URL).
    Forms: the value, reversed, and base64 (standard and URL-safe) at each byte offset.
    """
    found = set()
    named = set(names)
    for name, value in os.environ.items():
        if is_secret_name(name) or name in named:
            found.add(value)
        if "://" in value and "@" in value:
            try:
                found.add(urlsplit(value).password or "")
            except ValueError:
                pass
    return secret_forms(found, min_len)


def secret_forms(values: Iterable[str], min_len: int = 6) -> list[str]:
    """The forms of `values` (as secret_values), longest first; a value shorter than
    `min_len` is none: it would blank ordinary text."""
    forms = set()
    for value in values:
        if len(value) >= min_len:
            forms.add(value)
            forms.add(value[::-1])
            forms.update(base64_forms(value.encode("utf-8")))
    return sorted(forms, key=len, reverse=True)


REDACTED = "[redacted]"


def scrubbed(value: Any, secrets: list[str]) -> Any:
    """`value` with each of `secrets` replaced in every string it holds (dicts and lists copied)."""
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrubbed(v, secrets) for v in value]
    return value


def base64_forms(secret: bytes) -> set[str]:
    """The base64 text that encodes `secret` wherever it sits in a longer encoded blob.

    At byte offset k (0-2) the characters that depend only on the secret's bits are the same
    whatever surrounds it, padded or not; those are the forms (standard and URL-safe).
    """
    forms = set()
    bits = 8 * len(secret)
    for k in range(3):
        text = base64.b64encode(b"\0" * k + secret).decode().rstrip("=")
        first = -(-8 * k // 6)  # the first character whose 6 bits all belong to the secret
        last = (8 * k + bits) // 6  # one past the last such character
        core = text[first:last]
        forms.add(core)
        forms.add(core.translate(str.maketrans("+/", "-_")))
    return forms


@dataclass
class ProcResult:
    argv: list[str]
    returncode: int | None  # None when it never started or was killed on timeout
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    truncated: bool = False  # stdout or stderr was cut at max_output
    stdout_truncated: bool = False
    duration: float = 0.0
    error: str | None = None  # could not start: missing executable, permission...
    pid: int | None = None  # also the process group id
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.returncode == 0

    def describe(self, name: str | None = None) -> str:
        """One line saying what went wrong (or 'exit 0'); `name`: what to call the command
        (default: its program, quoted)."""
        name = name or f"'{self.argv[0] if self.argv else '?'}'"
        if self.error:
            return self.error
        if self.timed_out:
            return f"{name} timed out after {self.duration:.1f}s (process group killed)"
        return f"{name} exited with {self.returncode}"


class LastLine:
    """Tells `on_line` the last non-blank line a stream printed, once per chunk read (a live
    display shows it): only that line is decoded, and nothing is stored or recorded."""

    KEEP = 4096  # bytes kept of a line still being printed (a long one: its end)

    def __init__(self, on_line: Callable[[str], None]):
        self.on_line = on_line
        self.partial = b""  # the line being printed: what followed the last newline

    def feed(self, chunk: bytes) -> None:
        data = self.partial + chunk
        cut = data.rfind(b"\n")
        self.partial = data[cut + 1:][-self.KEEP:]
        end = len(data)
        while end > 0:  # from the end: the last line with something on it
            start = data.rfind(b"\n", 0, end) + 1
            line = data[start:end][-self.KEEP:].rstrip().rsplit(b"\r", 1)[-1].strip()  # \r redraws a line
            if line:
                self.on_line(line.decode("utf-8", "replace"))
                return
            end = start - 1


async def _drain(stream: asyncio.StreamReader | None, cap: int, flags: dict, kept: bytearray,
                 name: str = "", lines: LastLine | None = None, keep_end: bool = False) -> None:
    """Read a stream to EOF, keeping the first `cap` bytes in `kept` (keep_end: the last)
    (there even if cancelled); a stream cut is named in flags["cut"]. With `lines`, each
    chunk is told to it."""
    if stream is None:
        return
    while True:
        chunk = await stream.read(65536)
        if keep_end and (not chunk or len(kept) + len(chunk) > 2 * cap):  # trimmed now and then: linear
            if len(kept) + len(chunk) > cap:
                flags["truncated"] = True
                flags.setdefault("cut", set()).add(name)
            del kept[:max(0, len(kept) + len(chunk) - cap)]
        if not chunk:
            return
        if keep_end:
            kept += chunk[-cap:]
            if lines is not None:
                lines.feed(chunk)
            continue
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room:
            flags["truncated"] = True
            flags.setdefault("cut", set()).add(name)
        if lines is not None:
            lines.feed(chunk)


def _retrieve(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


async def _finishes(fut: asyncio.Future, seconds: float) -> bool:
    """Whether `fut` is done within `seconds` (it is never cancelled here)."""
    await asyncio.wait({fut}, timeout=seconds)
    return fut.done()


def _stop_reading(proc: asyncio.subprocess.Process, readers: asyncio.Future) -> None:
    """Give up on pipes that something we cannot kill still holds open: proc.wait() only
    returns once they are closed, and asyncio has no public way to close them."""
    readers.cancel()
    proc._transport.close()  # type: ignore[attr-defined]  # the process has exited: this closes its pipes, nothing more


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
    on_line: Callable[[str], None] | None = None,
    keep_end: bool = False,
) -> ProcResult:
    """Run argv to completion (or timeout), never blocking the event loop.

    stdin=None gives the child /dev/null; `stdin` bytes are in its stdin pipe before it starts
    (fed as it reads when they do not fit). On cancellation (abort, Ctrl-C) the process group
    is killed before the CancelledError propagates. `on_line` is told the last line the
    child printed (stdout or stderr, whichever printed last) as it prints.
    """
    start = time.monotonic()
    result = ProcResult(argv=list(argv), returncode=None)
    if not argv:
        result.error = "empty command"
        return result
    child = reaper.child()
    env = child.environment(env if env is not None else child_env())
    if child.shim:  # the shim starts whatever it is given: say what Popen would have said
        why = cannot_start(argv[0], env, cwd)
        if why:
            result.error = why
            return result
    held = _held_input(stdin) if stdin is not None else None
    try:
        proc = await child.spawn(_spawn(
            child.command(argv),
            cwd=str(cwd),
            env=env,
            stdin=(held if held is not None else asyncio.subprocess.PIPE) if stdin is not None
            else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # own process group: killpg reaches grandchildren
            preexec_fn=child.preexec,  # dies with harnessc, where there is no shim for it
        ))
    except FileNotFoundError:
        result.error = f"command not found: '{argv[0]}'"
        return result
    except PermissionError:
        result.error = f"command not executable: '{argv[0]}'"
        return result
    except OSError as e:
        result.error = f"could not start '{argv[0]}': {e.strerror or e}"
        return result
    finally:
        if held is not None:
            os.close(held)  # the child has its copy

    result.pid = proc.pid
    child.started(proc.pid)
    try:
        return await _supervise(proc, child, result, stdin, timeout, max_output, start, on_line, keep_end)
    finally:
        # After it was waited for: the rest of its processes go too.
        child.ended(proc.pid, reaped=proc.returncode is not None)


def _held_input(data: bytes) -> int | None:
    """The read end of a pipe already holding all of `data` and closed for writing: the
    child's stdin, with no transport to feed it (a write, a drain and a close on the event
    loop per call). None when the pipe has no room for it all: it is fed as the child reads."""
    if len(data) > HELD_INPUT:
        return None
    read, write = os.pipe2(os.O_CLOEXEC)
    try:
        os.set_blocking(write, False)
        if len(data) > _PIPE_ROOM:
            fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, len(data))
        if not data or os.write(write, data) == len(data):
            return read
    except OSError:  # no room (a user over the kernel's pipe limits gets small pipes)
        pass
    finally:
        os.close(write)
    os.close(read)
    return None


HELD_INPUT = 1 << 20  # bytes of stdin put in the pipe before the child starts, at most
_PIPE_ROOM = 1 << 16  # bytes a new pipe holds (one asked bigger may be refused: then fed)


class _Pipes(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's protocol for a child's pipes, which also says when the child exited
    (`exited`): its pipes may outlive it, held by a background process."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop):
        super().__init__(limit=limit, loop=loop)
        self.exited = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class _Process(asyncio.subprocess.Process):
    """asyncio's Process with `exited`: done when the child exited, its pipes closed or not
    (proc.wait() waits for both)."""

    def __init__(self, transport: Any, protocol: _Pipes, loop: asyncio.AbstractEventLoop):
        super().__init__(transport, protocol, loop)
        self.exited: asyncio.Future = protocol.exited


async def _spawn(argv: list[str], **kw: Any) -> _Process:
    """asyncio.create_subprocess_exec, with the child's exit to await (_Process.exited)."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(lambda: _Pipes(2 ** 16, loop), *argv, **kw)
    return _Process(transport, protocol, loop)


def cannot_start(program: str, env: dict[str, str], cwd: str | os.PathLike) -> str | None:
    """Why `program` cannot be executed, as subprocess would say it (None: it can): looked up
    in the child's PATH unless it holds a slash, relative to the child's directory."""
    dirs = [""] if os.path.dirname(program) else os.get_exec_path(env)
    denied = False
    for d in dirs:
        path = os.path.join(cwd, d, program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return None
        denied = denied or os.path.exists(path)
    return f"command {'not executable' if denied else 'not found'}: '{program}'"


async def _supervise(proc: _Process, child: reaper.Child, result: ProcResult,
                     stdin: bytes | None, timeout: float | None, max_output: int,
                     start: float, on_line: Callable[[str], None] | None = None,
                     keep_end: bool = False) -> ProcResult:
    """Feed, drain and wait for a started child, killing all it started on timeout or cancel."""
    flags: dict = {}
    out, err = bytearray(), bytearray()
    readers = asyncio.gather(
        _drain(proc.stdout, max_output, flags, out, "stdout", on_line and LastLine(on_line), keep_end),
        _drain(proc.stderr, max_output, flags, err, "stderr", on_line and LastLine(on_line), keep_end),
    )
    # A cancelled gather ends with a CancelledError set as its exception; asyncio logs
    # "exception was never retrieved" for it unless someone looks. Look, always.
    readers.add_done_callback(_retrieve)

    def kill_all() -> None:
        """SIGKILL its process group and whatever carries its marker (setsid or not)."""
        child.kill(proc.pid)

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
        # hold them open forever: the leader's exit ends the wait too.
        await asyncio.wait({readers, proc.exited}, return_when=asyncio.FIRST_COMPLETED)
        if not readers.done() and not await _finishes(readers, 0.5):
            kill_all()
            result.notes.append("background processes still holding output were killed")
            if not await _finishes(readers, 0.5):  # a holder out of reach
                _stop_reading(proc, readers)
                result.notes.append("output held open by a process outside the command was cut")
        await proc.wait()

    try:
        async with asyncio.timeout(timeout):  # what it left is ended in run's finally
            await body()
        result.returncode = proc.returncode
    except TimeoutError:
        result.timed_out = True
        await _kill_group(proc)
        child.kill(proc.pid)
        if not await _finishes(readers, 2.0):
            _stop_reading(proc, readers)
        await proc.wait()
    except asyncio.CancelledError:
        kill_all()
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
        result.stdout_truncated = "stdout" in flags["cut"]
        result.notes.append(f"output over {max_output} bytes was discarded")
    result.duration = time.monotonic() - start
    return result
