"""`run --detach`, run.log, `runs`, `log --run`: real detached processes, real sessions,
real SIGHUP and SIGKILL; and a log redirected into the project, which is no progress."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time

from .helpers import CLI, PY, env, git_repo, harnessc, node, write_project
from .test_loop_progress import AGENT, NO_LADDER, task_rows

# A command agent that waits for its gate file (the test opens it), then says it is done.
GATED = textwrap.dedent("""
    import os, pathlib, sys, time
    sys.stdin.read()
    gate = pathlib.Path(os.environ["GATE"])
    pathlib.Path(str(gate) + "." + os.environ["HARNESSC_TASK"]).write_text("waiting")
    while not gate.exists():
        time.sleep(0.05)
    print("done <promise>DONE</promise>")
""")


def gated_project(tmp_path, tasks=2):
    root, gate = tmp_path / "proj", tmp_path / "go"
    (tmp_path / "agent.py").write_text(GATED)
    agents = {"script": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")], "timeout": 600,
                         "env": {"GATE": str(gate)}}}
    write_project(root, [node(f"t{i}", completion_promise="DONE", routing={"agent": "script"}) for i in range(tasks)],
                  agents=agents, concurrency=1)
    return root, gate, env()


def poll(what, timeout=120.0):
    """what() until it is true (or fail after `timeout`: a hung run, not a slow machine)."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def runs(root, e) -> list[dict]:
    r = harnessc(root, "runs", "--output", "json", env=e)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def ended(root, e) -> dict | None:
    rows = runs(root, e)
    return rows[-1] if rows and rows[-1]["status"] not in ("running",) else None


def started_lines(text: str) -> tuple[str, int, str]:
    """The run id, pid and log path that `run --detach` printed."""
    first, log = text.splitlines()[0], text.splitlines()[1]
    assert first.startswith("run ") and "started in the background (pid " in first, text
    return first.split()[1], int(first.rsplit("pid ", 1)[1].rstrip(")")), log.removeprefix("log: ")


def test_a_detached_run_survives_its_terminal_closing_and_logs_its_lines(tmp_path):
    root, gate, e = gated_project(tmp_path)
    # a "terminal": a shell in a session of its own, which starts the run and stays
    term = subprocess.Popen(["/bin/sh", "-c", '"$@"; exec sleep 600', "sh", *CLI, "-C", str(root), "run", "--detach"],
                            cwd=root, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    out = "".join(term.stdout.readline() for _ in range(3))
    run_id, pid, log = started_lines(out)
    assert log == f".harness/runs/{run_id}/run.log" and f"log --run {run_id} --follow" in out, out
    poll(lambda: (gate.parent / "go.t0").exists())  # the run is calling its agent
    os.killpg(term.pid, signal.SIGHUP)  # the terminal closes: its session gets SIGHUP...
    os.killpg(term.pid, signal.SIGKILL)  # ...and whatever ignored it is gone too
    term.wait()
    assert os.getpgid(pid) == pid and os.getsid(pid) == pid  # its own session: untouched
    assert runs(root, e)[-1]["status"] == "running" and runs(root, e)[-1]["pid"] == pid
    follow = subprocess.Popen([*CLI, "-C", str(root), "log", "--run", run_id, "--follow"], cwd=root, env=e,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watcher = subprocess.Popen([*CLI, "-C", str(root), "status", "--watch", "--interval", "0.2"], cwd=root, env=e,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    gate.write_text("go")
    row = poll(lambda: ended(root, e))
    assert row["id"] == run_id and row["status"] == "succeeded" and row["tasks"] == 2 and row["pid"] is None, row
    followed, err = follow.communicate(timeout=120)  # --follow ends with the run
    assert follow.returncode == 0, err
    watched, err = watcher.communicate(timeout=120)  # status --watch too
    assert watcher.returncode == 0 and "succeeded" in watched, err
    text = (root / log).read_text()
    assert "\x1b" not in text  # no colour, no bar
    for line in ("t0: started on script", "[2/2] t1 succeeded", f"run {run_id}",
                 "succeeded: 2 tasks succeeded", "report: `harnessc report` writes"):
        assert line in text, text
    assert text.strip().splitlines()[-1] in followed and "[1/2] t0 succeeded" in followed, followed
    table = harnessc(root, "runs", env=e).stdout
    assert run_id in table and "succeeded" in table, table


def test_an_error_before_the_run_starts_reaches_the_terminal(tmp_path):
    """Another run holds the lock: `run --detach` says so where it was typed, exit 2."""
    root, gate, e = gated_project(tmp_path)
    first = harnessc(root, "run", "--detach", env=e)
    assert first.returncode == 0, first.stderr
    second = harnessc(root, "run", "--detach", env=e)
    assert second.returncode == 2 and "harnessc stop" in second.stderr, second
    gate.write_text("go")
    assert poll(lambda: ended(root, e))["status"] == "succeeded"


def test_a_log_deleted_under_a_detached_run_is_no_crash(tmp_path):
    root, gate, e = gated_project(tmp_path)
    run_id, _, log = started_lines(harnessc(root, "run", "--detach", env=e).stdout)
    poll(lambda: (gate.parent / "go.t0").exists())
    (root / log).unlink()
    gate.write_text("go")
    assert poll(lambda: ended(root, e))["status"] == "succeeded"
    r = harnessc(root, "log", "--run", run_id, env=e)
    assert r.returncode == 0 and "no log for run" in r.stdout, r


def test_a_detached_run_killed_9_resumes_with_run(tmp_path):
    root, gate, e = gated_project(tmp_path)
    run_id, pid, _ = started_lines(harnessc(root, "run", "--detach", env=e).stdout)
    poll(lambda: (gate.parent / "go.t0").exists())
    os.killpg(pid, signal.SIGKILL)  # the run and its agent, mid-call
    row = poll(lambda: ended(root, e))
    assert row["id"] == run_id and row["status"] == "interrupted", row
    gate.write_text("go")
    r = harnessc(root, "run", env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resuming: 1 interrupted attempt will start again" in r.stderr
    rows = runs(root, e)
    assert [x["status"] for x in rows] == ["interrupted", "succeeded"]
    text = (root / rows[-1]["log"]).read_text()  # an attached run writes its run.log too
    assert "resuming: 1 interrupted attempt" in text and "succeeded: 2 tasks succeeded" in text, text


def test_a_log_redirected_into_the_project_is_no_progress(tmp_path):
    """The cookbook's old `nohup harnessc run > run.log` in the project: the log grew with
    every iteration's lines and counted as file progress, so a loop task repeating itself
    ran all its iterations. It is left out of the evidence: stuck after stuck_after."""
    (tmp_path / "agent.py").write_text(AGENT)
    git_repo(tmp_path)
    agents = {"script": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")], "timeout": 30}}
    write_project(tmp_path, [node("talker", completion_promise="DONE", routing={"agent": "script"},
                                  limits={"stuck_after": 3, "max_iterations": 10})],
                  agents=agents, loop={"recovery": NO_LADDER})
    with open(tmp_path / "run.log", "w") as out:
        r = subprocess.run([*CLI, "-C", str(tmp_path), "run"], cwd=tmp_path, env=env(), stdout=out,
                           stderr=subprocess.STDOUT, timeout=300)
    text = (tmp_path / "run.log").read_text()
    talker = task_rows(tmp_path)["talker"]
    assert talker["iterations"] == 3 and talker["error"].startswith("stuck: 3 iterations in a row"), talker
    assert r.returncode == 1, text
    assert "warning: this run's output goes to run.log, inside the project" in text and "--detach" in text


def test_bad_uses_are_one_line_errors(tmp_path):
    root, _, e = gated_project(tmp_path)
    r = harnessc(root, "runs", env=e)
    assert r.returncode == 0 and "no runs yet" in r.stdout, r
    for args, words in ((("run", "--detach", "--dry-run"), "--dry-run calls nothing"),
                        (("log",), "give a TASK, or --run ID"),
                        (("log", "--run", "nope"), "no run 'nope' recorded"),
                        (("log", "t0", "--run", "last"), "--run shows a run's log"),
                        # checked by the run it starts, said on the same terminal before it lets go
                        (("run", "--detach", "--agent", "nope"), "agent 'nope' is not defined"),
                        (("run", "--detach", "-s", "zzz"), "no task matches 'zzz'")):
        r = harnessc(root, *args, env=e)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_an_attached_runs_log_has_each_line_of_its_output_as_it_is_written(tmp_path):
    """An attached run whose stdout is no terminal (a pipe): run.log holds each of its lines,
    heartbeats too, in the same order and flushed as written (read while the run waits on its
    agent), with the lines said on stderr and the summary besides."""
    root, gate, e = gated_project(tmp_path)
    p = subprocess.Popen([*CLI, "-C", str(root), "run"], cwd=root, env={**e, "HARNESSC_HEARTBEAT": "0.5"},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        logs = root / ".harness" / "runs"

        def log_text() -> str:
            found = list(logs.glob("*/run.log")) if logs.exists() else []
            return found[0].read_text() if found else ""

        poll(lambda: "t0: still running (iteration 1 on script" in log_text())  # its call is in flight
        assert "t0: started on script" in log_text()
        gate.write_text("go")
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 0, out + err
    log = log_text().splitlines()
    shown = [line for line in out.splitlines() if line]
    beats = [line for line in log if "still running" in line]
    assert beats and all(b in shown for b in beats)
    # stdout's lines, in order, then the closing lines: all of them in the log
    at = 0
    for line in shown:
        at = log.index(line, at) + 1
    assert [line for line in log if line not in shown] == [line for line in err.splitlines() if line], log
