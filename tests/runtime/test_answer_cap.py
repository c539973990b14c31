"""An answer is kept up to the cap on a command's output (procs.MAX_OUTPUT, 1 MiB): an API
answer or a command agent's stdout past it is cut, marked, and fails verification saying
so, instead of a 64 MB answer going whole into state.db or a cut JSON being checked."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import inproc
import pytest

from harnessc.runtime.children.procs import MAX_OUTPUT

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, env, node, write_project

BIG = json.dumps({"title": "x" * (3 * MAX_OUTPUT), "score": 1})  # a valid answer, 3 MiB


def _attempts(root: Path) -> list[dict]:
    con = sqlite3.connect(root / ".harness" / "state.db")
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("SELECT status, errors, length(CAST(raw_output AS BLOB)) AS size"
                                         " FROM attempts ORDER BY id")]


def _check(root: Path) -> None:
    attempts = _attempts(root)
    assert attempts and all(a["status"] == "rejected" for a in attempts)
    assert all(a["size"] <= MAX_OUTPUT for a in attempts)
    assert all("over the 1,048,576-byte cap" in a["errors"] and "not verified" in a["errors"] for a in attempts)


@pytest.mark.parametrize("provider, stream", [("anthropic", False), ("openai", True)])
def test_an_api_answer_over_the_cap_is_cut_and_fails_verification(tmp_path, provider, stream) -> None:
    pytest.importorskip("aiohttp")
    pytest.importorskip(provider)
    from .fakeapi import Reply, ThreadedFakeAPI

    e = {k: v for k, v in env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    e.update(ANTHROPIC_API_KEY="test-anthropic-key-0000", OPENAI_API_KEY="test-openai-key-0000")
    with ThreadedFakeAPI() as api:
        api.push(*[Reply.ok(BIG) for _ in range(3)])
        base = api.base_url if provider == "anthropic" else api.base_url + "/v1"
        agent = {"provider": provider, "model": "m-1", "base_url": base, "stream": stream}
        write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                      agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e)  # the real clock: the server is a thread
    assert r.returncode == 1, r.stdout + r.stderr
    _check(tmp_path)


def test_a_command_agents_output_over_the_cap_fails_verification(tmp_path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(f"import sys; sys.stdout.write({BIG!r})\n", encoding="utf-8")
    agent = {"provider": "command", "command": [PY, str(script)]}
    write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]},
                                  retry={"max_retries": 0})],
                  agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1, r.stdout + r.stderr
    _check(tmp_path)


def test_a_command_agents_long_stderr_does_not_cut_its_answer(tmp_path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(f"import sys; sys.stderr.write('log ' * {MAX_OUTPUT}); "
                      f"print({json.dumps({'title': 't', 'score': 1})!r})\n", encoding="utf-8")
    agent = {"provider": "command", "command": [PY, str(script)]}
    write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                  agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
