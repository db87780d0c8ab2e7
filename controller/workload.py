"""One Deployment or StatefulSet as the controller knows it: the object, and a memory per part."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from zeroscaler.api import Obj
from zeroscaler.core.activity import GroupKind, Interest, Scope
from zeroscaler.core.annotations import (
    FIELD_MANAGER,
    OUR_PREFIXES,
    OWNED_KINDS,
    PAUSED_UNTIL,
    WATCHED_KINDS,
    Notice,
    WorkloadConfig,
    WorkloadStatus,
    has_kinds_annotated,
    paused_until_set_at,
    read_injected,
    read_status,
)
from zeroscaler.core.decision import restart_clock
from zeroscaler.core.flapping import Streak, replicas_manager
from zeroscaler.core.kinds import APIResource
from zeroscaler.core.managers import Manager, detect, field_managers_of, is_applied
from zeroscaler.core.readiness import is_ready
from zeroscaler.core.savings import NONE, Requests, pod_requests
from zeroscaler.core.sharing import NOTHING, shared, shared_mapping, shared_strings
from zeroscaler.core.workloads import workload_path

if TYPE_CHECKING:  # each declared by the part that keeps it, which imports this module
    from zeroscaler.controller.metrics import WorkloadCounts
    from zeroscaler.controller.scaling import OwnWake

WorkloadKey = tuple[str, str, str]  # kind, namespace, name
Scopes = tuple[Mapping[GroupKind, Scope], Mapping[GroupKind, Scope]]  # watched, owned
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NO_STREAK = Streak()
NO_NAMES: Mapping[GroupKind, frozenset[str]] = MappingProxyType({})
NO_DUE: Mapping[APIResource, frozenset[tuple[str, ...]]] = MappingProxyType({})


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


@dataclass(slots=True)
class IdleMemory:
    """The idle clock, kept by the change feed (`changes.py`) and restarted by scaling writes."""

    last_activity: datetime
    activity_reason: str = ""  # what a wake is for: the first activity since the sleep
    activity_cause: str = ""  # the object that made it (flapping tells causes apart by it)
    activity_at: float | None = None  # loop time the waking event arrived
    starting: bool = False  # woken (or first seen) and not Ready since: the idle clock waits
    woken_at: datetime | None = None  # when its last wake from zero was written, until Ready
    started_in: float | None = None  # seconds from its last wake to Ready (the activator asks)

    # Its writes, named for what happened; the change feed's activity is noted in `noting.py`.

    def first_seen(self, *, starting: bool) -> None:
        """Seen for the first time, not Ready yet (just created, or woken before a restart):
        its clock waits for Ready, as after a wake."""
        self.starting = starting

    def owe_nothing(self) -> None:
        """The activity seen so far is answered (a sleep decided on it, a wake written, a wake
        held or called off): no wake is owed for it."""
        self.activity_at = None

    def restart(self, now: datetime) -> None:
        """The clock restarts at `now`, or stays at newer activity."""
        self.last_activity = restart_clock(self.last_activity, now)

    def woken(self, now: datetime) -> None:
        """Scaled up at `now`: the clock waits for Ready, and restarts at the wake."""
        self.starting = True
        self.woken_at = now
        self.restart(now)

    def marked_awake(self, now: datetime) -> None:
        """Found awake at `now`, woken by someone else: the clock starts there, once Ready."""
        self.last_activity = now
        self.starting = True
        self.woken_at = now

    def slept(self) -> None:
        """Put to sleep: nothing to wait for."""
        self.starting = False

    def managed_from(self, at: datetime) -> None:
        """Managed from now on: its clock counts from `at`."""
        self.last_activity = at

    def restarted_by_person(self, at: datetime | None) -> None:
        """Its status says it was last active at `at` (a person's `zeroscaler wake`): a newer
        time restarts the clock."""
        if at is not None and at > self.last_activity:
            self.last_activity = at


@dataclass(slots=True)
class WatchMemory:
    """What the workload watches, kept by `kinds.py` and `subscription.py`."""

    signature: tuple[Any, ...] | None = None  # what the last resolution depended on
    scopes: Scopes = ({}, {})  # replaced, never changed in place
    kind_warnings: tuple[Notice, ...] = ()
    resources: AbstractSet[APIResource] = frozenset()  # the shared watches it holds
    unseen: AbstractSet[APIResource] = frozenset()  # kinds the controller may not watch
    interest: Interest | None = None
    inferred: bool = False  # no kinds annotated: they come from the ServiceAccount's RBAC
    # Inferred resourceNames, per kind.
    names: Mapping[GroupKind, frozenset[str]] = field(default_factory=lambda: NO_NAMES)
    namespaces: Scope = None  # where it works: the namespaces its watched kinds cover
    definitions: frozenset[str] = frozenset()  # the CRDs of its watched kinds
    unchecked: frozenset[str] = frozenset()  # kinds of its census not yet compared
    # The due-time fields it reads, per watched type (most workloads: none).
    due: Mapping[APIResource, frozenset[tuple[str, ...]]] = field(default_factory=lambda: NO_DUE)


@dataclass(slots=True)
class ScalingMemory:
    """What `scaling.py` remembers between writes; only it writes them (`Scaling.status_read`,
    `settle_dry_run`, `forget` for what a reconcile asks)."""

    # Scaled up by us, still annotated asleep: in memory, so a failed record is not read as a
    # wake by someone else (only a crash before the record loses it).
    own_wake: OwnWake | None = None
    streak: Streak = NO_STREAK  # wakes in a row by the same cause (flapping)
    # The annotations as last read while they held our status: a manager's full update that
    # drops them (OLM's reinstall) is told from them, and they are written back.
    recorded: Mapping[str, str] | None = None
    pretend: tuple[WorkloadStatus, int] | None = None  # dry run: the status we would have made
    dry_run: str | None = None  # why only what would be done is said (flag, namespace, policy)


@dataclass(slots=True)
class ReportMemory:
    """What `reporting.py` has said and `accounting.py` and `metrics.py` have counted: one
    memory of three fields, each written by its part alone (one object a workload, not three)."""

    warned: frozenset[Notice] = NOTHING  # `reporting.py`'s; replaced, never changed in place
    accounted_at: float | None = None  # `accounting.py`'s: loop time last counted
    tally: WorkloadCounts | None = None  # `metrics.py`'s own series; only while it is managed


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

    def kind_names(self) -> Iterable[str]:
        """The watched and owned kinds resolved for it, as `Kind.group`."""
        for group, kind in (*self.watch.scopes[0], *self.watch.scopes[1]):
            yield f"{kind}.{group}" if group else kind


def settle_start(w: Workload, now: datetime) -> bool:
    """A starting workload seen Ready: its idle clock starts now. True when it stopped starting
    (a workload with no readiness to wait for stops at once, its clock left as it is)."""
    if not w.idle.starting:
        return False
    ready = w.is_ready()
    if ready is False:
        return False
    w.idle.starting = False
    if ready:
        w.idle.last_activity = max(w.idle.last_activity, now)
        if w.idle.woken_at is not None:
            w.idle.started_in = (now - w.idle.woken_at).total_seconds()
    w.idle.woken_at = None
    return True


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
