"""A draft agent's answer read as text, never run: the ```markdown roadmap.md block and the
```yaml contracts.yaml block.

The answer is hostile text (it comes from a model, or from whatever a command agent
printed): it is only split into lines and matched against fences, nothing in it is
evaluated, its YAML is parsed later by the compiler's safe loader, and its size is bounded
(the whole answer, and each block); control characters in it are written as `log` shows
them (^[), never kept to be obeyed by the terminal a person reviews the draft in. Fences follow CommonMark: a block opened with N
backticks (or tildes) is closed by a line of at least N of the same character, so a roadmap
holding a ``` block of its own can be sent inside a ```` block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..textsafe import visible
from ..vocab import CONTRACTS, ROADMAP

MAX_ANSWER_CHARS = 2_000_000  # an answer larger than this is not a draft to read
MAX_BLOCK_CHARS = 1_000_000  # each file of a draft (harness.yaml and contracts.yaml's own limit is 1 MB)

_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")  # matched from a line's start; the rest is the info
_ROADMAP_WORDS = {"roadmap.md", "roadmap"}
_CONTRACTS_WORDS = {"contracts.yaml", "contracts.yml", "contracts"}
_MARKDOWN = {"markdown", "md"}
_YAML = {"yaml", "yml"}


class Unusable(ValueError):
    """The answer holds no draft to lint: a one-line reason, which the next round is told."""


@dataclass(frozen=True)
class Draft:
    roadmap: str
    contracts: str  # "" when the answer gave none (the draft then needs no contract of its own)

    def texts(self) -> dict[str, str]:
        return {ROADMAP: self.roadmap, CONTRACTS: self.contracts}


@dataclass(frozen=True)
class Block:
    info: str  # the opening fence's words, lower case
    text: str
    closed: bool

    def words(self) -> set[str]:
        return set(re.split(r"[\s,{}=:\"']+", self.info)) - {""}


def blocks(text: str) -> list[Block]:
    """The fenced blocks at the answer's top level, in order (a block left open at the end
    runs to the end, and says so)."""
    found: list[Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if m is None or (m.group(1)[0] == "`" and "`" in m.group(2)):  # `` ```x` `` is inline code
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip().lower()
        close = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
        body: list[str] = []
        i += 1
        while i < len(lines) and not close.fullmatch(lines[i]):
            body.append(lines[i])
            i += 1
        found.append(Block(info, "\n".join(body), closed=i < len(lines)))
        i += 1
    return found


def read_answer(text: str) -> Draft:
    """The draft in an agent's answer, or Unusable saying what is missing."""
    if len(text) > MAX_ANSWER_CHARS:
        raise Unusable(f"the answer is {len(text):,} characters, over the {MAX_ANSWER_CHARS:,}-character limit")
    text = text.replace("\r\n", "\n")
    found = blocks(text)
    if not found:
        raise Unusable("the answer holds no fenced block: send roadmap.md in a ```markdown roadmap.md block")
    roadmap = _pick(found, _ROADMAP_WORDS, _MARKDOWN, lambda b: "## Tasks" in b.text)
    if roadmap is None:
        raise Unusable("the answer holds no ```markdown roadmap.md block (a Markdown block with a `## Tasks` section)")
    contracts = _pick([b for b in found if b is not roadmap], _CONTRACTS_WORDS, _YAML,
                      lambda b: b.text.lstrip().startswith("contracts:"))
    for name, block in ((ROADMAP, roadmap), (CONTRACTS, contracts)):
        if block is None:
            continue
        if not block.closed:
            raise Unusable(f"the {name} block is not closed (an answer cut short?): end it with its fence")
        if len(block.text) > MAX_BLOCK_CHARS:
            raise Unusable(f"{name} is {len(block.text):,} characters, over the {MAX_BLOCK_CHARS:,}-character limit")
    if not roadmap.text.strip():
        raise Unusable("the roadmap.md block is empty")
    # control characters shown, not kept: the draft is read in a terminal before it is used
    return Draft(visible(_ended(roadmap.text)), visible(_ended(contracts.text)) if contracts is not None else "")


def _pick(found: list[Block], names: set[str], languages: set[str], looks_like) -> Block | None:
    """The block named as the file (```markdown roadmap.md), else the only block of that
    language that looks like one, else the first block that looks like one."""
    named = [b for b in found if b.words() & names]
    if named:
        return named[0]
    typed = [b for b in found if b.words() & languages and looks_like(b)]
    if typed:
        return typed[0]
    return next((b for b in found if looks_like(b)), None)


def _ended(text: str) -> str:
    return text.strip("\n") + "\n" if text.strip() else ""
