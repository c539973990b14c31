"""nogc.no_cyclic_gc: the collector paused inside, restored after, and with freeze=True what
was alive handed to the permanent generation (a one-shot command's exit scans none of it)."""

from __future__ import annotations

import gc

from harnessc.nogc import RUN_YOUNG_THRESHOLD, for_a_run, no_cyclic_gc


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


def test_what_was_made_inside_goes_to_the_oldest_generation_unscanned():
    """Left in the youngest generation, a compiled 10k-task plan was all scanned by the first
    collection after the pause (~0.1 s)."""
    gc.collect()
    with no_cyclic_gc():
        made = [[i] for i in range(5000)]
    young = {id(o) for o in gc.get_objects(generation=0)}
    assert not any(id(o) in young for o in made)
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(o) in oldest for o in made)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_cycle_made_inside_is_still_collected():
    import weakref

    class Node:
        pass

    with no_cyclic_gc():
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


def test_objects_the_process_froze_stay_frozen():
    gc.collect()
    kept = [[i] for i in range(100)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with no_cyclic_gc():
            made = [[i] for i in range(100)]
        assert gc.get_freeze_count() == frozen and kept and made
    finally:
        gc.unfreeze()


def test_a_run_freezes_what_is_alive_and_collects_less_often_then_restores_both():
    gc.unfreeze()
    threshold = gc.get_threshold()
    alive = [[i] for i in range(1000)]
    with for_a_run():
        assert gc.get_freeze_count() >= len(alive) and gc.isenabled()
        assert gc.get_threshold() == (RUN_YOUNG_THRESHOLD, *threshold[1:])
        cycle = []
        cycle.append(cycle)  # what the run makes in cycles is still collected
        del cycle
        assert gc.collect() >= 1
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


def test_a_run_leaves_a_frozen_set_it_did_not_make():
    gc.unfreeze()
    try:
        with no_cyclic_gc(freeze=True):
            kept = [[i] for i in range(100)]
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)
        with for_a_run():
            pass
        # still frozen (an unfreeze would leave 0); not `== frozen`: a thread an earlier test of
        # this worker left may free a frozen object meanwhile
        assert gc.get_freeze_count() >= len(kept) and kept
    finally:
        gc.unfreeze()
