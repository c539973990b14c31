"""Agent health: a circuit breaker per agent and each agent's daily usage against its limits.

Both are shared by every task of a run and kept in state.db across runs and processes:

* the breaker opens after BREAKER_FAILURES failed calls in a row (any task), or at once on
  an exhausted quota (until the reset time the provider gave, else for the cooldown); once
  the cooldown is over one probe call goes through (half-open): a success closes it, a
  failure opens it again. Breakers live in the meta table, one row per agent;
* `limits: {daily_calls, daily_tokens, daily_cost_usd}` count the agent's attempts since
  local midnight (every run and process writing this state.db, and the calls a `reset`
  forgot: state.keep_daily_usage); an agent at a limit is not called again until the next
  local day.

The router's caller asks `blocked(agent)` before each call: None, or why not and until when.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...providers import AgentConfig, AgentLimits
from .. import clock as runtime_clock
from ..store.state import StateStore

if TYPE_CHECKING:  # `status` reads agents' health without loading the agents
    from ..agents.errors import AgentError

BREAKER_FAILURES = 5  # failed calls in a row that open an agent's breaker
BREAKER_COOLDOWN = 60.0  # seconds an open breaker waits before letting one probe through
# The longest a provider's reset time may keep a breaker open: "try again at 2999-01-01"
# (a typo, a clock, a hostile proxy) must not shelve an agent for good. Past it one probe
# call goes through; `harnessc reset --breakers` closes every breaker at once.
MAX_BREAKER_OPEN = 7 * 86400.0
KEY = "breaker:"  # meta key prefix, + the agent's name
NO_LIMITS = AgentLimits()
DAILY = (("daily_calls", "calls"), ("daily_tokens", "tokens"), ("daily_cost_usd", "cost_usd"))


@dataclass
class Breaker:
    failures: int = 0  # failed calls in a row
    open_until: float | None = None  # epoch seconds; None: closed
    reason: str = ""

    @property
    def is_open(self) -> bool:
        return self.open_until is not None


@dataclass
class Blocked:
    """Why an agent is not called now, and when that may change (epoch seconds)."""

    reason: str
    until: float
    kind: str  # breaker | daily_limit


class Health:
    def __init__(self, store: StateStore, agents: Mapping[str, AgentConfig], clock: Callable[[], float] | None = None):
        self.store, self.agents = store, agents
        self.clock = clock or runtime_clock.time  # epoch seconds (runtime/clock.py)
        self.breakers: dict[str, Breaker] = {}
        self.probing: set[str] = set()  # agents whose half-open probe is in flight
        self.limited: set[str] = set()  # agents reported at their daily limit in this run

    # ------------------------------------------------------------------ asking

    def blocked(self, agent: str) -> Blocked | None:
        """None when `agent` may be called now (a half-open breaker lets exactly one call through)."""
        b = self.breaker(agent)
        now = self.clock()
        if b.is_open:
            if now < b.open_until or agent in self.probing:
                until = b.open_until if now < b.open_until else now + 1.0
                return Blocked(f"agent '{agent}' is failing ({b.reason}); its circuit breaker is open "
                               f"until {clock_text(until, now)}", until, "breaker")
            self.probing.add(agent)  # half-open: this call is the probe
        limit = self.over_daily_limit(agent)
        if limit:
            self.probing.discard(agent)
            if agent not in self.limited:
                self.limited.add(agent)
                self.store.event("daily_limit_reached", agent=agent, message=limit)
            return Blocked(limit, next_midnight(now), "daily_limit")
        return None

    def release(self, agent: str) -> None:
        """The call `blocked` let through will not be made after all (its probe is free again)."""
        self.probing.discard(agent)

    def limits(self, agent: str) -> AgentLimits:
        """The agent's caps (none for an agent the plan does not define: the built-in rehearsal)."""
        config = self.agents.get(agent)
        return config.limits if config else NO_LIMITS

    def over_daily_limit(self, agent: str) -> str | None:
        limits = self.limits(agent)
        if not any(limits[key] is not None for key, _ in DAILY):
            return None
        used = self.store.agent_usage_since(agent, last_midnight(self.clock()))
        for key, field in DAILY:
            cap = limits[key]
            if cap is not None and used[field] >= cap:
                return (f"agent '{agent}' reached its {key.replace('_', ' ')} limit "
                        f"({_amount(used[field])} of {_amount(cap)} today); it is back tomorrow")
        return None

    # ------------------------------------------------------------------ telling

    def record(self, agent: str, error: AgentError | None) -> None:
        """The outcome of one call: None for an answer (whatever its verification says)."""
        self.probing.discard(agent)
        b = self.breaker(agent)
        if error is None:
            if b.failures or b.is_open:
                if b.is_open:
                    self.store.event("breaker_closed", agent=agent)
                self._save(agent, Breaker())
            return
        failures = b.failures + 1
        now = self.clock()
        if error.kind == "quota_exhausted" or failures >= BREAKER_FAILURES:
            until = error.reset_at if error.kind == "quota_exhausted" and error.reset_at else now + BREAKER_COOLDOWN
            reason = (f"{error.kind}: {error.message}"[:300] if error.kind == "quota_exhausted"
                      else f"{failures} failed calls in a row, last {error.kind}")
            if not math.isfinite(until):
                until = now + BREAKER_COOLDOWN
            elif until > now + MAX_BREAKER_OPEN:
                reason += (f" (the reset time it gave, {clock_text(until, now)}, is more than "
                           f"{MAX_BREAKER_OPEN / 86400:g} days away: capped)")
                until = now + MAX_BREAKER_OPEN
            if not b.is_open or until != b.open_until:
                self.store.event("breaker_opened", agent=agent, until=until, reason=reason)
            self._save(agent, Breaker(failures, max(until, now), reason))
        else:
            self._save(agent, Breaker(failures, b.open_until, b.reason))

    # ------------------------------------------------------------------ storage

    def breaker(self, agent: str) -> Breaker:
        if agent not in self.breakers:
            raw = self.store.meta_get(KEY + agent)
            try:
                b = Breaker(**json.loads(raw)) if raw else Breaker()
                if b.open_until is not None:
                    b.open_until = float(b.open_until)
            except (TypeError, ValueError):
                b = Breaker()  # unreadable: start closed
            latest = self.clock() + MAX_BREAKER_OPEN
            if b.open_until is not None and not b.open_until <= latest:  # kept by an older harnessc, or NaN
                b.open_until = latest
                self._save(agent, b)
            self.breakers[agent] = b
        return self.breakers[agent]

    def _save(self, agent: str, b: Breaker) -> None:
        self.breakers[agent] = b
        self.store.meta_set(KEY + agent, json.dumps(asdict(b)) if (b.failures or b.is_open) else None)


def agent_report(store: StateStore, agents: Mapping[str, AgentConfig], now: float | None = None) -> dict[str, dict]:
    """For `harnessc status`: each agent's breaker and today's usage against its limits."""
    now = runtime_clock.time() if now is None else now
    health = Health(store, agents, clock=lambda: now)
    out: dict[str, dict[str, Any]] = {}
    since = last_midnight(now)
    for name in sorted(agents):
        b = health.breaker(name)
        state = "closed" if not b.is_open else ("open" if now < b.open_until else "half-open")
        limits = {k: v for k, v in health.limits(name).items() if k in dict(DAILY) and v is not None}
        out[name] = {"breaker": state, "failures": b.failures, "open_until": b.open_until,
                     "reason": b.reason or None, "today": store.agent_usage_since(name, since), "limits": limits}
    return out


def clear_breakers(store: StateStore) -> list[str]:
    """Close every agent's breaker (`harnessc reset --breakers`); the agents that had one."""
    keys = store.meta_keys(KEY)
    for key in keys:
        store.meta_set(key, None)
    return sorted(key[len(KEY):] for key in keys)


def last_midnight(now: float) -> float:
    t = time.localtime(now)
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))


def next_midnight(now: float) -> float:
    t = time.localtime(now)
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday + 1, 0, 0, 0, 0, 0, -1))


def clock_text(epoch: float, now: float | None = None) -> str:
    """A local time: the clock alone when it is within the next day, else with its date."""
    now = runtime_clock.time() if now is None else now
    if now - 60 <= epoch < now + 86400:
        return time.strftime("%H:%M:%S", time.localtime(epoch))
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _amount(v: float) -> str:
    return f"${v:.4f}" if isinstance(v, float) and not float(v).is_integer() else f"{v:g}"
