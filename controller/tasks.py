"""The controller's tasks: long-lived ones cancelled at shutdown, background writes waited for."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Coroutine
from typing import Any

from zeroscaler.runtime.clock import Clock

log = logging.getLogger(__name__)


class Tasks:
    """Runs the loops until shutdown, and background work that shutdown waits a little for."""

    def __init__(self, clock: Clock, grace: float = 5.0) -> None:
        self._clock = clock
        self._grace = grace
        self._loops: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False

    def spawn(self, *coros: Coroutine[Any, Any, None]) -> None:
        """Run loops that last until shutdown."""
        self._loops.extend(asyncio.create_task(c) for c in coros)

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the workers; shutdown waits a little for it (Events, follow-ups).

        It starts from a fresh context: an Event started by an urgent wake is not urgent itself.
        """
        if self._closed:  # the API clients are being closed: it could only fail
            work.close()
            return
        task = asyncio.create_task(work, context=contextvars.Context())
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        # Retrieved here, so a failure is logged when it happens rather than by the collector.
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("background work failed", exc_info=error)

    async def wait(self) -> None:
        """Until a loop fails or all are cancelled."""
        await asyncio.gather(*self._loops)

    async def aclose(self) -> None:
        """Stop the loops, give background work (and what they started on the way out) the
        grace to finish, then cancel what is left: none of it outlives the API clients."""
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        deadline = self._clock.monotonic() + self._grace
        while self._background and (left := deadline - self._clock.monotonic()) > 0:
            await asyncio.wait(set(self._background), timeout=left)  # work may start more
        self._closed = True
        unfinished = set(self._background)
        if unfinished:
            log.info("background work cut short by shutdown", extra={"tasks": len(unfinished)})
        for task in unfinished:
            task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
