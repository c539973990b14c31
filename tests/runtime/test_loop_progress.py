"""Loop tasks: progress from evidence, stuck detection and memory across iterations, through
the real CLI with command agents (small scripts working in a git repository made here) and
the simulate agent."""

from __future__ import annotations

import json
import sqlite3
import textwrap

from harnessc.compiler.ir import Loop
from harnessc.runtime.store.state import SCHEMA_VERSION

from . import virtual
from .helpers import PY, git_repo, node, write_project

# One script, several behaviours (by task id). It counts its calls in a file of its own
# (outside the project's git view: .harness/ is never evidence).
AGENT = textwrap.dedent("""
    import os, pathlib, random, sys
    task = os.environ["HARNESSC_TASK"]
    prompt = sys.stdin.read()
    calls = pathlib.Path(".harness") / f"calls-{task}"
    calls.parent.mkdir(exist_ok=True)  # an isolated task's worktree has none
    n = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(n))
    pathlib.Path(".harness", f"prompt-{task}-{n}.md").write_text(prompt)
    if task == "steady":          # one module per call, committed every other call; claims at 5
        pathlib.Path("src").mkdir(exist_ok=True)
        pathlib.Path("src", f"part{n}.py").write_text("".join(f"x{i} = {i}\\n" for i in range(n * 3)))
        if n % 2 == 0:
            os.system("git add -A src >/dev/null && git commit -qm step >/dev/null")
        print(f"Added part {n}." + (" <promise>DONE</promise>" if n >= 5 else ""))
    elif task == "talker":        # new words every time, no file touched
        random.seed(n)
        words = ["plan", "consider", "approach", "design", "refactor", "module", "test", "idea"]
        print("I will " + " ".join(random.choice(words) for _ in range(30)) + f" (thought {n})")
    elif task == "quiet":         # terse, identical output while editing files: real progress
        pathlib.Path("notes.txt").write_text("line\\n" * n)
        print("ok" + (" <promise>DONE</promise>" if n >= 5 else ""))
    elif task == "follower":      # changes no file; marks its first step if the prompt asks; claims at 3
        marked = " <progress>read the code</progress>" if "<progress>" in prompt and n == 1 else ""
        print(f"Reading the code, part {n}." + marked + (" <promise>DONE</promise>" if n >= 3 else ""))
    elif task == "failing":       # claims every time; the same test failure (line numbers vary)
        pathlib.Path("attempt.txt").write_text("same")
        print("<promise>DONE</promise>")
""")

CHECK = textwrap.dedent("""
    import os, sys
    print(f"FAILED tests/test_x.py::test_it - AssertionError at line {os.getpid() % 1000}")
    print("1 failed, 0 passed in 0.0{}s".format(os.getpid() % 10))
    sys.exit(1)
""")


def git_project(tmp_path, nodes, **kw):
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "check.py").write_text(CHECK)
    git_repo(tmp_path)
    agents = {"script": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")], "timeout": 30}}
    # These tests are about finding a task stuck: it fails at once (the recovery ladder a
    # stuck task climbs otherwise is tested in test_recovery.py).
    kw.setdefault("loop", {"recovery": NO_LADDER})
    return write_project(tmp_path, nodes, agents=agents, **kw)


NO_LADDER = {"prompt_mutations": 0, "escalate": False, "human": False}


def loop_node(tid, **kw):
    return node(tid, completion_promise="DONE", routing={"agent": "script"}, **kw)


def task_rows(root) -> dict:
    r = virtual.harnessc(root, "status", "--output", "json")
    assert r.returncode == 0, r.stderr
    return {t["id"]: t for t in json.loads(r.stdout)["tasks"]}


def attempts(root, tid) -> list[dict]:
    r = virtual.harnessc(root, "log", tid, "--output", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_steady_file_progress_is_not_stuck_and_a_talker_is(tmp_path):
    git_project(tmp_path, [loop_node("steady", limits={"stuck_after": 2}),
                           loop_node("talker", limits={"stuck_after": 3}),
                           loop_node("quiet", limits={"stuck_after": 2})], concurrency=1)
    r = virtual.harnessc(tmp_path, "run")
    rows = task_rows(tmp_path)
    # Real work at every iteration: never flagged, however short the iterations or the text.
    assert rows["steady"]["state"] == "succeeded", rows["steady"]
    assert rows["quiet"]["state"] == "succeeded", rows["quiet"]  # identical text, but files change
    steady = attempts(tmp_path, "steady")
    assert len(steady) == 5
    for a in steady[:-1]:
        p = a["progress"]
        assert not p["low"] and p["files"]["source"] == "git" and p["files"]["files"] >= 1, p
        assert p["files"]["added"] >= 3
    assert [a["progress"]["files"]["commits"] for a in steady[:4]] == [0, 1, 0, 1]
    assert all(a["progress"]["files"]["new"] == 1 for a in steady[:4])  # untracked files count
    # Words that change while no file does: stuck after stuck_after iterations, not max_iterations.
    talker = rows["talker"]
    assert talker["state"] == "failed" and talker["iterations"] == 3, talker
    assert talker["error"].startswith("stuck: 3 iterations in a row under progress_threshold 0.15"), talker
    assert "no file changed" in talker["error"] and "no new <progress> marker" in talker["error"]
    scores = [a["progress"]["score"] for a in attempts(tmp_path, "talker")]
    assert all(s < 0.15 for s in scores[1:]) and attempts(tmp_path, "talker")[-1]["status"] == "stuck"
    assert r.returncode == 1


def test_an_isolated_loop_task_is_measured_in_its_worktree_as_a_shared_one_is(tmp_path):
    """isolation: worktree - each iteration's files evidence is what it changed in the task's
    own worktree: the same evidence, scores and verdicts as on the shared checkout (the quiet
    task's identical output with files changing is progress, not stuck)."""
    iso = {"isolation": "worktree"}
    git_project(tmp_path, [loop_node("steady", limits={"stuck_after": 2}, **iso),
                           loop_node("quiet", limits={"stuck_after": 2}, **iso),
                           loop_node("talker", limits={"stuck_after": 3}, **iso)], concurrency=1)
    r = virtual.harnessc(tmp_path, "run")
    rows = task_rows(tmp_path)
    assert rows["steady"]["state"] == "succeeded", rows["steady"]
    assert rows["quiet"]["state"] == "succeeded", rows["quiet"]
    steady = attempts(tmp_path, "steady")
    assert len(steady) == 5
    for a in steady[:-1]:
        p = a["progress"]
        assert not p["low"] and p["files"]["source"] == "git" and p["files"]["files"] == 1, p
        assert p["files"]["added"] >= 3 and p["files"]["new"] == 1, p
        assert p["files"]["paths"] == [f"src/part{a['iteration']}.py"], p  # its iteration's file only
    assert [a["progress"]["files"]["commits"] for a in steady[:4]] == [0, 1, 0, 1]
    quiet = attempts(tmp_path, "quiet")
    assert [a["progress"]["files"]["paths"] for a in quiet] == [["notes.txt"]] * 5, [a["progress"] for a in quiet]
    # the memory the next prompts are made from carries each iteration's files summary
    db = sqlite3.connect(tmp_path / ".harness" / "state.db")
    memory = json.loads(db.execute("SELECT data FROM loop_state WHERE task_id='quiet'").fetchone()[0])["memory"]
    assert memory["window"] and all(e["files"].startswith("1 file(s) changed, +1 -0 lines")
                                    for e in memory["window"]), memory["window"]
    talker = rows["talker"]
    assert talker["state"] == "failed" and talker["iterations"] == 3, talker
    assert "no file changed" in talker["error"], talker
    assert all(a["progress"]["files"]["files"] == 0 for a in attempts(tmp_path, "talker"))
    # what the tasks changed landed, as ever
    assert (tmp_path / "src" / "part5.py").exists() and (tmp_path / "notes.txt").read_text() == "line\n" * 5
    assert r.returncode == 1


def test_the_first_prompt_asks_for_progress_markers_so_iteration_1_can_earn_them(tmp_path):
    """Iteration 1 has no memory section (where later prompts ask for markers): the task's
    own prompt asks, so an agent that does as it is told earns the marker signal at once
    instead of counting toward stuck_after while no file changes."""
    git_project(tmp_path, [loop_node("follower", limits={"stuck_after": 2})])
    r = virtual.harnessc(tmp_path, "run")
    first = (tmp_path / ".harness" / "prompt-follower-1.md").read_text()
    assert "`<progress>what you did</progress>`" in first and "Your earlier iterations" not in first
    tries = attempts(tmp_path, "follower")
    assert [a["progress"]["low"] for a in tries[:2]] == [False, True], tries  # 1 marked, 2 did not
    assert tries[0]["progress"]["markers"] == ["read the code"] and tries[0]["progress"]["files"]["files"] == 0
    assert task_rows(tmp_path)["follower"]["state"] == "succeeded" and r.returncode == 0, r.stdout + r.stderr


def test_a_repeated_error_is_stuck_with_its_fingerprint(tmp_path):
    git_project(tmp_path, [loop_node("failing", limits={"stuck_after": 3}, retry={"max_retries": 10},
                                     accept=[{"id": "tests", "argv": [PY, "check.py"], "timeout": 30}])])
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1
    row = task_rows(tmp_path)["failing"]
    assert row["iterations"] == 3, row  # not max_retries (10)
    assert row["error"].startswith("stuck: the same error in 3 iterations in a row: accept check 'tests' failed")
    events = [json.loads(line) for line in (tmp_path / ".harness" / "runs").glob("*/events.jsonl").__next__()
              .read_text().splitlines()]
    stuck = [e for e in events if e["kind"] == "stuck"]
    assert len(stuck) == 1 and stuck[0]["signal"] == "repeated_error"
    alerts = [json.loads(line) for line in (tmp_path / ".harness" / "alerts.log").read_text().splitlines()]
    assert [a["message"][:67] for a in alerts if a["kind"] == "stuck"] == \
        ["stuck: the same error in 3 iterations in a row: accept check 'tests"]
    # Failure memory reached the prompts: the second prompt names the failure and what was tried.
    second = (tmp_path / ".harness" / "prompt-failing-2.md").read_text()
    assert "### Failures so far" in second and "accept check 'tests' failed" in second


def test_simulate_steady_is_progress_and_none_is_stuck(tmp_path):
    write_project(tmp_path, [
        node("steady", completion_promise="DONE", routing={"agent": "steady"}, limits={"stuck_after": 2}),
        node("idle", completion_promise="DONE", routing={"agent": "idle"}, limits={"stuck_after": 2}),
    ], agents={"steady": {"provider": "simulate", "complete_after": 6},
               "idle": {"provider": "simulate", "complete_after": 6, "progress": "none"}},
        loop={"recovery": NO_LADDER})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1
    rows = task_rows(tmp_path)
    assert rows["steady"]["state"] == "succeeded" and rows["steady"]["iterations"] == 7
    assert rows["idle"]["state"] == "failed" and rows["idle"]["iterations"] == 2
    assert rows["idle"]["error"].startswith("stuck: 2 iterations in a row with identical output")
    # Outside git, files are content hashes: none changed here.
    assert attempts(tmp_path, "steady")[1]["progress"]["files"]["source"] == "hashes"


def test_state_migrates_from_version_2_to_the_current_one(tmp_path):
    """A state.db of schema 2 (before the ledger and loop progress) goes through every step and
    gains the progress column and loop_state."""
    write_project(tmp_path, [node("a", completion_promise="DONE", routing={"agent": "s"})],
                  agents={"s": {"provider": "simulate", "complete_after": 1}})
    db = tmp_path / ".harness" / "state.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('app', 'harnessc-state'), ('schema_version', '2');
        CREATE TABLE runs (id TEXT PRIMARY KEY, started_at REAL NOT NULL, ended_at REAL, status TEXT NOT NULL,
          pid INTEGER, options TEXT, exit_code INTEGER, message TEXT);
        CREATE TABLE tasks (id TEXT PRIMARY KEY, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
          iterations INTEGER NOT NULL DEFAULT 0, agent TEXT, tokens INTEGER NOT NULL DEFAULT 0,
          cost_usd REAL NOT NULL DEFAULT 0, error TEXT, output TEXT, fingerprint TEXT, run_id TEXT,
          started_at REAL, finished_at REAL, updated_at REAL);
        CREATE TABLE attempts (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, task_id TEXT NOT NULL,
          iteration INTEGER NOT NULL, level INTEGER NOT NULL DEFAULT 0, agent TEXT,
          prompt_hash TEXT, prompt TEXT, raw_output TEXT, parsed_output TEXT, errors TEXT, checks TEXT,
          input_tokens INTEGER, output_tokens INTEGER, cost_usd REAL, latency REAL,
          status TEXT NOT NULL, started_at REAL NOT NULL, finished_at REAL,
          proc_marker TEXT, proc_pid INTEGER, proc_start INTEGER);
        CREATE INDEX attempts_task ON attempts(task_id, id);
        CREATE TABLE ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, task_id TEXT NOT NULL,
          attempt_id INTEGER, reserved REAL NOT NULL, actual REAL, settled INTEGER NOT NULL DEFAULT 0,
          ts REAL NOT NULL);
        CREATE INDEX ledger_task ON ledger(task_id);
        CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, ts REAL NOT NULL,
          kind TEXT NOT NULL, task_id TEXT, data TEXT);
        INSERT INTO runs VALUES ('old', 1, 2, 'succeeded', 1, '{}', 0, '');
        INSERT INTO tasks (id, state, attempts, iterations) VALUES ('a', 'pending', 1, 1);
        INSERT INTO attempts (run_id, task_id, iteration, status, started_at, raw_output)
          VALUES ('old', 'a', 1, 'progress', 1, 'kept');
    """)
    con.commit()
    con.close()
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    con = sqlite3.connect(db)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    rows = con.execute("SELECT raw_output, progress FROM attempts ORDER BY id").fetchall()
    assert rows[0] == ("kept", None) and json.loads(rows[1][1])["score"] >= 0
    assert con.execute("SELECT COUNT(*) FROM loop_state WHERE task_id='a'").fetchone()[0] == 1


MEMORY_AGENT = textwrap.dedent("""
    import os, pathlib, sys, time
    task = os.environ["HARNESSC_TASK"]
    prompt = sys.stdin.read()
    calls = pathlib.Path(".harness") / f"calls-{task}"
    n = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(n))
    pathlib.Path(".harness", f"prompt-{task}-{n}.md").write_text(prompt)
    pathlib.Path(f"work-{n}.txt").write_text("done\\n" * n)
    if n == 1:
        print("<decision>store sessions in sqlite, not files</decision> <progress>schema drafted</progress>")
    elif n == 2:
        print("<progress>tables created</progress> first try failed: ImportError at line 12")
    elif n == 3:                     # the run is killed during this call
        pathlib.Path(".harness", "in-call-3").write_text("")
        time.sleep(120)
    else:
        print("<progress>all done</progress> <promise>DONE</promise>")
""")


def wait_for(path, proc, limit=60.0):
    """Poll until `path` exists (the run may take a while on a busy machine)."""
    import time
    end = time.monotonic() + limit
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.05)


def test_memory_reaches_the_next_prompt_and_survives_kill_9(tmp_path):
    import os
    import signal

    import inproc

    from .helpers import spawn

    (tmp_path / "agent.py").write_text(MEMORY_AGENT)
    write_project(tmp_path, [node("mem", completion_promise="DONE", routing={"agent": "script"},
                                  goal="Build the session store.")],
                  agents={"script": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")],
                                     "timeout": 300}})
    proc = spawn(tmp_path, "run", start_new_session=True)
    try:
        wait_for(tmp_path / ".harness" / "in-call-3", proc)
        # `status` during the loop: iteration N/limit, last-5 progress, agent, last marker.
        r = inproc.harnessc("-C", str(tmp_path), "status", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert 'loop mem: iteration 3/50 · progress ' in r.stdout and 'last marker: "tables created"' in r.stdout
        assert "· script ·" in r.stdout
        data = json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--output", "json", cwd=tmp_path).stdout)
        loop = [t for t in data["tasks"] if t["id"] == "mem"][0]["loop"]
        assert loop["iteration"] == 3 and loop["max_iterations"] == 50 and loop["progress"] > 0.15
        assert loop["recovery"] is None  # no rung climbed yet
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # harnessc and its agent, mid-call
        proc.communicate()
    prompts = {n: (tmp_path / ".harness" / f"prompt-mem-{n}.md").read_text() for n in (1, 2, 3)}
    assert "earlier iterations" not in prompts[1]
    assert "This is iteration 2." in prompts[2] and "#### Iteration 1 (script, progress 0.5" in prompts[2]
    assert "store sessions in sqlite, not files" in prompts[2]
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    resumed = (tmp_path / ".harness" / "prompt-mem-4.md").read_text()
    # The interrupted call 3 left nothing to remember; iterations 1 and 2 are remembered.
    assert "This is iteration 3." in resumed
    assert "### Decisions taken\n\n- store sessions in sqlite, not files" in resumed
    assert "#### Iteration 1 (script" in resumed and "#### Iteration 2 (script" in resumed
    assert "<progress>tables created</progress>" in resumed and "1 file(s) changed" in resumed
    r = virtual.harnessc(tmp_path, "run", "--rerun", "all")  # a new round: nothing of the last one remembered
    assert r.returncode == 0, r.stdout + r.stderr
    rerun = (tmp_path / ".harness" / "prompt-mem-5.md").read_text()
    assert "earlier iterations" not in rerun and "This is iteration" not in rerun
    assert "store sessions in sqlite" not in rerun


def test_memory_window_summary_and_budget(tmp_path):
    """Past the window, iterations become summary lines; the section stays within its budget."""
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "s"})],
                  agents={"s": {"provider": "simulate", "complete_after": 8}})
    plan_path = tmp_path / ".harness" / "build" / "plan.json"
    plan = json.loads(plan_path.read_text())
    plan["loop"] = Loop().model_dump(mode="json")  # as a build writes it
    plan["loop"]["context"].update(raw_window_size=2, max_summary_tokens=60, max_tokens=400)
    plan_path.write_text(json.dumps(plan))
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    prompts = [a["prompt"] for a in attempts(tmp_path, "t")]
    last = prompts[-1]
    assert "This is iteration 9." in last
    assert "#### Iteration 8 (s" in last and "#### Iteration 7 (s" in last and "#### Iteration 6" not in last
    summary = last.split("### Summary of earlier iterations")[1].split("###")[0]
    assert "iteration 5 (s, progress" in summary and "step 5 of t" in summary
    assert "older iterations omitted" in summary  # 60 tokens hold only the latest lines
    assert "iteration 1 (s" not in summary
    base = prompts[0]
    assert len(last) - len(base) <= 400 * 4


CHECKLIST_AGENT = textwrap.dedent("""
    import pathlib, sys
    sys.stdin.read()
    calls = pathlib.Path(".harness") / "calls"
    n = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(n))
    done = {1: ["Alpha step"], 2: ["alpha step"], 3: ["alpha step", "beta: step!"]}.get(n, [])
    print("\\n".join(f"- [x] {d}" for d in done) + "\\n<promise>DONE</promise>")
""")

# More tests pass at calls 1 and 2, the same at 3; exit 0 from call 4 on.
COUNTING_CHECK = textwrap.dedent("""
    import pathlib, sys
    n = int((pathlib.Path(".harness") / "calls").read_text())
    print(f"{min(n, 2)} passed, 3 failed in 0.01s")
    sys.exit(0 if n >= 4 else 1)
""")


def test_checklist_items_and_passing_tests_are_evidence(tmp_path):
    (tmp_path / "agent.py").write_text(CHECKLIST_AGENT)
    (tmp_path / "check.py").write_text(COUNTING_CHECK)
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "script"},
                                  goal="Do it:\n- [ ] alpha step\n- [ ] beta step\n",
                                  limits={"stuck_after": 5}, retry={"max_retries": 5},
                                  accept=[{"id": "tests", "argv": [PY, "check.py"], "timeout": 30}])],
                  agents={"script": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")]}})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    progress = [a["progress"] for a in attempts(tmp_path, "t")]
    assert [p["done"] for p in progress] == [["alpha step"], [], ["beta step"], []]
    assert [p["signals"]["checklist"] for p in progress] == [1.0, 0.0, 1.0, 0.0]
    assert [p["passed"] for p in progress] == [1, 2, 2, 2]
    assert [p["signals"]["tests"] for p in progress] == [1.0, 1.0, 0.0, 1.0]  # the 4th: exit 0
    text = virtual.harnessc(tmp_path, "log", "t", "--attempt", "1").stdout
    assert "--- progress " in text and "done: alpha step" in text


def test_a_broken_memory_template_fails_the_task_with_its_place(tmp_path):
    write_project(tmp_path, [node("t", completion_promise="DONE", routing={"agent": "s"})],
                  agents={"s": {"provider": "simulate", "complete_after": 3}}, templates="tpl")
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "memory.md.j2").write_text("Iteration {{ iteration }}\n{{ memory.nope }}\n")
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    row = task_rows(tmp_path)["t"]
    assert row["state"] == "failed" and row["iterations"] == 1
    assert row["error"].startswith("could not render the memory section: tpl/memory.md.j2:2: HC502: "), row["error"]
    assert "nope" in row["error"]


# A worker and a talker whose calls overlap for sure: the worker writes during the talker's
# call (it waits for the talker's call to start, and the talker waits for the write).
SIDE_BY_SIDE = textwrap.dedent("""
    import os, pathlib, sys, time
    task = os.environ["HARNESSC_TASK"]
    sys.stdin.read()
    flags = pathlib.Path(".harness")
    calls = flags / f"calls-{task}"
    n = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(n))
    def wait_for(name):
        deadline = time.time() + 30
        while not (flags / name).exists() and time.time() < deadline:
            time.sleep(0.02)
    if task == "talker":
        (flags / f"talker-{n}").write_text("")
        if n <= 3:
            wait_for(f"wrote-{n}")
        print(f"Still thinking (thought {n}).")
    else:
        if n <= 3:
            wait_for(f"talker-{n}")
        pathlib.Path("src", f"part{n}.py").write_text("".join(f"x{i} = {i}\\n" for i in range(5)))
        (flags / f"wrote-{n}").write_text("")
        print("working" + (" <promise>DONE</promise>" if n >= 5 else ""))
""")


def test_a_task_is_not_credited_with_what_another_task_writes_at_the_same_time(tmp_path):
    """Two loop tasks at once (-j 2): the worker's files (in its context directory) are its
    progress, not the talker's, so the talker is found stuck while the worker works."""
    git_project(tmp_path, [loop_node("worker", context=["src/seed.py"], limits={"stuck_after": 2}),
                           loop_node("talker", limits={"stuck_after": 3})], concurrency=2)
    (tmp_path / "agent.py").write_text(SIDE_BY_SIDE)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "seed.py").write_text("seed = 0\n")
    virtual.harnessc(tmp_path, "run")
    rows = task_rows(tmp_path)
    assert rows["worker"]["state"] == "succeeded", rows["worker"]
    worker, talker = attempts(tmp_path, "worker"), attempts(tmp_path, "talker")
    # every call answered, so each attempt has its evidence (a call that failed has none: say why)
    assert all(a["progress"] for a in worker + talker), [(a["task_id"], a["status"], a["errors"], a["raw_output"])
                                                         for a in worker + talker if not a["progress"]]
    assert all(a["progress"]["files"]["files"] == 1 for a in worker), [a["progress"] for a in worker]
    assert rows["talker"]["state"] == "failed" and rows["talker"]["iterations"] == 3, rows["talker"]
    assert "no file changed" in rows["talker"]["error"], rows["talker"]
    assert all(a["progress"]["files"]["files"] == 0 for a in talker), [a["progress"] for a in talker]
    # each saw the worker's file of its time (and may see the next one, written while it ends)
    assert all(a["progress"]["files"]["others"] >= 1 for a in talker), [a["progress"] for a in talker]
