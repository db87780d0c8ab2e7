"""The live index of what workloads serve: watch events in, the workloads they concern enqueued."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from zeroscaler.api import Kube
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.controller.changes import ChangeFeed, Lookups
from zeroscaler.controller.context import Context
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.registrations import ServingIndex, trim_registration, trim_service
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.controller.workload_object import keep_workload, trim_workload
from zeroscaler.core.links import ACTIVATOR_OFF, Link, Serving
from zeroscaler.runtime.clock import ManualClock

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
KEY: WorkloadKey = ("Deployment", "ops", "op")
NEIGHBOUR: WorkloadKey = ("Deployment", "ops", "neighbour")
HOOK = Link("ValidatingWebhookConfiguration", "op-hooks", ("ops", "op-webhook"))
NO_KUBE: Kube = None  # type: ignore[assignment]  # nothing is listed: events are fed by hand


def deployment(name: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ops", "resourceVersion": "1", "generation": 2},
        "spec": {"replicas": 1, "template": {"metadata": {"labels": labels}}},
        **extra,
    }


def service(name: str, selector: dict[str, str]) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ops"}
    return trim_service({"metadata": meta, "spec": {"selector": selector}})


def hooks(*services: str) -> dict[str, Any]:
    webhooks = [
        {"name": f"{s}.example.com", "clientConfig": {"service": {"namespace": "ops", "name": s}}}
        for s in services
    ]
    raw = {"metadata": {"name": "op-hooks"}, "webhooks": webhooks}
    return trim_registration("ValidatingWebhookConfiguration")(raw)


WORKLOADS = {
    KEY: Workload(KEY, trim_workload(deployment("op", {"app": "op"})), NOW),
    NEIGHBOUR: Workload(NEIGHBOUR, trim_workload(deployment("n", {"app": "n"})), NOW),
}


def enqueuing(enqueue: Callable[[WorkloadKey], None], clock: ManualClock | None = None) -> Context:
    """A context that only enqueues (and, given one, reads `clock`)."""
    return Context(clock or ManualClock(NOW), lambda: True, enqueue, lambda work: work.close())


def index() -> tuple[ServingIndex, list[WorkloadKey]]:
    queued: list[WorkloadKey] = []
    crds = Informer(NO_KUBE, "/crds")
    found = ServingIndex(NO_KUBE, enqueuing(queued.append), crds, WORKLOADS)
    for informer in [*found.informers, crds]:
        informer.synced.set()
    return found, queued


def serving(found: ServingIndex, key: WorkloadKey) -> Serving | None:
    return found.serving(key, WORKLOADS[key].obj)


def links(found: ServingIndex, key: WorkloadKey) -> tuple[Link, ...]:
    served = serving(found, key)
    assert served is not None
    return served.links


def test_a_webhook_registered_later_enqueues_only_the_workload_behind_it() -> None:
    found, queued = index()
    found.on_service(WatchEvent("ADDED", service("op-webhook", {"app": "op"}), initial=True))
    assert links(found, KEY) == ()
    found.on_registration(WatchEvent("ADDED", hooks("op-webhook")))
    assert queued == [KEY]
    assert links(found, KEY) == (HOOK,)
    served = serving(found, KEY)
    assert served is not None
    assert [h.service for h in served.hooks] == [("ops", "op-webhook")]
    assert served.unanswered == ACTIVATOR_OFF  # no activator here
    assert links(found, NEIGHBOUR) == ()
    queued.clear()
    found.on_registration(WatchEvent("DELETED", hooks("op-webhook"), old=hooks("op-webhook")))
    assert queued == [KEY]
    assert links(found, KEY) == ()


def test_a_service_that_comes_to_select_a_workload_links_it() -> None:
    found, queued = index()
    found.on_registration(WatchEvent("ADDED", hooks("op-webhook"), initial=True))
    before = service("op-webhook", {"app": "n"})
    after = service("op-webhook", {"app": "op"})
    found.on_service(WatchEvent("ADDED", before, initial=True))
    assert links(found, NEIGHBOUR) == (HOOK,)
    assert queued == []  # what was listed first is no news
    found.on_service(WatchEvent("MODIFIED", after, old=before))
    assert sorted(queued) == sorted([KEY, NEIGHBOUR])  # the one it left and the one it took
    assert links(found, KEY) == (HOOK,)
    assert links(found, NEIGHBOUR) == ()


def test_nothing_is_known_to_serve_nothing_until_every_watch_has_listed() -> None:
    found, _ = index()
    found.registrations["APIService"].synced.clear()
    assert serving(found, KEY) is None


def test_readiness_after_a_wake_starts_the_idle_clock() -> None:
    workloads: dict[WorkloadKey, Workload] = {}
    queued: list[WorkloadKey] = []
    later = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)
    clock = ManualClock(NOW)
    feed = ChangeFeed(
        workloads,
        enqueuing(queued.append, clock),
        Metrics(lambda: True),
        lambda *_: None,
        Lookups(users=lambda _: ()),
    )
    starting = deployment("op", {"app": "op"}, status={"observedGeneration": 2})
    feed.on_workload("Deployment", WatchEvent("ADDED", keep_workload(starting)))
    w = workloads[KEY]
    assert w.idle.starting  # first seen with no replica Ready
    assert w.idle.last_activity == NOW
    queued.clear()
    clock.advance((later - NOW).total_seconds())  # five minutes on
    ready = deployment("op", {"app": "op"}, status={"observedGeneration": 2, "readyReplicas": 1})
    ready["metadata"]["resourceVersion"] = "2"
    feed.on_workload("Deployment", WatchEvent("MODIFIED", keep_workload(ready)))
    assert not w.idle.starting
    assert w.idle.last_activity == later
    assert queued == [KEY]  # a status-only update, yet decided again


def test_every_workload_is_looked_at_again_once_all_have_listed() -> None:
    queued: list[WorkloadKey] = []
    crds = Informer(NO_KUBE, "/crds")
    found = ServingIndex(NO_KUBE, enqueuing(queued.append), crds, WORKLOADS)
    for informer in found.informers:
        informer.synced.set()
        found._on_synced()  # as each list ends
    assert queued == []  # the CRDs are not listed yet
    crds.synced.set()
    found._on_synced()
    found._on_synced()  # a later re-list changes nothing
    assert sorted(queued) == sorted(WORKLOADS)


def test_a_webhook_whose_rules_change_enqueues_the_workload_behind_it() -> None:
    # Its links stay the same, but whether its backend may sleep turns on what the rules match.
    found, queued = index()
    found.on_service(WatchEvent("ADDED", service("op-webhook", {"app": "op"}), initial=True))
    before = hooks("op-webhook")
    found.on_registration(WatchEvent("ADDED", before, initial=True))
    assert queued == []
    raw = {
        "metadata": {"name": "op-hooks"},
        "webhooks": [
            {
                "name": "op-webhook.example.com",
                "clientConfig": {"service": {"namespace": "ops", "name": "op-webhook"}},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "elsewhere"}},
            }
        ],
    }
    after = trim_registration("ValidatingWebhookConfiguration")(raw)
    found.on_registration(WatchEvent("MODIFIED", after, old=before))
    assert queued == [KEY]
