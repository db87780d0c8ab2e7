"""What the controller keeps of a Deployment or StatefulSet: one frozen value with named fields,
made in one place (`trim_workload`) from the object the API server sends."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from zeroscaler.api import Obj
from zeroscaler.cluster.informer import Filed, Key
from zeroscaler.core.annotations import (
    FIELD_MANAGER,
    OUR_PREFIXES,
    PAUSED_UNTIL,
    paused_until_set_at,
)
from zeroscaler.core.flapping import replicas_manager
from zeroscaler.core.managers import Manager, detect, field_managers_of, is_applied
from zeroscaler.core.readiness import is_ready
from zeroscaler.core.savings import NONE, Requests, pod_requests
from zeroscaler.core.sharing import shared, shared_strings


@dataclass(frozen=True, slots=True)
class WorkloadObject(Filed):
    """A Deployment or StatefulSet as last read, trimmed to what the controller reads of it."""

    name: str
    namespace: str
    uid: str
    resource_version: str
    generation: Any  # metadata.generation as sent (an int; None when absent)
    annotations: Mapping[str, str]  # zeroscaler's own only (`ours`)
    labels: Mapping[str, str]
    replicas: int  # spec.replicas (1 when not set)
    service_account: str
    # What Services select it by (its pod template's labels), and whether it makes pods at all.
    pod_labels: Mapping[str, str]
    rollout_paused: bool  # spec.paused: a paused Deployment makes no pods
    pod_requests: Requests  # what one of its pods requests
    has_status: bool  # whether a status with either field below was read
    observed_generation: Any = None
    ready_replicas: Any = None
    # Who last set the replicas, to tell a manifest re-applied again and again (flapping).
    replicas_manager: str | None = None
    # Written by server-side apply (Helm 4...): a sleep or wake then gives spec.replicas up.
    applied: bool = False
    # The managers above it (OLM, Argo CD, Flux, Helm...): one shared tuple, most often empty.
    managers: tuple[Manager, ...] = ()
    paused_at: datetime | None = None  # when `paused-until` was written, if it is set

    @property
    def key(self) -> Key:
        return self.namespace, self.name

    @property
    def version(self) -> str:
        return self.resource_version

    def is_ready(self) -> bool | None:
        """Ready replicas reach its replicas; None when it has no readiness to wait for."""
        status: dict[str, Any] | None = None
        if self.has_status:
            status = {}
            if self.observed_generation is not None:
                status["observedGeneration"] = self.observed_generation
            if self.ready_replicas is not None:
                status["readyReplicas"] = self.ready_replicas
        spec = {"replicas": self.replicas, "paused": self.rollout_paused}
        return is_ready(spec, status, self.generation)

    def reconcile_inputs(self) -> tuple[Any, ...]:
        """What a reconcile reads; an update that leaves it alone (status only) decides nothing."""
        return (
            self.generation,
            self.annotations,
            self.labels,
            self.replicas,
            self.service_account,
            self.pod_labels,
            self.rollout_paused,
            self.pod_requests,
        )

    def is_newer(self, old: WorkloadObject) -> bool:
        """Whether it is the same or a later version of the object than `old`."""
        a, b = self.resource_version, old.resource_version
        if a.isdigit() and b.isdigit():
            return int(a) >= int(b)
        return True

    def is_stale(self, held: WorkloadObject) -> bool:
        """Whether it is known to be no later a version than `held` (both versions numbers)."""
        a, b = self.resource_version, held.resource_version
        return a.isdigit() and b.isdigit() and int(a) <= int(b)


def trim_workload(obj: Obj) -> WorkloadObject:
    """Keep what the controller reads of a Deployment or StatefulSet."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    status = obj.get("status") or {}
    labels = shared_strings(meta.get("labels") or {})
    pod_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    annotations = meta.get("annotations") or {}
    managed_fields = meta.get("managedFields")
    return WorkloadObject(
        name=sys.intern(meta.get("name", "")),
        namespace=sys.intern(meta.get("namespace", "")),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion", "")),
        generation=meta.get("generation"),
        annotations=shared_strings(ours(annotations)),
        labels=labels,
        replicas=int(spec.get("replicas", 1) or 0),
        service_account=str(
            pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount") or "default"
        ),
        pod_labels=labels if pod_labels == labels else shared_strings(pod_labels),
        rollout_paused=bool(spec.get("paused")),
        pod_requests=_shared_requests(pod_requests(pod_spec)),
        has_status="observedGeneration" in status or "readyReplicas" in status,
        observed_generation=status.get("observedGeneration"),
        ready_replicas=status.get("readyReplicas"),
        replicas_manager=replicas_manager(managed_fields),
        applied=is_applied(managed_fields, FIELD_MANAGER),
        managers=shared(
            detect(meta.get("labels") or {}, annotations, field_managers_of(managed_fields))
        ),
        # A duration counts from when it was written.
        paused_at=paused_until_set_at(managed_fields) if PAUSED_UNTIL in annotations else None,
    )


def keep_workload(obj: Obj) -> Obj:
    """`trim_workload` as the workloads' informers are handed it: an informer's objects are
    typed as dicts, and it files a `WorkloadObject` by its own key and version (`Filed`)."""
    return cast(Obj, trim_workload(obj))


def workload_of(kept: object) -> WorkloadObject:
    """What a workloads' informer keeps, as the value it is."""
    if not isinstance(kept, WorkloadObject):
        raise TypeError(f"a workload is kept as a WorkloadObject, not {type(kept).__name__}")
    return kept


_REQUESTS: dict[Requests, Requests] = {}


def _shared_requests(requests: Requests) -> Requests:
    """One copy of each distinct request: most workloads ask alike."""
    if requests == NONE:
        return NONE
    if len(_REQUESTS) > 4096:
        _REQUESTS.clear()
    return _REQUESTS.setdefault(requests, requests)


def ours(annotations: Mapping[str, str]) -> dict[str, str]:
    """The annotations zeroscaler reads (its own and the IBM scaler's it takes as aliases); the
    rest, such as kubectl's last-applied-configuration, can be kilobytes a workload."""
    return {k: v for k, v in annotations.items() if k.startswith(OUR_PREFIXES)}
