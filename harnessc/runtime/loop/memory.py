"""Memory across iterations of a loop task (what its next prompt is told about the past).

Per task: a rolling window of the last K iterations (output truncated), a running summary of
the older ones kept under `max_summary_tokens`, key decisions (`<decision>...</decision>`
markers) and failure memory (error fingerprints, how often, and what was tried). It is
plain data (`data()`), saved in state.db with every attempt, so a resumed run goes on with
the same memory; memory.md.j2 renders it after the task's prompt within `max_tokens`.

The summary is extractive: each iteration leaving the window becomes one line made of its
own words (markers, files, first error). With a `summary_agent` (plan.assists), the
iterations that left the window are also kept (`unsummarized`) until, every
`summarize_every` iterations, that agent rewrites the whole summary from the old one and
them (assist.py, between iterations: `summary_due`, then `rewrite_summary` or, when it
fails, `keep_extractive`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from ...estimates import estimate_tokens
from ...planfile import Plan
from .progress import Evidence, markers
from .stuck import fingerprint

DECISION = re.compile(r"<decision>\s*(.*?)\s*</decision>", re.S | re.I)
MAX_DECISIONS = 20
MAX_FAILURES = 10
LINE_CHARS = 200  # of one summary line, decision or error


@dataclass(frozen=True)
class Settings:
    raw_window_size: int = 3
    max_output_chars: int = 1500
    max_summary_tokens: int = 1000
    max_tokens: int = 3000
    summarize_every: int = 10
    agent_summary: bool = False  # a summary agent rewrites the summary (keep what left the window for it)

    @classmethod
    def of(cls, plan: Plan) -> "Settings":
        """harness.yaml `loop: context:` as the plan holds it (defaults for an older plan)."""
        cfg = (plan.loop or {}).get("context") or {}
        sizes = {k: int(cfg[k]) for k in ("raw_window_size", "max_output_chars", "max_summary_tokens", "max_tokens")
                 if cfg.get(k) is not None}
        assists = plan.assists
        if assists is None:
            return cls(**sizes)
        return cls(**sizes, summarize_every=max(1, assists.summarize_every), agent_summary=bool(assists.summary_agent))


def _clip(text: str, n: int = LINE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


class Summarizer(Protocol):
    def summarize(self, summary: list[str], leaving: list[dict]) -> list[str]: ...


class ExtractiveSummarizer:
    """One line per iteration, from what it printed and did."""

    def summarize(self, summary: list[str], leaving: list[dict]) -> list[str]:
        return summary + [self.line(entry) for entry in leaving]

    @staticmethod
    def line(e: dict) -> str:
        said = "; ".join(e.get("markers") or []) or (e.get("first_line") or "(no output)")
        parts = [f"iteration {e['n']} ({e.get('agent')}, progress {e.get('score', 0):.2f}): {said}"]
        if e.get("files"):
            parts.append(e["files"])
        if e.get("errors"):
            parts.append("error: " + e["errors"][0])
        return _clip("; ".join(parts), 2 * LINE_CHARS)


class Memory:
    def __init__(self, settings: Settings, data: dict | None = None, summarizer: Summarizer | None = None):
        self.settings = settings
        self.summarizer = summarizer or ExtractiveSummarizer()
        d = data or {}
        self.window: list[dict] = list(d.get("window") or [])
        self.summary: list[str] = list(d.get("summary") or [])
        self.omitted = int(d.get("omitted") or 0)  # summary lines dropped to stay under budget
        self.decisions: list[str] = list(d.get("decisions") or [])
        self.failures: list[dict] = list(d.get("failures") or [])
        self.unsummarized: list[dict] = list(d.get("unsummarized") or [])  # left the window since the agent's summary
        self.summary_by: dict | None = d.get("summary_by")  # {agent, iteration} of the agent's last summary

    def data(self) -> dict:
        return {"window": self.window, "summary": self.summary, "omitted": self.omitted,
                "decisions": self.decisions, "failures": self.failures,
                "unsummarized": self.unsummarized, "summary_by": self.summary_by}

    def __bool__(self) -> bool:
        return bool(self.window or self.summary or self.decisions or self.failures)

    def record(self, n: int, agent: str, text: str, evidence: Evidence, errors: list[str]) -> None:
        """Remember iteration `n` (its number across the task's runs)."""
        cut = self.settings.max_output_chars
        text = text.strip()
        output = text if len(text) <= cut else "...\n" + text[-cut:]  # the end says where it got to
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        entry = {"n": n, "agent": agent, "score": evidence.score, "output": output, "markers": markers(text)[-3:],
                 "first_line": _clip(first), "files": evidence.files.describe() if evidence.files else "",
                 "errors": [_clip(e) for e in errors[:2]]}
        self.window.append(entry)
        if len(self.window) > self.settings.raw_window_size:
            leaving = self.window[: len(self.window) - self.settings.raw_window_size]
            self.window = self.window[len(leaving):]
            self.summary = self.summarizer.summarize(self.summary, leaving)
            if self.settings.agent_summary:
                self.unsummarized = (self.unsummarized + leaving)[-self.settings.summarize_every:]
            while len(self.summary) > 1 and estimate_tokens("\n".join(self.summary)) > self.settings.max_summary_tokens:
                self.summary.pop(0)
                self.omitted += 1
        for d in DECISION.findall(text):
            d = _clip(d)
            if d and d not in self.decisions:
                self.decisions = (self.decisions + [d])[-MAX_DECISIONS:]
        if errors:
            self._remember_failure(n, errors, entry)

    def summary_due(self, n: int) -> bool:
        """Whether the summary agent should rewrite the summary now, after iteration `n`."""
        return bool(self.settings.agent_summary and self.unsummarized and n % self.settings.summarize_every == 0)

    def rewrite_summary(self, lines: list[str], n: int, agent: str) -> None:
        """The summary agent's summary replaces the summary (its lines are bounded by the caller)."""
        self.summary = [_clip(line, 2 * LINE_CHARS) for line in lines]
        self.unsummarized = []
        self.summary_by = {"agent": agent, "iteration": n}

    def keep_extractive(self) -> None:
        """The summary agent could not write: the extractive lines stand for what it was given."""
        self.unsummarized = []

    def _remember_failure(self, n: int, errors: list[str], entry: dict) -> None:
        fp = fingerprint(errors)
        tried = "; ".join(entry["markers"]) or entry["first_line"]
        for f in self.failures:
            if f["fingerprint"] == fp:
                f["count"] += 1
                f["iterations"] = (f["iterations"] + [n])[-5:]
                if tried and tried not in f["tried"]:
                    f["tried"] = (f["tried"] + [tried])[-3:]
                self.failures.remove(f)
                self.failures.append(f)  # most recent last
                return
        self.failures = (self.failures + [{"fingerprint": fp, "error": _clip(errors[0]), "count": 1,
                                           "iterations": [n], "tried": [tried] if tried else []}])[-MAX_FAILURES:]

    def view(self) -> dict[str, Any]:
        """What memory.md.j2 sees."""
        return {"window": [dict(e, score=f"{e.get('score', 0):.2f}") for e in self.window],
                "summary": list(self.summary), "omitted": self.omitted, "summary_by": self.summary_by,
                "decisions": list(self.decisions),
                "failures": [dict(f) for f in self.failures]}


def fit(view: dict[str, Any], render, max_tokens: int) -> str:
    """Render `view`, dropping its oldest parts until the memory section fits `max_tokens`:
    window entries first (their output, then the entry), then summary lines, failures and
    decisions. `render(view)` returns the memory section."""
    text = render(view)
    while estimate_tokens(text) > max_tokens:
        if any(e["output"] for e in view["window"][:-1]):
            next(e for e in view["window"] if e["output"])["output"] = ""
        elif len(view["window"]) > 1:
            view["window"].pop(0)
        elif view["window"] and len(view["window"][0]["output"]) > 200:
            output = view["window"][0]["output"]
            view["window"][0]["output"] = "...\n" + output[-(len(output) // 2):]  # keep its end
        elif view["summary"]:
            view["summary"].pop(0)
            view["omitted"] += 1
        elif len(view["failures"]) > 1:
            view["failures"].pop(0)
        elif len(view["decisions"]) > 1:
            view["decisions"].pop(0)
        else:
            break
        text = render(view)
    return text
