"""A wake's two writes: the scale write at once, its record after the pause and never before."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from tests.unit.held_events import NOW, HeldRecorder
from zeroscaler.api import Obj
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.context import Context
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.queue import WakeGate
from zeroscaler.controller.reporting import Reporter
from zeroscaler.controller.scaling import (
    RECORD_PAUSE,
    BeforeSleep,
    Outcomes,
    Scaling,
    ScalingShare,
)
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.controller.workload_object import trim_workload
from zeroscaler.core.annotations import STATE
from zeroscaler.runtime.clock import ManualClock

NAME = "op"
PATH = f"/apis/apps/v1/namespaces/ops/deployments/{NAME}"


class Writes:
    """The API as the two writes meet it: each answered, in the order sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Obj]] = []
        self.version = 10

    async def patch(self, path: str, body: Obj, **_: Any) -> Obj:
        self.sent.append((path, body))
        self.version += 1
        meta = {"name": NAME, "namespace": "ops", "resourceVersion": str(self.version)}
        if path.endswith("/scale"):
            return {"metadata": meta, "spec": body["spec"]}
        annotations = {k: v for k, v in body["metadata"]["annotations"].items() if v is not None}
        return {"metadata": {**meta, "annotations": annotations}, "spec": {"replicas": 2}}


def asleep() -> Workload:
    meta = {"name": NAME, "namespace": "ops", "resourceVersion": "10"}
    obj = trim_workload({"metadata": meta, "spec": {"replicas": 0}})
    w = Workload(("Deployment", "ops", NAME), obj, NOW)
    w.idle.activity_at = 0.0
    return w


async def test_a_wake_is_recorded_after_the_pause_that_follows_its_scale_write() -> None:
    writes = Writes()
    clock = ManualClock()
    metrics = Metrics(lambda: True)
    tasks: list[asyncio.Task[None]] = []

    def background(work: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.create_task(work))

    enqueued: list[WorkloadKey] = []
    context = Context(clock, lambda: True, enqueued.append, background)
    outcomes = Outcomes(
        Reporter(HeldRecorder(), context), Accounting(metrics, clock), WakeGate(), metrics
    )
    scaling = Scaling(
        writes,  # type: ignore[arg-type]
        context,
        outcomes,
        BeforeSleep(census=lambda _: {}),
        dry_run=False,
    )
    w = asleep()
    share = ScalingShare(w.key, w, w.scaling, w.idle, w.watch, w.report)
    await scaling.wake(share, 2, "Thing ops/t-1 created", "activity")
    assert writes.sent == [
        (PATH + "/scale", {"metadata": {"resourceVersion": "10"}, "spec": {"replicas": 2}})
    ]
    record = scaling.take_follow_up(w.key)
    assert record is not None
    assert w.scaling.own_wake is not None
    writing = asyncio.create_task(record)
    await asyncio.sleep(RECORD_PAUSE / 2)  # a timer due before the record's: it runs first
    assert len(writes.sent) == 1
    assert not writing.done()
    await writing
    path, body = writes.sent[1]
    assert path == PATH
    assert body["metadata"]["resourceVersion"] == "11"  # the scale write's answer
    assert body["metadata"]["annotations"][STATE] == "awake"
    assert w.scaling.own_wake is None
    assert enqueued == [w.key]
    for task in tasks:
        task.cancel()
