"""The keyed work queue (one reconcile per key at a time) and the wakes that are due."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class KeyedQueue(Generic[K]):
    """Keys waiting to be reconciled, urgent ones (wakes due) first; a key added while it runs is
    handed out again after."""

    def __init__(self, is_urgent: Callable[[K], bool] = lambda _: False) -> None:
        self._is_urgent = is_urgent
        self._lines: tuple[deque[K], deque[K]] = (deque(), deque())  # urgent, then the rest
        self._queued: dict[K, bool] = {}  # waiting keys, and whether they wait in the urgent line
        self._running: set[K] = set()
        self._again: set[K] = set()
        self._ready = asyncio.Event()
        self._idled = asyncio.Event()  # set when the last running key is released, none waiting

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: K) -> None:
        """Ask for a reconcile of `key`; a key already waiting is not added twice, but one that
        has become urgent moves up to the urgent line."""
        urgent = self._is_urgent(key)
        if key in self._queued and (self._queued[key] or not urgent):
            return
        self._queued[key] = urgent
        self._lines[0 if urgent else 1].append(key)
        self._ready.set()

    async def take(self, *, urgent_only: bool = False) -> K:
        """The next key that is not running (with `urgent_only`, only an urgent one); it runs
        until `release`."""
        while True:
            line = self._next_line(urgent_only)
            if line is None:
                self._ready.clear()
                await self._ready.wait()
                continue
            key = line.popleft()
            if self._queued.get(key) is None or (line is self._lines[1] and self._queued[key]):
                continue  # taken already, or waiting in the urgent line too
            del self._queued[key]
            if key in self._running:
                self._again.add(key)
                continue
            self._running.add(key)
            return key

    def _next_line(self, urgent_only: bool) -> deque[K] | None:
        if self._lines[0]:
            return self._lines[0]
        if self._lines[1] and not urgent_only:
            return self._lines[1]
        return None

    def is_running(self, key: K) -> bool:
        return key in self._running

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing running."""
        return not self._queued and not self._running and not self._again

    async def until_idle(self) -> None:
        """Until nothing waits and nothing runs."""
        while not self.idle:
            self._idled.clear()
            await self._idled.wait()

    def release(self, key: K) -> None:
        """`key` is done; if it was asked for meanwhile, it waits again."""
        self._running.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)
        if self.idle:
            self._idled.set()


class WakeGate(Generic[K]):
    """Wakes whose scale write is not done yet: a reconcile of one of them asks urgently."""

    def __init__(self) -> None:
        self._due: set[K] = set()

    def due(self, key: K) -> None:
        """A wake of `key` was noticed; its scale write comes before other writes."""
        self._due.add(key)

    def is_due(self, key: K) -> bool:
        return key in self._due

    def done(self, key: K) -> None:
        """`key`'s wake was written, or will not be."""
        self._due.discard(key)
