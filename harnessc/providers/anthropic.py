"""Anthropic (Messages API): structured output via `output_config.format` json_schema.

Subset (from the Anthropic "JSON Schema limitations" docs and the SDK's own transformer):
besides the common keywords it keeps allOf, `format` for the formats it lists and
`minItems` of 0 or 1. Optional properties stay optional. `pattern` is moved too: Anthropic
supports only a regex subset and a rejected request is worse than a rule checked locally.
A contract strict mode cannot express (free-form values) is asked for through a forced
tool instead, whose `input_schema` is TOOL_SCHEMA: the whole contract, non-strict.

Context windows (platform.claude.com model pages): 200K for every Claude 3.x and 4.x model
(the 1M of some 4.x models needs a beta header harnessc does not send); 1M for the Claude 5
generation. Claude Code runs with a 200K window unless asked for `[1m]`.
"""

from __future__ import annotations

from .subset import COMMON_KEEP, DRAFT07, SchemaSubset
from .unit import Provider

# Model-id prefix -> context window in tokens (providers.window_of: the longest prefix wins).
# Where a family's members differ, the entry is the smallest: a budget too small leaves a
# file out, one too large overflows the window.
WINDOWS = {
    "claude-": 200_000,
    "claude-sonnet-5": 1_000_000,
    "claude-opus-5": 1_000_000,
    "claude-fable": 1_000_000,
}
# claude-code's `--model` aliases, and its window when no model is set
CLAUDE_CODE_ALIASES = {"sonnet": 200_000, "opus": 200_000, "haiku": 200_000,
                       "sonnet[1m]": 1_000_000, "opus[1m]": 1_000_000}
CLAUDE_CODE_WINDOW = 200_000

# A forced tool's input_schema: any JSON Schema (not strict), less harnessc's `x-` keys.
TOOL_SCHEMA = SchemaSubset(provider="anthropic", keep=DRAFT07, strict=False)

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
    config="AnthropicConfig",
    api_key_env="ANTHROPIC_API_KEY",
    cache_rates=(0.1, 1.25, 2.0),
    windows=WINDOWS,
    sdk="anthropic",
    requires={"model": "add the model id, e.g. `model: claude-sonnet-4-6` (the Messages API has no default model)"},
)
