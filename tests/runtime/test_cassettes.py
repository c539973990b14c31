"""Record / replay (runtime/agents/cassettes.py) through the real CLI: a recorded run replays to the
same outputs with its agent gone, a changed request fails naming the cassette and the nearest
recorded request, recorded errors replay as errors of their kind, keys never reach a cassette,
and a replay imports no SDK."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessc.providers import agent_config
from harnessc.runtime.agents.base import Request
from harnessc.runtime.agents.cassettes import Cassettes, normalized
from harnessc.runtime.agents.errors import AgentError
from harnessc.workspace import Workspace

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, env, harnessc, node, write_project

# Fails the first call of each task (exit 1: kind `failed`, retried with the same prompt),
# then answers; the answer depends on the prompt, so a replay must serve the recorded one.
SCRIPT = textwrap.dedent("""
    import json, os, sys
    prompt = sys.stdin.read()
    task = os.environ["HARNESSC_TASK"]
    seen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seen-" + task)
    if not os.path.exists(seen):
        open(seen, "w").close()
        sys.stderr.write("warming up\\n")
        sys.exit(1)
    if task == "a":
        print("```json\\n" + json.dumps({"title": "from the script", "score": len(prompt) % 97}) + "\\n```")
    else:
        print("done <promise>DONE</promise>")
""")


def _project(root: Path, agent: dict | None = None, title: str = "Task a") -> None:
    agent = agent or {"provider": "command", "command": [PY, str(root / "agent.py")]}
    llm = {"agent": "llm", "chain": ["llm"]}
    write_project(root, [node("a", title=title, contract="summary", routing=llm),
                         node("b", depends_on=["a"], completion_promise="DONE", routing=llm)],
                  agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})


def _attempts(root: Path, task: str) -> list[tuple]:
    r = virtual.harnessc(root, "log", task, "--output", "json")
    assert r.returncode == 0, r.stderr
    return [(a["status"], a["errors"], a["raw_output"], a["parsed_output"], a["input_tokens"],
             a["output_tokens"], a["cost_usd"], a["cost_source"]) for a in json.loads(r.stdout)]


def _forget_state(root: Path) -> None:
    """What a CI checkout has: the build and the cassettes, no state of earlier runs."""
    for p in (root / ".harness").iterdir():
        if p.name not in ("build", "cassettes"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()


def _record(root: Path) -> dict[str, list[tuple]]:
    (root / "agent.py").write_text(SCRIPT, encoding="utf-8")
    _project(root)
    r = virtual.harnessc(root, "run", "--record")
    assert r.returncode == 0, r.stdout + r.stderr
    return {t: _attempts(root, t) for t in ("a", "b")}


def test_replay_serves_the_recorded_run_without_the_agent(tmp_path) -> None:
    recorded = _record(tmp_path)
    assert [a[0] for a in recorded["a"]] == ["error", "succeeded"]  # the retry asked the same thing
    lines = [json.loads(x) for x in (tmp_path / ".harness/cassettes/a.jsonl").read_text().splitlines()]
    assert [("error" in c, c["request"]["iteration"]) for c in lines] == [(True, 1), (False, 2)]
    assert lines[0]["key"] == lines[1]["key"] and lines[0]["error"]["kind"] == "failed"
    assert lines[0]["request"]["agent"] == "llm" and lines[0]["request"]["provider"] == "command"

    (tmp_path / "agent.py").unlink()
    for seen in tmp_path.glob("seen-*"):
        seen.unlink()
    _forget_state(tmp_path)
    r = virtual.harnessc(tmp_path, "run", "--replay")
    assert r.returncode == 0, r.stdout + r.stderr
    replayed = {t: _attempts(tmp_path, t) for t in ("a", "b")}
    assert replayed == recorded
    assert not list(tmp_path.glob("seen-*"))  # the agent never ran


def test_a_changed_prompt_fails_the_task_naming_the_cassette_and_the_nearest_request(tmp_path) -> None:
    _record(tmp_path)
    _project(tmp_path, title="Task a, reworded")
    _forget_state(tmp_path)
    r = virtual.harnessc(tmp_path, "run", "--replay")
    assert r.returncode == 1, r.stdout + r.stderr
    tasks = {t["id"]: t for t in json.loads(virtual.harnessc(tmp_path, "status", "--json").stdout)["tasks"]}
    assert tasks["a"]["state"] == "failed" and tasks["b"]["state"] == "skipped"
    error = tasks["a"]["error"]
    assert "replay: no recorded answer for task 'a'" in error
    assert ".harness/cassettes/a.jsonl" in error
    assert "nearest recorded: .harness/cassettes/a.jsonl line 1 (agent 'llm', iteration 1)" in error
    # the task's header comes after the shared text (the contract's format)
    from harnessc.runtime.plan import load_plan, render_prompt

    prompt = render_prompt(load_plan(tmp_path), "a", None, tmp_path).splitlines()
    line = prompt.index("# Task a: Task a, reworded") + 1
    assert line > 1 and (f'the prompt differs at line {line} (recorded "# Task a: Task a", '
                         f'now "# Task a: Task a, reworded")') in error
    assert tasks["a"]["attempts"] == 1  # not retried: asking again cannot find it either


def test_a_request_asked_more_often_than_recorded_says_so(tmp_path) -> None:
    _record(tmp_path)
    lines = (tmp_path / ".harness/cassettes/a.jsonl").read_text().splitlines()
    (tmp_path / ".harness/cassettes/a.jsonl").write_text(lines[0] + "\n")  # only the failure
    _forget_state(tmp_path)
    r = virtual.harnessc(tmp_path, "run", "--replay")
    assert r.returncode == 1
    error = {t["id"]: t for t in json.loads(virtual.harnessc(tmp_path, "status", "--json").stdout)["tasks"]}["a"]["error"]
    assert "this request was recorded 1 time(s) and each recorded answer was served already" in error


def test_replay_without_cassettes_or_with_a_damaged_one(tmp_path) -> None:
    (tmp_path / "agent.py").write_text(SCRIPT, encoding="utf-8")
    _project(tmp_path)
    r = virtual.harnessc(tmp_path, "run", "--replay")  # the pre-flight refuses: nothing is called
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.splitlines()[:2] == [
        f"harnessc: error: agent 'llm' cannot be used: .harness/cassettes/{t}.jsonl does not exist "
        f"(record it with `harnessc run --record`) (the only agent of task '{t}')" for t in ("a", "b")]
    assert virtual.harnessc(tmp_path, "status", "--json").returncode == 0
    assert json.loads(virtual.harnessc(tmp_path, "status", "--json").stdout)["run"] is None
    assert not list(tmp_path.glob("seen-*"))

    (tmp_path / ".harness/cassettes").mkdir()
    (tmp_path / ".harness/cassettes/a.jsonl").write_text('{"v": 1, "key": "x"}\n{"v": 1\n')
    (tmp_path / ".harness/cassettes/b.jsonl").write_text("")
    r = virtual.harnessc(tmp_path, "run", "--replay")
    assert r.returncode == 1
    tasks = {t["id"]: t for t in json.loads(virtual.harnessc(tmp_path, "status", "--json").stdout)["tasks"]}
    assert ".harness/cassettes/a.jsonl line 1 is not a recorded call (no request with task, system and prompt)" \
        in tasks["a"]["error"]
    assert "Traceback" not in r.stderr


def test_record_and_replay_together_is_a_usage_error(tmp_path) -> None:
    _project(tmp_path)
    r = virtual.harnessc(tmp_path, "run", "--record", "--replay")
    assert r.returncode == 2
    assert r.stderr == "harnessc: error: --record and --replay cannot be used together\n"


def test_provider_replay_serves_a_committed_cassette_directory(tmp_path) -> None:
    """An agent with `provider: replay` answers from `cassette:` (any agent's recording of the
    same question); a cassette outside the project is refused."""
    recorded = _record(tmp_path)
    shutil.copytree(tmp_path / ".harness/cassettes", tmp_path / "tests/cassettes")
    shutil.rmtree(tmp_path / ".harness/cassettes")
    _forget_state(tmp_path)
    _project(tmp_path, agent={"provider": "replay", "cassette": "tests/cassettes"})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert {t: _attempts(tmp_path, t) for t in ("a", "b")} == recorded

    _project(tmp_path, agent={"provider": "replay", "cassette": "../elsewhere"})
    r = virtual.harnessc(tmp_path, "run", "--rerun", "all")  # refused by the pre-flight
    assert r.returncode == 2
    assert r.stderr.startswith("harnessc: error: agent 'llm' cannot be used: cassette '../elsewhere' must be "
                               "a directory inside the project (the only agent of tasks 'a', 'b')\n"), r.stderr
    assert {t: _attempts(tmp_path, t) for t in ("a", "b")} == recorded


def test_recorded_api_errors_replay_by_kind_keys_never_recorded_and_no_sdk_imported(tmp_path) -> None:
    """An openai agent against the fault server: a 429 (retried) then an answer that echoes the
    key; the cassette holds neither the key nor any form of it, and the replay - server gone,
    key unset - makes the same attempts without importing an SDK."""
    pytest.importorskip("openai")
    pytest.importorskip("aiohttp")
    from .fakeapi import Reply, ThreadedFakeAPI

    key = "sk-cassette-test-key-0123456789abcdef"
    answer = '{"title": "Q3", "score": 4}'
    e = {k: v for k, v in env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    with ThreadedFakeAPI() as api:
        api.push(Reply.error(429, "rate_limit_error", headers={"retry-after": "0"},
                             message=f"slow down, {key}"),
                 Reply.ok(f"Your key is {key}.\n\n```json\n{answer}\n```", usage={"input": 100, "output": 20}))
        agent = {"provider": "openai", "model": "m-1", "base_url": api.base_url + "/v1",
                 "api_key_env": "LLM_KEY", "price": {"input": 3.0, "output": 15.0}}
        _project(tmp_path, agent=agent)
        (tmp_path / ".harness/build/plan.json").write_text(json.dumps(
            {**json.loads((tmp_path / ".harness/build/plan.json").read_text()),
             "nodes": [node("a", contract="summary", routing={"agent": "llm", "chain": ["llm"]})]}))
        r = harnessc(tmp_path, "run", "--record", env={**e, "LLM_KEY": key})
        assert r.returncode == 0, r.stdout + r.stderr
        assert api.count == 2
    recorded = _attempts(tmp_path, "a")
    assert [a[0] for a in recorded] == ["error", "succeeded"]
    tape = (tmp_path / ".harness/cassettes/a.jsonl").read_bytes()
    forms = [key, key[::-1], base64.b64encode(key.encode()).decode()[:-4]]
    assert not [f for f in forms if f.encode() in tape]
    # Nor in the state or the run's files: LLM_KEY does not look like a secret's name, but it
    # is the agent's api_key_env.
    leaks = [p for p in (tmp_path / ".harness").rglob("*")
             if p.is_file() and any(f.encode() in p.read_bytes() for f in forms)]
    assert not leaks
    calls = [json.loads(x) for x in tape.decode().splitlines()]
    assert calls[0]["error"]["kind"] == "rate_limited" and calls[0]["error"]["retry_after"] == 0
    assert "[redacted]" in calls[1]["response"]["text"]
    assert calls[1]["response"]["usage"]["input_tokens"] == 100 and calls[1]["response"]["cost_usd"] > 0

    _forget_state(tmp_path)
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('SDKS', sorted(m for m in ('anthropic', 'openai') if m in sys.modules),"
             " file=sys.stderr))\n"
             "from harnessc.cli import main; main()\n")
    r = subprocess.run([PY, "-c", probe, "-C", str(tmp_path), "run", "--replay"], capture_output=True,
                       text=True, timeout=120, env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SDKS []" in r.stderr
    replayed = _attempts(tmp_path, "a")
    assert [a[:2] for a in replayed] == [a[:2] for a in recorded]  # the same error, then success
    assert replayed[1][3] == recorded[1][3] == json.loads(answer)
    assert replayed[1][4:] == recorded[1][4:]  # tokens, cost and its source as recorded
    assert [a[-1] for a in replayed] == [a[-1] for a in recorded] == ["no_response", "price"]
    assert "rate limited (HTTP 429)" in replayed[0][1][0]


def test_replay_agent_builds_no_live_agent_and_serves_repeats_in_order(tmp_path) -> None:
    """In-process: replay never constructs the real agent class (a command agent without
    `command:` would refuse to be built), and identical requests get the recorded answers in
    their order, errors included."""
    ws = Workspace(tmp_path)
    broken = agent_config("x", {"provider": "command"})  # make_agent would raise: no command
    with pytest.raises(AgentError, match="needs `command:`"):
        Cassettes(ws, "record").agent("x", broken)
    req = Request(task_id="t", prompt="p", system="s")
    rec = Cassettes(ws, "record")
    for outcome, body in (("error", {"kind": "overloaded", "message": "busy", "retry_after": 9,
                                     "usage": {}, "cost_usd": 0.0}),
                          ("response", {"text": "one", "usage": {"output_tokens": 3}, "cost_usd": 0.5}),
                          ("response", {"text": "two"})):
        rec.record(normalized("x", broken, req), outcome, body)
    agent = Cassettes(ws, "replay").agent("x", broken)

    async def calls() -> list:
        out = []
        for _ in range(4):
            try:
                out.append((await agent.call(req)).text)
            except AgentError as err:
                out.append((err.kind, err.retry_after))
        return out

    served = asyncio.run(calls())
    assert served[:3] == [("overloaded", 0.0), "one", "two"]
    assert served[3][0] == "not_recorded"


def test_cassette_file_names_are_task_ids_or_a_hash(tmp_path) -> None:
    ws = Workspace(tmp_path)
    assert ws.cassette("setup-001") == tmp_path / ".harness/cassettes/setup-001.jsonl"
    odd = ws.cassette("../../etc/passwd")
    assert odd.parent == tmp_path / ".harness/cassettes" and odd.name.startswith("task-")
    assert ws.cassette("x", tmp_path / "tests/c") == tmp_path / "tests/c/x.jsonl"
    assert os.sep not in ws.cassette("a/b").name


def test_a_recorded_x_should_retry_replays_the_same_decision(tmp_path) -> None:
    """An error the server marked x-should-retry: false (a 500, otherwise retried) replays as
    not retried; one it marked true (a 400) as retried; an unreadable value is ignored."""
    ws = Workspace(tmp_path)
    cfg = agent_config("x", {"provider": "openai", "model": "m"})
    req = Request(task_id="t", prompt="p", system="s")
    rec = Cassettes(ws, "record")
    for kind, retry in (("server", False), ("invalid_request", True), ("server", "no")):
        rec.record(normalized("x", cfg, req), "error", {"kind": kind, "message": "m", "retry": retry})
    agent = Cassettes(ws, "replay").agent("x", cfg)

    async def calls() -> list:
        out = []
        for _ in range(3):
            with pytest.raises(AgentError) as err:
                await agent.call(req)
            out.append((err.value.kind, err.value.transient, err.value.final))
        return out

    assert asyncio.run(calls()) == [("server", False, True), ("invalid_request", True, False),
                                    ("server", True, False)]


_ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=60)  # surrogates too


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(st.sampled_from(["p", "q\n"]) | _ANY_TEXT,
                                _ANY_TEXT, st.booleans()), min_size=1, max_size=6))
def test_any_recorded_calls_replay_as_recorded(tmp_path_factory, calls) -> None:
    """Whatever the prompts and answers hold (lone surrogates, newlines, quotes), the recorded
    calls of a task are served back as they were, identical prompts in their recorded order."""
    ws = Workspace(tmp_path_factory.mktemp("c"))
    config = agent_config("x", {"provider": "command", "model": None})
    rec = Cassettes(ws, "record")
    for prompt, text, failed in calls:
        asked = normalized("x", config, Request(task_id="t", prompt=prompt, system="s"))
        if failed:
            rec.record(asked, "error", {"kind": "server", "message": text, "usage": {"output_tokens": 2}})
        else:
            rec.record(asked, "response", {"text": text, "usage": {"input_tokens": 7}, "cost_usd": 0.25})
    agent = Cassettes(ws, "replay").agent("x", config)

    async def replay() -> list:
        out = []
        for prompt, _, _ in calls:
            try:
                r = await agent.call(Request(task_id="t", prompt=prompt, system="s"))
                out.append((r.text, False, r.usage.input_tokens, r.cost_usd))
            except AgentError as err:
                out.append((err.message, True, err.usage.output_tokens, err.kind))
        return out

    assert asyncio.run(replay()) == [(text, True, 2, "server") if failed else (text, False, 7, 0.25)
                                     for _, text, failed in calls]


@pytest.mark.parametrize("directory", ["../x", "/tmp", "a/../b", "a\0b"])
def test_a_replay_agent_refuses_a_cassette_directory_lint_refuses(tmp_path, directory) -> None:
    """The same rule as lint's HC219, for a plan.json written by hand: one clear error."""
    with pytest.raises(AgentError) as err:
        Cassettes(Workspace(tmp_path)).agent("x", agent_config("x", {"provider": "replay", "cassette": directory}))
    assert err.value.kind == "invalid_request" and "must be a directory inside the project" in err.value.message


def test_a_recorded_fallback_replays_along_the_same_chain(tmp_path) -> None:
    """Agent `bad` fails past max_retries, the task falls back to `good`: the replay (both
    scripts gone) takes the same path, attempt by attempt."""
    (tmp_path / "bad.py").write_text("import sys; sys.stderr.write('no\\n'); sys.exit(3)\n")
    (tmp_path / "good.py").write_text("print('```json\\n{\"title\": \"t\", \"score\": 1}\\n```')\n")
    agents = {n: {"provider": "command", "command": [PY, str(tmp_path / f"{n}.py")]} for n in ("bad", "good")}
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "bad", "chain": ["bad", "good"]})],
                  agents=agents, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run", "--record")
    assert r.returncode == 0, r.stdout + r.stderr
    log = json.loads(virtual.harnessc(tmp_path, "log", "a", "--output", "json").stdout)
    recorded = [(a["agent"], a["status"], a["errors"], a["raw_output"]) for a in log]
    assert [a[:2] for a in recorded][-2:] == [("bad", "error"), ("good", "succeeded")]

    for n in ("bad", "good"):
        (tmp_path / f"{n}.py").unlink()
    _forget_state(tmp_path)
    r = virtual.harnessc(tmp_path, "run", "--replay")
    assert r.returncode == 0, r.stdout + r.stderr
    log = json.loads(virtual.harnessc(tmp_path, "log", "a", "--output", "json").stdout)
    assert [(a["agent"], a["status"], a["errors"], a["raw_output"]) for a in log] == recorded


def test_retry_records_and_replays_like_run(tmp_path) -> None:
    # the first run fails task a (its first call fails and max_retries is 0); `retry --record`
    # records the retry, and `retry --replay` of the same failed state serves it with the agent gone
    (tmp_path / "agent.py").write_text(SCRIPT, encoding="utf-8")
    llm = {"agent": "llm", "chain": ["llm"]}
    write_project(tmp_path, [node("b", completion_promise="DONE", routing=llm,
                                  retry={"max_retries": 0, "on_failure": "retry", "delays": [0]})],
                  agents={"llm": {"provider": "command", "command": [PY, str(tmp_path / "agent.py")]}})
    assert virtual.harnessc(tmp_path, "run").returncode == 1
    state = tmp_path.parent / "state-after-the-failed-run"
    shutil.copytree(tmp_path / ".harness", state)
    r = virtual.harnessc(tmp_path, "retry", "--record")
    assert r.returncode == 0, r.stdout + r.stderr
    recorded = _attempts(tmp_path, "b")
    (tmp_path / "agent.py").unlink()
    cassettes = tmp_path / ".harness" / "cassettes"
    shutil.copytree(cassettes, state / "cassettes")
    shutil.rmtree(tmp_path / ".harness")
    shutil.copytree(state, tmp_path / ".harness")
    r = virtual.harnessc(tmp_path, "retry", "--replay")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _attempts(tmp_path, "b") == recorded
    both = virtual.harnessc(tmp_path, "retry", "--record", "--replay")
    assert both.returncode == 2 and "cannot be used together" in both.stderr
