"""How far a start has got, and when the collector paused for it must run again.

A start pauses the cyclic collector (`zeroscaler.controller.heap`) while it stores its objects
and reconciles its workloads. The pause follows the start rather than a clock: it lasts while the
start keeps getting further, however long a big start on a busy machine takes, and ends once the
start has got no further for `stall` seconds, so a stuck start (an API server that stopped
answering, a reconcile that hangs) never leaves the collector off for good.

Getting further means reading more than ever before (workloads, stored objects, watches listed)
or, with the reads as they are, fewer reconciles waiting than since the reads last grew. Records
rather than changes: a relist that empties a store and fills it again, or keys that are queued
again and again, move the figures without getting further.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """One look at a start: workloads known, watched objects stored, watches listed, and
    reconciles waiting."""

    workloads: int
    objects: int
    listed: int
    waiting: int

    def __post_init__(self) -> None:
        for name in ("workloads", "objects", "listed", "waiting"):
            value = getattr(self, name)
            if value < 0:
                raise ValueError(f"progress: {name} is {value}; a count, at least 0")

    def reads_beyond(self, best: Progress) -> bool:
        """Whether this look read more of something than `best` had."""
        return (
            self.workloads > best.workloads
            or self.objects > best.objects
            or self.listed > best.listed
        )


@dataclass(frozen=True)
class Pause:
    """The start's records so far (`best`: the most read of each kind, and the fewest waiting
    since the reads last grew) and when it last set one (`since`, in seconds)."""

    best: Progress
    since: float


def begin(first: Progress, now: float) -> Pause:
    return Pause(first, now)


def observe(pause: Pause, seen: Progress, now: float) -> Pause:
    """The pause after another look at the start; `since` moves only when the look sets a
    record."""
    best = pause.best
    if seen.reads_beyond(best):
        reads = Progress(
            max(seen.workloads, best.workloads),
            max(seen.objects, best.objects),
            max(seen.listed, best.listed),
            seen.waiting,  # new reads queue reconciles: the count of waiting starts again here
        )
        return Pause(reads, now)
    if seen.waiting < best.waiting:
        return Pause(
            Progress(best.workloads, best.objects, best.listed, seen.waiting),
            now,
        )
    return pause


def stalled(pause: Pause, now: float, stall: float) -> bool:
    """Whether the start has got no further for `stall` seconds: the collector runs again."""
    if stall <= 0:
        raise ValueError(f"stall: {stall}; seconds, more than 0")
    return now - pause.since >= stall
