"""Subprocess hygiene with real processes: argv only, process-group kill, caps, clean env."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from harnessc.compiler.argv import split_command
from harnessc.runtime import procs

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
    # The leader starts a grandchild that inherits stdout and sleeps, then sleeps itself.
    script = ("import subprocess, sys, time\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "open('child.pid', 'w').write(str(p.pid))\n"
              "print('started', flush=True)\n"
              "time.sleep(60)\n")
    t0 = time.monotonic()
    res = run([PY, "-c", script], cwd=tmp_path, timeout=1.5)
    took = time.monotonic() - t0
    assert res.timed_out and not res.ok
    assert took < 1.5 + 2.0
    assert "started" in res.stdout
    child = int((tmp_path / "child.pid").read_text())
    time.sleep(0.2)
    assert not alive(child)
    assert group_members(res.pid) == []


def test_leader_exits_but_background_child_keeps_pipe(tmp_path):
    script = ("import subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              "open('child.pid', 'w').write(str(p.pid))\n")
    t0 = time.monotonic()
    res = run([PY, "-c", script], cwd=tmp_path, timeout=10)
    assert res.returncode == 0 and time.monotonic() - t0 < 5
    child = int((tmp_path / "child.pid").read_text())
    time.sleep(0.2)
    assert not alive(child)


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


def test_stdin_is_devnull_for_accept_commands(tmp_path):
    res = run([PY, "-c", "import sys; print(repr(sys.stdin.read()))"], cwd=tmp_path, timeout=5)
    assert res.stdout.strip() == "''"


def test_environment_has_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("FOO_API_KEY", "k-123456")
    monkeypatch.setenv("GH_TOKEN", "t-123456")
    monkeypatch.setenv("PLAIN", "ok")
    env = procs.clean_env({"EXPLICIT_API_KEY": "passed"})
    res = run([PY, "-c", "import os, json; print(json.dumps(dict(os.environ)))"], cwd=tmp_path,
              timeout=5, env=env)
    import json

    seen = json.loads(res.stdout)
    assert "FOO_API_KEY" not in seen and "GH_TOKEN" not in seen
    assert seen["PLAIN"] == "ok" and seen["EXPLICIT_API_KEY"] == "passed"


def test_cancellation_kills_the_group(tmp_path):
    async def main():
        task = asyncio.create_task(procs.run(
            [PY, "-c", "import os, time; open('pid', 'w').write(str(os.getpid())); time.sleep(60)"],
            cwd=tmp_path, timeout=60))
        for _ in range(100):
            await asyncio.sleep(0.05)
            if (tmp_path / "pid").exists():
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    pid = int((tmp_path / "pid").read_text())
    time.sleep(0.2)
    assert not alive(pid)
