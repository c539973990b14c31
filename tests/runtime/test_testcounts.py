"""testcounts: how many tests passed, read from the runners' real output.

The samples in fixtures/testcounts were printed by the real runners (pytest 8 with and
without -q, -s and xdist; unittest; node 20 --test with the tap and spec reporters; cargo
test), each over a suite with one failing test and one that prints a fake summary line. go
test, jest and vitest are not installed here: their lines are written as their docs show.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessc.runtime.testcounts import JUnitError, junit_passed, passed

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "testcounts"


@pytest.mark.parametrize("name,count", [
    ("pytest_color", 3), ("pytest_q", 3), ("pytest_xdist", 3),
    ("pytest_s", 3),  # a test printed "999 passed in 0.01s" before pytest's own line
    ("unittest", 3), ("unittest_v", 3),  # 5 run, 1 failed, 1 skipped
    ("node_tap", 2), ("node_spec", 2),
    ("cargo", 2),  # a test printed "test result: ok. 999 passed;" (captured: cargo hides it)
])
def test_real_runner_output(name: str, count: int) -> None:
    assert passed((SAMPLES / f"{name}.txt").read_text()) == count


@pytest.mark.parametrize("text,count", [
    ("======= 5 passed in 0.30s =======", 5),
    ("5 passed, 1 failed in 0.3s", 5),
    ("1 failed, 5 passed, 2 warnings in 1.20s (0:00:01)", 5),
    ("2 failed, 1 error in 0.1s", 0),
    ("no tests ran in 0.01s", 0),
    ("==== 12 passed, 3 deselected in 4.00s ====", 12),
    ("Ran 5 tests in 0.002s\n\nOK", 5),
    ("Ran 1 test in 0.002s\n\nOK (skipped=1)", 0),
    ("Ran 6 tests in 0.01s\n\nFAILED (failures=1, errors=1, expected failures=1)", 3),
    ("=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n--- PASS: TestB (0.00s)\n"
     "=== RUN   TestC\n--- FAIL: TestC (0.00s)\nFAIL\nFAIL\texample.com/m\t0.002s", 2),
    ("--- PASS: TestA (0.00s)\nPASS\nok  \texample.com/a\t0.002s\n"
     "--- PASS: TestB (0.00s)\nPASS\nok  \texample.com/b\t(cached)", 2),  # two packages: added up
    ("ok  \texample.com/m\t0.002s", None),  # go test without -v: no count
    ('{"Time":"2024-01-01T00:00:00Z","Action":"run","Package":"m","Test":"TestA"}\n'
     '{"Time":"2024-01-01T00:00:00Z","Action":"output","Package":"m","Test":"TestA","Output":"--- PASS: TestA (0.00s)\\n"}\n'
     '{"Time":"2024-01-01T00:00:00Z","Action":"pass","Package":"m","Test":"TestA","Elapsed":0}\n'
     '{"Time":"2024-01-01T00:00:00Z","Action":"output","Package":"m","Test":"TestB","Output":"{\\"Action\\":\\"pass\\",\\"Test\\":\\"X\\"}"}\n'
     '{"Time":"2024-01-01T00:00:00Z","Action":"fail","Package":"m","Test":"TestB","Elapsed":0}\n'
     '{"Time":"2024-01-01T00:00:00Z","Action":"fail","Package":"m","Elapsed":0.01}', 1),  # go test -json
    ("test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n"
     "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s", 5),
    ("Tests:       1 failed, 5 passed, 6 total", 5),
    ("Tests:       6 passed, 6 total", 6),
    (" Test Files  1 passed (1)\n      Tests  5 passed (5)", 5),
    ("      Tests  1 failed | 4 passed (5)", 4),
    ("# pass 5\n# fail 0", 5),
    ("ℹ pass 7", 7),
    ("  12 passing (30ms)\n  1 failing", 12),
    ("everything is fine", None),
    ("", None),
])
def test_summary_lines(text: str, count: int | None) -> None:
    assert passed(text) == count


def test_the_last_summary_wins_and_colours_are_read_through() -> None:
    fake = "\x1b[32m======= 999 passed in 0.01s =======\x1b[0m\n"
    assert passed(fake + "lots of output\n" + "== 2 passed, 3 failed in 0.2s ==\n") == 2
    # a fake printed after the runner's line wins too: the output's last summary is the one read
    assert passed("2 passed in 0.2s\n999 passed in 0.01s\n") == 999


def test_a_huge_output_is_read_in_linear_time_from_its_end() -> None:
    # long lines of what the patterns almost match; a quadratic pattern would take minutes
    junk = ("1 passed, " * 50_000 + "\n") * 20 + "Tests:" + " 1 x," * 200_000 + "\n"
    assert passed(junk + "5 passed in 1.0s\n") == 5  # (speed itself is measured in bench/, not here)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_on_any_text(text: str) -> None:
    got = passed(text)
    assert got is None or (isinstance(got, int) and got >= 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["5 passed", " in 0.1s", "Ran 3 tests in 0s", "OK", "FAILED (", "=", "\n",
                                 "--- PASS: T", "ok  \tp\t0.1s", "Tests:", " | ", "(5)", "\x1b[", "# pass 2",
                                 "test result: ok. 1 passed;", ", ", "failures=1)"])).map("".join))
def test_never_raises_on_pieces_of_summaries(text: str) -> None:
    got = passed(text)
    assert got is None or got >= 0


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="5">
<testcase classname="t" name="a"/><testcase classname="t" name="b"/>
<testcase classname="t" name="c"><failure message="x">boom</failure></testcase>
<testcase classname="t" name="d"><skipped message="later"/></testcase>
<testcase classname="t" name="e"><system-out>5 passed</system-out></testcase>
</testsuite></testsuites>"""


def test_junit_counts_testcases_without_failure_error_or_skip(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text(JUNIT)
    assert junit_passed(tmp_path / "junit.xml") == 3


@pytest.mark.parametrize("text,why", [
    ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>'
     "<testsuite><testcase name='&lol2;'/></testsuite>", "DOCTYPE"),
    ('<!doctype x SYSTEM "file:///etc/passwd"><x/>', "DOCTYPE"),
    ("<testsuite><testcase>", "not XML"),
])
def test_junit_refuses_dtds_and_broken_xml(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "junit.xml").write_text(text)
    with pytest.raises(JUnitError, match=why):
        junit_passed(tmp_path / "junit.xml")


def test_junit_missing_or_a_link_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JUnitError, match="was not written"):
        junit_passed(tmp_path / "junit.xml")
    (tmp_path / "real.xml").write_text(JUNIT)
    (tmp_path / "junit.xml").symlink_to(tmp_path / "real.xml")
    with pytest.raises(JUnitError, match="cannot be read"):
        junit_passed(tmp_path / "junit.xml")
