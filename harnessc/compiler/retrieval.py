"""Context by retrieval: the files a task's `context: auto` adds (build only, never lint).

The project is indexed once per build, on the first task that asks: every text file of the
project (git's list when it is a repository - tracked and untracked files, .gitignore
respected - else a walk; dot-directories, __pycache__, node_modules, site-packages left out),
without following a link, never a file over MAX_FILE_BYTES, never a binary one (a NUL byte,
or not UTF-8). Each file gives the words of its path, its definitions and the identifiers it
uses: for Python, def and class names and module-level names read line by line, and, for
the files a query names, the project modules they import read with `ast`; any other text
through a plain-text fallback (identifiers; names after def/class/function/fn/func/struct/
type/interface/enum/trait/const/let/var as its definitions).

A task's query is its title, goal, success, accept commands and contract output fields:
the files they name (`tests/test_x.py`, `pytest tests/x.py::test_y`) score most, then the
project modules those Python files import (the module under test), then files defining a
word of the query, having it in their path, or using it - each weighted by how rare the
word is in the project (idf). The best files go in, after the task's named files, whole,
while they fit the budget left (at most MAX_CHOSEN); plan.json records each one's score and
the words and paths that matched, so the choice can be read and a build is reproducible.
"""

from __future__ import annotations

import ast
import math
import os
import re
import stat
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ..estimates import tokens_for_chars
from ..vocab import SPEC_FILES

MAX_FILE_BYTES = 256 * 1024  # a larger file is neither indexed nor chosen
MAX_FILES = 50_000  # files indexed per build, at most (the first by path)
MAX_CHOSEN = 12  # files one task's `auto` adds, at most
MIN_SHARE = 0.3  # of the best file's score: a file scoring less is not chosen
MAX_RECORDED_WORDS = 8  # matched words recorded per chosen file
SNIFF = 8192  # bytes looked at for a NUL byte
# scores: a file the query names; one a named Python file imports (its score then doubled);
# per word of the query, times the word's idf: a file defining it, having it in its name,
# in a directory's name, using it
NAMED, IMPORTED, IMPORTED_FACTOR = 20.0, 4.0, 2.0
DEFINES, IN_NAME, IN_DIRECTORY, USES = 3.0, 3.0, 0.5, 0.3

# directories never indexed, wherever they are (besides every dot-directory)
SKIPPED_DIRS = frozenset(("__pycache__", "node_modules", "site-packages", "dist-packages"))

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_TEXT_DEF = re.compile(r"\b(?:def|class|function|fn|func|struct|type|interface|enum|trait|const|let|var)\s+"
                       r"([A-Za-z_][A-Za-z0-9_]{2,})")
_PATHLIKE = re.compile(r"(?:\./)?[\w\-]+(?:[./][\w\-]+)+")  # a/b.py, b.py, a.b.c (a module)
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")
STOPWORDS = frozenset("""
the and for with that this from into are was were will would should could can not but all any
have has had its use used using make makes made add adds added when then than them they their
there here what which who how why each every some more most other such only also very just
test tests testing pytest python run runs file files code line lines new one two may must
fix fixes fixed cover covers check checks pass passes passing work task tasks does done
""".split())


@dataclass(slots=True)
class Entry:
    """One indexed file."""

    path: str
    size: int
    words: frozenset[str]  # lowercased identifiers it uses
    defs: frozenset[str]  # lowercased names it defines


def split_words(identifier: str) -> list[str]:
    """'UpdateCacheMiddleware' -> ['update', 'cache', 'middleware']; 'test_slug_v2' ->
    ['test', 'slug', 'v2']."""
    return [p.lower() for part in identifier.split("_") for p in _CAMEL.findall(part)]


def path_words(path: str) -> frozenset[str]:
    """The words of a path's directories and name: 'tests/utils_tests/test_text.py' ->
    {tests, utils_tests, utils, test_text, test, text}."""
    out: set[str] = set()
    for part in path.lower().split("/"):
        stem = part.rsplit(".", 1)[0] if "." in part else part
        out.add(stem)
        out.update(w for w in re.split(r"[^a-z0-9]+", stem) if w)
    return frozenset(w for w in out if len(w) >= 2)


class Index:
    """Every indexable file of a project, read once (see the module's docstring)."""

    def __init__(self, root: Path | str):
        self.root = os.path.realpath(root)
        self.entries: dict[str, Entry] = {}
        self.skipped = {"binary": 0, "too large": 0, "link": 0, "unreadable": 0}
        self._paths: dict[str, frozenset[str]] = {}
        self._stems: dict[str, frozenset[str]] = {}
        self._imports: dict[str, list[str]] = {}
        self._dirs: dict[str, bool] = {}  # directory -> inside the project, no link on the way
        for rel in self._listing()[:MAX_FILES]:
            self._add(rel)
        n = max(len(self.entries), 1)
        self.n = n
        self.by_def: dict[str, list[str]] = {}
        uses: defaultdict[str, list[str]] = defaultdict(list)
        self.by_path: dict[str, list[str]] = {}
        for rel, e in self.entries.items():  # sorted by path: every list is too
            for w in e.defs:
                self.by_def.setdefault(w, []).append(rel)
            for w in self._paths[rel]:
                self.by_path.setdefault(w, []).append(rel)
            for w in e.words:
                uses[w].append(rel)
        self.by_word = dict(uses)
        # dotted module name -> its file, from each directory that could be on sys.path (the
        # top, or one that is no package): `json` is never django/core/serializers/json.py
        packages = {os.path.dirname(p) for p in self.entries if p.endswith("__init__.py")}
        self.modules: dict[str, str] = {}
        for rel in sorted(self.entries, key=lambda p: (p.count("/"), p)):  # shallower wins
            if rel.endswith(".py"):
                dirs = rel.split("/")[:-1]
                parts = rel[:-3].split("/")
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                for i in range(len(parts)):
                    if i == 0 or "/".join(dirs[:i]) not in packages:
                        self.modules.setdefault(".".join(parts[i:]), rel)

    # ------------------------------------------------------------ reading the project

    def _listing(self) -> list[str]:
        """Project-relative paths of candidate files, sorted: git's list (.gitignore
        respected) in a repository, else a walk; dot-directories and SKIPPED_DIRS left out."""
        files = self._git_listing()
        if files is None:
            files = []
            for top, dirs, names in os.walk(self.root):  # never follows a directory link
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
                rel_top = os.path.relpath(top, self.root)
                files += [n if rel_top == "." else f"{rel_top}/{n}".replace(os.sep, "/") for n in sorted(names)]
                if len(files) > 2 * MAX_FILES:  # a home directory: the walk (in name order) stops
                    break
        out = []
        for rel in files:
            parts = rel.split("/")
            if any(p.startswith(".") or p in SKIPPED_DIRS or p == ".." for p in parts) or rel in SPEC_FILES:
                continue
            out.append(rel)
        return sorted(set(out))

    def _git_listing(self) -> list[str] | None:
        from .. import gitcmd

        try:  # in a subdirectory of a work tree git lists the files below it, relative to it
            out = gitcmd.Git(Path(self.root)).run("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        except (gitcmd.GitFailed, OSError):
            return None
        return [p for p in out.split("\0") if p]

    def _inside(self, rel: str) -> bool:
        """Whether rel's directory is really inside the project (no directory link on the way)."""
        parent = os.path.dirname(rel)
        if not parent:
            return True
        if parent not in self._dirs:
            real = os.path.realpath(os.path.join(self.root, parent))
            self._dirs[parent] = real == os.path.join(self.root, parent) and real.startswith(self.root + os.sep)
        return self._dirs[parent]

    def _add(self, rel: str) -> None:
        full = os.path.join(self.root, rel)
        try:
            st = os.lstat(full)
        except OSError:
            self.skipped["unreadable"] += 1
            return
        if stat.S_ISLNK(st.st_mode) or not self._inside(rel):
            self.skipped["link"] += 1
            return
        if not stat.S_ISREG(st.st_mode):
            return
        if st.st_size > MAX_FILE_BYTES:
            self.skipped["too large"] += 1
            return
        try:
            fd = os.open(full, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError:
            self.skipped["unreadable"] += 1
            return
        if len(data) > MAX_FILE_BYTES:
            self.skipped["too large"] += 1
            return
        if b"\0" in data[:SNIFF]:
            self.skipped["binary"] += 1
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self.skipped["binary"] += 1
            return
        low = text.lower()  # once: every word is compared lowercased
        if rel.endswith(".py"):
            entry = _python(rel, low, len(data))
        else:
            entry = Entry(rel, len(data), frozenset(_IDENT.findall(low)), frozenset(_TEXT_DEF.findall(low)))
        self.entries[rel] = entry
        self._paths[rel] = path_words(rel)
        parts = rel.split("/")  # a package's __init__.py is named by its directory
        self._stems[rel] = path_words(parts[-2] if parts[-1] == "__init__.py" and len(parts) > 1 else parts[-1])

    # ------------------------------------------------------------ a task's query

    def module_file(self, dotted: str) -> str | None:
        return self.modules.get(dotted)

    def imported_files(self, rel: str) -> list[str]:
        """The project files a Python file imports (resolved by module name), in order;
        read with `ast` once per build."""
        if rel in self._imports:
            return self._imports[rel]
        names: tuple[str, ...] = ()
        if rel.endswith(".py") and rel in self.entries:
            try:
                fd = os.open(os.path.join(self.root, rel), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                with os.fdopen(fd, "rb") as f:
                    names = python_imports(rel, f.read(MAX_FILE_BYTES).decode("utf-8", "replace"))
            except OSError:
                pass
        out: list[str] = []
        self._imports[rel] = out
        for name in names:
            found = self.module_file(name)
            if found and found != rel and found not in out:
                out.append(found)
        return out

    def named_files(self, text: str) -> list[str]:
        """The indexed files a text names by path: exactly, or by a tail naming one file."""
        out: list[str] = []
        for m in _PATHLIKE.finditer(text):
            word = m.group(0).split("::")[0].rstrip(".")
            word = word.removeprefix("./")
            if not word or word in out:
                continue
            found = word if word in self.entries else self.modules.get(word) if "." in word else None
            if found:  # a path, or a dotted module name (django.utils.text)
                if found not in out:
                    out.append(found)
                continue
            if "/" not in word and "." not in word:
                continue
            tails = [p for p in self._tail_candidates(word)]
            if len(tails) == 1 and tails[0] not in out:
                out.append(tails[0])
        return out

    def _tail_candidates(self, word: str) -> list[str]:
        name = word.rsplit("/", 1)[-1]
        stem = name.rsplit(".", 1)[0].lower()
        return [p for p in self.by_path.get(stem, ()) if p == word or p.endswith("/" + word)][:2]

    def rank(self, text: str, exclude: set[str]) -> tuple[list[tuple[float, str, list[str]]], list[str], list[str]]:
        """(every file related to `text` as (score, path, what matched), best first; the
        files `text` names; the query's words)."""
        scores: dict[str, float] = {}
        why: dict[str, list[str]] = {}

        def add(path: str, score: float, reason: str) -> None:
            scores[path] = scores.get(path, 0.0) + score
            reasons = why.setdefault(path, [])
            if reason not in reasons:
                reasons.append(reason)

        named = self.named_files(text)
        imported: dict[str, str] = {}  # file -> the named file importing it
        for path in named:
            add(path, NAMED, path)
            for dep in self.imported_files(path):
                imported.setdefault(dep, path)
        words = query_words(text, named)
        common = self.n // 4 + 5  # a word more files than this define or name says nothing
        for w in words:
            defs, paths, uses = self.by_def.get(w, ()), self.by_path.get(w, ()), self.by_word.get(w, ())
            if defs and len(defs) <= common:
                idf = math.log(1 + self.n / len(defs))
                for p in defs:
                    add(p, DEFINES * idf, w)
            if paths and len(paths) <= common:
                idf = math.log(1 + self.n / len(paths))
                for p in paths:
                    add(p, (IN_NAME if w in self._stems[p] else IN_DIRECTORY) * idf, w)
            if uses and len(uses) <= self.n // 20 + 5:
                idf = math.log(1 + self.n / len(uses))
                for p in uses:
                    add(p, USES * idf, w)
        for dep, by in imported.items():  # what a named test imports is what it tests
            add(dep, IMPORTED, f"imported by {by}")
            scores[dep] *= IMPORTED_FACTOR
        ranked = sorted(((round(s, 3), p) for p, s in scores.items() if p not in exclude),
                        key=lambda sp: (-sp[0], sp[1]))
        return [(s, p, why[p]) for s, p in ranked], named, words


def query_words(text: str, named: list[str] = ()) -> list[str]:
    """The words of a query, lowercased, in first-seen order: each identifier and its parts
    (the paths it names count by their words too), common English and test words left out."""
    out: dict[str, None] = {}
    for ident in _IDENT.findall(text):
        for w in (ident.lower(), *split_words(ident)):
            if len(w) >= 3 and w not in STOPWORDS and not w.isdigit():
                out.setdefault(w)
    for path in named:
        for w in sorted(path_words(path)):
            if len(w) >= 3 and w not in STOPWORDS:
                out.setdefault(w)
    return list(out)


_PY_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)"
                     r"|^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)", re.MULTILINE)


def _python(rel: str, text: str, size: int) -> Entry:
    """A Python file's entry (`text` lowercased): its definitions (def and class at any depth, module-level
    names) read line by line - `ast` for each of a project's files made Django's index three
    times slower (bench/README.md, retrieval.py) - and its imports left to
    `python_imports`, read with `ast` for the files a query names."""
    defs = frozenset(n for pair in _PY_DEF.findall(text) for n in pair if len(n) >= 3)
    return Entry(rel, size, frozenset(_IDENT.findall(text)), defs)


def python_imports(rel: str, text: str) -> tuple[str, ...]:
    """The dotted module names a Python file imports, relative imports made absolute from
    its package (`from .b import c` in a/x.py: a.b.c, a.b); () when it does not parse."""
    try:
        tree = ast.parse(text, filename=rel)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    package = rel.split("/")[:-1]  # the package its relative imports start from
    imports: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
                base = ".".join([*up, *([base] if base else [])])
            imports += [f"{base}.{a.name}" if base else a.name for a in node.names if a.name != "*"]
            if base:
                imports.append(base)
    return tuple(dict.fromkeys(imports))


@dataclass(slots=True)
class Choice:
    path: str
    tokens: int
    score: float
    matched: list[str]


def choose(index: Index, text: str, budget: int, exclude: set[str]) -> tuple[list[Choice], list[str]]:
    """(the files `auto` adds within `budget` tokens, best first; the query's words)."""
    ranked, named, words = index.rank(text, exclude)
    chosen: list[Choice] = []
    left = budget
    # the bar: a share of the best file the query does not name (a named file always goes in)
    best = next((score for score, path, _ in ranked if path not in named), 0.0)
    for score, path, matched in ranked:
        if len(chosen) >= MAX_CHOSEN or left <= 0 or (score < best * MIN_SHARE and path not in named):
            continue
        tokens = tokens_for_chars(index.entries[path].size)
        if tokens > left:
            continue  # never cut: a smaller, less related file may still fit
        left -= tokens
        chosen.append(Choice(path, tokens, score, matched[:MAX_RECORDED_WORDS]))
    return chosen, words
