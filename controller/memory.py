"""Keep the heap small and the garbage collector out of the way of wakes.

Freed memory goes back to the operating system after bursts (big lists, relists); everything alive
is frozen, so routine collections no longer walk 50,000 stored objects and stall the event loop
for tens of milliseconds (the webhook found the same in its p99).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Callable

_trim: Callable[[int], int] | None = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _trim = _libc.malloc_trim
except (OSError, AttributeError):  # not glibc: nothing to trim
    _trim = None


OLDEST_WALKABLE = 50_000  # objects in the oldest generation a routine collection walks


def release_free_memory(*, full: bool = False, oldest_limit: int = OLDEST_WALKABLE) -> None:
    """Collect what was allocated since the last freeze, freeze the survivors, and ask glibc to
    return free pages.

    Everything since the last freeze is collected, the oldest generation included when it holds
    at most `oldest_limit` objects: a cycle that lived long enough to be promoted there before it
    died (an API response and its stream, a closed connection) would otherwise be frozen with the
    live objects and kept until the next full collection. A lab found 13,000 such objects, 1.4 MB,
    five minutes into the scale row.

    With `full`, frozen objects are unfrozen first and everything is collected: that frees cycles
    that formed among frozen objects, but walks every stored object (57 ms with 50,000 of them in
    `bench/bench_memory.py`, a stall a wake would feel), so callers ask for it rarely.
    """
    if full:
        gc.unfreeze()
        gc.collect()
    else:
        # Unless a burst (a start, thousands of workloads created) filled the oldest generation:
        # walking it all at once would stall wakes, 100 ms for 150,000 objects in a lab.
        gc.collect(2 if len(gc.get_objects(2)) <= oldest_limit else 1)
    gc.freeze()
    if _trim is not None:
        _trim(0)


def pause_collection() -> None:
    """Stop the cyclic collector for a start's catch-up (`resume_collection` ends it).

    A start stores every watched object and every workload's record, a million long-lived
    objects at 10,000 workloads over 200,000 objects, and the collector would walk them again each
    time they grew by a quarter: a second of CPU of a 14 s restart, in eighteen full passes. They
    hold few cycles, and the catch-up is bounded in time.
    """
    gc.disable()


def resume_collection() -> None:
    """Freeze what the catch-up left, without walking it, and run the collector again.

    At 10,000 workloads over 200,000 objects the catch-up leaves about 490,000 objects the
    collector tracks, of which a walk found 63-77 garbage, and the walk took 190-240 ms of the
    restart (a lab's figures). Frozen, that little garbage waits for the housekeeping's full
    collection, every half hour."""
    if not gc.isenabled():
        gc.freeze()
        if _trim is not None:
            _trim(0)
        gc.enable()
