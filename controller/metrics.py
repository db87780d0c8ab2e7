"""Prometheus metrics and the small HTTP server for /metrics, /healthz and /readyz."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from zeroscaler.controller.workload import Tally, Workload
from zeroscaler.metrics import APIErrors, ErrorCounts, register_process_collectors

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _StateCollector(Collector):
    def __init__(
        self,
        count_by_state: Callable[[], Mapping[str, int]],
        count_watches: Callable[[], int],
        is_leader: Callable[[], bool],
        count_pending: Callable[[], int],
    ) -> None:
        self._count = count_by_state
        self._watches = count_watches
        self._is_leader = is_leader
        self._pending = count_pending

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "zeroscaler_watched_types",
            "Resource types with a shared watch open",
            value=self._watches(),
        )
        yield GaugeMetricFamily(
            "zeroscaler_leader", "1 when this replica holds the Lease", value=int(self._is_leader())
        )
        family = GaugeMetricFamily(
            "zeroscaler_managed_workloads", "Managed workloads by state", labels=["state"]
        )
        counts = self._count()
        for state in ("awake", "asleep"):
            family.add_metric([state], counts.get(state, 0))
        yield family
        # A standby sees the same activity but wakes nothing: only the leader's count means much.
        yield GaugeMetricFamily(
            "zeroscaler_pending_wakes",
            "Asleep workloads with activity seen and no scale-up answered yet (0 on a standby)",
            value=self._pending() if self._is_leader() else 0,
        )


# Why a workload woke or slept: a closed set, so each workload has a few series at most. A
# released workload is no longer managed when it wakes: that wake is in the total only.
WAKE_REASONS = ("activity", "serving", "external", "released")
SLEEP_REASONS = ("idle", "not-ready")
WORKLOAD_LABELS = ["namespace", "workload", "kind"]


class _WorkloadCollector(Collector):
    """Each managed workload's own series, read from the records at scrape time: a workload
    deleted or no longer managed has none from the next scrape on, so they never pile up.

    Only the leader reports them (a standby sleeps and wakes nothing), so a sum over replicas
    counts each workload once.
    """

    def __init__(self, workloads: Callable[[], Iterable[Workload]], is_leader: Callable[[], bool]):
        self._workloads = workloads
        self._is_leader = is_leader

    def collect(self) -> Iterator[Metric]:
        asleep = GaugeMetricFamily(
            "zeroscaler_workload_asleep",
            "1 while a managed workload is asleep, 0 while awake",
            labels=WORKLOAD_LABELS,
        )
        saved = CounterMetricFamily(
            "zeroscaler_workload_saved_replica_seconds",
            "Replica-seconds a managed workload did not run because it was asleep",
            labels=WORKLOAD_LABELS,
        )
        wakes = CounterMetricFamily(
            "zeroscaler_workload_wakes",
            "Wakes of a managed workload by reason: activity, serving (it came to back the API "
            "server), external (scaled up by someone else)",
            labels=[*WORKLOAD_LABELS, "reason"],
        )
        sleeps = CounterMetricFamily(
            "zeroscaler_workload_sleeps",
            "Sleeps of a managed workload by reason: idle, not-ready (not Ready after its wake)",
            labels=[*WORKLOAD_LABELS, "reason"],
        )
        latency = SummaryMetricFamily(
            "zeroscaler_workload_wake_latency_seconds",
            "From the watch event that carried the waking change to the scale-up's answer",
            labels=WORKLOAD_LABELS,
        )
        if self._is_leader():
            for w in self._workloads():
                if not w.managed:
                    continue
                labels = [w.namespace, w.name, w.kind]
                asleep.add_metric(labels, int(w.shown_status.state == "asleep"))
                tally = w.tally or _EMPTY
                saved.add_metric(labels, tally.saved)
                for reason, count in tally.wakes.items():
                    wakes.add_metric([*labels, reason], count)
                for reason, count in tally.sleeps.items():
                    sleeps.add_metric([*labels, reason], count)
                if tally.latency_count:
                    latency.add_metric(labels, tally.latency_count, tally.latency_sum)
        yield from (asleep, saved, wakes, sleeps, latency)


_EMPTY = Tally()


class Metrics:
    """The controller's metrics, in their own registry.

    With `workloads`, each managed workload also has series of its own (`_WorkloadCollector`);
    without, only the cluster totals.
    """

    def __init__(
        self,
        count_by_state: Callable[[], Mapping[str, int]],
        count_watches: Callable[[], int],
        is_leader: Callable[[], bool],
        count_pending: Callable[[], int] = lambda: 0,
        api_errors: Callable[[], Iterable[ErrorCounts]] = lambda: (),
        workloads: Callable[[], Iterable[Workload]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        register_process_collectors(self.registry)
        self.registry.register(
            _StateCollector(count_by_state, count_watches, is_leader, count_pending)
        )
        self.per_workload = workloads is not None
        if workloads is not None:
            self.registry.register(_WorkloadCollector(workloads, is_leader))
        self.registry.register(APIErrors("zeroscaler_api_errors", api_errors))
        self.watch_events = Counter(
            "zeroscaler_watch_events_total",
            "Watch events received on shared watches, by resource",
            ["resource"],
            registry=self.registry,
        )
        self.activity = Counter(
            "zeroscaler_activity_total",
            "Changes that counted as activity for a workload",
            registry=self.registry,
        )
        self.sleeps = Counter(
            "zeroscaler_sleeps_total", "Workloads put to sleep", registry=self.registry
        )
        self.wakes = Counter("zeroscaler_wakes_total", "Workloads woken", registry=self.registry)
        self.wake_failures = Counter(
            "zeroscaler_wake_failures_total",
            "Scale-ups refused or unanswered (a lost race or a deleted workload is not counted)",
            registry=self.registry,
        )
        self.failed_writes = Counter(
            "zeroscaler_failed_writes_total",
            "Failed writes by write (scale, sleep, annotations) and HTTP status (409: lost race)",
            ["write", "code"],
            registry=self.registry,
        )
        self.wake_latency = Histogram(
            "zeroscaler_wake_latency_seconds",
            "From the watch event that carried the waking change to the scale-up's answer",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.access_answers = Counter(
            "zeroscaler_access_answers_total",
            "Whether a workload's ServiceAccount may watch a type, by source: rbac (granted by "
            "the RBAC watched), review (a SubjectAccessReview asked), cache (a review remembered)",
            ["source"],
            registry=self.registry,
        )
        self.throttled = Counter(
            "zeroscaler_api_throttled_responses",
            "API answers of 429 Too Many Requests, each sent again after its Retry-After",
            registry=self.registry,
        )
        self.replica_seconds_saved = Counter(
            "zeroscaler_saved_replica_seconds_total",
            "Replica-seconds not run because workloads were asleep",
            registry=self.registry,
        )

    def woke(self, w: Workload, reason: str, latency: float | None = None) -> None:
        """A wake of `w` (reason: one of WAKE_REASONS); `latency` from its waking event."""
        if reason != "external":  # the total counts zeroscaler's own wakes
            self.wakes.inc()
        if latency is not None:
            self.wake_latency.observe(latency)
        tally = self._tally(w)
        if tally is not None:
            tally.wakes[reason] = tally.wakes.get(reason, 0) + 1
            if latency is not None:
                tally.latency_sum += latency
                tally.latency_count += 1

    def slept(self, w: Workload, reason: str) -> None:
        """A sleep of `w` (reason: one of SLEEP_REASONS)."""
        self.sleeps.inc()
        tally = self._tally(w)
        if tally is not None:
            tally.sleeps[reason] = tally.sleeps.get(reason, 0) + 1

    def saved(self, w: Workload, replica_seconds: float) -> None:
        """Replica-seconds `w` saved, for its own series (the total is counted by the caller)."""
        tally = self._tally(w)
        if tally is not None:
            tally.saved += replica_seconds

    def _tally(self, w: Workload) -> Tally | None:
        if not self.per_workload or not w.managed:
            return None
        if w.tally is None:
            w.tally = Tally()
        return w.tally

    def render(self) -> bytes:
        return generate_latest(self.registry)


Route = Callable[[], tuple[int, str, bytes]]


async def serve_http(host: str, port: int, routes: Mapping[str, Route]) -> asyncio.Server:
    """A minimal HTTP/1.1 server for GET on a few fixed paths."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            method, path, *_ = request.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            route = routes.get(path.split("?", 1)[0])
            if method != "GET" or route is None:
                status, ctype, body = 404, "text/plain", b"not found\n"
            else:
                status, ctype, body = route()
            reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}.get(status, "")
            head = (
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)
