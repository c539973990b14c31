"""Run-time routing: critical-path-first scheduling, simulate's skill, escalation by skill (the
scenario escalation-along-the-chain, tests/runtime/scenarios/), agents chosen by the run's flags,
limits, history and budget."""

from __future__ import annotations

import json
import sqlite3

from . import virtual
from .helpers import SIMPLE_CONTRACT, node, write_project


def first_attempts(root) -> list[str]:
    rows = sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id FROM attempts ORDER BY id").fetchall()
    return list(dict.fromkeys(t for (t,) in rows))


def test_the_longest_chain_starts_before_side_tasks_listed_first(tmp_path):
    write_project(tmp_path, [
        node("side1"), node("side2"),
        node("c1"), node("c2", depends_on=["c1"]), node("c3", depends_on=["c2"]),
        node("urgent", priority="high"),  # priority still comes first
    ], concurrency=1)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    # c3 alone weighs what a side task does: from there roadmap order decides
    assert first_attempts(tmp_path) == ["urgent", "c1", "c2", "side1", "side2", "c3"]


def test_ties_on_the_critical_path_keep_roadmap_order(tmp_path):
    write_project(tmp_path, [node("b"), node("a"), node("c")], concurrency=1)
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    assert first_attempts(tmp_path) == ["b", "a", "c"]


def _skill_project(root, skill: dict, seed: int = 7) -> None:
    write_project(root, [node(f"t{i}", contract="summary", complexity="medium",
                              retry={"max_retries": 9, "on_failure": "fail"},
                              routing={"agent": "sim"}) for i in range(6)],
                  agents={"sim": {"provider": "simulate", "skill": skill, "seed": seed}},
                  contracts={"summary": SIMPLE_CONTRACT})


def attempts_by_task(root) -> dict[str, int]:
    r = virtual.harnessc(root, "status", "--output", "json")
    return {t["id"]: t["attempts"] for t in json.loads(r.stdout)["tasks"]}


def test_simulate_skill_is_a_seeded_chance_per_complexity(tmp_path):
    for name in ("one", "two"):
        _skill_project(tmp_path / name, {"medium": 0.5})
        assert virtual.harnessc(tmp_path / name, "run").returncode == 0
    once, again = attempts_by_task(tmp_path / "one"), attempts_by_task(tmp_path / "two")
    assert once == again  # same seed, tasks and iterations: the same draws
    assert max(once.values()) > 1 and min(once.values()) == 1  # some attempts failed, not all
    _skill_project(tmp_path / "other-seed", {"medium": 0.5}, seed=8)
    assert virtual.harnessc(tmp_path / "other-seed", "run").returncode == 0
    assert attempts_by_task(tmp_path / "other-seed") != once
    # a complexity the map does not list always answers validly
    _skill_project(tmp_path / "unlisted", {"epic": 0.0})
    assert virtual.harnessc(tmp_path / "unlisted", "run").returncode == 0
    assert set(attempts_by_task(tmp_path / "unlisted").values()) == {1}


def _two_agents(root) -> None:
    write_project(root, [node("a", routing={"agent": "cheap", "chain": ["strong"]}),
                         node("b", routing={"agent": "strong"})],
                  agents={"cheap": {"provider": "simulate"}, "strong": {"provider": "simulate"},
                          "spare": {"provider": "simulate"}})


def agent_of(root) -> dict[str, str]:
    r = virtual.harnessc(root, "status", "--output", "json")
    return {t["id"]: t["agent"] for t in json.loads(r.stdout)["tasks"]}


def test_run_agent_serves_every_task_with_one_agent(tmp_path):
    _two_agents(tmp_path)
    dry = virtual.harnessc(tmp_path, "run", "--agent", "spare", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.count("spare") == 2, dry.stdout
    assert virtual.harnessc(tmp_path, "run", "--agent", "spare").returncode == 0
    assert agent_of(tmp_path) == {"a": "spare", "b": "spare"}


def test_run_agents_keeps_each_chain_to_the_listed_agents(tmp_path):
    _two_agents(tmp_path)
    assert virtual.harnessc(tmp_path, "run", "--agents", "strong,spare").returncode == 0
    # a: cheap is left out, strong (its chain) serves; b: strong is allowed
    assert agent_of(tmp_path) == {"a": "strong", "b": "strong"}
    _two_agents(tmp_path / "p2")
    assert virtual.harnessc(tmp_path / "p2", "run", "--agents", "spare").returncode == 0
    assert agent_of(tmp_path / "p2") == {"a": "spare", "b": "spare"}  # none of theirs: the first listed


def test_run_agent_options_are_checked_before_anything_runs(tmp_path):
    _two_agents(tmp_path)
    for args, words in ((["--agent", "nope"], "agent 'nope' is not defined in harness.yaml (defined: cheap,"),
                        (["--agents", "cheap,nope"], "agent 'nope' is not defined"),
                        (["--agents", ","], "--agents needs at least one agent name"),
                        (["--agent", "cheap", "--agents", "strong"], "cannot be used together")):
        r = virtual.harnessc(tmp_path, "run", *args)
        assert r.returncode == 2 and words in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    assert not (tmp_path / ".harness" / "state.db").exists()


def test_a_daily_limit_moves_tasks_to_the_next_agent_and_status_shows_it(tmp_path):
    # in virtual time at local noon (tests/runtime/virtual.py): the day's count resets hours away
    write_project(tmp_path, [node(f"t{i}", routing={"agent": "opus", "chain": ["haiku"]}) for i in range(4)],
                  agents={"opus": {"provider": "simulate", "limits": {"daily_calls": 2}},
                          "haiku": {"provider": "simulate"}}, concurrency=1)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert agent_of(tmp_path) == {"t0": "opus", "t1": "opus", "t2": "haiku", "t3": "haiku"}
    events = sqlite3.connect(tmp_path / ".harness" / "state.db").execute(
        "SELECT data FROM events WHERE kind='daily_limit_reached'").fetchall()
    assert len(events) == 1 and "daily calls limit (2 of 2 today)" in events[0][0]
    st = virtual.harnessc(tmp_path, "status")
    assert "agent opus: calls today 2/2" in st.stdout, st.stdout
    data = json.loads(virtual.harnessc(tmp_path, "status", "--output", "json").stdout)
    assert data["agents"]["opus"]["today"]["calls"] == 2 and data["agents"]["opus"]["limits"] == {"daily_calls": 2}
    # the count is per day across runs: a new run starts on haiku at once
    assert virtual.harnessc(tmp_path, "run", "--rerun", "all").returncode == 0
    assert set(agent_of(tmp_path).values()) == {"haiku"}


def test_a_daily_limit_without_a_fallback_ends_the_task_with_the_reason(tmp_path):
    write_project(tmp_path, [node("a"), node("b")], concurrency=1,
                  agents={"rehearsal": {"provider": "simulate", "limits": {"daily_calls": 1}}})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 1
    data = {t["id"]: t for t in json.loads(virtual.harnessc(tmp_path, "status", "--output", "json").stdout)["tasks"]}
    assert data["a"]["state"] == "succeeded"
    assert data["b"]["state"] == "failed" and "daily calls limit" in data["b"]["error"]
    assert "past the" in data["b"]["error"] and data["b"]["attempts"] == 0


def test_the_breaker_opens_after_failed_calls_and_spares_other_tasks(tmp_path):
    flaky = {"provider": "simulate", "fail_rate": 1.0}  # every call fails (transient)
    write_project(tmp_path, [node(f"t{i}", routing={"agent": "down", "chain": ["up"]}) for i in range(3)],
                  agents={"down": flaky, "up": {"provider": "simulate"}}, concurrency=1)
    r = virtual.harnessc(tmp_path, "run")  # the back-offs between failed calls in virtual time
    assert r.returncode == 0, r.stdout + r.stderr
    db = sqlite3.connect(tmp_path / ".harness" / "state.db")
    calls_on_down = db.execute("SELECT COUNT(*) FROM attempts WHERE agent='down'").fetchone()[0]
    # t0's 5 failed calls open the breaker, which moves t0 to 'up' at once; t1 and t2
    # never call 'down'
    assert calls_on_down == 5, calls_on_down
    assert db.execute("SELECT COUNT(*) FROM events WHERE kind='breaker_opened'").fetchone()[0] == 1
    assert set(agent_of(tmp_path).values()) == {"up"}
    data = json.loads(virtual.harnessc(tmp_path, "status", "--output", "json").stdout)
    assert data["agents"]["down"]["breaker"] == "open" and data["agents"]["down"]["failures"] == 5
    assert "agent down: breaker open until" in virtual.harnessc(tmp_path, "status").stdout


# ------------------------------------------------------------------ auto routing and history

CHEAP = {"provider": "simulate", "tier": "fast", "price": {"input": 0.1, "output": 0.5}}
MID = {"provider": "simulate", "tier": "balanced", "price": {"input": 1, "output": 5}}
STRONG = {"provider": "simulate", "tier": "powerful", "price": {"input": 10, "output": 50}}


def auto_node(tid: str, tier: str, complexity: str, **kw):
    return node(tid, contract="summary", complexity=complexity,
                routing={"agent": "cheap", "chain": [], "reason": "auto: first agent in harness.yaml", "auto": True},
                analysis={"complexity": complexity, "tier": tier, "score": 1.0, "reasons": []}, **kw)


def attempt_agents(root) -> list[tuple[str, str]]:
    return sqlite3.connect(root / ".harness" / "state.db").execute(
        "SELECT task_id, agent FROM attempts ORDER BY id").fetchall()


def test_auto_routing_picks_the_cheapest_agent_expected_to_succeed(tmp_path):
    write_project(tmp_path, [auto_node("easy", "fast", "simple"), auto_node("hard", "powerful", "epic"),
                             auto_node("middle", "balanced", "medium")],
                  agents={"cheap": CHEAP, "mid": MID, "strong": STRONG}, contracts={"summary": SIMPLE_CONTRACT})
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    assert agent_of(tmp_path) == {"easy": "cheap", "hard": "strong", "middle": "mid"}
    routed = sqlite3.connect(tmp_path / ".harness" / "state.db").execute(
        "SELECT task_id, data FROM events WHERE kind='routed' ORDER BY id").fetchall()
    # the route: expected to succeed by cost, then those with a fair chance (a fast agent
    # two tiers short of an epic task is left out)
    assert {t: json.loads(d)["agents"] for t, d in routed} == {
        "easy": ["cheap", "mid", "strong"], "hard": ["strong", "mid"], "middle": ["mid", "strong", "cheap"]}


def test_history_stops_sending_a_class_of_task_to_an_agent_that_keeps_failing_it(tmp_path):
    failing = {**MID, "tier": "balanced", "price": {"input": 0.1, "output": 0.5}, "skill": {"medium": 0.0}}
    write_project(tmp_path, [auto_node(f"t{i}", "balanced", "medium",
                                       retry={"max_retries": 0, "on_failure": "escalate"}) for i in range(5)],
                  agents={"cheap": failing, "strong": STRONG}, contracts={"summary": SIMPLE_CONTRACT},
                  concurrency=1)
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    # t0 and t1 try the cheap agent (its tier says it can), fail, escalate; after two
    # failures its expected success (0 of 2 against a 0.9 prior) drops below 0.7
    assert attempt_agents(tmp_path) == [("t0", "cheap"), ("t0", "strong"), ("t1", "cheap"), ("t1", "strong"),
                                        ("t2", "strong"), ("t3", "strong"), ("t4", "strong")]
    st = json.loads(virtual.harnessc(tmp_path, "stats", "--output", "json").stdout)
    cheap = next(r for r in st if r["agent"] == "cheap" and r.get("complexity") == "medium")
    assert cheap["attempts"] == 2 and cheap["successes"] == 0
    text = virtual.harnessc(tmp_path, "stats").stdout
    assert "cheap" in text and "0%" in text and "100%" in text


def test_history_stops_paying_for_a_strong_agent_where_a_cheap_one_has_been_reliable(tmp_path):
    write_project(tmp_path, [auto_node(f"t{i}", "balanced", "medium") for i in range(6)],
                  agents={"cheap": CHEAP, "strong": STRONG}, contracts={"summary": SIMPLE_CONTRACT})
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    assert set(agent_of(tmp_path).values()) == {"strong"}  # a fast agent on medium work: 0.5, not enough
    assert virtual.harnessc(tmp_path, "run", "--rerun", "all", "--agent", "cheap").returncode == 0  # evidence
    assert virtual.harnessc(tmp_path, "run", "--rerun", "all").returncode == 0
    assert set(agent_of(tmp_path).values()) == {"cheap"}  # 6 of 6: (6 + 0.5*4) / (6 + 4) = 0.8


def test_a_short_budget_steps_non_critical_tasks_down_a_tier_and_says_so_once(tmp_path):
    nodes = [auto_node("a", "powerful", "complex", estimate={"cost_usd": 0.5}),
             auto_node("b", "powerful", "complex", estimate={"cost_usd": 0.5}),
             auto_node("vip", "powerful", "complex", priority="critical", estimate={"cost_usd": 0.5})]
    write_project(tmp_path, nodes, agents={"cheap": CHEAP, "mid": MID, "strong": STRONG},
                  contracts={"summary": SIMPLE_CONTRACT}, budget={"max_cost_usd": 1.0, "max_tokens": None})
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    assert agent_of(tmp_path) == {"a": "mid", "b": "mid", "vip": "strong"}
    events = sqlite3.connect(tmp_path / ".harness" / "state.db").execute(
        "SELECT data FROM events WHERE kind='budget_step_down'").fetchall()
    assert len(events) == 1 and "short of this run's estimate ($1.5000)" in events[0][0]


def test_calls_in_flight_holding_the_run_budget_make_the_next_call_wait_not_stop_the_run(tmp_path):
    """Three tasks start at once under a $1 run budget, each call reserving ~$0.50: the third
    call is short only of what the two in flight reserved. It waits for them to settle (at a
    fraction of a cent) and runs; the run is not stopped as out of money it never spent."""
    slow = {**MID, "latency": 0.5}
    nodes = [node(t, contract="summary", routing={"agent": "mid", "chain": [], "reason": "test"},
                  estimate={"cost_usd": 0.5, "output_tokens": 100_000})  # reserved: ~$0.50 at $5 / Mtok
             for t in ("a", "b", "c")]
    write_project(tmp_path, nodes, agents={"mid": slow}, contracts={"summary": SIMPLE_CONTRACT},
                  budget={"max_cost_usd": 1.0, "max_tokens": None}, concurrency=3)
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert agent_of(tmp_path) == {"a": "mid", "b": "mid", "c": "mid"}
    assert "budget reached" not in r.stdout


def test_auto_routed_tasks_escalate_on_repeated_failures_whatever_on_failure_says(tmp_path):
    weak = {**CHEAP, "tier": "balanced", "skill": {"medium": 0.0}}
    write_project(tmp_path, [auto_node("t", "balanced", "medium", retry={"max_retries": 1, "on_failure": "retry"})],
                  agents={"cheap": weak, "strong": STRONG}, contracts={"summary": SIMPLE_CONTRACT})
    r = virtual.harnessc(tmp_path, "run")
    assert r.returncode == 0, r.stdout + r.stderr
    assert attempt_agents(tmp_path) == [("t", "cheap"), ("t", "cheap"), ("t", "strong")]
    results = json.loads(next((tmp_path / ".harness" / "runs").glob("*/run_results.json")).read_text())
    assert results["results"][0]["agents"] == ["cheap", "strong"]


def test_strengths_break_ties_towards_what_the_task_needs(tmp_path):
    same = {"provider": "simulate", "tier": "balanced", "price": {"input": 1, "output": 5}}
    node_ = auto_node("r", "balanced", "medium")
    node_["analysis"]["needs"] = ["research"]
    write_project(tmp_path, [node_], agents={"coder": {**same, "strengths": ["implementation"]},
                                             "scholar": {**same, "strengths": ["research", "large_context"]}},
                  contracts={"summary": SIMPLE_CONTRACT})
    assert virtual.harnessc(tmp_path, "run").returncode == 0
    assert agent_of(tmp_path) == {"r": "scholar"}
