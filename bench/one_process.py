"""How big one controller process gets at a size, measured rather than extrapolated.

`docs/scaling.md` asks whether one process can hold 100,000 workloads within 1 GB, the point at
which the workloads would have to be sharded across replicas. Its arithmetic summed costs measured
one by one; this runs the real `Controller` over an API served by a function (as
`bench/workload_state.py` does) with W asleep Deployments and O watched objects in their scopes,
shaped as the scale row makes them, and reads the process's resident size once every workload is
reconciled and the start's catch-up is over. Both the workloads' and the objects' lists are made
page by page as they are asked for, so the fake API holds none of them.

Each size runs in a process of its own (`python -m bench.one_process W O`), so nothing of one size
stays resident in the next. What it leaves out: the API server's latency (a restart here is the
controller's own work only) and the Sleeping Events of the sleeps (the workloads start asleep).
The workloads' census annotations are left out too: a census recorded for types that now hold
objects would wake them all.

Run as a benchmark, it judges what sizes cost (each size still in a process of its own):

- `python -m bench.one_process` (in `make bench`): growth in both dimensions from one run.
  Workloads vary at a fixed count of objects, and objects at a fixed count of workloads; each
  size runs `GROWTH_REPEATS` times, in rounds, and its medians are judged: for each dimension, the
  start's CPU and the resident size that each added workload (or object) cost in the last step
  must be within `GROWTH_TOLERANCE` of what each cost in the first. Writes
  `bench/results/growth.json` and the plot `bench/results/growth.png`.
- `python -m bench.one_process --many-operators`: issue 50's many operators, 100,000 workloads over
  2,000,000 objects between two runs of 10,000 over 200,000: at most 1 GiB at its peak, and a
  start's time and CPU per workload no more than at 10,000 (the mean of its two runs). Writes
  `bench/results/many-operators.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.judge import Run, Target, report
from bench.measures import (
    Size,
    measure_one_process,
    one_process_sizes,
    one_process_targets,
    own_rss_mb,
)
from bench.saved import RESULTS, save_json
from bench.workload_state import Failures, FakeAPI, asleep_deployment
from bench.workloads import GROUP, SCOPES, TYPES, api_object_text, kind_of
from zeroscaler.api import ClientLimits, Kube
from zeroscaler.api.credentials import ClusterAccess
from zeroscaler.controller.assembly import STALL_BOUND, Controller
from zeroscaler.controller.flags import ControllerSettings
from zeroscaler.core.annotations import CENSUS

LIMIT_SECONDS = 1_200.0  # to hold 100,000 workloads over 2,000,000 objects, with room


def _uncensused(i: int) -> dict[str, Any]:
    obj = asleep_deployment(i)
    del obj["metadata"]["annotations"][CENSUS]
    return obj


def _uncensused_text(i: int) -> str:
    return json.dumps(_uncensused(i), separators=(",", ":"))


class LoadedAPI(FakeAPI):
    """FakeAPI with `workloads` Deployments and `objects` watched objects, spread evenly over
    the 50 types and, within a type, over the namespaces its workloads watch."""

    def __init__(self, workloads: int, objects: int) -> None:
        super().__init__(0)
        self.workloads, self.per_type = workloads, objects // TYPES
        self.scopes = max(1, min(SCOPES, workloads // TYPES))
        self.served = 0  # objects and workloads sent, to check that all were
        self._types = {f"/apis/{GROUP}/v1/{kind_of(t)[1]}": t for t in range(TYPES)}
        # Each type in each namespace of its workloads, as the shared watches by namespace list it.
        self._namespaced = {
            f"/apis/{GROUP}/v1/namespaces/zs-bench-{k}/{kind_of(t)[1]}": (t, k)
            for t in range(TYPES)
            for k in range(self.scopes)
        }

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path, params = request.url.path, request.url.params
        if request.method == "GET" and params.get("watch") not in ("true", "1"):
            if path == "/apis/apps/v1/deployments":
                return self._page(params, self.workloads, _uncensused_text)
            t = self._types.get(path)
            if t is not None:
                return self._page(
                    params, self.per_type, lambda n: api_object_text(t, n % self.scopes, n)
                )
            spaced = self._namespaced.get(path)
            if spaced is not None:
                return self._namespace_page(params, *spaced)
        return await super().__call__(request)

    def _namespace_page(self, params: httpx.QueryParams, t: int, k: int) -> httpx.Response:
        """Type `t`'s objects in namespace `k`: the same objects as the whole type's list holds
        there, the m-th of them object k + m x scopes."""
        count = len(range(k, self.per_type, self.scopes))
        scopes = self.scopes
        return self._page(params, count, lambda m: api_object_text(t, k, k + m * scopes))

    def _page(
        self, params: httpx.QueryParams, total: int, make: Callable[[int], str]
    ) -> httpx.Response:
        start = int(params.get("continue") or 0)
        end = min(total, start + int(params.get("limit") or total))
        self.served += end - start
        more = str(end) if end < total else ""
        head = f'{{"kind":"List","metadata":{{"resourceVersion":"1000000","continue":"{more}"}},'
        items = ",".join([make(n) for n in range(start, end)])
        return httpx.Response(200, content=f'{head}"items":[{items}]}}'.encode())


def _peak_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


async def hold(workloads: int, objects: int, limit: float = LIMIT_SECONDS) -> Size:
    """Start a Controller over the loaded API; its size once it holds everything."""
    fake = LoadedAPI(workloads, objects)
    began, cpu = time.monotonic(), time.process_time()
    settings = ControllerSettings(streaming_lists=False, metrics_port=0)
    kube = Kube(
        ClusterAccess(server="https://127.0.0.1:1"),
        ClientLimits(max_connections=settings.max_connections),
        transport=httpx.MockTransport(fake),
    )
    scaler = Controller(kube, settings)
    failures = Failures()
    logging.getLogger("zeroscaler").addHandler(failures)
    run = asyncio.create_task(scaler.run())
    last, held = time.monotonic(), 0
    try:
        while True:
            await asyncio.sleep(0.5)
            # Counted only once the rest says done: a count of 100,000 every half second would
            # be the benchmark's own work, growing with the workloads times the start's length.
            quiet = not len(scaler.queue) and _all_listed(scaler)
            if quiet or time.monotonic() - last > 30:
                held = sum(1 for w in scaler.workloads.values() if w.managed and w.watch.interest)
            if quiet and held == workloads:
                break
            if failures.messages:
                raise RuntimeError(f"the controller failed: {failures.messages[0]}")
            if time.monotonic() - began > limit:
                raise RuntimeError(f"{held} of {workloads} workloads managed after {limit:.0f} s")
            if time.monotonic() - last > 30:
                last = time.monotonic()
                print(f"  {held:,} of {workloads:,} workloads managed", flush=True)
        seconds, cpu = time.monotonic() - began, time.process_time() - cpu
        stored = sum(len(k) for r in scaler.hub.resources if (k := scaler.hub.kept(r)))
        if stored != fake.per_type * TYPES:
            raise RuntimeError(f"{stored} objects stored, not {fake.per_type * TYPES}")
        # The catch-up's end (`Controller._end_catch_up`) collects, freezes and trims once the queue
        # is idle; wait for it rather than measure the heap of the catch-up. Past the stall bound
        # the collector runs again anyway: the catch-up then never ended.
        for _ in range(int(STALL_BOUND * 2)):
            if gc.isenabled():
                break
            await asyncio.sleep(0.5)
        else:
            raise RuntimeError("the start's catch-up never ended")
        if failures.messages:
            raise RuntimeError(f"the controller failed: {failures.messages[0]}")
        return Size(workloads, stored, own_rss_mb(), _peak_mb(), seconds, cpu)
    finally:
        logging.getLogger("zeroscaler").removeHandler(failures)
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)


def _all_listed(scaler: Controller) -> bool:
    watches = [scaler.hub.kept(r) for r in scaler.hub.resources]
    return len(watches) == TYPES and all(w is not None and w.ready.is_set() for w in watches)


# Workloads from 10,000 up: below it fewer workloads watch fewer namespaces (one for each 50), and
# the objects, crowded into those, cost more each; from 10,000 each added workload joins a (type,
# namespace) already watched, so the series varies the workloads alone.
GROWTH_WORKLOADS = (10_000, 20_000, 40_000)  # at GROWTH_AT_OBJECTS objects
GROWTH_OBJECTS = (50_000, 200_000, 800_000)  # at GROWTH_AT_WORKLOADS workloads
GROWTH_AT_OBJECTS = 200_000
GROWTH_AT_WORKLOADS = 10_000
GROWTH_TOLERANCE = 1.25  # the last step's cost per added unit over the first step's
GROWTH_REPEATS = 3  # runs of each size, in rounds; their medians are judged
MANY_OPERATORS = (100_000, 2_000_000)  # beside its baseline, MANY_OPERATORS_BASELINE
MANY_OPERATORS_BASELINE = (10_000, 200_000)


@dataclass(frozen=True)
class Step:
    """From one size of a series to the next: what each workload or object added cost."""

    start: int
    end: int
    cpu_seconds: float  # the start's CPU, per unit added
    resident_bytes: float  # resident once settled, per unit added


def steps(sizes: Sequence[Size], dimension: str) -> list[Step]:
    """The steps of a series of sizes that grow along `dimension` ("workloads" or "objects")."""
    if dimension not in ("workloads", "objects"):
        raise ValueError(f"dimension: {dimension!r}; 'workloads' or 'objects'")
    found = []
    for small, large in itertools.pairwise(sizes):
        units = getattr(large, dimension) - getattr(small, dimension)
        if units <= 0:
            raise ValueError(f"sizes: {dimension} must grow from size to size, not {units:+,}")
        found.append(
            Step(
                getattr(small, dimension),
                getattr(large, dimension),
                (large.cpu_seconds - small.cpu_seconds) / units,
                (large.resident_mb - small.resident_mb) * 2**20 / units,
            )
        )
    return found


def growth_targets(series: dict[str, list[Size]], tolerance: float) -> list[Target]:
    """For each dimension: the last step's CPU and resident per added unit over the first
    step's, within `tolerance` (growth no faster than linear); each step's figures measured."""
    found = []
    for dimension, sizes in series.items():
        unit = dimension[:-1]  # a workload, an object
        walked = steps(sizes, dimension) if len(sizes) >= 3 else []
        for step in walked:
            span = f"{dimension} {step.start:,} to {step.end:,}"
            found.append(
                Target(f"{span}: CPU per {unit} added", step.cpu_seconds * 1e6, None, "µs")
            )
            found.append(
                Target(f"{span}: resident per {unit} added", step.resident_bytes, None, "B")
            )
        for figure in ("cpu_seconds", "resident_bytes"):
            what = "CPU" if figure == "cpu_seconds" else "resident"
            ratio = None
            if walked and getattr(walked[0], figure) > 0:
                ratio = getattr(walked[-1], figure) / getattr(walked[0], figure)
            name = f"{dimension}: {what} per {unit} added, last step / first"
            found.append(Target(name, ratio, tolerance, "x"))
    return found


def growth(
    workloads: Sequence[int], objects: Sequence[int], at: tuple[int, int], repeats: int
) -> tuple[dict[str, list[Size]], list[Size]]:
    """Each size of both series (the one they share once), `repeats` times in rounds, each run
    in a process of its own; each size's figures are the medians of its runs. A step's cost is
    the difference of two sizes' figures, a few seconds of CPU against a machine whose load
    moves one run by more than that; rounds rather than repeats back to back, so that a drift
    in the load reaches every size. Returns the series and every run."""
    at_workloads, at_objects = at
    wanted = sorted({*((w, at_objects) for w in workloads), *((at_workloads, o) for o in objects)})
    runs: dict[tuple[int, int], list[Size]] = {size: [] for size in wanted}
    for round_ in range(1, repeats + 1):
        for w, o in wanted if round_ % 2 else wanted[::-1]:
            print(f"one process, {w:,} workloads over {o:,} objects (run {round_}):", flush=True)
            runs[(w, o)].append(size := measure_one_process(w, o))
            print(
                f"  {size.resident_mb:,.1f} MiB resident ({size.peak_mb:,.1f} at the peak); every "
                f"workload reconciled in {size.seconds:.1f} s, {size.cpu_seconds:.2f} s of CPU",
                flush=True,
            )
    held = {size: _median_size(found) for size, found in runs.items()}
    series = {
        "workloads": [held[(w, at_objects)] for w in sorted(workloads)],
        "objects": [held[(at_workloads, o)] for o in sorted(objects)],
    }
    return series, [size for found in runs.values() for size in found]


def _median_size(runs: Sequence[Size]) -> Size:
    """One size's runs as one: the median of each figure."""
    first = runs[0]
    return Size(
        first.workloads,
        first.objects,
        statistics.median(r.resident_mb for r in runs),
        statistics.median(r.peak_mb for r in runs),
        statistics.median(r.seconds for r in runs),
        statistics.median(r.cpu_seconds for r in runs),
    )


def many_operators() -> dict[str, float]:
    """The 100,000 between two runs of its baseline, 10,000: a run of minutes on a shared machine
    sees its load drift, and a baseline on both sides of it sees the same drift. The baseline's
    figures are the mean of its two runs (its peak, the larger), each run kept beside them."""
    before = one_process_sizes([MANY_OPERATORS_BASELINE])
    results = one_process_sizes([MANY_OPERATORS])
    after = one_process_sizes([MANY_OPERATORS_BASELINE])
    for key, value in before.items():
        both = (value, after[key])
        results[key] = max(both) if key.endswith("_bytes") else sum(both) / 2
        results[f"before_{key}"], results[f"after_{key}"] = both
    return results


def plot(series: dict[str, list[Size]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5), sharey="row")
    fixed = {
        "workloads": f"at {series['workloads'][0].objects:,} objects",
        "objects": f"at {series['objects'][0].workloads:,} workloads",
    }
    for column, (dimension, sizes) in enumerate(series.items()):
        xs = [getattr(s, dimension) for s in sizes]
        for row, (figure, label) in enumerate(
            (
                ("cpu_seconds", "start CPU to every workload reconciled (s)"),
                ("resident_mb", "resident once settled (MiB)"),
            )
        ):
            ax = axes[row][column]
            ys = [getattr(s, figure) for s in sizes]
            ax.plot(xs, ys, "o-", color="#4878a8", label="measured")
            # The first step extended: growth no faster than linear stays on or under it.
            slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
            ax.plot(
                xs,
                [ys[0] + slope * (x - xs[0]) for x in xs],
                "--",
                color="#999999",
                label="the first step's rate",
            )
            ax.xaxis.set_major_locator(ticker.MaxNLocator(5))
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:,.0f}"))
            if row == 1:
                ax.set_xlabel(f"{dimension} ({fixed[dimension]})")
            if column == 0:
                ax.set_ylabel(label, fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle("one controller process: cost against workloads and against objects", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _sizes(text: str) -> list[int]:
    try:
        found = [int(part.replace("_", "")) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: counts separated by commas, as 1000,4000,16000"
        ) from None
    if len(found) < 3 or found != sorted(set(found)) or found[0] < TYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: at least three counts, growing, the first at least {TYPES}"
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("size", nargs="*", type=int, help="W O: hold one size, print it as JSON")
    parser.add_argument(
        "--many-operators", action="store_true", help="issue 50's 100,000 beside 10,000"
    )
    parser.add_argument("--workloads", type=_sizes, default=list(GROWTH_WORKLOADS))
    parser.add_argument("--objects", type=_sizes, default=list(GROWTH_OBJECTS))
    parser.add_argument("--at-objects", type=int, default=GROWTH_AT_OBJECTS)
    parser.add_argument("--at-workloads", type=int, default=GROWTH_AT_WORKLOADS)
    parser.add_argument(
        "--repeats", type=int, default=GROWTH_REPEATS, help="runs of each size (medians judged)"
    )
    args = parser.parse_args(argv)
    if args.size:
        if len(args.size) != 2 or min(args.size) < 1:
            parser.error(f"size: {args.size}; two positive counts, workloads and objects")
        size = asyncio.run(hold(*args.size))
        print(json.dumps(asdict(size)), flush=True)
        return 0
    if args.repeats < 1:
        parser.error(f"--repeats: {args.repeats}; at least 1")
    run = Run()
    if args.many_operators:
        results = many_operators()
        judged = one_process_targets(results)
        saved = save_json("many-operators", run.stamped(results, judged))
    else:
        at = (args.at_workloads, args.at_objects)
        series, runs = growth(args.workloads, args.objects, at, args.repeats)
        judged = growth_targets(series, GROWTH_TOLERANCE)
        data: dict[str, Any] = {d: [asdict(s) for s in sizes] for d, sizes in series.items()}
        data["runs"] = [asdict(s) for s in runs]
        saved = save_json("growth", run.stamped({"tolerance": GROWTH_TOLERANCE, **data}, judged))
        plot(series, RESULTS / "growth.png")
        print(f"wrote {RESULTS / 'growth.png'}")
    print(f"wrote {saved}")
    return 1 if report(judged) else 0


if __name__ == "__main__":
    sys.exit(main())
