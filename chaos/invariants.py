"""The four promises of issue 12, checked from outside after a fault scenario.

An `Observer` samples the workloads of one namespace (and the controller Lease) a few times a second
and watches every change of them while a scenario runs; the scenario tells it when it made activity
and when a fault began and ended.
`check` then reads those samples and the controllers' logs:

1. awake after activity: after every activity the workload is awake (state `awake`, its
   replicas) within `bound` seconds of the controller being able to see it, and never asleep again
   from a sleep that began before the activity;
2. no premature sleep: no sleep begins less than its timeout after activity (times are written to
   the second, so a second's tolerance; an activity known only to lie between sending a request
   and its answer counts from the sending, since only a sleep certainly too soon is premature);
3. no restore count lost: every asleep sample carries the restore count the workload had, and the
   end state is awake at that count or asleep remembering it;
4. one writer: the controllers' leadership intervals never overlap, every sleep and wake is written
   by the replica leading at the time, and every Lease holder sampled is a replica that says it
   leads.

Each check refuses to judge nothing (`NothingToJudge`): no samples, no activity, no sleep, no
leadership or write found in the logs (a renamed logger reads as none), no Lease holder sampled.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch

from zeroscaler.core.durations import parse_time

LEASE = "zeroscaler-controller"
TOLERANCE = timedelta(seconds=1)  # status times are to the second
_LINE = re.compile(r'^time=(\S+) level=\S+ logger=(\S+) msg=("[^"]*"|\S+)(.*)$')
SERVICE_LOGGER = "controller"
LEADER_LOGGER = "zeroscaler.controller.leader"
SCALING_LOGGER = "zeroscaler.controller.scaling"
_WRITES = {"sleeping", "woken", "woken externally"}

Fault = tuple[datetime, datetime | None]  # from when the controller could not see, until when


class NothingToJudge(AssertionError):
    """A check was given nothing it could find a violation in: it would pass by checking nothing."""


class Unsettled(AssertionError):
    """Workloads still not at rest when waiting for them ran out."""


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at a workload."""

    at: datetime
    replicas: int
    state: str
    restore: str | None
    asleep_since: datetime | None


@dataclass
class Report:
    """What one scenario's checks found."""

    wakes_expected: int = 0
    wakes_observed: int = 0
    worst_delay: float | None = None  # seconds from when a wake was possible to the awake sample
    violations: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)  # what was sampled, to read a failure by

    def add(self, other: Report) -> None:
        self.wakes_expected += other.wakes_expected
        self.wakes_observed += other.wakes_observed
        delays = [d for d in (self.worst_delay, other.worst_delay) if d is not None]
        self.worst_delay = max(delays, default=None)
        self.violations += other.violations
        self.trace += other.trace


@dataclass
class WorkloadRecord:
    """What the observer knows of one workload: what it should be, and what was seen."""

    replicas: int
    timeout: float
    counts: set[int] = field(default_factory=set)  # every count it was meant to have
    # Each activity as (began, done): the request that made it was sent at `began` and answered
    # at `done`; the change itself happened in between.
    activity: list[tuple[datetime, datetime]] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    version: int = 0  # resourceVersion of the newest sample


class Observer:
    """Samples one namespace's Deployments and the Lease in a thread, until `stop`."""

    def __init__(
        self, api_factory: Callable[[], k8s.ApiClient], namespace: str, interval: float = 0.2
    ) -> None:
        self._factory = api_factory
        self.namespace = namespace
        self.interval = interval
        self.workloads: dict[str, WorkloadRecord] = {}
        self.faults: list[Fault] = []
        self.holders: list[tuple[datetime, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._watcher = threading.Thread(target=self._watch, daemon=True)

    def expect(self, name: str, replicas: int, timeout: float) -> None:
        """A workload to watch, created with `replicas` and an idle timeout of `timeout` s."""
        with self._lock:
            self.workloads[name] = WorkloadRecord(replicas, timeout, {replicas})

    def set_replicas(self, name: str, replicas: int) -> None:
        """Someone else changed the count it should wake to (a conflicting writer)."""
        with self._lock:
            self.workloads[name].replicas = replicas
            self.workloads[name].counts.add(replicas)

    def activity(
        self,
        names: Iterable[str] | None = None,
        at: datetime | None = None,
        *,
        began: datetime | None = None,
    ) -> None:
        """Activity in these workloads' scope (all when None) has just happened, at `at` (now),
        or somewhere between `began` and then: a request answered late on a loaded machine made
        its change before the answer came (the controller may see it first)."""
        done = at or now()
        when = (began or done, done)
        with self._lock:
            for name in self.workloads if names is None else names:
                self.workloads[name].activity.append(when)

    def fault(self) -> None:
        """From now the controller cannot see the cluster (or is not running)."""
        with self._lock:
            self.faults.append((now(), None))

    def recovered(self) -> None:
        """The fault is over: the controller can see the cluster again."""
        with self._lock:
            start, _ = self.faults[-1]
            self.faults[-1] = (start, now())

    def __enter__(self) -> Observer:
        self._thread.start()
        self._watcher.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._watcher):
            if thread.is_alive():
                thread.join()

    def _run(self) -> None:
        api = self._factory()
        apps, coordination = k8s.AppsV1Api(api), k8s.CoordinationV1Api(api)
        try:
            while not self._stop.is_set():
                with contextlib.suppress(Exception):  # an API server that is down: no sample
                    self._sample(apps, coordination)
                self._stop.wait(self.interval)
        finally:
            api.close()

    def _watch(self) -> None:
        """Every change of the namespace's Deployments besides the samples: on a loaded machine
        a state can last less than a sampling step (awake between a late wake record and the
        next sleep)."""
        api = self._factory()
        apps = k8s.AppsV1Api(api)
        version: str | None = None
        try:
            while not self._stop.is_set():
                try:
                    events = watch.Watch().stream(
                        apps.list_namespaced_deployment,
                        self.namespace,
                        resource_version=version,
                        timeout_seconds=2,
                        _request_timeout=10,
                    )
                    for event in events:  # not left early: the stream closes its connection
                        version = event["object"].metadata.resource_version
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self.record([event["object"]])
                except Exception:  # 410 Gone, or an API server that is down: start afresh
                    version = None
                    self._stop.wait(self.interval)
        finally:
            api.close()

    def _sample(self, apps: k8s.AppsV1Api, coordination: k8s.CoordinationV1Api) -> None:
        self.record(apps.list_namespaced_deployment(self.namespace, _request_timeout=2).items)
        try:
            lease = coordination.read_namespaced_lease(LEASE, self.namespace, _request_timeout=2)
        except k8s.ApiException:
            return
        with self._lock:
            self.holders.append((now(), str(lease.spec.holder_identity or "")))

    def record(self, deployments: Iterable[Any]) -> None:
        """Samples of these Deployments as read now; a copy older than one already recorded (a
        list answered late, after a watch event) is left out."""
        with self._lock:
            at = now()
            for d in deployments:
                w = self.workloads.get(d.metadata.name)
                version = int(d.metadata.resource_version or 0)
                if w is None or version < w.version:
                    continue
                w.version = version
                ann = d.metadata.annotations or {}
                since = ann.get("zeroscaler.io/asleep-since")
                w.samples.append(
                    Sample(
                        at,
                        int(d.spec.replicas or 0),
                        ann.get("zeroscaler.io/state", ""),
                        ann.get("zeroscaler.io/restore-replicas"),
                        parse_time(since) if since else None,
                    )
                )

    def seen_asleep(self) -> bool:
        """Whether every workload's newest sample is asleep at zero: activity from now on is
        activity the checker knows a sleeping workload must wake for."""
        with self._lock:
            return bool(self.workloads) and all(
                w.samples and w.samples[-1].state == "asleep" and w.samples[-1].replicas == 0
                for w in self.workloads.values()
            )

    def settled(self) -> bool:
        """Whether every workload's newest sample, newer than its last activity and recovery,
        is awake at its count or asleep remembering it from a sleep after that activity."""
        return not self.unsettled()

    def unsettled(self) -> list[str]:
        """The workloads not at rest yet, each with its newest sample."""
        with self._lock:
            ends = [end for _, end in self.faults if end is not None]
            return [
                f"{name}: {_describe(w.samples[-1]) if w.samples else 'never sampled'}"
                for name, w in self.workloads.items()
                if not _rested(w, ends)
            ]

    def check(
        self, bound: float, logs: Iterable[Path], ended: dict[str, datetime] | None = None
    ) -> Report:
        """Check the four invariants on what was sampled, and the controllers' logs."""
        with self._lock:
            if not self.workloads:
                raise NothingToJudge(f"no workload was expected in {self.namespace}")
            report = Report()
            for name, w in self.workloads.items():
                report.add(check_wakes(name, w, self.faults, timedelta(seconds=bound)))
                report.violations += check_premature(name, w)
                report.violations += check_restore(name, w)
                report.trace += _timeline(name, w, self.faults)
            leaders = read_leadership(logs, ended or {})
            report.violations += check_one_writer(leaders, self.holders)
            return report


def _rested(w: WorkloadRecord, ends: list[datetime]) -> bool:
    if not w.samples:
        return False
    last = w.samples[-1]
    since = max([*(done for _, done in w.activity), *ends], default=None)
    if since is not None and last.at <= since:
        return False  # a sample from before: says nothing about what came after
    return _is_at_rest(last, w) and not _slept_too_early(last, w)


def _slept_too_early(s: Sample, w: WorkloadRecord) -> bool:
    """Asleep from a sleep that is not clearly the one the newest activity's timeout ends in:
    one written at or before the activity's answer (it may have come before the change), or
    sooner than the timeout from when the activity was sent, less a second for status times
    written to the second (before the controller saw the change, or premature)."""
    if s.state != "asleep" or s.asleep_since is None or not w.activity:
        return False
    began = max(b for b, _ in w.activity)
    done = max(d for _, d in w.activity)
    return s.asleep_since <= done or _too_soon(s.asleep_since, w, began)


def _visible_from(faults: Iterable[Fault], at: datetime) -> datetime:
    """When the controller could first see what was done at `at`: after the fault it fell in."""
    for start, end in faults:
        if start <= at and (end is None or at <= end):
            return end or at
    return at


def check_wakes(name: str, w: WorkloadRecord, faults: Sequence[Fault], bound: timedelta) -> Report:
    """Promise 1: after every activity the workload is awake within `bound` of the controller
    being able to see it, and not still asleep from a sleep that began before it (or so soon
    after it that the activity must have found it asleep, or the sleep was premature)."""
    if not w.samples:
        raise NothingToJudge(f"{name}: never sampled")
    if not w.activity:
        raise NothingToJudge(f"{name}: no activity to judge its wakes by")
    report = Report()
    for began, done in w.activity:
        _check_wake(name, w, faults, (began, done), bound, report)
    return report


def _check_wake(
    name: str,
    w: WorkloadRecord,
    faults: Sequence[Fault],
    activity: tuple[datetime, datetime],
    bound: timedelta,
    report: Report,
) -> None:
    began, done = activity
    times = [s.at for s in w.samples]
    at = bisect.bisect_right(times, done)
    before, after = w.samples[at - 1 : at], w.samples[at:]
    was_asleep = (before and _is_asleep(before[-1], done)) or (after and _is_asleep(after[0], done))
    first_awake = next((s for s in after if _is_awake(s, w)), None)
    visible = _visible_from(faults, done)
    # A fault that began before its wake (a controller killed mid-wake) moves the start on.
    for start, end in faults:
        began_before_wake = first_awake is None or start <= first_awake.at
        if end is not None and start >= done and end > visible and began_before_wake:
            visible = end
    deadline = visible + bound
    if was_asleep:
        report.wakes_expected += 1
        if first_awake is not None and first_awake.at <= deadline:
            report.wakes_observed += 1
            delay = max((first_awake.at - visible).total_seconds(), 0.0)
            report.worst_delay = max(report.worst_delay or 0.0, delay)
    # asleep-since only moves forward, so the first sleep seen after the deadline tells. A sleep
    # the activity's own timeout cannot account for is one from before it that no wake ended,
    # or one within a second after it (which then also found it asleep, or came too soon).
    late = w.samples[bisect.bisect_right(times, deadline) :]
    stuck = next((s for s in late if s.state == "asleep" and s.asleep_since is not None), None)
    late_wake = first_awake is None or first_awake.at > deadline
    if stuck is not None and stuck.asleep_since and _too_soon(stuck.asleep_since, w, began):
        report.violations.append(
            f"{name}: activity at {done:%H:%M:%S.%f} not woken within "
            f"{bound.total_seconds():g}s of {visible:%H:%M:%S.%f}: still asleep at "
            f"{stuck.at:%H:%M:%S.%f} since {stuck.asleep_since:%H:%M:%S}"
        )
    elif was_asleep and late_wake:
        report.violations.append(
            f"{name}: activity at {done:%H:%M:%S.%f} not woken within "
            f"{bound.total_seconds():g}s of {visible:%H:%M:%S.%f}"
        )


def _too_soon(since: datetime, w: WorkloadRecord, began: datetime) -> bool:
    """Whether a sleep written at `since` came sooner than the timeout after an activity sent at
    `began` would allow, less a second: status times are written to the second."""
    return since - began < timedelta(seconds=w.timeout) - TOLERANCE


def check_premature(name: str, w: WorkloadRecord) -> list[str]:
    """Promise 2: no sleep begins clearly after an activity and sooner than its timeout from
    when the activity was sent."""
    sleeps = sorted({s.asleep_since for s in w.samples if s.state == "asleep" and s.asleep_since})
    if not sleeps:
        raise NothingToJudge(f"{name}: never seen asleep, so no sleep to judge")
    if not w.activity:
        raise NothingToJudge(f"{name}: no activity to judge its sleeps against")
    violations = []
    for since in sleeps:
        # Clearly after the activity was done, and too soon even from when it began. A sleep
        # within the second after it is left to the wake check: it either found the workload
        # asleep (and must be woken) or was premature (and is still asleep at the deadline).
        early = [
            began
            for began, done in w.activity
            if done + TOLERANCE < since and _too_soon(since, w, began)
        ]
        if early:
            violations.append(
                f"{name}: asleep since {since:%H:%M:%S}, "
                f"{(since - early[-1]).total_seconds():.1f}s after activity "
                f"(timeout {w.timeout:g}s)"
            )
    return violations


def check_restore(name: str, w: WorkloadRecord) -> list[str]:
    """Promise 3: every asleep sample remembers a count the workload had, and it ends awake at
    its count or asleep remembering it."""
    asleep = [s for s in w.samples if s.state == "asleep" and s.replicas == 0]
    if not asleep:
        raise NothingToJudge(f"{name}: never seen asleep at 0, so no restore count to judge")
    violations = []
    counts = {str(c) for c in w.counts}
    wrong = next((s for s in asleep if s.restore not in counts), None)
    if wrong is not None:
        violations.append(
            f"{name}: asleep at {wrong.at:%H:%M:%S.%f} with restore-replicas {wrong.restore!r}, "
            f"expected {w.replicas}"
        )
    last = w.samples[-1]
    if not _is_at_rest(last, w):
        violations.append(
            f"{name}: ends {last.state or 'unmanaged'} at {last.replicas} replicas "
            f"(restore {last.restore!r}), expected awake at {w.replicas} "
            "or asleep remembering it"
        )
    return violations


def _describe(s: Sample) -> str:
    since = "-" if s.asleep_since is None else f"{s.asleep_since:%H:%M:%S}"
    return f"{s.state or '-'} {s.replicas} restore={s.restore} since={since}"


def _timeline(name: str, w: WorkloadRecord, faults: Sequence[Fault]) -> list[str]:
    """The workload's samples, one line per change, with its activity and the faults between."""
    marks = [(done, "activity") for _, done in w.activity]
    for start, end in faults:
        marks.append((start, "fault"))
        if end is not None:
            marks.append((end, "recovered"))
    events: list[tuple[datetime, str]] = sorted(marks)
    seen: tuple[int, str, str | None, datetime | None] | None = None
    previous: datetime | None = None
    for s in w.samples:
        look = (s.replicas, s.state, s.restore, s.asleep_since)
        if previous is not None and s.at - previous > TOLERANCE:
            gap = (s.at - previous).total_seconds()
            events.append((previous, f"then no sample for {gap:.1f}s"))
        previous = s.at
        if look != seen:
            events.append((s.at, _describe(s)))
            seen = look
    events.sort(key=lambda e: e[0])
    return [f"{name} {at:%H:%M:%S.%f} {what}" for at, what in events]


def _is_asleep(s: Sample, activity: datetime) -> bool:
    """Asleep from a sleep that began before `activity`."""
    return s.state == "asleep" and s.asleep_since is not None and s.asleep_since <= activity


def _is_awake(s: Sample, w: WorkloadRecord) -> bool:
    return s.state in ("awake", "") and s.replicas in w.counts  # "": never put to sleep yet


def _is_at_rest(s: Sample, w: WorkloadRecord) -> bool:
    asleep = s.state == "asleep" and s.replicas == 0 and s.restore == str(w.replicas)
    return asleep or (s.state in ("awake", "") and s.replicas == w.replicas)


@dataclass
class Leader:
    """One controller log: the replica's id, when it led, and the sleeps and wakes it wrote."""

    id: str
    log: str
    intervals: list[tuple[datetime, datetime]]
    writes: list[tuple[datetime, str]]


def read_leadership(logs: Iterable[Path], ended: dict[str, datetime]) -> list[Leader]:
    """Per controller log: when it led (to its last line or its kill) and the writes it made.
    A log none of whose lines reads as the controller's, or without its start, is refused: a
    changed format or logger name would otherwise read as a replica that did nothing."""
    found = []
    for log in logs:
        begun: datetime | None = None
        intervals: list[tuple[datetime, datetime]] = []
        writes: list[tuple[datetime, str]] = []
        last: datetime | None = None
        ident = ""
        starts = 0
        for line in log.read_text(errors="replace").splitlines():
            m = _LINE.match(line)
            if m is None:
                continue
            at, logger, msg = parse_time(m[1]), m[2], m[3].strip('"')
            if logger == SERVICE_LOGGER and msg == "starting":
                starts += 1
                if begun and last:
                    intervals.append((begun, last))  # a killed process, restarted into the same log
                    begun = None
            last = at
            if logger == LEADER_LOGGER and msg == "became leader":
                begun = at
                named = re.search(r" id=(\S+)", m[4])
                if named is None:
                    raise NothingToJudge(f"{log}: 'became leader' at {m[1]} names no id")
                ident = named[1]
            elif logger == LEADER_LOGGER and msg == "stopped leading" and begun:
                intervals.append((begun, at))
                begun = None
            elif logger == SCALING_LOGGER and msg in _WRITES:
                writes.append((at, msg))
        if last is None:
            raise NothingToJudge(f"{log}: no line reads as a controller log line")
        if not starts:
            raise NothingToJudge(f"{log}: no 'starting' line from logger {SERVICE_LOGGER!r}")
        if begun is not None:
            intervals.append((begun, max(last, ended.get(str(log), last))))
        found.append(Leader(ident, str(log), intervals, writes))
    return found


def check_one_writer(leaders: list[Leader], holders: list[tuple[datetime, str]]) -> list[str]:
    """Promise 4: leadership never overlaps, every write comes from the replica leading, and
    every Lease holder sampled is one of ours."""
    if not leaders:
        raise NothingToJudge("no controller log to judge leadership by")
    if not any(leader.intervals for leader in leaders):
        raise NothingToJudge(
            f"no {LEADER_LOGGER!r} 'became leader' line in {', '.join(x.log for x in leaders)}"
        )
    if not any(leader.writes for leader in leaders):
        raise NothingToJudge(
            f"no sleep or wake from {SCALING_LOGGER!r} in {', '.join(x.log for x in leaders)}"
        )
    held = [(at, holder) for at, holder in holders if holder]
    if not held:
        raise NothingToJudge("the Lease was never sampled with a holder")
    violations = []
    for leader in leaders:
        for at, what in leader.writes:
            if not any(a <= at <= b for a, b in leader.intervals):
                violations.append(f"{leader.log}: {what} at {at:%H:%M:%S.%f} while not leading")
    spans = sorted((a, b, leader.log) for leader in leaders for a, b in leader.intervals)
    for (_, end, log), (start, _, other) in itertools.pairwise(spans):
        if start < end:
            violations.append(
                f"{other} led from {start:%H:%M:%S.%f} while {log} led until {end:%H:%M:%S.%f}"
            )
    known = {leader.id for leader in leaders if leader.intervals}
    for at, holder in held:
        if holder not in known:
            violations.append(
                f"the Lease was held by {holder!r} at {at:%H:%M:%S.%f}, no replica of ours"
            )
            break
    return violations


def wait_settled(observer: Observer, timeout: float = 60.0) -> None:
    """Wait until every workload is at rest (awake at its count, or asleep remembering it from a
    sleep its last activity accounts for); raise `Unsettled` naming those that are not."""
    deadline = time.monotonic() + timeout
    while not observer.settled():
        if time.monotonic() >= deadline:
            left = observer.unsettled()
            if not left:
                return
            raise Unsettled(f"not at rest after {timeout:g}s: " + "; ".join(left))
        time.sleep(observer.interval)
