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
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import httpx

from bench.measures import Size, own_rss_mb
from bench.workload_state import Failures, FakeAPI, asleep_deployment
from bench.workloads import GROUP, SCOPES, TYPES, api_object_text, kind_of
from zeroscaler.api import Kube
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
        max_connections=settings.max_connections,
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


def main() -> None:
    workloads, objects = int(sys.argv[1]), int(sys.argv[2])
    size = asyncio.run(hold(workloads, objects))
    print(json.dumps(asdict(size)), flush=True)


if __name__ == "__main__":
    main()
