"""The realistic giant (issue 50): many namespaces, millions of objects of a watched kind, and
workloads whose scopes hold a few hundred of them each.

`--namespaces` namespaces each hold `--per-namespace` objects of one custom kind (Thing0, 2,000,000
at 10,000 x 200: the shape of Secrets or ConfigMaps in a big cluster), written straight into etcd
before anything watches the kind. `--workloads` paused Deployments each watch that kind in a
namespace of its own among them, so their scopes hold a few hundred objects each and most objects
are in namespaces nobody here watches. Then, on one cluster:

- the controller starts, and every workload falls asleep;
- wake latency, each sample beside a raw watch-and-scale baseline's (`bench.baseline --watch`),
  which of the two goes first alternating;
- the idle controller's CPU, and its resident memory;
- restarts in rounds, each round also listing raw what the workloads' scopes hold (`bench.baseline
  --list`: the kind in each of their namespaces, metadata only, and the Deployments and
  StatefulSets whole, as the controller lists them, with its connections), in a rotated order:
  the time from spawn to the controller's `caught up` line and its CPU, against the raw list's
  time from spawn to exit and its CPU; the resident memory after each restart; and how the kind
  is watched (by namespace, or cluster-wide).

Targets (issue 50): resident at most 256 MiB (the chart's default limit) after the run and after
every restart; a restart within 1.25x the raw list, in time and in CPU (medians); wake p99 within
1.25x the baseline's beside it; the kind watched in one namespace per workload, never cluster-wide.
The run exits non-zero when one is missed or not measured.

    python -m bench.bench_giant --namespaces 10000 --per-namespace 200 --workloads 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx

from bench.judge import Run, Target, alternated, report
from bench.measures import (
    RAW,
    WAKE_LIMIT,
    Baseline,
    Controller,
    DeploymentWatch,
    cpu_seconds,
    measure_idle,
    median_start,
    percentile,
    quiet,
    restart_rounds,
    rss_mb,
    time_scale_up,
)
from bench.saved import save_json
from bench.workloads import (
    BIN,
    GROUP,
    NAMESPACE,
    TIMEOUT,
    b64,
    cluster_for,
    compile_bytecode,
    create_if_missing,
    deployment,
    gather_limited,
    kind_of,
    setup_cluster,
)
from zeroscaler.api import ClientLimits, Kube, KubeError
from zeroscaler.api.credentials import load_access
from zeroscaler.controller.flags import ControllerSettings

T = TypeVar("T")
KIND, PLURAL = kind_of(0)
PREFIX = "zs-giant"  # namespaces zs-giant-0.. hold the objects; workload i watches its own
MIB = 2**20
RESIDENT_MIB = 256.0
RESTART_RATIO = 1.25
WAKE_RATIO = 1.25
PUTS = 100  # objects a transaction writes to etcd (its default limit is 128 operations)


@dataclass
class Giant:
    namespaces: int
    per_namespace: int
    workloads: int
    objects: int = 0  # written to etcd: every namespace's
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> wall clock
    load: dict[str, list[float]] = field(default_factory=dict)  # phase -> load average
    latency: list[float] = field(default_factory=list)
    paired: list[float] = field(default_factory=list)
    idle_windows: list[float] = field(default_factory=list)
    idle_cpu_percent: float = 0.0
    idle_quiet: bool = False
    resident_after_run_mib: float = 0.0
    restarts: list[list[float]] = field(default_factory=list)  # each [ready, managed, CPU]
    resident_after_restarts_mib: list[float] = field(default_factory=list)
    raw_s: list[float] = field(default_factory=list)
    raw_cpu_s: list[float] = field(default_factory=list)
    raw_objects: int = 0  # what the raw list listed (the scopes' objects and the workloads)
    watches: dict[str, float] = field(default_factory=dict)  # by scope, after the restarts
    calibration_ms: list[float] = field(default_factory=list)
    woken: list[tuple[int, float, float]] = field(default_factory=list)  # (i, acked, latency)
    tail: list[dict[str, Any]] = field(default_factory=list)  # the slowest wakes, split
    notes: list[str] = field(default_factory=list)


def namespace(k: int) -> str:
    return f"{PREFIX}-{k}"


def workload_name(i: int) -> str:
    return f"giant-{i:05d}"


async def _phase(giant: Giant, name: str, limit: float, work: Awaitable[T]) -> T:
    print(f"giant: {name} (at most {limit:.0f} s)", flush=True)
    began = time.monotonic()
    try:
        async with asyncio.timeout(limit):
            result = await work
    except TimeoutError:
        raise RuntimeError(f"{name} took over {limit:.0f} s") from None
    giant.seconds[name] = round(time.monotonic() - began, 1)
    giant.load[name] = [round(x, 2) for x in os.getloadavg()]
    print(f"giant: {name} took {giant.seconds[name]} s", flush=True)
    return result


def _creator(kube: Kube, path: str, body: dict[str, Any]) -> Callable[[], Awaitable[None]]:
    return lambda: create_if_missing(kube, path, body)


async def make_namespaces(kube: Kube, count: int) -> None:
    jobs = [
        _creator(kube, "/api/v1/namespaces", {"metadata": {"name": namespace(k)}})
        for k in range(count)
    ]
    await gather_limited(jobs, limit=32, progress="  namespaces")


def _put(k: int, j: int) -> dict[str, Any]:
    """One object stored in etcd as the API server stores a custom resource."""
    name, where = f"g-{j:04d}", namespace(k)
    obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": where,
            "uid": f"6d1c1d9e-1c1f-4c2a-{k:04x}-{j:012x}",
            "generation": 1,
            "creationTimestamp": "2026-11-01T09:00:00Z",
        },
    }
    key = f"/registry/{GROUP}/{PLURAL}/{where}/{name}"
    return {"key": b64(key), "value": b64(json.dumps(obj, separators=(",", ":")))}


async def fill(etcd: str, namespaces: int, per_namespace: int) -> int:
    """Every namespace's objects, PUTS a transaction, before anything watches the kind (objects
    of one transaction share a resourceVersion; a watch of the kind running meanwhile could miss
    some, and none runs). The names are fixed: a fill again overwrites."""
    places = [(k, j) for k in range(namespaces) for j in range(per_namespace)]
    batches = [places[i : i + PUTS] for i in range(0, len(places), PUTS)]
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=8), timeout=120) as client:

        def job(batch: list[tuple[int, int]]) -> Any:
            body = {"success": [{"requestPut": _put(k, j)} for k, j in batch]}

            async def put() -> None:
                (await client.post(f"{etcd}/v3/kv/txn", json=body)).raise_for_status()

            return put

        await gather_limited([job(b) for b in batches], limit=8, progress="  transactions")
    return len(places)


async def cache_ready(kube: Kube) -> None:
    """Until the API server's watch cache of the kind has taken in every object written behind its
    back. It reads etcd's own watch of the 2,000,000 puts at its own pace, and a watch event comes
    out only once everything written before it has gone in: a marker created through the API
    server and seen on a watch says the backlog is gone. Until then a wake would time the backlog,
    on both sides alike."""
    path = f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/{PLURAL}"
    body = {"apiVersion": f"{GROUP}/v1", "kind": KIND, "metadata": {"generateName": "marker-"}}
    began = time.monotonic()
    while True:
        try:
            _, rv = await kube.list_all(path, params={"resourceVersion": "0"}, metadata_only=True)
            marker = (await kube.create(path, body))["metadata"]["name"]
            while True:
                async for event in kube.watch(path, resource_version=rv, timeout_seconds=10):
                    rv = str(event["object"]["metadata"].get("resourceVersion", rv))
                    if event["object"]["metadata"].get("name") == marker:
                        print(f"  the kind's watch cache caught up after "
                              f"{time.monotonic() - began:.1f} s", flush=True)  # fmt: skip
                        return
                print(f"  the kind's watch cache: still taking in the backlog, "
                      f"{time.monotonic() - began:.0f} s", flush=True)  # fmt: skip
        except KubeError as e:
            print(f"  the kind's watch cache: {e}", flush=True)
            await asyncio.sleep(2)


def workload(i: int) -> dict[str, Any]:
    annotations = {
        "zeroscaler.io/idle-timeout": TIMEOUT,
        "zeroscaler.io/watched-kinds": f"{KIND}.{GROUP}",
        "zeroscaler.io/watch-namespaces": namespace(i),
    }
    return deployment(workload_name(i), annotations)


async def make_workloads(kube: Kube, count: int) -> None:
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    await gather_limited(
        [_creator(kube, path, workload(i)) for i in range(count)], progress="  workloads"
    )


async def all_asleep(watch: DeploymentWatch, count: int) -> None:
    names = [workload_name(i) for i in range(count)]
    while True:  # polled: a check of every name on each of thousands of changes would cost more
        if watch.asleep(names):
            return
        await asyncio.sleep(1)


async def wakes(
    kube: Kube, watch: DeploymentWatch, baseline: Baseline, giant: Giant, samples: int, gap: float
) -> None:
    """Each sample wakes one workload by a create in its namespace, and the baseline times the
    same beside it; which goes first alternates."""
    for j, order in enumerate(alternated(["zeroscaler", "baseline"], samples)):
        i = (j * 37) % giant.workloads
        target = [workload_name(i)]
        for side in order:
            if side == "baseline":
                giant.paired.append(await baseline.sample(gap))
                continue
            await watch.wait(lambda target=target: watch.asleep(target), limit=60)  # type: ignore[misc]
            path = f"/apis/{GROUP}/v1/namespaces/{namespace(i)}/{PLURAL}"
            answered: list[float] = []
            latency = await time_scale_up(kube, watch, target, path, KIND, gap, answered)
            giant.latency.append(latency)
            if answered:
                giant.woken.append((i, answered[0], latency))
            await watch.wait(lambda target=target: watch.asleep(target), limit=60)  # type: ignore[misc]


def raw_list_command(kubeconfig: str, paths: Path) -> list[str]:
    """What the workloads' scopes hold (the kind in each of their namespaces, metadata only)
    and the workloads (whole), at once, with the connections of the controller's watches."""
    connections = str(ControllerSettings().max_connections)
    return [str(BIN / "python"), "-m", "bench.baseline", "--kubeconfig", kubeconfig,
            "--list-file", str(paths), "--list-full", "/apis/apps/v1/deployments",
            "--list-full", "/apis/apps/v1/statefulsets", "--connections", connections]  # fmt: skip


async def raw_list(kubeconfig: str, paths: Path, giant: Giant) -> None:
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *raw_list_command(kubeconfig, paths), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    seconds = time.monotonic() - began
    words = out.decode().split()
    if proc.returncode or len(words) != 4 or words[0] != "listed":
        raise RuntimeError(f"the raw list failed (exit {proc.returncode}): {out.decode()[-300:]}")
    giant.raw_s.append(round(seconds, 2))
    giant.raw_objects = int(words[1])
    giant.raw_cpu_s.append(round(float(words[3]), 2))


async def restart(controller: Controller, giant: Giant, settle: float) -> None:
    """Start the controller again: to ready, to every workload reconciled (its `caught up` line,
    confirmed by its metrics), its CPU until then; then its resident memory once settled."""
    controller.stop()
    began, spawned = time.monotonic(), time.time()
    controller.start()
    await controller.wait_ready()
    ready = time.monotonic() - began
    caught_up = await controller.wait_caught_up()
    cpu = cpu_seconds(controller.pid)
    at_once = await controller.wait_managed(giant.workloads)
    managed = caught_up - spawned if at_once else time.monotonic() - began
    giant.restarts.append([round(ready, 2), round(managed, 2), round(cpu, 2)])
    await asyncio.sleep(settle)
    giant.resident_after_restarts_mib.append(round(rss_mb(controller.pid), 1))


async def calibrate(giant: Giant) -> None:
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "python"), "-m", "bench.calibration", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    words = out.decode().split()
    if proc.returncode or len(words) != 3:
        raise RuntimeError(f"the calibration failed (exit {proc.returncode}): {out.decode()!r}")
    giant.calibration_ms.append(float(words[1]))


def split_tail(log: Path, woken: list[tuple[int, float, float]], count: int = 3) -> list[Any]:
    """The slowest wakes split by the controller's `woken` line for them: its own part (from
    the watch event's arrival to the scale write's answer) and the rest (the API server's two
    watches, the create's to the controller and the Deployment's back to the benchmark)."""
    own: dict[str, list[tuple[float, float]]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if " msg=woken " not in line or "latency_ms=" not in line:
            continue
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        when = datetime.fromisoformat(fields["time"].replace("Z", "+00:00")).timestamp()
        name = fields.get("workload", "").rsplit("/", 1)[-1]
        own.setdefault(name, []).append((when, float(fields["latency_ms"])))
    found = []
    for i, answered, latency in sorted(woken, key=lambda w: -w[2])[:count]:
        split: dict[str, Any] = {"workload": workload_name(i), "latency_ms": round(latency * 1000)}
        # Its line is written after the benchmark's create was answered, and the first such.
        later = [ms for when, ms in own.get(workload_name(i), []) if when >= answered - 0.05]
        if later and latency < WAKE_LIMIT:
            split["controller_ms"] = later[0]
            split["api_server_and_benchmark_ms"] = round(latency * 1000 - later[0])
        found.append(split)
    return found


def shared_watches(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = {}
    for line in text.splitlines():
        if line.startswith("zeroscaler_shared_watches{"):
            scope = line.split('scope="', 1)[1].split('"', 1)[0]
            found[scope] = float(line.rsplit(" ", 1)[1])
    return found


async def bench(args: argparse.Namespace, kubeconfig: str, etcd: str, workdir: Path) -> Giant:
    giant = Giant(args.namespaces, args.per_namespace, args.workloads)
    paths = workdir / "scopes"
    paths.write_text(
        "".join(
            f"/apis/{GROUP}/v1/namespaces/{namespace(i)}/{PLURAL}\n" for i in range(args.workloads)
        )
    )
    async with Kube(load_access(kubeconfig), ClientLimits(max_connections=64)) as kube:
        await _phase(giant, "setup", 300, setup_cluster(kube))
        await _phase(giant, "namespaces", 120 + args.namespaces / 10,
                     make_namespaces(kube, args.namespaces))  # fmt: skip
        if not etcd:
            raise SystemExit(
                "the giant's objects go into etcd directly: --etcd, or no --kubeconfig"
            )
        giant.objects = await _phase(
            giant, "objects into etcd", 300 + args.namespaces * args.per_namespace / 500,
            fill(etcd, args.namespaces, args.per_namespace),
        )  # fmt: skip
        await _phase(giant, "the kind's watch cache", 600, cache_ready(kube))
        watch = DeploymentWatch(kube)
        watcher = asyncio.create_task(watch.run())
        controller = Controller(kubeconfig, workdir)
        try:
            async with Baseline(kube, watch).running(kubeconfig, workdir) as baseline:
                with controller.running():
                    await controller.wait_ready()
                    await _phase(giant, "workloads", 300 + args.workloads / 5,
                                 make_workloads(kube, args.workloads))  # fmt: skip
                    await _phase(giant, "all asleep", 300 + args.workloads / 5,
                                 all_asleep(watch, args.workloads))  # fmt: skip
                    await _phase(giant, "Events written", 300, controller.wait_events_written())
                    timed = wakes(kube, watch, baseline, giant, args.samples, args.gap)
                    await _phase(giant, "wakes", 60 + args.samples * 15, timed)
                    await _phase(giant, "all asleep again", 300, all_asleep(watch, args.workloads))
                    giant.idle_quiet = await _phase(giant, "quiet", 660, quiet(watch, 600))
                    giant.idle_windows, giant.idle_cpu_percent = await _phase(
                        giant, "idle", args.idle_seconds + 60,
                        measure_idle(controller.pid, args.idle_seconds),
                    )  # fmt: skip
                    giant.resident_after_run_mib = round(rss_mb(controller.pid), 1)
                    await _phase(giant, "calibration before", 120, calibrate(giant))
                    for number, order in enumerate(restart_rounds(["default"], args.rounds), 1):
                        for mode in order:
                            if mode == RAW:
                                controller.stop()
                                await _phase(giant, f"raw list {number}", 600,
                                             raw_list(kubeconfig, paths, giant))  # fmt: skip
                            else:
                                await _phase(giant, f"restart {number}", 600 + args.workloads / 5,
                                             restart(controller, giant, args.settle))  # fmt: skip
                    giant.watches = shared_watches(controller.port)
                    await _phase(giant, "calibration after", 120, calibrate(giant))
        except RuntimeError as e:  # a phase over its bound: judged on what was measured
            giant.notes.append(str(e))
        finally:
            watcher.cancel()
    giant.tail = split_tail(workdir / "controller.log", giant.woken)
    return giant


def targets(giant: Giant) -> list[Target]:
    """Issue 50's targets for the giant, and the figures beside them as measurements."""
    found = []
    p99 = percentile(giant.latency, 0.99) if giant.latency else None
    base = percentile(giant.paired, 0.99) if giant.paired else None
    ratio = p99 / base if p99 is not None and base else None
    found.append(Target("wake p99 / baseline p99 beside it", ratio, WAKE_RATIO, "x"))
    found.append(Target("wake p99", None if p99 is None else p99 * 1000, None, "ms"))
    residents = [giant.resident_after_run_mib, *giant.resident_after_restarts_mib]
    measured = giant.resident_after_run_mib and giant.resident_after_restarts_mib
    most = max(residents) if measured else None
    found.append(Target("resident, most after the run or a restart", most, RESIDENT_MIB, "MiB"))
    managed = median_start(giant.restarts)[1] if giant.restarts else None
    raw = statistics.median(giant.raw_s) if giant.raw_s else None
    found.append(Target("restart to every workload reconciled (median)", managed, None, "s"))
    found.append(Target("raw list of the scopes (median)", raw, None, "s"))
    found.append(Target("restart / raw list", _ratio(managed, raw), RESTART_RATIO, "x"))
    cpu = median_start(giant.restarts)[2] if giant.restarts else None
    raw_cpu = statistics.median(giant.raw_cpu_s) if giant.raw_cpu_s else None
    found.append(Target("restart CPU / raw list CPU", _ratio(cpu, raw_cpu), RESTART_RATIO, "x"))
    by_namespace = giant.watches.get("namespace")
    found.append(Target("watches by namespace", by_namespace, float(giant.workloads), "",
                        at_least=True))  # fmt: skip
    found.append(Target("watches cluster-wide", giant.watches.get("cluster"), 0.0, ""))
    idle = giant.idle_cpu_percent if giant.idle_windows and giant.idle_quiet else None
    found.append(Target("idle CPU", idle, None, "%"))
    return found


def _ratio(value: float | None, baseline: float | None) -> float | None:
    return None if value is None or not baseline else value / baseline


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", help="use this cluster (with --etcd) instead of a new one")
    parser.add_argument("--etcd", default="", help="with --kubeconfig: its etcd's client URL")
    parser.add_argument("--namespaces", type=int, default=10_000)
    parser.add_argument("--per-namespace", type=int, default=200)
    parser.add_argument("--workloads", type=int, default=1_000)
    parser.add_argument("--samples", type=int, default=200, help="wakes timed")
    parser.add_argument("--gap", type=float, default=0.3, help="quiet seconds before a wake")
    parser.add_argument("--rounds", type=int, default=3, help="restarts, each beside a raw list")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after a restart")
    args = parser.parse_args()
    if not 0 < args.workloads <= args.namespaces:
        parser.error("--workloads: at least 1, and no more than --namespaces (one each)")
    compile_bytecode()
    workdir = Path(tempfile.mkdtemp(prefix="zeroscaler-giant-"))
    run = Run()
    with cluster_for(args.kubeconfig) as (kubeconfig, etcd):
        giant = asyncio.run(bench(args, kubeconfig, args.etcd or etcd, workdir))
    shape = f"{giant.namespaces:,} namespaces x {giant.per_namespace} = {giant.objects:,} objects"
    print(f"\ngiant: {shape}; {giant.workloads:,} workloads; logs in {workdir}")
    for name, value in (("raw lists (s)", giant.raw_s), ("raw lists' CPU (s)", giant.raw_cpu_s),
                        ("restarts [ready, managed, CPU]", giant.restarts),
                        ("resident after restarts (MiB)", giant.resident_after_restarts_mib),
                        ("machine's fixed work (ms)", giant.calibration_ms)):  # fmt: skip
        print(f"  {name}: {value}")
    for split in giant.tail:
        print(f"  a slow wake: {split}")
    for note in giant.notes:
        print(f"note: {note}")
    judged = targets(giant)
    save_json("giant", run.stamped(asdict(giant), judged))
    sys.exit(1 if report(judged) else 0)


if __name__ == "__main__":
    main()
