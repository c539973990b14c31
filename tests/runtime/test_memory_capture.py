"""Run memory's pieces without a run: contract fields as entries (capture.fields), the summary
agent's answer made safe (summary.clean) and the deterministic summary's bound
(summary.fallback), and constraint expiry on the runtime's clock (virtual time here)."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from harnessc.estimates import estimate_tokens
from harnessc.runtime.memory import capture, recall
from harnessc.runtime.memory.store import MemoryStore, Settings, stamp
from harnessc.runtime.memory.summary import MARKUP, UNSAFE, clean, fallback

from .virtual import clock_of, harnessc


def test_output_fields_make_entries_and_say_what_they_skip():
    out, skipped = capture.fields({"decisions": ["tabs", {"text": "ids are UUIDv7", "files": ["ids.py"]}, 42, ""],
                                   "failures": "not a list",
                                   "constraints": [{"text": "no vendor/", "expires": "whenever"},
                                                   {"text": "x", "files": "a.py"}]}, "t", ["own.py"])
    assert [(e["kind"], e["text"], e["files"]) for e in out] == [
        ("decision", "tabs", ["own.py"]), ("decision", "ids are UUIDv7", ["ids.py"]),
        ("constraint", "no vendor/ (expires: whenever, not understood: kept until forgotten)", ["own.py"])]
    assert skipped == ["decisions[2]: not a string or an object with a text", "failures: not a list",
                       "constraints[1]: files: not a list of paths"]
    assert capture.fields(["decisions"], "t", []) == ([], [])  # not an object: nothing


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000), st.integers(1, 200))
def test_a_summary_agent_answer_is_bounded_and_carries_no_markers_or_controls(text, tokens):
    got = clean(text, tokens)
    assert len(got) <= tokens * 4 and not UNSAFE.search(got) and not MARKUP.search(got)


def test_markers_that_removal_would_join_are_removed_too():
    assert clean("<deci<task>sion>x</deci</task>sion> <promi\x00se>", 50) == "x"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="abc xyz", min_size=1, max_size=300), max_size=40), st.integers(0, 300))
def test_the_fallback_summary_is_newest_first_within_its_bound(texts, tokens):
    entries = [{"kind": "done", "text": t, "task": f"t{i}"} for i, t in enumerate(texts)]
    got = fallback(entries, tokens)
    assert estimate_tokens(got) <= tokens
    lines = got.splitlines()
    assert lines == [f"- {t}" for t in reversed(texts)][: len(lines)]


def test_constraints_expire_on_the_runtime_clock(tmp_path):
    """A constraint "for 2h" holds on the runtime's clock and is gone 3 (virtual) hours later:
    for a task's memory section, and in `harnessc memory`'s list."""
    root = tmp_path / "p"
    root.mkdir()
    clock = clock_of(root)
    node = SimpleNamespace(id="b", title="Build", goal="", success="", context=[], write_scope=[], accept=[])
    with clock.installed():
        entry = capture.markers('<constraint expires="2h">keep the API frozen</constraint>', "a", [])[0]
        store = MemoryStore(root)
        store.add([stamp(entry, "run-1")])
        assert "keep the API frozen" in recall.section(store.entries(), node, Settings(), "run-2")
    r = harnessc(root, "memory")
    assert "keep the API frozen" in r.stdout and "[expired]" not in r.stdout, r.stdout + r.stderr
    clock.jump(3 * 3600)
    with clock.installed():
        assert recall.section(MemoryStore(root).entries(), node, Settings(), "run-2") == ""
    r = harnessc(root, "memory")
    assert "keep the API frozen" in r.stdout and "[expired]" in r.stdout, r.stdout + r.stderr
