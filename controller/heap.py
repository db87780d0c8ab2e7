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
    live objects and kept until the next full collection.

    With `full`, frozen objects are unfrozen first and everything is collected: that frees cycles
    that formed among frozen objects, but walks every stored object (a stall a wake would feel;
    `bench/bench_memory.py` times it), so callers ask for it rarely.
    """
    if full:
        gc.unfreeze()
        gc.collect()
    else:
        # Unless a burst (a start, thousands of workloads created) filled the oldest generation:
        # walking it all at once would stall wakes.
        gc.collect(2 if len(gc.get_objects(2)) <= oldest_limit else 1)
    gc.freeze()
    if _trim is not None:
        _trim(0)


def pause_collection() -> None:
    """Stop the cyclic collector for a start's catch-up (`resume_collection` ends it).

    A start stores every watched object and every workload's record, long-lived objects by the
    hundred thousand, and the collector would walk them again each time they grew by a quarter,
    a good part of a restart's CPU (docs/figures.md). They hold few cycles, and the pause ends when
    the start is caught up or stops making progress (`zeroscaler.core.start_progress`).
    """
    gc.disable()


def resume_collection() -> None:
    """Freeze what the catch-up left, without walking it, and run the collector again.

    The catch-up leaves hundreds of thousands of objects the collector tracks, very few of them
    garbage, and walking them would lengthen the restart (docs/figures.md). Frozen, that little
    garbage waits for the housekeeping's full collection, every half hour."""
    if not gc.isenabled():
        gc.freeze()
        if _trim is not None:
            _trim(0)
        gc.enable()
