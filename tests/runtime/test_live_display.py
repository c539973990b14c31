"""The live display under a real pseudo-terminal: `harnessc run` as a user sees it."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from .helpers import CLI, env, node, write_project

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def run_in_pty(args: list[str], timeout: float = 60, on_output=None) -> tuple[int, str]:
    """Run `args` on a pseudo-terminal: (exit code, everything it printed). `on_output` is
    given the output so far (escapes removed) after each read."""
    master, slave = pty.openpty()
    e = env(TERM="xterm-256color", COLUMNS="120", LINES="40")
    e.pop("NO_COLOR", None)
    e.pop("CI", None)  # rich treats CI as "not interactive"
    p = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=e, close_fds=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child side closed
                    break
                if not chunk:
                    break
                out += chunk
                if on_output:
                    on_output(ANSI.sub("", out.decode("utf-8", errors="replace")))
            elif p.poll() is not None:
                break
        code = p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
    return code, out.decode("utf-8", errors="replace")


def test_live_display_in_a_terminal_ends_with_the_summary_table(tmp_path):
    write_project(tmp_path, [node("alpha"), node("beta", depends_on=["alpha"]), node("gamma")],
                  agents={"rehearsal": {"provider": "simulate", "latency": 0.4}}, concurrency=2)
    code, raw = run_in_pty([*CLI, "-C", str(tmp_path), "run"])
    text = ANSI.sub("", raw)
    assert code == 0, text
    assert "Traceback" not in text
    assert "\x1b[" in raw  # a terminal got a terminal's output (rich's live view, colours)
    assert re.search(r"\d/3 finished: .* · \d running", text), text  # the live view was drawn
    # The final summary table: header and one row per task.
    assert re.search(r"task\s*┃\s*state\s*┃\s*attempts\s*┃\s*agent\s*┃\s*tokens\s*┃\s*cost\s*┃\s*time", text), text
    for tid in ("alpha", "beta", "gamma"):
        assert re.search(rf"{tid}\s*│\s*succeeded\s*│\s*1\s*│\s*rehearsal", text), text
    assert "succeeded: 3 tasks succeeded ($0.0000 this run" in text


def test_live_display_reports_a_failure_and_skips_without_a_traceback(tmp_path):
    write_project(tmp_path, [node("bad", accept=[{"id": "gate", "argv": ["false"], "timeout": 5}],
                                  retry={"max_retries": 0, "on_failure": "fail", "delays": [0]}),
                             node("after", depends_on=["bad"]), node("fine")],
                  agents={"rehearsal": {"provider": "simulate", "latency": 0.2}}, concurrency=2)
    code, raw = run_in_pty([*CLI, "-C", str(tmp_path), "run"])
    text = ANSI.sub("", raw)
    assert code == 1, text
    assert "Traceback" not in text
    # Printed above the live view, in words; the live view counts the failure as one.
    assert re.search(r"bad: iteration 1 rejected: accept check 'gate' failed", text), text
    assert re.search(r"\[\d/3\] bad failed: 1 call failed verification", text), text
    assert "task_failed" not in text
    assert re.search(r"/3 finished: [^\n]*1 failed", text), text
    assert re.search(r"bad\s*│\s*failed", text) and re.search(r"after\s*│\s*skipped", text), text
    assert re.search(r"fine\s*│\s*succeeded", text), text


def test_live_display_shows_a_paused_run_and_stop_ends_it(tmp_path, monkeypatch):
    import threading

    from .helpers import harnessc

    write_project(tmp_path, [node("alpha")])

    def stop_once_paused():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any("\"paused\"" in p.read_text() for p in tmp_path.glob(".harness/runs/*/events.jsonl")):
                break
            time.sleep(0.05)
        harnessc(tmp_path, "stop")  # the live view redraws 8 times a second, and once more at the end

    stopper = threading.Thread(target=stop_once_paused)
    stopper.start()
    monkeypatch.setenv("HARNESSC_PAUSE", "1")  # run_in_pty's environment starts from ours
    try:
        code, raw = run_in_pty([*CLI, "-C", str(tmp_path), "run"])
    finally:
        stopper.join()
    text = ANSI.sub("", raw)
    assert code == 3, text
    assert "paused (HARNESSC_PAUSE=1): in-flight calls finish, nothing new starts; `harnessc resume` continues" in text
    assert re.search(r"paused · 0/1 finished", text), text


STUCK = {"provider": "simulate", "complete_after": 99, "progress": "none"}  # the same text, never a claim
STUCK_WHY = "2 iterations in a row with identical output and no file changed (no claim verified)"


def _blocked_project(root):
    write_project(root, [node("loop", completion_promise="DONE", routing={"agent": "weak", "chain": ["strong"]},
                              limits={"stuck_after": 2})],
                  agents={"weak": STUCK, "strong": STUCK}, loop={"recovery": {"prompt_mutations": 0}})


def test_stuck_and_blocked_are_said_once_each_and_the_commands_stay_on_one_line(tmp_path):
    # Each stuck iteration was told twice (its alert and its attempt line), the block twice
    # (the [n/m] line and its alert), and rich broke `harnessc tell loop "..."` over two lines.
    _blocked_project(tmp_path / "tty")
    code, raw = run_in_pty([*CLI, "-C", str(tmp_path / "tty"), "run"])
    from .helpers import harnessc

    _blocked_project(tmp_path / "pipe")
    piped = harnessc(tmp_path / "pipe", "run")
    for text in (ANSI.sub("", raw), piped.stdout):
        assert code == 1 and piped.returncode == 1, text
        lines = text.splitlines()
        for i in (2, 4):  # weak's stuck iteration, then strong's
            assert sum(f"loop: iteration {i} stuck: {STUCK_WHY}" in x for x in lines) == 1, text
        assert not any(f"loop: stuck: {STUCK_WHY}" in x for x in lines), text
        blocked = [x for x in lines if "loop blocked: stuck (" in x or "loop: blocked: stuck" in x]
        assert len(blocked) == 1, text
        assert blocked[0].endswith("tell the agent what to do differently (`harnessc tell loop \"...\"`),"
                                   " then `harnessc retry loop`"), text
    # alerts.log keeps them all
    kinds = [x.split('"kind": "')[1].split('"')[0] for x in (tmp_path / "pipe" / ".harness" / "alerts.log")
             .read_text().splitlines()]
    assert kinds.count("stuck") == 2 and kinds.count("blocked") == 1, kinds


def test_a_long_reason_is_cut_between_words_and_its_commands_stay_whole():
    from harnessc.runtime.observe.display import Progress

    why = "the agent answered the same thing again " * 10
    error = (f"blocked: stuck ({why.strip()}) after every recovery step (prompt rewrites: none; agents: weak);"
             " tell the agent what to do differently (`harnessc tell loop \"...\"`), then `harnessc retry loop`")
    p = Progress()
    p.total = 1
    line = p.describe({"kind": "task_blocked", "task": "loop", "error": error})
    head = "[0/1] loop blocked: "
    assert len(error) > 400 and len(line) <= len(head) + 300, line
    assert line.endswith("what to do differently (`harnessc tell loop \"...\"`), then `harnessc retry loop`"), line
    kept = line.removeprefix(head + "stuck (").split("...")[0]
    assert kept and why.startswith(kept + " "), kept  # cut after a whole word


GATED_AGENT = """\
import os, pathlib, sys, time
sys.stdin.read()
task, go = os.environ["HARNESSC_TASK"], pathlib.Path(sys.argv[1])
print(task + ": started", flush=True)
if task == "slow":
    print("slow: waiting for go \\x1b[2J", flush=True)  # a screen-clearing escape, shown, not obeyed
    deadline = time.time() + 60
    while not go.exists() and time.time() < deadline:
        time.sleep(0.05)
print("<promise>DONE</promise>")
"""


def test_live_view_shows_the_bar_the_eta_and_each_running_tasks_last_line(tmp_path):
    # quick ends at once; slow prints a line, then waits for the file `go`
    (tmp_path / "agent.py").write_text(GATED_AGENT)
    agent = {"provider": "command", "command": [sys.executable, str(tmp_path / "agent.py"), str(tmp_path / "go")]}
    write_project(tmp_path, [node(t, completion_promise="DONE") for t in ("quick", "slow")],
                  agents={"rehearsal": agent}, concurrency=2, budget={"max_cost_usd": 5.0, "max_tokens": None})

    def release(text: str) -> None:
        # Once the view has shown an ETA (quick has ended) and slow's last line: slow may end.
        if "ETA ~" in text and "slow: waiting for go" in text:
            (tmp_path / "go").touch()

    code, raw = run_in_pty([*CLI, "-C", str(tmp_path), "run"], on_output=release)
    text = ANSI.sub("", raw)
    assert code == 0, text
    assert (tmp_path / "go").exists(), text  # the view showed both
    assert re.search(r"━+\s*1/2 · ETA ~\d+s · \d+s", text), text  # the bar, done/total, the ETA
    assert "ETA unknown" in text  # before a task ended, nothing says what a token of estimate takes
    # the running task: its iteration, agent, time so far and the last line its agent printed,
    # its control characters shown as escapes, not obeyed
    assert re.search(r"slow\s+iteration 1\s+rehearsal\s+\d+s\s+slow: waiting for go \^\[\[2J", text), text
    assert "\x1b[2J" not in raw
    assert re.search(r"1/2 finished: 1 succeeded · 1 running · \$0\.0000 of \$5\.00 budget", text), text


def test_eta_scales_the_estimates_by_the_measured_durations_and_waits_for_the_longest_chain(tmp_path):
    from harnessc.runtime.observe.eta import Eta

    # a -> b -> d is a chain; c stands alone; every task estimated at 200 tokens; 4 jobs
    unestimated = node("e")
    unestimated["estimate"] = None
    plan = write_project(tmp_path, [node("a"), node("b", depends_on=["a"]), node("c"),
                                    node("d", depends_on=["b"]), unestimated])
    nodes = {n.id: n for n in plan.nodes}
    eta = Eta(nodes, ["a", "b", "c", "d"], jobs=4)
    eta.started("a", 0.0)
    eta.started("c", 0.0)
    assert eta.seconds(5.0) is None  # nothing ended: no rate yet
    eta.ended("a", 10.0)  # 200 tokens of estimate took 10 s: 0.05 s a token
    # b and d have 10 s each ahead, c is done with its estimate: the work is 20 s over 4
    # jobs, but the chain b -> d takes 20 s
    assert eta.seconds(10.0) == pytest.approx(20.0)
    eta.started("b", 10.0)
    assert eta.seconds(14.0) == pytest.approx(16.0)  # b has run 4 s of its 10
    # a task the run measured at twice its estimate doubles the rate
    eta.ended("c", 30.0)  # 30 s for 200: 400 tokens took 40 s, 0.1 s a token
    assert eta.seconds(30.0) == pytest.approx(20.0)  # b: 20 - 20 s run = 0, then d: 20
    # without estimates every task weighs the same (the scheduler's default weight)
    alone = Eta(nodes, ["e"], jobs=1)
    assert alone.weight["e"] == 1000 and alone.seconds(0.0) is None
