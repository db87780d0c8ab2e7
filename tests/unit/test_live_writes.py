"""Scaling's writes run across awaits and read the workload through the record as it is when
their turn comes (`LiveWorkload`), not a copy made when they were decided: a sleep sees a newer
version the watch brought meanwhile, and a workload found gone is marked so on the record."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tests.unit.held_events import NOW, HeldRecorder
from zeroscaler.api import NotFound, Obj, Withdrawn
from zeroscaler.controller.accounting import Accounting
from zeroscaler.controller.context import Context
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.queue import WakeGate
from zeroscaler.controller.reporting import Reporter
from zeroscaler.controller.scaling import BeforeSleep, FollowUp, Outcomes, Scaling, ScalingShare
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.controller.workload_object import trim_workload
from zeroscaler.core.annotations import STATE
from zeroscaler.core.decision import Decision
from zeroscaler.runtime.clock import ManualClock

NAME = "op"
PATH = f"/apis/apps/v1/namespaces/ops/deployments/{NAME}"
SLEEP = Decision("sleep", replicas=2, reason="idle for 10m")


class Api:
    """Each patch sent unless its `unless` holds when it is made; or every one answered 404."""

    def __init__(self, *, gone: bool = False) -> None:
        self.sent: list[tuple[str, Obj]] = []
        self.gone = gone

    async def patch(
        self, path: str, body: Obj, *, unless: Callable[[], bool] | None = None, **_: Any
    ) -> Obj:
        if self.gone:
            raise NotFound(404, "NotFound", 'deployments.apps "op" not found')
        if unless is not None and unless():
            raise Withdrawn()
        self.sent.append((path, body))
        meta = {"name": NAME, "namespace": "ops", "resourceVersion": "20"}
        annotations = {k: v for k, v in body["metadata"]["annotations"].items() if v is not None}
        return {"metadata": {**meta, "annotations": annotations}, "spec": body.get("spec", {})}


def awake() -> Workload:
    meta = {"name": NAME, "namespace": "ops", "resourceVersion": "10"}
    obj = trim_workload({"metadata": meta, "spec": {"replicas": 2}})
    return Workload(("Deployment", "ops", NAME), obj, NOW)


def scaling_over(api: Api, enqueued: list[WorkloadKey]) -> Scaling:
    clock = ManualClock()
    metrics = Metrics(lambda: True)
    context = Context(clock, lambda: True, enqueued.append, lambda work: work.close())
    outcomes = Outcomes(
        Reporter(HeldRecorder(), context), Accounting(metrics, clock), WakeGate(), metrics
    )
    return Scaling(
        api,  # type: ignore[arg-type]
        context,
        outcomes,
        BeforeSleep(census=lambda _: {}),
        dry_run=False,
    )


def share(w: Workload) -> ScalingShare:
    return ScalingShare(w.key, w, w.scaling, w.idle, w.watch, w.report)


async def decided_sleep(api: Api, enqueued: list[WorkloadKey]) -> tuple[Workload, FollowUp]:
    """An awake workload whose sleep is decided: the sleep's write, left to run off the worker."""
    scaling = scaling_over(api, enqueued)
    w = awake()
    await scaling.act(share(w), SLEEP, NOW)
    sleep = scaling.take_follow_up(w.key)
    assert sleep is not None
    return w, sleep


async def test_a_sleep_is_sent_on_the_version_it_was_decided_on_when_nothing_changed() -> None:
    api = Api()
    w, sleep = await decided_sleep(api, [])
    await sleep
    [(path, body)] = api.sent
    assert path == PATH
    assert body["metadata"]["resourceVersion"] == "10"
    assert body["metadata"]["annotations"][STATE] == "asleep"
    assert w.resource_version == "20"  # the answer, handed back to the record
    assert w.status.state == "asleep"


async def test_a_sleep_is_called_off_by_a_version_seen_while_it_waited_its_turn() -> None:
    api = Api()
    enqueued: list[WorkloadKey] = []
    w, sleep = await decided_sleep(api, enqueued)
    w.obj = dataclasses.replace(w.obj, resource_version="11")  # as the change feed keeps it
    await sleep
    assert api.sent == []
    assert enqueued == [w.key]  # decided again on the version now held


async def test_a_wake_that_finds_the_workload_gone_marks_the_record_deleted() -> None:
    api = Api(gone=True)
    enqueued: list[WorkloadKey] = []
    scaling = scaling_over(api, enqueued)
    w = awake()
    w.obj = dataclasses.replace(w.obj, replicas=0)
    await scaling.act(share(w), Decision("wake", replicas=2, reason="Thing ops/t-1"), NOW)
    assert w.deleted
    assert enqueued == [w.key]
