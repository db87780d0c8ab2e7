"""The live view: the shared cluster view (RBAC, namespaces, CRDs, discovery) plus policy."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from zeroscaler.api import Kube
from zeroscaler.cluster.events import EventRecorder
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.cluster.policy_watch import PolicyWatch, Rejection
from zeroscaler.cluster.view import ClusterView
from zeroscaler.runtime.clock import Clock, LoopClock
from zeroscaler.webhook.settings import WebhookSettings
from zeroscaler.webhook.state import View

log = logging.getLogger(__name__)


class LiveSource:
    """Watches everything a decision needs; readiness waits until every cache has listed once."""

    def __init__(
        self,
        kube: Kube,
        settings: WebhookSettings,
        registry: CollectorRegistry,
        *,
        cluster: ClusterView | None = None,
        policies: PolicyWatch | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.clock: Clock = clock or LoopClock()
        self.events = EventRecorder(kube, self.clock, "zeroscaler-webhook")
        # A view or policy watch given is the controller's in the same process: it runs them and
        # closes their client, and this source only reads them.
        self._owns = cluster is None
        self.cluster = (
            ClusterView(kube, discovery_interval=settings.discovery_interval, crd_specs=True)
            if cluster is None
            else cluster
        )
        self._owns_policies = policies is None
        if policies is None:
            self.policies = PolicyWatch(
                kube, settings.namespace, on_change=self._on_policy, on_rejected=self._on_rejected
            )
        else:
            self.policies = policies
            policies.listen(on_change=self._on_policy, on_rejected=self._on_rejected)
        self.keeper = self.policies.keeper
        self._namespace_seen = asyncio.Event()
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.policy_loads = Counter(
            "zeroscaler_webhook_policy_loads_total",
            "Policy ConfigMap changes taken (result=ok) or rejected (result=invalid)",
            ["result"],
            registry=registry,
        )
        self.discovery_kinds = Gauge(
            "zeroscaler_webhook_discovery_kinds",
            "Resource types in the discovery cache",
            registry=registry,
        )
        self.discovery_kinds.set_function(lambda: len(self.cluster.discovery.resources))
        self.cluster.namespaces.add_handler(self._on_namespace)

    @property
    def _informers(self) -> list[Informer]:
        return [*self.cluster.informers, self.policies.informer]

    async def start(self) -> None:
        runs = [self.cluster.run()] if self._owns else []
        if self._owns_policies:
            runs.append(self.policies.run())
        self._tasks = [asyncio.create_task(run) for run in runs]

    async def stop(self) -> None:
        for task in [*self._tasks, *self._side_tasks]:
            task.cancel()
        for task in [*self._tasks, *self._side_tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._owns:
            await self.kube.aclose()

    async def wait_ready(self) -> None:
        synced = (i.synced.wait() for i in self._informers)
        await asyncio.gather(*synced, self.cluster.discovered.wait())

    def is_ready(self) -> bool:
        synced = all(i.synced.is_set() for i in self._informers)
        return self.cluster.discovered.is_set() and synced

    def view(self) -> View:
        return View(
            policy=self.keeper.policy,
            rbac=self.cluster.rbac(),
            discovery=self.cluster.discovery_with_pending(),
            custom_resources=self.cluster.crd_names,
        )

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """Labels from the cache, waiting briefly for a namespace created a moment ago."""
        deadline = self.clock.monotonic() + self.settings.namespace_wait
        while True:
            obj = self.cluster.namespaces.store.get(("", namespace))
            if obj is not None:
                labels = (obj.get("metadata") or {}).get("labels") or {}
                return {str(k): str(v) for k, v in labels.items()}
            left = deadline - self.clock.monotonic()
            if left <= 0:
                return None
            self._namespace_seen.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._namespace_seen.wait(), left)

    def _on_namespace(self, _: WatchEvent) -> None:
        self._namespace_seen.set()

    def _on_policy(self) -> None:
        self.policy_loads.labels("ok").inc()
        log.info("policy in force from %s", ", ".join(self.keeper.sources) or "built-in defaults")

    def _on_rejected(self, rejection: Rejection) -> None:
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
