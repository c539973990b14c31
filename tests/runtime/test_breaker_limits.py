"""A provider's far-off reset time cannot shelve an agent for good (runtime/routing/health.py), and
`reset --breakers` / `reset --all` close breakers."""

from __future__ import annotations

import json
import time

from harnessc.providers import agent_config
from harnessc.runtime.routing import health
from harnessc.runtime.agents.errors import AgentError, text_reset
from harnessc.runtime.store.state import StateStore
from harnessc.workspace import Workspace

from .helpers import harnessc, node, write_project

AGENTS = {"bot": {"provider": "simulate"}, "other": {"provider": "simulate"}}
CONFIGS = {name: agent_config(name, raw) for name, raw in AGENTS.items()}


def open_far_off_breaker(root, now: float) -> StateStore:
    store = StateStore(Workspace(root))
    reset_at = text_reset("You exceeded your quota; try again at 2999-01-01 00:00 UTC", now)
    assert reset_at is not None and reset_at > now + 365 * 86400
    h = health.Health(store, CONFIGS, clock=lambda: now)
    h.record("bot", AgentError("agent 'bot': quota exhausted", kind="quota_exhausted", reset_at=reset_at))
    return store


def test_a_reset_time_years_away_is_capped_with_an_alert_and_shown_with_its_date(tmp_path):
    write_project(tmp_path, [node("a", routing={"agent": "bot"})], agents=AGENTS)
    now = time.time()
    store = open_far_off_breaker(tmp_path, now)
    b = health.Health(store, CONFIGS, clock=lambda: now).breaker("bot")
    assert b.open_until == now + health.MAX_BREAKER_OPEN
    (ev,) = [json.loads(d) for (d,) in store.db.execute("SELECT data FROM events WHERE kind='breaker_opened'")]
    assert "2999-01-01" in ev["reason"] and "capped" in ev["reason"]
    store.close()
    out = harnessc(tmp_path, "status").stdout
    date = time.strftime("%Y-%m-%d", time.localtime(now + health.MAX_BREAKER_OPEN))
    assert f"agent bot: breaker open until {date} " in out, out


def test_a_breaker_kept_far_off_by_an_older_harnessc_is_capped_when_read(tmp_path):
    store = StateStore(Workspace(tmp_path))
    store.meta_set(health.KEY + "bot", json.dumps({"failures": 1, "open_until": 32472144000.0, "reason": "quota"}))
    now = time.time()
    assert health.Health(store, CONFIGS, clock=lambda: now).breaker("bot").open_until == now + health.MAX_BREAKER_OPEN
    assert health.Health(store, CONFIGS, clock=lambda: now + 10).breaker("bot").open_until == (
        now + health.MAX_BREAKER_OPEN)  # saved capped: it does not move on with every run


def test_reset_breakers_and_reset_all_close_every_breaker(tmp_path):
    write_project(tmp_path, [node("a", routing={"agent": "bot"})], agents=AGENTS)
    open_far_off_breaker(tmp_path, time.time()).close()
    assert "agent bot: breaker open" in harnessc(tmp_path, "status").stdout
    r = harnessc(tmp_path, "reset", "--breakers")
    assert r.returncode == 0 and "closed the breaker of bot" in r.stdout, r.stdout + r.stderr
    assert "breaker" not in harnessc(tmp_path, "status").stdout
    assert harnessc(tmp_path, "reset", "--breakers").stdout.strip() == "no breaker was open"
    open_far_off_breaker(tmp_path, time.time()).close()
    r = harnessc(tmp_path, "reset", "--all")
    assert r.returncode == 0 and "closed the breaker of bot" in r.stdout, r.stdout + r.stderr
    assert "breaker" not in harnessc(tmp_path, "status").stdout
