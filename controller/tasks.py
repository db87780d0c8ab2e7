"""The controller's tasks: long-lived ones cancelled at shutdown, background writes waited for."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any


class Tasks:
    """Runs the loops until shutdown, and background work that shutdown waits a little for."""

    def __init__(self, grace: float = 5.0) -> None:
        self._grace = grace
        self._loops: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()

    def spawn(self, *coros: Coroutine[Any, Any, None]) -> None:
        """Run loops that last until shutdown."""
        self._loops.extend(asyncio.create_task(c) for c in coros)

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the workers; shutdown waits a little for it (Events, follow-ups).

        It starts from a fresh context: an Event started by an urgent wake is not urgent itself.
        """
        task = asyncio.create_task(work, context=contextvars.Context())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def wait(self) -> None:
        """Until a loop fails or all are cancelled."""
        await asyncio.gather(*self._loops)

    async def aclose(self) -> None:
        if self._background:
            await asyncio.wait(self._background, timeout=self._grace)
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
