"""Benchmark: where the controller's memory goes, and what its housekeeping costs. No cluster.

- the resident size of a fresh interpreter after importing the controller, and after also
  importing the two packages it no longer loads (`kubernetes`, pydantic-settings); the same for
  the webhook and for `zeroscaler-combined`, without and with the certificate renewer;
- the bytes each stored watched object costs: 50,000 metadata-only objects shaped like the API
  server's, shrunk and kept the way the controller's shared watches keep them;
- how long the controller's minute housekeeping stalls the event loop with those objects alive,
  routine and full (the full pass unfreezes and walks every object);
- what a sleep's census costs for one type of 100,000 objects over 200 namespaces: reading only
  the workload's namespace from the store's index, against walking the whole type (as before);
- what one more workload costs the controller's heap, its own state apart from its Deployment
  as stored (`bench/workload_state.py`);
- what an Event waiting to be written holds once its workload has moved on: creating 10,000
  workloads queues 10,000 Sleeping Events behind the scale writes, a peak whose arenas the
  allocator keeps afterwards.
- how big one controller process gets, settled and at its peak, holding 1,000, 10,000 and
  100,000 workloads over 20 watched objects each (`bench/one_process.py`): whether one process
  holds 100,000 within 1 GB, which `docs/scaling.md` takes as the point to shard.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from bench.judge import Run, Target, report
from bench.measures import one_process_sizes, one_process_targets, own_rss_mb
from bench.saved import save_json
from bench.workloads import api_object

OBJECTS = 50_000
CENSUS_OBJECTS = 100_000
CENSUS_NAMESPACES = 200  # as the scale row's 10,000 workloads: 50 a namespace, each type in each

_RSS = "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')][0])"


def import_rss_mb(imports: str) -> float:
    """Resident MB of a new interpreter once `imports` ran (median of three)."""
    runs = [
        int(subprocess.check_output([sys.executable, "-c", f"{imports}\n{_RSS}"], text=True))
        for _ in range(3)
    ]
    return statistics.median(runs) / 1024


def stored_objects(*, writes: bool = True) -> list[Any]:
    """OBJECTS objects of 50 types, kept as the shared watches keep them; `writes=False` drops
    their managedFields."""
    from zeroscaler.cluster.informer import Store, key_of
    from zeroscaler.controller.watches import _shrink

    stores = []
    for t in range(50):
        store = Store()
        for n in range(OBJECTS // 50):
            raw = api_object(t, n % 20, n)
            if not writes:
                del raw["metadata"]["managedFields"]
            obj = _shrink(raw)
            store[key_of(obj)] = obj
        stores.append(store)
    return stores


def measured_stores(*, writes: bool = True) -> tuple[float, list[Any]]:
    """`stored_objects`, with the resident bytes each of them added."""
    import zeroscaler.controller.watches  # noqa: F401  (its import is not the objects' memory)

    gc.collect()
    before = own_rss_mb()
    stores = stored_objects(writes=writes)
    gc.collect()
    return (own_rss_mb() - before) * 1024 * 1024 / OBJECTS, stores


def main() -> None:
    run = Run()
    results: dict[str, float] = {}
    results["import_controller_mb"] = import_rss_mb("import zeroscaler.cli.controller_main")
    results["import_controller_with_old_packages_mb"] = import_rss_mb(
        "import zeroscaler.cli.controller_main, kubernetes.config, pydantic_settings"
    )
    print(
        f"controller imports: {results['import_controller_mb']:.1f} MB resident; with kubernetes "
        f"and pydantic-settings also imported: "
        f"{results['import_controller_with_old_packages_mb']:.1f} MB",
        flush=True,
    )
    # The webhook alone and in one process with the controller; the renewer's certificate code
    # (cryptography) is loaded only by a webhook that renews its own certificate.
    for name, module in (
        ("webhook", "zeroscaler.cli.webhook_main"),
        ("combined", "zeroscaler.cli.combined_main"),
    ):
        results[f"import_{name}_mb"] = import_rss_mb(f"import {module}")
        renewing = f"import {module}, zeroscaler.certs.renewer"
        results[f"import_{name}_renewing_mb"] = import_rss_mb(renewing)
        print(
            f"{name} imports: {results[f'import_{name}_mb']:.1f} MB resident; renewing its "
            f"certificate: {results[f'import_{name}_renewing_mb']:.1f} MB",
            flush=True,
        )

    from zeroscaler.controller.heap import release_free_memory

    results["bytes_per_object"], stores = measured_stores()
    print(f"stored objects: {results['bytes_per_object']:.0f} bytes each ({OBJECTS:,})")
    # In a fresh process: the arenas the objects above left must not hold these.
    bare = "from bench.bench_memory import measured_stores; print(measured_stores(writes=False)[0])"
    out = subprocess.check_output([sys.executable, "-c", bare], text=True)
    results["bytes_per_object_without_writes"] = float(out)
    print(
        f"stored objects without managedFields (as the scale row writes them to etcd): "
        f"{results['bytes_per_object_without_writes']:.0f} bytes each",
        flush=True,
    )

    for label, full in (("full", True), ("routine", False)):
        pauses = []
        for _ in range(5):
            began = time.perf_counter()
            release_free_memory(full=full)
            pauses.append(time.perf_counter() - began)
        results[f"housekeeping_{label}_ms"] = statistics.median(pauses) * 1000
        print(f"housekeeping, {label}: {results[f'housekeeping_{label}_ms']:.2f} ms (median of 5)")
    assert len(stores) == 50  # alive until here
    del stores
    results.update(census_ms())
    results.update(workload_state())
    results.update(waiting_events())
    results.update(one_process_sizes(ONE_PROCESS_SIZES))
    judged = targets(results)
    save_json("memory", run.stamped(results, judged))
    sys.exit(1 if report(judged) else 0)


OWN_STATE_BYTES = 2048.0  # the controller's own state for one more workload


def targets(results: dict[str, float]) -> list[Target]:
    """The controller's own state per workload; one process at each size (the largest within
    1 GiB at its peak, and a start that grows no faster than its workloads past 10,000); the
    rest as measurements. A figure missing from the results fails."""
    own = results.get("workload_own_bytes")
    return [
        Target("a stored watched object", results.get("bytes_per_object"), None, "B"),
        Target("one more workload: the controller's own state", own, OWN_STATE_BYTES, "B"),
        Target("an Event waiting to be written", results.get("waiting_event_bytes"), None, "B"),
        *one_process_targets(results),
    ]


ONE_PROCESS_SIZES = ((1_000, 20_000), (10_000, 200_000), (100_000, 2_000_000))


def workload_state() -> dict[str, float]:
    """What one more workload costs the controller, held by a real Controller over a faked API."""
    from bench.workload_state import per_workload

    growth = per_workload(1_000, 10_000)
    results = {
        "workload_heap_bytes": growth.heap_bytes,
        "workload_object_bytes": growth.object_bytes,
        "workload_own_bytes": growth.own_bytes,
        "workload_start_1000_s": growth.small.seconds,
        "workload_start_10000_s": growth.large.seconds,
    }
    print(
        f"one more workload (between 1,000 and 10,000 held, asleep, reconciled): "
        f"{growth.heap_bytes:.0f} bytes of heap, of which its Deployment as stored "
        f"{growth.object_bytes:.0f} and the controller's own state {growth.own_bytes:.0f} "
        f"(target under 2,048); reconciled from start in {growth.small.seconds:.1f} s and "
        f"{growth.large.seconds:.1f} s"
    )
    return results


def waiting_events(count: int = 10_000) -> dict[str, float]:
    """Heap held by `count` waiting Sleeping Events, one a workload, once each workload has taken
    a newer version of itself; each workload's own copies are counted out."""
    import tracemalloc
    from datetime import UTC, datetime
    from typing import cast

    from bench.workload_state import asleep_deployment
    from bench.workloads import NAMESPACE
    from zeroscaler.api import Kube
    from zeroscaler.cluster.events import EventRecorder
    from zeroscaler.controller.context import Context
    from zeroscaler.controller.reporting import Reporter
    from zeroscaler.controller.workload import Workload
    from zeroscaler.controller.workload_object import WorkloadObject, trim_workload
    from zeroscaler.runtime.clock import LoopClock

    def version(i: int, rv: int) -> WorkloadObject:
        obj = json.loads(json.dumps(asleep_deployment(i)))  # new strings, as each answer brings
        obj["metadata"]["resourceVersion"] = str(rv)
        return trim_workload(obj)

    def held(waiting: bool) -> int:
        # No writer ever runs: every Event stays waiting, as behind a burst of scale writes.
        events = EventRecorder(cast(Kube, None), LoopClock(), "bench")
        reporter = Reporter(
            events, Context(LoopClock(), lambda: True, lambda _: None, lambda work: work.close())
        )
        now = datetime.now(UTC)
        workloads = [
            Workload(("Deployment", NAMESPACE, f"op-{i:05d}"), version(i, 100 + i), now)
            for i in range(count)
        ]
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i, w in enumerate(workloads):
            if waiting:
                reason = "idle for 2s: scaled from 1 to 0 replicas; wakes on a change to "
                reporter.event(
                    w.key, w.obj, "Normal", "Sleeping", f"{reason}Kind{i % 50:02d}.bench.io"
                )
            w.take(version(i, 1_000_000 + i))  # the workload moves on
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert reporter.pending == (count if waiting else 0)
        return grown

    per_event = (held(True) - held(False)) / count
    if per_event <= 0:  # nothing measured: the Events held nothing, or were never kept
        raise SystemExit(f"waiting Events: {per_event:.0f} bytes each, nothing to judge")
    print(f"an Event waiting, its workload moved on: {per_event:.0f} bytes of heap ({count:,})")
    return {"waiting_event_bytes": per_event}


def census_ms() -> dict[str, float]:
    """A census of one workload's namespace in a type of CENSUS_OBJECTS objects: the whole type
    walked, against the namespaces its scope covers read from the store's index (median of 5)."""
    from zeroscaler.cluster.informer import Store, key_of
    from zeroscaler.controller.watches import _shrink
    from zeroscaler.core.activity import Interest
    from zeroscaler.core.census import namespaces_to_read, tally
    from zeroscaler.core.kinds import APIResource

    thing = APIResource(
        "bench.example.com", "v1", "things", "Thing", subresources=frozenset({"status"})
    )
    store = Store()
    for n in range(CENSUS_OBJECTS):
        obj = _shrink(api_object(0, n % CENSUS_NAMESPACES, n))
        store[key_of(obj)] = obj
    interest = Interest(
        watched={("bench.example.com", "Thing"): frozenset({"zs-bench-7"})}, owned={}
    )
    ways: dict[str, Callable[[], Iterable[Any]]] = {
        "census_whole_type_ms": lambda: store.values(),
        "census_by_namespace_ms": lambda: store.in_namespaces(namespaces_to_read(thing, interest)),
    }
    results = {}
    tallies = set()
    for name, objects in ways.items():
        times = []
        for _ in range(5):
            began = time.perf_counter()
            tallies.add(tally(objects(), thing, interest))
            times.append(time.perf_counter() - began)
        results[name] = statistics.median(times) * 1000
    assert len(tallies) == 1, tallies  # both ways count the same objects
    print(
        f"census of one namespace in a type of {CENSUS_OBJECTS:,} objects over "
        f"{CENSUS_NAMESPACES} namespaces: {results['census_whole_type_ms']:.1f} ms walking the "
        f"type, {results['census_by_namespace_ms']:.2f} ms by namespace (median of 5; "
        f"{next(iter(tallies)).count} in scope)"
    )
    return results


if __name__ == "__main__":
    main()
