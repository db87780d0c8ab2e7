"""One Deployment or StatefulSet as the controller knows it, and what it keeps of the object."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from zeroscaler.core.activity import GroupKind, Interest, Scope
from zeroscaler.core.annotations import (
    OWNED_KINDS,
    WATCHED_KINDS,
    Notice,
    WorkloadConfig,
    WorkloadStatus,
    has_kinds_annotated,
    read_injected,
    read_status,
)
from zeroscaler.core.flapping import Streak, replicas_manager
from zeroscaler.core.kinds import APIResource
from zeroscaler.core.readiness import is_ready
from zeroscaler.kube import Obj

WORKLOAD_RESOURCES = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
WorkloadKey = tuple[str, str, str]  # kind, namespace, name
Scopes = tuple[dict[GroupKind, Scope], dict[GroupKind, Scope]]  # watched, owned
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def trim_workload(obj: Obj) -> Obj:
    """Keep what the scaler reads of a Deployment or StatefulSet."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    status = obj.get("status") or {}
    return {
        "metadata": {
            k: meta[k]
            for k in (
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "annotations",
                "labels",
            )
            if k in meta
        },
        "spec": {
            "replicas": spec.get("replicas", 1),
            "serviceAccountName": pod_spec.get("serviceAccountName")
            or pod_spec.get("serviceAccount")
            or "default",
            # What Services select it by, and whether it makes pods at all (readiness).
            "podLabels": ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {},
            "paused": bool(spec.get("paused")),
        },
        "status": {k: status[k] for k in ("observedGeneration", "readyReplicas") if k in status}
        if status
        else None,
        # Who last set the replicas, to tell a manifest re-applied again and again (flapping).
        "replicasManager": replicas_manager(meta.get("managedFields")),
    }


def is_newer(new: Obj, old: Obj) -> bool:
    """Whether `new` is the same or a later version of the object than `old`."""
    a = str((new.get("metadata") or {}).get("resourceVersion", ""))
    b = str((old.get("metadata") or {}).get("resourceVersion", ""))
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


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


@dataclass(frozen=True, slots=True)
class OwnWake:
    """A wake the controller scaled up but has not yet recorded in the status annotations."""

    replicas: int
    reason: str
    latency: float | None  # seconds from the waking event to the scale write's answer


@dataclass(slots=True)
class Tally:
    """What one workload's own metric series count (only while per-workload metrics are on)."""

    wakes: dict[str, int] = field(default_factory=dict)  # by reason
    sleeps: dict[str, int] = field(default_factory=dict)  # by reason
    saved: float = 0.0  # replica-seconds
    latency_sum: float = 0.0  # seconds, over the wakes that had a waking event
    latency_count: int = 0


@dataclass
class Workload:
    """One Deployment or StatefulSet as the scaler knows it."""

    key: WorkloadKey
    obj: Obj
    last_activity: datetime
    activity_reason: str = ""  # what a wake is for: the first activity since the sleep
    deleted: bool = False
    managed: bool = False
    config: WorkloadConfig = field(default_factory=WorkloadConfig)
    status: WorkloadStatus = field(default_factory=WorkloadStatus)
    signature: tuple[Any, ...] | None = None
    scopes: Scopes = ({}, {})
    kind_warnings: list[Notice] = field(default_factory=list)
    resources: set[APIResource] = field(default_factory=set)
    unseen: set[APIResource] = field(default_factory=set)  # kinds the controller may not watch
    interest: Interest | None = None
    activity_at: float | None = None  # loop time the waking event arrived
    warned: set[Notice] = field(default_factory=set)
    accounted_at: float | None = None  # loop time replica-seconds were last counted
    pretend: tuple[WorkloadStatus, int] | None = None  # dry run: the status we would have made
    streak: Streak = field(default_factory=Streak)  # wakes by others in a row (flapping)
    paused: bool = False  # held by zeroscaler.io/paused, as last seen
    inferred: bool = False  # no kinds annotated: they come from the ServiceAccount's RBAC
    names: dict[GroupKind, frozenset[str]] = field(default_factory=dict)  # inferred resourceNames
    reach: tuple[Scope, frozenset[str]] = (None, frozenset())  # working namespaces, own CRDs
    unchecked: set[str] = field(default_factory=set)  # kinds of its census not yet compared
    # Scaled up by us, still annotated asleep: in memory, so a failed record is not read as a
    # wake by someone else (only a crash before the record loses it).
    own_wake: OwnWake | None = None
    starting: bool = False  # woken (or first seen) and not Ready since: the idle clock waits
    tally: Tally | None = None  # its own metric series; kept only while it is managed

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
    def replicas_manager(self) -> str | None:
        manager = self.obj.get("replicasManager")
        return manager if isinstance(manager, str) else None

    @property
    def service_account(self) -> str:
        return str((self.obj.get("spec") or {}).get("serviceAccountName") or "default")

    @property
    def path(self) -> str:
        resource = WORKLOAD_RESOURCES[self.kind]
        return f"/apis/apps/v1/namespaces/{self.namespace}/{resource}/{self.name}"

    @property
    def shown_status(self) -> WorkloadStatus:
        """The status it has, or in a dry run the one it would have."""
        return self.pretend[0] if self.pretend else self.status

    @property
    def follows_rbac(self) -> bool:
        """Whether its kinds come, or would come, from its ServiceAccount's RBAC."""
        annotations = self.annotations
        listed = read_injected(annotations)
        return (
            self.inferred
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
        """Adopt a fresher copy of the object, and the status its annotations record."""
        self.obj = obj
        self.status, _ = read_status(self.annotations)

    def kind_names(self) -> Iterable[str]:
        """The watched and owned kinds resolved for it, as `Kind.group`."""
        for group, kind in (*self.scopes[0], *self.scopes[1]):
            yield f"{kind}.{group}" if group else kind


def settle_start(w: Workload, now: datetime) -> bool:
    """A starting workload seen Ready: its idle clock starts now. True when it stopped starting
    (a workload with no readiness to wait for stops at once, its clock left as it is)."""
    if not w.starting:
        return False
    ready = w.is_ready()
    if ready is False:
        return False
    w.starting = False
    if ready:
        w.last_activity = max(w.last_activity, now)
    return True


def owes_wake(w: Workload) -> bool:
    """Managed and asleep, with activity seen that no scale-up has answered yet."""
    return (
        w.managed
        and not w.deleted
        and w.activity_at is not None
        and w.shown_status.state == "asleep"
    )


def count_pending_wakes(workloads: Iterable[Workload]) -> int:
    return sum(1 for w in workloads if owes_wake(w))


def count_by_state(workloads: Iterable[Workload]) -> dict[str, int]:
    """Managed workloads by state (a dry run counts the state it would have made)."""
    counts = {"awake": 0, "asleep": 0}
    for w in workloads:
        if w.managed:
            counts[w.shown_status.state or "awake"] += 1
    return counts
