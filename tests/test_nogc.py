"""nogc.no_cyclic_gc: the collector paused inside, restored after, and with freeze=True what
was alive handed to the permanent generation (a one-shot command's exit scans none of it)."""

from __future__ import annotations

import gc

from harnessc.nogc import no_cyclic_gc


def test_paused_inside_and_restored_after_even_when_nested_or_raising():
    assert gc.isenabled()
    with no_cyclic_gc():
        assert not gc.isenabled()
        with no_cyclic_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner one does not turn it back on
    assert gc.isenabled()
    try:
        with no_cyclic_gc():
            raise ValueError
    except ValueError:
        pass
    assert gc.isenabled()


def test_freeze_hands_what_is_alive_to_the_permanent_generation():
    before = gc.get_freeze_count()
    try:
        with no_cyclic_gc(freeze=True):
            kept = [[i] for i in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()
