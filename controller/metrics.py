"""Prometheus metrics and the small HTTP server for /metrics, /healthz and /readyz."""

from __future__ import annotations

import asyncio
import logging
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from zeroscaler.controller.report_memory import ReportMemory, WorkloadCounts
from zeroscaler.controller.workload import Workload
from zeroscaler.core.savings import NONE, Requests
from zeroscaler.runtime.collectors import (
    APIErrors,
    APIThrottled,
    ErrorCounts,
    register_process_collectors,
)

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _StateCollector(Collector):
    def __init__(
        self,
        count_by_state: Callable[[], Mapping[str, int]],
        count_watches: Callable[[], int],
        is_leader: Callable[[], bool],
        count_pending: Callable[[], int],
        count_events: Callable[[], int],
    ) -> None:
        self._count = count_by_state
        self._watches = count_watches
        self._is_leader = is_leader
        self._pending = count_pending
        self._events = count_events

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
        # After thousands of sleeps the backlog takes a while, and a wake in it shares the API
        # server and the event loop with it.
        yield GaugeMetricFamily(
            "zeroscaler_pending_events", "Events waiting to be written", value=self._events()
        )


class _WatchCollector(Collector):
    """The shared watches open, by how far each reaches."""

    def __init__(self, count: Callable[[], Mapping[str, int]]) -> None:
        self._count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "zeroscaler_shared_watches",
            "Shared watches open (a connection each), by scope: in one namespace, or cluster-wide",
            labels=["scope"],
        )
        counts = self._count()
        for scope in ("namespace", "cluster"):
            family.add_metric([scope], counts.get(scope, 0))
        yield family


class _ControlCollector(Collector):
    """Workloads held by a person (paused) and workloads where zeroscaler only says what it
    would do (dry run), on the leader."""

    def __init__(
        self,
        count_paused: Callable[[], int],
        count_dry_run: Callable[[], int],
        count_released: Callable[[], Requests],
        is_leader: Callable[[], bool],
    ) -> None:
        self._paused = count_paused
        self._dry_run = count_dry_run
        self._released = count_released
        self._is_leader = is_leader

    def collect(self) -> Iterator[GaugeMetricFamily]:
        leading = self._is_leader()
        yield GaugeMetricFamily(
            "zeroscaler_paused_workloads",
            "Workloads held as they are by zeroscaler.io/paused or an unexpired "
            "zeroscaler.io/paused-until (0 on a standby)",
            value=self._paused() if leading else 0,
        )
        yield GaugeMetricFamily(
            "zeroscaler_dry_run_workloads",
            "Managed workloads where zeroscaler only says what it would do: the --dry-run flag, "
            "a namespace labelled zeroscaler.io/dry-run, or policy (0 on a standby)",
            value=self._dry_run() if leading else 0,
        )
        released = self._released() if leading else NONE
        yield GaugeMetricFamily(
            "zeroscaler_released_cpu_cores",
            "CPU the pods of sleeping workloads would request now, in cores (0 on a standby)",
            value=released.cpu,
        )
        yield GaugeMetricFamily(
            "zeroscaler_released_memory_bytes",
            "Memory the pods of sleeping workloads would request now, in bytes (0 on a standby)",
            value=released.memory,
        )


# The families of each workload's own series, in exposition order: name, type, help.
WORKLOAD_FAMILIES = (
    ("zeroscaler_workload_asleep", "gauge", "1 while a managed workload is asleep, 0 while awake"),
    (
        "zeroscaler_workload_saved_replica_seconds_total",
        "counter",
        "Replica-seconds a managed workload did not run because it was asleep",
    ),
    (
        "zeroscaler_workload_saved_cpu_core_seconds_total",
        "counter",
        "CPU a managed workload's pods request, in core-seconds not held while it was asleep",
    ),
    (
        "zeroscaler_workload_saved_memory_byte_seconds_total",
        "counter",
        "Memory a managed workload's pods request, in byte-seconds not held while it was asleep",
    ),
    (
        "zeroscaler_workload_wakes_total",
        "counter",
        "Wakes of a managed workload by reason: activity, serving (it came to back the API "
        "server), due (a due time), max-sleep (asleep that long), external (scaled up by someone "
        "else), window (a keep-awake window began)",
    ),
    (
        "zeroscaler_workload_sleeps_total",
        "counter",
        "Sleeps of a managed workload by reason: idle, not-ready (not Ready after its wake), "
        "window (a forced-sleep window began)",
    ),
    (
        "zeroscaler_workload_wake_latency_seconds",
        "summary",
        "From the watch event that carried the waking change to the scale-up's answer",
    ),
)
# Values as the text format writes them (1.0, +Inf): prometheus_client's own formatting.
_format: Callable[[float], str] = floatToGoString
# (sample name, labels as exposed, value) of one family
Samples = list[tuple[str, str, float]]


class WorkloadSeries(Collector):
    """Each managed workload's own series, read from the records at scrape time: a workload
    deleted or no longer managed has none from the next scrape on, so they never pile up.

    Only the leader reports them (a standby sleeps and wakes nothing), so a sum over replicas
    counts each workload once. `/metrics` writes them as text itself (`text`): prometheus_client's
    exposition checks and escapes every label of every sample, which at 10,000 workloads held the
    event loop for most of a second per scrape; namespaces, names, kinds and reasons need no
    escaping. `collect` gives the same series as metric families, for readers in process.
    """

    def __init__(self, workloads: Callable[[], Iterable[Workload]], is_leader: Callable[[], bool]):
        self._workloads = workloads
        self._is_leader = is_leader

    def _samples(self) -> list[Samples]:
        asleep: Samples = []
        saved: Samples = []
        cpu: Samples = []
        memory: Samples = []
        wakes: Samples = []
        sleeps: Samples = []
        latency: Samples = []
        if self._is_leader():
            for w in self._workloads():
                if not w.managed:
                    continue
                # In name order, as the client writes them: kind, namespace, reason, workload.
                head, tail = f'kind="{w.kind}",namespace="{w.namespace}"', f'workload="{w.name}"'
                labels = f"{head},{tail}"
                asleep.append(
                    ("zeroscaler_workload_asleep", labels, float(w.shown_status.state == "asleep"))
                )
                tally = w.report.tally or _EMPTY
                saved.append(
                    ("zeroscaler_workload_saved_replica_seconds_total", labels, tally.saved)
                )
                cpu.append(
                    ("zeroscaler_workload_saved_cpu_core_seconds_total", labels, tally.cpu_seconds)
                )
                memory.append(
                    (
                        "zeroscaler_workload_saved_memory_byte_seconds_total",
                        labels,
                        tally.memory_seconds,
                    )
                )
                for reason, count in tally.wakes.items():
                    wakes.append(
                        (
                            "zeroscaler_workload_wakes_total",
                            f'{head},reason="{reason}",{tail}',
                            count,
                        )
                    )
                for reason, count in tally.sleeps.items():
                    sleeps.append(
                        (
                            "zeroscaler_workload_sleeps_total",
                            f'{head},reason="{reason}",{tail}',
                            count,
                        )
                    )
                if tally.latency_count:
                    name = "zeroscaler_workload_wake_latency_seconds"
                    latency.append((f"{name}_count", labels, tally.latency_count))
                    latency.append((f"{name}_sum", labels, tally.latency_sum))
        return [asleep, saved, cpu, memory, wakes, sleeps, latency]

    def text(self) -> bytes:
        """The series in Prometheus' text format, as generate_latest writes them."""
        lines: list[str] = []
        for (name, kind, help_text), samples in zip(
            WORKLOAD_FAMILIES, self._samples(), strict=True
        ):
            lines.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
            lines.extend(f"{sample}{{{labels}}} {_format(v)}\n" for sample, labels, v in samples)
        return "".join(lines).encode()

    def collect(self) -> Iterator[Metric]:
        for (name, kind, help_text), samples in zip(
            WORKLOAD_FAMILIES, self._samples(), strict=True
        ):
            # A counter family is named without its samples' _total.
            family = Metric(name.removesuffix("_total"), help_text, kind)
            for sample, labels, value in samples:
                pairs = (pair.split("=", 1) for pair in labels.split(","))
                family.add_sample(sample, {k: v.strip('"') for k, v in pairs}, value)
            yield family


_EMPTY = WorkloadCounts()


class ClientCounts(Protocol):
    """What the metrics read of an API client: its failed requests and its 429 answers."""

    @property
    def errors(self) -> ErrorCounts: ...

    @property
    def throttled(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Readings:
    """What the metrics read from the other parts at a scrape: managed workloads by state, the
    types watched, wakes due, Events waiting, the API clients (their failed requests and 429
    answers), and the shared watches open by scope."""

    by_state: Callable[[], Mapping[str, int]] = dict
    watches: Callable[[], int] = lambda: 0
    pending: Callable[[], int] = lambda: 0
    events: Callable[[], int] = lambda: 0
    clients: Callable[[], Iterable[ClientCounts]] = lambda: ()
    shared_watches: Callable[[], Mapping[str, int]] = dict  # by scope: namespace, cluster


@dataclass(frozen=True, slots=True)
class LeaderReadings:
    """What only the leader reports (0 on a standby): paused and dry-run workloads, and the
    requests the sleepers gave back."""

    paused: Callable[[], int] = lambda: 0
    dry_run: Callable[[], int] = lambda: 0
    released: Callable[[], Requests] = lambda: NONE


class Metrics:
    """The controller's metrics, in their own registry.

    With `workloads`, each managed workload also has series of its own (`_WorkloadCollector`);
    without, only the cluster totals.
    """

    def __init__(
        self,
        is_leader: Callable[[], bool],
        readings: Readings = Readings(),
        leader_readings: LeaderReadings = LeaderReadings(),
        *,
        workloads: Callable[[], Iterable[Workload]] | None = None,
        count_savings: Callable[[], None] = lambda: None,
    ) -> None:
        self.registry = CollectorRegistry()
        self._count_savings = count_savings
        register_process_collectors(self.registry)
        self.registry.register(
            _StateCollector(
                readings.by_state, readings.watches, is_leader, readings.pending, readings.events
            )
        )
        self.registry.register(
            _ControlCollector(
                leader_readings.paused,
                leader_readings.dry_run,
                leader_readings.released,
                is_leader,
            )
        )
        self.registry.register(_WatchCollector(readings.shared_watches))
        self.workload_series = None if workloads is None else WorkloadSeries(workloads, is_leader)
        self.per_workload = workloads is not None
        clients = readings.clients
        self.registry.register(
            APIErrors("zeroscaler_api_errors", lambda: [c.errors for c in clients()])
        )
        self.registry.register(
            APIThrottled(
                "zeroscaler_api_throttled_responses", lambda: [c.throttled for c in clients()]
            )
        )
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
        self.dry_run_decisions = Counter(
            "zeroscaler_dry_run_decisions_total",
            "Sleeps and wakes that would have been made where zeroscaler runs dry (the flag, a "
            "namespace's label or policy), by action",
            ["action"],
            registry=self.registry,
        )
        self.replica_seconds_saved = Counter(
            "zeroscaler_saved_replica_seconds_total",
            "Replica-seconds not run because workloads were asleep",
            registry=self.registry,
        )
        self.saved_cpu = Counter(
            "zeroscaler_saved_cpu_core_seconds_total",
            "CPU requested by the pods of sleeping workloads, in core-seconds not held",
            registry=self.registry,
        )
        self.saved_memory = Counter(
            "zeroscaler_saved_memory_byte_seconds_total",
            "Memory requested by the pods of sleeping workloads, in byte-seconds not held",
            registry=self.registry,
        )

    def woke(
        self, memory: ReportMemory, managed: bool, reason: str, latency: float | None = None
    ) -> None:
        """A wake of the workload of `memory` (its own series counted while it is `managed`);
        `latency` from its waking event. Reasons: `activity`, `serving`,
        `external`, `window`, and `released` (no longer managed by then: counted in the total
        only)."""
        if reason != "external":  # the total counts zeroscaler's own wakes
            self.wakes.inc()
        if latency is not None:
            self.wake_latency.observe(latency)
        tally = self._tally(memory, managed)
        if tally is not None:
            tally.wakes[reason] = tally.wakes.get(reason, 0) + 1
            if latency is not None:
                tally.latency_sum += latency
                tally.latency_count += 1

    def slept(self, memory: ReportMemory, managed: bool, reason: str) -> None:
        """A sleep of the workload of `memory`. Reasons: `idle`, `not-ready`, `window`."""
        self.sleeps.inc()
        tally = self._tally(memory, managed)
        if tally is not None:
            tally.sleeps[reason] = tally.sleeps.get(reason, 0) + 1

    def saved(
        self, memory: ReportMemory, managed: bool, requests: Requests, replica_seconds: float
    ) -> None:
        """Replica-seconds the workload of `memory` saved, each holding `requests`, for its own
        series (the total is counted by the caller)."""
        tally = self._tally(memory, managed)
        if tally is not None:
            tally.saved += replica_seconds
            tally.cpu_seconds += replica_seconds * requests.cpu
            tally.memory_seconds += replica_seconds * requests.memory

    def forget(self, memory: ReportMemory) -> None:
        """No longer managed: its own series' counts go."""
        memory.tally = None

    def _tally(self, memory: ReportMemory, managed: bool) -> WorkloadCounts | None:
        if not self.per_workload or not managed:
            return None
        if memory.tally is None:
            memory.tally = WorkloadCounts()
        return memory.tally

    def render(self, names: Collection[str] = ()) -> bytes:
        """The text exposition; with `names`, only the series of those names (as Prometheus'
        own clients filter by `name[]`): a poll for one figure need not write 10,000
        workloads' series (tens of milliseconds a scrape at 10,000).

        The replica-seconds saved are brought up to date here, when they are read, not on a
        timer: a pass over every workload that nobody reads was a third of what an idle
        controller did at 10,000."""
        if not names or any(_is_savings_series(n) for n in names):
            self._count_savings()
        text = generate_latest(_Only(self.registry, names) if names else self.registry)
        wanted = not names or any(_is_workload_series(n) for n in names)
        if self.workload_series is not None and wanted:
            text += self.workload_series.text()
        return text


def _is_savings_series(name: str) -> bool:
    return name.startswith(("zeroscaler_saved_", "zeroscaler_workload_saved"))


def _is_workload_series(name: str) -> bool:
    return any(name.startswith(family) for family, _, _ in WORKLOAD_FAMILIES)


class _Only:
    """A registry's families cut to the series named (by family or by sample name)."""

    def __init__(self, registry: CollectorRegistry, names: Collection[str]) -> None:
        self._registry = registry
        self._names = frozenset(names)

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            whole = family.name in self._names
            samples = [s for s in family.samples if whole or s.name in self._names]
            if samples:
                kept = Metric(family.name, family.documentation, family.type, family.unit)
                kept.samples = samples
                yield kept


# A route answers a GET with its query's parameters: status, content type, body.
Route = Callable[[Mapping[str, list[str]]], tuple[int, str, bytes]]
# Whether a request may have a path: its headers (lowercase names) and the path in, a status out.
Guard = Callable[[Mapping[str, str], str], Awaitable[int]]
_REASONS = {200: "OK", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
_REASONS[503] = "Service Unavailable"
MAX_HEAD = 32 * 1024  # bytes of a request's line and headers


async def serve_http(
    host: str,
    port: int,
    routes: Mapping[str, Route],
    *,
    tls: ssl.SSLContext | None = None,
    guard: Guard | None = None,
    guarded: frozenset[str] = frozenset({"/metrics"}),
) -> asyncio.Server:
    """A minimal HTTP/1.1 (or, with `tls`, HTTPS) server for GET on a few fixed paths; the
    `guarded` ones answered only when `guard` says 200."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            line, _, rest = request.decode("latin-1").partition("\r\n")
            method, path, *_ = line.split(" ")
            where, _, query = path.partition("?")
            route = routes.get(where)
            if method != "GET" or route is None:
                status, ctype, body = 404, "text/plain", b"not found\n"
            elif guard is not None and where in guarded:
                status = await guard(_headers(rest), where)
                if status == 200:
                    status, ctype, body = route(urllib.parse.parse_qs(query))
                else:
                    ctype, body = "text/plain", _REASONS.get(status, "").lower().encode() + b"\n"
            else:
                status, ctype, body = route(urllib.parse.parse_qs(query))
            head = (
                f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except (ConnectionError, ValueError, ssl.SSLError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, ssl=tls, limit=MAX_HEAD)


def _headers(text: str) -> dict[str, str]:
    """A request's headers by lowercase name."""
    found: dict[str, str] = {}
    for line in text.split("\r\n"):
        name, colon, value = line.partition(":")
        if colon:
            found[name.strip().lower()] = value.strip()
    return found
