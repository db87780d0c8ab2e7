"""What both components' /metrics carry besides their own: process figures and API errors."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

ErrorCounts = Mapping[tuple[str, int], int]  # (HTTP method, status; 0: no answer) -> count


def register_process_collectors(registry: CollectorRegistry) -> None:
    """process_resident_memory_bytes, process_cpu_seconds_total and the like, python_gc_*,
    python_info: the figures the README's memory table names, watchable in production."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


class APIErrors(Collector):
    """A counter of failed API requests, read at scrape time from the clients' own tallies."""

    def __init__(self, name: str, sources: Callable[[], Iterable[ErrorCounts]]) -> None:
        self._name = name
        self._sources = sources

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            self._name,
            "API requests that failed, by method and HTTP status (0: no answer, e.g. a timeout)",
            labels=["method", "code"],
        )
        totals: dict[tuple[str, int], int] = {}
        for counts in self._sources():
            for key, count in counts.items():
                totals[key] = totals.get(key, 0) + count
        for (method, code), count in sorted(totals.items()):
            family.add_metric([method, str(code)], count)
        yield family
