"""Watch events in: workload records kept, activity noted, wakes made due, reconciles asked for.

Every handler is synchronous and cheap: it runs inside a watch's loop, and deciding is left to the
reconcile that it asks for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from prometheus_client import Counter

from zeroscaler.api import Obj
from zeroscaler.cluster.informer import Readable, WatchEvent, key_of
from zeroscaler.controller.clock import Clock
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.workload import (
    Workload,
    WorkloadKey,
    initial_last_activity,
    is_newer,
    reconcile_inputs,
    settle_start,
)
from zeroscaler.core.activity import Activity, Change, Scope, due_of, find_activity
from zeroscaler.core.flapping import activity_cause
from zeroscaler.core.kinds import APIResource

log = logging.getLogger(__name__)

Enqueue = Callable[[WorkloadKey], None]


def trim_hpa(obj: Obj) -> Obj:
    """Keep an HPA's name and the workload it targets."""
    meta = obj.get("metadata") or {}
    target = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
        "target": (str(target.get("kind", "")), str(target.get("name", ""))),
    }


class ChangeFeed:
    """Keeps the workload table and the HPA targets from watches, and enqueues what they touch."""

    def __init__(
        self,
        workloads: dict[WorkloadKey, Workload],
        *,
        clock: Clock,
        metrics: Metrics,
        enqueue: Enqueue,
        is_running: Callable[[WorkloadKey], bool],
        wake_due: Enqueue,
        users: Callable[[APIResource], Iterable[WorkloadKey]],
        is_opted_in: Callable[[str], bool] = lambda _: True,
        users_in: Callable[[APIResource, str], Iterable[WorkloadKey]] | None = None,
    ) -> None:
        self._workloads = workloads
        self._clock = clock
        self._metrics = metrics
        self._enqueue = enqueue
        self._is_running = is_running
        self._wake_due = wake_due
        self._users = users
        self._users_in = users_in or (lambda resource, _: users(resource))  # by namespace
        self._is_opted_in = is_opted_in
        self._hpa_targets: dict[WorkloadKey, set[str]] = {}
        self._event_counters: dict[APIResource, Counter] = {}
        # A start's warming (`warming.py`): told of each workload first seen, and of each change
        # to a watched type, while it lasts.
        self.on_first_seen: Callable[[WorkloadKey, Mapping[str, str]], None] | None = None
        self.on_change: Callable[[APIResource, str], None] | None = None
        # What a workload holding a watch missed, read from its store in the namespaces given
        # (None: all) (`Subscriptions.catch_up`).
        self.catch_up: Callable[[Workload, APIResource, Readable, Scope], None] | None = None
        self.check_census: Callable[[Workload], None] | None = None  # `Subscriptions.check_census`

    def hpa_names(self, key: WorkloadKey) -> list[str]:
        """The HorizontalPodAutoscalers that target a workload, sorted."""
        return sorted(self._hpa_targets.get(key, ()))

    def enqueue_all(self) -> None:
        for key in list(self._workloads):
            self._enqueue(key)

    def enqueue_inferred(self) -> None:
        """RBAC changed: look again at every opted-in workload whose kinds come from it."""
        for key, w in self._workloads.items():
            if w.watch.inferred or (w.follows_rbac and self._is_opted_in(w.namespace)):
                self._enqueue(key)

    def on_workload(self, kind: str, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        key = (kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
        w = self._workloads.get(key)
        if event.type == "DELETED":
            if w is not None:
                w.deleted = True
                self._enqueue(key)
            return
        if w is None:
            start = initial_last_activity(meta.get("annotations") or {}, self._clock.now())
            w = Workload(key, event.obj, last_activity=start)
            # Not Ready when first seen (just created, or woken before a restart): its clock
            # waits for Ready, as after a wake.
            w.idle.starting = w.replicas > 0 and w.is_ready() is False
            self._workloads[key] = w
            self._enqueue(key)
            if self.on_first_seen is not None:
                self.on_first_seen(key, meta.get("annotations") or {})
            return
        if not is_newer(event.obj, w.obj):
            return
        changed = reconcile_inputs(event.obj) != reconcile_inputs(w.obj) or w.deleted
        w.obj, w.deleted = event.obj, False
        # Status-only updates (pods going away after a sleep) keep the precondition fresh, and
        # readiness after a wake starts the idle clock.
        if settle_start(w, self._clock.now()):
            log.info("ready", extra={"workload": w.label, "replicas": w.ready_replicas})
            changed = True
        if changed:
            self._enqueue(key)

    def on_namespace(self, event: WatchEvent) -> None:
        if event.initial:
            return
        name = str((event.obj.get("metadata") or {}).get("name", ""))
        for key in [k for k in self._workloads if k[1] == name]:
            self._enqueue(key)

    def on_hpa(self, event: WatchEvent) -> None:
        name = str(event.obj["metadata"].get("name", ""))
        namespace = str(event.obj["metadata"].get("namespace", ""))
        for obj, present in ((event.old, False), (event.obj, event.type != "DELETED")):
            if obj is not None:
                self._count_hpa(obj, namespace, name, present)

    def _count_hpa(self, obj: Obj, namespace: str, name: str, present: bool) -> None:
        kind, target = obj["target"]
        key = (kind, namespace, target)
        names = self._hpa_targets.setdefault(key, set())
        if present:
            names.add(name)
        else:
            names.discard(name)
        if not names:
            del self._hpa_targets[key]
        if key in self._workloads:
            self._enqueue(key)

    def on_synced(self, resource: APIResource, where: Scope = None) -> None:
        """A watch holds its whole collection in `where` (None: every namespace): sleepers there
        still to compare their census do it now, without a whole reconcile where none is under
        way (one follows if it differs)."""
        for key in self._users_of(resource, where):
            w = self._workloads.get(key)
            if w is None or not w.watch.unchecked:
                continue
            if self.check_census is None or w.watch.interest is None or self._is_running(key):
                self._enqueue(key)
            else:
                self.check_census(w)

    def count_events(self, resource: APIResource, events: int = 1) -> None:
        """Count `events` of `resource` seen (a first list's objects, handed over whole, too)."""
        counter = self._event_counters.get(resource)
        if counter is None:  # labels() takes a lock and builds a key: once per type, not per event
            counter = self._metrics.watch_events.labels(resource.group_resource)
            self._event_counters[resource] = counter
        counter.inc(events)

    def _users_of(self, resource: APIResource, where: Scope) -> Iterable[WorkloadKey]:
        if where is None or not resource.namespaced:
            return list(self._users(resource))
        return list(dict.fromkeys(k for n in where for k in self._users_in(resource, n)))

    def on_listed(self, resource: APIResource, objects: int) -> None:
        """A watch's list, handed over whole rather than object by object: counted."""
        self.count_events(resource, objects)

    def on_served(
        self, resource: APIResource, kept: Readable, key: WorkloadKey, where: Scope
    ) -> None:
        """A workload holding a watch may now read it in `where` (None: everywhere): it catches
        up on what changed there while it was not told of each change."""
        w = self._workloads.get(key)
        if w is not None and self.catch_up is not None:
            self.catch_up(w, resource, kept, where)

    def on_object(self, resource: APIResource, event: WatchEvent) -> None:
        """A watched object changed: note it for every workload it is activity for."""
        self.count_events(resource)
        namespace = key_of(event.obj)[0]
        if self.on_change is not None and not event.initial:
            self.on_change(resource, namespace)
        users = self._users_in(resource, namespace)
        change = Change(event.type, event.obj, event.old, event.initial)
        now: datetime | None = None
        # A due time that moved (a status-only update, no activity) moves its readers' timers.
        due_moved = due_of(event.obj) != due_of(event.old)
        for key in users:
            w = self._workloads.get(key)
            if w is None or w.watch.interest is None:
                continue
            found = find_activity(change, resource, w.watch.interest)
            if found is not None:
                now = now or self._clock.now()
                self.note_activity(w, found, now)
            elif due_moved and resource in w.watch.due:
                self._enqueue(key)

    def note_activity(self, w: Workload, found: Activity, now: datetime) -> None:
        """Restart the idle clock; an asleep workload's wake is due, a running one looks again."""
        self._metrics.activity.inc()
        w.idle.last_activity = now
        log.debug("activity", extra={"workload": w.label, "reason": found.reason})
        asleep = w.shown_status.state == "asleep"
        # A wake names the change that woke it, not the newest one seen while its write was retried.
        if not asleep or w.idle.activity_at is None:
            w.idle.activity_reason = found.reason
            w.idle.activity_cause = activity_cause(
                found.kind, found.namespace, found.name, found.reason, w.namespace
            )
        if asleep or self._is_running(w.key):
            if w.idle.activity_at is None:
                w.idle.activity_at = self._clock.monotonic()
            if asleep:
                self._wake_due(w.key)
            self._enqueue(w.key)
