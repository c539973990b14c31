"""Every agent call is bounded as a whole (callbounds.py): a server that keeps a stream alive
with an event now and then, or sends its body a byte at a time, is cut at the task's
max_time (the SDKs' own timeout is per read), and a graceful stop cuts a call that outlives
its grace. Real SDKs against the fake server (a thread of this process); harnessc runs in this
process on the real clock (tests/inproc.py), but for the run a stop is sent to, a process."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import time

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("anthropic")
pytest.importorskip("openai")

import inproc  # noqa: E402

from .fakeapi import Reply, ThreadedFakeAPI  # noqa: E402
from .helpers import CLI, SIMPLE_CONTRACT, env, node, write_project  # noqa: E402

# The task's max_time: long enough that the run's start (a second or two on a loaded machine;
# the SDKs are imported above, and the run is in this process) leaves the request time to
# reach the server, which counts its ticks.
MAX_TIME = 5
# The most keep-alive events or bytes a cut call may have let through: max_time 5s at one
# every 0.5s is 10; what the server sends while the run winds down is a few more. Unbounded
# before the fix (the run went on as long as the server did).
MOST_TICKS = 40


def _env(**extra: str) -> dict:
    e = {k: v for k, v in env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "HARNESSC_STOP"))}
    e.update(ANTHROPIC_API_KEY="test-anthropic-key-0000", OPENAI_API_KEY="test-openai-key-0000", **extra)
    return e


def _agent(api, provider: str, stream: bool) -> dict:
    base = api.base_url if provider == "anthropic" else api.base_url + "/v1"
    return {"provider": provider, "model": "m-1", "base_url": base, "stream": stream}


def _project(root, api, provider: str, stream: bool) -> None:
    write_project(root, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                  agents={"llm": _agent(api, provider, stream)}, contracts={"summary": SIMPLE_CONTRACT})


def _attempts(root) -> dict[str, list[dict]]:
    con = sqlite3.connect(root / ".harness" / "state.db")
    con.row_factory = sqlite3.Row
    found: dict[str, list[dict]] = {}
    for r in con.execute("SELECT task_id, status, errors, input_tokens, cost_source FROM attempts ORDER BY id"):
        found.setdefault(r["task_id"], []).append(dict(r))
    return found


def _tasks(root, e) -> dict[str, dict]:
    status = json.loads(inproc.harnessc("-C", str(root), "status", "--json", env=e).stdout)
    return {t["id"]: t for t in status["tasks"]}


# Each case is a task of one run, against a server of its own: the four wait out their
# max_time side by side (one after the other, they took four times as long).
CASES = {"anthropic-slow": ("anthropic", True, "slow"), "openai-slow": ("openai", True, "slow"),
         "anthropic-drip": ("anthropic", False, "drip"), "openai-drip": ("openai", False, "drip")}


def test_a_slow_server_is_cut_at_the_tasks_max_time(tmp_path) -> None:
    e = _env()
    with contextlib.ExitStack() as stack:
        apis = {tid: stack.enter_context(ThreadedFakeAPI()) for tid in CASES}
        for api, (_, _, fault) in zip(apis.values(), CASES.values()):
            api.push(Reply(fault=fault, text='{"title": "' + "x" * 400 + '", "score": 1}'))
        write_project(tmp_path, [node(tid, contract="summary", limits={"max_time": MAX_TIME},
                                      routing={"agent": tid, "chain": [tid]}) for tid in CASES],
                      agents={tid: _agent(apis[tid], provider, stream) for tid, (provider, stream, _) in CASES.items()},
                      contracts={"summary": SIMPLE_CONTRACT}, concurrency=len(CASES))
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e)
        seen = {tid: (api.ticks, api.count) for tid, api in apis.items()}
    assert r.returncode == 1, r.stdout + r.stderr
    tasks, attempts = _tasks(tmp_path, e), _attempts(tmp_path)
    for tid, (provider, stream, _) in CASES.items():
        ticks, requests = seen[tid]
        assert 0 < ticks <= MOST_TICKS and requests == 1, (tid, seen)
        task = tasks[tid]
        assert task["state"] == "failed" and task["error"].startswith(
            f"max_time ({MAX_TIME}s) reached; 1 call failed without an answer (timeout)"), task
        [attempt] = attempts[tid]
        assert attempt["status"] == "error", (tid, attempt)
        assert "the call was cut after" in attempt["errors"] and "max_time" in attempt["errors"], (tid, attempt)
        if provider == "anthropic" and stream:  # message_start reported its usage: charged
            assert attempt["input_tokens"] == 10 and attempt["cost_source"] != "no_response", attempt


def test_run_max_time_cuts_a_call_that_outlives_the_stops_grace(tmp_path) -> None:
    """`run --max-time` stops the run as `harnessc stop` does; a call still running the grace
    after it is cut, its attempt interrupted, the task pending for the next run."""
    e = _env(HARNESSC_STOP_GRACE="1")
    with ThreadedFakeAPI() as api:
        api.push(Reply(fault="slow"))
        _project(tmp_path, api, "anthropic", True)
        r = inproc.harnessc("-C", str(tmp_path), "run", "--max-time", "2s", env=e)
        ticks = api.ticks
    assert r.returncode == 3, r.stdout + r.stderr
    assert 0 < ticks <= MOST_TICKS
    assert _tasks(tmp_path, e)["t"]["state"] in ("pending", "ready")
    [attempt] = _attempts(tmp_path)["t"]
    assert attempt["status"] == "interrupted"
    assert "1s after the stop" in attempt["errors"]


def test_stop_during_a_slow_call_ends_it_after_the_grace(tmp_path) -> None:
    e = _env(HARNESSC_STOP_GRACE="1")
    with ThreadedFakeAPI() as api:
        api.push(Reply(fault="slow"))
        _project(tmp_path, api, "openai", True)
        proc = subprocess.Popen([*CLI, "-C", str(tmp_path), "run"], env=e, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while api.ticks < 2 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert api.ticks >= 2, "the call never started"
            assert inproc.harnessc("-C", str(tmp_path), "stop", env=e).returncode == 0
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 3, out + err
    assert _tasks(tmp_path, e)["t"]["state"] in ("pending", "ready")
    [attempt] = _attempts(tmp_path)["t"]
    assert attempt["status"] == "interrupted" and "after the stop" in attempt["errors"]


def test_a_bad_stop_grace_falls_back_to_the_default(monkeypatch) -> None:
    from harnessc.runtime.routing.callbounds import STOP_GRACE, stop_grace

    for bad in ("soon", "-1", "inf", "nan", ""):
        monkeypatch.setenv("HARNESSC_STOP_GRACE", bad)
        assert stop_grace() == STOP_GRACE
    monkeypatch.setenv("HARNESSC_STOP_GRACE", "2.5")
    assert stop_grace() == 2.5
