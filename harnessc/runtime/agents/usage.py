"""What one call used and cost, as the ledger believes it: its token counts (Usage), where
its cost came from (the cost sources) and the check every outside figure passes
(checked_charge); an agent's cache prices (cache_prices). Below both base.py (Response) and errors.py (AgentError's ledger)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from ... import providers
from ...providers import AgentConfig


@dataclass
class Usage:
    """Tokens of one call. input_tokens counts ALL input: uncached + cache read + cache write
    (of which the cache counters say how much); output_tokens includes reasoning_tokens."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_1h_tokens: int = 0  # the part of cache_write_tokens written for an hour (anthropic)

    @property
    def uncached_input_tokens(self) -> int:
        return max(self.input_tokens - self.cache_read_tokens - self.cache_write_tokens, 0)

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


# Where an attempt's cost comes from (the `cost_source` of its row in state.db):
PRICE = "price"  # computed from the reported tokens and the agent's `price:`
CLI = "cli"  # the CLI's own estimate (Claude Code's total_cost_usd)
NO_PRICE = "none"  # tokens recorded, no `price:` set: charged 0
NO_RESPONSE = "no_response"  # no response (or none that reported usage): charged 0
RESERVED = "reserved"  # older runs: the run died during the call, charged its reservation
UNKNOWN = "unknown"  # the run died during the call: charged 0, its estimate kept apart (state.recover)
COST_SOURCES = (PRICE, CLI, NO_PRICE, NO_RESPONSE, RESERVED, UNKNOWN)


@dataclass(frozen=True, slots=True)
class Charge:
    """What a call adds to its attempt's ledger (Response.charged(), AgentError.charged()).
    The defaults are a call that never answered: nothing used, charged 0."""

    usage: Usage | None = None  # None: nothing reported (0 tokens)
    cost_usd: float = 0.0
    cost_source: str = NO_RESPONSE  # see COST_SOURCES
    latency: float = 0.0  # seconds
    denials: list[dict] | None = None  # the tool calls the agent's permissions refused ({tool, target})
    tool_calls: int | None = None  # as the agent reported them (None: it does not say)
    unreported: tuple[str, ...] = ()  # the figures not believed (checked_charge), kept with the errors


# The most one call may report, per token count and in cost: a figure past these (or NaN,
# infinite, negative, not a number) is not believed, and recorded as not reported (0).
MAX_CALL_TOKENS = 10**9
MAX_CALL_COST_USD = 10_000.0


def reported(value: Any, limit: float) -> float | None:
    """A figure from outside (a server's usage, a CLI's JSON, a cassette) when it is a finite
    number from 0 to `limit`; None when it is not one to believe."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):  # float() of a huge int overflows
        return value if 0 <= value <= limit else None
    return value if math.isfinite(value) and 0 <= value <= limit else None


def shown(value: Any) -> str:
    """A rejected figure as a note says it: NaN, Infinity, -1e+08, 'abc'."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


_USAGE_FIELDS = tuple(f.name for f in fields(Usage))  # (fields() per call cost a task more than its checks)


def checked_charge(usage: Usage | None, cost: Any, source: str) -> tuple[Usage | None, float, str, list[str]]:
    """(usage, cost, cost source, notes) with every figure one to believe: a token count or
    a cost that is not (see `reported`) counts 0, and a note says which ("usage not
    reported: input_tokens=NaN"); a cost not believed is charged as no usage reported."""
    notes: list[str] = []
    if usage is not None:
        counts = {}
        for name in _USAGE_FIELDS:
            raw = getattr(usage, name)
            value = reported(raw if raw is not None else 0, MAX_CALL_TOKENS)
            if value is None:
                notes.append(f"usage not reported: {name}={shown(raw)}")
            counts[name] = int(value or 0)
        usage = replace(usage, **counts)
    value = reported(cost if cost is not None else 0.0, MAX_CALL_COST_USD)
    if value is None:
        notes.append(f"cost not reported: cost_usd={shown(cost)}")
        source = NO_RESPONSE
    return usage, float(value or 0.0), source, notes


@dataclass(frozen=True)
class CachePrices:
    """USD per million input tokens: uncached, read from the cache, written for 5 minutes, for an hour."""

    input: float
    read: float
    write: float
    write_1h: float

    def saved(self, read_tokens: int, write_tokens: int, ttl: str = "5m") -> float:
        """USD the cache saved on input against sending it all uncached: reads cost less,
        writes more (a negative figure: the writes were never read back enough)."""
        write = self.write_1h if ttl == "1h" else self.write
        return (read_tokens * (self.input - self.read) - write_tokens * (write - self.input)) / 1_000_000


def cache_prices(config: AgentConfig, provider: str | None = None) -> CachePrices:
    """The agent's input prices with and without the cache (all 0 without `price:`)."""
    price = config.price
    if price is None:
        return CachePrices(0.0, 0.0, 0.0, 0.0)
    unit = providers.get(provider or config.provider)
    read_rate, write_rate, write_1h_rate = unit.cache_rates if unit else (1.0, 1.0, 1.0)
    return CachePrices(price.input, _or(price.cache_read, price.input * read_rate),
                       _or(price.cache_write, price.input * write_rate),
                       _or(price.cache_write_1h, price.input * write_1h_rate))


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
