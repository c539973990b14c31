"""OpenAI (Chat Completions or Responses; any OpenAI-compatible server): json_schema strict.

Strict subset (from OpenAI's "supported schemas" docs): the common keywords only; every
property is listed in `required` and an optional one becomes nullable (`type: [T, "null"]`,
null added to an enum, or `anyOf: [..., {"type": "null"}]`). The validator treats null in an
optional field as absent, so the nullable answer validates.

Context windows (OpenAI model pages): gpt-3.5-turbo 16,385; gpt-4 8,192 (gpt-4-32k 32,768);
gpt-4-turbo and gpt-4o 128K; gpt-4.1 1,047,576; o1 and o3/o4 200K (o1-mini, o1-preview 128K);
the gpt-5 family 400K (its `-chat` models 128K; gpt-5.4 and later offer ~1M, the family's
400K is kept for them). A model a local server serves under its own name has no known window.
"""

from __future__ import annotations

from .subset import COMMON_KEEP, SchemaSubset
from .unit import Provider

# Model-id prefix -> context window in tokens (providers.window_of: the longest prefix wins;
# where a family's members differ, the entry is the smallest).
WINDOWS = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "gpt-5": 400_000,
    "gpt-5-chat": 128_000,
    "gpt-5.1-chat": 128_000,
    "gpt-5.2-chat": 128_000,
    "codex-mini": 200_000,
}
CODEX_WINDOW = 400_000  # codex exec without `model:` runs a gpt-5 codex model

PROVIDER = Provider(
    name="openai",
    agent="harnessc.runtime.agents.openai_agent:make",
    schema=SchemaSubset(provider="openai", keep=COMMON_KEEP, all_required=True),
    config="OpenAIConfig",
    api_key_env="OPENAI_API_KEY",
    cache_rates=(0.1, 1.0, 1.0),
    windows=WINDOWS,
    sdk="openai",
    requires={"model": "add the model id, e.g. `model: gpt-5.2`, or the name a local server serves it under"
                       " (e.g. `model: qwen3:8b` for Ollama)"},
)
