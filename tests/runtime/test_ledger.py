"""The usage ledger: every attempt (failed ones too) records its tokens by kind, its cost and
where the cost came from; the budget reservation is settled to that figure; state.db
version 2 migrates to 3; status, log and run_results show the same figures.

End to end with the real SDKs and the real CLI against the in-process fault server: HTTP
requests counted by the server == attempts in `status --json` == attempt rows.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import inproc
import pytest

from harnessc.providers import agent_config
from harnessc.runtime.agents import errors
from harnessc.runtime.agents.base import Response, Usage
from harnessc.runtime.agents.errors import AgentError
from harnessc.runtime.store.attempts import AttemptEnd, TaskEnd
from harnessc.runtime.store.state import SCHEMA_VERSION, StateStore
from harnessc.states import TaskState
from harnessc.workspace import Workspace

from . import virtual
from .helpers import PY, SIMPLE_CONTRACT, node, write_project
from .helpers import env as cli_env

FIXTURES = Path(__file__).parent / "fixtures"
PRICE = {"input": 3.0, "output": 15.0}  # USD per million; anthropic cache: 0.3 read, 3.75 write


def _store(root: Path) -> StateStore:
    store = StateStore(Workspace(root))
    store.run_id = "r1"
    store.db.execute("INSERT INTO runs (id, started_at, status) VALUES ('r1', 0, 'running')")
    store.ensure_tasks(["t"], set())
    return store


def _ledger(store: StateStore) -> list[tuple]:
    return [tuple(r) for r in store.db.execute("SELECT attempt_id, reserved, actual, settled FROM ledger ORDER BY id")]


# ------------------------------------------------------------------ the store


def test_an_attempt_records_its_usage_by_kind_and_settles_the_reservation(tmp_path):
    store = _store(tmp_path)
    try:
        aid = store.begin_attempt("t", 1, 0, "llm", "p", "h", 0.05, start_task=True, reserve_tokens=(400, 100))
        assert store.spent() == pytest.approx(0.05) and store.tokens_spent() == 500
        usage = Usage(input_tokens=1300, output_tokens=50, cache_read_tokens=1000, cache_write_tokens=200,
                      reasoning_tokens=20)
        resp = Response(text="x", usage=usage, cost_usd=0.0021, cost_source="price", latency=0.5)
        store.finish_attempt(aid, "t", AttemptEnd("succeeded", raw="x", charge=resp.charged(),
                                                    task=TaskEnd(TaskState.SUCCEEDED)))
        row = store.attempts("t")[0]
        assert {k: row[k] for k in ("input_tokens", "uncached_input_tokens", "cache_read_tokens",
                                    "cache_write_tokens", "output_tokens", "reasoning_tokens",
                                    "cost_usd", "cost_source")} == {
            "input_tokens": 1300, "uncached_input_tokens": 100, "cache_read_tokens": 1000,
            "cache_write_tokens": 200, "output_tokens": 50, "reasoning_tokens": 20,
            "cost_usd": 0.0021, "cost_source": "price"}
        assert _ledger(store) == [(aid, 0.05, 0.0021, 1)]
        # the cached figures and a fresh read of the database agree: the reservation is gone
        assert store.spent() == pytest.approx(0.0021) and store.tokens_spent() == 1350
        store._spent = store._tokens = None
        assert store.spent() == pytest.approx(0.0021) and store.tokens_spent() == 1350
        task = store.tasks()["t"]
        assert (task["tokens"], task["cost_usd"]) == (1350, 0.0021)  # all input + output
        totals = store.usage_totals()
        assert (totals["tokens"], totals["uncached_input_tokens"], totals["cache_read_tokens"],
                totals["cache_write_tokens"], totals["cost_sources"]) == (1350, 100, 1000, 200, {"price": 1})
    finally:
        store.close()


def test_failed_attempts_are_charged_what_they_reported_or_zero_and_say_why(tmp_path):
    store = _store(tmp_path)
    try:
        no_answer = AgentError("429", kind="rate_limited")
        cut = AgentError("cut", kind="truncated", usage=Usage(10, 1), cost_usd=4.5e-5, cost_source="price")
        for err in (no_answer, cut):
            aid = store.begin_attempt("t", 1, 0, "llm", "p", "h", 0.01, reserve_tokens=(100, 100))
            store.finish_attempt(aid, "t", AttemptEnd("error", errors=[err.message], charge=err.charged()))
        rows = store.attempts("t")
        assert [(r["input_tokens"], r["output_tokens"], r["cost_usd"], r["cost_source"]) for r in rows] == [
            (0, 0, 0.0, "no_response"), (10, 1, 4.5e-5, "price")]
        assert [(actual, settled) for _, _, actual, settled in _ledger(store)] == [(0.0, 1), (4.5e-5, 1)]
        assert store.spent() == pytest.approx(4.5e-5) and store.tokens_spent() == 11
    finally:
        store.close()


def test_recover_charges_an_interrupted_call_nothing_and_keeps_its_estimate_apart(tmp_path):
    """A run that died during a call: no usage was reported, so its cost is unknown - charged 0
    on the attempt, its task and the ledger, marked 'unknown', the estimate kept apart. The
    tokens reserved stay counted (the token budget errs on the safe side)."""
    store = _store(tmp_path)
    try:
        store.begin_attempt("t", 1, 0, "llm", "p", "h", 0.02, start_task=True, reserve_tokens=(300, 200))
    finally:
        store.close()
    store = StateStore(Workspace(tmp_path))
    try:
        store.recover()
        row = store.attempts("t")[0]
        assert (row["status"], row["cost_usd"], row["cost_source"], row["input_tokens"] + row["output_tokens"]) == (
            "interrupted", 0.0, "unknown", 500)
        assert row["estimated_usd"] == pytest.approx(0.02)
        task = store.tasks()["t"]
        assert (task["tokens"], task["cost_usd"]) == (500, 0.0)
        assert store.spent() == 0.0 and store.spent_this_round("t") == 0.0 and _ledger(store)[0][2:] == (None, 1)
        assert store.unknown_calls() == (1, pytest.approx(0.02)) and store.reserved() == 0.0
        assert store.usage_totals()["unknown"] == {"calls": 1, "estimated_usd": 0.02}
    finally:
        store.close()


# ------------------------------------------------------------------ version 2 -> 3


def _v2_project(root: Path) -> None:
    """The project the fixture's state was made on, with that state (schema version 2)."""
    agents = {"rehearsal": {"provider": "simulate", "price": {"input": 3.0, "output": 15.0}},
              "broken": {"provider": "command", "command": ["sh", "-c", "echo no >&2; exit 1"],
                         "price": {"input": 1.0, "output": 2.0}}}
    write_project(root, [node("a", contract="summary"),
                         node("b", routing={"agent": "broken", "chain": ["broken"]}, retry={"max_retries": 1})],
                  agents=agents, contracts={"summary": SIMPLE_CONTRACT})
    con = sqlite3.connect(root / ".harness" / "state.db")
    con.executescript((FIXTURES / "state-v2.sql").read_text("utf-8"))
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "2"
    con.close()


def test_a_version_2_state_database_is_migrated_and_keeps_its_figures(tmp_path):
    _v2_project(tmp_path)
    before = {r["id"]: r for r in json.loads(virtual.harnessc(tmp_path, "status", "--json").stdout)["tasks"]}
    store = StateStore(Workspace(tmp_path), create=False)
    try:
        assert store.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        old = store.attempts("a")[0]
        assert (old["input_tokens"], old["output_tokens"], old["cost_usd"]) == (146, 15, 0.000663)
        assert (old["uncached_input_tokens"], old["cost_source"]) == (None, None)  # never recorded
    finally:
        store.close()
    assert before["a"]["tokens"] == 161 and before["a"]["cost_usd"] == 0.000663
    r = virtual.harnessc(tmp_path, "retry")  # b's command fails again: two more attempts, no usage reported
    assert r.returncode == 1, r.stdout + r.stderr
    status = json.loads(virtual.harnessc(tmp_path, "status", "--json").stdout)
    tasks = {t["id"]: t for t in status["tasks"]}
    assert tasks["a"]["tokens"] == 161 and tasks["b"]["attempts"] == 4
    totals = status["totals"]
    assert (totals["attempts"], totals["tokens"], totals["unsplit_input_tokens"], totals["cost_usd"]) == (
        5, 161, 146, 0.000663)
    assert totals["cost_sources"] == {"unrecorded": 3, "no_response": 2}
    new = json.loads(virtual.harnessc(tmp_path, "log", "b", "--last", "--json").stdout)[0]
    assert (new["uncached_input_tokens"], new["cost_usd"], new["cost_source"]) == (0, 0.0, "no_response")
    text = virtual.harnessc(tmp_path, "log", "a").stdout
    assert "ledger: 146 in + 15 out; $0.000663 (source not recorded)" in text
    assert "146 not split" in virtual.harnessc(tmp_path, "status").stdout


# ------------------------------------------------------------------ abort


def test_an_aborted_call_is_settled_to_zero_and_says_no_response(tmp_path):
    import time

    from .helpers import spawn

    write_project(tmp_path, [node("slow")], agents={"rehearsal": {"provider": "simulate", "latency": 120,
                                                                  "price": PRICE}})
    p = spawn(tmp_path, "run")
    try:
        for _ in range(600):
            rows = json.loads(inproc.harnessc("-C", str(tmp_path), "log", "slow", "--json").stdout or "[]") \
                if (tmp_path / ".harness" / "state.db").exists() else []
            if rows:
                break
            time.sleep(0.1)
        assert rows and rows[0]["status"] == "started"
        inproc.harnessc("-C", str(tmp_path), "stop", "--abort")
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 3
    row = json.loads(inproc.harnessc("-C", str(tmp_path), "log", "slow", "--json").stdout)[0]
    assert (row["status"], row["cost_usd"], row["cost_source"], row["input_tokens"]) == (
        "interrupted", 0.0, "no_response", 0)
    con = sqlite3.connect(tmp_path / ".harness" / "state.db")
    assert con.execute("SELECT reserved > 0, actual, settled FROM ledger").fetchall() == [(1, 0.0, 1)]
    con.close()
    assert json.loads(inproc.harnessc("-C", str(tmp_path), "status", "--json").stdout)["run"]["cost_usd"] == 0.0


# ------------------------------------------------------------------ the real SDKs, end to end


@pytest.mark.parametrize("provider, wire", [("anthropic", None), ("openai", "chat"), ("openai", "responses")])
def test_every_request_is_one_attempt_with_its_ledger(tmp_path, provider, wire, monkeypatch):
    """429, 500, a cut stream and two answers (one that fails verification) against the fault
    server through `harnessc run`: requests == status attempts == attempt rows, and every
    figure (attempts, task, ledger, status totals, run_results) adds up."""
    pytest.importorskip("aiohttp")
    pytest.importorskip(provider)
    from .fakeapi import Reply, ThreadedFakeAPI
    from .test_providers import KEYS

    usage = {"input": 100, "cache_read": 1000, "cache_write": 200, "output": 20, "reasoning": 5}
    if provider == "openai":
        del usage["cache_write"]  # openai reports no cache writes
    with ThreadedFakeAPI() as api:
        api.push(Reply.error(429, "rate_limit_error", headers={"retry-after": "0"}),
                 Reply.error(500, "api_error", headers={"retry-after": "0"}),
                 Reply(fault="cut", headers={"retry-after": "0"}),
                 Reply.ok('{"title": "", "score": 4}', usage=usage),  # minLength 1: rejected
                 Reply.ok('{"title": "Q3", "score": 4}', usage=usage))
        base = api.base_url if provider == "anthropic" else api.base_url + "/v1"
        agent = {"provider": provider, "model": "m-1", "base_url": base, "stream": True, "price": PRICE,
                 **({"api": wire} if wire else {})}
        write_project(tmp_path, [node("t", contract="summary", routing={"agent": "llm", "chain": ["llm"]})],
                      agents={"llm": agent}, contracts={"summary": SIMPLE_CONTRACT})
        e = {k: v for k, v in cli_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        e.update(KEYS)
        # what each request records, not how long a retry waits (helpers.SHORT_BACKOFF)
        monkeypatch.setattr(errors, "BACKOFF_BASE", 0.05)
        r = inproc.harnessc("-C", str(tmp_path), "run", env=e)
        requests = api.count
        paths = {seen.path for seen in api.requests}
    assert r.returncode == 0, r.stdout + r.stderr
    assert paths == {{None: "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}[wire]}
    status = json.loads(virtual.harnessc(tmp_path, "status", "--json", env=e).stdout)
    task = status["tasks"][0]
    rows = json.loads(virtual.harnessc(tmp_path, "log", "t", "--json", env=e).stdout)
    assert requests == 5 and task["attempts"] == requests and len(rows) == requests

    if provider == "anthropic":  # cache counters add to input_tokens
        answer = dict(input_tokens=1300, uncached_input_tokens=100, cache_read_tokens=1000,
                      cache_write_tokens=200, output_tokens=20)
        answer_cost = (100 * 3 + 1000 * 0.3 + 200 * 3.75 + 20 * 15) / 1e6
        cut = dict(input_tokens=10, uncached_input_tokens=10, cache_read_tokens=0, cache_write_tokens=0,
                   output_tokens=1)  # what message_start reported before the cut
        cut_cost, cut_source = (10 * 3 + 1 * 15) / 1e6, "price"
    else:  # cached_tokens are part of the input; a stream reports usage at its end, never reached
        answer = dict(input_tokens=1100, uncached_input_tokens=100, cache_read_tokens=1000,
                      cache_write_tokens=0, output_tokens=20, reasoning_tokens=5)
        answer_cost = (100 * 3 + 1000 * 0.3 + 20 * 15) / 1e6
        cut = dict(input_tokens=0, output_tokens=0)
        cut_cost, cut_source = 0.0, "no_response"
    assert [(a["status"], a["cost_source"]) for a in rows] == [
        ("error", "no_response"), ("error", "no_response"), ("error", cut_source),
        ("rejected", "price"), ("succeeded", "price")]
    assert all(a["input_tokens"] == a["output_tokens"] == a["cost_usd"] == 0 for a in rows[:2])
    assert {k: rows[2][k] for k in cut} == cut and rows[2]["cost_usd"] == pytest.approx(cut_cost)
    for a in rows[3:]:
        assert {k: a[k] for k in answer} == answer and a["cost_usd"] == pytest.approx(answer_cost)

    tokens = sum(a["input_tokens"] + a["output_tokens"] for a in rows)
    cost = cut_cost + 2 * answer_cost
    assert task["tokens"] == tokens == 2 * (answer["input_tokens"] + 20) + cut["input_tokens"] + cut["output_tokens"]
    assert task["cost_usd"] == pytest.approx(cost) and status["run"]["cost_usd"] == pytest.approx(cost)
    totals = status["totals"]
    assert totals["tokens"] == tokens and totals["attempts"] == requests
    assert totals["cache_read_tokens"] == 2000 and totals["cost_usd"] == pytest.approx(cost)
    con = sqlite3.connect(tmp_path / ".harness" / "state.db")
    assert con.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == requests
    ledger = con.execute("SELECT COUNT(*), SUM(actual), MIN(settled) FROM ledger").fetchone()
    con.close()
    assert ledger[0] == requests and ledger[1] == pytest.approx(cost) and ledger[2] == 1
    results = json.loads((tmp_path / ".harness" / "runs" / status["run"]["id"] / "run_results.json").read_text())
    assert results["results"][0]["tokens"] == tokens
    assert results["results"][0]["cost_usd"] == pytest.approx(cost)
    log = virtual.harnessc(tmp_path, "log", "t", "--last", env=e).stdout
    assert f"ledger: {answer['input_tokens']:,} in (100 uncached, 1,000 cache read" in log
    assert "(price: tokens x the agent's price)" in log
    text = virtual.harnessc(tmp_path, "status", env=e).stdout
    assert f"total: {tokens:,} tokens = " in text and "2,000 cache read" in text


# ------------------------------------------------------------------ CLI agents


def test_cli_agents_cost_source_claude_estimate_codex_price(tmp_path):
    from harnessc.runtime.agents.base import Request, make_agent

    from .test_cli_agents import CLAUDE_429, CLAUDE_OK, CODEX_OK, GEMINI_OK, fake_cli

    def call(cfg):
        agent = make_agent("x", agent_config("x", cfg), tmp_path)
        try:
            return asyncio.run(agent.call(Request(task_id="t", prompt="p")))
        except AgentError as err:
            return err

    claude = fake_cli(tmp_path / "bin", "claude", stdout=json.dumps(CLAUDE_OK))
    resp = call({"provider": "claude-code", "command": [str(claude)], "price": PRICE})
    assert (resp.cost_usd, resp.cost_source) == (0.000141, "cli")  # the CLI's figure wins over price:
    assert (resp.usage.input_tokens, resp.usage.cache_read_tokens, resp.usage.cache_write_tokens) == (133, 100, 20)
    # an error result that still reports usage and cost is charged them
    failed = fake_cli(tmp_path / "bin2", "claude", rc=1, stdout=json.dumps(
        {**CLAUDE_429, "total_cost_usd": 0.0002, "usage": {"input_tokens": 7, "output_tokens": 1}}))
    err = call({"provider": "claude-code", "command": [str(failed)]})
    assert err.kind == "rate_limited"
    charged = err.charged()
    assert (charged.usage.total, charged.cost_usd, charged.cost_source) == (8, 0.0002, "cli")
    # a bare 429 result reports nothing used: charged 0, no_response
    bare = fake_cli(tmp_path / "bin3", "claude", rc=1, stdout=json.dumps(CLAUDE_429))
    assert call({"provider": "claude-code", "command": [str(bare)]}).charged().cost_source == "no_response"
    codex = fake_cli(tmp_path / "bin4", "codex", stdout=CODEX_OK)
    resp = call({"provider": "codex", "command": [str(codex)], "price": {"input": 1.0, "output": 10.0}})
    assert resp.cost_source == "price"
    assert (resp.usage.cache_read_tokens, resp.usage.reasoning_tokens, resp.usage.uncached_input_tokens) == (
        800, 50, 200)
    assert call({"provider": "codex", "command": [str(codex)]}).cost_source == "none"
    gemini = fake_cli(tmp_path / "bin5", "gemini", stdout=json.dumps(GEMINI_OK))
    resp = call({"provider": "gemini-cli", "command": [str(gemini)]})
    assert (resp.usage.input_tokens, resp.usage.cache_read_tokens, resp.usage.uncached_input_tokens,
            resp.usage.reasoning_tokens, resp.cost_source) == (50, 10, 40, 3, "none")


def test_a_codex_turn_that_failed_after_completed_turns_is_charged_their_usage():
    from harnessc.runtime.agents.cli_output import parse_codex

    from .test_cli_agents import CODEX_OK

    out = parse_codex(CODEX_OK + json.dumps({"type": "turn.failed", "error": {"message": "stream error: 500"}}) + "\n",
                      "", 1)
    assert out.kind == "server"
    assert (out.spent.input_tokens, out.spent.cache_read_tokens, out.spent.output_tokens) == (1000, 800, 200)
    bare = parse_codex(json.dumps({"type": "turn.failed", "error": {"message": "stream error: 500"}}) + "\n", "", 1)
    assert bare.spent is None


def test_a_failed_call_records_how_long_it_took(tmp_path):
    (tmp_path / "slow_fail.py").write_text("import sys, time\ntime.sleep(0.3)\nsys.exit('nope')\n")
    write_project(tmp_path, [node("a", retry={"max_retries": 0, "on_failure": "retry", "delays": [0]})],
                  agents={"rehearsal": {"provider": "command", "command": [PY, str(tmp_path / "slow_fail.py")]}})
    assert inproc.harnessc("-C", str(tmp_path), "run").returncode == 1
    (latency,) = sqlite3.connect(tmp_path / ".harness" / "state.db").execute(
        "SELECT latency FROM attempts WHERE status='error'").fetchone()
    assert latency >= 0.3


def test_a_never_attempted_tasks_running_time_is_read_again_once_written(tmp_path):
    """task_round keeps a never-attempted task's running time from its first read (no row read
    per task); a task that ran without reaching its first attempt (an abort in its prompt's
    step) and was saved pending with its time so far, or one that ended, is read again: its
    max_time is not given back within the run."""
    store = _store(tmp_path)
    try:
        store.ensure_tasks(["t", "u", "v"], set())
        assert store.task_round("t")["running_s"] == 0.0 and store.never_attempted() == {"t", "u", "v"}
        store.set_state("t", TaskState.PENDING, running_s=12.5)  # requeued before its first attempt
        assert store.task_round("t") == {"iterations": 0, "tokens": 0, "tool_calls": 0, "running_s": 12.5}
        store.set_state("u", TaskState.RUNNING)
        store.save_running_time("u", 3.0)
        assert store.task_round("u")["running_s"] == 3.0
        store.set_state("v", TaskState.PENDING, running_s=4.0)
        store.finish_task("v", TaskState.FAILED, error="x")  # an ending starts the next round from 0
        assert store.task_round("v")["running_s"] == 0.0
    finally:
        store.close()


def test_an_ending_leaves_the_recovery_ladder_of_a_loop_state_written_after_the_store_looked(tmp_path):
    """An ending runs no loop_state statement for a task without loop state (the store reads
    which tasks have one once); a loop state written afterwards - by this store's attempt, or
    by another connection before the store first looked - still has its ladder left at the
    task's end, and a reset reads them again."""
    store = _store(tmp_path)
    ladder = {"memory": [], "recovery": {"step": 2}}
    try:
        store.ensure_tasks(["t", "u", "v", "w"], set())
        other = sqlite3.connect(tmp_path / ".harness" / "state.db")
        other.execute("INSERT INTO loop_state VALUES ('u', ?, 0)", (json.dumps(ladder),))
        other.commit()
        statements: list[str] = []
        store.db.set_trace_callback(statements.append)
        store.finish_task("v", TaskState.SUCCEEDED)  # no loop state: its end has no statement for it
        store.finish_task("v", TaskState.SUCCEEDED)
        assert [s for s in statements if "loop_state" in s] == ["SELECT task_id FROM loop_state"]
        aid = store.begin_attempt("t", 1, 0, "a", "p", "h", 0.0)
        store.finish_attempt(aid, "t", AttemptEnd("progress", loop_state=ladder))  # written after the look
        store.finish_task("t", TaskState.FAILED, error="x")
        store.finish_task("u", TaskState.SUCCEEDED)  # written by another connection before it
        store.db.set_trace_callback(None)
        assert [store.loop_state(t) for t in ("t", "u")] == [{"memory": []}, {"memory": []}]
        store.reset(["t"])
        other.execute("INSERT INTO loop_state VALUES ('w', ?, 0)", (json.dumps(ladder),))
        other.commit()
        other.close()
        store.finish_task("w", TaskState.SUCCEEDED)  # the reset dropped what the store knew
        assert store.loop_state("w") == {"memory": []}
    finally:
        store.close()


def test_tasks_whose_rows_are_made_are_not_inserted_again_and_a_checked_one_is_done_again(tmp_path):
    """ensure_tasks(made=True), the run's second look (idle_result made the rows): no INSERT
    per task, and a task checked off in roadmap.md that a landing the last run left completed
    meanwhile (isolation.start) is done again, as a first look makes it."""
    store = _store(tmp_path)
    try:
        store.ensure_tasks(["t", "c"], {"c"})
        store.finish_task("c", TaskState.SUCCEEDED)  # the recovered landing
        statements: list[str] = []
        store.db.set_trace_callback(statements.append)
        store.ensure_tasks(["t", "c"], {"c"}, made=True)
        store.db.set_trace_callback(None)
        assert not [s for s in statements if s.startswith("INSERT")], statements
        assert store.states() == {"t": TaskState.PENDING, "c": TaskState.DONE}
    finally:
        store.close()


def test_a_tasks_round_counts_the_attempts_this_store_began_and_a_reset_forgets(tmp_path):
    """task_round reads a never-attempted task's empty round from memory (no count over the
    attempts table per task), and counts again once an attempt began, a reset, or another
    store (a resumed run) sees attempts on record."""
    store = _store(tmp_path)
    try:
        store.ensure_tasks(["u"], set())
        assert store.task_round("t")["iterations"] == 0 and store.never_attempted() == {"t", "u"}
        aid = store.begin_attempt("t", 1, 0, "llm", "p", "h", 0.0, start_task=True, reserve_tokens=(10, 5))
        assert store.task_round("t") == {"iterations": 1, "tokens": 15, "tool_calls": 0, "running_s": 0.0}
        assert store.never_attempted() == {"u"}
        store.finish_attempt(aid, "t", AttemptEnd("failed", errors=["no"]))
        again = StateStore(Workspace(tmp_path))  # a resumed run's store
        assert again.task_round("t")["iterations"] == 1 and again.never_attempted() == {"u"}
        again.close()
        store.reset(["t"])
        store.ensure_tasks(["t"], set())
        assert store.task_round("t")["iterations"] == 0 and store.never_attempted() == {"t", "u"}
    finally:
        store.close()
