"""The reconcile loop: workers take one workload at a time, read it, ask `decide`, and act."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from zeroscaler.api import Conflict, KubeError, NotFound, urgently
from zeroscaler.cluster.view import ClusterView
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.context import Context
from zeroscaler.controller.queue import KeyedQueue, WakeGate
from zeroscaler.controller.reporting import Reporter
from zeroscaler.controller.scaling import Scaling, ScalingShare
from zeroscaler.controller.subscription import Subscriptions
from zeroscaler.controller.timers import TimerHeap
from zeroscaler.controller.watch_memory import WatchMemory
from zeroscaler.controller.workload import (
    EPOCH,
    Workload,
    WorkloadKey,
    owes_wake,
    settle_start,
)
from zeroscaler.controller.workload_kinds import settle_kinds
from zeroscaler.controller.workload_object import WorkloadObject
from zeroscaler.core.admission import annotate_from_policy
from zeroscaler.core.annotations import (
    ENABLED,
    NAMESPACE_ENABLED_LABEL,
    PAUSED,
    PAUSED_UNTIL,
    STATE,
    STATUS_KEYS,
    Notice,
    WorkloadConfig,
    WorkloadStatus,
    is_namespace_enabled,
    missing_settings,
    pause_in_force,
    read_config,
    read_status,
)
from zeroscaler.core.decision import (
    Decision,
    Observed,
    decide,
    not_ready_notice,
    schedule_notice,
)
from zeroscaler.core.due import NO_DUE, DueSummary
from zeroscaler.core.durations import format_time
from zeroscaler.core.links import Serving, serving_notices
from zeroscaler.core.managers import never_sleeps
from zeroscaler.core.pacing import wake_retry_after
from zeroscaler.core.policy import Policy, dry_run_reason
from zeroscaler.core.schedules import jitter
from zeroscaler.core.sharing import shared

log = logging.getLogger(__name__)

RETRY_AFTER = 5.0  # seconds before a failed reconcile is tried again


@dataclass(frozen=True, slots=True)
class Scheduling:
    """When reconciles run: the keyed queue, the wakes due and the timers."""

    queue: KeyedQueue[WorkloadKey]
    gate: WakeGate[WorkloadKey]
    timers: TimerHeap[WorkloadKey]


@dataclass(frozen=True, slots=True)
class ReconcileInputs:
    """What a reconcile reads besides the workload itself."""

    cluster: ClusterView
    hpa_names: Callable[[WorkloadKey], list[str]]
    policy: Callable[[], Policy | None] = lambda: None  # None until its ConfigMaps are listed
    # Whether the policy ConfigMaps' first list was answered or failed (then it may never come).
    policy_attempted: Callable[[], bool] = lambda: True
    serving: Callable[[WorkloadKey, WorkloadObject], Serving | None] = lambda *_: Serving()
    # Its due times: the latest at or before `now`, the earliest after `after` (`due.py`).
    due: Callable[[WatchMemory, str, datetime, datetime], DueSummary] = lambda *_: NO_DUE


@dataclass(frozen=True, slots=True)
class ReconcileFlags:
    """The controller's flags a reconcile reads."""

    dry_run: bool = False
    excluded: frozenset[str] = frozenset()  # namespaces policy is never written in
    keep_awake_jitter: float = 0.0  # seconds over which keep-awake wakes are spread


@dataclass(frozen=True, slots=True)
class ReconcileParts:
    """The parts a reconcile hands its outcome to."""

    subscriptions: Subscriptions
    scaling: Scaling
    reporter: Reporter
    accounting: Accounting


def _share(w: Workload) -> ScalingShare:
    """What scaling's writes are handed of `w`: the record itself only as the live object."""
    return ScalingShare(w.key, w, w.scaling, w.idle, w.watch, w.report)


class Reconciler:
    """Decides for one workload at a time; the queue keeps two workers off the same one."""

    def __init__(
        self,
        workloads: dict[WorkloadKey, Workload],
        context: Context,
        inputs: ReconcileInputs,
        flags: ReconcileFlags,
        parts: ReconcileParts,
        scheduling: Scheduling,
    ) -> None:
        self._workloads = workloads
        self._cluster = inputs.cluster
        self._subscriptions = parts.subscriptions
        self._scaling = parts.scaling
        self._reporter = parts.reporter
        self._accounting = parts.accounting
        self._queue = scheduling.queue
        self._gate = scheduling.gate
        self._timers = scheduling.timers
        self._clock = context.clock
        self._background = context.background
        self._hpa_names = inputs.hpa_names
        self._is_leader = context.is_leader
        self._dry_run = flags.dry_run
        self._policy = inputs.policy
        self._excluded = flags.excluded
        self._serving = inputs.serving
        self._jitter = flags.keep_awake_jitter
        self._policy_attempted = inputs.policy_attempted
        self._due = inputs.due
        self._wake_failures: dict[WorkloadKey, int] = {}  # failed wakes in a row, for backoff

    async def work(self, *, urgent_only: bool = False) -> None:
        """One worker: reconcile keys from the queue (only wakes due, with `urgent_only`) until
        cancelled."""
        while True:
            key = await self._queue.take(urgent_only=urgent_only)
            try:
                # A wake's reads (a refresh after a conflict, access reviews) go first too.
                with urgently(self._gate.is_due(key)):
                    await self._retrying(key, "reconcile", self.reconcile(key))
            finally:
                if not self._owes_wake(key):
                    self._gate.done(key)
                follow_up = self._scaling.take_follow_up(key)
                if follow_up is None:
                    self._queue.release(key)
                else:  # the key stays running: nothing else is decided until it is written
                    self._background(self._follow_up(key, follow_up))

    def _owes_wake(self, key: WorkloadKey) -> bool:
        """Whether `key` still owes a wake (it lost a race, or the activity came while it was
        being reconciled): then its next reconcile stays urgent."""
        w = self._workloads.get(key)
        return w is not None and owes_wake(w)

    async def _retrying(self, key: WorkloadKey, what: str, work: Awaitable[None]) -> None:
        """Run `work` for a workload; a failure is logged and the workload looked at again."""
        try:
            await work
        except KubeError as e:
            log.warning("%s failed: %s", what, e, extra={"workload": "/".join(key)})
            self._timers.schedule(key, self._clock.monotonic() + self._retry_after(key))
        except Exception:
            log.exception("%s failed", what, extra={"workload": "/".join(key)})
            self._timers.schedule(key, self._clock.monotonic() + RETRY_AFTER)
        else:
            self._wake_failures.pop(key, None)

    def _retry_after(self, key: WorkloadKey) -> float:
        """Seconds before a failed reconcile is tried again: sooner when it was to wake or to
        record its wake, backing off while that keeps failing."""
        w = self._workloads.get(key)
        waking = w is not None and w.idle.activity_at is not None
        if w is None or not (waking or w.scaling.own_wake) or w.shown_status.state != "asleep":
            return RETRY_AFTER
        failures = self._wake_failures.get(key, 0) + 1
        self._wake_failures[key] = failures
        return wake_retry_after(failures)

    async def _follow_up(self, key: WorkloadKey, write: Coroutine[Any, Any, None]) -> None:
        """A workload's write that waits its turn off the worker: a sleep, or a wake's record."""
        try:
            await self._retrying(key, "writing", write)
        finally:
            self._queue.release(key)

    async def reconcile(self, key: WorkloadKey) -> None:
        """Look at one workload and do what its state asks."""
        w = self._workloads.get(key)
        if w is None:
            return
        if w.deleted:
            self._forget(w)
            return
        config, status, warnings = self._read(w)
        self._settle_dry_run(w)
        if self._is_held(w, config):
            self._reporter.warn(w.key, w.obj, w.report, warnings)
            return
        if not self._is_candidate(w, config):
            await self._release(w, config)
            return
        read = w.obj
        applied, policy_warnings = await self._apply_policy(w)
        if not applied:
            return
        if w.obj is not read:  # the policy's write came back: read what it wrote
            config, status, warnings = self._read(w)
        warnings += policy_warnings
        config, inference_warnings = settle_kinds(w.watch, w.obj, config, self._cluster)
        warnings += inference_warnings
        if config.idle_timeout is None or not config.has_kinds:
            await self._unmanage(w, "annotations incomplete")
            self._reporter.warn(w.key, w.obj, w.report, warnings + missing_settings(w.annotations))
            return
        self._manage(w, status)
        await self._subscriptions.prepare(
            key, w.obj, w.watch, w.idle, w.status, config, urgent=self._gate.is_due(key)
        )
        self._subscriptions.check_census(key, w.obj, w.watch, w.idle, w.status)
        hpa = self._hpa_names(key)
        warnings += [*w.watch.kind_warnings, *self._hpa_warnings(hpa, status)]
        decision, now, notices = self._decide(w, config, status, bool(hpa))
        if (
            decision.action == "sleep"
            and self._policy() is None
            and not self._policy_attempted()
            and not self._dry_run
        ):
            # Policy may say this namespace only runs dry: no sleep until it has been read.
            decision = dataclasses.replace(
                decision, action="none", next_check=now + timedelta(seconds=RETRY_AFTER)
            )
        self._reporter.warn(w.key, w.obj, w.report, warnings + notices)
        if status.state == "asleep" and STATE not in w.annotations:
            decision = await self._status_dropped(w, decision)
        checks = [decision.next_check]
        if decision.held:
            self._hold(w, decision)
        if decision.action == "none":
            checks.append(await self._scaling.settle_flapping(w.key, w, w.scaling, now))
        next_check = min((c for c in checks if c is not None), default=None)
        if next_check is not None:
            delay = (next_check - now).total_seconds()
            self._timers.schedule(key, self._clock.monotonic() + max(delay, 0.0))
        if decision.action != "none":
            await self._scaling.act(_share(w), decision, now)

    def _settle_dry_run(self, w: Workload) -> None:
        """Whether only what would be done is said for `w`, and why (scaling keeps it)."""
        why = "--dry-run" if self._dry_run else None
        if why is None:
            labels = self._namespace_meta(w).get("labels") or {}
            why = dry_run_reason(self._policy(), labels, w.obj.labels)
        self._scaling.settle_dry_run(w.scaling, w.key, why)

    def _hold(self, w: Workload, decision: Decision) -> None:
        """Activity a forced-sleep window holds: said once, and no longer a wake owed (the
        window's end wakes it, from the activity kept in its idle clock)."""
        if w.idle.activity_at is None:
            return
        w.idle.owe_nothing()
        self._gate.done(w.key)
        message = f"{w.idle.activity_reason}: not woken; {decision.reason}"
        log.info("wake held", extra={"workload": w.label, "reason": decision.reason})
        if self._is_leader():
            self._reporter.event(w.key, w.obj, "Normal", "WakeHeld", message)

    async def _status_dropped(self, w: Workload, decision: Decision) -> Decision:
        """Asleep, and an update by another manager removed our status (OLM's reinstall writes
        the whole Deployment from its CSV): at replicas above zero it was woken by that manager,
        and its record says so; at zero it sleeps on, its status written back. Either way the
        count to restore is kept."""
        if decision.action == "mark-awake":
            return dataclasses.replace(decision, cause="status-dropped")
        recorded = w.scaling.recorded or {}
        if decision.action != "none" or w.replicas != 0 or not self._is_leader():
            return decision
        if self._dry_run or w.scaling.dry_run is not None:
            return decision
        back = {k: recorded[k] for k in STATUS_KEYS if k in recorded}
        try:
            await self._scaling.annotate(w.key, w, back)
        except Conflict:
            await self._scaling.refresh(w.key, w)
            self._queue.add(w.key)
            return decision
        manager = w.replicas_manager or "another manager"
        message = f"zeroscaler's annotations were removed by an update ({manager}) while asleep; "
        message += "written back"
        log.info("status written back", extra={"workload": w.label})
        self._reporter.event(w.key, w.obj, "Warning", "StatusRestored", message)
        return decision

    def _is_held(self, w: Workload, config: WorkloadConfig) -> bool:
        """Paused: nothing is written (no sleep, wake, restore or policy) until it is resumed,
        by a person or, for `paused-until`, at its time."""
        pause = pause_in_force(config, w.paused_at, self._clock.now())
        if pause.held and pause.until is not None:
            delay = (pause.until - self._clock.now()).total_seconds()
            self._timers.schedule(w.key, self._clock.monotonic() + max(delay, 0.0))
        if pause.held == w.paused:
            if pause.held and pause.until is None:
                self._timers.cancel(w.key)
            return pause.held
        w.paused = pause.held
        if pause.held:
            if pause.until is None:
                self._timers.cancel(w.key)
            message = f"{pause.why}: held at {w.replicas} replicas, no sleep or wake"
            log.info("paused", extra={"workload": w.label, "why": pause.why})
            if self._is_leader():
                self._reporter.event(w.key, w.obj, "Normal", "Paused", message)
            return True
        log.info("resumed", extra={"workload": w.label})
        if pause.until is not None and config.pause_until is not None:
            resumed = f"{PAUSED_UNTIL} {format_time(pause.until)} has passed: managed again"
        else:
            resumed = f"{PAUSED} removed: managed again"
        if self._is_leader():
            self._reporter.event(w.key, w.obj, "Normal", "Resumed", resumed)
        return False

    async def _apply_policy(self, w: Workload) -> tuple[bool, list[Notice]]:
        """Write what policy gives the workload, as the webhook would at admission.

        False when the write lost a race: the workload is looked at again once re-read.
        """
        policy = self._policy()
        if (
            policy is None  # policy not read yet: the built-in defaults must not be written
            or not self._is_leader()
            or w.namespace in self._excluded
            or not self._cluster.is_rbac_synced()
        ):
            return True, []
        labels = self._namespace_meta(w).get("labels") or {}
        result = annotate_from_policy(
            w.policy_object(),
            w.namespace,
            policy,
            self._cluster.rbac(),
            self._cluster.discovery,
            namespace_labels=labels,
            custom_resources=self._cluster.crd_names,
        )
        warnings = [("PolicyWarning", message) for message in result.warnings]
        if not result.changes:
            return True, warnings
        described = ", ".join(
            f"{k} removed" if v is None else f"{k}={v}" for k, v in result.changes.items()
        )
        if w.scaling.dry_run is not None:
            merged = {**w.obj.annotations, **result.changes}
            annotations = {k: v for k, v in merged.items() if v is not None}
            w.obj = dataclasses.replace(w.obj, annotations=annotations)
            why = "" if self._dry_run else f" ({w.scaling.dry_run})"
            self._reporter.event(
                w.key, w.obj, "Normal", "WouldApplyPolicy", f"dry run{why}: {described}"
            )
            return True, warnings
        try:
            await self._scaling.annotate(w.key, w, result.changes)
        except Conflict:
            await self._scaling.refresh(w.key, w)
            self._queue.add(w.key)
            return False, []
        except NotFound:
            w.gone()
            self._queue.add(w.key)
            return False, []
        log.info("policy applied", extra={"workload": w.label, "changes": described})
        self._reporter.event(w.key, w.obj, "Normal", "PolicyApplied", described)
        return True, warnings

    def _read(self, w: Workload) -> tuple[WorkloadConfig, WorkloadStatus, list[Notice]]:
        """The workload's annotations, parsed; the malformed ones become warnings."""
        annotations = w.annotations
        config, problems = read_config(annotations)
        # Workloads annotated alike (one operator in many tenants' namespaces) keep one copy.
        config = shared(
            dataclasses.replace(
                config,
                watched=shared(config.watched),
                owned=shared(config.owned),
                watch_namespaces=shared(config.watch_namespaces),
            )
        )
        status, status_problems = read_status(annotations)
        status = self._scaling.status_read(w.scaling, w.obj.annotations, status, managed=w.managed)
        w.config, w.status = config, status
        w.idle.restarted_by_person(status.last_activity)
        warnings = [("InvalidAnnotation", f"{p}; ignored") for p in [*problems, *status_problems]]
        unanchored = pause_in_force(config, w.paused_at, EPOCH).problem
        if unanchored:
            warnings.append(("InvalidAnnotation", unanchored))
        return config, status, warnings

    def _decide(
        self, w: Workload, config: WorkloadConfig, status: WorkloadStatus, hpa_targeted: bool
    ) -> tuple[Decision, datetime, list[Notice]]:
        """The decision, when it was made, and the Warnings about what it serves and its start."""
        dry = w.scaling.dry_run is not None
        if dry and w.scaling.pretend is not None:
            status, replicas = w.scaling.pretend
        else:
            replicas = w.replicas
        self._subscriptions.set_interest(w.key, w.obj, w.watch, status)
        now = self._clock.now()
        settle_start(w, now)
        serving = self._serving(w.key, w.obj)
        after = status.asleep_since if status.state == "asleep" and status.asleep_since else now
        keeper = never_sleeps(w.managers)
        kept_awake_by = ""
        if keeper is not None:
            kept_awake_by = f"managed by {keeper}: {keeper.setting}"
        observed = Observed(
            replicas=replicas,
            last_activity=w.idle.last_activity,
            hpa_targeted=hpa_targeted,
            can_wake=bool(w.watch.scopes[0]) and not w.watch.unseen,
            wake_reason=w.idle.activity_reason,
            woken_to=None if w.scaling.own_wake is None else w.scaling.own_wake.replicas,
            serving=serving,
            starting=w.idle.starting and not dry,
            ready_replicas=w.ready_replicas,
            jitter=jitter(w.label, self._jitter) if config.windows else 0.0,
            due=self._due(w.watch, w.namespace, now, after) if config.due_times else NO_DUE,
            sleep_jitter=jitter(w.label, 1.0) if config.max_sleep else 0.0,
            kept_awake_by=kept_awake_by,
        )
        notices = serving_notices(serving) if serving is not None else []
        if kept_awake_by and status.state != "asleep":
            notices.append(("ManagedAbove", kept_awake_by))
        for notice in (
            not_ready_notice(observed, config, status, now),
            schedule_notice(observed, config, status, now),
        ):
            if notice is not None:
                notices.append(notice)
        return decide(observed, config, status, now), now, notices

    @staticmethod
    def _hpa_warnings(hpa: list[str], status: WorkloadStatus) -> list[Notice]:
        if not hpa or status.state == "asleep":
            return []
        message = f"targeted by HorizontalPodAutoscaler {', '.join(hpa)}; never put to sleep"
        return [("HPATargeted", message)]

    def _namespace_meta(self, w: Workload) -> dict[str, Any]:
        ns = self._cluster.namespaces.store.get(("", w.namespace)) or {}
        return dict(ns.get("metadata") or {})

    def _is_terminating(self, w: Workload) -> bool:
        return bool(self._namespace_meta(w).get("deletionTimestamp"))

    def _is_candidate(self, w: Workload, config: WorkloadConfig) -> bool:
        meta = self._namespace_meta(w)
        if meta.get("deletionTimestamp"):  # a namespace being deleted: waking there helps no one
            return False
        return is_namespace_enabled(meta.get("labels") or {}) and not config.opted_out

    def _manage(self, w: Workload, status: WorkloadStatus) -> None:
        """From now on its idle clock counts (asleep: from when it fell asleep)."""
        if w.managed:
            return
        w.managed = True
        if status.state == "asleep":  # asleep before we watched: compare what it saw at sleep
            self._subscriptions.recall_census(w.watch, w.obj)
        self._accounting.start(w.report)
        w.idle.managed_from(
            (status.asleep_since or EPOCH)
            if status.state == "asleep"
            else max(w.idle.last_activity, self._clock.now())
        )
        # One that carries our status was managed before this start: 10,000 lines a restart
        # would tell nothing new.
        (log.info if status.state is None else log.debug)("managing", extra={"workload": w.label})

    def _stop_managing(self, w: Workload, why: str) -> None:
        self._timers.cancel(w.key)
        self._subscriptions.forget(w.key, w.watch)
        self._scaling.forget(w.scaling)
        if w.managed:
            log.info("no longer managed", extra={"workload": w.label, "why": why})
        w.managed = False

    async def _unmanage(self, w: Workload, why: str) -> None:
        """Stop watching for a workload; one we put to sleep is woken, not left at zero."""
        asleep_at_zero = w.status.state == "asleep" and w.replicas == 0
        self._stop_managing(w, why)
        if asleep_at_zero and self._is_leader():
            await self._scaling.restore(_share(w), w.config, why)

    async def _release(self, w: Workload, config: WorkloadConfig) -> None:
        """Opted out, or its namespace was: woken if we left it at zero, and our status removed."""
        if config.opted_out:
            why = f'opted out ({ENABLED}: "false")'
        else:
            why = f'namespace {w.namespace} not opted in ({NAMESPACE_ENABLED_LABEL}: "true")'
        self._stop_managing(w, why)
        # In a namespace being deleted, waking helps no one.
        if self._is_leader() and not self._is_terminating(w):
            await self._scaling.release(_share(w), f"no longer managed: {why}")

    def _forget(self, w: Workload) -> None:
        self._wake_failures.pop(w.key, None)
        self._gate.done(w.key)
        self._timers.cancel(w.key)
        self._subscriptions.release_all(w.key, w.watch)
        self._accounting.account(w.report, w.obj, w.status, w.managed, stop=True)
        self._workloads.pop(w.key, None)
