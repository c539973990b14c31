"""Stuck detection for loop tasks: three signals over the last `stuck_after` iterations.

- identical output: the same output every time, and no file changed meanwhile;
- repeated error: the same error fingerprint every time (a rejected claim failing the same
  way: numbers, paths and hex ids are normalized away, so "line 12" and "line 13" match);
- no progress: every iteration scored under `loop: progress: threshold` (progress.py).

The first signal that fires names itself and its evidence in the reason the task ends with.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ... import outcome as outcomes
from .progress import Evidence

_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\w.~-]*[/\\])+[\w.-]*")
_HEX = re.compile(r"\b(?:0x[0-9a-fA-F]+|(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{7,})\b")
_DECIMAL = re.compile(r"\d+\.\d+")
_NUMBER = re.compile(r"\d+")
_KEPT = 50  # iterations of history kept (stuck_after is rarely above 10)


def normalize_error(text: str) -> str:
    """Error text with what changes between identical failures taken out: paths, hex ids,
    numbers (line numbers, counts, durations), case and spacing."""
    text = _PATH.sub("<path>", text)
    text = _DECIMAL.sub("#", text)  # before hex: 1000000.5 is one value, not a hex id and a number
    text = _HEX.sub("#", text)  # a long number looks like hex: both are just "a value"
    text = _NUMBER.sub("#", text)
    return " ".join(text.split()).lower()


def fingerprint(errors: list[str]) -> str | None:
    """One short id for a list of errors; None for none."""
    if not errors:
        return None
    return hashlib.sha256("\n".join(normalize_error(str(e)) for e in errors).encode()).hexdigest()[:16]


@dataclass
class Stuck:
    signal: str  # identical_output | repeated_error | no_progress
    reason: str


class StuckDetector:
    """Remembers the last iterations of one task (their `state()` is saved with its memory)."""

    def __init__(self, stuck_after: int, threshold: float, state: list | None = None):
        self.n, self.threshold = max(1, int(stuck_after)), threshold
        # per iteration: [low, error fingerprint, output hash, files changed, score]
        self.history: list[list] = [list(h) for h in (state or [])][-_KEPT:]

    def state(self) -> list:
        return self.history[-_KEPT:]

    def restart(self) -> None:
        """Forget the iterations so far: after a recovery step, the task gets `stuck_after`
        new iterations before it can be found stuck again."""
        self.history.clear()

    def observe(self, evidence: Evidence, text: str, errors: list[str]) -> Stuck | None:
        files_changed = bool(evidence.files and (evidence.files.files or evidence.files.commits))
        out = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
        self.history = (self.history + [[evidence.low, fingerprint(errors), out, files_changed,
                                         evidence.score]])[-_KEPT:]
        last = self.history[-self.n:]
        if len(last) < self.n:
            return None
        times = outcomes.plural(self.n, "iteration")
        if len({h[2] for h in last}) == 1 and not any(h[3] for h in last):
            return Stuck("identical_output", f"stuck: {times} in a row with identical output and no file "
                                             "changed (no claim verified)")
        if last[-1][1] is not None and len({h[1] for h in last}) == 1:
            first = " ".join(str(errors[0]).split())[:300]
            return Stuck("repeated_error", f"stuck: the same error in {times} in a row: {first}")
        if all(h[0] for h in last):
            scores = ", ".join(f"{h[4]:.2f}" for h in last)
            return Stuck("no_progress", f"stuck: {times} in a row under progress_threshold {self.threshold:g} "
                                        f"(scores {scores}; last: {evidence.describe()})")
        return None
