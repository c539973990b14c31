"""A pause of Python's cyclic garbage collector around work that allocates many long-lived
objects and few cycles (a compile, a report): each collection would rescan them all.

After the pause, what was made inside is handed to the oldest generation as it is: left in
the youngest, all of it would be scanned by the first collection after (~0.1 s after a
10k-task compile, for the plan that lives on). Cycles made inside are still collected, by
the next full collection."""

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
