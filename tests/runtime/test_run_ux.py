"""What `harnessc run` tells its user: exit codes, summaries, next steps, clean stops (issue 11)."""

from __future__ import annotations

import json
import signal
import textwrap
import time

import pytest

from .helpers import PY, harnessc, node, spawn, write_project

SLOW_AGENT = textwrap.dedent("""
    import os, sys, time
    open(os.environ["STARTED"], "a").write(os.environ["HARNESSC_TASK"] + "\\n")
    sys.stdin.read()
    time.sleep(60)
""")


def _wait_for(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def _slow_project(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(SLOW_AGENT)
    root = tmp_path / "p"
    write_project(root, [node("slow", routing={"agent": "cli"}, completion_promise="DONE")],
                  agents={"cli": {"provider": "command", "command": [PY, str(script)],
                                  "env": {"STARTED": str(tmp_path / "started")}}})
    return root


@pytest.mark.parametrize("how", ["stop --abort", "ctrl-c twice", "sigterm"])
def test_aborting_a_command_agent_leaves_stderr_clean(tmp_path, how):
    root = _slow_project(tmp_path)
    p = spawn(root, "run")
    try:
        _wait_for(tmp_path / "started")
        if how == "stop --abort":
            assert harnessc(root, "stop", "--abort").returncode == 0
        elif how == "ctrl-c twice":
            p.send_signal(signal.SIGINT)
            time.sleep(0.3)
            p.send_signal(signal.SIGINT)
        else:
            p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3, out + err
    assert "never retrieved" not in err and "CancelledError" not in err, err
    assert "Traceback" not in err, err
    log = json.loads(harnessc(root, "log", "slow", "--json").stdout)
    assert log[-1]["status"] == "interrupted"
