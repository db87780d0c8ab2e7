"""Prometheus metrics and the small HTTP server for /metrics, /healthz and /readyz."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _StateCollector(Collector):
    def __init__(
        self,
        count_by_state: Callable[[], Mapping[str, int]],
        count_watches: Callable[[], int],
        is_leader: Callable[[], bool],
    ) -> None:
        self._count = count_by_state
        self._watches = count_watches
        self._is_leader = is_leader

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


class Metrics:
    """The controller's metrics, in their own registry."""

    def __init__(
        self,
        count_by_state: Callable[[], Mapping[str, int]],
        count_watches: Callable[[], int],
        is_leader: Callable[[], bool],
    ) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_StateCollector(count_by_state, count_watches, is_leader))
        self.watch_events = Counter(
            "zeroscaler_watch_events",
            "Watch events received on shared watches, by resource",
            ["resource"],
            registry=self.registry,
        )
        self.activity = Counter(
            "zeroscaler_activity",
            "Changes that counted as activity for a workload",
            registry=self.registry,
        )
        self.sleeps = Counter("zeroscaler_sleeps", "Workloads put to sleep", registry=self.registry)
        self.wakes = Counter("zeroscaler_wakes", "Workloads woken", registry=self.registry)
        self.wake_latency = Histogram(
            "zeroscaler_wake_latency_seconds",
            "From the watch event that woke a workload to the scale write being accepted",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.throttled = Counter(
            "zeroscaler_api_throttled_responses",
            "API answers of 429 Too Many Requests, each sent again after its Retry-After",
            registry=self.registry,
        )
        self.replica_seconds_saved = Counter(
            "zeroscaler_replica_seconds_saved",
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
