"""Progress from evidence: one score per iteration of a loop task.

A loop task (one with a completion_promise) iterates until it makes a verified claim; what
it did in an iteration is read from evidence, each signal 0..1, weighted by harness.yaml
`loop: progress: weights:` into a score:

- output: how different the output is from the previous iteration's;
- files: what changed in the project's files from the iteration's start to its end - files,
  lines added and removed, new files, new commits (runtime/loop/files.py takes the snapshots) -
  less what other tasks running at the same time changed (runtime/loop/attribution.py); an
  isolated task's (`isolation: worktree`), what changed in its own worktree, where it is alone
  (with `executor: ray`, in the change its call brings back: runtime/loop/returned.py);
- markers: a `<progress>...</progress>` the agent had not printed before;
- checklist: a `- [ ] item` of the task's goal reported done (`- [x] item`) for the first time;
- tests: accept commands passing more than before (more exit 0, or a higher "N passed").

Text alone is weak evidence on purpose: an agent whose words change while nothing else
does scores at most the output weight (0.1 by default, under the 0.15 threshold).
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ...planfile import Plan, PlanNode
from .attribution import Attribution, TaskFiles
from .files import FileChanges
from .returned import ReturnedChange

SIGNALS = ("output", "files", "markers", "checklist", "tests")
DEFAULT_WEIGHTS = {"output": 0.1, "files": 0.4, "markers": 0.2, "checklist": 0.15, "tests": 0.15}
DEFAULT_THRESHOLD = 0.15

MARKER = re.compile(r"<progress>\s*(.*?)\s*</progress>", re.S | re.I)
GOAL_ITEM = re.compile(r"^\s*[-*+]\s+\[ \]\s+(.+?)\s*$", re.M)
DONE_ITEM = re.compile(r"^\s*[-*+]\s+\[[xX]\]\s+(.+?)\s*$", re.M)
PASSED = re.compile(r"\b(\d+)\s+(?:passed|passing)\b", re.I)  # pytest, jest, cargo, mocha

COMPARED_CHARS = 4000  # of each output, for the difference: its head and tail
# An answer up to this long is read on the event loop's thread: handing it to a worker costs
# more than reading it, and the worst case of the regexes on it stays around 10 ms.
SMALL_TEXT = 2048
SHINGLE = 3  # characters per piece of the difference's multisets


def is_loop(node: PlanNode) -> bool:
    """A loop task iterates until it claims completion (its completion promise)."""
    return bool(node.completion_promise)


@dataclass(frozen=True)
class Settings:
    threshold: float = DEFAULT_THRESHOLD
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))

    @classmethod
    def of(cls, plan: Plan, node: PlanNode | None = None) -> "Settings":
        """harness.yaml `loop: progress:` as the plan holds it (defaults for an older plan),
        with the task's own `progress_threshold` over it."""
        cfg = ((plan.loop or {}).get("progress")) or {}
        weights = {**DEFAULT_WEIGHTS, **(cfg.get("weights") or {})}
        threshold = cfg.get("threshold", DEFAULT_THRESHOLD)
        if node is not None and node.loop is not None and node.loop.progress_threshold is not None:
            threshold = node.loop.progress_threshold
        return cls(float(threshold), {k: float(weights[k]) for k in SIGNALS})

    @property
    def scoring(self) -> bool:
        """False when every weight is 0: no score, so no iteration is "under the threshold"."""
        return sum(self.weights.values()) > 0

    def score(self, signals: dict[str, float]) -> float:
        total = sum(self.weights.values()) or 1.0
        return round(sum(self.weights[k] * signals.get(k, 0.0) for k in SIGNALS) / total, 4)


# ------------------------------------------------------------------ one signal each


def normalized(text: str) -> str:
    return " ".join(text.split()).lower()


def output_difference(previous: str | None, current: str) -> float:
    """0 for the same text (whitespace and case aside), up to 1 for a wholly different one.

    The texts are compared as multisets of 3-character pieces (Dice's coefficient), in time
    linear in their (capped) length: difflib's SequenceMatcher took minutes on repetitive
    outputs, with the event loop waiting."""
    if previous is None:
        return 1.0
    a, b = _compared(normalized(_ends(previous))), _compared(normalized(_ends(current)))
    if a == b:
        return 0.0
    pa, pb = shingles(a), shingles(b)
    total = sum(pa.values()) + sum(pb.values())
    if not total:
        return 1.0
    return round(1.0 - 2 * sum((pa & pb).values()) / total, 4)


def shingles(text: str) -> Counter:
    """The multiset of a text's overlapping SHINGLE-character pieces (the text itself when shorter)."""
    if len(text) <= SHINGLE:
        return Counter([text] if text else [])
    return Counter(zip(*[text[i:] for i in range(SHINGLE)]))  # counted in C: no Python step a piece


def _ends(text: str) -> str:
    """Twice the compared head and tail, before normalizing (which reads the whole text)."""
    return text if len(text) <= 2 * COMPARED_CHARS else text[:COMPARED_CHARS] + "\n" + text[-COMPARED_CHARS:]


def _compared(text: str) -> str:
    half = COMPARED_CHARS // 2
    return text if len(text) <= COMPARED_CHARS else text[:half] + text[-half:]


def markers(text: str) -> list[str]:
    """The `<progress>` markers of an output, in order."""
    return [" ".join(m.split()) for m in MARKER.findall(text) if m.strip()]


def checklist(goal: str) -> list[str]:
    """The `- [ ] item` lines of a task's goal."""
    return GOAL_ITEM.findall(goal or "")


def reported_done(items: list[str], text: str) -> list[str]:
    """The checklist items the output reports done with a `- [x] item` line."""
    done = {_item_key(d) for d in DONE_ITEM.findall(text)}
    return [i for i in items if _item_key(i) in done]


def _item_key(item: str) -> str:
    return re.sub(r"[^\w ]+", "", normalized(item)).strip()


def passed_count(text: str) -> int | None:
    """The largest "N passed" a test runner printed, or None."""
    counts = [int(n) for n in PASSED.findall(text or "")]
    return max(counts) if counts else None


@dataclass(frozen=True)
class TextSignals:
    """What one output says: its markers, the checklist items it reports done, and how it
    differs from the previous output (`compared`: the part of it the next one is compared with)."""

    markers: list[str]
    done: list[str]
    difference: float
    compared: str

    @classmethod
    def of(cls, text: str, items: list[str], previous: str | None) -> "TextSignals":
        return cls(markers(text), reported_done(items, text), output_difference(previous, text), _compared(text))


# ------------------------------------------------------------------ one task's meter


@dataclass
class Evidence:
    """One iteration's progress: the score and what it was made of (stored with the attempt)."""

    score: float
    signals: dict[str, float]
    files: FileChanges | None
    markers: list[str]  # new ones
    done: list[str]  # checklist items newly reported done
    passed: int | None
    low: bool  # under the threshold: no progress

    @property
    def progressed(self) -> bool:
        """Whether the iteration made progress: a score above 0 and not under the threshold
        (with every weight 0 nothing scores, so no iteration is judged either way)."""
        return self.score > 0 and not self.low

    def record(self) -> dict:
        return {"score": self.score, "signals": self.signals, "low": self.low, "progressed": self.progressed,
                "files": vars(self.files) if self.files else None, "markers": self.markers,
                "done": self.done, "passed": self.passed}

    def describe(self) -> str:
        """The evidence in a few words, for a stuck reason."""
        parts = [self.files.describe() if self.files else "files not checked"]
        parts.append(f"new marker '{self.markers[-1][:80]}'" if self.markers else "no new <progress> marker")
        if self.done:
            parts.append(f"{len(self.done)} checklist item(s) done")
        parts.append(f"output difference {self.signals.get('output', 0):.2f}")
        return ", ".join(parts)


class ProgressMeter:
    """Scores one loop task's iterations. What it has seen (markers, checklist items, the
    best test counts, the last output) is its `state()`, saved with the task's memory so a
    resumed run scores the next iteration against the same history."""

    def __init__(self, root: Path, node: PlanNode, settings: Settings, state_dir: Path,
                 state: dict | None = None, files: TaskFiles | None = None):
        """files: the task's side of the run's file ledger; None: a ledger of its own, its
        private git index in state_dir."""
        self.root, self.node, self.settings = root, node, settings
        self._own = None if files else Attribution(root, state_dir / f"{node.id}.index", [node])
        self.files = files or TaskFiles(self._own, node)
        self.items = checklist(node.goal)
        s = state or {}
        self.seen = set(s.get("markers") or ())
        self.done = set(s.get("done") or ())
        self.best_passed: int | None = s.get("best_passed")
        self.best_ok = int(s.get("best_ok") or 0)
        self.last_output: str | None = s.get("last_output")
        self.last_marker: str | None = s.get("last_marker")

    def state(self) -> dict:
        return {"markers": sorted(self.seen)[-200:], "done": sorted(self.done), "best_passed": self.best_passed,
                "best_ok": self.best_ok, "last_output": self.last_output, "last_marker": self.last_marker}

    def measure_in(self, root: Path, index: Path) -> None:
        """Measure the files under `root` from now on, the task alone there (an isolated
        task's worktree): a ledger of their own, `index` its private git index. Called again
        when the worktree is made afresh or harnessc changed its files: the evidence starts
        from them."""
        ledger = Attribution(root, index, [self.node])
        self.measure_with(TaskFiles(ledger, self.node), ledger)

    def measure_with(self, files: "TaskFiles | ReturnedChange", own: Attribution | None = None) -> None:
        """Measure through `files` from now on (returned.py: a change that comes back from
        elsewhere); `own`: their ledger, closed with the meter."""
        self.close()
        self.files, self._own = files, own

    async def begin(self) -> None:
        """Before the call: the files as they are (attribution.py decides when a snapshot is due)."""
        await self.files.begin()

    async def measure(self, text: str, checks: list[dict]) -> Evidence:
        """After the call and its verification: this iteration's evidence and score."""
        files = await self.files.measure(text)
        # the text's signals in a worker thread: an output may be megabytes
        read = (TextSignals.of(text, self.items, self.last_output) if len(text) <= SMALL_TEXT
                else await asyncio.to_thread(TextSignals.of, text, self.items, self.last_output))
        new_markers = [m for m in dict.fromkeys(read.markers) if m not in self.seen]
        if read.markers:
            self.last_marker = read.markers[-1]
        self.seen.update(new_markers)
        done = [i for i in read.done if i not in self.done]
        self.done.update(done)
        tests = 0.0
        ok = sum(1 for c in checks if c.get("returncode") == 0 and not c.get("timed_out"))
        passed = max((c["passed"] for c in checks if c.get("passed") is not None), default=None)
        if checks and ok > self.best_ok:
            tests, self.best_ok = 1.0, ok
        if passed is not None and (self.best_passed is None or passed > self.best_passed):
            if self.best_passed is not None or passed > 0:
                tests = 1.0
            self.best_passed = passed
        signals = {
            "output": read.difference,
            "files": files.score() if files else 0.0,
            "markers": 1.0 if new_markers else 0.0,
            "checklist": 1.0 if done else 0.0,
            "tests": tests,
        }
        self.last_output = read.compared
        score = self.settings.score(signals)
        low = self.settings.scoring and score < self.settings.threshold
        return Evidence(score, signals, files, new_markers, done, passed, low)

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None
