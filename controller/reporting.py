"""What the controller says about a workload: each warning once (log line and Event), Events in
the background at the lowest priority, a few at a time; while one waits to be written, a newer one
of the same workload, type and reason joins it, so a backlog never outgrows the workloads."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from zeroscaler.api import Obj, Priority, prioritized
from zeroscaler.cluster.events import EventRecorder, EventType
from zeroscaler.controller.context import Context
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.core.annotations import Notice
from zeroscaler.core.sharing import NOTHING

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending:
    """An Event not written yet, and how many occurrences it stands for.

    It keeps only what the Event names of its workload, never the object. Creating 10,000
    workloads queues 10,000 Sleeping Events at once, and each used to keep its workload's object
    as it was after the workload had moved on: 971 bytes of heap each against 292 now
    (`bench/bench_memory.py`), a peak whose arenas the allocator cannot give back afterwards."""

    uid: str
    version: str  # the resourceVersion it happened at
    message: str
    count: int = 1

    def involved(self, key: WorkloadKey) -> Obj:
        """What `EventRecorder.emit` reads of the object the Event is about."""
        _, namespace, name = key
        meta = {"namespace": namespace, "name": name, "uid": self.uid}
        return {"metadata": {**meta, "resourceVersion": self.version}}


def joined_message(message: str, count: int) -> str:
    """The message of an Event that stands for `count` occurrences, the newest one's words."""
    return message if count == 1 else f"{message} (the latest of {count})"


class Reporter:
    """Writes Events about workloads without holding up the scale writes of wakes or sleeps."""

    def __init__(
        self,
        events: EventRecorder,
        context: Context,
        *,
        slots: int = 4,
    ) -> None:
        self._events = events
        self._background = context.background
        self._is_leader = context.is_leader
        self._slots = slots
        self._writers = 0
        # Waiting Events, oldest first; one per workload, type and reason, and for warnings one
        # per message too (each is said once while it holds, so they are few).
        self._pending: dict[tuple[WorkloadKey, EventType, str, str], _Pending] = {}

    @property
    def pending(self) -> int:
        """Events waiting to be written."""
        return len(self._pending)

    def warn(self, w: Workload, warnings: list[Notice]) -> None:
        """Say each warning once while it holds; one that went away may be said again later."""
        held = w.report.warned & set(warnings) if w.report.warned else NOTHING
        if self._is_leader():
            for reason, message in dict.fromkeys(warnings):
                if (reason, message) in held:
                    continue
                held |= {(reason, message)}
                log.warning(message, extra={"workload": w.label, "reason": reason})
                self.event(w, "Warning", reason, message, distinct=True)
        w.report.warned = held or NOTHING  # most workloads have nothing to warn of

    def event(
        self, w: Workload, type_: EventType, reason: str, message: str, *, distinct: bool = False
    ) -> None:
        """Write an Event about `w` in the background; one waiting of the same reason is joined
        unless the message is `distinct` (two webhooks a workload backs are two warnings)."""
        key = (w.key, type_, reason, message if distinct else "")
        waiting = self._pending.get(key)
        uid, version = w.obj.uid, w.obj.resource_version
        if waiting is not None:  # not written yet: one Event tells both, in the newer words
            waiting.uid, waiting.version, waiting.message = uid, version, message
            waiting.count += 1
            return
        self._pending[key] = _Pending(uid, version, message)
        if self._writers < self._slots:
            self._writers += 1
            self._background(self._write())

    async def _write(self) -> None:
        """Write waiting Events, oldest first, until none is left."""
        try:
            # Behind every other request: a burst of wakes or sleeps never waits for Events.
            with prioritized(Priority.BACKGROUND):
                while self._pending:
                    key = next(iter(self._pending))
                    event = self._pending.pop(key)
                    workload, type_, reason, _ = key
                    message = joined_message(event.message, event.count)
                    await self._events.emit(
                        event.involved(workload),
                        "apps/v1",
                        workload[0],
                        type_,
                        reason,
                        message,
                        event.count,
                    )
        finally:
            self._writers -= 1
