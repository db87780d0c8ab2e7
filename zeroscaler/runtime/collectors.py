"""What both components' /metrics carry besides their own: process figures, the build, API errors,
and in combined mode the webhook's families on the controller's endpoint."""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import metadata

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from zeroscaler import DISTRIBUTION

ErrorCounts = Mapping[tuple[str, int], int]  # (HTTP method, status; 0: no answer) -> count


def register_process_collectors(registry: CollectorRegistry) -> None:
    """process_resident_memory_bytes, process_cpu_seconds_total and the like, python_gc_*,
    python_info: the figures the README's memory table names, watchable in production."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(BuildInfo())


# What every process's registry carries; forwarded once, not twice, in combined mode.
PROCESS_FAMILIES = ("process_", "python_", "zeroscaler_build_info")


def version() -> str:
    """The installed distribution's version; `unknown` when run from a tree pip never installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


class BuildInfo(Collector):
    """`zeroscaler_build_info{version, python}` 1, the usual way to join a version onto series."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "zeroscaler_build_info",
            "1, labelled by the zeroscaler version and the Python version running it",
            labels=["version", "python"],
        )
        family.add_metric([version(), platform.python_version()], 1)
        yield family


class Forwarded(Collector):
    """Another registry's families, less the per-process ones this registry has already.

    In combined mode one process serves the controller and the webhook; the controller's endpoint
    forwards the webhook's families so that one scrape sees each series once.
    """

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        for family in self._source.collect():
            if not family.name.startswith(PROCESS_FAMILIES):
                yield family


class APIThrottled(Collector):
    """A counter of 429 answers, read at scrape time from the clients' own counts (each a count
    its watch clients share)."""

    def __init__(self, name: str, counts: Callable[[], Iterable[int]]) -> None:
        self.name = name
        self._counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            self.name, "API answers of 429 Too Many Requests, each sent again after its Retry-After"
        )
        family.add_metric([], sum(self._counts()))
        yield family


class APIErrors(Collector):
    """A counter of failed API requests, read at scrape time from the clients' own tallies."""

    LABELS = ("method", "code")

    def __init__(self, name: str, sources: Callable[[], Iterable[ErrorCounts]]) -> None:
        self.name = name
        self._sources = sources

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            self.name,
            "API requests that failed, by method and HTTP status (0: no answer, e.g. a timeout)",
            labels=list(self.LABELS),
        )
        totals: dict[tuple[str, int], int] = {}
        for counts in self._sources():
            for key, count in counts.items():
                totals[key] = totals.get(key, 0) + count
        for (method, code), count in sorted(totals.items()):
            family.add_metric([method, str(code)], count)
        yield family
