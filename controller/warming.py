"""A start's head start: the shared watches its workloads name are listed while the rest starts.

Without it a type is listed only when the first workload that watches it is reconciled, after
the controller is ready; with it, as soon as the workload watch shows a workload whose
annotations name the type (and discovery serves it, and the controller may watch it). A warm
watch delivers nothing to anyone: a workload is counted in, as always, by its own reconcile
after its access checks, and finds the store filled (an asleep one sees it as an initial list,
and compares its census). A change to a type no workload has subscribed to yet asks for an early
first reconcile of the workloads that name it there, so the wakes of a restart come during the
catch-up, not after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from zeroscaler.api import KubeError
from zeroscaler.controller.context import Context, Watching
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.core.activity import Scope
from zeroscaler.core.early_watches import named_types
from zeroscaler.core.kinds import APIResource

log = logging.getLogger(__name__)

ANYWHERE = "*"  # the waiting index's key for workloads whose namespaces RBAC will say


class Warming:
    """Warms the shared watches named by the workloads seen while starting; `finish` ends it."""

    def __init__(
        self,
        context: Context,
        watching: Watching,
        workloads: Mapping[WorkloadKey, Workload],
        hurry: Callable[[WorkloadKey], None],
        is_opted_in: Callable[[str], bool] = lambda _: True,
        *,
        active: bool = True,
    ) -> None:
        self._hub = watching.hub
        self._is_opted_in = is_opted_in
        self._access = watching.access
        self._cluster = watching.cluster
        self._workloads = workloads
        self._background = context.background
        self._hurry = hurry
        self.active = active
        self._asked: set[APIResource] = set()  # types warmed, or being checked
        self._allowed: set[APIResource] = set()  # types the controller may watch everywhere
        self._reach: dict[APIResource, Scope] = {}  # where each type is to be warmed
        # Seen before API discovery answered or the namespaces were listed.
        self._undiscovered: list[WorkloadKey] = []
        # Per type, by namespace (ANYWHERE: any), the workloads that name it and have not been
        # reconciled since: a change there asks for their first reconcile at once.
        self._waiting: dict[APIResource, dict[str, set[WorkloadKey]]] = {}

    def on_workload(self, key: WorkloadKey, annotations: Mapping[str, str]) -> None:
        """A workload first seen: warm what its annotations name."""
        if not self.active:
            return
        if not (self._cluster.discovered.is_set() and self._cluster.namespaces.synced.is_set()):
            if not self._undiscovered:
                self._background(self._after_discovery())
            self._undiscovered.append(key)
            return
        if not self._is_opted_in(key[1]):
            return  # not managed there: nothing of it is watched
        named = named_types(annotations, self._cluster.discovery)
        for resource in named.resources:
            by_namespace = self._waiting.setdefault(resource, {})
            for namespace in named.namespaces or (ANYWHERE,):
                by_namespace.setdefault(namespace, set()).add(key)
            if not named.listed:
                continue  # where RBAC will say: nothing to warm until its reconcile knows
            was = self._reach.get(resource, frozenset())
            wanted = None if was is None or named.namespaces is None else was | named.namespaces
            self._reach[resource] = wanted
            if resource in self._allowed:
                if wanted != was:
                    self._hub.warm(resource, wanted)
            elif resource not in self._asked:
                self._asked.add(resource)
                self._background(self._warm(resource))

    async def _after_discovery(self) -> None:
        await self._cluster.discovered.wait()
        await self._cluster.namespaces.synced.wait()
        keys, self._undiscovered = self._undiscovered, []
        for key in keys:
            w = self._workloads.get(key)
            if w is not None:
                self.on_workload(key, w.annotations)

    async def _warm(self, resource: APIResource) -> None:
        """Start the watch, if the controller itself may watch the type everywhere (the same
        question a workload's reconcile asks, answered once for both)."""
        try:
            allowed = await self._access.may_watch_everywhere(resource)
        except KubeError as e:
            log.info("not warmed: %s", e, extra={"resource": resource.group_resource})
            return
        if allowed and self.active:
            self._allowed.add(resource)
            self._hub.warm(resource, self._reach.get(resource, frozenset()))

    def on_change(self, resource: APIResource, namespace: str) -> None:
        """A change (not an initial list) to `resource`: the workloads that name it there and are
        not reconciled yet are reconciled first, once each."""
        by_namespace = self._waiting.get(resource)
        if not by_namespace:
            return
        keys = by_namespace.pop(ANYWHERE, set())
        if not resource.namespaced:  # cluster-scoped: whatever namespaces they named
            for more in by_namespace.values():
                keys |= more
            by_namespace.clear()
        else:
            keys |= by_namespace.pop(namespace, set())
        for key in keys:
            w = self._workloads.get(key)
            if w is not None and w.watch.signature is None:  # not subscribed yet
                self._hurry(key)

    def finish(self) -> None:
        """Every workload has had its first look: stop the warm watches nobody took, and warm
        nothing more (a workload created from now on is reconciled at once anyway)."""
        if not self.active:
            return
        self.active = False
        self._waiting.clear()
        self._undiscovered.clear()
        self._reach.clear()
        unused = self._hub.drop_unused()
        log.info("start warmed", extra={"types": len(self._asked), "unused": len(unused)})
