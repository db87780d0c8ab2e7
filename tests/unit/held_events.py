"""A fake Event writer for the controller's unit tests: each write waits until `release` is set."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from zeroscaler.api import Obj, Priority
from zeroscaler.api.transport import _PRIORITY
from zeroscaler.cluster.events import EventRecorder
from zeroscaler.controller.workload import Workload
from zeroscaler.controller.workload_object import trim_workload

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


class HeldRecorder(EventRecorder):
    """Keeps what it was asked to write, once released; counts writes started and cancelled."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str, str, int, Priority]] = []
        self.involved: list[Obj] = []  # the objects the Events were about, as given
        self.release = asyncio.Event()
        self.started = 0
        self.cancelled = 0

    async def emit(
        self,
        obj: Obj,
        api_version: str,
        kind: str,
        type_: str,
        reason: str,
        message: str,
        count: int = 1,
    ) -> None:
        self.started += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        name = str(obj["metadata"]["name"])
        self.involved.append(obj)
        self.written.append((name, reason, message, count, _PRIORITY.get()))


def workload(name: str) -> Workload:
    obj = {"metadata": {"name": name}, "spec": {"replicas": 0}}
    return Workload(("Deployment", "ops", name), trim_workload(obj), NOW)
