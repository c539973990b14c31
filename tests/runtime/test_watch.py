"""A run watched from a second terminal: `status --watch` and `log TASK --follow` against a
real `harnessc run` in another process. The agent waits for files the test writes once the
watcher has shown what it should: no timing is asserted."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .helpers import CLI, env, node, write_project

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

AGENT = """\
import os, pathlib, sys, time
sys.stdin.read()
here, claim_at = pathlib.Path(sys.argv[1]), int(sys.argv[2])
task, it = os.environ["HARNESSC_TASK"], os.environ["HARNESSC_ITERATION"]
(here / f"{task}-{it}.started").touch()
print(f"{task}: waiting for go-{it}", flush=True)
deadline = time.time() + 60
while not (here / f"go-{it}").exists() and time.time() < deadline:
    time.sleep(0.05)
print("<promise>DONE</promise>" if int(it) >= claim_at else "not yet")
"""
WAIT = 60.0  # seconds before a test gives up on something that should happen


def gated_project(root: Path, claim_at: int = 1) -> Path:
    """One loop task `b` on a command agent that waits for `go-<iteration>` and claims at
    iteration `claim_at`; returns the directory of the agent's files."""
    gates = root / "gates"
    gates.mkdir(parents=True)
    (gates / "agent.py").write_text(AGENT)
    agent = {"provider": "command", "command": [sys.executable, str(gates / "agent.py"), str(gates), str(claim_at)]}
    write_project(root, [node("b", completion_promise="DONE")], agents={"rehearsal": agent}, concurrency=1)
    return gates


def wait_for(path: Path, run: subprocess.Popen) -> None:
    """Poll until `path` exists, as long as the run goes on (its start-up takes a while on a
    busy machine; a run that ended without making it fails at once)."""
    deadline = time.monotonic() + 5 * WAIT
    while not path.exists():
        assert run.poll() is None, f"the run ended (exit {run.returncode}) before {path.name} appeared"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


class Watcher:
    """A harnessc command whose output lines are collected as they come."""

    def __init__(self, root: Path, *args: str):
        self.proc = subprocess.Popen([*CLI, "-C", str(root), *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env())
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()

    def expect(self, pattern: str) -> str:
        """The first line matching `pattern`, once it has been printed."""
        with self.changed:
            found = self.changed.wait_for(lambda: next((x for x in self.lines if re.search(pattern, x)), None)
                                          or self.proc.poll() is not None, timeout=WAIT)
        line = next((x for x in self.lines if re.search(pattern, x)), None)
        assert found and line is not None, f"no line matching {pattern!r}:\n" + "\n".join(self.lines)
        return line

    def finish(self) -> tuple[int, str]:
        code = self.proc.wait(timeout=WAIT)
        self.reader.join(timeout=WAIT)
        return code, "\n".join(self.lines)


def test_status_watch_redraws_until_the_run_ends_and_ctrl_c_ends_it_cleanly(tmp_path):
    gates = gated_project(tmp_path)
    run = subprocess.Popen([*CLI, "-C", str(tmp_path), "run"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env())
    try:
        wait_for(gates / "b-1.started", run)  # the run is going on
        text = Watcher(tmp_path, "status", "--watch", "--interval", "0.2")
        as_json = Watcher(tmp_path, "status", "--watch", "--interval", "0.2", "--output", "json")
        quitter = Watcher(tmp_path, "status", "--watch", "--interval", "0.2")
        text.expect(r"^--- \d\d:\d\d:\d\d$")  # a second look: it goes on while the run does
        as_json.expect(r'"active": true')
        quitter.expect(r"running for")
        quitter.proc.send_signal(signal.SIGINT)
        assert quitter.finish()[0] == 0  # Ctrl-C is how watching ends

        (gates / "go-1").touch()
        assert run.wait(timeout=WAIT) == 0
        code, out = text.finish()
        assert code == 0, out
        blocks = re.split(r"\n\n--- \d\d:\d\d:\d\d\n", out)
        assert len(blocks) >= 2, out
        assert re.match(r"run \S+: running for \d+s \(pid \d+\) — 1 running; \$0\.0000", blocks[0]), out
        assert re.search(r"^b\s+running\s+1\s+rehearsal", blocks[0], re.M), out
        assert re.match(r"run \S+: succeeded — 1 succeeded; \$0\.\d+ spent", blocks[-1]), out  # the run's end, then it quits
        assert re.search(r"^b\s+succeeded\s+1\s+rehearsal", blocks[-1], re.M), out

        code, out = as_json.finish()
        looks = [json.loads(line) for line in out.splitlines()]  # a JSON document a line
        assert code == 0 and len(looks) >= 2, out
        assert looks[0]["run"]["active"] and looks[0]["tasks"][0]["state"] == "running"
        assert not looks[-1]["run"]["active"] and looks[-1]["run"]["status"] == "succeeded"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def test_status_watch_on_a_terminal_redraws_in_place_and_leaves_the_end_on_screen(tmp_path):
    from .test_live_display import ANSI, run_in_pty

    gates = gated_project(tmp_path)
    run = subprocess.Popen([*CLI, "-C", str(tmp_path), "run"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env())
    try:
        wait_for(gates / "b-1.started", run)

        def release(text: str) -> None:  # the run has been shown going on: let it end
            if re.search(r"every 0\.2s, [\d:]+ · Ctrl-C quits\nrun \S+: running for", text):
                (gates / "go-1").touch()

        code, raw = run_in_pty([*CLI, "-C", str(tmp_path), "status", "--watch", "--interval", "0.2"],
                               on_output=release)
        assert run.wait(timeout=WAIT) == 0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    text = ANSI.sub("", raw)
    assert code == 0 and (gates / "go-1").exists(), text
    assert re.search(r"b\s*│\s*running\s*│\s*1\s*│\s*rehearsal", text), text  # rich's table, while it ran
    end = text[text.rindex("run "):]
    assert re.match(r"run \S+: succeeded — 1 succeeded", end), text  # the last look stays
    assert re.search(r"b\s*│\s*succeeded\s*│\s*1\s*│\s*rehearsal", end), text


def test_status_watch_without_a_run_going_on_prints_once(tmp_path):
    write_project(tmp_path, [node("a")])
    done = subprocess.run([*CLI, "-C", str(tmp_path), "status", "--watch"], capture_output=True, text=True,
                          env=env(), timeout=WAIT)
    plain = subprocess.run([*CLI, "-C", str(tmp_path), "status"], capture_output=True, text=True,
                           env=env(), timeout=WAIT)
    assert done.returncode == 0 and done.stdout.startswith("no runs yet\n"), done
    assert done.stdout == plain.stdout  # one look: status as it is


def test_log_follow_prints_each_attempt_as_it_starts_and_ends_until_the_task_ends(tmp_path):
    gates = gated_project(tmp_path, claim_at=2)  # iteration 1 makes no claim, iteration 2 does
    run = subprocess.Popen([*CLI, "-C", str(tmp_path), "run"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env())
    try:
        wait_for(gates / "b-1.started", run)
        follow = Watcher(tmp_path, "log", "b", "--follow")
        follow.expect(r"^=== attempt 1 · run \S+ · iteration 1 · level 0 · rehearsal · started at [\d:]+, running$")
        (gates / "go-1").touch()
        follow.expect(r"^=== attempt 2 · .* · iteration 2 · .*, running$")
        (gates / "go-2").touch()
        code, out = follow.finish()  # the task ended: following ends
        assert code == 0, out
        assert run.wait(timeout=WAIT) == 0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    heads = [x for x in out.splitlines() if x.startswith("=== ")]
    assert heads[0].startswith("=== attempt 1 · ") and heads[0].endswith(", running"), out
    assert re.match(r"=== attempt 1 of 1 · run \S+ · iteration 1 · level 0 · rehearsal · progress", heads[1]), out
    assert heads[2].startswith("=== attempt 2 · ") and heads[2].endswith(", running"), out
    assert re.match(r"=== attempt 2 of 2 · run \S+ · iteration 2 · level 0 · rehearsal · succeeded", heads[3]), out
    assert len(heads) == 4, out
    assert "b: waiting for go-1\nnot yet" in out and "b: waiting for go-2\n<promise>DONE</promise>" in out, out


def test_log_follow_of_an_ended_task_prints_its_attempts_and_exits(tmp_path):
    write_project(tmp_path, [node("a")])
    assert subprocess.run([*CLI, "-C", str(tmp_path), "run"], capture_output=True, env=env(),
                          timeout=WAIT).returncode == 0
    done = subprocess.run([*CLI, "-C", str(tmp_path), "log", "a", "--follow"], capture_output=True, text=True,
                          env=env(), timeout=WAIT)
    logged = subprocess.run([*CLI, "-C", str(tmp_path), "log", "a"], capture_output=True, text=True,
                            env=env(), timeout=WAIT)
    assert done.returncode == 0 and done.stdout == logged.stdout, done
    wrong = subprocess.run([*CLI, "-C", str(tmp_path), "log", "a", "--follow", "--attempt", "1"],
                           capture_output=True, text=True, env=env(), timeout=WAIT)
    assert wrong.returncode == 2 and "--follow" in wrong.stderr, wrong
