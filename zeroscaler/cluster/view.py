"""The cluster as both components see it: namespaces, RBAC, CRDs from watches; discovery kept fresh.

A new CRD is served a moment after it is created, so after a CRD changes discovery is asked again
every quarter second while a CRD it knows of is not served yet (for at most ten seconds), then at
the usual interval. A fresh discovery answer with the same types changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from zeroscaler.api import Kube, KubeError, Obj
from zeroscaler.cluster.informer import Informer, ListWatch, WatchEvent
from zeroscaler.core.inference import RBACSnapshot
from zeroscaler.core.kinds import APIResource, Discovery, api_resource_from_crd
from zeroscaler.core.links import links_of

log = logging.getLogger(__name__)

RBAC_PATHS = {
    "Role": "/apis/rbac.authorization.k8s.io/v1/roles",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAMESPACES_PATH = "/api/v1/namespaces"
_PENDING_RETRIES = 40  # asks, a quarter second apart, for a CRD that is not served yet
_PENDING_DELAY = 0.25
_FIRST_RETRY = 2.0  # seconds between attempts until discovery has answered once


def trim_namespace(obj: Obj) -> Obj:
    """Keep what either component reads of a Namespace."""
    meta = obj.get("metadata") or {}
    kept = ("name", "resourceVersion", "labels", "deletionTimestamp")
    return {"metadata": {k: meta[k] for k in kept if k in meta}}


def trim_rbac(kind: str) -> Callable[[Obj], Obj]:
    """Keep rules, subjects and roleRef; of metadata what `RBACSnapshot` reads."""

    def trim(obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion", "labels") if k in meta}
        return {**obj, "kind": kind, "metadata": kept}

    return trim


def trim_crd(obj: Obj) -> Obj:
    """What defines a CRD's served type and who converts it; schemas (often hundreds of KB) are
    dropped."""
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
        "links": links_of("CustomResourceDefinition", obj),
    }  # fmt: skip


def _trim_crd_name(obj: Obj) -> Obj:
    """A CRD's name, and the Service its conversion webhook names (for what workloads serve)."""
    meta = obj.get("metadata") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "resourceVersion") if k in meta},
        "links": links_of("CustomResourceDefinition", obj),
    }


def _nothing(*_: object) -> None:
    return None


class ClusterView:
    """Namespaces, RBAC and CRDs watched, discovery refreshed; changes are told by callback.

    `crd_specs` keeps each CRD's served type (the webhook names kinds before discovery serves
    them); without it only CRD names are kept. `on_discovery` is called with each new discovery
    snapshot; `on_rbac` when RBAC has changed after its first list, and once when that list is done.
    """

    def __init__(
        self,
        kube: Kube,
        *,
        discovery_interval: float,
        crd_specs: bool = False,
        on_discovery: Callable[[Discovery], None] = _nothing,
        on_rbac: Callable[[], None] = _nothing,
    ) -> None:
        self._kube = kube
        self._interval = discovery_interval
        self._on_discovery = on_discovery
        self._on_rbac = on_rbac
        self.namespaces = Informer(
            kube, NAMESPACES_PATH, ListWatch(metadata_only=True), transform=trim_namespace
        )
        # Whole objects, trimmed on arrival: a CRD's conversion webhook is in its spec.
        self.crds = Informer(kube, CRD_PATH, transform=trim_crd if crd_specs else _trim_crd_name)
        self.rbac_informers = {
            kind: Informer(kube, path, transform=trim_rbac(kind))
            for kind, path in RBAC_PATHS.items()
        }
        self.discovery = Discovery(())
        self.discovery_generation = 0  # raised with each discovery change
        self.rbac_generation = 0  # raised with each RBAC change
        self.discovered = asyncio.Event()
        self.crd_names: frozenset[str] = frozenset()
        self._served: list[APIResource] | None = None
        self._signature: frozenset[APIResource] = frozenset()
        self._rbac: RBACSnapshot | None = None
        self._with_pending: Discovery | None = None
        self._poke = asyncio.Event()
        self.crds.add_handler(self._on_crd)
        for informer in self.rbac_informers.values():
            informer.add_handler(self._on_rbac_event)

    @property
    def informers(self) -> list[Informer]:
        return [self.namespaces, self.crds, *self.rbac_informers.values()]

    async def run(self) -> None:
        """Watch and keep discovery fresh until cancelled."""
        await asyncio.gather(
            *(i.run() for i in self.informers), self._keep_discovery(), self._announce_rbac_synced()
        )

    def is_rbac_synced(self) -> bool:
        return all(i.synced.is_set() for i in self.rbac_informers.values())

    def rbac(self) -> RBACSnapshot:
        """The RBAC snapshot, rebuilt after a change on first use."""
        if self._rbac is None:
            objects = [o for i in self.rbac_informers.values() for o in i.store.values()]
            self._rbac = RBACSnapshot.from_objects(objects)
        return self._rbac

    def discovery_with_pending(self) -> Discovery:
        """Discovery plus the types of CRDs it does not serve yet (needs `crd_specs`)."""
        if self._with_pending is None:
            pending = [api_resource_from_crd(crd) for crd in self.crds.store.values()]
            self._with_pending = self.discovery.merged_with(r for r in pending if r is not None)
        return self._with_pending

    def _on_rbac_event(self, event: WatchEvent) -> None:
        self._rbac = None
        self.rbac_generation += 1
        if not event.initial:
            self._on_rbac()

    async def _announce_rbac_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.rbac_informers.values()))
        self._rbac = None
        self._on_rbac()

    def _on_crd(self, _: WatchEvent) -> None:
        self.crd_names = frozenset(name for _, name in self.crds.store)
        self._with_pending = None
        self._poke.set()

    async def _keep_discovery(self) -> None:
        retries = 0
        while True:
            self._poke.clear()  # before asking, so a CRD seen meanwhile makes us ask again
            try:
                self._take(await self._kube.discover())
                served = {r.group_resource for r in self.discovery.resources}
                pending = bool(self.crd_names - served)
            except KubeError as e:
                log.warning("API discovery failed, keeping the last snapshot: %s", e)
                pending = retries > 0
            retries = retries + 1 if pending and retries < _PENDING_RETRIES else 0
            if retries:
                delay = _PENDING_DELAY
            else:
                delay = self._interval if self.discovered.is_set() else _FIRST_RETRY
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), delay)

    def _take(self, served: list[APIResource]) -> None:
        if served is self._served:  # the same list: the server answered 304
            return
        self._served = served
        self.discovered.set()
        signature = frozenset(served)
        if signature == self._signature:
            return
        self._signature = signature
        self.discovery = Discovery(served)  # a new one misses every inference memo
        self._with_pending = None
        self.discovery_generation += 1
        log.debug("API discovery changed", extra={"types": len(served)})
        self._on_discovery(self.discovery)
