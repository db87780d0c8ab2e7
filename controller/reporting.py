"""What the controller says about a workload: each warning once (log line and Event), Events in
the background, a few at a time, after the wakes that are due."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from controller.queue import WakeGate
from controller.workload import Workload, WorkloadKey
from zeroscaler.core.annotations import Notice
from zeroscaler.events import EventRecorder, EventType
from zeroscaler.kube import Obj

log = logging.getLogger(__name__)


class Reporter:
    """Writes Events about workloads without holding up the scale writes of other wakes."""

    def __init__(
        self,
        events: EventRecorder,
        gate: WakeGate[WorkloadKey],
        *,
        background: Callable[[Coroutine[Any, Any, None]], None],
        is_leader: Callable[[], bool],
        slots: int = 4,
    ) -> None:
        self._events = events
        self._gate = gate
        self._background = background
        self._is_leader = is_leader
        self._slots = asyncio.Semaphore(slots)

    def warn(self, w: Workload, warnings: list[Notice]) -> None:
        """Say each warning once while it holds; one that went away may be said again later."""
        w.warned &= set(warnings)
        if not self._is_leader():
            return
        for reason, message in dict.fromkeys(warnings):
            if (reason, message) in w.warned:
                continue
            w.warned.add((reason, message))
            log.warning(message, extra={"workload": w.label, "reason": reason})
            self.event(w, "Warning", reason, message)

    def event(self, w: Workload, type_: EventType, reason: str, message: str) -> None:
        """Write an Event about `w` in the background."""
        # A burst of wakes must not queue its scale writes behind the Events of the ones before.
        self._background(self._write(dict(w.obj), w.kind, type_, reason, message))

    async def _write(
        self, obj: Obj, kind: str, type_: EventType, reason: str, message: str
    ) -> None:
        await self._gate.wait()
        async with self._slots:
            await self._events.emit(obj, "apps/v1", kind, type_, reason, message)
