"""Gemini models, which harnessc reaches through gemini-cli: their context windows.

1,048,576 tokens for Gemini 1.5, 2.x and 3 (1.5 Pro's 2M is the exception; the family's
smaller window is kept). gemini-cli without `model:` runs a Gemini 2.5/3 model.
"""

from __future__ import annotations

# Model-id prefix -> context window in tokens (providers.window_of: the longest prefix wins).
WINDOWS = {
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
    "gemini-3": 1_048_576,
}
GEMINI_CLI_WINDOW = 1_048_576
