"""Reliability drills: kill -9 at random moments, and the secret canary."""

from __future__ import annotations

import base64
import os
import random
import signal
import sqlite3
import textwrap
import time
from pathlib import Path

from .helpers import PY, harnessc, node, spawn, write_project

CALL_LOGGER = textwrap.dedent("""
    import os, sys, time, random
    task = os.environ["HARNESSC_TASK"]
    with open(os.environ["CALL_LOG"], "a") as f:
        f.write(f"{time.time():.6f} {task}\\n")
        f.flush()
        os.fsync(f.fileno())
    sys.stdin.read()
    time.sleep(random.uniform(0.1, 0.4))
    print("done <promise>DONE</promise>")
""")


def test_kill_9_drill_resumes_to_completion_without_recalling_committed_tasks(tmp_path):
    rng = random.Random(1234)
    root = tmp_path / "proj"
    script = tmp_path / "agent.py"
    script.write_text(CALL_LOGGER)
    calls = tmp_path / "calls.log"
    nodes = []
    for i in range(40):
        deps = [f"t{j:02d}" for j in rng.sample(range(i), k=min(i, rng.randint(0, 2)))] if i else []
        nodes.append(node(f"t{i:02d}", depends_on=deps, completion_promise="DONE",
                          routing={"agent": "logger"}))
    write_project(root, nodes, agents={"logger": {"provider": "command", "command": [PY, str(script)],
                                                  "timeout": 30, "pass_env": ["CALL_LOG"]}},
                  concurrency=4)
    env = {**os.environ, "CALL_LOG": str(calls),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    kills, history = 0, []
    for round_ in range(12):
        p = spawn(root, "run", env=env)
        if kills < 5:
            time.sleep(rng.uniform(0.6, 1.6))
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                kills += 1
            out, err = p.communicate(timeout=30)
            history.append((p.returncode, err[-500:]))
            if p.returncode == 0:
                break
            continue
        out, err = p.communicate(timeout=120)
        history.append((p.returncode, err[-500:]))
        if p.returncode == 0:
            break
        assert p.returncode in (0, 3), out + err
    else:
        raise AssertionError(f"the plan never completed: {history}")
    assert kills >= 3
    con = sqlite3.connect(root / ".harness" / "state.db")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    committed = dict(con.execute("SELECT id, finished_at FROM tasks WHERE state='succeeded'"))
    assert len(committed) == 40
    seen: dict[str, list[float]] = {}
    for line in calls.read_text().splitlines():
        ts, task = line.split()
        seen.setdefault(task, []).append(float(ts))
    for task, finished in committed.items():
        late = [t for t in seen[task] if t > finished]
        assert not late, f"{task} was called again after its success was committed"
    # Every attempt left 'started' by a kill was marked interrupted on resume.
    assert con.execute("SELECT COUNT(*) FROM attempts WHERE status='started'").fetchone()[0] == 0
    con.close()


def test_secret_canary_never_reaches_harness_dir(tmp_path):
    canary_a = "sk-ant-CANARY-7f3a9c1e5b2d4f60"
    canary_o = "sk-openai-CANARY-0d9e8c7b6a5f4e3d"
    script = tmp_path / "agent.py"
    # A hostile agent that was given the key (pass_env) prints it in every disguise it can,
    # on stdout and stderr, plus every environment variable (and its stdin).
    script.write_text(textwrap.dedent("""
        import base64, json, os, sys
        sys.stdin.read()
        key = os.environ["ANTHROPIC_API_KEY"]
        forms = [key, key[::-1]] + [enc(pre + key.encode()).decode()
                                    for pre in (b"", b"x", b"xy")
                                    for enc in (base64.b64encode, base64.urlsafe_b64encode)]
        print(json.dumps(dict(os.environ)))
        print(json.dumps(forms))
        print("\\n".join(forms), file=sys.stderr)
        sys.exit(int(os.path.exists("fail-once") and not os.rename("fail-once", "failed")))
    """))
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "fail-once").write_text("")  # the first call fails: its stderr is kept
    root = tmp_path / "proj"
    write_project(root, [node("leak", routing={"agent": "cli"}),
                         node("sim", accept=[{"id": "env", "argv": ["env"], "timeout": 5}])],
                  agents={"cli": {"provider": "command", "command": [PY, str(script)],
                                  "pass_env": ["ANTHROPIC_API_KEY"]},
                          "rehearsal": {"provider": "simulate"}})
    env = {**os.environ, "ANTHROPIC_API_KEY": canary_a, "OPENAI_API_KEY": canary_o,
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    forms = [canary_a, canary_a[::-1]] + [
        enc(pre + canary_a.encode()).decode() for pre in (b"", b"x", b"xy")
        for enc in (base64.b64encode, base64.urlsafe_b64encode)]
    r = harnessc(root, "run", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    harnessc(root, "log", "leak", env=env)
    for path in (root / ".harness").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for form in forms:
                assert form.encode() not in data, (path, form)
                assert form.rstrip("=").encode() not in data, (path, form)
            assert canary_o.encode() not in data, path
    assert canary_a not in r.stdout + r.stderr
