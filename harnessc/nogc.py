"""A pause of Python's cyclic garbage collector around work that allocates many long-lived
objects and few cycles (a compile, a report): each collection would rescan them all.

After the pause, what was made inside is handed to the oldest generation as it is: left in
the youngest, all of it would be scanned by the first collection after (~0.1 s after a
10k-task compile, for the plan that lives on). Cycles made inside are still collected, by
the next full collection.

for_a_run: the collector's settings around a run's event loop (fewer, smaller collections)."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def no_cyclic_gc(freeze: bool = False) -> Iterator[None]:
    """No cyclic GC inside; reference counting still frees what it can. Re-entrant.

    `freeze`: for a process that ends next (a one-shot command). What is alive at the end
    is frozen (gc.freeze) instead of handed back to the collector, which would scan all
    of it once when it comes back and again at exit - a tenth of a second for a big report.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        elif was_enabled and gc.get_freeze_count() == 0:  # the outermost pause: to the oldest
            # generation, unscanned. freeze() moves every tracked object to the permanent
            # generation and unfreeze() all of them into the oldest one, neither scanning them;
            # skipped when the process froze objects of its own (they stay frozen).
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()


RUN_YOUNG_THRESHOLD = 5000  # allocations between two collections of the youngest generation (Python's: 700)


@contextmanager
def for_a_run() -> Iterator[None]:
    """Around a run's event loop: what is alive as it starts (modules, the plan) is frozen out
    of the collector's scans, and the youngest generation is collected every
    RUN_YOUNG_THRESHOLD allocations. A run allocates and frees many small objects per task
    (futures, handles, records), few in cycles: this halves the collector's share of its time.
    Both are restored after (a frozen set someone else made is left as it was)."""
    threshold = gc.get_threshold()
    froze = gc.get_freeze_count() == 0
    if froze:
        gc.freeze()
    gc.set_threshold(RUN_YOUNG_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        if froze:
            gc.unfreeze()
