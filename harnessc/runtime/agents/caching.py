"""Prompt caching on the wire: where a request may be cached, per provider.

A task prompt starts with the parts other tasks share (compiler/prompts.py renders them first
and says where each ends: Request.cache_breaks), so requests can be served from the
provider's prompt cache up to there:

* anthropic caches up to the `cache_control` breakpoints a request carries (at most 4, each
  covering everything before it: system prompt, then the message). A breakpoint goes at the
  end of each shared part whose prefix is long enough for the model to cache it; a shorter
  one would be ignored by the API and only use up one of the four.
* openai caches any prompt's leading 1,024+ tokens by itself; `prompt_cache_key` routes the
  requests that share a prefix to the same cache.
"""

from __future__ import annotations

import hashlib

from ...estimates import CHARS_PER_TOKEN
from ...providers import window_of

MAX_BREAKPOINTS = 4  # Anthropic's limit per request
# The shortest prefix (tokens) each Claude model caches, by model-id prefix (the longest one
# matching wins). Below it the API caches nothing and says nothing.
CACHE_MINIMUM = {
    "claude-": 1024,
    "claude-3-haiku": 2048,
    "claude-3-5-haiku": 2048,
    "claude-haiku-4-5": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-opus-4-7": 2048,
    "claude-sonnet-4-6": 2048,
}


def anthropic_messages(system: str, prompt: str, breaks: tuple[int, ...], model: str | None,
                       ttl: str = "5m") -> tuple[list[dict] | None, list[dict]]:
    """(the `system` blocks or None, the `messages`) of a Messages request: the prompt split
    into text blocks at its shared parts' ends, a `cache_control` breakpoint on each block
    (the system prompt's included) whose end is a prefix long enough to cache; at most 4,
    the longest prefixes kept."""
    minimum = window_of(model or "", CACHE_MINIMUM) or CACHE_MINIMUM["claude-"]
    ends = sorted({b for b in breaks if 0 < b < len(prompt)})
    candidates = ([0] if system else []) + ends  # 0: the end of the system prompt
    cacheable = [b for b in candidates if (len(system) + b) // CHARS_PER_TOKEN >= minimum]
    chosen = set(cacheable[-MAX_BREAKPOINTS:])
    control = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    system_blocks = None
    if system:
        system_blocks = [{"type": "text", "text": system, **({"cache_control": control} if 0 in chosen else {})}]
    cuts = [b for b in ends if b in chosen]
    if not cuts:
        return system_blocks, [{"role": "user", "content": prompt}]
    blocks, start = [], 0
    for end in cuts:
        blocks.append({"type": "text", "text": prompt[start:end], "cache_control": control})
        start = end
    blocks.append({"type": "text", "text": prompt[start:]})
    return system_blocks, [{"role": "user", "content": blocks}]


def prompt_cache_key(system: str, prompt: str, breaks: tuple[int, ...]) -> str:
    """OpenAI's `prompt_cache_key`: the same for every request of a project (its system
    prompt names it) whose prompt starts with the same shared parts."""
    shared = prompt[:max((b for b in breaks if b <= len(prompt)), default=0)]
    digest = hashlib.sha256(f"{system}\x00{shared}".encode()).hexdigest()
    return f"harnessc-{digest[:32]}"

