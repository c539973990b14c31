"""Error fingerprints: the same failure with other numbers, paths or ids is the same error."""

from __future__ import annotations

import string

from hypothesis import given, strategies as st

from harnessc.runtime.loop.stuck import fingerprint, normalize_error

WORDS = st.text(alphabet=string.ascii_letters + " :,'()=-", min_size=1, max_size=30)
NUMBERS = st.one_of(st.integers(0, 10**12).map(str),
                    st.floats(0, 1e6, allow_nan=False).map(lambda f: f"{f:.3f}"))
PATHS = st.lists(st.text(alphabet=string.ascii_lowercase + string.digits + "_.-", min_size=1, max_size=8),
                 min_size=2, max_size=5).map("/".join).map(lambda p: "/" + p)
# an id made only of the letters a-f is a word: real ids (hashes, addresses) have digits
HEX = (st.integers(16**7, 16**16).map(lambda n: f"{n:x}").filter(lambda h: any(c.isdigit() for c in h))
       | st.integers(0, 2**64).map(hex))
KINDS = st.sampled_from([NUMBERS, PATHS, HEX])


@given(st.lists(st.tuples(WORDS, KINDS), min_size=1, max_size=6), st.data())
def test_varying_parts_do_not_change_the_fingerprint(slots, data):
    """An error template whose slots (a number, a path, a hex id) take other values."""
    def fill():
        return " ".join(w + " " + data.draw(kind) + " " for w, kind in slots)

    one, two = fill(), fill()
    assert normalize_error(one) == normalize_error(two), (one, two)
    assert fingerprint([one]) == fingerprint([two])


@given(st.text(max_size=200))
def test_normalizing_is_idempotent(text):
    assert normalize_error(normalize_error(text)) == normalize_error(text)


@given(WORDS, WORDS)
def test_different_words_are_different_errors(a, b):
    if normalize_error(a) != normalize_error(b):
        assert fingerprint([a]) != fingerprint([b])


def test_examples():
    a = "FAILED tests/test_auth.py::test_login - AssertionError at line 12 (0x7f3a2c10) in 0.31s"
    b = "FAILED tests/test_auth.py::test_login - AssertionError at line 40 (0x7f99aa00) in 1.02s"
    assert fingerprint([a]) == fingerprint([b])
    assert fingerprint([a]) != fingerprint([a.replace("AssertionError", "KeyError")])
    assert fingerprint([]) is None
