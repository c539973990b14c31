"""What the prompt cache did: the share of input tokens read from it, and the money that
saved at the agents' prices (reads cost less than input, writes more)."""

from __future__ import annotations

from typing import Any, Mapping

from ... import providers
from ...providers import AgentConfig
from ..agents.usage import cache_prices
from ..store.state import StateStore


def cache_figures(store: StateStore, agents: Mapping[str, AgentConfig], run_id: str | None = None) -> dict[str, Any]:
    """{input_tokens, cache_read_tokens, cache_write_tokens, share, saved_usd, agents: {name:
    the same per agent}} for the attempts of one run (or all); saved_usd is None when an
    agent with cache activity has no `price:`. Agents that cannot cache (simulate, command,
    replay) and read nothing from one are left out."""
    per_agent = {}
    for name, usage in sorted(store.cache_usage(run_id).items()):
        config = agents.get(name)
        unit = providers.get(config.provider) if config else None
        cached = usage["cache_read_tokens"] or usage["cache_write_tokens"]
        if not cached and not (unit and (unit.sdk or unit.cli)):
            continue
        saved = None
        if config and config.price:
            saved = cache_prices(config).saved(usage["cache_read_tokens"], usage["cache_write_tokens"],
                                               config.cache_ttl)
        per_agent[name] = _with_share(usage, saved)
    totals = {k: sum(a[k] for a in per_agent.values())
              for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens")}
    savings = [a["saved_usd"] for a in per_agent.values() if a["cache_read_tokens"] or a["cache_write_tokens"]]
    saved = None if any(s is None for s in savings) else sum(savings)
    return {**_with_share(totals, saved), "agents": per_agent}


def _with_share(usage: dict[str, int], saved: float | None) -> dict[str, Any]:
    share = usage["cache_read_tokens"] / usage["input_tokens"] if usage["input_tokens"] else 0.0
    return {**usage, "share": round(share, 4), "saved_usd": None if saved is None else round(saved, 6)}


def cache_line(figures: dict[str, Any]) -> str | None:
    """The run summary's line about the cache; None when nothing was cached."""
    if not (figures["cache_read_tokens"] or figures["cache_write_tokens"]):
        return None
    saved = figures["saved_usd"]
    money = "" if saved is None else (f", saving ${saved:.4f}" if saved >= 0 else f", costing ${-saved:.4f} more")
    return (f"prompt cache: {figures['share']:.0%} of input tokens read from the cache "
            f"({figures['cache_read_tokens']:,} of {figures['input_tokens']:,}; "
            f"{figures['cache_write_tokens']:,} written){money} at the agents' prices")
