"""Subprocess hygiene with real processes: argv only, process-group kill, caps, clean env."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import sys
import time

import pytest

from harnessc.argv import split_command
from harnessc.runtime.children import procs, reaper

PY = sys.executable


def run(*args, **kw):
    return asyncio.run(procs.run(*args, **kw))


def alive(pid: int) -> bool:
    """Running (a zombie left for a non-reaping init does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ends(pid: int, limit: float = 30.0) -> bool:
    """Whether the process is gone (or a zombie) within `limit` seconds: a SIGKILL ends it
    once the kernel runs it, which on a loaded machine may take a moment (polled, not timed)."""
    deadline = time.monotonic() + limit
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def group_members(pgid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(d))
    return out


def test_child_holding_stdout_is_killed_with_its_group(tmp_path):
    # The leader starts a grandchild that inherits stdout and sleeps, then sleeps itself (a
    # shell: it is there in a millisecond, where a Python may not print within the timeout
    # on a loaded machine).
    script = "sleep 60 & echo $! > child.pid; echo started; sleep 60"
    t0 = time.monotonic()
    res = run(["sh", "-c", script], cwd=tmp_path, timeout=1.5)
    took = time.monotonic() - t0
    assert res.timed_out and not res.ok
    assert took < 30  # not the 60 s the grandchild holds the output (no timing beyond that)
    assert "started" in res.stdout
    child = int((tmp_path / "child.pid").read_text())
    assert ends(child)
    assert group_members(res.pid) == []


def test_leader_exits_but_background_child_keeps_pipe(tmp_path):
    script = ("import subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "open('child.pid', 'w').write(str(p.pid))\n")
    t0 = time.monotonic()
    res = run([PY, "-c", script], cwd=tmp_path, timeout=30)
    assert res.returncode == 0 and time.monotonic() - t0 < 30  # not the 60 s the child holds the output
    child = int((tmp_path / "child.pid").read_text())
    assert ends(child)


def test_no_shell_ever(tmp_path):
    argv = split_command("echo hi; touch FILE")
    res = run(argv, cwd=tmp_path, timeout=5)
    assert res.ok
    assert res.stdout.strip() == "hi; touch FILE"
    assert not (tmp_path / "FILE").exists()


def test_output_is_capped_and_drained(tmp_path):
    res = run([PY, "-c", "import sys; sys.stdout.write('x' * (5 << 20))"], cwd=tmp_path,
              timeout=20, max_output=1 << 20)
    assert res.returncode == 0
    assert res.truncated and len(res.stdout) == 1 << 20
    assert any("discarded" in n for n in res.notes)


def test_missing_command_is_a_clear_error(tmp_path):
    res = run(["no-such-agent-cli-xyz", "--help"], cwd=tmp_path, timeout=5)
    assert not res.ok and res.error == "command not found: 'no-such-agent-cli-xyz'"


@pytest.mark.parametrize("shim", ["setpriv", "none"])
def test_a_program_is_found_and_refused_as_subprocess_would(tmp_path, monkeypatch, shim):
    # With the setpriv shim in front, setpriv is what gets executed: harnessc says itself
    # what subprocess would have said about the program (found in the child's PATH or
    # relative to its directory; missing; not executable).
    if shim == "none":
        monkeypatch.setattr(reaper, "_setpriv", lambda: None)
    elif reaper._setpriv() is None:
        pytest.skip("no setpriv with --pdeathsig here")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "hc-tool"
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    (bin_dir / "hc-plain").write_text("not a program\n")
    (tmp_path / "hc-dir").mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    found = run(["hc-tool"], cwd=tmp_path, timeout=30, env=env)
    assert found.ok and found.stdout == "tool ran\n"
    relative = run(["./bin/hc-tool"], cwd=tmp_path, timeout=30, env=env)
    assert relative.ok and relative.stdout == "tool ran\n"
    for argv0, error in [("hc-missing", "command not found: 'hc-missing'"),
                         ("./bin/hc-missing", "command not found: './bin/hc-missing'"),
                         ("hc-plain", "command not executable: 'hc-plain'"),
                         ("./hc-dir", "command not executable: './hc-dir'")]:
        res = run([argv0], cwd=tmp_path, timeout=30, env=env)
        assert (res.error, res.returncode) == (error, None), argv0


def test_stdin_is_devnull_for_accept_commands(tmp_path):
    res = run([PY, "-c", "import sys; print(repr(sys.stdin.read()))"], cwd=tmp_path, timeout=5)
    assert res.stdout.strip() == "''"


@pytest.mark.parametrize("size", [0, 300, 200_000, procs.HELD_INPUT + 1])
def test_the_whole_input_reaches_a_command_and_one_that_never_reads_it_still_ends(tmp_path, size):
    # Input up to HELD_INPUT is in the pipe before the command starts (a bigger pipe asked
    # for past 64 KiB); more is fed as the command reads.
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    reads = [PY, "-c", "import hashlib, sys; print(len(d := sys.stdin.buffer.read()), hashlib.sha256(d).hexdigest())"]
    res = run(reads, cwd=tmp_path, timeout=60, stdin=data)
    assert res.ok and res.stdout.split() == [str(size), hashlib.sha256(data).hexdigest()]
    res = run(["/bin/sh", "-c", "echo done"], cwd=tmp_path, timeout=60, stdin=data)
    assert (res.returncode, res.stdout, res.error) == (0, "done\n", None)


def _child_environ(tmp_path, **kw) -> dict:
    res = run([PY, "-c", "import os, json; print(json.dumps(dict(os.environ)))"], cwd=tmp_path,
              timeout=10, **kw)
    assert res.ok, res.stderr
    return json.loads(res.stdout)


def test_environment_is_an_allow_list(tmp_path, monkeypatch):
    # Regression: these passed through when only names that look secret were removed.
    monkeypatch.setenv("DATABASE_URL", "postgres://app:hunter2-pw@db/app")
    monkeypatch.setenv("PGPASSWORD", "hunter2-pw")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE123")
    monkeypatch.setenv("FOO_API_KEY", "k-123456")
    monkeypatch.setenv("PLAIN", "ok")
    monkeypatch.setenv("LC_TIME", "C")
    default = _child_environ(tmp_path)  # what an accept command gets
    for name in ("DATABASE_URL", "PGPASSWORD", "AWS_ACCESS_KEY_ID", "FOO_API_KEY", "PLAIN"):
        assert name not in default
    assert default["PATH"] == os.environ["PATH"] and default["LC_TIME"] == "C"
    assert default[reaper.ENV_MARK]  # the marker that lets harnessc find what it leaves
    assert set(default) <= set(procs.BASE_ENV) | {"LC_TIME", "LC_ALL", "LC_CTYPE", reaper.ENV_MARK} | {
        k for k in os.environ if k.startswith("LC_")}
    # An agent gets what it is configured to receive: pass_env names, then explicit values.
    agent = _child_environ(tmp_path, env=procs.child_env(["DATABASE_URL", "NOT_SET"],
                                                        {"EXPLICIT_API_KEY": "passed"}))
    assert agent["DATABASE_URL"] == "postgres://app:hunter2-pw@db/app"
    assert agent["EXPLICIT_API_KEY"] == "passed"
    assert "NOT_SET" not in agent and "PGPASSWORD" not in agent and "PLAIN" not in agent


def test_cancellation_kills_the_group(tmp_path):
    async def main():
        task = asyncio.create_task(procs.run(
            [PY, "-c", "import os, time; open('pid', 'w').write(str(os.getpid())); time.sleep(60)"],
            cwd=tmp_path, timeout=60))
        pid = tmp_path / "pid"
        while not (pid.exists() and pid.read_text()):  # its pid written whole: the call is under way
            assert not task.done(), task.result()
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert ends(int((tmp_path / "pid").read_text()))


def test_redaction_catches_reversed_and_base64_forms(tmp_path, monkeypatch):
    secret = "sk-ant-CANARY-7f3a9c1e5b2d4f60?>~"  # '?>~' puts '+' and '/' into base64
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    monkeypatch.setenv("DATABASE_URL", "postgres://app:pw-hunter2-xyz@db:5432/app")
    from harnessc.runtime.store.state import StateStore
    from harnessc.workspace import Workspace

    store = StateStore(Workspace(tmp_path))
    try:
        for plain in (secret, secret[::-1], "pw-hunter2-xyz"):
            assert store.redact(f"leak: {plain}.") == "leak: [redacted]."
        for prefix in (b"", b"a", b"ab", b"abc", b"\x00\xff"):
            for suffix in (b"", b"z", b"zz"):
                blob = prefix + secret.encode() + suffix
                for encode in (base64.b64encode, base64.urlsafe_b64encode):
                    for text in {encode(blob).decode(), encode(blob).decode().rstrip("=")}:
                        out = store.redact(f"leak: {text}.")
                        assert "[redacted]" in out, (prefix, suffix, text)
                        # Left: the characters that also encode the prefix or suffix, at most.
                        kept = len(out) - len("leak: [redacted].")
                        assert kept <= 2 * (len(prefix) + len(suffix)) + 4, (text, out)
    finally:
        store.close()


def test_on_line_is_told_the_last_line_printed_on_either_stream(tmp_path):
    # lines on stdout and stderr, a progress counter redrawn with \r, blank lines at the end
    script = ("import sys, time\n"
              "print('first', flush=True)\n"
              "print('to stderr', file=sys.stderr, flush=True)\n"
              "time.sleep(0.2)\n"
              "sys.stdout.write('10%\\r50%\\r100%\\n\\n  \\n'); sys.stdout.flush()\n"
              "time.sleep(0.2)\n"
              "sys.stdout.write('no newline yet'); sys.stdout.flush()\n")
    seen: list[str] = []
    res = run([PY, "-c", script], cwd=tmp_path, timeout=30, on_line=seen.append)
    assert res.ok, res.stderr
    assert seen[0] == "first" and "to stderr" in seen, seen
    assert seen.index("100%") < seen.index("no newline yet") == len(seen) - 1, seen
    assert "50%" not in seen and "" not in seen, seen
    # the output itself is what it was without a listener
    assert res.stdout == "first\n10%\r50%\r100%\n\n  \nno newline yet"


def test_last_line_reads_lines_split_across_chunks():
    seen: list[str] = []
    lines = procs.LastLine(seen.append)
    for chunk in (b"step 1 of", b" 3\nstep 2", b" of 3\n", b"\n", "é done\n".encode()[:1], "é done\n".encode()[1:]):
        lines.feed(chunk)
    # once a chunk, its last line (what is printed of it so far); a blank chunk says nothing;
    # a character cut in two shows as a replacement until its line is whole
    assert seen == ["step 1 of", "step 2", "step 2 of 3", "\ufffd", "é done"], seen


@pytest.mark.skipif(sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"),
                    reason="3.11's asyncio waits for each child in a thread of its own; 3.12+ uses pidfds itself")
def test_a_run_learns_of_its_commands_exits_without_a_thread_per_child(tmp_path, monkeypatch):
    """Every spawn waited for the start of asyncio's waitpid thread: a run watches pidfds."""
    import threading

    from harnessc.runtime.scheduler import RunOptions
    from harnessc.runtime.session import execute

    from .helpers import node, write_project

    started: list[str] = []
    real = threading.Thread.start

    def start(self):
        started.append(self.name)
        return real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    nodes = [node(f"t{i}", completion_promise="DONE", routing={"agent": "cmd", "chain": [], "reason": "test"})
             for i in range(3)]
    agents = {"cmd": {"provider": "command", "command": ["/bin/sh", "-c", "cat >/dev/null; echo '<promise>DONE</promise>'"]}}
    plan = write_project(tmp_path, nodes, agents=agents, concurrency=3)
    result = execute(tmp_path, plan, RunOptions(jobs=3))
    assert result.exit_code == 0, result.message
    assert [t["state"] for t in result.tasks] == ["succeeded"] * 3
    assert not [name for name in started if name.startswith("asyncio-waitpid")], started
    assert isinstance(asyncio.get_event_loop_policy().get_child_watcher(), asyncio.ThreadedChildWatcher)  # as it was
