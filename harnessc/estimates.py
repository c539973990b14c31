"""Token and cost estimates without a tokenizer: about four characters per token.

One rule for the compiler (plan.json's estimates) and the runtime (budget reservations, the
usage of agents that report none). Imports nothing, so lint and build load it without the
runtime.
"""

from __future__ import annotations

CHARS_PER_TOKEN = 4


def tokens_for_chars(chars: int) -> int:
    """Tokens in `chars` characters of text: at least 1 for any text, 0 for none."""
    return max(1, chars // CHARS_PER_TOKEN) if chars > 0 else 0


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer."""
    return tokens_for_chars(len(text))


def cost_usd(input_tokens: int, output_tokens: int, input_price: float, output_price: float) -> float:
    """USD for a call, with prices in USD per million tokens."""
    return (input_tokens * input_price + output_tokens * output_price) / 1_000_000
