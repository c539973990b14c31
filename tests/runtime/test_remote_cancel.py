"""A Ray worker's side of a cancel, without Ray: `ray.cancel` (no force) is
`_thread.interrupt_main()` in the worker, which sends no signal. The attempt's event loop must
hear it while it sleeps waiting on a quiet agent, and end the agent's whole process group;
else Ray's force-kill after the driver's grace ends the worker and its children only, and the
agent's children live on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from .helpers import REPO

SCRIPT = """\
import _thread, asyncio, os, sys, threading, time
from harnessc.runtime.children import procs
from harnessc.runtime.executor import remote

marker = sys.argv[1]

def running(pid):
    try:
        return marker.encode() in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False

def interrupt():
    me = str(os.getpid())  # its argv holds the marker too: the agent and its child are the others
    while sum(running(p) for p in os.listdir("/proc") if p.isdigit() and p != me) < 2:
        time.sleep(0.02)
    time.sleep(0.3)  # the loop is asleep, waiting on a child that prints nothing
    _thread.interrupt_main()  # what ray.cancel does in a worker

async def attempt():
    # the agent's own child sleeps in the agent's group, as a test runner's would
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])"
    return await procs.run([sys.executable, "-c", code, marker], cwd=".", timeout=None)

threading.Thread(target=interrupt, daemon=True).start()
try:
    remote._run(attempt())
    print("finished")
except (KeyboardInterrupt, asyncio.CancelledError) as e:
    print("cancelled", type(e).__name__)
"""


def carriers(marker: str) -> list[int]:
    out = []
    for p in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(p))
        except OSError:
            pass
    return out


def test_a_cancel_reaches_an_attempt_waiting_on_a_quiet_agent_and_ends_its_group(tmp_path):
    marker = f"harnessc-remote-cancel-{os.getpid()}-{time.time_ns()}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, marker], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)  # unheard, the attempt waits out the 300 s sleep
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    left = carriers(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert out.strip() == "cancelled KeyboardInterrupt", out + err
    assert left == []
