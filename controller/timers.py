"""One heap of deadlines for all workloads, served by one task."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from zeroscaler.runtime.clock import Clock

K = TypeVar("K", bound=Hashable)


class TimerHeap(Generic[K]):
    """Calls `fire(key)` at each key's latest deadline on the clock's monotonic time, the time the
    deadlines are worked out in; rescheduling replaces it."""

    def __init__(self, fire: Callable[[K], None], clock: Clock) -> None:
        self._fire = fire
        self._clock = clock
        self._heap: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._seq = itertools.count()
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._due)

    def schedule(self, key: K, when: float) -> None:
        """Fire `key` at monotonic time `when`, replacing any earlier schedule of it."""
        if self._due.get(key) == when:
            return
        self._due[key] = when
        heapq.heappush(self._heap, (when, next(self._seq), key))
        if self._heap[0][2] == key:
            self._changed.set()

    def cancel(self, key: K) -> None:
        self._due.pop(key, None)

    def fire_due(self) -> float | None:
        """Fire every key whose deadline the clock has reached; the seconds to the next deadline,
        or None when none is left."""
        now = self._clock.monotonic()
        while self._heap and (self._heap[0][0] <= now or self._is_stale(self._heap[0])):
            when, _, key = heapq.heappop(self._heap)
            if self._due.get(key) == when:
                del self._due[key]
                self._fire(key)
        return self._heap[0][0] - now if self._heap else None

    async def run(self) -> None:
        """Serve deadlines until cancelled."""
        while True:
            self._changed.clear()
            delay = self.fire_due()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=delay)

    def _is_stale(self, entry: tuple[float, int, K]) -> bool:
        return self._due.get(entry[2]) != entry[0]
