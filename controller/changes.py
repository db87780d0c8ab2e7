"""Watch events in: workload records kept, activity noted, wakes made due, reconciles asked for.

Every handler is synchronous and cheap: it runs inside a watch's loop, and deciding is left to the
reconcile that it asks for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import Counter

from zeroscaler.api import Obj
from zeroscaler.cluster.informer import Readable, WatchEvent, key_of
from zeroscaler.controller.context import Context
from zeroscaler.controller.idle_memory import IdleReading
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.noting import OnActivity
from zeroscaler.controller.watch_memory import WatchMemory
from zeroscaler.controller.workload import (
    Workload,
    WorkloadKey,
    initial_last_activity,
    settle_start,
)
from zeroscaler.controller.workload_object import WorkloadObject, workload_of
from zeroscaler.core.activity import Change, Scope, due_of, find_activity
from zeroscaler.core.annotations import WorkloadStatus
from zeroscaler.core.kinds import APIResource

log = logging.getLogger(__name__)

# `Subscriptions.catch_up` and `check_census`, as the feed calls them.
CatchUp = Callable[
    [WorkloadKey, WatchMemory, IdleReading, WorkloadStatus, APIResource, Readable, Scope], None
]
CheckCensus = Callable[
    [WorkloadKey, WorkloadObject, WatchMemory, IdleReading, WorkloadStatus], None
]


def trim_hpa(obj: Obj) -> Obj:
    """Keep an HPA's name and the workload it targets."""
    meta = obj.get("metadata") or {}
    target = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta},
        "target": (str(target.get("kind", "")), str(target.get("name", ""))),
    }


@dataclass(frozen=True, slots=True)
class Lookups:
    """What the feed asks of the other parts: the workloads holding a type's watch (everywhere,
    or in one namespace), whether a workload's reconcile is under way, and whether a namespace
    is opted in."""

    users: Callable[[APIResource], Iterable[WorkloadKey]]
    users_in: Callable[[APIResource, str], Iterable[WorkloadKey]] | None = None
    is_running: Callable[[WorkloadKey], bool] = lambda _: False
    is_opted_in: Callable[[str], bool] = lambda _: True


@dataclass(frozen=True, slots=True)
class Followers:
    """Who else hears of changes. The subscriptions: what a workload holding a watch missed,
    read from its store in the namespaces given (None: all) (`Subscriptions.catch_up`), and a
    sleeper's census compared once its watch has listed (`Subscriptions.check_census`). A
    start's warming (`warming.py`): each workload first seen, and each change to a watched
    type."""

    catch_up: CatchUp | None = None
    check_census: CheckCensus | None = None
    on_first_seen: Callable[[WorkloadKey, Mapping[str, str]], None] | None = None
    on_change: Callable[[APIResource, str], None] | None = None


NO_FOLLOWERS = Followers()


class ChangeFeed:
    """Keeps the workload table and the HPA targets from watches, and enqueues what they touch."""

    def __init__(
        self,
        workloads: dict[WorkloadKey, Workload],
        context: Context,
        metrics: Metrics,
        on_activity: OnActivity,
        lookups: Lookups,
        followers: Followers = NO_FOLLOWERS,
    ) -> None:
        self._workloads = workloads
        self._clock = context.clock
        self._metrics = metrics
        self._enqueue = context.enqueue
        self._on_activity = on_activity
        self._is_running = lookups.is_running
        users = lookups.users
        self._users = users
        self._users_in = lookups.users_in or (lambda resource, _: users(resource))  # by namespace
        self._is_opted_in = lookups.is_opted_in
        self._hpa_targets: dict[WorkloadKey, set[str]] = {}
        self._event_counters: dict[APIResource, Counter] = {}
        self.on_first_seen = followers.on_first_seen
        self.on_change = followers.on_change
        self.catch_up = followers.catch_up
        self.check_census = followers.check_census

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
        seen = workload_of(event.obj)
        key = (kind, seen.namespace, seen.name)
        w = self._workloads.get(key)
        if event.type == "DELETED":
            if w is not None:
                w.gone()
                self._enqueue(key)
            return
        if w is None:
            start = initial_last_activity(seen.annotations, self._clock.now())
            w = Workload(key, seen, last_activity=start)
            # Not Ready when first seen (just created, or woken before a restart): its clock
            # waits for Ready, as after a wake.
            w.idle.first_seen(starting=w.replicas > 0 and w.is_ready() is False)
            self._workloads[key] = w
            self._enqueue(key)
            if self.on_first_seen is not None:
                self.on_first_seen(key, seen.annotations)
            return
        if not seen.is_newer(w.obj):
            return
        changed = seen.reconcile_inputs() != w.obj.reconcile_inputs() or w.deleted
        w.obj, w.deleted = seen, False
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
                self.check_census(key, w.obj, w.watch, w.idle, w.status)

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
            self.catch_up(key, w.watch, w.idle, w.status, resource, kept, where)

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
                asleep = w.shown_status.state == "asleep"
                self._on_activity(key, w.idle, asleep, found, now)
            elif due_moved and resource in w.watch.due:
                self._enqueue(key)
