"""Kubernetes Events: what zeroscaler did to an object, or why it could not."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Literal

from zeroscaler.core.durations import format_time
from zeroscaler.kube import Kube, KubeError, Obj

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
_MAX_MESSAGE = 1024


class EventRecorder:
    """Writes core/v1 Events; a failure to write one is logged and never stops the caller."""

    def __init__(self, kube: Kube, component: str, instance: str = "") -> None:
        self._kube = kube
        self._component = component
        self._instance = instance

    async def emit(
        self, obj: Obj, api_version: str, kind: str, type_: EventType, reason: str, message: str
    ) -> None:
        """Record an Event about `obj` (a `kind` of `api_version`) in its namespace."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        now = format_time(datetime.now(UTC))
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
            "message": message[:_MAX_MESSAGE],
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._kube.create(f"/api/v1/namespaces/{namespace}/events", body)
        except KubeError as e:
            log.warning("could not write Event: %s", e, extra={"reason": reason})
