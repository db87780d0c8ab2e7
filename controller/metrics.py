"""Prometheus metrics and the small HTTP server for /metrics, /healthz and /readyz."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

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


class Metrics:
    """The controller's metrics, in their own registry."""

    def __init__(
        self,
        count_by_state: Callable[[], Mapping[str, int]],
        count_watches: Callable[[], int],
        is_leader: Callable[[], bool],
        count_pending: Callable[[], int] = lambda: 0,
        api_errors: Callable[[], Iterable[ErrorCounts]] = lambda: (),
    ) -> None:
        self.registry = CollectorRegistry()
        register_process_collectors(self.registry)
        self.registry.register(
            _StateCollector(count_by_state, count_watches, is_leader, count_pending)
        )
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
