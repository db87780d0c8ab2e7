"""The scaler: workloads, their idle clocks and shared watches; it asks `decide` and acts thinly."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.access import AccessReviews
from controller.memory import release_free_memory
from controller.metrics import Metrics
from controller.settings import Settings
from controller.timers import TimerHeap
from controller.watches import WatchHub
from zeroscaler.core.activity import (
    Activity,
    Change,
    GroupKind,
    Interest,
    Scope,
    definitions_of,
    find_activity,
    working_namespaces,
)
from zeroscaler.core.annotations import (
    ASLEEP_SINCE,
    IBM_IDLE_TIMEOUT,
    IBM_OWNED_KINDS,
    IBM_WATCHED_KINDS,
    IDLE_TIMEOUT,
    LAST_ACTIVITY,
    NAMESPACE_ENABLED_LABEL,
    OWNED_KINDS,
    RESTORE_REPLICAS,
    STATE,
    WATCH_NAMESPACES,
    WATCHED_KINDS,
    WorkloadConfig,
    WorkloadStatus,
    read_config,
    read_status,
)
from zeroscaler.core.decision import Decision, Observed, decide, wake_replicas
from zeroscaler.core.durations import DURATION_FORM, format_time
from zeroscaler.core.inference import RBACSnapshot, infer_kinds
from zeroscaler.core.kinds import KIND_REF_FORM, APIResource, Discovery, KindRef, parse_kind_refs
from zeroscaler.events import EventRecorder, EventType
from zeroscaler.kube import Conflict, Kube, KubeError, NotFound, Obj
from zeroscaler.watching import Informer, WatchEvent

log = logging.getLogger(__name__)

WORKLOAD_RESOURCES = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
WorkloadKey = tuple[str, str, str]  # kind, namespace, name
Warning_ = tuple[str, str]  # Event reason, message
_TIMEOUT_KEYS = (IDLE_TIMEOUT, *IBM_IDLE_TIMEOUT)
_KIND_KEYS = (WATCHED_KINDS, OWNED_KINDS, IBM_WATCHED_KINDS, IBM_OWNED_KINDS)
_RETRY_AFTER = 5.0
_FOLLOW_UP_PATIENCE = 1.0  # seconds a follow-up write gives way to pending wakes
RBAC_PATHS = {
    "Role": "/apis/rbac.authorization.k8s.io/v1/roles",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}
# Never inferred: events, locks and reviews say nothing about what an operator reconciles.
INFERENCE_IGNORE = (
    "events",
    "events.events.k8s.io",
    "leases.coordination.k8s.io",
    "tokenreviews.authentication.k8s.io",
    "subjectaccessreviews.authorization.k8s.io",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def trim_workload(obj: Obj) -> Obj:
    """Keep what the scaler reads of a Deployment or StatefulSet."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    return {
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "generation", "annotations")
            if k in meta
        },
        "spec": {
            "replicas": spec.get("replicas", 1),
            "serviceAccountName": pod_spec.get("serviceAccountName")
            or pod_spec.get("serviceAccount")
            or "default",
        },
    }


def _trim_namespace(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    kept = ("name", "resourceVersion", "labels", "deletionTimestamp")
    return {"metadata": {k: meta[k] for k in kept if k in meta}}


def _trim_hpa(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    target = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
        "target": (str(target.get("kind", "")), str(target.get("name", ""))),
    }


def _trim_rbac(kind: str) -> Callable[[Obj], Obj]:
    def trim(obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion", "labels") if k in meta}
        return {**obj, "kind": kind, "metadata": kept}

    return trim


def _trim_crd(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "resourceVersion") if k in meta}}


def _rv_newer(new: Obj, old: Obj) -> bool:
    a = str((new.get("metadata") or {}).get("resourceVersion", ""))
    b = str((old.get("metadata") or {}).get("resourceVersion", ""))
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


def _essence(obj: Obj) -> tuple[Any, ...]:
    meta = obj.get("metadata") or {}
    return meta.get("generation"), meta.get("annotations"), obj.get("spec")


@dataclass
class Workload:
    """One Deployment or StatefulSet as the scaler knows it."""

    key: WorkloadKey
    obj: Obj
    last_activity: datetime
    deleted: bool = False
    managed: bool = False
    config: WorkloadConfig = field(default_factory=WorkloadConfig)
    status: WorkloadStatus = field(default_factory=WorkloadStatus)
    signature: tuple[Any, ...] | None = None
    scopes: tuple[dict[GroupKind, Scope], dict[GroupKind, Scope]] = ({}, {})
    kind_warnings: list[Warning_] = field(default_factory=list)
    resources: set[APIResource] = field(default_factory=set)
    interest: Interest | None = None
    wake_reason: str = ""
    activity_at: float | None = None  # loop time the waking event arrived
    warned: set[Warning_] = field(default_factory=set)
    accounted_at: float | None = None  # loop time replica-seconds were last counted
    pretend: tuple[WorkloadStatus, int] | None = None  # dry run: the status we would have made
    inferred: bool = False  # no kinds annotated: they come from the ServiceAccount's RBAC
    names: dict[GroupKind, frozenset[str]] = field(default_factory=dict)  # inferred resourceNames
    reach: tuple[Scope, frozenset[str]] = (None, frozenset())  # working namespaces, own CRDs

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
    def annotations(self) -> dict[str, str]:
        return dict((self.obj.get("metadata") or {}).get("annotations") or {})

    @property
    def replicas(self) -> int:
        return int((self.obj.get("spec") or {}).get("replicas") or 0)

    @property
    def resource_version(self) -> str:
        return str(self.obj["metadata"].get("resourceVersion", ""))

    @property
    def service_account(self) -> str:
        return str((self.obj.get("spec") or {}).get("serviceAccountName") or "default")

    @property
    def path(self) -> str:
        resource = WORKLOAD_RESOURCES[self.kind]
        return f"/apis/apps/v1/namespaces/{self.namespace}/{resource}/{self.name}"


class _Denied:
    pass


_DENIED = _Denied()


class Scaler:
    """Keeps every workload's clock and watches, and sleeps and wakes them when leading."""

    def __init__(self, kube: Kube, settings: Settings, watch_kube: Kube | None = None) -> None:
        # Watches hold their connections for minutes; writes get a pool of their own that stays
        # warm, so a burst of wakes never waits for TLS handshakes behind fifty streams.
        watcher = watch_kube or kube
        self.kube = kube
        self.settings = settings
        self.workloads: dict[WorkloadKey, Workload] = {}
        self.discovery = Discovery(())
        self.is_leader = False
        self.ready = False
        self.hub: WatchHub[WorkloadKey] = WatchHub(watcher, self._on_object)
        self.access = AccessReviews(kube, settings.access_review_ttl)
        self.events = EventRecorder(kube, "zeroscaler-controller", settings.id)
        self.timers: TimerHeap[WorkloadKey] = TimerHeap(self.enqueue)
        self.metrics = Metrics(
            self.count_by_state, lambda: len(self.hub.resources), lambda: self.is_leader
        )
        self._discovery_signature: frozenset[APIResource] = frozenset()
        self._discovery_generation = 0
        self._discovery_poke = asyncio.Event()
        self._hpa_targets: dict[WorkloadKey, set[str]] = {}
        self._queue: asyncio.Queue[WorkloadKey] = asyncio.Queue()
        self._queued: set[WorkloadKey] = set()
        self._running: set[WorkloadKey] = set()
        self._again: set[WorkloadKey] = set()
        # Wakes noticed whose scale write is not done yet; follow-up writes (annotations, Events)
        # wait for them, so one write that wakes twenty workloads scales all twenty first.
        self._wakes_due: set[WorkloadKey] = set()
        self._no_wakes_due = asyncio.Event()
        self._no_wakes_due.set()
        self._follow_ups: dict[WorkloadKey, Coroutine[Any, Any, None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._background_tasks: set[asyncio.Task[None]] = set()
        self._event_slots = asyncio.Semaphore(4)
        self.namespaces = Informer(
            watcher, "/api/v1/namespaces", metadata_only=True, transform=_trim_namespace
        )
        self.namespaces.add_handler(self._on_namespace)
        self.hpas = Informer(
            watcher, "/apis/autoscaling/v2/horizontalpodautoscalers", transform=_trim_hpa
        )
        self.hpas.add_handler(self._on_hpa)
        self.crds = Informer(
            watcher,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            metadata_only=True,
            transform=_trim_crd,
        )
        self.crds.add_handler(self._on_crd)
        self.rbac_informers = {
            kind: Informer(watcher, path, transform=_trim_rbac(kind))
            for kind, path in RBAC_PATHS.items()
        }
        for informer in self.rbac_informers.values():
            informer.add_handler(self._on_rbac)
        self._rbac: RBACSnapshot | None = None
        self._rbac_generation = 0
        self.workload_informers: dict[str, Informer] = {}
        for kind, resource in WORKLOAD_RESOURCES.items():
            informer = Informer(watcher, f"/apis/apps/v1/{resource}", transform=trim_workload)
            informer.add_handler(functools.partial(self._on_workload, kind))
            self.workload_informers[kind] = informer

    # ---- running --------------------------------------------------------------------------

    async def run(self) -> None:
        """Discover, start the watches, wait for them to sync, then reconcile until cancelled."""
        while True:
            try:
                await self.refresh_discovery()
                break
            except KubeError as e:
                log.warning("API discovery failed: %s", e)
                await asyncio.sleep(2)
        # Needed before deciding anything; the CRD and RBAC watches only help (a chart that does
        # not grant them must not keep the controller from becoming ready).
        essential = [self.namespaces, self.hpas, *self.workload_informers.values()]
        helpers = [self.crds, *self.rbac_informers.values()]
        self._spawn(*(i.run() for i in [*essential, *helpers]))
        self._spawn(self.timers.run(), self._discovery_loop(), self._account_loop())
        await asyncio.gather(*(i.synced.wait() for i in essential))
        self._spawn(self._when_rbac_synced())
        release_free_memory(full=True)
        self.ready = True
        log.info("synced", extra={"workloads": len(self.workloads)})
        self._spawn(*(self._worker() for _ in range(self.settings.workers)))
        await asyncio.gather(*self._tasks)

    async def aclose(self) -> None:
        if self._background_tasks:
            await asyncio.wait(self._background_tasks, timeout=5)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.hub.aclose()

    def _spawn(self, *coros: Any) -> None:
        self._tasks.extend(asyncio.create_task(c) for c in coros)

    def set_leader(self, leading: bool) -> None:
        self.is_leader = leading
        if leading:
            for key in list(self.workloads):
                self.enqueue(key)

    def count_by_state(self) -> dict[str, int]:
        counts = {"awake": 0, "asleep": 0}
        for w in self.workloads.values():
            if w.managed:
                status = w.pretend[0] if w.pretend else w.status
                counts[status.state or "awake"] += 1
        return counts

    # ---- queue ----------------------------------------------------------------------------

    def enqueue(self, key: WorkloadKey) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def _worker(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            if key in self._running:
                self._again.add(key)
                continue
            self._running.add(key)
            try:
                await self._retrying(key, "reconcile", self.reconcile(key))
            finally:
                self._wake_done(key)
                follow_up = self._follow_ups.pop(key, None)
                if follow_up is None:
                    self._release(key)
                else:  # the key stays running: nothing else is decided until it is written
                    self._background(self._follow_up(key, follow_up))

    async def _retrying(self, key: WorkloadKey, what: str, work: Awaitable[None]) -> None:
        """Run `work` for a workload; a failure is logged and the workload looked at again."""
        try:
            await work
        except KubeError as e:
            log.warning("%s failed: %s", what, e, extra={"workload": "/".join(key)})
            self.timers.schedule(key, asyncio.get_running_loop().time() + _RETRY_AFTER)
        except Exception:
            log.exception("%s failed", what, extra={"workload": "/".join(key)})
            self.timers.schedule(key, asyncio.get_running_loop().time() + _RETRY_AFTER)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the workers; shutdown waits a little for it (Events, follow-ups)."""
        task = asyncio.create_task(work)
        self._background_tasks.add(task)
        task.add_done_callback(self._background_tasks.discard)

    def _release(self, key: WorkloadKey) -> None:
        self._running.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.enqueue(key)

    async def _follow_up(self, key: WorkloadKey, write: Coroutine[Any, Any, None]) -> None:
        """Finish a workload's wake off the worker, once no other wake waits for its scale."""
        try:
            await self._after_due_wakes()
            await self._retrying(key, "recording a wake", write)
        finally:
            self._release(key)

    def _wake_due(self, key: WorkloadKey) -> None:
        self._wakes_due.add(key)
        self._no_wakes_due.clear()

    def _wake_done(self, key: WorkloadKey) -> None:
        self._wakes_due.discard(key)
        if not self._wakes_due:
            self._no_wakes_due.set()

    async def _after_due_wakes(self) -> None:
        """Let pending scale writes go first; bounded, so a stream of wakes starves nothing."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._no_wakes_due.wait(), _FOLLOW_UP_PATIENCE)

    # ---- watch handlers (synchronous, cheap) ------------------------------------------------

    def _on_workload(self, kind: str, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        key = (kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
        w = self.workloads.get(key)
        if event.type == "DELETED":
            if w is not None:
                w.deleted = True
                self.enqueue(key)
            return
        if w is None:
            status, _ = read_status(meta.get("annotations") or {})
            start = datetime.now(UTC)
            if status.state == "asleep":
                start = status.asleep_since or _EPOCH
            self.workloads[key] = Workload(key, event.obj, last_activity=start)
            self.enqueue(key)
            return
        if not _rv_newer(event.obj, w.obj):
            return
        changed = _essence(event.obj) != _essence(w.obj) or w.deleted
        w.obj, w.deleted = event.obj, False
        # Status-only updates (pods going away after a sleep) keep the precondition fresh, no more.
        if changed:
            self.enqueue(key)

    def _on_namespace(self, event: WatchEvent) -> None:
        if event.initial:
            return
        name = str((event.obj.get("metadata") or {}).get("name", ""))
        for key in [k for k in self.workloads if k[1] == name]:
            self.enqueue(key)

    def _on_hpa(self, event: WatchEvent) -> None:
        name = str(event.obj["metadata"].get("name", ""))
        namespace = str(event.obj["metadata"].get("namespace", ""))
        for obj, present in ((event.old, False), (event.obj, event.type != "DELETED")):
            if obj is None:
                continue
            kind, target = obj["target"]
            key = (kind, namespace, target)
            names = self._hpa_targets.setdefault(key, set())
            if present:
                names.add(name)
            else:
                names.discard(name)
            if not names:
                del self._hpa_targets[key]
            if key in self.workloads:
                self.enqueue(key)

    def _on_rbac(self, event: WatchEvent) -> None:
        self._rbac = None
        self._rbac_generation += 1
        if not event.initial:
            for key, w in self.workloads.items():
                if w.inferred:
                    self.enqueue(key)

    async def _when_rbac_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.rbac_informers.values()))
        self._rbac = None
        for key, w in self.workloads.items():
            if w.inferred:
                self.enqueue(key)

    def _on_crd(self, event: WatchEvent) -> None:
        if event.initial:
            return
        # Discovery shows a new CRD a moment after it is established: look now and twice more.
        loop = asyncio.get_running_loop()
        self._discovery_poke.set()
        for delay in (1.0, 3.0):
            loop.call_later(delay, self._discovery_poke.set)

    def _on_object(self, resource: APIResource, event: WatchEvent) -> None:
        self.metrics.watch_events.labels(resource.group_resource).inc()
        users = self.hub.users(resource)
        if not users:
            return
        change = Change(event.type, event.obj, event.old, event.initial)
        now: datetime | None = None
        for key in users:
            w = self.workloads.get(key)
            if w is None or w.interest is None:
                continue
            found = find_activity(change, resource, w.interest)
            if found is not None:
                now = now or datetime.now(UTC)
                self._note_activity(w, found, now)

    def _note_activity(self, w: Workload, found: Activity, now: datetime) -> None:
        self.metrics.activity.inc()
        w.last_activity = now
        w.wake_reason = found.reason
        log.debug("activity", extra={"workload": "/".join(w.key), "reason": found.reason})
        status = w.pretend[0] if w.pretend else w.status
        if status.state == "asleep" or w.key in self._running:
            if w.activity_at is None:
                w.activity_at = asyncio.get_running_loop().time()
            if status.state == "asleep":
                self._wake_due(w.key)
            self.enqueue(w.key)

    # ---- discovery --------------------------------------------------------------------------

    async def refresh_discovery(self) -> None:
        resources = await self.kube.discover()  # a 304 costs no parsing; this check is cheap
        signature = frozenset(resources)
        if signature == self._discovery_signature:
            return
        self._discovery_signature = signature
        self.discovery = Discovery(resources)
        self._discovery_generation += 1
        log.debug("API discovery changed", extra={"types": len(resources)})
        for key in list(self.workloads):
            self.enqueue(key)

    async def _discovery_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._discovery_poke.wait(), timeout=self.settings.discovery_interval
                )
            self._discovery_poke.clear()
            try:
                await self.refresh_discovery()
            except KubeError as e:
                log.warning("API discovery failed: %s", e)

    # ---- reconcile --------------------------------------------------------------------------

    async def reconcile(self, key: WorkloadKey) -> None:
        """Look at one workload and do what its state asks."""
        w = self.workloads.get(key)
        if w is None:
            return
        if w.deleted:
            self._forget(w)
            return
        annotations = w.annotations
        config, problems = read_config(annotations)
        status, status_problems = read_status(annotations)
        w.config, w.status = config, status
        warnings: list[Warning_] = [("InvalidAnnotation", f"{p}; ignored") for p in problems]
        warnings += [("InvalidAnnotation", f"{p}; ignored") for p in status_problems]
        if not self._is_candidate(w, config):
            await self._unmanage(w, "not opted in", restore=not self._is_terminating(w))
            return
        config, inference_warnings = self._infer_if_needed(w, config)
        warnings += inference_warnings
        if config.idle_timeout is None or not config.has_kinds:
            has_timeout = any(k in annotations for k in _TIMEOUT_KEYS)
            has_kinds = any(k in annotations for k in _KIND_KEYS)
            if has_timeout and not has_kinds:
                warnings.append(
                    (
                        "NoKindToWakeOn",
                        f"{WATCHED_KINDS} is missing ({KIND_REF_FORM}); without a kind to wake "
                        "on it is never put to sleep",
                    )
                )
            if has_kinds and not has_timeout:
                warnings.append(
                    ("NoIdleTimeout", f"{IDLE_TIMEOUT} is missing (use {DURATION_FORM})")
                )
            await self._unmanage(w, "annotations incomplete")
            await self._warn(w, warnings)
            return
        if not w.managed:
            w.managed = True
            w.accounted_at = asyncio.get_running_loop().time()
            w.last_activity = (
                (status.asleep_since or _EPOCH)
                if status.state == "asleep"
                else max(w.last_activity, datetime.now(UTC))
            )
            log.info("managing", extra={"workload": "/".join(key)})
        await self._prepare(w, config)
        warnings += w.kind_warnings
        hpa = sorted(self._hpa_targets.get(key, ()))
        if hpa and status.state != "asleep":
            warnings.append(
                (
                    "HPATargeted",
                    f"targeted by HorizontalPodAutoscaler {', '.join(hpa)}; never put to sleep",
                )
            )
        await self._warn(w, warnings)
        if self.settings.dry_run and w.pretend is not None:
            status, replicas = w.pretend
        else:
            replicas = w.replicas
        self._set_interest(w, status)
        now = datetime.now(UTC)
        observed = Observed(
            replicas=replicas,
            last_activity=w.last_activity,
            hpa_targeted=bool(hpa),
            can_wake=bool(w.scopes[0]),
        )
        decision = decide(observed, config, status, now)
        if decision.next_check is not None:
            delay = (decision.next_check - now).total_seconds()
            self.timers.schedule(key, asyncio.get_running_loop().time() + max(delay, 0.0))
        if decision.action != "none":
            await self._act(w, decision, now)

    def _infer_if_needed(
        self, w: Workload, config: WorkloadConfig
    ) -> tuple[WorkloadConfig, list[Warning_]]:
        """Without kinds annotated, fall back to what the ServiceAccount's RBAC says."""
        annotations = w.annotations
        w.inferred, w.names = False, {}
        if config.idle_timeout is None or any(k in annotations for k in _KIND_KEYS):
            return config, []
        w.inferred = True  # RBAC changes now concern this workload
        if not all(i.synced.is_set() for i in self.rbac_informers.values()):
            return config, [("InferenceUnavailable", "RBAC is not readable; no kinds inferred")]
        if self._rbac is None:
            objects = [o for i in self.rbac_informers.values() for o in i.store.values()]
            self._rbac = RBACSnapshot.from_objects(objects)
        found = infer_kinds(
            self._rbac, w.namespace, w.service_account, self.discovery, ignore=INFERENCE_IGNORE
        )
        for canonical, names in found.resource_names.items():
            resolved = self.discovery.resolve(parse_kind_refs(canonical)[0][0])
            if resolved is not None:
                w.names[(resolved.group, resolved.kind)] = frozenset(names)
        warnings = [("InferenceLimited", message) for message in found.warnings]
        if not found.watched:
            return config, warnings
        watched, _ = parse_kind_refs(",".join(found.watched))
        owned, _ = parse_kind_refs(",".join(found.owned))
        namespaces = config.watch_namespaces
        if namespaces is None and found.namespaces:
            namespaces = tuple(found.namespaces)
        warnings.append(
            (
                "KindsInferred",
                f"{WATCHED_KINDS} is missing; inferred from the RBAC of ServiceAccount "
                f"{w.namespace}/{w.service_account}: watched {', '.join(found.watched)}"
                + (f"; owned {', '.join(found.owned)}" if found.owned else ""),
            )
        )
        inferred = dataclasses.replace(
            config, watched=tuple(watched), owned=tuple(owned), watch_namespaces=namespaces
        )
        return inferred, warnings

    def _is_terminating(self, w: Workload) -> bool:
        ns = self.namespaces.store.get(("", w.namespace)) or {}
        return bool((ns.get("metadata") or {}).get("deletionTimestamp"))

    def _is_candidate(self, w: Workload, config: WorkloadConfig) -> bool:
        ns = self.namespaces.store.get(("", w.namespace))
        meta = (ns or {}).get("metadata") or {}
        if meta.get("deletionTimestamp"):  # a namespace being deleted: waking there helps no one
            return False
        labels = meta.get("labels") or {}
        return labels.get(NAMESPACE_ENABLED_LABEL) == "true" and not config.opted_out

    def _set_interest(self, w: Workload, status: WorkloadStatus) -> None:
        since = status.asleep_since if status.state == "asleep" else status.last_activity
        interest = Interest(
            watched=w.scopes[0],
            owned=w.scopes[1],
            self_ref=("apps", w.kind, w.namespace, w.name),
            since=since,
            names=w.names,
            namespaces=w.reach[0],
            definitions=w.reach[1],
        )
        if interest != w.interest:
            w.interest = interest

    async def _prepare(self, w: Workload, config: WorkloadConfig) -> None:
        """Resolve kinds, check the ServiceAccount may watch them, and (un)subscribe watches."""
        signature = (
            config.watched,
            config.owned,
            config.watch_namespaces,
            self._discovery_generation,
            w.service_account,
            self._rbac_generation if w.inferred else 0,
            tuple(sorted(w.names.items())),
            self.access.epoch(),
        )
        if signature == w.signature:
            return
        if w.signature is not None and signature[:-1] == w.signature[:-1] and w.activity_at:
            return  # only the access answers aged: a pending wake does not wait to ask again
        annotations = w.annotations
        warnings: list[Warning_] = []
        scopes: tuple[dict[GroupKind, Scope], dict[GroupKind, Scope]] = ({}, {})
        wanted: set[APIResource] = set()
        lists = (
            (config.watched, WATCHED_KINDS if WATCHED_KINDS in annotations else IBM_WATCHED_KINDS),
            (config.owned, OWNED_KINDS if OWNED_KINDS in annotations else IBM_OWNED_KINDS),
        )
        for (refs, key), target in zip(lists, scopes, strict=True):
            for ref in refs:
                resource = self.discovery.resolve(ref)
                if resource is None:
                    warnings.append(
                        (
                            "UnknownKind",
                            f"{key}: {ref} is not served by the API server ({KIND_REF_FORM}); "
                            "retried when API discovery changes",
                        )
                    )
                    continue
                if "watch" not in resource.verbs or "list" not in resource.verbs:
                    warnings.append(
                        ("UnknownKind", f"{key}: {ref} cannot be listed and watched; ignored")
                    )
                    continue
                scope = await self._permitted_scope(w, ref, resource, config, warnings)
                if isinstance(scope, _Denied):
                    continue
                target[(resource.group, resource.kind)] = scope
                wanted.add(resource)
        if not scopes[0]:
            warnings.append(
                (
                    "NoKindToWakeOn",
                    "no watched kind can be watched (owned kinds count only through a watched "
                    "kind), so it is never put to sleep",
                )
            )
        w.signature, w.scopes, w.kind_warnings = signature, scopes, warnings
        watched = [
            (r, scopes[0][(r.group, r.kind)]) for r in wanted if (r.group, r.kind) in scopes[0]
        ]
        w.reach = working_namespaces(watched), definitions_of(r for r, _ in watched)
        self._set_interest(w, w.status)
        self._subscribe(w, wanted)

    async def _permitted_scope(
        self,
        w: Workload,
        ref: KindRef,
        resource: APIResource,
        config: WorkloadConfig,
        warnings: list[Warning_],
    ) -> Scope | _Denied:
        sa = f"{w.namespace}/{w.service_account}"

        names = sorted(w.names.get((resource.group, resource.kind), ()))

        async def may(scope: str) -> bool:
            account = (w.namespace, w.service_account, resource, scope)
            if not names:
                return await self.access.may_watch(*account)
            return all([await self.access.may_watch(*account, name) for name in names])

        def deny(where: str) -> _Denied:
            warnings.append(
                (
                    "NotPermitted",
                    f"ServiceAccount {sa} may not watch {resource.group_resource} {where}; "
                    f"changes to {ref} there are ignored",
                )
            )
            return _DENIED

        if not resource.namespaced:
            return None if await may("") else deny("(cluster-scoped)")
        wanted = config.watch_namespaces
        if wanted is None:
            if await may(""):
                return None
            if await may(w.namespace):
                return frozenset({w.namespace})
            return deny("in any namespace")
        if wanted == ("*",):
            return None if await may("") else deny(f"in all namespaces ({WATCH_NAMESPACES}: *)")
        allowed = []
        for namespace in wanted:
            if await may(namespace):
                allowed.append(namespace)
            else:
                deny(f"in namespace {namespace}")
        return frozenset(allowed) if allowed else _DENIED

    def _subscribe(self, w: Workload, wanted: set[APIResource]) -> None:
        for resource in w.resources - wanted:
            self.hub.release(resource, w.key)
        for resource in wanted - w.resources:
            informer = self.hub.acquire(resource, w.key)
            warm = informer is not None and informer.synced.is_set()
            if warm and informer is not None and w.status.state == "asleep":
                self._replay(w, resource, informer.store.values())
        w.resources = wanted

    def _replay(self, w: Workload, resource: APIResource, objects: Iterable[Obj]) -> None:
        """A warm watch's store, seen as an initial list by a workload that joins it late."""
        assert w.interest is not None
        for obj in list(objects):
            found = find_activity(Change("ADDED", obj, initial=True), resource, w.interest)
            if found is not None:
                self._note_activity(w, found, datetime.now(UTC))
                return

    async def _warn(self, w: Workload, warnings: list[Warning_]) -> None:
        current = set(warnings)
        w.warned &= current  # a warning that went away may be said again if it comes back
        if not self.is_leader:
            return
        for reason, message in dict.fromkeys(warnings):
            if (reason, message) in w.warned:
                continue
            w.warned.add((reason, message))
            log.warning(message, extra={"workload": "/".join(w.key), "reason": reason})
            await self._event(w, "Warning", reason, message)

    async def _event(self, w: Workload, type_: EventType, reason: str, message: str) -> None:
        # Events are written in the background, a few at a time: a burst of wakes must not queue
        # its scale writes behind the Events of the workloads woken just before.
        self._background(self._write_event(dict(w.obj), w.kind, type_, reason, message))

    async def _write_event(
        self, obj: Obj, kind: str, type_: EventType, reason: str, message: str
    ) -> None:
        await self._after_due_wakes()
        async with self._event_slots:
            await self.events.emit(obj, "apps/v1", kind, type_, reason, message)

    # ---- acting -----------------------------------------------------------------------------

    async def _act(self, w: Workload, decision: Decision, now: datetime) -> None:
        if not self.is_leader:
            return
        try:
            if self.settings.dry_run:
                await self._pretend(w, decision, now)
            elif decision.action == "sleep":
                await self._sleep(w, decision, now)
            elif decision.action == "wake":
                await self._wake(w, decision.replicas or 1, w.wake_reason or "activity")
            elif decision.action == "mark-awake":
                await self._mark_awake(w, decision, now)
        except Conflict:
            log.debug("conflict; looking again", extra={"workload": "/".join(w.key)})
            await self._refresh(w)
            self.enqueue(w.key)
        except NotFound:
            w.deleted = True
            self.enqueue(w.key)

    async def _sleep(self, w: Workload, decision: Decision, now: datetime) -> None:
        replicas = decision.replicas or w.replicas
        # Annotations first: a crash before the scale leaves a workload awake, never lost at zero.
        await self._patch_annotations(
            w,
            {
                STATE: "asleep",
                RESTORE_REPLICAS: str(replicas),
                ASLEEP_SINCE: format_time(now),
                LAST_ACTIVITY: format_time(w.last_activity),
            },
        )
        asleep_since = w.status.asleep_since
        for _ in range(3):
            try:
                await self._patch_scale(w, 0)
                break
            except Conflict:
                await self._refresh(w)
                status, _ = read_status(w.annotations)
                if status.asleep_since != asleep_since or w.replicas != replicas:
                    self.enqueue(w.key)
                    return
        else:
            self.enqueue(w.key)
            return
        loop = asyncio.get_running_loop()
        w.activity_at, w.accounted_at = None, loop.time()
        self.metrics.sleeps.inc()
        kinds = ", ".join(sorted(_kind_names(w)))
        message = (
            f"{decision.reason}: scaled from {replicas} to 0 replicas; wakes on a change to {kinds}"
        )
        log.info("sleeping", extra={"workload": "/".join(w.key), "reason": decision.reason})
        await self._event(w, "Normal", "Sleeping", message)
        self.enqueue(w.key)

    async def _wake(self, w: Workload, replicas: int, reason: str) -> None:
        loop = asyncio.get_running_loop()
        self._account(w, stop=True)
        await self._patch_scale(w, replicas)
        latency = None if w.activity_at is None else loop.time() - w.activity_at
        if latency is not None:
            self.metrics.wake_latency.observe(latency)
        self.metrics.wakes.inc()
        w.activity_at = None
        self._wake_done(w.key)
        # Recording the wake can wait for other scale writes: a crash before it leaves the
        # workload scaled up but annotated asleep, which reads as woken (by someone else).
        self._follow_ups[w.key] = self._record_wake(w, replicas, reason, latency)

    async def _record_wake(
        self, w: Workload, replicas: int, reason: str, latency: float | None
    ) -> None:
        awake = {STATE: "awake", LAST_ACTIVITY: format_time(w.last_activity)}
        try:
            for _ in range(5):
                try:
                    await self._patch_annotations(w, awake)
                    break
                except Conflict:
                    await self._refresh(w)
                    if read_status(w.annotations)[0].state != "asleep":
                        break
        except NotFound:
            w.deleted = True
        message = f"{reason}: scaled from 0 to {replicas} replicas"
        extra: dict[str, object] = {"workload": "/".join(w.key), "reason": reason}
        if latency is not None:  # from the watch event to the scale write's answer
            extra["latency_ms"] = round(latency * 1000, 1)
        log.info("woken", extra=extra)
        await self._event(w, "Normal", "Woken", message)
        self.enqueue(w.key)

    async def _mark_awake(self, w: Workload, decision: Decision, now: datetime) -> None:
        w.last_activity = now
        self._account(w, stop=True)
        w.activity_at = None
        await self._patch_annotations(w, {STATE: "awake", LAST_ACTIVITY: format_time(now)})
        message = (
            f"scaled to {decision.replicas} replicas by someone else while asleep; "
            "now awake, idle clock restarted"
        )
        log.info("woken externally", extra={"workload": "/".join(w.key)})
        await self._event(w, "Normal", "WokenExternally", message)
        self.enqueue(w.key)

    async def _pretend(self, w: Workload, decision: Decision, now: datetime) -> None:
        if decision.action == "sleep":
            replicas = decision.replicas or w.replicas
            status = WorkloadStatus("asleep", replicas, now, w.last_activity)
            w.pretend = (status, 0)
            message = f"dry run: would sleep ({decision.reason}), scaling {replicas} to 0"
            reason = "WouldSleep"
        elif decision.action == "wake":
            replicas = decision.replicas or 1
            w.pretend = (WorkloadStatus("awake", last_activity=w.last_activity), replicas)
            message = f"dry run: would wake ({w.wake_reason}), scaling 0 to {replicas}"
            reason = "WouldWake"
        else:
            w.pretend = None
            return
        w.activity_at = None
        log.info(message, extra={"workload": "/".join(w.key)})
        await self._event(w, "Normal", reason, message)
        self.enqueue(w.key)

    async def _unmanage(self, w: Workload, why: str, *, restore: bool = True) -> None:
        """Stop watching for a workload; one we put to sleep is woken, not left at zero."""
        self.timers.cancel(w.key)
        self._subscribe(w, set())
        w.interest, w.signature, w.scopes, w.pretend = None, None, ({}, {}), None
        if not w.managed and not (w.status.state == "asleep" and w.replicas == 0):
            return
        if w.managed:
            log.info("no longer managed", extra={"workload": "/".join(w.key), "why": why})
        w.managed = False
        if w.status.state == "asleep" and w.replicas == 0 and self.is_leader and restore:
            if self.settings.dry_run:
                return
            try:
                replicas = wake_replicas(w.config, w.status)
                await self._wake(w, replicas, f"no longer managed ({why})")
            except Conflict:
                await self._refresh(w)
                self.enqueue(w.key)

    def _forget(self, w: Workload) -> None:
        self._wake_done(w.key)
        self.timers.cancel(w.key)
        self._subscribe(w, set())
        self._account(w, stop=True)
        self.workloads.pop(w.key, None)

    # ---- writes -----------------------------------------------------------------------------

    async def _patch_annotations(self, w: Workload, annotations: dict[str, str]) -> None:
        body = {"metadata": {"resourceVersion": w.resource_version, "annotations": annotations}}
        fresh = await self.kube.patch(w.path, body)
        self._take(w, trim_workload(fresh))

    async def _patch_scale(self, w: Workload, replicas: int) -> None:
        body = {"metadata": {"resourceVersion": w.resource_version}, "spec": {"replicas": replicas}}
        scale = await self.kube.patch(w.path + "/scale", body)
        spec = dict(w.obj.get("spec") or {}, replicas=replicas)
        meta = dict(w.obj["metadata"])
        meta["resourceVersion"] = (scale.get("metadata") or {}).get("resourceVersion", "")
        self._take(w, {**w.obj, "metadata": meta, "spec": spec})

    async def _refresh(self, w: Workload) -> None:
        try:
            self._take(w, trim_workload(await self.kube.get(w.path)))
        except NotFound:
            w.deleted = True

    def _take(self, w: Workload, obj: Obj) -> None:
        w.obj = obj
        w.status, _ = read_status(w.annotations)

    def _account(self, w: Workload, *, stop: bool = False) -> None:
        if w.accounted_at is None:
            return
        now = asyncio.get_running_loop().time()
        if w.status.state == "asleep" and w.managed:
            saved = (now - w.accounted_at) * (w.status.restore_replicas or 1)
            self.metrics.replica_seconds_saved.inc(saved)
        w.accounted_at = None if stop else now

    async def _account_loop(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(10)
            rounds += 1
            if rounds % 6 == 0:  # a minute; a full collection every half hour
                release_free_memory(full=rounds % 180 == 0)
            for w in list(self.workloads.values()):
                if w.managed and self.is_leader:
                    if w.accounted_at is None:
                        w.accounted_at = asyncio.get_running_loop().time()
                    self._account(w)


def _kind_names(w: Workload) -> Iterable[str]:
    for group, kind in (*w.scopes[0], *w.scopes[1]):
        yield f"{kind}.{group}" if group else kind
