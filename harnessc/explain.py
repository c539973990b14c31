"""`harnessc explain CODE`: what a diagnostic code means, a minimal example and the fix.

The texts are data (harnessc/explain.yaml, shipped with the package); this module reads
and formats them. It imports no SDK and nothing of the compiler.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from functools import lru_cache

from .diagnostics import CODES
from .package_data import read_text


@dataclass(frozen=True)
class Explanation:
    code: str
    title: str
    meaning: str
    fix: str
    example: dict[str, str] = field(default_factory=dict)  # file name -> text showing the problem
    fixed: dict[str, str] = field(default_factory=dict)  # the files changed by the fix
    checked: bool = True  # the example is linted by the tests

    def text(self) -> str:
        """The explanation as the terminal shows it."""
        out = [f"{self.code}: {self.title}", "", *_wrap(self.meaning), ""]
        if self.example:
            out += ["Example:", *_files(self.example), ""]
        out += ["Fix:", *_wrap(self.fix)]
        if self.fixed:
            out += ["", "Fixed:", *_files(self.fixed)]
        return "\n".join(out) + "\n"

    def to_json(self) -> dict:
        return {"code": self.code, "title": self.title, "meaning": self.meaning, "example": self.example,
                "fix": self.fix, "fixed": self.fixed}


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, 88, break_on_hyphens=False, break_long_words=False)


def _files(files: dict[str, str]) -> list[str]:
    out = []
    for name, text in files.items():
        out.append(f"  {name}:")
        out += [f"    {line}" if line else "" for line in text.rstrip("\n").split("\n")]
    return out


@lru_cache(maxsize=1)
def explanations() -> dict[str, Explanation]:
    """Every code's explanation, in code order."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(read_text("explain.yaml"), Loader=loader)  # our own file: safe loader all the same
    return {code: Explanation(code=code, title=CODES.get(code, ""), meaning=e["meaning"].strip(),
                              fix=e["fix"].strip(), example=e.get("example") or {}, fixed=e.get("fixed") or {},
                              checked=e.get("checked", True))
            for code, e in sorted(data.items())}


def lookup(code: str) -> Explanation | None:
    """The explanation of `code` (any case; `410` means HC410), or None."""
    code = code.strip().upper()
    if code.isdigit():
        code = "HC" + code
    return explanations().get(code)
