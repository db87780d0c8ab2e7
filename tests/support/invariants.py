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
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterable
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
_WRITES = {"sleeping", "woken", "woken externally"}


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
class _Workload:
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
        self.workloads: dict[str, _Workload] = {}
        self.faults: list[tuple[datetime, datetime | None]] = []
        self.holders: list[tuple[datetime, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._watcher = threading.Thread(target=self._watch, daemon=True)

    def expect(self, name: str, replicas: int, timeout: float) -> None:
        """A workload to watch, created with `replicas` and an idle timeout of `timeout` s."""
        with self._lock:
            self.workloads[name] = _Workload(replicas, timeout, {replicas})

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
        with self._lock:
            ends = [end for _, end in self.faults if end is not None]
            return all(self._rested(w, ends) for w in self.workloads.values())

    @staticmethod
    def _rested(w: _Workload, ends: list[datetime]) -> bool:
        if not w.samples:
            return False
        last = w.samples[-1]
        since = max([*(done for _, done in w.activity), *ends], default=None)
        if since is not None and last.at <= since:
            return False  # a sample from before: says nothing about what came after
        # Status times are to the second: a sleep within a second of the activity may have come
        # before it, so only a sleep clearly after it counts as rest.
        slept_through = bool(w.activity) and _is_asleep(last, w.activity[-1][1] + TOLERANCE)
        return _is_at_rest(last, w) and not slept_through

    def check(
        self, bound: float, logs: Iterable[Path] = (), ended: dict[str, datetime] | None = None
    ) -> Report:
        """Check the four invariants on what was sampled, and the controllers' logs."""
        with self._lock:
            report = Report()
            for name, w in self.workloads.items():
                self._check_workload(name, w, timedelta(seconds=bound), report)
                report.trace += _timeline(name, w, self.faults)
            leaders = _leadership(logs, ended or {})
            report.violations += _one_writer(leaders, self.holders)
            return report

    def _visible_from(self, at: datetime) -> datetime:
        """When the controller could first see what was done at `at`: after the fault it fell in."""
        for start, end in self.faults:
            if start <= at and (end is None or at <= end):
                return end or at
        return at

    def _check_workload(self, name: str, w: _Workload, bound: timedelta, report: Report) -> None:
        timeout = timedelta(seconds=w.timeout)
        for _, done in w.activity:
            self._check_wake(name, w, done, bound, report)
        sleeps = sorted(
            {s.asleep_since for s in w.samples if s.state == "asleep" and s.asleep_since}
        )
        for since in sleeps:
            # Clearly after the activity was done, and too soon even from when it began.
            early = [
                began
                for began, done in w.activity
                if done + TOLERANCE < since and since - began < timeout - TOLERANCE
            ]
            if early:
                report.violations.append(
                    f"{name}: asleep since {since:%H:%M:%S}, "
                    f"{(since - early[-1]).total_seconds():.1f}s after activity "
                    f"(timeout {w.timeout:g}s)"
                )
        counts = {str(c) for c in w.counts}
        for s in w.samples:
            if s.state == "asleep" and s.replicas == 0 and s.restore not in counts:
                report.violations.append(
                    f"{name}: asleep at {s.at:%H:%M:%S.%f} with restore-replicas {s.restore!r}, "
                    f"expected {w.replicas}"
                )
                break
        if w.samples and not _is_at_rest(w.samples[-1], w):
            last = w.samples[-1]
            report.violations.append(
                f"{name}: ends {last.state or 'unmanaged'} at {last.replicas} replicas "
                f"(restore {last.restore!r}), expected awake at {w.replicas} "
                "or asleep remembering it"
            )

    def _check_wake(
        self, name: str, w: _Workload, activity: datetime, bound: timedelta, report: Report
    ) -> None:
        times = [s.at for s in w.samples]
        at = bisect.bisect_right(times, activity)
        before, after = w.samples[at - 1 : at], w.samples[at:]
        was_asleep = (before and _is_asleep(before[-1], activity)) or (
            after and _is_asleep(after[0], activity)
        )
        first_awake = next((s for s in after if _is_awake(s, w)), None)
        visible = self._visible_from(activity)
        # A fault that began before its wake (a controller killed mid-wake) moves the start on.
        for start, end in self.faults:
            began_before_wake = first_awake is None or start <= first_awake.at
            if end is not None and start >= activity and end > visible and began_before_wake:
                visible = end
        deadline = visible + bound
        if was_asleep:
            report.wakes_expected += 1
            if first_awake is not None and first_awake.at <= deadline:
                report.wakes_observed += 1
                delay = max((first_awake.at - visible).total_seconds(), 0.0)
                report.worst_delay = max(report.worst_delay or 0.0, delay)
        # asleep-since only moves forward, so the first sleep seen after the deadline tells.
        late = w.samples[bisect.bisect_right(times, deadline) :]
        first_asleep = next((s for s in late if s.state == "asleep"), None)
        stuck = first_asleep is not None and _is_asleep(first_asleep, activity - TOLERANCE)
        late_wake = first_awake is None or first_awake.at > deadline
        if stuck or (was_asleep and late_wake):
            report.violations.append(
                f"{name}: activity at {activity:%H:%M:%S.%f} not woken within "
                f"{bound.total_seconds():g}s of {visible:%H:%M:%S.%f}"
            )


def _timeline(name: str, w: _Workload, faults: list[tuple[datetime, datetime | None]]) -> list[str]:
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
            since = "-" if s.asleep_since is None else f"{s.asleep_since:%H:%M:%S}"
            look_s = f"{s.state or '-'} {s.replicas} restore={s.restore} since={since}"
            events.append((s.at, look_s))
            seen = look
    events.sort(key=lambda e: e[0])
    return [f"{name} {at:%H:%M:%S.%f} {what}" for at, what in events]


def _is_asleep(s: Sample, activity: datetime) -> bool:
    """Asleep from a sleep that began before `activity`."""
    return s.state == "asleep" and s.asleep_since is not None and s.asleep_since <= activity


def _is_awake(s: Sample, w: _Workload) -> bool:
    return s.state in ("awake", "") and s.replicas in w.counts  # "": never put to sleep yet


def _is_at_rest(s: Sample, w: _Workload) -> bool:
    asleep = s.state == "asleep" and s.replicas == 0 and s.restore == str(w.replicas)
    return asleep or (s.state in ("awake", "") and s.replicas == w.replicas)


@dataclass
class _Leader:
    id: str
    log: str
    intervals: list[tuple[datetime, datetime]]
    writes: list[tuple[datetime, str]]


def _leadership(logs: Iterable[Path], ended: dict[str, datetime]) -> list[_Leader]:
    """Per controller log: when it led (to its last line or its kill) and the writes it made."""
    found = []
    for log in logs:
        begun: datetime | None = None
        intervals: list[tuple[datetime, datetime]] = []
        writes: list[tuple[datetime, str]] = []
        last: datetime | None = None
        ident = ""
        for line in log.read_text(errors="replace").splitlines():
            m = _LINE.match(line)
            if m is None:
                continue
            at, logger, msg = parse_time(m[1]), m[2], m[3].strip('"')
            if logger == "controller" and msg == "starting" and begun and last:
                intervals.append((begun, last))  # a killed process, restarted into the same log
                begun = None
            last = at
            if logger == "zeroscaler.controller.leader" and msg == "became leader":
                begun = at
                ident = re.search(r" id=(\S+)", m[4])[1] if " id=" in m[4] else ident  # type: ignore[index]
            elif logger == "zeroscaler.controller.leader" and msg == "stopped leading" and begun:
                intervals.append((begun, at))
                begun = None
            elif logger == "zeroscaler.controller.scaling" and msg in _WRITES:
                writes.append((at, msg))
        if begun is not None and last is not None:
            intervals.append((begun, max(last, ended.get(str(log), last))))
        found.append(_Leader(ident, str(log), intervals, writes))
    return found


def _one_writer(leaders: list[_Leader], holders: list[tuple[datetime, str]]) -> list[str]:
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
    for at, holder in holders:
        if holder and known and holder not in known:
            violations.append(
                f"the Lease was held by {holder!r} at {at:%H:%M:%S.%f}, no replica of ours"
            )
            break
    return violations


def wait_settled(observer: Observer, timeout: float = 60.0) -> None:
    """Wait until every workload is at rest (awake at its count, or asleep remembering it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not observer.settled():
        time.sleep(observer.interval)
