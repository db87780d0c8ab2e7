"""Kubernetes Events on workloads: what the scaler did and what it could not do."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Literal

from zeroscaler.core.durations import format_time
from zeroscaler.kube import Kube, KubeError, Obj

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]
COMPONENT = "zeroscaler-controller"
_MAX_MESSAGE = 1024


class EventRecorder:
    """Writes core/v1 Events; a failure to write one is logged and never stops the caller."""

    def __init__(self, kube: Kube, instance: str) -> None:
        self._kube = kube
        self._instance = instance

    async def emit(
        self, workload: Obj, kind: str, type_: EventType, reason: str, message: str
    ) -> None:
        meta = workload.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        now = format_time(datetime.now(UTC))
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{meta.get('name', 'workload')}.",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": "apps/v1",
                "kind": kind,
                "namespace": namespace,
                "name": meta.get("name", ""),
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": type_,
            "reason": reason,
            "message": message[:_MAX_MESSAGE],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._kube.create(f"/api/v1/namespaces/{namespace}/events", body)
        except KubeError as e:
            log.warning("could not write Event: %s", e, extra={"reason": reason})
