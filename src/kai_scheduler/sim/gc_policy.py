"""The garbage collector while simulating. A large cluster is millions of small objects: the input's live
for the whole run and hold no reference cycles, and each cycle makes a snapshot of as many again. With
the collector's defaults (a young collection every 700 allocations) collections were half the run time
at 5,000 nodes, most of it full collections walking the same objects again and again. `simulate` (and
the benchmarks, to measure what it does) load and build with the collector paused, freeze what they
built, and run with fewer collections. The simulation itself makes the cluster's jobs and pods in its
first cycle without collecting and keeps them out of later collections (`keep_survivors`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_COLLECTION_EVERY = 100_000


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: for making many objects that hold no reference cycles."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect the young generation every `YOUNG_COLLECTION_EVERY` allocations, so that a cycle's snapshot
    is not promoted and walked by full collections while it is being built (at 1,000 nodes: GC 6.6 -> 0.9 s
    of 3 cycles, peak memory +20%); then restore the collector (thresholds, frozen objects) for callers that
    go on running (tests)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def keep_survivors() -> None:
    """Leave every object alive now out of later collections (Python's `gc.freeze`): what was just built
    lives on, and walking it again in every full collection cost a second a cycle at 5,000 nodes. The
    price: cyclic garbage made before this call stays until `release_survivors`."""
    gc.freeze()


def release_survivors() -> None:
    """Give the objects `keep_survivors` set aside back to the collector."""
    gc.unfreeze()
