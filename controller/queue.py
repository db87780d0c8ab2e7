"""The keyed work queue (one reconcile per key at a time) and the gate that lets wakes go first."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class KeyedQueue(Generic[K]):
    """Keys waiting to be reconciled; a key added while it runs is handed out again after."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._running: set[K] = set()
        self._again: set[K] = set()

    def add(self, key: K) -> None:
        """Ask for a reconcile of `key`; a key already waiting is not added twice."""
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def take(self) -> K:
        """The next key that is not running; it runs until `release`."""
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            if key in self._running:
                self._again.add(key)
                continue
            self._running.add(key)
            return key

    def is_running(self, key: K) -> bool:
        return key in self._running

    def release(self, key: K) -> None:
        """`key` is done; if it was asked for meanwhile, it waits again."""
        self._running.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)


class WakeGate(Generic[K]):
    """Wakes whose scale write is not done yet; follow-up writes wait for them, a bounded time."""

    def __init__(self, patience: float) -> None:
        self._patience = patience
        self._due: set[K] = set()
        self._clear = asyncio.Event()
        self._clear.set()

    def due(self, key: K) -> None:
        """A wake of `key` was noticed; its scale write comes before other writes."""
        self._due.add(key)
        self._clear.clear()

    def is_due(self, key: K) -> bool:
        return key in self._due

    def done(self, key: K) -> None:
        """`key`'s wake was written, or will not be."""
        self._due.discard(key)
        if not self._due:
            self._clear.set()

    async def wait(self) -> None:
        """Return once no wake is due, or after `patience` seconds, so nothing starves."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._clear.wait(), self._patience)
