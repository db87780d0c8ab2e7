"""The controller benchmark's scale row (`python -m bench.bench_controller --scale 10000 200000`).

Two stages on one cluster: 1,000 workloads over 50,000 watched objects (`--scale-from`), then the
given counts (10,000 and 200,000 for issue 12's row). Each stage's new objects are created first,
in namespaces no existing workload watches, so the fill wakes nothing (stored in etcd directly
where its URL is known: through the API server they came at 70-180/s on this busy machine); then
its workloads (paused Deployments, as in the other rows) are created and left to fall asleep. In
each stage: wake latency paired with the raw baseline beside it (the method of the other rows), the
controller's CPU while idle and its resident memory, then a restart: time to ready, to the first
full list of every watched type and to every workload reconciled (the controller's "caught up" log
line, to the millisecond, once its metrics confirm every workload managed), and the resident memory
after it. Beside the restarts, with the controller stopped, a raw baseline (`bench.baseline
--list`, a process of its own) lists the same types with the controller's client settings and
exits: the restart's time over the baseline's says how close a restart comes to what the API server
allows. One start varies by ±0.5 s at 10,000 workloads, so the restarts come in rounds
(`--restart-rounds`), each with the raw list and one start of every mode in a rotated order, and
each figure is the median of its starts. Before and after the restarts, `bench.calibration`
times a fixed piece of CPU work, so that runs on different days can be told apart from the
machine's own speed (runs J and K, four hours apart, differed by more than their code did).
Each figure's growth from the first stage is printed; `targets` judges every stage, and a
figure not measured fails the run as a target missed does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench.controller_args import arguments, hand_over
from bench.judge import Run, Target, report
from bench.measures import (
    RAW,
    Baseline,
    Controller,
    DeploymentWatch,
    cpu_seconds,
    measure_controller,
    measure_idle,
    median_start,
    percentile,
    quiet,
    restart_rounds,
    rss_mb,
)
from bench.saved import RESULTS, save_json
from bench.workloads import (
    BIN,
    GROUP,
    SCOPES,
    TYPES,
    cluster_for,
    compile_bytecode,
    ensure_workloads,
    fill_objects,
    kind_of,
    setup_cluster,
    workload_name,
)
from zeroscaler.api import ClientLimits, Kube
from zeroscaler.api.credentials import load_access
from zeroscaler.controller.flags import ControllerSettings

T = TypeVar("T")


@dataclass
class Stage:
    workloads: int
    objects: int = 0  # watched objects of the benchmark's types when measured
    load: dict[str, list[float]] = field(default_factory=dict)  # phase -> load average 1/5/15
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> wall clock
    latency: list[float] = field(default_factory=list)
    paired: list[float] = field(default_factory=list)  # the baseline beside each sample
    idle_windows: list[float] = field(default_factory=list)
    idle_quiet: bool = False  # whether no Deployment had changed for QUIET s when it began
    idle_cpu_percent: float = 0.0
    idle_rss_mb: float = 0.0
    ready_s: float = 0.0  # restart to /readyz
    synced_s: float = 0.0  # restart to the first full list of every watched type
    managed_s: float = 0.0  # restart to every workload reconciled (managed and asleep)
    restart_cpu_s: float = 0.0  # the controller's CPU from its spawn until it caught up
    event_cpu_us: float = 0.0  # controller CPU per event of an object no workload watches
    restart_rss_mb: float = 0.0  # resident after the restart's lists, settled
    # The raw baseline of a restart: seconds from spawn to exit of a process that lists what the
    # controller lists most of, once a round of restarts; and what it listed.
    list_baseline_s: list[float] = field(default_factory=list)
    list_baseline_objects: int = 0
    list_baseline_cpu_s: list[float] = field(default_factory=list)  # the raw list's own CPU
    # mode -> its starts, each [ready, synced, managed, CPU]; the figures are their medians
    restarts: dict[str, list[list[float]]] = field(default_factory=dict)
    # The machine's speed (`bench.calibration`, CPU ms) before and after the restarts.
    calibration_ms: list[float] = field(default_factory=list)


@dataclass
class ScaleResults:
    stages: list[Stage] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


async def _phase(stage: Stage, name: str, limit: float, work: Awaitable[T]) -> T:
    """Run one phase within `limit` seconds, recording its time and the load average."""
    print(f"{stage.workloads} workloads: {name} (at most {limit:.0f} s)", flush=True)
    began = time.monotonic()
    try:
        async with asyncio.timeout(limit):
            result = await work
    except TimeoutError:
        raise RuntimeError(f"{stage.workloads} workloads: {name} took over {limit:.0f} s") from None
    stage.seconds[name] = round(time.monotonic() - began, 1)
    stage.load[name] = [round(x, 2) for x in os.getloadavg()]
    print(f"{stage.workloads} workloads: {name} took {stage.seconds[name]} s", flush=True)
    return result


async def _all_asleep(watch: DeploymentWatch, count: int) -> None:
    """Poll (not on every event: 10,000 names each time) until workloads 0..count-1 sleep."""
    names = [workload_name(i) for i in range(count)]
    last = 0.0
    while True:
        awake = sum(1 for n in names if not watch.asleep([n]))
        if not awake:
            return
        if time.monotonic() - last > 10:
            print(f"  {count - awake} / {count} asleep", flush=True)
            last = time.monotonic()
        await asyncio.sleep(1)


async def run_stage(
    kube: Kube,
    watch: DeploymentWatch,
    baseline: Baseline,
    controller: Controller,
    stage: Stage,
    number: int,
    first: tuple[int, int],
    objects: int,
    args: argparse.Namespace,
) -> None:
    """Stage `number` (from 1): workloads `first`..`stage.workloads` - 1 and `objects` in all;
    measure; restart."""
    count = stage.workloads
    scopes = range(first[0] // TYPES, count // TYPES)  # watched by none of the existing workloads
    new_objects = max(0, objects - first[1] - EVENTS)  # the events' objects make up the rest
    stage.objects = await _phase(
        stage,
        "create objects",
        120 + new_objects / 50,
        fill_objects(kube, new_objects, scopes, progress="  objects", etcd=args.etcd),
    )
    await _phase(
        stage,
        "create workloads",
        300 + count / 4,  # 9-23 a second on this busy machine, the controller's writes beside
        ensure_workloads(kube, count, first[0], progress="  workloads"),
    )
    await _phase(stage, "all asleep", 300 + count / 4, _all_asleep(watch, count))
    stage.event_cpu_us, stage.objects = await _phase(
        stage, "unwatched events", 300, _event_cost(kube, controller.pid, number, args.etcd)
    )
    # The sleeps' records and Events trail their scale writes: wakes are timed once they are done
    # (in one run the first three wakes at 1,000 took 1.2-4 s while they were written; in a lab
    # at 10,000 the Events took 36 s, and the slowest wakes were the ones among them).
    await _phase(stage, "Events written", 300 + count / 10, controller.wait_events_written())
    await _phase(
        stage, "settle before wakes", args.idle_settle + 10, asyncio.sleep(args.idle_settle)
    )
    stage.latency, stage.paired = await _phase(
        stage,
        "wake latency",
        60 + args.samples * 15,
        measure_controller(kube, watch, baseline, count, args.samples, args.gap, churn=False),
    )
    await _phase(stage, "idle settle", args.idle_settle + 300, _settle(watch, count, args))
    stage.idle_quiet = await _phase(
        stage, "quiet cluster", QUIET_BOUND + 60, quiet(watch, QUIET_BOUND)
    )
    stage.idle_windows, stage.idle_cpu_percent = await _phase(
        stage, "idle", args.idle_seconds + 60, measure_idle(controller.pid, args.idle_seconds)
    )
    stage.idle_rss_mb = rss_mb(controller.pid)
    await _phase(stage, "calibration before the restarts", 120, _calibrate(stage))
    for number, order in enumerate(restart_rounds(args.restarts, args.restart_rounds), 1):
        for mode in order:
            if mode == RAW:
                controller.stop()
                await _phase(stage, f"raw list, round {number}", 300 + objects / 100,
                             _raw_list(controller.kubeconfig, stage))  # fmt: skip
            else:
                start = await _restart(stage, controller, mode, args)
                stage.restarts.setdefault(mode, []).append(start)
    # The last round ends with the row's mode: its controller goes on into the next stage.
    figures = median_start(stage.restarts[args.restarts[-1]])
    stage.ready_s, stage.synced_s, stage.managed_s, stage.restart_cpu_s = figures
    stage.restart_rss_mb = rss_mb(controller.pid)
    await _phase(stage, "calibration after the restarts", 120, _calibrate(stage))


# How the controller lists on a restart: the flags for it (`default`: none, for code before them).
RESTARTS = {
    "pages": ["--no-streaming-lists"],
    "streaming": ["--streaming-lists"],
    "cold": ["--no-warm-watches"],  # watches started by each workload's first reconcile, as before
    "default": [],
}


async def _restart(
    stage: Stage, controller: Controller, mode: str, args: argparse.Namespace
) -> list[float]:
    """Stop the controller (if running) and start it listing as `mode` says: seconds to ready,
    to every watched type listed and to every workload reconciled, and the CPU it took until it
    caught up; then let it settle."""
    count = stage.workloads
    controller.stop()
    began, spawned = time.monotonic(), time.time()
    controller.start(RESTARTS[mode])
    await _phase(stage, f"restart ({mode}) to ready", 300 + count / 10, controller.wait_ready())
    ready = round(time.monotonic() - began, 2)
    await _phase(stage, f"restart ({mode}) to watches synced", 300, controller.wait_synced(TYPES))
    synced = round(time.monotonic() - began, 2)
    caught_up = await _phase(stage, f"restart ({mode}) to caught up", 300 + count / 10,
                             controller.wait_caught_up())  # fmt: skip
    cpu = round(cpu_seconds(controller.pid), 2)  # it idles from its catch-up on
    # The log line ends the figure, as the raw list's exit ends its own, if the metrics then
    # show every workload managed at the first look; otherwise the half-second polls do.
    at_once = await _phase(stage, f"restart ({mode}) to every workload managed", 300,
                           controller.wait_managed(count))  # fmt: skip
    managed = round(caught_up - spawned if at_once else time.monotonic() - began, 2)
    await asyncio.sleep(args.idle_settle)
    return [ready, synced, managed, cpu]


def raw_list_command(kubeconfig: str) -> list[str]:
    """The restart's baseline: every benchmark type (metadata only, as the shared watches ask)
    and the workloads (whole, as the controller's workload watches ask), all at once, with the
    connection pool of the controller's watches."""
    paths = [a for t in range(TYPES) for a in ("--list", f"/apis/{GROUP}/v1/{kind_of(t)[1]}")]
    workloads = ["--list-full", "/apis/apps/v1/deployments"]
    workloads += ["--list-full", "/apis/apps/v1/statefulsets"]
    connections = ["--connections", str(ControllerSettings().max_connections)]
    return [str(BIN / "python"), "-m", "bench.baseline", "--kubeconfig", kubeconfig,
            *paths, *workloads, *connections]  # fmt: skip


async def _raw_list(kubeconfig: str, stage: Stage) -> None:
    """Run the baseline's lists once; its time, from spawn to exit, like a restart's from spawn."""
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *raw_list_command(kubeconfig), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    seconds = time.monotonic() - began
    words = out.decode().split()
    if proc.returncode or len(words) != 4 or words[0] != "listed":
        raise RuntimeError(f"the raw list failed (exit {proc.returncode}): {out.decode()[-300:]}")
    stage.list_baseline_s.append(round(seconds, 2))
    stage.list_baseline_objects = int(words[1])
    stage.list_baseline_cpu_s.append(round(float(words[3]), 2))


async def _calibrate(stage: Stage) -> None:
    """Time `bench.calibration`'s fixed work in a process of its own, the controller running."""
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "python"), "-m", "bench.calibration", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    words = out.decode().split()
    if proc.returncode or len(words) != 3 or words[0] != "calibration":
        raise RuntimeError(f"the calibration failed (exit {proc.returncode}): {out.decode()!r}")
    stage.calibration_ms.append(float(words[1]))


EVENTS = 5000  # objects created per stage in a namespace no workload watches


async def _event_cost(kube: Kube, pid: int, number: int, etcd: str) -> tuple[float, int]:
    """Controller CPU (µs) per watch event that concerns no workload (EVENTS new objects in a
    namespace none watches), and the objects of the benchmark's types after them."""
    before = 0.0

    def listed() -> None:  # the count of what is there (200,000 objects listed) is not theirs
        nonlocal before
        before = cpu_seconds(pid)

    total = await fill_objects(kube, EVENTS * number, ["fan-out"], etcd=etcd, on_listed=listed)
    await asyncio.sleep(3)  # the last events' handling
    return 1e6 * (cpu_seconds(pid) - before) / EVENTS, total


QUIET_BOUND = 600.0


async def _settle(watch: DeploymentWatch, count: int, args: argparse.Namespace) -> None:
    await _all_asleep(watch, count)  # the last samples' targets
    await asyncio.sleep(args.idle_settle)  # their sleeps' Events trail the scale writes


async def bench_scale(args: argparse.Namespace, kubeconfig: str, workdir: Path) -> ScaleResults:
    """Both stages with one baseline and one Deployment watch throughout."""
    stages = args.scale_stages or [tuple(args.scale_from), tuple(args.scale)]
    for (count, objects), (before, had) in zip(stages, [(0, 0), *stages], strict=False):
        if count > SCOPES * TYPES or count <= before or count % TYPES or objects < had:
            raise SystemExit(
                f"--scale-from and --scale: {count} workloads over {objects} objects: use a "
                f"multiple of {TYPES}, at most {SCOPES * TYPES} (one write wakes one workload), "
                "more workloads and no fewer objects than the stage before"
            )
    if not args.restarts or any(m not in RESTARTS for m in args.restarts):
        raise SystemExit(
            f"--restarts {','.join(args.restarts)}: one or more of {', '.join(RESTARTS)}"
        )
    if args.restart_rounds < 1:
        raise SystemExit(f"--restart-rounds {args.restart_rounds}: at least 1")
    results = ScaleResults()
    async with Kube(load_access(kubeconfig), ClientLimits(max_connections=64)) as kube:
        await setup_cluster(kube)
        watch = DeploymentWatch(kube)
        watcher = asyncio.create_task(watch.run())
        controller = Controller(kubeconfig, workdir)
        async with Baseline(kube, watch).running(kubeconfig, workdir) as baseline:
            with controller.running():
                await controller.wait_ready()
                first = (0, 0)
                for number, (workloads, total) in enumerate(stages, 1):
                    stage = Stage(workloads)
                    results.stages.append(stage)
                    try:
                        await run_stage(
                            kube, watch, baseline, controller, stage, number, first, total, args
                        )
                    except RuntimeError as e:  # a phase over its bound: keep what was measured
                        results.notes.append(str(e))
                        write(results)
                        break
                    first = (workloads, stage.objects)
                    print_scale(results)
                    write(results)
        watcher.cancel()
    return results


def _growth(first: float, last: float) -> str:
    return f"{last / first:.2f}x" if first else "-"


def rows(results: ScaleResults) -> list[tuple[str, list[float]]]:
    """Each reported figure, per stage."""

    def ms(values: list[float], q: float) -> float:
        return percentile(values, q) * 1000 if values else 0.0

    figures: list[tuple[str, Callable[[Stage], float]]] = [
        ("watched objects", lambda s: s.objects),
        ("wake p50 (ms)", lambda s: ms(s.latency, 0.5)),
        ("wake p99 (ms)", lambda s: ms(s.latency, 0.99)),
        ("baseline beside it, p50 (ms)", lambda s: ms(s.paired, 0.5)),
        ("baseline beside it, p99 (ms)", lambda s: ms(s.paired, 0.99)),
        ("p99 / baseline p99", lambda s: ms(s.latency, 0.99) / (ms(s.paired, 0.99) or 1)),
        ("idle CPU (% of a core)", lambda s: s.idle_cpu_percent),
        ("resident after the run (MB)", lambda s: s.idle_rss_mb),
        ("restart: resident (MB)", lambda s: s.restart_rss_mb),
        ("restart: to ready (s)", lambda s: s.ready_s),
        ("restart: to every watch synced (s)", lambda s: s.synced_s),
        ("restart: to every workload managed (s)", lambda s: s.managed_s),
        *_restart_rows(results),
        ("raw list of the same types (s, median)", _list_baseline),
        ("restart / raw list (target 1.25x)", lambda s: s.managed_s / (_list_baseline(s) or 1)),
        ("objects the raw list listed", lambda s: s.list_baseline_objects),
        # Each side's own CPU: where both are bound by it (two cores), the ratio comes from it.
        ("restart: controller CPU to caught up (s)", lambda s: s.restart_cpu_s),
        ("raw list: its own CPU (s, median)", _list_cpu),
        ("restart CPU / raw list CPU", lambda s: s.restart_cpu_s / (_list_cpu(s) or 1)),
        ("CPU per event nobody watches (us)", lambda s: s.event_cpu_us),
        ("creating objects (s)", lambda s: s.seconds.get("create objects", 0.0)),
        ("creating workloads (s)", lambda s: s.seconds.get("create workloads", 0.0)),
        ("until all asleep (s)", lambda s: s.seconds.get("all asleep", 0.0)),
        ("machine: fixed work before restarts (ms)", lambda s: _calibration(s, 0)),
        ("machine: fixed work after restarts (ms)", lambda s: _calibration(s, 1)),
    ]
    return [(name, [get(s) for s in results.stages]) for name, get in figures]


# How each restart mode is named in the table.
_MODE_NAMES = {
    "pages": "listing in pages",
    "streaming": "streaming lists",
    "cold": "watches by first reconciles",
    "default": "as configured",
}


def _restart_rows(results: ScaleResults) -> list[tuple[str, Callable[[Stage], float]]]:
    """Two rows (every watch synced, every workload managed) for each restart mode run."""
    modes = dict.fromkeys(m for s in results.stages for m in s.restarts)
    return [
        (f"restart, {_MODE_NAMES.get(mode, mode)}: {what} (s)", _mode_figure(mode, figure))
        for mode in modes
        for figure, what in ((1, "synced"), (2, "managed"))
    ]


def _mode_figure(mode: str, figure: int) -> Callable[[Stage], float]:
    return lambda s: median_start(s.restarts[mode])[figure] if s.restarts.get(mode) else 0.0


def _calibration(s: Stage, which: int) -> float:
    return s.calibration_ms[which] if len(s.calibration_ms) > which else 0.0


def _list_baseline(s: Stage) -> float:
    return round(statistics.median(s.list_baseline_s), 2) if s.list_baseline_s else 0.0


def _list_cpu(s: Stage) -> float:
    return round(statistics.median(s.list_baseline_cpu_s), 2) if s.list_baseline_cpu_s else 0.0


# The row's targets (docs/figures.md, "Scale row"; issue 50 for the restart's CPU).
WAKE_RATIO = 1.25  # wake p99 over the p99 of the baseline beside it, at every stage
IDLE_CPU_PERCENT = 0.5
ASLEEP_S = 30.0  # from the last workload created to all asleep (2 s idle timeout)
RESTART_S_AT_10000 = 20.0  # to every workload reconciled; growing no faster than the workloads
RESTART_RATIO = 1.25  # the restart over the raw list beside it, in time and in CPU
RATIO_FROM = 10_000  # below this, a process's own start is most of a restart: ratios measured


def resident_limit_mib(workloads: int) -> float:
    """The resident target after the run at a size: 100 at 1,000, 150 at 10,000 (the row's),
    and 1 GiB up to 100,000 (issue 50's)."""
    if workloads <= 1_000:
        return 100.0
    if workloads <= 10_000:
        return 150.0
    return 1024.0


def targets(results: ScaleResults) -> list[Target]:
    """Every stage's figures against the row's targets. A figure a stage did not measure (no
    wake, no restart, no raw list, no CPU, no idle window in a quiet cluster, no calibration)
    fails; a stage cut short by a phase over its bound fails on what it did not reach."""
    if not results.stages:
        return []
    found: list[Target] = []
    for s in results.stages:
        at = f"{s.workloads:,} workloads"
        wake = _ratio(_p99_ms(s.latency), _p99_ms(s.paired)) if s.latency and s.paired else None
        found.append(Target(f"{at}: wake p99 / baseline p99", wake, WAKE_RATIO, "x"))
        idle = s.idle_cpu_percent if s.idle_windows and s.idle_quiet else None
        found.append(Target(f"{at}: idle CPU, a quiet cluster", idle, IDLE_CPU_PERCENT, "%"))
        rss = s.idle_rss_mb or None
        found.append(Target(f"{at}: resident after the run", rss, resident_limit_mib(s.workloads),
                            "MiB"))  # fmt: skip
        asleep = s.seconds.get("all asleep")
        found.append(Target(f"{at}: from the last created to all asleep", asleep, ASLEEP_S, "s"))
        limit = RESTART_S_AT_10000 * max(1.0, s.workloads / 10_000)
        restart = s.managed_s or None
        found.append(Target(f"{at}: restart to every workload reconciled", restart, limit, "s"))
        ratio_limit = RESTART_RATIO if s.workloads >= RATIO_FROM else None
        raw = _list_baseline(s) if s.list_baseline_objects else None
        ratio = _ratio(restart, raw)
        found.append(Target(f"{at}: restart / raw list", ratio, ratio_limit, "x"))
        cpu = _ratio(s.restart_cpu_s or None, _list_cpu(s) or None)
        found.append(Target(f"{at}: restart CPU / raw list CPU", cpu, ratio_limit, "x"))
        speed = s.calibration_ms[0] if len(s.calibration_ms) > 1 else None
        found.append(Target(f"{at}: the machine's fixed work (before the restarts)", speed,
                            None, "ms"))  # fmt: skip
    return found


def _ratio(value: float | None, baseline: float | None) -> float | None:
    if value is None or not baseline:
        return None
    return value / baseline


def print_scale(results: ScaleResults) -> None:
    head = "".join(f"{s.workloads:>12}" for s in results.stages)
    print(f"\n{'scale row':<38}{head}{'growth':>10}")
    for name, values in rows(results):
        cells = "".join(f"{v:>12.2f}" if v < 1000 else f"{v:>12.0f}" for v in values)
        growth = _growth(values[0], values[-1]) if len(values) > 1 else ""
        print(f"{name:<38}{cells}{growth:>10}")
    for s in results.stages:
        windows = ", ".join(f"{w:.2f}" for w in s.idle_windows)
        print(f"{s.workloads} workloads: idle CPU per 10 s window: {windows}; load {s.load}")
        raw = ", ".join(f"{x:.2f}" for x in s.list_baseline_s)
        raw_cpu = ", ".join(f"{x:.2f}" for x in s.list_baseline_cpu_s)
        print(f"{s.workloads} workloads: raw lists, a round each: {raw} s (CPU {raw_cpu} s)")
        for mode, starts in s.restarts.items():
            managed = ", ".join(f"{start[2]:.2f}" for start in starts)
            cpu = ", ".join(f"{start[3]:.2f}" for start in starts if len(start) > 3)
            print(
                f"{s.workloads} workloads: restarts ({mode}) to every workload managed: {managed} s"
                f" (CPU {cpu} s)"
            )
    for note in results.notes:
        print(f"note: {note}")


def _p99_ms(values: list[float]) -> float:
    return percentile(values, 0.99) * 1000 if values else 0.0


def plot(results: ScaleResults, path: Path) -> None:
    """Cost against size, one point per stage: how each figure grows, not just two of them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = results.stages
    sizes = [s.workloads for s in stages]
    panels: list[tuple[str, list[tuple[str, list[float]]]]] = [
        ("resident memory (MB)", [("idle", [s.idle_rss_mb for s in stages]),
                                  ("after a restart", [s.restart_rss_mb for s in stages])]),
        ("restart (s)", [("to every workload reconciled", [s.managed_s for s in stages]),
                         ("raw list of the same types", [_list_baseline(s) for s in stages])]),
        ("idle CPU (% of a core)", [("idle", [s.idle_cpu_percent for s in stages])]),
        ("wake p99 (ms)", [("zeroscaler", [_p99_ms(s.latency) for s in stages]),
                           ("raw baseline beside it", [_p99_ms(s.paired) for s in stages])]),
    ]  # fmt: skip
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 3.6))
    for ax, (title, lines) in zip(axes, panels, strict=True):
        for label, values in lines:
            ax.plot(sizes, values, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes], fontsize=8)
        ax.set_xlabel("workloads", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    objects = ", ".join(f"{s.objects:,}" for s in stages)
    fig.suptitle(
        f"zeroscaler controller: cost against size (watched objects: {objects})", fontsize=9
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results: ScaleResults, run: Run | None = None) -> None:
    """The JSON beside the other benchmarks' results, with the table's figures and verdicts."""
    out: dict[str, Any] = asdict(results)
    out["table"] = {name: values for name, values in rows(results)}
    if run is not None:
        out = run.stamped(out, targets(results))
    print(f"wrote {save_json('controller-scale', out)}")
    if results.stages:
        plot(results, RESULTS / "controller-scale.png")


# `make bench`'s stages: cost against size at three sizes, each with 20 watched objects a workload.
STAGES = "100:5000,1000:50000,10000:200000"


def main() -> None:
    """`python -m bench scale`: the scale row at STAGES (about 30 minutes on 2 cores), its table,
    its JSON and its plot against size; `python -m bench.bench_controller --scale ...` hands its
    run here. Without `--scale` or `--scale-stages` (`--scale-from` alone), the controller's
    other rows: the run goes to `bench.bench_controller`."""
    if not any(a.startswith("--scale") for a in sys.argv[1:]):
        sys.argv[1:1] = ["--scale-stages", STAGES]
    args = arguments(__doc__).parse_args()
    if not (args.scale or args.scale_stages):
        hand_over("bench.bench_controller")
    compile_bytecode()
    workdir = Path(tempfile.mkdtemp(prefix="zeroscaler-bench-"))
    scale_run = Run()
    with cluster_for(args.kubeconfig) as (kubeconfig, etcd):
        args.etcd = args.etcd or etcd
        scale = asyncio.run(bench_scale(args, kubeconfig, workdir))
    scale.notes.append(
        f"{args.samples} wakes per stage; {os.cpu_count()} cores, shared with other work; "
        f"logs in {workdir}"
    )
    print_scale(scale)
    write(scale, scale_run)
    sys.exit(1 if report(targets(scale)) else 0)


if __name__ == "__main__":
    main()
