"""Progress from evidence: one score per iteration of a loop task.

A loop task (one with a completion_promise) iterates until it makes a verified claim; what
it did in an iteration is read from evidence, each signal 0..1, weighted by harness.yaml
`loop: progress: weights:` into a score:

- output: how different the output is from the previous iteration's;
- files: what changed in the project since the iteration began - in a git repository, two
  snapshots of the working tree (`git add -A` into a private index, `git write-tree`)
  compared as trees: files, lines added and removed, new files, new commits; elsewhere,
  content hashes of the task's context files (or the project's files);
- markers: a `<progress>...</progress>` the agent had not printed before;
- checklist: a `- [ ] item` of the task's goal reported done (`- [x] item`) for the first time;
- tests: accept commands passing more than before (more exit 0, or a higher "N passed").

Text alone is weak evidence on purpose: an agent whose words change while nothing else
does scores at most the output weight (0.1 by default, under the 0.15 threshold).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from ..planfile import Plan, PlanNode

SIGNALS = ("output", "files", "markers", "checklist", "tests")
DEFAULT_WEIGHTS = {"output": 0.1, "files": 0.4, "markers": 0.2, "checklist": 0.15, "tests": 0.15}
DEFAULT_THRESHOLD = 0.15

MARKER = re.compile(r"<progress>\s*(.*?)\s*</progress>", re.S | re.I)
GOAL_ITEM = re.compile(r"^\s*[-*+]\s+\[ \]\s+(.+?)\s*$", re.M)
DONE_ITEM = re.compile(r"^\s*[-*+]\s+\[[xX]\]\s+(.+?)\s*$", re.M)
PASSED = re.compile(r"\b(\d+)\s+(?:passed|passing)\b", re.I)  # pytest, jest, cargo, mocha

COMPARED_CHARS = 4000  # of each output, for the difference (SequenceMatcher is quadratic)
GIT_TIMEOUT = 30.0  # seconds for one git command
# Never evidence: harnessc's own directory and what test runners leave behind.
EXCLUDED = (".harness", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules", ".venv")
MAX_HASHED_FILES = 5000  # outside git: files hashed per snapshot, at most


def is_loop(node: PlanNode) -> bool:
    """A loop task iterates until it claims completion (its completion promise)."""
    return bool(node.completion_promise)


@dataclass(frozen=True)
class Settings:
    threshold: float = DEFAULT_THRESHOLD
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))

    @classmethod
    def of(cls, plan: Plan) -> "Settings":
        """harness.yaml `loop: progress:` as the plan holds it (defaults for an older plan)."""
        cfg = ((plan.loop or {}).get("progress")) or {}
        weights = {**DEFAULT_WEIGHTS, **(cfg.get("weights") or {})}
        return cls(float(cfg.get("threshold", DEFAULT_THRESHOLD)), {k: float(weights[k]) for k in SIGNALS})

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
    """0 for the same text (whitespace and case aside), up to 1 for a wholly different one."""
    if previous is None:
        return 1.0
    a, b = _compared(normalized(previous)), _compared(normalized(current))
    if a == b:
        return 0.0
    return round(1.0 - SequenceMatcher(None, a, b, autojunk=False).ratio(), 4)


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


# ------------------------------------------------------------------ file evidence


@dataclass
class FileChanges:
    """What changed in the project's files between two snapshots."""

    source: str  # git | hashes
    files: int = 0
    added: int = 0  # lines (git only)
    removed: int = 0
    new: int = 0  # files that did not exist before (untracked ones included)
    commits: int = 0
    paths: list[str] = field(default_factory=list)  # the first few

    def score(self) -> float:
        """0 when nothing changed; a change is worth 0.5, more lines and commits up to 1."""
        if not self.files and not self.commits:
            return 0.0
        lines = self.added + self.removed if self.source == "git" else 10 * self.files
        return round(min(1.0, 0.5 + lines / 100 + 0.25 * self.commits), 4)

    def describe(self) -> str:
        if not self.files and not self.commits:
            return "no file changed"
        parts = [f"{self.files} file(s) changed"]
        if self.source == "git":
            parts.append(f"+{self.added} -{self.removed} lines")
        if self.new:
            parts.append(f"{self.new} new")
        if self.commits:
            parts.append(f"{self.commits} commit(s)")
        return ", ".join(parts)


class GitFiles:
    """Snapshots of the working tree as git trees, written through a private index so the
    user's index, refs and files are never touched (only objects are added, which git's gc
    prunes once unreachable). Untracked, not ignored files are part of the snapshot."""

    source = "git"

    def __init__(self, repo: Any, root: Path, index: Path):
        self.repo, self.root, self.index = repo, root, index
        self.env = {"GIT_INDEX_FILE": str(index)}
        # git runs at the repository's top: the project may be a directory inside it
        top = Path(repo.working_tree_dir).resolve()
        project = os.path.relpath(Path(root).resolve(), top)
        self.pathspec = ["--", project] + [f":(exclude,glob)**/{name}/**" for name in EXCLUDED]

    def _git(self, *args: str) -> str:
        return self.repo.git.execute(["git", *args], env=self.env, kill_after_timeout=GIT_TIMEOUT,
                                     with_extended_output=False, strip_newline_in_stdout=True)

    def snapshot(self) -> tuple[str, str | None]:
        """(tree of the project's files now, HEAD's commit or None)."""
        from git.exc import GitCommandError
        from git.refs.symbolic import SymbolicReference

        if not os.path.lexists(self.index):
            real = Path(self.repo.git_dir) / "index"
            if real.is_file():  # its stat data spares hashing every file the first time
                fd = os.open(self.index, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(real.read_bytes())
        try:
            self._git("add", "-A", "--ignore-errors", *self.pathspec)
        except GitCommandError:  # a file it could not read: the others are in the index all the same
            pass
        tree = self._git("write-tree")
        try:  # read from the refs, without a git process
            head = SymbolicReference.dereference_recursive(self.repo, "HEAD")
        except (ValueError, OSError):  # no commit yet
            head = None
        return tree, head or None

    def changes(self, before: tuple[str, str | None], after: tuple[str, str | None]) -> FileChanges:
        out = FileChanges(self.source)
        if before[0] != after[0]:
            # --raw lines (":old-mode new-mode old new STATUS\tpath") then --numstat lines
            diff = self._git("diff", "--raw", "--numstat", "--no-renames", before[0], after[0])
            for line in diff.splitlines():
                if line.startswith(":"):
                    out.new += line.split("\t", 1)[0].endswith(" A")
                    continue
                added, removed, path = line.split("\t", 2)
                out.files += 1
                out.added += int(added) if added.isdigit() else 0  # "-": a binary file
                out.removed += int(removed) if removed.isdigit() else 0
                if len(out.paths) < 10:
                    out.paths.append(path)
        if after[1] and after[1] != before[1]:
            span = f"{before[1]}..{after[1]}" if before[1] else after[1]
            out.commits = int(self._git("rev-list", "--count", span) or 0)
        return out

    def close(self) -> None:
        self.repo.close()


class HashedFiles:
    """Snapshots as content hashes of the task's context files, or of the project's files
    (harnessc's own directory, dot-directories and caches aside), for a project outside git.
    A file is hashed again only when its size or modification time changed."""

    source = "hashes"

    def __init__(self, root: Path, paths: list[str]):
        self.root, self.paths = root, paths
        self._cache: dict[str, tuple[int, int, str]] = {}

    def _files(self):
        if self.paths:
            for rel in self.paths:
                yield rel
            return
        n = 0
        for top, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in EXCLUDED)
            for name in sorted(files):
                n += 1
                if n > MAX_HASHED_FILES:
                    return
                yield os.path.relpath(os.path.join(top, name), self.root)

    def snapshot(self) -> dict[str, str]:
        out = {}
        for rel in self._files():
            path = self.root / rel
            try:
                st = os.stat(path, follow_symlinks=False)
                cached = self._cache.get(rel)
                if cached and cached[:2] == (st.st_size, st.st_mtime_ns):
                    out[rel] = cached[2]
                    continue
                digest = hashlib.sha256(path.read_bytes()).hexdigest() if os.path.isfile(path) else ""
            except OSError:
                continue
            self._cache[rel] = (st.st_size, st.st_mtime_ns, digest)
            out[rel] = digest
        return out

    def changes(self, before: dict[str, str], after: dict[str, str]) -> FileChanges:
        changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
        return FileChanges(self.source, files=len(changed), new=sum(p not in before for p in changed),
                           paths=changed[:10])

    def close(self) -> None:
        pass


def file_watcher(root: Path, node: PlanNode, state_dir: Path) -> GitFiles | HashedFiles:
    """GitFiles when the project is in a git repository (and git runs), else HashedFiles.
    gitpython is imported here, by the first loop task of a run, never by lint or build."""
    try:
        import git  # noqa: F401  (raises ImportError when no git executable is found)
        from git import Repo
        from git.exc import GitError

        repo = Repo(root, search_parent_directories=True)
        if repo.bare:
            raise GitError("bare repository")
    except Exception:  # not a repository, no git: hash the files instead
        return HashedFiles(root, list(node.context or ()))
    return GitFiles(repo, root, state_dir / f"{node.id}.index")


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

    def record(self) -> dict:
        return {"score": self.score, "signals": self.signals, "low": self.low,
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
                 state: dict | None = None):
        """state_dir: an existing directory for the task's private git index."""
        self.root, self.node, self.settings, self.state_dir = root, node, settings, state_dir
        self.items = checklist(node.goal)
        s = state or {}
        self.seen = set(s.get("markers") or ())
        self.done = set(s.get("done") or ())
        self.best_passed: int | None = s.get("best_passed")
        self.best_ok = int(s.get("best_ok") or 0)
        self.last_output: str | None = s.get("last_output")
        self.last_marker: str | None = s.get("last_marker")
        self.watcher: GitFiles | HashedFiles | None = None
        self.before: Any = None

    def state(self) -> dict:
        return {"markers": sorted(self.seen)[-200:], "done": sorted(self.done), "best_passed": self.best_passed,
                "best_ok": self.best_ok, "last_output": self.last_output, "last_marker": self.last_marker}

    async def begin(self) -> None:
        """Before the call: the files as they are (the last iteration's end when there was one)."""
        if self.watcher is None:
            self.watcher = await asyncio.to_thread(file_watcher, self.root, self.node, self.state_dir)
        if self.before is None:
            self.before = await self._snapshot()

    async def measure(self, text: str, checks: list[dict]) -> Evidence:
        """After the call and its verification: this iteration's evidence and score."""
        files = None
        after = await self._snapshot()
        if after is not None and self.before is not None:
            try:
                files = await asyncio.to_thread(self.watcher.changes, self.before, after)
            except Exception:
                files = None
        self.before = after
        new_markers = [m for m in dict.fromkeys(markers(text)) if m not in self.seen]
        all_markers = markers(text)
        if all_markers:
            self.last_marker = all_markers[-1]
        self.seen.update(new_markers)
        done = [i for i in reported_done(self.items, text) if i not in self.done]
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
            "output": output_difference(self.last_output, text),
            "files": files.score() if files else 0.0,
            "markers": 1.0 if new_markers else 0.0,
            "checklist": 1.0 if done else 0.0,
            "tests": tests,
        }
        self.last_output = _compared(text)
        score = self.settings.score(signals)
        low = self.settings.scoring and score < self.settings.threshold
        return Evidence(score, signals, files, new_markers, done, passed, low)

    async def _snapshot(self) -> Any:
        try:
            return await asyncio.to_thread(self.watcher.snapshot)
        except Exception:  # a git failure is missing evidence, not the task's failure
            return None

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
