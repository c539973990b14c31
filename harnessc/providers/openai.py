"""OpenAI (Chat Completions or Responses; any OpenAI-compatible server): json_schema strict.

Strict subset (from OpenAI's "supported schemas" docs): the common keywords only; every
property is listed in `required` and an optional one becomes nullable (`type: [T, "null"]`,
null added to an enum, or `anyOf: [..., {"type": "null"}]`). The validator treats null in an
optional field as absent, so the nullable answer validates.
"""

from __future__ import annotations

from . import Provider
from .subset import COMMON_KEEP, SchemaSubset

PROVIDER = Provider(
    name="openai",
    agent="harnessc.runtime.agents.openai_api:make",
    schema=SchemaSubset(provider="openai", keep=COMMON_KEEP, all_required=True),
    api_key_env="OPENAI_API_KEY",
    cache_rates=(0.1, 1.0),
    requires={"model": "add the model id, e.g. `model: gpt-5.2`, or the name a local server serves it under"
                       " (e.g. `model: qwen3:8b` for Ollama)"},
)
