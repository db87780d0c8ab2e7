"""What each workload serves, kept live: Services, webhook configurations, APIServices and CRDs.

Watches keep only what `zeroscaler.core.links` reads: a Service's selector, the Services a
registration names. A change enqueues the workloads whose pods the Services involved select, so a
link that appears later is decided on at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from zeroscaler.api import Kube, Obj
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.controller.context import Context
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.controller.workload_object import WorkloadObject
from zeroscaler.core.coverage import Hook, hooks_of
from zeroscaler.core.links import (
    ACTIVATOR_OFF,
    ADMISSION_KINDS,
    Link,
    LinkKind,
    ServiceRef,
    Serving,
    find_serving,
    links_of,
    selects,
)

_Ref = TypeVar("_Ref", Link, Hook)
SERVICES_PATH = "/api/v1/services"
# Why no activator answers for these webhooks of a workload, or None.
Activation = Callable[[WorkloadKey, WorkloadObject, tuple[Hook, ...]], str | None]
_ADMISSION = "/apis/admissionregistration.k8s.io/v1"
REGISTRATION_PATHS: dict[LinkKind, str] = {
    "MutatingWebhookConfiguration": f"{_ADMISSION}/mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": f"{_ADMISSION}/validatingwebhookconfigurations",
    "APIService": "/apis/apiregistration.k8s.io/v1/apiservices",
}


def _meta(obj: Obj) -> dict[str, object]:
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}


def trim_service(obj: Obj) -> Obj:
    """Keep a Service's name and selector."""
    return {"metadata": _meta(obj), "selector": dict((obj.get("spec") or {}).get("selector") or {})}


def trim_registration(kind: LinkKind) -> Callable[[Obj], Obj]:
    """Keep a registration's name and the Services it names (and, for admission, which
    requests each webhook is sent, for the activator to copy)."""
    mutating = kind == "MutatingWebhookConfiguration"

    def trim(obj: Obj) -> Obj:
        trimmed = {"metadata": _meta(obj), "links": links_of(kind, obj)}
        if kind in ADMISSION_KINDS:
            trimmed["hooks"] = hooks_of(mutating, obj)
        return trimmed

    return trim


class ServingIndex:
    """Services by namespace and links by Service, from watches; `serving` answers per workload."""

    def __init__(
        self,
        kube: Kube,
        context: Context,
        crds: Informer,
        workloads: Mapping[WorkloadKey, Workload],
        *,
        activation: Activation = lambda *_: ACTIVATOR_OFF,
        on_hooks: Callable[[], None] = lambda: None,
    ) -> None:
        self._workloads = workloads
        self._enqueue = context.enqueue
        self._activation = activation  # why no activator answers for these webhooks, or None
        self._on_hooks = on_hooks  # told when any admission webhook's rules change
        self._services: dict[str, dict[str, dict[str, str]]] = {}  # namespace: name: selector
        self._links: dict[ServiceRef, set[Link]] = {}
        self._hooks: dict[ServiceRef, set[Hook]] = {}
        self.services = Informer(kube, SERVICES_PATH, transform=trim_service)
        self.services.add_handler(self.on_service)
        self.registrations = {
            kind: Informer(kube, path, transform=trim_registration(kind))
            for kind, path in REGISTRATION_PATHS.items()
        }
        for informer in self.registrations.values():
            informer.add_handler(self.on_registration)
        self._crds = crds
        crds.add_handler(self.on_registration)
        self._known = False
        for informer in [*self.informers, crds]:
            informer.add_sync_handler(self._on_synced)

    @property
    def informers(self) -> list[Informer]:
        """The watches this index runs (the CRD watch is the cluster view's)."""
        return [self.services, *self.registrations.values()]

    def is_synced(self) -> bool:
        """Whether every watch it reads has listed: until then nothing is known to serve nothing."""
        return all(i.synced.is_set() for i in [*self.informers, self._crds])

    def _on_synced(self) -> None:
        """Once all have listed, look at every workload again: none was put to sleep before."""
        if not self._known and self.is_synced():
            self._known = True
            for key in list(self._workloads):
                self._enqueue(key)

    def serving(self, key: WorkloadKey, obj: WorkloadObject) -> Serving | None:
        """What the workload of `key`, as `obj`, serves; None until every watch has listed."""
        if not self.is_synced():
            return None
        namespace = key[1]
        services = self._services.get(namespace, {})
        labels = obj.pod_labels
        found = find_serving(namespace, labels, services.items(), self._links, self._hooks)
        if not found.hooks:
            return found
        return dataclasses.replace(found, unanswered=self._activation(key, obj, found.hooks))

    def services_of(self, namespace: str, obj: WorkloadObject) -> tuple[str, ...]:
        """The Services of its namespace whose selectors select its pods."""
        services = self._services.get(namespace, {})
        return tuple(sorted(n for n, s in services.items() if selects(s, obj.pod_labels)))

    def on_service(self, event: WatchEvent) -> None:
        meta = event.obj["metadata"]
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        in_ns = self._services.setdefault(namespace, {})
        old = in_ns.get(name)
        if event.type == "DELETED":
            in_ns.pop(name, None)
            if not in_ns:
                del self._services[namespace]
        else:
            in_ns[name] = event.obj["selector"]
        if event.initial:
            return
        selectors = [s for s in (old, event.obj["selector"]) if s]
        if (namespace, name) in self._links:  # only a Service something calls changes anything
            self._enqueue_selected(namespace, selectors)

    def on_registration(self, event: WatchEvent) -> None:
        old_hooks: set[Hook] = set((event.old or {}).get("hooks") or ())
        new_hooks: set[Hook] = set(() if event.type == "DELETED" else event.obj.get("hooks") or ())
        changed: set[ServiceRef] = set()
        if old_hooks != new_hooks:
            _move(self._hooks, old_hooks - new_hooks, new_hooks - old_hooks)
            self._on_hooks()
            # Whether its backend may sleep turns on what its hooks match, as much as on links.
            changed |= {hook.service for hook in old_hooks ^ new_hooks}
        old: Iterable[Link] = (event.old or {}).get("links") or ()
        new: Iterable[Link] = () if event.type == "DELETED" else event.obj.get("links") or ()
        old, new = set(old), set(new)
        if old != new:
            _move(self._links, old - new, new - old)
            changed |= {link.service for link in old ^ new}
        if event.initial:
            return
        for namespace, name in changed:
            selector = self._services.get(namespace, {}).get(name)
            if selector:
                self._enqueue_selected(namespace, [selector])

    def _enqueue_selected(self, namespace: str, selectors: list[dict[str, str]]) -> None:
        for key, w in self._workloads.items():
            if key[1] == namespace and any(selects(s, w.pod_labels) for s in selectors):
                self._enqueue(key)


def _move(index: dict[ServiceRef, set[_Ref]], gone: Iterable[_Ref], came: Iterable[_Ref]) -> None:
    """Take `gone` out of an index by Service and put `came` in."""
    for item in gone:
        linked = index.get(item.service)
        if linked is not None:
            linked.discard(item)
            if not linked:
                del index[item.service]
    for item in came:
        index.setdefault(item.service, set()).add(item)
