"""Nothing harnessc starts outlives it, and no child reads its keys: real processes, real CLI.

Processes are checked by pid through /proc; every wait polls with a generous limit.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from harnessc.planfile import AcceptCommand
from harnessc.runtime import verify
from harnessc.runtime.children import lifeline, prctl, procs, reaper
from harnessc.runtime.store.state import SCHEMA_VERSION, StateStore
from harnessc.workspace import Workspace

from .helpers import CLI, PY, REPO, env, harnessc, node, spawn, write_project
from .test_procs import group_members

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc and prctl")

# A process that leaves its session and ignores SIGTERM: only SIGKILL ends it.
STUBBORN = ("import os, signal, sys, time\n"
            "os.setsid()\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
            "time.sleep(300)\n")


def alive(pid: int) -> bool:
    """Running (a zombie left for a non-reaping init does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_until(check, limit: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def read_pid(path: Path) -> int:
    return wait_until(lambda: path.exists() and path.read_text().strip().isdigit()
                      and int(path.read_text()), what=f"{path.name}")


def kill_all(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, TypeError):
            pass


def run(*args, **kw):
    return asyncio.run(procs.run(*args, **kw))


@pytest.fixture(params=["outside a run", "in a run"])
def scope(request):
    """Commands run as procs.run alone (no subreaper: a command's end scans /proc for its
    marker), or inside a run (subreaper: only adopted orphans are looked at)."""
    if request.param == "outside a run":
        yield
        return
    with reaper.adopting(f"test-{os.getpid()}"):
        assert reaper._adopting or not prctl.is_subreaper()
        yield


# ------------------------------------------------------------------ one command


@pytest.mark.parametrize("how", ["exits", "times_out"])
def test_setsid_grandchild_ignoring_sigterm_is_ended_with_its_command(tmp_path, how, scope):
    gpid = tmp_path / "grandchild.pid"
    leader = ("import subprocess, sys, time\n"
              f"subprocess.Popen([sys.executable, '-c', {STUBBORN!r}, {str(gpid)!r}],"
              " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
              f"while not open({str(gpid)!r}, 'a+').tell(): time.sleep(0.01)\n"
              + ("time.sleep(300)\n" if how == "times_out" else ""))
    res = run([PY, "-c", leader], cwd=tmp_path, timeout=60 if how == "exits" else 3)
    grandchild = read_pid(gpid)
    try:
        assert res.timed_out == (how == "times_out")
        wait_until(lambda: not alive(grandchild), what="the setsid grandchild to be killed")
    finally:
        kill_all([grandchild])


def test_concurrent_commands_do_not_end_each_others_processes(tmp_path, scope):
    a_pid, b_pid, release = tmp_path / "a.pid", tmp_path / "b.pid", tmp_path / "release"

    def leader(pidfile: Path, wait: bool) -> list[str]:
        code = ("import os, subprocess, sys, time\n"
                f"subprocess.Popen([sys.executable, '-c', {STUBBORN!r}, {str(pidfile)!r}])\n"
                f"while not os.path.exists({str(pidfile)!r}): time.sleep(0.01)\n"
                + (f"while not os.path.exists({str(release)!r}): time.sleep(0.02)\n" if wait else ""))
        return [PY, "-c", code]

    async def main():
        a = asyncio.create_task(procs.run(leader(a_pid, True), cwd=tmp_path, timeout=120))
        b = await procs.run(leader(b_pid, False), cwd=tmp_path, timeout=60)
        assert b.ok, b.stderr
        a_grandchild, b_grandchild = read_pid(a_pid), read_pid(b_pid)
        try:
            wait_until(lambda: not alive(b_grandchild), what="b's grandchild to end with b")
            assert alive(a_grandchild), "b's end killed a process of a, which still runs"
            assert not a.done()
            release.write_text("go")
            assert (await a).ok
            wait_until(lambda: not alive(a_grandchild), what="a's grandchild to end with a")
        finally:
            kill_all([a_grandchild, b_grandchild])

    asyncio.run(main())


def test_a_setsid_chain_left_by_a_command_is_ended_with_it(tmp_path, scope):
    # The leader starts a setsid middle process, which starts a grandchild of its own, then
    # exits: the middle one is adopted by us; the grandchild only once the middle one is gone.
    middle_pid, grandchild_pid = tmp_path / "middle.pid", tmp_path / "grandchild.pid"
    middle = ("import os, signal, subprocess, sys, time\n"
              "os.setsid()\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              f"subprocess.Popen([sys.executable, '-c', {STUBBORN!r}, {str(grandchild_pid)!r}])\n"
              f"open({str(middle_pid)!r}, 'w').write(str(os.getpid()))\n"
              "time.sleep(300)\n")
    leader = ("import os, subprocess, sys, time\n"
              f"subprocess.Popen([sys.executable, '-c', {middle!r}], stdout=subprocess.DEVNULL)\n"
              f"while not (os.path.exists({str(middle_pid)!r}) and os.path.exists({str(grandchild_pid)!r})):"
              " time.sleep(0.01)\n")
    res = run([PY, "-c", leader], cwd=tmp_path, timeout=60)
    pids = [read_pid(middle_pid), read_pid(grandchild_pid)]
    try:
        assert res.ok, res.stderr
        wait_until(lambda: not any(alive(p) for p in pids), what="the middle process and its child to end")
    finally:
        kill_all(pids)


def test_in_a_run_only_a_command_leaving_its_group_alive_reads_all_of_proc(tmp_path, monkeypatch):
    # A command that leaves nothing costs no scan of /proc (its group is empty and nothing was
    # adopted); one whose group lives on is ended by marker, which takes the scan.
    me = os.getpid()
    if not os.path.exists(f"/proc/{me}/task/{me}/children"):
        pytest.skip("this kernel lists no children in /proc (CONFIG_PROC_CHILDREN)")
    scans = []
    every_pid = lifeline.pids
    monkeypatch.setattr(lifeline, "pids", lambda: scans.append(1) or every_pid())
    background = tmp_path / "background.pid"
    leaves_one = ("import subprocess, sys\n"
                  "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
                  " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                  f"open({str(background)!r}, 'w').write(str(p.pid))\n")
    with reaper.adopting(f"test-{me}"):
        for _ in range(3):
            assert run(["/bin/sh", "-c", "exit 0"], cwd=tmp_path, timeout=60).ok
        assert scans == []
        assert run([PY, "-c", leaves_one], cwd=tmp_path, timeout=60).ok
        left = read_pid(background)
        try:
            assert scans != []
            wait_until(lambda: not alive(left), what="the process left in the group to be killed")
        finally:
            kill_all([left])


@pytest.fixture
def pidfd_watcher():
    """asyncio learns of a child's exit from the event loop (a pidfd), as it does by default
    from Python 3.12 on: a reaper running in the loop before it takes the status for sure.
    (3.11's default, a thread per child blocked in waitpid, mostly wins that race.) A run
    uses it too (procs.child_watching)."""
    with procs.child_watching():
        yield


def _exited_sh_children() -> list[int]:
    """Our children that are zombies named sh."""
    me, out = os.getpid(), []
    with open(f"/proc/{me}/task/{me}/children") as f:
        for pid in map(int, f.read().split()):
            try:
                with open(f"/proc/{pid}/stat") as st:
                    name, rest = st.read().rsplit(")", 1)
            except OSError:
                continue
            if name.endswith("(sh") and rest.split()[0] == "Z":
                out.append(pid)
    return out


def test_a_child_that_exits_before_its_spawn_returns_is_left_to_asyncio(tmp_path, pidfd_watcher):
    # asyncio has forked the child (procs.run awaits its pipes, it has not counted it yet),
    # the child has exited, and another command's end reaps orphans: the exit status is
    # asyncio's to take (3), not the reaper's (asyncio would report 255).
    async def main() -> procs.ProcResult:
        assert not _exited_sh_children()
        task = asyncio.create_task(procs.run(["/bin/sh", "-c", "exit 3"], cwd=tmp_path, timeout=60))
        await asyncio.sleep(0)  # procs.run starts the child, then waits for its pipes
        wait_until(_exited_sh_children, what="the child to exit")  # the loop waits too
        reaper.reap_orphans()
        return await task

    with reaper.adopting(f"test-{os.getpid()}"):
        res = asyncio.run(main())
    assert (res.returncode, res.error) == (3, None)


def test_a_child_that_exits_before_its_spawn_returns_is_still_registered_with_its_start_time(
        tmp_path, pidfd_watcher, monkeypatch):
    # asyncio reaps the quick child before procs.run gets to register it: /proc has no start
    # time left by then, yet the lifeline and the attempt's record need it.
    registered, recorded = [], []
    async def main() -> procs.ProcResult:
        reaper.enter(f"test-{os.getpid()}.quick", lambda pid, start: recorded.append(start))
        task = asyncio.create_task(procs.run(["/bin/sh", "-c", "exit 3"], cwd=tmp_path, timeout=60))
        await asyncio.sleep(0)  # procs.run starts the child, then waits for its pipes
        wait_until(_exited_sh_children, what="the child to exit")  # the loop waits too
        return await task

    with reaper.adopting(f"test-{os.getpid()}"):
        monkeypatch.setattr(reaper._lifeline, "register", lambda pgid, start: registered.append(start) or True)
        res = asyncio.run(main())
    assert (res.returncode, res.error) == (3, None)
    assert len(recorded) == 1 and recorded[0] is not None and registered == recorded


def test_fast_commands_keep_their_exit_statuses_with_the_reaper_on(tmp_path, pidfd_watcher):
    # 5,000 commands that exit at once, 64 at a time, half of them accept commands, with
    # orphans reaped after each: asyncio must get every exit status. (A reaper that waited
    # for a child asyncio had just started took its status: asyncio reported 255.)
    async def one(i: int, gate: asyncio.Semaphore) -> tuple[int, procs.ProcResult]:
        status = 3 if i % 2 else 0
        argv = ["/bin/sh", "-c", f"exit {status}"]
        async with gate:
            if i % 4 < 2:
                return status, await procs.run(argv, cwd=tmp_path, timeout=120)
            accept = AcceptCommand(id=f"a{i}", argv=argv, timeout=120)
            return status, await verify.run_accept(accept, tmp_path, None)

    async def main() -> list[tuple[int, procs.ProcResult]]:
        gate = asyncio.Semaphore(64)
        return await asyncio.gather(*(one(i, gate) for i in range(5000)))

    with reaper.adopting(f"test-{os.getpid()}"):
        results = asyncio.run(main())
    wrong = [(want, r.returncode, r.error) for want, r in results if r.returncode != want or r.error]
    assert wrong == [], f"{len(wrong)} of 5000 commands got a wrong exit status: {wrong[:5]}"


@pytest.mark.parametrize("how", ["setpriv", "preexec"])
def test_a_child_dies_with_its_parent(tmp_path, how):
    # An intermediate process starts a sleeper through procs.run, then is killed with -9:
    # the sleeper gets SIGKILL from the kernel (PR_SET_PDEATHSIG), nobody cleans up. The
    # death signal is set by the setpriv shim, or by a preexec_fn where there is no setpriv.
    if how == "setpriv" and reaper._setpriv() is None:
        pytest.skip("no setpriv with --pdeathsig here")
    child_pid = tmp_path / "child.pid"
    code = ("import asyncio, sys\n"
            "from harnessc.runtime.children import procs, reaper\n"
            + ("reaper._setpriv = lambda: None\n" if how == "preexec" else "")
            + f"assert bool(reaper.child().shim) == {how == 'setpriv'}\n"
            "asyncio.run(procs.run([sys.executable, '-c', "
            f"\"import os, time; open({str(child_pid)!r}, 'w').write(str(os.getpid())); time.sleep(300)\"],"
            f" cwd={str(tmp_path)!r}, timeout=300))\n")
    parent = subprocess.Popen([PY, "-c", code], env=env())
    child = read_pid(child_pid)
    try:
        assert alive(child)
        parent.kill()
        parent.wait(timeout=30)
        wait_until(lambda: not alive(child), what="the child to die with its parent")
    finally:
        kill_all([child])
        if parent.poll() is None:
            parent.kill()


def test_without_prctl_commands_still_run(tmp_path, monkeypatch):
    # Not Linux (or no libc prctl): no pdeathsig, no subreaper, no crash.
    monkeypatch.setattr(prctl, "function", lambda: None)
    assert not prctl.make_undumpable() and not prctl.is_subreaper()
    assert reaper.child().preexec is None and reaper.child().shim == []
    res = run([PY, "-c", "print('ran')"], cwd=tmp_path, timeout=30)
    assert res.ok and res.stdout.strip() == "ran"
    with reaper.adopting("test-run"):
        assert run([PY, "-c", "pass"], cwd=tmp_path, timeout=30).ok


def test_a_child_whose_parent_died_before_prctl_exits(tmp_path):
    # The preexec step (where there is no setpriv)'s guard runs in the child: if its parent is no longer the process that
    # started it (harnessc died before prctl took effect), it exits instead of running on.
    script = tmp_path / "guard.py"
    script.write_text(textwrap.dedent("""
        import os
        from harnessc.runtime.children import reaper
        setup = reaper.pdeathsig_preexec()

        def fork_and_setup():
            pid = os.fork()
            if pid == 0:
                setup()
                os._exit(0)  # what exec would be
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

        direct = fork_and_setup()  # a child of the process that resolved the step
        pid = os.fork()
        if pid == 0:  # a grandchild: its parent is someone else, as after harnessc died
            os._exit(10 + fork_and_setup())
        print(direct, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) - 10)
    """))
    r = subprocess.run([PY, str(script)], capture_output=True, text=True, env=env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "1"]


# ------------------------------------------------------------------ the lifeline (one watcher per run)


def _watcher(adopting_pid: int) -> int:
    """The lifeline watcher among a process's children (its cmdline runs lifeline.py)."""
    with open(f"/proc/{adopting_pid}/task/{adopting_pid}/children") as f:
        children = [int(p) for p in f.read().split()]
    for pid in children:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if lifeline.__file__.encode() in f.read().split(b"\0"):
                return pid
    raise AssertionError("no lifeline watcher among our children")


def test_in_a_run_commands_start_without_a_shim_and_fall_back_to_it_when_the_watcher_dies(tmp_path):
    with reaper.adopting(f"test-{os.getpid()}"):
        first = reaper.child()
        assert (first.shim, first.preexec) == ([], None) and first.lifeline is not None
        assert run([PY, "-c", "print('ran')"], cwd=tmp_path, timeout=30).stdout.strip() == "ran"
        group = _watcher(os.getpid())
        os.killpg(group, signal.SIGKILL)  # the watcher and its waiting parent
        deadline = time.monotonic() + 120  # gone, its pipe's end with it (a moment, under load)
        while group_members(group):
            assert time.monotonic() < deadline, f"the watcher's group {group} outlived its SIGKILL"
            time.sleep(0.02)
        # The next registration finds the pipe broken: that command still runs, and the
        # ones after it are started under the setpriv shim (or the preexec_fn) again.
        assert run([PY, "-c", "print('ran')"], cwd=tmp_path, timeout=30).stdout.strip() == "ran"
        later = reaper.child()
        assert later.lifeline is None and (later.shim or later.preexec)
        assert run([PY, "-c", "print('ran')"], cwd=tmp_path, timeout=30).stdout.strip() == "ran"


# Run in a pid namespace of its own (unshare): rewinding the kernel's next pid
# (ns_last_pid) in the machine's namespace hands recently freed numbers to whatever other
# tests start next, and their cleanups, which kill by remembered pid, then hit the newcomers.
REUSED_PID = """\
import json, os, signal, subprocess, sys, time
from harnessc.runtime.children import lifeline, reaper

told = sys.argv[1] == "told it ended"

def spawn_with_pid(pid):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    p = subprocess.Popen(["sleep", "300"], start_new_session=True)
    if p.pid == pid:
        return p
    p.kill()
    p.wait()
    return None

line = lifeline.Lifeline.start()
unrelated = None
for _ in range(50):  # the watcher's own start may take the number first
    group = subprocess.Popen(["sleep", "300"], start_new_session=True)
    assert line.register(group.pid, reaper.start_time(group.pid))
    group.kill()
    group.wait()
    if told:
        line.gone(group.pid)
    time.sleep(0.05)  # start times count clock ticks: the next one differs
    unrelated = spawn_with_pid(group.pid)
    if unrelated is not None:
        break
if unrelated is None:
    print(json.dumps({"reused": False}))
    sys.exit(0)
line.close()  # EOF, as when harnessc dies
alive = unrelated.poll() is None
unrelated.kill()
print(json.dumps({"reused": True, "watcher": line.watcher.returncode, "alive": alive}))
"""


@pytest.mark.parametrize("told", ["told it ended", "never told"])
def test_the_watcher_spares_an_unrelated_group_that_reuses_a_registered_pgid(told):
    # A registered group exits and is reaped; an unrelated process gets the same pid (and
    # group id), and harnessc dies: the watcher leaves it alone, whether harnessc told it the
    # group ended ("- pgid") or not (then the leader's start time differs).
    unshare = shutil.which("unshare")
    probe = unshare and subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"],
                                       capture_output=True, timeout=60)
    if os.geteuid() != 0 or not probe or probe.returncode != 0:
        pytest.skip("reusing a pid on purpose needs root and a pid namespace of its own (unshare)")
    r = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", PY, "-c", REUSED_PID, told],
                       capture_output=True, text=True, timeout=120, env={**env(), "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    if not result["reused"]:
        pytest.skip("could not get the pid reused")
    assert result["watcher"] == 0
    assert result["alive"], "the watcher killed an unrelated group that reused the pgid"


def test_the_watcher_kills_a_registered_group_at_eof_and_spares_one_that_ended():
    line = lifeline.Lifeline.start()
    assert line is not None
    groups = [subprocess.Popen(["/bin/sh", "-c", "sleep 300 & sleep 300"], start_new_session=True)
              for _ in range(2)]
    try:
        for g in groups:
            assert line.register(g.pid, reaper.start_time(g.pid))
        line.gone(groups[1].pid)  # harnessc ended it (it is left running here, to see)
        line.close()
        groups[0].wait(timeout=30)
        assert groups[0].returncode == -signal.SIGKILL and groups[1].poll() is None
        wait_until(lambda: not _in_group(groups[0].pid), what="the background sleep of the group to die")
        assert _in_group(groups[1].pid)
    finally:
        for g in groups:
            os.killpg(g.pid, signal.SIGKILL) if g.poll() is None else None
            g.wait()


def _wakeups(pid: int) -> int:
    """How many times process `pid` slept and was woken (voluntary context switches)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))


def test_the_watcher_is_not_woken_by_each_record_and_still_kills_at_eof():
    # Woken at each record, the watcher took the CPU from harnessc twice per command on a
    # busy machine. It sleeps until harnessc's end (or its next read, every DRAIN seconds).
    line = lifeline.Lifeline.start()
    assert line is not None
    group = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        watcher = wait_until(lambda: _children(line.watcher.pid), what="the watcher to start")[0]
        start = reaper.start_time(group.pid)
        before = _wakeups(watcher)
        for _ in range(100):  # spaced out, as commands start: each one woke a reading watcher
            assert line.register(group.pid, start) and line.gone(group.pid) is None
            time.sleep(0.005)
        assert _wakeups(watcher) - before < 40  # (it was woken about once a record: 150 or more)
        assert line.register(group.pid, start)
        line.close()  # EOF, as when harnessc dies
        assert group.wait(timeout=30) == -signal.SIGKILL
    finally:
        if group.poll() is None:
            group.kill()
            group.wait()
        if line.watcher.poll() is None:
            line.watcher.kill()


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def _in_group(pgid: int) -> list[int]:
    """Live processes in process group `pgid`."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = reaper._stat(int(name))
            if fields and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                out.append(int(name))
    return out


# ------------------------------------------------------------------ the real CLI


AGENT = textwrap.dedent("""
    import json, os, subprocess, sys, time
    work = os.environ["WORK"]
    sys.stdin.read()
    earlier = []
    if os.path.exists(os.path.join(work, "pids.json")):
        earlier = list(json.load(open(os.path.join(work, "pids.json"))).values())
    def running(pid):
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] not in "ZX"
        except OSError:
            return False
    with open(os.path.join(work, "agents.log"), "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "earlier_alive": [p for p in earlier if running(p)]}) + "\\n")
    if os.path.exists(os.path.join(work, "finish")):
        print("<promise>DONE</promise>")
        sys.exit(0)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    gpid = os.path.join(work, "grandchild.pid")
    subprocess.Popen([sys.executable, "-c", sys.argv[1], gpid])
    while not os.path.exists(gpid) or not open(gpid).read():
        time.sleep(0.01)
    pids = {"agent": os.getpid(), "child": child.pid, "grandchild": int(open(gpid).read())}
    json.dump(pids, open(os.path.join(work, "pids.json.tmp"), "w"))
    os.replace(os.path.join(work, "pids.json.tmp"), os.path.join(work, "pids.json"))
    time.sleep(300)
""")


@pytest.mark.parametrize("killed", ["harnessc", "harnessc and its watcher"])
def test_kill_9_of_harnessc_kills_its_agent_and_the_resumed_run_ends_the_rest(tmp_path, killed):
    # kill -9 of harnessc: its watcher ends the agent's group and what the agent started in a
    # session of its own (it carries the run's marker). Where the watcher died too, all of it
    # lives on, and the resumed run ends it before its agent starts.
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    root = tmp_path / "proj"
    write_project(root, [node("t", completion_promise="DONE", routing={"agent": "cli"})],
                  agents={"cli": {"provider": "command", "command": [PY, str(script), STUBBORN],
                                  "pass_env": ["WORK"], "timeout": 600}})
    e = env(WORK=str(work))
    pids: dict = {}
    p = spawn(root, "run", env=e)
    try:
        pids = wait_until(lambda: (work / "pids.json").exists()
                          and json.loads((work / "pids.json").read_text()), 60, "the agent's pids")
        db = sqlite3.connect(root / ".harness" / "state.db")
        row = wait_until(lambda: db.execute(
            "SELECT proc_marker, proc_pid, proc_start FROM attempts WHERE status='started'"
            " AND proc_pid IS NOT NULL").fetchone(), 30, "the attempt's child record")
        db.close()
        marker, pid, start = row
        assert pid == pids["agent"] and start == reaper.start_time(pids["agent"])
        with open(f"/proc/{pids['grandchild']}/environ", "rb") as f:
            assert f"{reaper.ENV_MARK}={marker}.".encode() in f.read()
        if killed == "harnessc and its watcher":
            os.killpg(_watcher(p.pid), signal.SIGKILL)  # the watcher and its waiting parent
        p.kill()  # kill -9: harnessc cleans nothing up
        p.communicate(timeout=30)
        if killed == "harnessc":
            for who in ("agent", "child", "grandchild"):
                wait_until(lambda: not alive(pids[who]), 30, f"the agent's {who} to die with harnessc")
        else:
            assert all(alive(pid) for pid in pids.values())
        (work / "finish").write_text("yes")
        r = harnessc(root, "run", env=e)
        assert r.returncode == 0, r.stdout + r.stderr
        assert not any(alive(pid) for pid in pids.values())
        runs = [json.loads(line) for line in (work / "agents.log").read_text().splitlines()]
        assert len(runs) == 2 and runs[1]["earlier_alive"] == [], runs  # never two agents at once
        db = sqlite3.connect(root / ".harness" / "state.db")
        ended = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE kind='leftovers_ended'")]
        db.close()
        if killed == "harnessc and its watcher":
            assert len(ended) == 1 and {pids["agent"], pids["grandchild"]} <= set(ended[0]["pids"])
    finally:
        if p.poll() is None:
            p.kill()
        kill_all(pids.values())


def _with_argv(mark: str) -> list[int]:
    """Live processes whose command line holds `mark`."""
    out = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if mark.encode() in f.read() and alive(int(name)):
                    out.append(int(name))
        except (OSError, ValueError):
            pass
    return out


def test_kill_9_of_harnessc_leaves_no_process_of_its_command_group_behind(tmp_path):
    # The agent starts a background child in its own process group and both sleep; harnessc
    # is killed with -9: its lifeline watcher kills the group, and exits itself.
    mark = f"lifeline-mark-{os.getpid()}-{time.monotonic_ns()}"
    ready = tmp_path / "ready"
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        sys.stdin.read()
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
        open({str(ready)!r}, "w").write("yes")
        time.sleep(300)
    """))
    root = tmp_path / "proj"
    write_project(root, [node("t", completion_promise="DONE", routing={"agent": "cli"})],
                  agents={"cli": {"provider": "command", "command": [PY, str(script), mark], "timeout": 600}})
    p = spawn(root, "run")
    left: list[int] = []
    try:
        wait_until(ready.exists, 60, "the agent and its background child")
        left = wait_until(lambda: len(_with_argv(mark)) == 2 and _with_argv(mark), 30, "both marked processes")
        watcher = _watcher(p.pid)
        p.kill()  # kill -9: harnessc cleans nothing up
        p.communicate(timeout=30)
        wait_until(lambda: not _with_argv(mark), 30, "every process of the agent's group to die")
        wait_until(lambda: not alive(watcher), 30, "the watcher to exit")
    finally:
        if p.poll() is None:
            p.kill()
        kill_all(left)


ADOPTING_RUNNER = """\
import asyncio, os, sys
from harnessc.runtime.children import procs, reaper

async def main():  # the mark comes in the environment: only the agent and its child show it
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])"
    await procs.run([sys.executable, "-c", code, os.environ["MARK"]], cwd=".", timeout=None)

with reaper.adopting(f"h{os.getpid()}"), procs.child_watching():  # the markers procs.run gives, as a Ray worker
    asyncio.run(main())
"""


def _kill_runner(tmp_path: Path, name: str, runner: str = ADOPTING_RUNNER, *, all_children: bool = False) -> None:
    """Start `runner`, wait for its agent and the agent's child, kill -9 the runner (with
    `all_children`, first every child of it, as Ray ends a worker) and wait for both to die."""
    mark = f"lifeline-{name}-{os.getpid()}-{time.monotonic_ns()}"
    p = subprocess.Popen([PY, "-c", runner], cwd=tmp_path, start_new_session=True,
                         env={**env(), "PYTHONPATH": str(REPO), "MARK": mark})
    left: list[int] = []
    try:
        left = wait_until(lambda: len(_with_argv(mark)) == 2 and _with_argv(mark), 30, "the agent and its child")
        if all_children:
            # The watcher is forked by the lifeline's process once its Python has started; a kill
            # of every child before that (seconds on a loaded machine) leaves no watcher: the gap
            # docs/cli.md names. This drill is of a worker killed after it.
            waiting = _watcher(p.pid)
            wait_until(lambda: Path(f"/proc/{waiting}/task/{waiting}/children").read_text().split(), 60,
                       "the lifeline's watcher to be forked")
            os.kill(p.pid, signal.SIGSTOP)  # as Ray's C++ exit path: the worker's Python runs no more
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                for child in f.read().split():
                    os.kill(int(child), signal.SIGKILL)
        p.kill()
        p.wait(timeout=30)
        wait_until(lambda: not _with_argv(mark), 30, "the agent and its child to die")
    finally:
        if p.poll() is None:
            p.kill()
        kill_all(left)


def test_the_watcher_outlives_a_kill_of_every_child_of_its_process(tmp_path):
    # Ray, as it ends a worker, SIGKILLs the worker's children (the agent's leader among
    # them, not the agent's own children) and then the worker. The watcher must not be one of
    # those children: it ends the agent's group once the worker is gone.
    _kill_runner(tmp_path, "ray", all_children=True)


def test_a_command_harnessc_died_too_soon_to_register_is_ended_by_its_marker(tmp_path):
    # harnessc dies between a command's spawn and the record that registers its group (on a
    # loaded machine the command may have started children by then): the watcher, told the
    # run's marker, still ends the command and what it started.
    unregistered = "lifeline.Lifeline.register = lambda self, pgid, start: True  # the record never sent\n"
    runner = ADOPTING_RUNNER.replace("async def main", unregistered + "async def main").replace(
        "from harnessc.runtime.children import procs, reaper", "from harnessc.runtime.children import lifeline, procs, reaper")
    _kill_runner(tmp_path, "unregistered", runner)


@pytest.mark.parametrize("end", ["harnessc died", "the run ended"])
def test_the_watcher_kills_what_carries_the_runs_marker_only_when_harnessc_died(end):
    # At EOF without the run's clean end, every process carrying HARNESSC_PROC=<prefix>.<n>
    # dies; one of another run whose prefix merely starts the same way is spared. After a
    # clean end (the run killed what it left itself) the watcher does not look for them.
    prefix = f"w{os.getpid()}x{time.monotonic_ns()}"
    ours = subprocess.Popen(["sleep", "300"], start_new_session=True,
                            env={**env(), reaper.ENV_MARK: f"{prefix}.1.2"})
    other = subprocess.Popen(["sleep", "300"], start_new_session=True,
                             env={**env(), reaper.ENV_MARK: f"{prefix}9.1"})
    line = lifeline.Lifeline.start(f"{reaper.ENV_MARK}={prefix}.")
    assert line is not None
    try:
        if end == "the run ended":
            line.close()
        else:
            line.watcher.stdin.close()  # what the kernel does when harnessc dies
            line.watcher.wait(timeout=30)
        assert line.watcher.returncode == 0
        if end == "harnessc died":
            ours.wait(timeout=30)
            assert ours.returncode == -signal.SIGKILL
        else:
            assert ours.poll() is None
        assert other.poll() is None
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()


def test_an_orphan_that_scrubbed_its_environment_is_ended_with_the_run(tmp_path):
    # The accept command's grandchild leaves the session and drops its environment (so no
    # marker): it was adopted by harnessc (subreaper) and is killed when the run ends.
    gpid = tmp_path / "orphan.pid"
    code = ("import os, subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', {STUBBORN!r}, {str(gpid)!r}], env={{}})\n"
            f"while not os.path.exists({str(gpid)!r}) or not open({str(gpid)!r}).read(): time.sleep(0.01)\n")
    root = tmp_path / "proj"
    write_project(root, [node("t", accept=[{"id": "spawn", "argv": [PY, "-c", code], "timeout": 60}])])
    r = harnessc(root, "run")
    orphan = read_pid(gpid)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        wait_until(lambda: not alive(orphan), 30, "the scrubbed orphan to be killed")
    finally:
        kill_all([orphan])


# A shell reader: as user nobody the venv's python may not be reachable, /bin/sh always is.
READER = textwrap.dedent("""
    read_env() {
        if ! cat "/proc/$1/environ" > /dev/null 2>&1; then echo denied
        elif tr '\\0' '\\n' < "/proc/$1/environ" | grep -q '^HC_CANARY='; then echo readable
        else echo "no canary"; fi
    }
    cat > /dev/null
    {
        echo "harnessc=$(read_env "$PPID")"
        echo "control=$(read_env "$CONTROL_PID")"
        echo "own_env_has_key=${HC_CANARY:+yes}"
    } > "$OUT"
    echo "<promise>DONE</promise>"
""")


def _as_unprivileged_user(work: Path) -> list[str]:
    """argv prefix running harnessc as a user without CAP_SYS_PTRACE (which reads any environ).

    As root, dropping only that capability is not enough on every kernel (here root without
    it still read a non-dumpable root process), so the run goes to user nobody instead.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv (util-linux) is missing: cannot run as another user")
    os.chown(work, 65534, 65534)
    for path in work.rglob("*"):
        os.chown(path, 65534, 65534)
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def test_a_child_cannot_read_harnessc_environment():
    work = Path(tempfile.mkdtemp(prefix="harnessc-dumpable-"))  # not under root's pytest dir
    try:
        script = work / "reader.sh"
        script.write_text(READER)
        out = work / "seen.txt"
        root = work / "proj"
        write_project(root, [node("t", completion_promise="DONE", routing={"agent": "reader"})],
                      agents={"reader": {"provider": "command", "command": ["/bin/sh", str(script)],
                                         "env": {"CONTROL_PID": "0", "OUT": str(out)}}})
        prefix = _as_unprivileged_user(work)
        e = env(HC_CANARY="canary-value-123456")
        # Control: a dumpable process of the same user, holding the canary too.
        control = subprocess.Popen([*prefix, "sleep", "300"], env=e)
        try:
            plan = root / ".harness" / "build" / "plan.json"
            plan.write_text(plan.read_text().replace('"CONTROL_PID": "0"', f'"CONTROL_PID": "{control.pid}"'))
            r = subprocess.run([*prefix, *CLI, "-C", str(root), "run"], capture_output=True, text=True,
                               env=e, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            seen = dict(line.split("=", 1) for line in out.read_text().splitlines())
        finally:
            control.kill()
            control.wait()
        if seen["control"] != "readable":
            pytest.skip(f"this machine hides same-user /proc/<pid>/environ anyway ({seen['control']})")
        assert seen["harnessc"] == "denied", seen
        assert seen["own_env_has_key"] == "", seen
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------ state


def test_a_version_1_state_database_is_migrated_in_place(tmp_path):
    path = Workspace(tmp_path).state_db
    store = StateStore(Workspace(tmp_path))
    store.close()
    con = sqlite3.connect(path)  # take it back to version 1: the attempts table without proc_*, ...
    con.executescript("""
        CREATE TABLE old AS SELECT id, run_id, task_id, iteration, level, agent, prompt_hash, prompt,
          raw_output, parsed_output, errors, checks, input_tokens, output_tokens, cost_usd, latency,
          status, started_at, finished_at FROM attempts;
        DROP TABLE attempts;
        ALTER TABLE old RENAME TO attempts;
        INSERT INTO attempts (id, run_id, task_id, iteration, level, status, started_at)
          VALUES (7, 'r1', 'a', 1, 0, 'started', 1.0);
        CREATE TABLE old_ledger AS SELECT id, run_id, task_id, attempt_id, reserved, actual, settled, ts FROM ledger;
        DROP TABLE ledger;
        ALTER TABLE old_ledger RENAME TO ledger;
        ALTER TABLE tasks DROP COLUMN running_s;
        DROP TABLE daily_usage;
        ALTER TABLE tasks DROP COLUMN filled;
        UPDATE meta SET value='1' WHERE key='schema_version';
    """)
    con.close()
    store = StateStore(Workspace(tmp_path))
    try:
        version = store.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        assert version == str(SCHEMA_VERSION)  # through every step
        rec = store.recover()
        assert rec["interrupted_attempts"] == [7]
        assert rec["leftovers"] == [{"attempt": 7, "marker": None, "pid": None, "start": None}]
    finally:
        store.close()


def test_the_watcher_ends_a_group_whose_leader_was_killed_alone(tmp_path):
    """asyncio kills a command's leader alone when its loop closes: what the leader started
    lives on in its group, and the watcher still ends it at EOF (the number is the group's)."""
    import io

    leader = subprocess.Popen([PY, "-c", "import subprocess, sys; "
                               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
                               "print('started', flush=True); time_ = __import__('time').sleep(300)"],
                              stdout=subprocess.PIPE, start_new_session=True)
    assert leader.stdout.readline() == b"started\n"
    pgid = leader.pid
    start = lifeline._start_time(pgid)
    members = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != pgid and _pgid(int(p)) == pgid]
    assert members, "the leader's child is in its group"
    leader.kill()
    leader.wait()
    assert lifeline.watch(io.BytesIO(f"+ {pgid} {start}\n".encode())) == [pgid]
    deadline = time.monotonic() + 10
    while any(_pgid(m) == pgid for m in members) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_pgid(m) == pgid for m in members)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid) if not Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z" else None
    except (OSError, ProcessLookupError):
        return None
