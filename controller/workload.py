"""One Deployment or StatefulSet as the controller knows it: the object, and a memory per part.

Each memory is declared by the part that keeps it, in a module of its own below the parts
(`idle_memory.py`, `watch_memory.py`, `scaling_memory.py`, `report_memory.py`); the record only
composes them."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from zeroscaler.api import Obj
from zeroscaler.controller.idle_memory import IdleMemory
from zeroscaler.controller.report_memory import ReportMemory
from zeroscaler.controller.scaling_memory import ScalingMemory
from zeroscaler.controller.watch_memory import WatchMemory
from zeroscaler.core.annotations import (
    FIELD_MANAGER,
    OUR_PREFIXES,
    OWNED_KINDS,
    PAUSED_UNTIL,
    WATCHED_KINDS,
    WorkloadConfig,
    WorkloadStatus,
    has_kinds_annotated,
    paused_until_set_at,
    read_injected,
    read_status,
)
from zeroscaler.core.flapping import replicas_manager
from zeroscaler.core.managers import Manager, detect, field_managers_of, is_applied
from zeroscaler.core.readiness import is_ready
from zeroscaler.core.savings import NONE, Requests, pod_requests
from zeroscaler.core.sharing import shared, shared_mapping, shared_strings
from zeroscaler.core.workloads import workload_path

WorkloadKey = tuple[str, str, str]  # kind, namespace, name
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def trim_workload(obj: Obj) -> Obj:
    """Keep what the scaler reads of a Deployment or StatefulSet."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    status = obj.get("status") or {}
    labels = shared_strings(meta.get("labels") or {})
    pod_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    annotations = meta.get("annotations") or {}
    trimmed: Obj = {
        "metadata": {
            "name": sys.intern(meta.get("name", "")),
            "namespace": sys.intern(meta.get("namespace", "")),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
            "generation": meta.get("generation"),
            "annotations": shared_strings(ours(annotations)),
            "labels": labels,
        },
        "spec": {
            "replicas": spec.get("replicas", 1),
            "serviceAccountName": pod_spec.get("serviceAccountName")
            or pod_spec.get("serviceAccount")
            or "default",
            # What Services select it by, and whether it makes pods at all (readiness).
            "podLabels": labels if pod_labels == labels else shared_strings(pod_labels),
            "paused": bool(spec.get("paused")),
            "podRequests": _shared_requests(pod_requests(pod_spec)),
        },
        "status": shared_mapping(
            {k: status[k] for k in ("observedGeneration", "readyReplicas") if k in status}
        )
        if status
        else None,
        # Who last set the replicas, to tell a manifest re-applied again and again (flapping).
        "replicasManager": replicas_manager(meta.get("managedFields")),
        # Written by server-side apply (Helm 4...): a sleep or wake then gives spec.replicas up.
        "applied": is_applied(meta.get("managedFields"), FIELD_MANAGER),
        # The managers above it (OLM, Argo CD, Flux, Helm...): one shared tuple, most often empty.
        "managers": shared(
            detect(
                meta.get("labels") or {},
                meta.get("annotations") or {},
                field_managers_of(meta.get("managedFields")),
            )
        ),
    }
    if PAUSED_UNTIL in annotations:  # a duration counts from when it was written
        trimmed["pausedAt"] = paused_until_set_at(meta.get("managedFields"))
    return trimmed


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


def is_newer(new: Obj, old: Obj) -> bool:
    """Whether `new` is the same or a later version of the object than `old`."""
    a, b = _version(new), _version(old)
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


def is_stale(answer: Obj, held: Obj) -> bool:
    """Whether `answer` is known to be no later a version than `held` (both versions numbers)."""
    a, b = _version(answer), _version(held)
    return a.isdigit() and b.isdigit() and int(a) <= int(b)


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def reconcile_inputs(obj: Obj) -> tuple[Any, ...]:
    """What a reconcile reads; an update that leaves it alone (status only) decides nothing."""
    meta = obj.get("metadata") or {}
    return meta.get("generation"), meta.get("annotations"), meta.get("labels"), obj.get("spec")


def initial_last_activity(annotations: Mapping[str, str], now: datetime) -> datetime:
    """Where a newly seen workload's idle clock starts: when it fell asleep, else now."""
    status, _ = read_status(annotations)
    if status.state == "asleep":
        return status.asleep_since or EPOCH
    return now


class Workload:
    """One Deployment or StatefulSet as the controller knows it: the object and its annotations
    as last read, and one memory for each part that keeps something of its own about it."""

    __slots__ = (
        "config",
        "deleted",
        "idle",
        "key",
        "managed",
        "obj",
        "paused",
        "report",
        "scaling",
        "status",
        "watch",
    )

    def __init__(self, key: WorkloadKey, obj: Obj, last_activity: datetime) -> None:
        self.key = key
        self.obj = obj
        self.deleted = False
        self.managed = False
        self.paused = False  # held by zeroscaler.io/paused, as last seen
        self.config = WorkloadConfig()
        self.status = WorkloadStatus()
        self.idle = IdleMemory(last_activity)
        self.watch = WatchMemory()
        self.scaling = ScalingMemory()
        self.report = ReportMemory()

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.obj.get("metadata") or {}).get("labels") or {})

    @property
    def pod_labels(self) -> dict[str, str]:
        return dict((self.obj.get("spec") or {}).get("podLabels") or {})

    @property
    def ready_replicas(self) -> int:
        return int((self.obj.get("status") or {}).get("readyReplicas") or 0)

    def is_ready(self) -> bool | None:
        """Ready replicas reach its replicas; None when it has no readiness to wait for."""
        meta = self.obj.get("metadata") or {}
        return is_ready(self.obj.get("spec") or {}, self.obj.get("status"), meta.get("generation"))

    @property
    def kind(self) -> str:
        return self.key[0]

    @property
    def namespace(self) -> str:
        return self.key[1]

    @property
    def name(self) -> str:
        return self.key[2]

    @property
    def label(self) -> str:
        """`kind/namespace/name`, as log lines name a workload."""
        return "/".join(self.key)

    @property
    def annotations(self) -> dict[str, str]:
        return dict((self.obj.get("metadata") or {}).get("annotations") or {})

    @property
    def replicas(self) -> int:
        return int((self.obj.get("spec") or {}).get("replicas") or 0)

    @property
    def resource_version(self) -> str:
        return str(self.obj["metadata"].get("resourceVersion", ""))

    @property
    def pod_requests(self) -> Requests:
        """CPU and memory one of its pods requests."""
        found = (self.obj.get("spec") or {}).get("podRequests")
        return found if isinstance(found, Requests) else NONE

    def released(self) -> Requests:
        """What it gives back while asleep: its pods' requests times the replicas it wakes to."""
        if not self.managed or self.status.state != "asleep" or self.replicas:
            return NONE
        return self.pod_requests.times(self.status.restore_replicas or 1)

    @property
    def paused_at(self) -> datetime | None:
        """When `paused-until` was written, as the API server recorded it."""
        when = self.obj.get("pausedAt")
        return when if isinstance(when, datetime) else None

    @property
    def replicas_manager(self) -> str | None:
        manager = self.obj.get("replicasManager")
        return manager if isinstance(manager, str) else None

    @property
    def applied(self) -> bool:
        """Whether another manager writes it by server-side apply."""
        return bool(self.obj.get("applied"))

    @property
    def managers(self) -> tuple[Manager, ...]:
        found = self.obj.get("managers")
        return found if isinstance(found, tuple) else ()

    @property
    def service_account(self) -> str:
        return str((self.obj.get("spec") or {}).get("serviceAccountName") or "default")

    @property
    def path(self) -> str:
        return workload_path(self.kind, self.namespace, self.name)

    @property
    def shown_status(self) -> WorkloadStatus:
        """The status it has, or in a dry run the one it would have."""
        pretend = self.scaling.pretend
        return pretend[0] if pretend else self.status

    @property
    def follows_rbac(self) -> bool:
        """Whether its kinds come, or would come, from its ServiceAccount's RBAC."""
        annotations = self.annotations
        listed = read_injected(annotations)
        return (
            self.watch.inferred
            or not has_kinds_annotated(annotations)
            or WATCHED_KINDS in listed
            or OWNED_KINDS in listed
        )

    def policy_object(self) -> Obj:
        """The parts of the workload policy reads, shaped as the object the webhook sees."""
        meta = self.obj.get("metadata") or {}
        return {
            "metadata": {k: meta[k] for k in ("annotations", "labels") if k in meta},
            "spec": {"template": {"spec": {"serviceAccountName": self.service_account}}},
        }

    def take(self, obj: Obj) -> None:
        """Adopt the API server's answer about it (a write's, a read's), and the status its
        annotations record. An answer no newer than the copy held is dropped: the watch brought
        that version or a later one first, and its copy, which the informer holds too, is kept
        rather than a second one or an older one."""
        if not is_stale(obj, self.obj):
            self.obj = obj
        self.status, _ = read_status(self.annotations)


def settle_start(w: Workload, now: datetime) -> bool:
    """A starting workload seen Ready: its idle clock starts now. True when it stopped starting
    (a workload with no readiness to wait for stops at once, its clock left as it is)."""
    return w.idle.starting and w.idle.settle(w.is_ready(), now)


def owes_wake(w: Workload) -> bool:
    """Managed and asleep, with activity seen that no scale-up has answered yet."""
    return (
        w.managed
        and not w.deleted
        and w.idle.activity_at is not None
        and w.shown_status.state == "asleep"
    )


def count_pending_wakes(workloads: Iterable[Workload]) -> int:
    return sum(1 for w in workloads if owes_wake(w))


def count_paused(workloads: Iterable[Workload]) -> int:
    """Workloads held as they are, as last reconciled."""
    return sum(1 for w in workloads if w.paused and not w.deleted)


def count_dry_run(workloads: Iterable[Workload]) -> int:
    """Managed workloads where only what would be done is said."""
    return sum(1 for w in workloads if w.managed and w.scaling.dry_run is not None)


def count_released(workloads: Iterable[Workload]) -> Requests:
    """The requests every sleeper gives back now."""
    total = NONE
    for w in workloads:
        total += w.released()
    return total


def count_by_state(workloads: Iterable[Workload]) -> dict[str, int]:
    """Managed workloads by state (a dry run counts the state it would have made)."""
    counts = {"awake": 0, "asleep": 0}
    for w in workloads:
        if w.managed:
            counts[w.shown_status.state or "awake"] += 1
    return counts
