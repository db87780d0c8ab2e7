"""The scaler: assembles the controller's parts, starts the watches, and runs the workers.

Each part is handed, when it is built, the `Context` (clock, leadership, queue, background tasks)
and the parts or callables it talks to; none is wired afterwards. They are built in the order
they need each other: the change feed turns watch events into workload records and keys to
reconcile, the reconciler decides, scaling writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import asdict
from datetime import datetime

from zeroscaler.api import Kube
from zeroscaler.cluster.events import EventRecorder
from zeroscaler.cluster.informer import Informer
from zeroscaler.cluster.policy_watch import PolicyWatch, Rejection
from zeroscaler.cluster.view import ClusterView
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.activator import Activator, ActivatorSettings
from zeroscaler.controller.changes import ChangeFeed, Followers, Lookups, trim_hpa
from zeroscaler.controller.context import Context, Watching
from zeroscaler.controller.flags import ControllerSettings
from zeroscaler.controller.heap import pause_collection, release_free_memory, resume_collection
from zeroscaler.controller.metrics import LeaderReadings, Metrics, Readings
from zeroscaler.controller.noting import ActivityNotes
from zeroscaler.controller.permissions import AccessReviews
from zeroscaler.controller.queue import KeyedQueue, WakeGate
from zeroscaler.controller.reconcile import (
    ReconcileFlags,
    ReconcileInputs,
    ReconcileParts,
    Reconciler,
    Scheduling,
)
from zeroscaler.controller.registrations import ServingIndex
from zeroscaler.controller.reporting import Reporter
from zeroscaler.controller.scaling import BeforeSleep, Outcomes, Scaling
from zeroscaler.controller.secret_path import SecretPath
from zeroscaler.controller.subscription import Subscriptions
from zeroscaler.controller.tasks import Tasks
from zeroscaler.controller.timers import TimerHeap
from zeroscaler.controller.warming import Warming
from zeroscaler.controller.watches import RESERVED, Listeners, SharedWatch, WatchHub
from zeroscaler.controller.workload import (
    Workload,
    WorkloadKey,
    count_by_state,
    count_dry_run,
    count_paused,
    count_pending_wakes,
    count_released,
)
from zeroscaler.controller.workload_object import WorkloadObject, keep_workload
from zeroscaler.core.activity import Activity
from zeroscaler.core.annotations import is_namespace_enabled
from zeroscaler.core.coverage import Hook
from zeroscaler.core.inference import RBACSnapshot
from zeroscaler.core.policy import Policy, evaluate_policy
from zeroscaler.core.start_progress import Progress, begin, observe, stalled
from zeroscaler.core.wake_path import Surroundings
from zeroscaler.core.workloads import WORKLOAD_RESOURCES
from zeroscaler.runtime.clock import Clock, LoopClock

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL = 60.0
_RBAC_SETTLE = 0.2  # seconds a burst of RBAC changes has to arrive before grants are checked
WAKE_ONLY_SHARE = 8  # one worker more per this many that takes only wakes due
WAKE_NAMESPACES = ("kube-system", "kube-node-lease")  # where a wake's own requests go too
WARMING_BOUND = 60.0  # seconds after ready that a start's warming ends at the latest
STALL_BOUND = 120.0  # seconds a start may get no further before the collector, paused, runs again
PROGRESS_LOOK = 1.0  # seconds between looks at how far a start has got while the collector waits


class Controller:
    """Keeps every workload's clock and watches, and sleeps and wakes them when leading."""

    def __init__(
        self,
        kube: Kube,
        settings: ControllerSettings,
        watch_kube: Kube | None = None,
        clock: Clock | None = None,
        *,
        crd_specs: bool = False,  # for a webhook sharing the cluster view in one process
    ) -> None:
        # Watches hold their connections for minutes; writes get a pool of their own that stays
        # warm, so a burst of wakes never waits for TLS handshakes behind fifty streams.
        watcher = watch_kube or kube
        self.settings = settings
        self.is_leader = False
        self.ready = False
        self._synced = asyncio.Event()  # set with `ready`
        self._collector_paused = False  # for a start's catch-up (`_end_catch_up`)
        self._rbac_check: asyncio.TimerHandle | None = None
        self.workloads: dict[WorkloadKey, Workload] = {}
        self.clock: Clock = clock or LoopClock()
        self.tasks = Tasks(self.clock)
        self.gate: WakeGate[WorkloadKey] = WakeGate()
        self.queue: KeyedQueue[WorkloadKey] = KeyedQueue(self.gate.is_due)
        self.timers: TimerHeap[WorkloadKey] = TimerHeap(self.queue.add, self.clock)
        context = Context(self.clock, self._leading, self.queue.add, self.tasks.background)
        # The change feed, built below, hears the hub: it needs the hub's users to be built.
        listeners: Listeners[WorkloadKey] = Listeners(
            lambda resource, event: self.changes.on_object(resource, event),
            lambda resource, where: self.changes.on_synced(resource, where),
            on_served=lambda resource, kept, key, where: self.changes.on_served(
                resource, kept, key, where
            ),
            on_listed=lambda resource, objects: self.changes.on_listed(resource, objects),
        )
        self.hub: WatchHub[WorkloadKey] = WatchHub(
            watcher,
            listeners,
            streaming=settings.streaming_lists,
            budget=max(0, settings.max_connections - RESERVED),
            namespace_count=lambda: len(self.cluster.namespaces.store),
            clock=self.clock,
        )
        self.metrics = self._metrics(kube, watcher)
        self.cluster = ClusterView(
            watcher,
            discovery_interval=settings.discovery_interval,
            crd_specs=crd_specs,
            on_discovery=lambda _: self.changes.enqueue_all(),
            on_rbac=self._on_rbac,
        )
        self.notes = notes = ActivityNotes(
            context, self.metrics, self.queue.is_running, self.gate.due
        )
        self.changes = self._change_feed(kube, context, notes)
        self.cluster.namespaces.add_handler(self.changes.on_namespace)
        self.serving, self.activator = self._serving_parts(kube, watcher, context, notes)
        self.hpas, self.workload_informers = self._workload_watches(watcher)
        self.policies = PolicyWatch(
            watcher,
            settings.policy_source,
            on_change=self.changes.enqueue_all,
            on_rejected=self._on_policy_rejected,
        )
        self.events = EventRecorder(kube, context.clock, "zeroscaler-controller", self.settings.id)
        self.accounting = Accounting(self.metrics, context.clock)
        self.reconciler = self._assemble(kube, context)

    def _metrics(self, kube: Kube, watcher: Kube) -> Metrics:
        """The controller's metrics, read from its parts at scrape time, the clients' failed
        requests and 429 answers too."""
        clients = list({id(k): k for k in (kube, watcher)}.values())  # one Kube may do both
        readings = Readings(
            by_state=lambda: count_by_state(self.workloads.values()),
            watches=lambda: len(self.hub.resources),
            pending=lambda: count_pending_wakes(self.workloads.values()),
            events=lambda: self.reporter.pending,
            clients=lambda: clients,
            shared_watches=self.hub.watches_by_scope,
        )
        leader_readings = LeaderReadings(
            paused=lambda: count_paused(self.workloads.values()),
            dry_run=lambda: count_dry_run(self.workloads.values()),
            released=lambda: count_released(self.workloads.values()),
        )
        metrics = Metrics(
            self._leading,
            readings,
            leader_readings,
            workloads=self.workloads.values if self.settings.workload_metrics else None,
            count_savings=self._count_savings,
        )
        return metrics

    def _change_feed(self, kube: Kube, context: Context, notes: ActivityNotes) -> ChangeFeed:
        """Watch events in, and the parts told of them besides the queue: the subscriptions
        (what a workload holding a watch missed) and, while a start lasts, its warming."""
        settings = self.settings
        access = AccessReviews(
            kube,
            settings.access_review_ttl,
            context.clock,
            rbac=self._rbac_in_force if settings.access_from_rbac else None,
            on_answer=lambda source: self.metrics.access_answers.labels(source).inc(),
        )
        watching = Watching(self.hub, access, self.cluster)
        self.subscriptions = Subscriptions(context, watching, self._note_activity)
        self.warming = Warming(
            context,
            watching,
            self.workloads,
            self._hurry,
            self._is_opted_in,
            active=settings.warm_watches,
        )
        warming = self.warming if settings.warm_watches else None
        followers = Followers(
            catch_up=self.subscriptions.catch_up,
            check_census=self.subscriptions.check_census,
            on_first_seen=warming.on_workload if warming else None,
            on_change=warming.on_change if warming else None,
        )
        lookups = Lookups(
            self.hub.users, self.hub.users_in, self.queue.is_running, self._is_opted_in
        )
        return ChangeFeed(self.workloads, context, self.metrics, notes.note, lookups, followers)

    def _serving_parts(
        self, kube: Kube, watcher: Kube, context: Context, notes: ActivityNotes
    ) -> tuple[ServingIndex, Activator]:
        """What each workload serves, and the activator that covers the webhooks of sleepers."""
        settings = self.settings
        serving = ServingIndex(
            watcher,
            context,
            self.cluster.crds,
            self.workloads,
            activation=self._activation,
            on_hooks=self._hooks_changed,
        )
        activator_settings = ActivatorSettings(
            configuration=settings.activator_configuration,
            webhook_configuration=settings.webhook_configuration,
            namespace=settings.lease_namespace,
            requests=settings.activator_requests,
            timeout=settings.activator_timeout,
            probe_interval=settings.activator_probe_interval,
        )
        activator = Activator(
            kube, context, serving, self.workloads, activator_settings, notes.note
        )
        configurations = serving.registrations["MutatingWebhookConfiguration"]
        if activator.enabled:
            configurations.add_handler(activator.on_configuration)
        self.secret_path = SecretPath(kube, context, settings.webhook_configuration)
        configurations.add_handler(self.secret_path.on_configuration)
        return serving, activator

    def _workload_watches(self, watcher: Kube) -> tuple[Informer, dict[str, Informer]]:
        """The HPAs (which workloads they target) and the Deployments and StatefulSets."""
        hpas = Informer(
            watcher, "/apis/autoscaling/v2/horizontalpodautoscalers", transform=trim_hpa
        )
        hpas.add_handler(self.changes.on_hpa)
        workloads: dict[str, Informer] = {}
        for kind, resource in WORKLOAD_RESOURCES.items():
            informer = Informer(watcher, f"/apis/apps/v1/{resource}", transform=keep_workload)
            informer.add_handler(functools.partial(self.changes.on_workload, kind))
            workloads[kind] = informer
        return hpas, workloads

    def _assemble(self, kube: Kube, context: Context) -> Reconciler:
        """The parts that decide and write, wired to the queue, the gate and each other."""
        self.reporter = reporter = Reporter(self.events, context)
        subscriptions = self.subscriptions
        outcomes = Outcomes(reporter, self.accounting, self.gate, self.metrics)
        before_sleep = BeforeSleep(
            census=subscriptions.census,
            keeps_awake=self._keeps_awake,
            cover=self.activator.cover,
            covered_done=self.activator.covered_done,
        )
        scaling = Scaling(kube, context, outcomes, before_sleep, dry_run=self.settings.dry_run)
        inputs = ReconcileInputs(
            self.cluster,
            hpa_names=self.changes.hpa_names,
            policy=self._policy,
            policy_attempted=self.policies.informer.attempted.is_set,
            serving=self.activator.serving,
            due=subscriptions.due_summary,
        )
        flags = ReconcileFlags(
            self.settings.dry_run, self.settings.excluded, self.settings.keep_awake_jitter
        )
        parts = ReconcileParts(subscriptions, scaling, reporter, self.accounting)
        scheduling = Scheduling(self.queue, self.gate, self.timers)
        return Reconciler(self.workloads, context, inputs, flags, parts, scheduling)

    async def run(self) -> None:
        """Start the watches, wait for them and discovery, then reconcile until cancelled."""
        # Needed before deciding anything; the CRD and RBAC watches only help (a chart that does
        # not grant them must not keep the controller from becoming ready).
        essential = [self.cluster.namespaces, self.hpas, *self.workload_informers.values()]
        pause_collection()
        self._collector_paused = True
        self.tasks.spawn(self._end_catch_up())
        self.tasks.spawn(self.cluster.run(), self.hpas.run(), self.policies.run())
        # Not essential to start: until they have listed, nothing is put to sleep.
        self.tasks.spawn(*(i.run() for i in self.serving.informers))
        if self.activator.enabled:
            self.tasks.spawn(self.activator.run(), self.activator.requests.run())
        if self.settings.webhook_configuration:
            self.tasks.spawn(self.secret_path.run())
        self.tasks.spawn(*(i.run() for i in self.workload_informers.values()))
        self.tasks.spawn(self.timers.run(), self._housekeeping())
        await asyncio.gather(self.cluster.discovered.wait(), *(i.synced.wait() for i in essential))
        if self.settings.access_from_rbac:
            await self._rbac_listed()
        # No collection here: the shared watches listed meanwhile are still coming in, and the
        # catch-up's end collects everything once (`_end_catch_up`).
        self.ready = True
        self._synced.set()
        log.info("synced", extra={"workloads": len(self.workloads)})
        # A few workers take only wakes that are due: however many slow reconciles the others
        # are busy with (access reviews, a re-read after a conflict), a wake finds one free.
        reserved = max(1, self.settings.workers // WAKE_ONLY_SHARE)
        self.tasks.spawn(*(self.reconciler.work(urgent_only=True) for _ in range(reserved)))
        self.tasks.spawn(*(self.reconciler.work() for _ in range(self.settings.workers)))
        self.tasks.spawn(self._finish_warming())
        await self.tasks.wait()

    async def _end_catch_up(self) -> None:
        """Run the collector again once the start's catch-up is over (ready, every watch listed
        and no reconcile waiting), or once the start has got no further for STALL_BOUND
        (`zeroscaler.core.start_progress`), however long it has taken while it moved.
        The log says when it is over (the scale row times a restart by it)."""
        clock = self.clock
        caught_up = asyncio.ensure_future(self._catch_up())
        try:
            pause = begin(self._progress(), clock.monotonic())
            while not caught_up.done():
                await asyncio.wait([caught_up], timeout=PROGRESS_LOOK)
                pause = observe(pause, self._progress(), clock.monotonic())
                if not caught_up.done() and stalled(pause, clock.monotonic(), STALL_BOUND):
                    log.warning("start stalled: the collector runs again", extra=asdict(pause.best))
                    break
            self._resume_collection()
            await caught_up
        finally:  # cancelled too: never left off
            caught_up.cancel()
            self._resume_collection()
        log.info(
            "caught up",
            extra={
                "workloads": len(self.workloads),
                "types": len(self.hub.resources),
                "watches": self.hub.watch_count(),
            },
        )

    def _resume_collection(self) -> None:
        self._collector_paused = False
        resume_collection()

    def _progress(self) -> Progress:
        """How far the start has got: workloads known, objects stored, watches listed, keys
        waiting."""
        kept = [w for r in self.hub.resources if (w := self.hub.kept(r)) is not None]
        return Progress(
            len(self.workloads),
            sum(len(w) for w in kept),
            sum(w.ready.is_set() for w in kept),
            len(self.queue),
        )

    async def _catch_up(self) -> None:
        await self._synced.wait()
        await self.queue.until_idle()
        while unsynced := self._unsynced_watches():
            await asyncio.gather(*(w.ready.wait() for w in unsynced))
            await self.queue.until_idle()

    def _unsynced_watches(self) -> list[SharedWatch[WorkloadKey]]:
        watches = (self.hub.kept(r) for r in self.hub.resources)
        return [w for w in watches if w is not None and not w.ready.is_set()]

    async def _finish_warming(self) -> None:
        """Once every workload has had its first look (a minute at most), warm nothing more and
        stop the warm watches nobody took."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.queue.until_idle(), WARMING_BOUND)
        self.warming.finish()

    async def aclose(self) -> None:
        if self._rbac_check is not None:
            self._rbac_check.cancel()
        await self.tasks.aclose()
        await self.hub.aclose()

    async def _rbac_listed(self) -> None:
        """Until each RBAC watch has listed, or failed once: the first reconciles then take access
        from RBAC rather than a review each, and RBAC the controller may not read blocks nothing."""
        await asyncio.gather(*(i.attempted.wait() for i in self.cluster.rbac_informers.values()))

    def _rbac_in_force(self) -> RBACSnapshot | None:
        """RBAC as watched, once every kind of it has been listed."""
        return self.cluster.rbac() if self.cluster.is_rbac_synced() else None

    def _on_rbac(self) -> None:
        """RBAC changed: look again at the workloads whose kinds it gives, and soon at those it
        no longer grants what it did (once for a burst of changes)."""
        self.changes.enqueue_inferred()
        if self._rbac_check is None:
            self._rbac_check = asyncio.get_running_loop().call_later(
                _RBAC_SETTLE, self._check_rbac_grants
            )

    def _check_rbac_grants(self) -> None:
        self._rbac_check = None
        for key in self.subscriptions.revoke(self._object_of):
            self.queue.add(key)

    def _note_activity(self, key: WorkloadKey, found: Activity, now: datetime) -> None:
        """Activity a subscription's replay found, noted on its workload's record (a replay
        runs only for a workload the record map holds)."""
        w = self.workloads.get(key)
        if w is not None:
            self.notes.note(key, w.idle, w.shown_status.state == "asleep", found, now)

    def _object_of(self, key: WorkloadKey) -> WorkloadObject | None:
        w = self.workloads.get(key)
        return None if w is None else w.obj

    def _hurry(self, key: WorkloadKey) -> None:
        """Reconcile `key` before the others waiting: a change may be a wake for it."""
        self.gate.due(key)
        self.queue.add(key)

    def _keeps_awake(self, key: WorkloadKey, obj: WorkloadObject) -> bool:
        """Whether what the workload of `key` serves forbids a sleep (or is not known)."""
        serving = self.serving.serving(key, obj)
        return serving is None or serving.keeps_awake

    def _activation(
        self, key: WorkloadKey, obj: WorkloadObject, hooks: tuple[Hook, ...]
    ) -> str | None:
        namespace = key[1]
        namespaces = (namespace, self.settings.lease_namespace, *WAKE_NAMESPACES)
        labels = {n: found for n in namespaces if (found := self._namespace_labels(n)) is not None}
        around = Surroundings(self.settings.lease_namespace, labels)
        policy = self._policy()
        allowed = policy is not None and (
            evaluate_policy(policy, labels.get(namespace, {}), dict(obj.labels)).fail_open_webhooks
            == "sleep"
        )
        # The idle clock's last start, of the record the workload's key names.
        w = self.workloads.get(key)
        started_in = None if w is None else w.idle.started_in
        return self.activator.activation(
            key, obj, started_in, hooks, around, fail_open_allowed=allowed
        )

    def _namespace_labels(self, namespace: str) -> dict[str, str] | None:
        ns = self.cluster.namespaces.store.get(("", namespace))
        if ns is None:
            return None
        return dict((ns.get("metadata") or {}).get("labels") or {})

    def _hooks_changed(self) -> None:
        self.activator.changed()

    def _leading(self) -> bool:
        return self.is_leader

    def _policy(self) -> Policy | None:
        """The policy in force, or None until its ConfigMaps have been listed."""
        return self.policies.policy if self.policies.is_synced() else None

    def _is_opted_in(self, namespace: str) -> bool:
        ns = self.cluster.namespaces.store.get(("", namespace)) or {}
        return is_namespace_enabled((ns.get("metadata") or {}).get("labels") or {})

    def _on_policy_rejected(self, rejection: Rejection) -> None:
        log.error(
            "policy ConfigMap rejected",
            extra={
                "configmap": f"{rejection.namespace}/{rejection.name}",
                "why": rejection.message,
            },
        )
        if self.is_leader:
            configmap = {
                "metadata": {
                    "namespace": rejection.namespace,
                    "name": rejection.name,
                    "uid": rejection.uid,
                }
            }
            self.tasks.background(
                self.events.emit(
                    configmap, "v1", "ConfigMap", "Warning", "InvalidPolicy", rejection.message
                )
            )

    def set_leader(self, leading: bool) -> None:
        self.is_leader = leading
        if leading:
            self.changes.enqueue_all()
            self.secret_path.leading()

    async def _housekeeping(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL)
            rounds += 1
            # Not while a start's pause lasts: its end freezes what the start made without a walk,
            # and a start that lasts minutes would have its young objects walked each minute.
            if not self._collector_paused:
                release_free_memory(full=rounds % 30 == 0)  # a full collection every half hour

    def _count_savings(self) -> None:
        # At a scrape; only the leader counts (a standby sleeps nothing).
        if self.is_leader:
            self.accounting.account_all(self.workloads.values())
