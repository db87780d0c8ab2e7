"""The live view: RBAC, namespaces, policy ConfigMaps and CRDs from watches; discovery polled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from webhook.policies import PolicyKeeper, Rejection
from webhook.settings import Settings
from webhook.state import View
from zeroscaler.core.annotations import POLICY_LABEL
from zeroscaler.core.inference import RBACSnapshot
from zeroscaler.core.kinds import APIResource, Discovery, api_resource_from_crd
from zeroscaler.events import EventRecorder
from zeroscaler.kube import Kube, KubeError, Obj
from zeroscaler.watching import Informer, WatchEvent

log = logging.getLogger(__name__)

RBAC_PATHS = {
    "Role": "/apis/rbac.authorization.k8s.io/v1/roles",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMESPACES_PATH = "/api/v1/namespaces"
_DISCOVERY_RETRIES = 40  # a new CRD is served a moment after it is created


def _slim(kind: str) -> Callable[[Obj], Obj]:
    def shape(obj: Obj) -> Obj:
        meta = dict(obj.get("metadata") or {})
        meta.pop("managedFields", None)
        meta.pop("annotations", None)  # last-applied copies can be large; RBAC needs none
        return {**obj, "kind": kind, "metadata": meta}

    return shape


def _crd_essentials(obj: Obj) -> Obj:
    """What defines a CRD's served type; schemas (often hundreds of KB) are dropped."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    versions = [
        {k: v.get(k) for k in ("name", "served", "storage", "subresources")}
        for v in spec.get("versions") or []
    ]
    return {
        "metadata": {"name": meta.get("name"), "resourceVersion": meta.get("resourceVersion")},
        "spec": {"group": spec.get("group"), "names": spec.get("names"),
                 "scope": spec.get("scope"), "versions": versions},
    }  # fmt: skip


class LiveSource:
    """Watches everything a decision needs; readiness waits until every cache has listed once."""

    def __init__(self, kube: Kube, settings: Settings, registry: CollectorRegistry) -> None:
        self.kube = kube
        self.settings = settings
        self.keeper = PolicyKeeper()
        self.events = EventRecorder(kube, "zeroscaler-webhook")
        self.rbac_informers = {
            kind: Informer(kube, path, transform=_slim(kind)) for kind, path in RBAC_PATHS.items()
        }
        self.namespaces = Informer(kube, NAMESPACES_PATH, metadata_only=True)
        self.crds = Informer(kube, CRD_PATH, transform=_crd_essentials)
        self.policies = Informer(
            kube,
            f"/api/v1/namespaces/{settings.namespace}/configmaps",
            params={"labelSelector": f"{POLICY_LABEL}=true"},
        )
        self._rbac: RBACSnapshot | None = None
        self._discovery: Discovery | None = None
        self._discovery_source: list[APIResource] | None = None
        self._merged: Discovery | None = None  # discovery plus CRDs it does not serve yet
        self._crd_names: frozenset[str] = frozenset()
        self._wake_discovery = asyncio.Event()
        self._discovered = asyncio.Event()
        self._namespace_seen = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._side_tasks: set[asyncio.Task[None]] = set()
        self.policy_loads = Counter(
            "zeroscaler_webhook_policy_loads",
            "Policy ConfigMap changes taken (result=ok) or rejected (result=invalid)",
            ["result"],
            registry=registry,
        )
        self.discovery_kinds = Gauge(
            "zeroscaler_webhook_discovery_kinds",
            "Resource types in the discovery cache",
            registry=registry,
        )
        for informer in self.rbac_informers.values():
            informer.add_handler(self._on_rbac)
        self.crds.add_handler(self._on_crd)
        self.namespaces.add_handler(self._on_namespace)
        self.policies.add_handler(self._on_policy)

    async def start(self) -> None:
        informers = [*self.rbac_informers.values(), self.namespaces, self.crds, self.policies]
        self._tasks = [asyncio.create_task(i.run()) for i in informers]
        self._tasks.append(asyncio.create_task(self._refresh_discovery()))

    async def stop(self) -> None:
        for task in [*self._tasks, *self._side_tasks]:
            task.cancel()
        for task in [*self._tasks, *self._side_tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.kube.aclose()

    async def wait_ready(self) -> None:
        informers = [*self.rbac_informers.values(), self.namespaces, self.crds, self.policies]
        await asyncio.gather(*(i.synced.wait() for i in informers), self._discovered.wait())

    def is_ready(self) -> bool:
        informers = [*self.rbac_informers.values(), self.namespaces, self.crds, self.policies]
        return self._discovery is not None and all(i.synced.is_set() for i in informers)

    def view(self) -> View:
        if self._rbac is None:
            objects = [o for i in self.rbac_informers.values() for o in i.store.values()]
            self._rbac = RBACSnapshot.from_objects(objects)
        return View(
            policy=self.keeper.policy,
            rbac=self._rbac,
            discovery=self._discovery_view(),
            custom_resources=self._crd_names,
        )

    def _discovery_view(self) -> Discovery:
        if self._merged is None:
            pending: list[APIResource] = []
            for crd in self.crds.store.values():
                resource = api_resource_from_crd(crd)
                if resource is not None:
                    pending.append(resource)
            self._merged = (self._discovery or Discovery()).merged_with(pending)
        return self._merged

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """Labels from the cache, waiting briefly for a namespace created a moment ago."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.namespace_wait
        while True:
            obj = self.namespaces.store.get(("", namespace))
            if obj is not None:
                labels = (obj.get("metadata") or {}).get("labels") or {}
                return {str(k): str(v) for k, v in labels.items()}
            left = deadline - loop.time()
            if left <= 0:
                return None
            self._namespace_seen.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._namespace_seen.wait(), left)

    def _on_rbac(self, _: WatchEvent) -> None:
        self._rbac = None

    def _on_namespace(self, _: WatchEvent) -> None:
        self._namespace_seen.set()

    def _on_crd(self, _: WatchEvent) -> None:
        self._crd_names = frozenset(name for _, name in self.crds.store)
        self._merged = None
        self._wake_discovery.set()

    def _on_policy(self, event: WatchEvent) -> None:
        if event.type == "DELETED":
            rejection = self.keeper.remove(event.obj)
        else:
            rejection = self.keeper.update(event.obj)
        if rejection is None:
            self.policy_loads.labels("ok").inc()
            log.info(
                "policy in force from %s", ", ".join(self.keeper.sources) or "built-in defaults"
            )
            return
        self.policy_loads.labels("invalid").inc()
        log.error(
            "policy ConfigMap %s/%s rejected: %s",
            rejection.namespace,
            rejection.name,
            rejection.message,
        )
        task = asyncio.get_running_loop().create_task(self._report(rejection))
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def _report(self, rejection: Rejection) -> None:
        configmap = {
            "metadata": {
                "namespace": rejection.namespace,
                "name": rejection.name,
                "uid": rejection.uid,
            }
        }
        await self.events.emit(
            configmap, "v1", "ConfigMap", "Warning", "InvalidPolicy", rejection.message
        )

    async def _refresh_discovery(self) -> None:
        retries = 0
        while True:
            self._wake_discovery.clear()  # before the call, so a CRD seen meanwhile wakes us again
            try:
                found = await self.kube.discover()
            except KubeError as e:
                log.warning("discovery failed, keeping the last snapshot: %s", e)
                found = None
            if found is not None:
                if found is not self._discovery_source:  # the same list: the server said 304
                    self._discovery_source = found
                    self._discovery = Discovery(found)  # a new one misses every inference memo
                    self._merged = None
                    self.discovery_kinds.set(len(found))
                self._discovered.set()
                served = {r.group_resource for r in found}
                missing = self._crd_names - served
                retries = retries + 1 if missing and retries < _DISCOVERY_RETRIES else 0
            if retries:
                await asyncio.sleep(0.25)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._wake_discovery.wait(), self.settings.discovery_interval
                )
