"""Kubernetes Events: what zeroscaler did to an object, or why it could not.

An Event that repeats one written in the last ten minutes (same object, type, reason and message)
raises that Event's count instead of adding another, as kubectl and client-go recorders do: a
workload that sleeps every few minutes keeps one `Sleeping` Event, not hundreds.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

from zeroscaler.api import Kube, KubeError, NotFound, Obj
from zeroscaler.core.durations import format_time
from zeroscaler.runtime.clock import Clock

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
_MAX_MESSAGE = 1024
SERIES_WINDOW = 600.0  # seconds within which a repeat raises the count
_MAX_SERIES = 4096  # remembered series; the oldest are forgotten first

_SeriesKey = tuple[str, str, str, str, str, str, str]


@dataclass(slots=True)
class _Series:
    name: str
    count: int
    seen: float  # monotonic time of the last occurrence


class EventRecorder:
    """Writes core/v1 Events; a failure to write one is logged and never stops the caller."""

    def __init__(self, kube: Kube, clock: Clock, component: str, instance: str = "") -> None:
        self._kube = kube
        self._clock = clock
        self._component = component
        self._instance = instance
        self._series: OrderedDict[_SeriesKey, _Series] = OrderedDict()

    async def emit(
        self,
        obj: Obj,
        api_version: str,
        kind: str,
        type_: EventType,
        reason: str,
        message: str,
        count: int = 1,
    ) -> None:
        """Record an Event about `obj` (a `kind` of `api_version`) in its namespace, standing for
        `count` occurrences."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        now = format_time(self._clock.now())
        message = message[:_MAX_MESSAGE]
        name = str(meta.get("name", ""))
        key: _SeriesKey = (namespace, kind, name, str(meta.get("uid", "")), type_, reason, message)
        try:
            if await self._repeat(key, now, count):
                return
            event = await self._create(
                meta, namespace, api_version, kind, type_, reason, message, now, count
            )
        except KubeError as e:
            log.warning("could not write Event: %s", e, extra={"reason": reason})
            return
        event_name = str((event.get("metadata") or {}).get("name", ""))
        self._remember(key, _Series(event_name, count, self._clock.monotonic()))

    async def _repeat(self, key: _SeriesKey, now: str, count: int) -> bool:
        """Count more occurrences on the Event of a recent series; False when there is none."""
        series = self._series.get(key)
        if (
            series is None
            or self._clock.monotonic() - series.seen > SERIES_WINDOW
            or not series.name
        ):
            return False
        path = f"/api/v1/namespaces/{key[0]}/events/{series.name}"
        try:
            await self._kube.patch(path, {"count": series.count + count, "lastTimestamp": now})
        except NotFound:  # expired (the API server keeps Events for an hour by default)
            del self._series[key]
            return False
        series.count += count
        series.seen = self._clock.monotonic()
        self._series.move_to_end(key)
        return True

    def _remember(self, key: _SeriesKey, series: _Series) -> None:
        self._series[key] = series
        self._series.move_to_end(key)
        while len(self._series) > _MAX_SERIES:
            self._series.popitem(last=False)

    async def _create(
        self,
        meta: Obj,
        namespace: str,
        api_version: str,
        kind: str,
        type_: EventType,
        reason: str,
        message: str,
        now: str,
        count: int,
    ) -> Obj:
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": api_version,
                "kind": kind,
                "namespace": namespace,
                "name": meta.get("name", ""),
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": count,
        }
        return await self._kube.create(f"/api/v1/namespaces/{namespace}/events", body)
