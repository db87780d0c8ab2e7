"""One Deployment or StatefulSet as the controller knows it: the object, and a memory per part.

Each memory is declared by the part that keeps it, in a module of its own below the parts
(`idle_memory.py`, `watch_memory.py`, `scaling_memory.py`, `report_memory.py`); the record only
composes them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Protocol

from zeroscaler.api import Obj
from zeroscaler.controller.idle_memory import IdleMemory
from zeroscaler.controller.report_memory import ReportMemory
from zeroscaler.controller.scaling_memory import ScalingMemory
from zeroscaler.controller.watch_memory import WatchMemory
from zeroscaler.controller.workload_object import WorkloadObject
from zeroscaler.core.annotations import (
    OWNED_KINDS,
    WATCHED_KINDS,
    WorkloadConfig,
    WorkloadStatus,
    has_kinds_annotated,
    read_injected,
    read_status,
)
from zeroscaler.core.managers import Manager
from zeroscaler.core.savings import NONE, Requests
from zeroscaler.core.workloads import workload_path

WorkloadKey = tuple[str, str, str]  # kind, namespace, name
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def initial_last_activity(annotations: Mapping[str, str], now: datetime) -> datetime:
    """Where a newly seen workload's idle clock starts: when it fell asleep, else now."""
    status, _ = read_status(annotations)
    if status.state == "asleep":
        return status.asleep_since or EPOCH
    return now


class LiveWorkload(Protocol):
    """The record as a write that runs across awaits sees it (`scaling.py`'s): the object, the
    status its annotations record and whether it is managed, read as they are when the write's
    turn comes, not as they were handed; the API server's answer handed back (`take`), or that
    the workload is gone (`gone`: the reconcile forgets it). `Workload` is one."""

    @property
    def obj(self) -> WorkloadObject: ...

    @property
    def status(self) -> WorkloadStatus: ...

    @property
    def managed(self) -> bool: ...

    def take(self, obj: WorkloadObject) -> None: ...

    def gone(self) -> None: ...


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

    def __init__(self, key: WorkloadKey, obj: WorkloadObject, last_activity: datetime) -> None:
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
        return dict(self.obj.labels)

    @property
    def pod_labels(self) -> dict[str, str]:
        return dict(self.obj.pod_labels)

    @property
    def ready_replicas(self) -> int:
        return int(self.obj.ready_replicas or 0)

    def is_ready(self) -> bool | None:
        """Ready replicas reach its replicas; None when it has no readiness to wait for."""
        return self.obj.is_ready()

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
        return dict(self.obj.annotations)

    @property
    def replicas(self) -> int:
        return self.obj.replicas

    @property
    def resource_version(self) -> str:
        return self.obj.resource_version

    @property
    def pod_requests(self) -> Requests:
        """CPU and memory one of its pods requests."""
        return self.obj.pod_requests

    def released(self) -> Requests:
        """What it gives back while asleep: its pods' requests times the replicas it wakes to."""
        if not self.managed or self.status.state != "asleep" or self.replicas:
            return NONE
        return self.pod_requests.times(self.status.restore_replicas or 1)

    @property
    def paused_at(self) -> datetime | None:
        """When `paused-until` was written, as the API server recorded it."""
        return self.obj.paused_at

    @property
    def replicas_manager(self) -> str | None:
        return self.obj.replicas_manager

    @property
    def applied(self) -> bool:
        """Whether another manager writes it by server-side apply."""
        return self.obj.applied

    @property
    def managers(self) -> tuple[Manager, ...]:
        return self.obj.managers

    @property
    def service_account(self) -> str:
        return self.obj.service_account

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
        return {
            "metadata": {"annotations": self.obj.annotations, "labels": self.obj.labels},
            "spec": {"template": {"spec": {"serviceAccountName": self.service_account}}},
        }

    def take(self, obj: WorkloadObject) -> None:
        """Adopt the API server's answer about it (a write's, a read's), and the status its
        annotations record. An answer no newer than the copy held is dropped: the watch brought
        that version or a later one first, and its copy, which the informer holds too, is kept
        rather than a second one or an older one."""
        if not obj.is_stale(self.obj):
            self.obj = obj
        self.status, _ = read_status(self.annotations)

    def gone(self) -> None:
        """A write or a read found it gone: the next reconcile forgets it."""
        self.deleted = True


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
