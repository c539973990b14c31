"""How many tests passed, as a test runner's own summary says (`min_passed:`).

Pure: text (or a JUnit XML file) in, a count or None out; never raises on any text.

The output comes from the agent's checkout, so it is hostile: huge, coloured, and a test
may print a summary line of its own. The runner prints its summary last, so the LAST
summary line of the output wins (a fake line printed by a test comes before the runner's
own). Runners that print one summary per test binary or package (cargo test, go test -v)
are added up over the output. Recognised:

- pytest: `===== 5 passed, 1 failed in 0.30s =====`, `-q`: `5 passed, 1 failed in 0.30s`
  (xdist prints the same line); `no tests ran in 0.01s` is 0;
- unittest: `Ran 5 tests in 0.001s` then `OK` / `OK (skipped=1)` / `FAILED (failures=1)`:
  run minus failures, errors, skipped, expected failures and unexpected successes;
- go test -v: `--- PASS: TestX` lines, counted at each `ok  pkg` / `FAIL pkg` line; go test
  -json: its `"Action":"pass"` events of a test. Without -v or -json go prints no count
  (`ok pkg 0.01s` says nothing of how many), so it is not read;
- cargo test: `test result: ok. 5 passed; 0 failed; ...` (one per test binary, added up);
- jest: `Tests:       1 failed, 5 passed, 6 total`; vitest: `Tests  1 failed | 4 passed (5)`;
- node --test: TAP `# pass 5`, the spec reporter's `ℹ pass 5`; mocha: `5 passing (10ms)`.

Every line is read with string operations and short anchored patterns: linear time.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

MAX_TEXT = 8 << 20  # characters read of an output (its end: the summary is last)
MAX_LINE = 4096  # characters of a line looked at (a summary line is short)
MAX_JUNIT = 64 << 20  # bytes of a JUnit XML file read

_ANSI = re.compile(r"\x1b\[[0-9;?]{0,64}[ -/]{0,8}[@-~]|\x1b[@-_]")  # colours, cursor moves
_COUNT = re.compile(r"(\d{1,12}) ([a-z]+(?: [a-z]+)?)")  # `5 passed`, `1 expected failures`
_SECONDS = re.compile(r"\d+(?:\.\d+)?s\b")
_UNITTEST_RAN = re.compile(r"Ran (\d{1,12}) tests? in ")
_UNITTEST_PART = re.compile(r"([a-z ]+)=(\d{1,12})")
_GO_PACKAGE = re.compile(r"(?:ok|FAIL)\s+\S+\s+(?:\d+(?:\.\d+)?s|\(cached\))")
_CARGO = re.compile(r"test result: (?:ok|FAILED)\. (\d{1,12}) passed;")
_VITEST_END = re.compile(r"\((\d{1,12})\)")
_TAP = re.compile(r"(?:#|ℹ) pass (\d{1,12})")
_MOCHA = re.compile(r"(\d{1,12}) passing \(\S+\)")


def passed(text: str) -> int | None:
    """Passing tests by the last runner summary in `text`; None when no summary is recognised."""
    if not isinstance(text, str) or not text:
        return None
    text = text[-MAX_TEXT:]
    found: int | None = None
    ran: int | None = None  # unittest: the `Ran N tests` line just read, waiting for OK/FAILED
    ran_age = 0
    go = cargo = 0
    for raw in text.splitlines():
        line = _ANSI.sub("", raw[-MAX_LINE:]).strip()
        if not line:
            continue
        if ran is not None:  # unittest's verdict follows its `Ran` line (a rule and a blank line)
            verdict = _unittest_verdict(line, ran)
            if verdict is not None:
                found, ran = verdict, None
                continue
            ran_age += 1
            if ran_age > 2:
                ran = None
        m = _UNITTEST_RAN.match(line)
        if m:
            ran, ran_age = int(m.group(1)), 0
            continue
        if line.startswith("--- PASS: "):
            go += 1
            continue
        if line.startswith("{") and '"Action":"' in line:  # go test -json: one event a line
            if '"Action":"pass"' in line and '"Test":"' in line:
                go += 1
            elif go and ('"Action":"pass"' in line or '"Action":"fail"' in line):  # the package's end
                found = go
            continue
        if _GO_PACKAGE.match(line):
            if go:  # only with -v: the PASS lines are the count
                found = go
            continue
        m = _CARGO.match(line)
        if m:
            cargo += int(m.group(1))
            found = cargo
            continue
        count = _pytest(line)
        if count is None:
            count = _jest(line)
        if count is None:
            count = _vitest(line)
        if count is None:
            m = _TAP.fullmatch(line) or _MOCHA.fullmatch(line)
            count = int(m.group(1)) if m else None
        if count is not None:
            found = count
    return found


def _counts(parts: list[str]) -> dict[str, int] | None:
    """`["5 passed", "1 failed"]` -> {"passed": 5, "failed": 1}; None unless every part is one."""
    out: dict[str, int] = {}
    for part in parts:
        m = _COUNT.fullmatch(part.strip())
        if m is None:
            return None
        out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(1))
    return out


def _pytest(line: str) -> int | None:
    """pytest's last line, with or without its `=` rule: `5 passed, 1 failed in 0.30s`."""
    body = line.strip("= ")
    if body.startswith("no tests ran in "):
        return 0
    cut = body.rfind(" in ")
    if cut <= 0 or not _SECONDS.match(body, cut + 4):
        return None
    counts = _counts(body[:cut].split(", "))
    if not counts or not any(w in counts for w in ("passed", "failed", "error", "errors", "skipped",
                                                   "xfailed", "xpassed", "deselected")):
        return None
    return counts.get("passed", 0)


def _jest(line: str) -> int | None:
    """jest: `Tests:       1 failed, 5 passed, 6 total`."""
    if not line.startswith("Tests:"):
        return None
    counts = _counts(line[6:].strip().split(", "))
    if not counts or "total" not in counts:
        return None
    return counts.get("passed", 0)


def _vitest(line: str) -> int | None:
    """vitest: `Tests  1 failed | 4 passed (5)` (not `Test Files  1 passed (1)`)."""
    if not line.startswith("Tests  "):
        return None
    body = line[7:].strip()
    m = _VITEST_END.search(body, max(0, len(body) - 16))
    if m is None or m.end() != len(body):
        return None
    counts = _counts(body[:m.start()].split(" | "))
    return None if counts is None else counts.get("passed", 0)


def _unittest_verdict(line: str, ran: int) -> int | None:
    """unittest's `OK`, `OK (skipped=1)` or `FAILED (failures=1, errors=2)` after `Ran N tests`."""
    for word in ("OK", "FAILED"):
        if line == word:
            return ran
        if line.startswith(word + " (") and line.endswith(")"):
            missed = 0
            for part in line[len(word) + 2:-1].split(", "):
                m = _UNITTEST_PART.fullmatch(part.strip())
                if m is None:
                    return None
                missed += int(m.group(2))  # failures, errors, skipped, expected failures, ...
            return max(0, ran - missed)
    return None


# ------------------------------------------------------------------ JUnit XML


class JUnitError(ValueError):
    """A JUnit XML file that cannot be read as one (said in a line)."""


def junit_passed(path: Path) -> int:
    """Passing test cases in a JUnit XML file: <testcase> elements with no <failure>,
    <error> or <skipped> inside. No DTD or entity is ever read (billion laughs, external
    entities): a file with a DOCTYPE is refused, and its size is bounded. A link is not followed."""
    import xml.etree.ElementTree as ET  # only a task whose progress reads JUnit XML pays for it

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise JUnitError(f"{path.name} was not written") from None
    except OSError as e:
        raise JUnitError(f"{path.name} cannot be read: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        if not _regular(fd):
            raise JUnitError(f"{path.name} is not a file")
        data = f.read(MAX_JUNIT + 1)
    if len(data) > MAX_JUNIT:
        raise JUnitError(f"{path.name} is over {MAX_JUNIT >> 20} MiB")
    if b"<!DOCTYPE" in data.upper() or b"<!ENTITY" in data.upper():
        raise JUnitError(f"{path.name} has a DOCTYPE or an entity declaration (refused: they are never read)")
    passed = 0
    try:
        parser = ET.XMLPullParser(events=("end",))
        parser.feed(data)
        parser.close()
        for _, el in parser.read_events():
            if _local(el.tag) == "testcase":
                if not any(_local(c.tag) in ("failure", "error", "skipped") for c in el):
                    passed += 1
                el.clear()
    except ET.ParseError as e:
        raise JUnitError(f"{path.name} is not XML: {e}") from None
    return passed


def _regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
