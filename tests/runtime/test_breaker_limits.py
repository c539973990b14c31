"""A provider's far-off reset time cannot shelve an agent for good (runtime/routing/health.py),
`reset --breakers` / `reset --all` close breakers, and an open breaker lets one probe through
after its cooldown. In virtual time (tests/runtime/virtual.py): a fixed day, no waiting."""

from __future__ import annotations

import json
import time

from harnessc.providers import agent_config
from harnessc.runtime.routing import health
from harnessc.runtime.agents.errors import AgentError, text_reset
from harnessc.runtime.store.state import StateStore
from harnessc.workspace import Workspace

from . import virtual
from .helpers import node, write_project

AGENTS = {"bot": {"provider": "simulate"}, "other": {"provider": "simulate"}}
CONFIGS = {name: agent_config(name, raw) for name, raw in AGENTS.items()}
NOON = time.mktime((2030, 6, 14, 12, 0, 0, 0, 0, -1))  # a local noon: what the tests call now
FAILED = AgentError("agent 'bot': server error", kind="server")


def open_far_off_breaker(root, now: float) -> StateStore:
    store = StateStore(Workspace(root))
    reset_at = text_reset("You exceeded your quota; try again at 2999-01-01 00:00 UTC", now)
    assert reset_at is not None and reset_at > now + 365 * 86400
    h = health.Health(store, CONFIGS, clock=lambda: now)
    h.record("bot", AgentError("agent 'bot': quota exhausted", kind="quota_exhausted", reset_at=reset_at))
    return store


def test_a_reset_time_years_away_is_capped_with_an_alert_and_shown_with_its_date(tmp_path):
    write_project(tmp_path, [node("a", routing={"agent": "bot"})], agents=AGENTS)
    now = virtual.clock_of(tmp_path, wall=NOON).time()
    store = open_far_off_breaker(tmp_path, now)
    b = health.Health(store, CONFIGS, clock=lambda: now).breaker("bot")
    assert b.open_until == now + health.MAX_BREAKER_OPEN
    (ev,) = [json.loads(d) for (d,) in store.db.execute("SELECT data FROM events WHERE kind='breaker_opened'")]
    assert "2999-01-01" in ev["reason"] and "capped" in ev["reason"]
    store.close()
    out = virtual.harnessc(tmp_path, "status").stdout
    date = time.strftime("%Y-%m-%d", time.localtime(now + health.MAX_BREAKER_OPEN))
    assert f"agent bot: breaker open until {date} " in out, out


def test_a_breaker_kept_far_off_by_an_older_harnessc_is_capped_when_read(tmp_path):
    store = StateStore(Workspace(tmp_path))
    store.meta_set(health.KEY + "bot", json.dumps({"failures": 1, "open_until": 32472144000.0, "reason": "quota"}))
    now = NOON
    assert health.Health(store, CONFIGS, clock=lambda: now).breaker("bot").open_until == now + health.MAX_BREAKER_OPEN
    assert health.Health(store, CONFIGS, clock=lambda: now + 10).breaker("bot").open_until == (
        now + health.MAX_BREAKER_OPEN)  # saved capped: it does not move on with every run


def test_reset_breakers_and_reset_all_close_every_breaker(tmp_path):
    write_project(tmp_path, [node("a", routing={"agent": "bot"})], agents=AGENTS)
    clock = virtual.clock_of(tmp_path, wall=NOON)
    open_far_off_breaker(tmp_path, clock.time()).close()
    assert "agent bot: breaker open" in virtual.harnessc(tmp_path, "status").stdout
    r = virtual.harnessc(tmp_path, "reset", "--breakers")
    assert r.returncode == 0 and "closed the breaker of bot" in r.stdout, r.stdout + r.stderr
    assert "breaker" not in virtual.harnessc(tmp_path, "status").stdout
    assert virtual.harnessc(tmp_path, "reset", "--breakers").stdout.strip() == "no breaker was open"
    open_far_off_breaker(tmp_path, clock.time()).close()
    r = virtual.harnessc(tmp_path, "reset", "--all")
    assert r.returncode == 0 and "closed the breaker of bot" in r.stdout, r.stdout + r.stderr
    assert "breaker" not in virtual.harnessc(tmp_path, "status").stdout


def test_an_open_breaker_lets_one_probe_through_after_its_cooldown(tmp_path):
    clock = virtual.virtual_clock(wall=NOON)
    store = StateStore(Workspace(tmp_path))
    with clock.installed():  # Health reads the installed clock (runtime/clock.py)
        h = health.Health(store, CONFIGS)
        for _ in range(health.BREAKER_FAILURES - 1):
            h.record("bot", FAILED)
        assert h.blocked("bot") is None  # four failures in a row: still closed
        h.record("bot", FAILED)
        blocked = h.blocked("bot")
        assert blocked.kind == "breaker" and blocked.until == NOON + health.BREAKER_COOLDOWN
        assert "5 failed calls in a row, last server" in blocked.reason and "until 12:01:00" in blocked.reason
        assert h.blocked("other") is None  # agents break apart
        clock.jump(health.BREAKER_COOLDOWN - 1)
        assert h.blocked("bot") is not None  # a second before the cooldown ends
        clock.jump(1)
        assert h.blocked("bot") is None  # half-open: this call is the probe ...
        assert h.blocked("bot").kind == "breaker"  # ... and the only one
        h.record("bot", FAILED)  # the probe failed: open for another cooldown
        assert h.blocked("bot").until == clock.time() + health.BREAKER_COOLDOWN
        assert health.agent_report(store, CONFIGS)["bot"]["breaker"] == "open"
        clock.jump(health.BREAKER_COOLDOWN)
        assert health.agent_report(store, CONFIGS)["bot"]["breaker"] == "half-open"
        assert h.blocked("bot") is None
        h.release("bot")  # the probe was not made after all: the next call may probe
        assert h.blocked("bot") is None
        h.record("bot", None)  # the probe answered: closed
        assert h.blocked("bot") is None and h.blocked("bot") is None
        assert health.agent_report(store, CONFIGS)["bot"]["breaker"] == "closed"
    kinds = [k for (k,) in store.db.execute("SELECT kind FROM events WHERE kind LIKE 'breaker_%' ORDER BY id")]
    assert kinds == ["breaker_opened", "breaker_opened", "breaker_closed"]
    store.close()
