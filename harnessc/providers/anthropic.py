"""Anthropic (Messages API): structured output via `output_config.format` json_schema.

Subset (from the Anthropic "JSON Schema limitations" docs and the SDK's own transformer):
besides the common keywords it keeps allOf, `format` for the formats it lists and
`minItems` of 0 or 1. Optional properties stay optional. `pattern` is moved too: Anthropic
supports only a regex subset and a rejected request is worse than a rule checked locally.
"""

from __future__ import annotations

from . import Provider
from .subset import COMMON_KEEP, SchemaSubset

PROVIDER = Provider(
    name="anthropic",
    agent="harnessc.runtime.agents.anthropic_api:AnthropicAgent",
    schema=SchemaSubset(
        provider="anthropic",
        keep=COMMON_KEEP | {"allOf", "format", "minItems"},
        formats=frozenset({"date-time", "date", "time", "duration", "email", "hostname", "uri",
                           "ipv4", "ipv6", "uuid"}),
        min_items=frozenset({0, 1}),
    ),
    api_key_env="ANTHROPIC_API_KEY",
    defaults={"max_tokens": 8192},
    cache_rates=(0.1, 1.25),
    requires={"model": "add the model id, e.g. `model: claude-sonnet-4-5` (the Messages API has no default model)"},
)
