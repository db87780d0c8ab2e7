"""Sleep and wake: the scale and annotation writes, their retries on conflict, and their Events."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from zeroscaler.api import (
    Conflict,
    Kube,
    KubeError,
    NotFound,
    Obj,
    Priority,
    Withdrawn,
    prioritized,
)
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.context import Context
from zeroscaler.controller.idle_memory import IdleMemory
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.queue import WakeGate
from zeroscaler.controller.report_memory import ReportMemory
from zeroscaler.controller.reporting import Reporter
from zeroscaler.controller.scaling_memory import OwnWake, ScalingMemory
from zeroscaler.controller.watch_memory import WatchMemory
from zeroscaler.controller.workload import LiveWorkload, WorkloadKey
from zeroscaler.controller.workload_object import WorkloadObject, trim_workload
from zeroscaler.core.annotations import (
    CENSUS,
    FIELD_MANAGER,
    FLAPPING,
    FLAPPING_UNTIL,
    RESTORE_REPLICAS,
    WorkloadConfig,
    WorkloadStatus,
    asleep_annotations,
    awake_annotations,
    read_status,
    state_label,
)
from zeroscaler.core.census import Census, format_census
from zeroscaler.core.decision import Decision, plan_release, wake_replicas
from zeroscaler.core.durations import format_duration, format_time
from zeroscaler.core.flapping import (
    RIGHT_AFTER,
    Streak,
    Wake,
    after_wake,
    external_wake,
    quiet_at,
)
from zeroscaler.core.managers import GENERIC_SETTING, by_field_manager, without_replicas
from zeroscaler.core.workloads import workload_path

log = logging.getLogger(__name__)

FollowUp = Coroutine[Any, Any, None]

# Seconds a wake's record waits after its scale write was answered. The API server is telling its
# watchers of the scale-up then (the controller-manager, which starts the pods); a record written at
# once competes with that for its CPU and delays the slowest wakes (docs/figures.md).
RECORD_PAUSE = 0.02
GIVE_UP_ATTEMPTS = 5  # reads and writes giving up spec.replicas, racing the status writes


async def _covered(_: WorkloadKey, __: WorkloadObject) -> bool:
    """Without an activator, nothing needs covering before a sleep."""
    return True


@dataclass(frozen=True, slots=True)
class Outcomes:
    """Where a write's outcome goes: Events and warnings, savings counted, wakes made due or
    done, and the metrics."""

    reporter: Reporter
    accounting: Accounting
    gate: WakeGate[WorkloadKey]
    metrics: Metrics


@dataclass(frozen=True, slots=True)
class BeforeSleep:
    """What a sleep asks of the other parts first: the census it records, whether what the
    workload serves keeps it awake, and the activator's cover for its webhooks (and its end)."""

    census: Callable[[WatchMemory], Census]
    keeps_awake: Callable[[WorkloadKey, WorkloadObject], bool] = lambda *_: False
    cover: Callable[[WorkloadKey, WorkloadObject], Awaitable[bool]] = _covered
    covered_done: Callable[[WorkloadKey], None] = lambda _: None


@dataclass(frozen=True, slots=True)
class ScalingShare:
    """What a sleep or a wake is handed of one workload, by the reconcile that holds its record:
    the key; the record as it is when the write's turn comes (`LiveWorkload`: its writes run
    across awaits); scaling's own memory; the idle clock, restarted through its methods; the
    watch memory, read for the census and the kinds; and the report memory, handed on to the
    accounting and metrics that keep it."""

    key: WorkloadKey
    live: LiveWorkload
    memory: ScalingMemory
    idle: IdleMemory
    watch: WatchMemory
    report: ReportMemory


class Scaling:
    """Carries out decisions through the `scale` subresource; a 409 means "look again"."""

    def __init__(
        self,
        kube: Kube,
        context: Context,
        outcomes: Outcomes,
        before_sleep: BeforeSleep,
        *,
        dry_run: bool,
    ) -> None:
        self._kube = kube
        self._reporter = outcomes.reporter
        self._accounting = outcomes.accounting
        self._gate = outcomes.gate
        self._metrics = outcomes.metrics
        self._clock = context.clock
        self._dry_run = dry_run
        self._enqueue = context.enqueue
        self._is_leader = context.is_leader
        self._census = before_sleep.census
        self._keeps_awake = before_sleep.keeps_awake
        self._cover = before_sleep.cover  # the activator answers for its webhooks before it sleeps
        self._covered_done = before_sleep.covered_done
        self._follow_ups: dict[WorkloadKey, FollowUp] = {}

    def _is_not_leader(self) -> bool:
        return not self._is_leader()

    def status_read(
        self,
        memory: ScalingMemory,
        annotations: Mapping[str, str],
        status: WorkloadStatus,
        *,
        managed: bool,
    ) -> WorkloadStatus:
        """The status in force, from the one just read from `annotations`: that one, or,
        where an update by someone else dropped it while it slept, the one last seen
        (remembered as the annotations that held it). One not asleep is recorded (by us or by
        the next leader): no wake of ours is pending any more."""
        status = self._recorded_status(memory, annotations, status, managed=managed)
        if status.state != "asleep":
            memory.own_wake = None
        return status

    @staticmethod
    def _recorded_status(
        memory: ScalingMemory,
        annotations: Mapping[str, str],
        status: WorkloadStatus,
        *,
        managed: bool,
    ) -> WorkloadStatus:
        if status.state is not None:
            memory.recorded = annotations
            return status
        recorded = memory.recorded
        if recorded is None or not managed:
            return status
        before, _ = read_status(recorded)
        if before.state != "asleep":
            memory.recorded = None
            return status
        return before

    def settle_dry_run(self, memory: ScalingMemory, key: WorkloadKey, why: str | None) -> None:
        """Only what would be done is said for the workload at `key` while `why` (the flag, its
        namespace, or policy); leaving a dry run forgets the state it pretended."""
        if why is None and memory.dry_run is not None:
            memory.pretend = None
            log.info("dry run over", extra={"workload": "/".join(key)})
        memory.dry_run = why

    def forget(self, memory: ScalingMemory) -> None:
        """No longer managed: no pretended state, and a status removed from now on is the
        release's doing."""
        memory.pretend = None
        memory.recorded = None

    def _is_dry_run(self, memory: ScalingMemory) -> bool:
        """Only say what would be done: everywhere (the flag), or where the workload is."""
        return self._dry_run or memory.dry_run is not None

    def take_follow_up(self, key: WorkloadKey) -> FollowUp | None:
        """The write left for `key` to run off the worker (a sleep, or a wake's record), if any."""
        return self._follow_ups.pop(key, None)

    async def act(self, s: ScalingShare, decision: Decision, now: datetime) -> None:
        """Do what the decision says, when leading; a sleep is left as a follow-up."""
        if not self._is_leader():
            return
        if self._is_dry_run(s.memory):
            self._pretend(s.key, s.live.obj, s.memory, s.idle, decision, now)
        elif decision.action == "sleep":
            # It waits its turn behind every wake and record: off the worker, so that however
            # many sleeps wait, a wake always finds a worker free.
            # What it was decided on: activity seen from now calls the sleep off.
            seen = (s.idle.last_activity, s.live.obj.resource_version)
            # Activity so far is in `seen`; only later activity is owed a wake.
            s.idle.owe_nothing()
            self._follow_ups[s.key] = self._guarded(
                s.key, s.live, self._sleep(s, decision, now, seen)
            )
        elif decision.action == "wake":
            reason = decision.reason or "activity"
            if decision.cause:  # a clock's wake: a due time, or max-sleep
                cause, flap_cause = decision.cause, decision.cause
            elif decision.rule == "keep-awake":
                cause, flap_cause = "window", ""
            elif self._keeps_awake(s.key, s.live.obj):
                cause, flap_cause = "serving", reason
            else:
                cause, flap_cause = "activity", s.idle.activity_cause or reason
            await self._guarded(
                s.key,
                s.live,
                self.wake(s, decision.replicas or 1, reason, cause, flap_cause=flap_cause),
            )
        elif decision.action == "record-wake":
            await self._guarded(s.key, s.live, self._record_wake(s))
        elif decision.action == "mark-awake":
            await self._guarded(s.key, s.live, self._mark_awake(s, decision, now))

    async def _guarded(self, key: WorkloadKey, live: LiveWorkload, write: FollowUp) -> None:
        """Run a write; one that lost a race or found the workload gone is looked at again."""
        try:
            await write
        except Conflict:
            log.debug("conflict; looking again", extra={"workload": "/".join(key)})
            await self.refresh(key, live)
            self._enqueue(key)
        except NotFound:
            live.gone()
            self._enqueue(key)

    async def restore(self, s: ScalingShare, config: WorkloadConfig, why: str) -> None:
        """Wake a workload that is no longer managed, to the replicas it would wake to."""
        if self._is_dry_run(s.memory):
            return
        try:
            reason = f"no longer managed ({why})"
            await self.wake(s, wake_replicas(config, s.live.status), reason, "released")
        except Conflict:
            await self.refresh(s.key, s.live)
            self._enqueue(s.key)

    async def release(self, s: ScalingShare, why: str) -> None:
        """Hand back a workload no longer managed: woken if we left it at zero, status removed."""
        plan = plan_release(s.live.obj.annotations, s.live.obj.replicas, injected=False)
        if self._is_dry_run(s.memory) or (plan.wake_to is None and not plan.remove):
            return
        try:
            if plan.wake_to is not None:
                self._accounting.account(
                    s.report, s.live.obj, s.live.status, s.live.managed, stop=True
                )
                await self._scale_up(s.key, s.live, plan.wake_to)
                self._metrics.woke(s.report, s.live.managed, "released")
                message = f"{why}: scaled from 0 to {plan.wake_to} replicas"
                log.info("woken", extra={"workload": "/".join(s.key), "reason": why})
                self._reporter.event(s.key, s.live.obj, "Normal", "Woken", message)
            if plan.remove:
                labels = state_label(None, s.live.obj.labels)
                await self._patch_annotations(
                    s.key, s.live, dict.fromkeys(plan.remove), labels=labels
                )
                log.info("status removed", extra={"workload": "/".join(s.key), "reason": why})
        except Conflict:
            await self.refresh(s.key, s.live)
            self._enqueue(s.key)
        except NotFound:
            s.live.gone()
            self._enqueue(s.key)

    async def _sleep(
        self, s: ScalingShare, decision: Decision, now: datetime, seen: tuple[datetime, str]
    ) -> None:
        replicas = decision.replicas or s.live.obj.replicas
        try:
            await self._sleep_covered(s, decision, now, replicas, seen)
        finally:
            self._covered_done(s.key)

    async def _sleep_covered(
        self,
        s: ScalingShare,
        decision: Decision,
        now: datetime,
        replicas: int,
        seen: tuple[datetime, str],
    ) -> None:
        decided_on, version = seen
        if not await self._cover(
            s.key, s.live.obj
        ):  # the API server must already call the activator
            log.warning(
                "not put to sleep: the activator is unanswered", extra={"workload": "/".join(s.key)}
            )
            s.idle.owe_nothing()
            self._enqueue(s.key)
            return
        # One write, status and scale together: a crash never leaves a workload at zero without
        # the count to restore, and the managers above can be told to leave the field its
        # managedFields entry names (docs/gitops.md).
        status: dict[str, str | None] = dict(asleep_annotations(replicas, now, decided_on))
        # What is in scope now, so a restart can tell what was deleted while nobody watched.
        status[CENSUS] = format_census(self._census(s.watch))
        if FLAPPING_UNTIL in s.live.obj.annotations:  # the hold is over: it is asleep
            status[FLAPPING_UNTIL] = None
        try:
            # A sleep waits its turn behind wakes and records; activity seen meanwhile calls it
            # off before it is sent, rather than sleeping and waking at once, and so does a
            # newer version of the workload (its precondition would fail: decided again).
            slept = await self._patch_annotations(
                s.key,
                s.live,
                status,
                replicas=0,
                labels=state_label("asleep", s.live.obj.labels),
                unless=lambda: (
                    s.idle.last_activity > decided_on
                    or s.live.obj.resource_version != version
                    or self._is_not_leader()
                    or self._keeps_awake(s.key, s.live.obj)  # a link seen meanwhile
                ),
            )
        except Withdrawn:
            log.debug("sleep called off", extra={"workload": "/".join(s.key)})
            s.idle.owe_nothing()  # still awake: no wake is owed
            self._enqueue(s.key)
            return
        await self._give_up_replicas(s.key, s.live, slept)
        cause = "not-ready" if s.idle.starting else "idle"
        if decision.rule == "forced-sleep":
            cause = "window"
        s.idle.slept()
        if s.idle.last_activity > decided_on:  # activity while the write was on its way: wake it
            self._gate.due(s.key)
        else:
            s.idle.owe_nothing()
        self._accounting.start(s.report)
        self._metrics.slept(s.report, s.live.managed, cause)
        kinds = ", ".join(sorted(s.watch.kind_names()))
        message = (
            f"{decision.reason}: scaled from {replicas} to 0 replicas; wakes on a change to {kinds}"
        )
        log.info("sleeping", extra={"workload": "/".join(s.key), "reason": decision.reason})
        self._reporter.event(s.key, s.live.obj, "Normal", "Sleeping", message)
        self._enqueue(s.key)

    async def wake(
        self, s: ScalingShare, replicas: int, reason: str, cause: str, *, flap_cause: str = ""
    ) -> None:
        """Scale up now; recording the wake is left as a follow-up (`take_follow_up`).
        `flap_cause` names what woke it, for flapping (none: a wake that counts for nothing)."""
        self._accounting.account(s.report, s.live.obj, s.live.status, s.live.managed, stop=True)
        await self._scale_up(s.key, s.live, replicas)
        # Its idle clock starts again once it is Ready; it restarts once it is awake, not at
        # the event: a wake may come long after it.
        s.idle.woken(self._clock.now())
        waking_event = s.idle.activity_at
        latency = None if waking_event is None else self._clock.monotonic() - waking_event
        self._metrics.woke(s.report, s.live.managed, cause, latency)
        s.idle.owe_nothing()
        self._gate.done(s.key)
        # Recording the wake can wait for other scale writes. Until it lands the wake is
        # remembered here, so a failed record is tried again rather than read as someone
        # else's wake; only a crash before it leaves one that reads so.
        s.memory.own_wake = OwnWake(replicas, reason, latency, flap_cause)
        self._follow_ups[s.key] = self._record_wake(s, pause=RECORD_PAUSE)

    async def _record_wake(self, s: ScalingShare, *, pause: float = 0.0) -> None:
        if pause:
            await asyncio.sleep(pause)
        own = s.memory.own_wake
        if own is None:
            return
        awake: dict[str, str | None] = dict(awake_annotations(s.idle.last_activity))
        now = self._clock.now()
        streak = Streak()  # a wake that counts for nothing ends whatever flapped
        if own.cause:
            slept = now - (s.live.status.asleep_since or now)
            streak = after_wake(s.memory.streak, Wake(own.cause, now, slept))
        flapping = self._flapping_marks(s.live.obj.annotations, streak, now, awake)
        try:
            # Until it is recorded the workload reads as asleep: right after the scale writes.
            with prioritized(Priority.PROMPT):
                for _ in range(5):
                    try:  # a replica no longer leading leaves it to the next leader
                        recorded = await self._patch_annotations(
                            s.key,
                            s.live,
                            awake,
                            labels=state_label("awake", s.live.obj.labels),
                            unless=self._is_not_leader,
                        )
                        await self._give_up_replicas(s.key, s.live, recorded)
                        break
                    except Conflict:
                        await self.refresh(s.key, s.live)
                        if read_status(s.live.obj.annotations)[0].state != "asleep":
                            break
                else:  # lost every race: decided again, which records it again
                    self._enqueue(s.key)
                    return
        except NotFound:
            s.live.gone()
        except Withdrawn:
            return
        s.memory.own_wake = None
        s.memory.streak = streak
        # Only now does it read as awake: a record that came late must not shorten its time up.
        s.idle.restart(self._clock.now())
        message = f"{own.reason}: scaled from 0 to {own.replicas} replicas"
        extra: dict[str, object] = {"workload": "/".join(s.key), "reason": own.reason}
        if own.latency is not None:  # from the watch event to the scale write's answer
            extra["latency_ms"] = round(own.latency * 1000, 1)
        log.info("woken", extra=extra)
        self._reporter.event(s.key, s.live.obj, "Normal", "Woken", message)
        if flapping is not None:
            self._warn_flapping(s.key, s.live.obj, streak, flapping, manager="")
        self._enqueue(s.key)

    @staticmethod
    def _flapping_marks(
        held: Mapping[str, str],
        streak: Streak,
        now: datetime,
        annotations: dict[str, str | None],
    ) -> str | None:
        """Add to a wake's record what flapping asks (the mark, and a hold for a fight), or take
        off a mark no longer true (`held`: the annotations it has); the mark's text, or None."""
        flapping = streak.reason() if streak.is_flapping else None
        if flapping is not None or FLAPPING in held:
            annotations[FLAPPING] = flapping
        if streak.is_fight:
            annotations[FLAPPING_UNTIL] = format_time(now + streak.hold())
        elif FLAPPING_UNTIL in held:
            annotations[FLAPPING_UNTIL] = None
        return flapping

    def _warn_flapping(
        self, key: WorkloadKey, obj: WorkloadObject, streak: Streak, flapping: str, manager: str
    ) -> None:
        """The Warning for a streak: by whom, and for a fight how long it is left awake and
        what setting of the manager stops it."""
        log.warning("flapping", extra={"workload": "/".join(key), "why": flapping})
        if manager:
            found = by_field_manager(manager, obj.managers)
            setting = found.setting if found is not None else GENERIC_SETTING
            who = f"{found} as field manager {manager}" if found else f"field manager {manager}"
            advice = f"{who} re-applies spec.replicas after each sleep; to stop it, {setting}"
        else:
            advice = "what wakes it comes with its own sleep"
        if streak.is_fight:
            until = format_time(self._clock.now() + streak.hold())
            message = (
                f"{flapping}, each within {format_duration(RIGHT_AFTER.total_seconds())} of its "
                f"sleep: {advice}. Left awake until {until} (remove {FLAPPING} to let it sleep "
                "again sooner)"
            )
        else:
            message = f"{flapping}, each time after a sleep: {advice} (docs/gitops.md)"
        self._reporter.event(key, obj, "Warning", "Flapping", message)

    async def _mark_awake(self, s: ScalingShare, decision: Decision, now: datetime) -> None:
        s.idle.marked_awake(now)
        self._accounting.account(s.report, s.live.obj, s.live.status, s.live.managed, stop=True)
        s.idle.owe_nothing()
        manager = s.live.obj.replicas_manager
        replicas = decision.replicas or s.live.obj.replicas
        streak = Streak()
        if manager is not None:
            slept = now - (s.live.status.asleep_since or now)
            streak = after_wake(s.memory.streak, external_wake(manager, replicas, now, slept))
        annotations: dict[str, str | None] = dict(awake_annotations(now))
        flapping = self._flapping_marks(s.live.obj.annotations, streak, now, annotations)
        restore = s.live.status.restore_replicas
        if restore is not None and RESTORE_REPLICAS not in s.live.obj.annotations:
            annotations[RESTORE_REPLICAS] = str(restore)  # dropped by a manager's full update
        labels = state_label("awake", s.live.obj.labels)
        await self._patch_annotations(s.key, s.live, annotations, labels=labels)
        s.memory.streak = streak  # only once recorded: a write that lost a race is decided again
        self._metrics.woke(s.report, s.live.managed, "external")
        found = by_field_manager(manager, s.live.obj.managers) if manager else None
        by = f" (field manager {manager})" if manager else ""
        if found is not None:
            by = f" ({found}, field manager {manager})"
        message = (
            f"scaled to {replicas} replicas by someone else{by} while asleep; "
            "now awake, idle clock restarted"
        )
        if decision.cause == "status-dropped":
            kept = f" (restore-replicas {restore})" if restore is not None else ""
            message += f"; its update removed zeroscaler's annotations, written back{kept}"
        log.info("woken externally", extra={"workload": "/".join(s.key), "by": manager or ""})
        self._reporter.event(s.key, s.live.obj, "Normal", "WokenExternally", message)
        if flapping is not None:
            self._warn_flapping(s.key, s.live.obj, streak, flapping, manager or "")
        self._enqueue(s.key)

    async def settle_flapping(
        self, key: WorkloadKey, live: LiveWorkload, memory: ScalingMemory, now: datetime
    ) -> datetime | None:
        """Remove the flapping mark once it stays asleep long enough, and a fight's hold once it
        is over (or its mark was removed); else when to look again."""
        held = live.status.flapping_until
        if FLAPPING_UNTIL in live.obj.annotations and live.status.state != "asleep":
            if FLAPPING in live.obj.annotations and held is not None and now < held:
                return held
            if not self._is_leader() or self._dry_run:
                return None
            changes: dict[str, str | None] = {FLAPPING_UNTIL: None}
            if FLAPPING not in live.obj.annotations:  # a person took the mark off: begin afresh
                memory.streak = Streak()
            try:
                await self._patch_annotations(key, live, changes)
            except Conflict:
                await self.refresh(key, live)
                self._enqueue(key)
                return None
            log.info("flapping hold over", extra={"workload": "/".join(key)})
            self._reporter.event(
                key,
                live.obj,
                "Normal",
                "FlappingHoldOver",
                "no longer left awake: it sleeps when idle",
            )
            self._enqueue(key)
            return None
        since = live.status.asleep_since
        if FLAPPING not in live.obj.annotations or live.status.state != "asleep" or since is None:
            return None
        quiet = quiet_at(memory.streak, since)
        if now < quiet or not self._is_leader() or self._is_dry_run(memory):
            return quiet
        try:
            await self._patch_annotations(key, live, {FLAPPING: None})
        except Conflict:
            await self.refresh(key, live)
            self._enqueue(key)
            return None
        memory.streak = Streak()
        log.info("no longer flapping", extra={"workload": "/".join(key)})
        self._reporter.event(
            key,
            live.obj,
            "Normal",
            "FlappingStopped",
            "asleep without being woken again: no longer flapping",
        )
        return None

    def _pretend(
        self,
        key: WorkloadKey,
        obj: WorkloadObject,
        memory: ScalingMemory,
        idle: IdleMemory,
        decision: Decision,
        now: datetime,
    ) -> None:
        if decision.action == "sleep":
            replicas = decision.replicas or obj.replicas
            status = WorkloadStatus("asleep", replicas, now, idle.last_activity)
            memory.pretend = (status, 0)
            message = (
                f"{self._dry_label(memory)}: would sleep ({decision.reason}), "
                f"scaling {replicas} to 0"
            )
            reason = "WouldSleep"
        elif decision.action == "wake":
            replicas = decision.replicas or 1
            idle.restart(now)
            memory.pretend = (
                WorkloadStatus("awake", last_activity=idle.last_activity),
                replicas,
            )
            message = (
                f"{self._dry_label(memory)}: would wake ({decision.reason}), "
                f"scaling 0 to {replicas}"
            )
            reason = "WouldWake"
        else:
            memory.pretend = None
            return
        self._metrics.dry_run_decisions.labels(decision.action).inc()
        idle.owe_nothing()
        log.info(message, extra={"workload": "/".join(key)})
        self._reporter.event(key, obj, "Normal", reason, message)
        self._enqueue(key)

    def _dry_label(self, memory: ScalingMemory) -> str:
        why = memory.dry_run
        return "dry run" if self._dry_run or why is None else f"dry run ({why})"

    async def annotate(
        self, key: WorkloadKey, live: LiveWorkload, changes: Mapping[str, str | None]
    ) -> None:
        """Write annotations (None removes one), guarded by the resourceVersion read."""
        await self._patch_annotations(key, live, changes)

    async def _scale_up(self, key: WorkloadKey, live: LiveWorkload, replicas: int) -> None:
        """The scale write of a wake; one refused or unanswered counts as a failed wake."""
        try:
            await self._patch_scale(key, live, replicas, urgent=True)
        except (Conflict, NotFound):
            raise  # looked at again at once
        except KubeError:
            self._metrics.wake_failures.inc()
            raise

    async def _give_up_replicas(self, key: WorkloadKey, live: LiveWorkload, written: Obj) -> None:
        """A workload that another manager writes by server-side apply (Helm 4's upgrade):
        zeroscaler gives up its ownership of spec.replicas right after its write, so that the
        applier's next apply is not refused with a conflict on it (the apply then sets the
        replicas, and wakes the workload as any scale-up by someone else does). The status
        writes that follow a scale race it: it is tried again on the version read again, a few
        times; failing, the ownership stays as it is (nothing is lost but that convenience)."""
        if not live.obj.applied:
            return
        for _ in range(GIVE_UP_ATTEMPTS):
            meta = written.get("metadata") or {}
            kept = without_replicas(meta.get("managedFields"), FIELD_MANAGER)
            if kept is None:
                return
            version = meta.get("resourceVersion")
            body = {"metadata": {"resourceVersion": version, "managedFields": kept}}
            try:
                answer = await self._kube.patch(workload_path(*key), body)
            except Conflict:
                try:
                    written = await self._kube.get(workload_path(*key))
                except KubeError:
                    break
                continue
            except KubeError as e:
                log.info("spec.replicas kept", extra={"workload": "/".join(key), "why": str(e)})
                return
            live.take(trim_workload(answer))
            log.debug("spec.replicas given up", extra={"workload": "/".join(key)})
            return
        log.info("spec.replicas kept: lost every race", extra={"workload": "/".join(key)})

    async def _patch_annotations(
        self,
        key: WorkloadKey,
        live: LiveWorkload,
        annotations: Mapping[str, str | None],
        *,
        replicas: int | None = None,
        labels: Mapping[str, str | None] | None = None,
        unless: Callable[[], bool] | None = None,
    ) -> Obj:
        """Merge-patch annotations (None removes one), labels and replicas if given, on the
        version read; not sent if `unless()` holds when its turn comes (`Withdrawn`); the
        object as answered."""
        body: dict[str, Any] = {
            "metadata": {"resourceVersion": live.obj.resource_version, "annotations": annotations}
        }
        if labels:  # the state label rides on the status write: no request of its own
            body["metadata"]["labels"] = dict(labels)
        if replicas is not None:
            body["spec"] = {"replicas": replicas}
        try:
            patched = await self._kube.patch(workload_path(*key), body, unless=unless)
        except KubeError as e:
            write = "annotations" if replicas is None else "sleep"
            self._metrics.failed_writes.labels(write, str(e.status)).inc()
            raise
        live.take(trim_workload(patched))
        return patched

    async def _patch_scale(
        self, key: WorkloadKey, live: LiveWorkload, replicas: int, *, urgent: bool = False
    ) -> None:
        body = {
            "metadata": {"resourceVersion": live.obj.resource_version},
            "spec": {"replicas": replicas},
        }
        try:
            # A wake's scale write goes before every other waiting request: records, Events, sleeps.
            scale = await self._kube.patch(workload_path(*key) + "/scale", body, urgent=urgent)
        except KubeError as e:
            self._metrics.failed_writes.labels("scale", str(e.status)).inc()
            raise
        version = str((scale.get("metadata") or {}).get("resourceVersion", ""))
        live.take(replace(live.obj, replicas=replicas, resource_version=version))

    async def refresh(self, key: WorkloadKey, live: LiveWorkload) -> None:
        """Read the workload again; gone, it is marked deleted."""
        try:
            live.take(trim_workload(await self._kube.get(workload_path(*key))))
        except NotFound:
            live.gone()
