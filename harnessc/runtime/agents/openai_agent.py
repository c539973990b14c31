"""Provider `openai`'s agent (providers/openai.py names `make`): Chat Completions
(openai_api.py) unless the config's `api:` says `responses` (openai_responses.py, built on it)."""

from __future__ import annotations

from pathlib import Path

from ...providers.config import OpenAIConfig
from .openai_api import OpenAIAgent
from .openai_responses import OpenAIResponsesAgent


def make(name: str, config: OpenAIConfig, root: Path) -> OpenAIAgent:
    """The openai agent for the config's `api:` (chat unless it says responses)."""
    if config.api == "responses":
        return OpenAIResponsesAgent(name, config, root)
    return OpenAIAgent(name, config, root)
