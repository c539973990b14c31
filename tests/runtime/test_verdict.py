"""A run's verdict (issue 16): a call that never answered fails its task whatever on_failure
says; the final error counts the calls and says how they failed; a fallback output starts
from the best answer and names the fields it filled; `harnessc show` and
.harness/outputs/<task>.json say where the results are. harnessc in-process (in virtual time,
or on the real clock against a fake API server's thread), real agent processes, real SQLite."""

from __future__ import annotations

import json
import shutil
import textwrap

import inproc
import pytest

from . import virtual
from .helpers import PY, REPO, SIMPLE_CONTRACT, env, harnessc, node, write_project


def tasks(root) -> dict[str, dict]:
    r = virtual.harnessc(root, "status", "--output", "json")
    assert r.returncode == 0, r.stderr
    return {t["id"]: t for t in json.loads(r.stdout)["tasks"]}


def script_agent(root, body: str) -> dict:
    """A command agent running a Python script (HARNESSC_ITERATION tells it which call it is)."""
    (root / "agent.py").write_text("import os, sys, time\nn = int(os.environ['HARNESSC_ITERATION'])\n"
                                   + textwrap.dedent(body))
    return {"provider": "command", "command": [PY, str(root / "agent.py")], "timeout": 30}


def contract(on_failure: str) -> dict:
    return {**SIMPLE_CONTRACT, "on_failure": on_failure}


# ------------------------------------------------------------------ item 1: no content fallback for failed calls


def test_a_rejected_api_key_fails_a_fallback_task_and_retry_takes_it(tmp_path):
    """A key the server refuses (401; the pre-flight sees only that it is set): the built-in
    research_report contract says on_failure: fallback, but there is no answer to fall back on."""
    pytest.importorskip("anthropic")
    pytest.importorskip("aiohttp")
    from .fakeapi import Reply, ThreadedFakeAPI

    (tmp_path / "roadmap.md").write_text(textwrap.dedent("""\
        # Keys

        ## Tasks

        - [ ] **rep-001**: Research the topic
          - contract: research_report
          - agent: claude

        - [ ] **use-001**: Use the research
          - depends_on: rep-001
          - agent: rehearsal
        """))
    e = env(HC_TEST_BAD_KEY="sk-rejected-by-the-server")
    with ThreadedFakeAPI() as api:
        api.push(*[Reply.error(401, "authentication_error", message="invalid x-api-key")] * 2)
        (tmp_path / "harness.yaml").write_text(textwrap.dedent(f"""\
            agents:
              claude: {{provider: anthropic, model: claude-sonnet-4-6, api_key_env: HC_TEST_BAD_KEY,
                        base_url: "{api.base_url}"}}
              rehearsal: {{provider: simulate}}
            """))
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e)  # the real clock: the server is a thread
        assert r.returncode == 1, r.stdout + r.stderr
        t = tasks(tmp_path)
        assert t["rep-001"]["state"] == "failed" and t["use-001"]["state"] == "skipped"
        error = t["rep-001"]["error"]
        assert error.startswith("1 call failed without an answer (auth); last: agent 'claude': "), error
        assert "invalid x-api-key" in error and "on_failure fallback not applied" in error
        assert not (tmp_path / ".harness" / "outputs" / "rep-001.json").exists()
        # a process of its own: a run's id is its start second and pid, which an in-process
        # retry in the same second as the run would share
        r = harnessc(tmp_path, "retry", "rep-001", env=e)  # retry takes it (a degraded task it refuses)
        assert r.returncode == 1 and "is degraded" not in r.stderr, r.stdout + r.stderr
    assert tasks(tmp_path)["rep-001"]["attempts"] == 2 and api.count == 2


def test_a_command_not_found_fails_the_task(tmp_path):
    # the agent's program is on PATH (the pre-flight passes it); the command it runs is not
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "gone"},
                                  retry={"max_retries": 1, "on_failure": "partial", "delays": [0]})],
                  agents={"gone": {"provider": "command", "command": ["sh", "-c", "harnessc-no-such-program-7f3a"]}},
                  contracts={"summary": contract("partial")})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    a = tasks(tmp_path)["a"]
    assert a["state"] == "failed", a
    assert a["error"].startswith("2 calls failed without an answer (failed); last: agent 'gone': "), a["error"]
    assert "not found" in a["error"] and "on_failure partial not applied" in a["error"]


def test_a_replay_of_a_request_that_was_not_recorded_fails_the_task(tmp_path):
    write_project(tmp_path, [node("a", contract="summary", retry={"on_failure": "template"})],
                  contracts={"summary": contract("template")})
    cassettes = tmp_path / ".harness" / "cassettes"
    cassettes.mkdir(parents=True)
    (cassettes / "a.jsonl").write_text("")  # a cassette without this request
    r = virtual.harnessc(tmp_path, "run", "--replay")
    assert r.returncode == 1, r.stdout + r.stderr
    a = tasks(tmp_path)["a"]
    assert a["state"] == "failed" and a["error"].startswith("1 call failed without an answer (not_recorded)"), a


# ------------------------------------------------------------------ item 3: the final error says what happened
#
# in the scenarios (tests/runtime/scenarios/): transient-errors-past-the-limit,
# rejected-then-failed-calls, failed-call-then-rejected-falls-back, max-time-reached


# ------------------------------------------------------------------ item 11: fallbacks say what they filled


def test_a_partial_fallback_starts_from_the_best_answer_and_names_what_it_filled(tmp_path):
    # answer 1 breaks one rule (score < 0); answer 2, the last, breaks both fields
    agent = script_agent(tmp_path, """\
        print('{"title": "best", "score": -1}' if n == 1 else '{"title": "", "score": "x"}')
        """)
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "cmd"},
                                  retry={"max_retries": 1, "on_failure": "partial", "delays": [0]}),
                             node("b", depends_on=["a"])],
                  agents={"cmd": agent, "rehearsal": {"provider": "simulate"}},
                  contracts={"summary": contract("partial")})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    shown = json.loads(virtual.harnessc(tmp_path, "show", "a", "--output", "json").stdout)
    assert shown["state"] == "degraded" and shown["verified"] is False
    assert shown["output"] == {"title": "best", "score": 0}
    assert shown["filled"] == [{"field": "score", "from": "default", "was": "invalid"}]
    filled = "score (default, the answer's was invalid)"
    assert filled in virtual.harnessc(tmp_path, "show", "a").stdout
    assert f"filled from the contract, not from the agent: {filled}" in virtual.harnessc(tmp_path, "log", "a").stdout
    prompt = json.loads(virtual.harnessc(tmp_path, "log", "b", "--output", "json").stdout)[0]["prompt"]
    assert f"Not from the agent (filled from the contract): {filled}." in prompt


# ------------------------------------------------------------------ item 15: where the results are


def test_show_prints_the_verified_output_and_every_result_lands_in_outputs(tmp_path):
    write_project(tmp_path, [node("sum-001", contract="summary"),
                             node("txt-001", completion_promise="DONE",
                                  accept=[{"id": "ok", "argv": ["true"], "timeout": 5}])],
                  contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "outputs: 2 results in .harness/outputs/<task>.json" in r.stdout
    assert "costs: simulated prices" in r.stdout
    out = tmp_path / ".harness" / "outputs"
    on_disk = json.loads((out / "sum-001.json").read_text())
    assert on_disk["output"] == {"title": "hello", "score": 3} and on_disk["verified"] is True
    assert on_disk["verified_by"] == ["contract summary"]
    shown = virtual.harnessc(tmp_path, "show", "sum-001")
    assert shown.returncode == 0
    assert "verified by: contract summary" in shown.stdout and '"title": "hello"' in shown.stdout
    assert json.loads(virtual.harnessc(tmp_path, "show", "sum-001", "--output", "json").stdout)["file"] == \
        ".harness/outputs/sum-001.json"
    text = virtual.harnessc(tmp_path, "show", "txt-001").stdout
    assert "verified by: completion promise DONE, accept ok (exit 0)" in text
    assert "answer (.harness/outputs/txt-001.json):" in text and "<promise>DONE</promise>" in text
    assert not list(out.glob(".tmp-*"))  # written by rename
    # a reset task's result no longer stands
    assert virtual.harnessc(tmp_path, "reset", "txt-001").returncode == 0
    assert not (out / "txt-001.json").exists() and (out / "sum-001.json").exists()


def test_show_of_an_unknown_task_is_a_usage_error_with_a_suggestion(tmp_path):
    write_project(tmp_path, [node("sum-001")])
    r = virtual.harnessc(tmp_path, "show", "sum-01")
    assert r.returncode == 2 and "no task 'sum-01'" in r.stderr and "did you mean 'sum-001'" in r.stderr, r.stderr
    r = virtual.harnessc(tmp_path, "show", "sum-001")  # known, not run yet
    assert r.returncode == 0 and "sum-001 (Task sum-001): pending" in r.stdout and "no output yet" in r.stdout


def test_an_output_file_never_holds_a_secret(tmp_path):
    agent = script_agent(tmp_path, """print('{"title": "key sk-test-0123456789abcdef", "score": 1}')\n""")
    write_project(tmp_path, [node("a", contract="summary", routing={"agent": "cmd"})],
                  agents={"cmd": agent}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run", env=env(HARNESSC_TEST_API_KEY="sk-test-0123456789abcdef"))
    assert r.returncode == 0, r.stdout + r.stderr
    text = (tmp_path / ".harness" / "outputs" / "a.json").read_text()
    assert "sk-test-0123456789abcdef" not in text and "[redacted]" in text


def test_an_output_that_cannot_be_written_is_a_warning(tmp_path):
    write_project(tmp_path, [node("a", contract="summary")], contracts={"summary": SIMPLE_CONTRACT})
    (tmp_path / ".harness" / "outputs").write_text("not a directory")
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning: a: cannot write .harness/outputs" in r.stdout, r.stdout
    assert "`harnessc show a` prints it" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr and "outputs: 1 result" not in r.stdout
    shown = json.loads(virtual.harnessc(tmp_path, "show", "a", "--output", "json").stdout)
    assert shown["output"] == {"title": "hello", "score": 3} and shown["file"] is None


def test_the_demo_says_its_costs_are_simulated(tmp_path):
    root = tmp_path / "demo"
    shutil.copytree(REPO / "specs" / "demo", root, ignore=shutil.ignore_patterns(".harness"))
    r = virtual.harnessc(root, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "costs: simulated prices (every call went to a simulate agent); no money was spent" in r.stdout
