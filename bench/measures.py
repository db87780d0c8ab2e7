"""What the benchmarks measure with: percentiles, a process's CPU and resident memory, one
Deployment watch that sees each wake, the raw-watch baseline timed beside the controller, the
controller as a restartable process and its restarts' rounds, and one controller process held at a
size (`bench.one_process`, run as a process of its own)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.judge import Target
from bench.workloads import (
    BIN,
    GROUP,
    NAMESPACE,
    TYPES,
    controller_command,
    create_if_missing,
    deployment,
    kind_of,
    scope_of,
    workload_name,
)
from localcluster.processes import free_port, running
from zeroscaler.api import Kube, KubeError

WAKE_LIMIT = 30.0  # seconds a wake may take; one that never comes counts as this long


RAW = "raw"  # a round's raw list, among its restarts


QUIET = 20.0  # seconds without a change to any workload before idle is measured


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def own_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def measure_idle(pid: int, seconds: float) -> tuple[list[float], float]:
    """CPU of process `pid` as % of a core: per 10 s window, and over all `seconds`."""
    windows = []
    before, started = cpu_seconds(pid), time.monotonic()
    window = (before, started)
    while time.monotonic() - started < seconds:
        await asyncio.sleep(10)
        now = (cpu_seconds(pid), time.monotonic())
        windows.append(100 * (now[0] - window[0]) / (now[1] - window[1]))
        window = now
    return windows, 100 * (cpu_seconds(pid) - before) / (time.monotonic() - started)


async def wait_http_ok(url: str, limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.5)
    raise RuntimeError(f"{url} never became ready")


class DeploymentWatch:
    """Replica counts and states of the benchmark's Deployments, kept by one watch."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.replicas: dict[str, int] = {}
        self.state: dict[str, str] = {}
        self.changed = asyncio.Condition()
        self.seen_at: dict[str, float] = {}
        self.last_event = time.monotonic()  # of any change to any of them, status included

    async def run(self) -> None:
        path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
        while True:
            try:
                items, rv = await self.kube.list_all(path)
                for obj in items:
                    self._take(obj)
                async for event in self.kube.watch(path, resource_version=rv):
                    if event["type"] != "BOOKMARK":
                        self.last_event = time.monotonic()
                        self._take(event["object"])
                        async with self.changed:
                            self.changed.notify_all()
            except KubeError:
                await asyncio.sleep(0.5)

    def _take(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        replicas = int(obj["spec"].get("replicas") or 0)
        if replicas > 0 and self.replicas.get(name) == 0:
            self.seen_at[name] = time.perf_counter()
        self.replicas[name] = replicas
        self.state[name] = (obj["metadata"].get("annotations") or {}).get("zeroscaler.io/state", "")

    async def wait(self, check: Callable[[], bool], limit: float) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(check), limit)

    def asleep(self, names: list[str]) -> bool:
        return all(self.replicas.get(n) == 0 and self.state.get(n) == "asleep" for n in names)


async def measure_controller(
    kube: Kube,
    watch: DeploymentWatch,
    baseline: Baseline,
    count: int,
    samples: int,
    gap: float,
    *,
    churn: bool,
) -> tuple[list[float], list[float]]:
    """Wake latencies with `count` managed workloads, each sample paired with a baseline one.

    Each sample wakes one workload, then the raw-watch baseline times the same thing beside it,
    so both see the same cluster (objects, background work). Without `churn` each waits until
    the previous target is asleep again; with it, they follow each other after `gap` while the
    earlier targets' sleeps happen around them.
    """
    names = [workload_name(i) for i in range(count)]
    await watch.wait(lambda: watch.asleep(names), limit=60 + count * 0.2)
    latencies, beside = [], []
    for j in range(samples):
        # Step through the workloads so that consecutive samples differ in type and scope.
        i = (j * 37) % count
        kind, plural = kind_of(i % TYPES)
        target = [workload_name(i)]
        latencies.append(await time_wake(kube, watch, target, kind, plural, scope_of(i), gap))
        if not churn:
            await watch.wait(lambda target=target: watch.asleep(target), limit=60)  # type: ignore[misc]
        beside.append(await baseline.sample(gap))
    return latencies, beside


async def time_wake(
    kube: Kube,
    watch: DeploymentWatch,
    targets: list[str],
    kind: str,
    plural: str,
    namespace: str,
    gap: float,
) -> float:
    """Create one watched object once `targets` sleep; seconds until the last of them woke."""
    await watch.wait(lambda: watch.asleep(targets), limit=60)
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/{plural}"
    return await time_scale_up(kube, watch, targets, path, kind, gap)


async def time_scale_up(
    kube: Kube,
    watch: DeploymentWatch,
    targets: list[str],
    path: str,
    kind: str,
    gap: float,
    answered: list[float] | None = None,
) -> float:
    """After `gap`, create a `kind` object at `path`: seconds from the API server's answer until
    the last of `targets` is seen scaled up; WAKE_LIMIT if that never came (a failed wake is the
    slowest sample, not one left out). The answer's wall-clock time goes into `answered`, to be
    set beside the controller's log."""
    await asyncio.sleep(gap)  # one wake at a time: latency, not throughput
    for name in targets:
        watch.seen_at.pop(name, None)
    body = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"generateName": "s-"}}
    try:
        await kube.create(path, body)
    except KubeError as e:
        print(f"a wake's create failed, counted as {WAKE_LIMIT:g} s: {e}", flush=True)
        return WAKE_LIMIT
    acked = time.perf_counter()
    if answered is not None:
        answered.append(time.time())
    try:
        await watch.wait(lambda: all(n in watch.seen_at for n in targets), limit=WAKE_LIMIT)
    except TimeoutError:
        print(f"a wake of {', '.join(targets)} never came, counted as {WAKE_LIMIT:g} s", flush=True)
        return WAKE_LIMIT
    return max(watch.seen_at[n] for n in targets) - acked


class Baseline:
    """One raw watch (`bench.baseline`, a process) that scales a Deployment up on any event."""

    def __init__(self, kube: Kube, watch: DeploymentWatch) -> None:
        self.kube = kube
        self.watch = watch
        deployments = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
        self.deployments = deployments
        self.scale = f"{deployments}/baseline/scale"
        # Thing0 in the workloads' own namespace: no managed workload watches it there.
        self.watched = f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/things0"

    @contextlib.asynccontextmanager
    async def running(self, kubeconfig: str, workdir: Path) -> AsyncIterator[Baseline]:
        await create_if_missing(self.kube, self.deployments, deployment("baseline", {}))
        cmd = [str(BIN / "python"), "-m", "bench.baseline", "--kubeconfig", kubeconfig]
        log = workdir / "baseline.log"
        with running([*cmd, "--watch", self.watched, "--scale", self.scale], log):
            for _ in range(300):  # up to a minute for "ready": it has listed, its watch follows
                if "ready" in log.read_text():
                    break
                await asyncio.sleep(0.2)
            yield self

    async def sample(self, gap: float) -> float:
        """Scale to zero, wait `gap`, write a watched object: seconds until it is scaled up."""
        await self.kube.patch(self.scale, {"spec": {"replicas": 0}})
        await self.watch.wait(lambda: self.watch.replicas.get("baseline") == 0, limit=30)
        watched, kind = self.watched, "Thing0"
        return await time_scale_up(self.kube, self.watch, ["baseline"], watched, kind, gap)


async def quiet(watch: DeploymentWatch, limit: float) -> bool:
    """Until no workload has changed for QUIET seconds (the controller manager writes the status
    of new Deployments for minutes, and the controller reads each write); False after `limit`."""
    deadline = time.monotonic() + limit
    while time.monotonic() - watch.last_event < QUIET:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(1)
    return True


class Controller:
    """The controller process, restartable; its log shows when each watch first synced."""

    def __init__(self, kubeconfig: str, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.log = workdir / "controller.log"
        self.port = 0
        self._stack = contextlib.ExitStack()
        self._offset = 0  # where this start's lines begin in the log
        self.pid = 0

    def start(self, extra: list[str] | None = None) -> None:
        self.port = free_port()
        # info: the "watch synced" lines time the first lists.
        cmd = controller_command(self.kubeconfig, self.port, log_level="info") + (extra or [])
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        self.pid = self._stack.enter_context(running(cmd, self.log)).pid

    def stop(self) -> None:
        self._stack.close()

    def synced_watches(self) -> int:
        with self.log.open("rb") as f:
            f.seek(self._offset)
            return f.read().count(b'msg="watch synced"')

    async def wait_ready(self) -> None:
        async with httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"http://127.0.0.1:{self.port}/readyz")).is_success:
                        return
                await asyncio.sleep(0.1)

    async def wait_managed(self, count: int) -> bool:
        """Until the controller's metrics count `count` managed workloads asleep; whether the
        first look found them so."""
        return await self._wait_metric(
            "zeroscaler_managed_workloads",
            f'zeroscaler_managed_workloads{{state="asleep"}} {count}.0',
        )

    async def wait_events_written(self) -> None:
        """Until the controller has no Event waiting to be written."""
        await self._wait_metric("zeroscaler_pending_events", "zeroscaler_pending_events 0.0")

    async def _wait_metric(self, family: str, wanted: str) -> bool:
        """Until the line `wanted` is among the samples of `family`; whether it was at once."""
        at_once = True
        async with httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    # One family, not 10,000 workloads' series: a poll every half second
                    # would otherwise take a share of the restart it times.
                    metrics = await client.get(
                        f"http://127.0.0.1:{self.port}/metrics", params={"name[]": family}
                    )
                    if wanted in metrics.text.splitlines():
                        return at_once
                at_once = False
                await asyncio.sleep(0.5)

    def caught_up_at(self) -> float | None:
        """The time (epoch seconds) of this start's "caught up" log line, if it is written."""
        with self.log.open("rb") as f:
            f.seek(self._offset)
            for line in f:
                if b'msg="caught up"' in line:
                    return log_time(line)
        return None

    async def wait_caught_up(self) -> float:
        """Until the start's catch-up has ended (read from the log: it costs the controller
        nothing, and times the end to the millisecond); when it did, in epoch seconds."""
        while True:  # the log is a file: nothing to wait on but time
            at = self.caught_up_at()
            if at is not None:
                return at
            await asyncio.sleep(0.1)

    async def wait_synced(self, types: int) -> None:
        while True:  # the log is a file: nothing to wait on but time
            if self.synced_watches() >= types:
                return
            await asyncio.sleep(0.2)

    @contextlib.contextmanager
    def running(self) -> Iterator[Controller]:
        self.start()
        try:
            yield self
        finally:
            self.stop()


def log_time(line: bytes) -> float:
    """The epoch seconds of a controller log line (`time=2026-12-05T01:14:08.611Z ...`)."""
    stamp = line.split(b" ", 1)[0].removeprefix(b"time=").decode()
    return datetime.fromisoformat(stamp).timestamp()


def restart_rounds(modes: list[str], rounds: int) -> list[list[str]]:
    """Each round's order: the raw list and every mode once, rotated a step each round so
    that none always comes first (after a stopped controller's quiet, or another's warm API
    server), and the last round in the order given, ending with the row's mode."""
    items = [RAW, *modes]
    shifts = [(rounds - 1 - r) % len(items) for r in range(rounds)]
    return [items[k:] + items[:k] for k in shifts]


def median_start(starts: list[list[float]]) -> list[float]:
    """The median of each figure (ready, synced, managed, CPU) over a mode's starts."""
    return [round(statistics.median(figure), 2) for figure in zip(*starts, strict=True)]


@dataclass(frozen=True)
class Size:
    workloads: int
    objects: int
    resident_mb: float  # once all are reconciled and the catch-up's collection has run
    peak_mb: float  # the most the process held on the way (VmHWM)
    seconds: float  # start to every workload reconciled, with an API that answers at once
    cpu_seconds: float = 0.0  # the process's CPU over the same (the faked API's included)


def measure_one_process(workloads: int, objects: int) -> Size:
    """One size, in a process of its own: nothing of another size is resident beside it."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.one_process", str(workloads), str(objects)],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            return Size(**json.loads(line))
        print(line, flush=True)
    raise RuntimeError(f"no result from the run at {workloads} workloads: {out[-500:]}")


MANY_OPERATORS_BYTES = float(2**30)  # issue 50: 100,000 workloads over 2,000,000 objects in 1 GiB
LINEAR = 1.0  # a start's time per workload at a size over its time per workload at 10,000


def one_process_sizes(sizes: Iterable[tuple[int, int]]) -> dict[str, float]:
    """One controller holding each size, in a process of its own: its resident size and peak,
    and its start's time and CPU, as `one_process_targets` reads them."""
    results: dict[str, float] = {}
    for workloads, objects in sizes:
        print(f"one process, {workloads:,} workloads over {objects:,} objects:", flush=True)
        size = measure_one_process(workloads, objects)
        resident, peak = size.resident_mb * 2**20, size.peak_mb * 2**20
        for name, value in (("resident", resident), ("peak", peak)):
            results[f"one_process_{workloads}_{name}_bytes"] = value
        results[f"one_process_{workloads}_seconds"] = size.seconds
        results[f"one_process_{workloads}_cpu_seconds"] = size.cpu_seconds
        verdict = "within" if peak <= MANY_OPERATORS_BYTES else "over"
        print(
            f"  {resident / 2**20:,.1f} MiB resident once all are reconciled, "
            f"{peak / 2**20:,.1f} MiB at the peak ({verdict} 1 GiB); every workload reconciled "
            f"{size.seconds:.1f} s from the start ({size.cpu_seconds:.1f} s of CPU, "
            f"{size.cpu_seconds / workloads * 1000:.3f} ms a workload), with an API that answers "
            f"at once",
            flush=True,
        )
    return results


def one_process_targets(results: dict[str, float]) -> list[Target]:
    """One process at each size of `one_process_sizes`: at 100,000 workloads and more, its peak
    within 1 GiB; past 10,000, a start's time and CPU per workload no more than at 10,000 (on a
    shared machine the time moves with the load, the CPU less). A figure missing fails."""
    found = []
    sizes = sorted({int(k.split("_")[2]) for k in results if k.startswith("one_process_")})
    for workloads in sizes:
        peak = results.get(f"one_process_{workloads}_peak_bytes")
        at = f"one process at {workloads:,} workloads"
        limit = MANY_OPERATORS_BYTES if workloads >= 100_000 else None
        found.append(Target(f"{at}: peak resident", _mib(peak), _mib(limit), "MiB"))
        for figure, what in (("seconds", "time"), ("cpu_seconds", "CPU")):
            spent = results.get(f"one_process_{workloads}_{figure}")
            if workloads > 10_000:
                base = results.get(f"one_process_10000_{figure}")
                ratio = None
                if spent is not None and base:
                    ratio = (spent / workloads) / (base / 10_000)
                name = f"{at}: start {what} per workload / at 10,000"
                found.append(Target(name, ratio, LINEAR, "x"))
            else:
                name = f"{at}: start to every workload reconciled, {what}"
                found.append(Target(name, spent, None, "s"))
    return found


def _mib(value: float | None) -> float | None:
    return None if value is None else value / 2**20
