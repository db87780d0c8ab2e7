"""Events waiting to be written join newer ones of the same workload; access reviews are shared."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

import httpx

from tests.unit.held_events import NOW, HeldRecorder, workload
from tests.unit.mock_api import kube_served_by
from zeroscaler.api import Priority
from zeroscaler.controller.context import Context, Watching
from zeroscaler.controller.permissions import AccessReviews
from zeroscaler.controller.reporting import Reporter, joined_message
from zeroscaler.controller.subscription import Subscriptions
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.controller.workload_object import WorkloadObject, trim_workload
from zeroscaler.core.annotations import WorkloadConfig
from zeroscaler.core.inference import RBACSnapshot
from zeroscaler.core.kinds import APIResource
from zeroscaler.runtime.clock import ManualClock


async def test_events_waiting_to_be_written_join_the_newest_of_their_kind() -> None:
    recorder = HeldRecorder()
    tasks: list[asyncio.Task[None]] = []

    def background(work: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.create_task(work))

    reporter = Reporter(
        recorder, Context(ManualClock(), lambda: True, lambda _: None, background), slots=1
    )
    a, b = workload("a"), workload("b")
    reporter.event(a.key, a.obj, "Normal", "Woken", "o-1 created")
    await asyncio.sleep(0)  # the one writer takes it and waits
    reporter.event(a.key, a.obj, "Normal", "Woken", "o-2 created")
    reporter.event(b.key, b.obj, "Normal", "Woken", "o-2 created")
    reporter.event(a.key, a.obj, "Normal", "Sleeping", "idle")
    reporter.event(a.key, a.obj, "Normal", "Woken", "o-3 created")
    assert reporter.pending == 3
    recorder.release.set()
    await asyncio.gather(*tasks)
    assert reporter.pending == 0
    back = Priority.BACKGROUND
    assert recorder.written == [
        ("a", "Woken", "o-1 created", 1, back),
        ("a", "Woken", "o-3 created (the latest of 2)", 2, back),
        ("b", "Woken", "o-2 created", 1, back),
        ("a", "Sleeping", "idle", 1, back),
    ]


async def test_two_warnings_of_one_reason_waiting_together_are_two_events() -> None:
    recorder = HeldRecorder()
    tasks: list[asyncio.Task[None]] = []

    def background(work: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.create_task(work))

    reporter = Reporter(
        recorder, Context(ManualClock(), lambda: True, lambda _: None, background), slots=1
    )
    a = workload("a")
    reporter.event(a.key, a.obj, "Normal", "Woken", "o-1 created")
    await asyncio.sleep(0)  # the one writer takes it and waits
    first = ("BacksWebhook", "serves ValidatingWebhookConfiguration widgets")
    second = ("BacksWebhook", "serves MutatingWebhookConfiguration widgets")
    reporter.warn(a.key, a.obj, a.report, [first, second])
    reporter.warn(a.key, a.obj, a.report, [first, second])  # still held: said once
    assert reporter.pending == 2
    recorder.release.set()
    await asyncio.gather(*tasks)
    back = Priority.BACKGROUND
    assert recorder.written == [
        ("a", "Woken", "o-1 created", 1, back),
        ("a", "BacksWebhook", first[1], 1, back),
        ("a", "BacksWebhook", second[1], 1, back),
    ]


class _Tracked(dict[str, Any]):
    """A mapping a weak reference can follow, to see whether anything still holds it."""


async def test_a_waiting_event_holds_what_it_names_of_the_workload_never_its_object() -> None:
    recorder = HeldRecorder()
    tasks: list[asyncio.Task[None]] = []
    background = lambda c: tasks.append(asyncio.create_task(c))  # noqa: E731
    reporter = Reporter(recorder, Context(ManualClock(), lambda: True, lambda _: None, background))
    w = workload("a")
    meta = {"name": "a", "namespace": "ops", "uid": "u-1", "resourceVersion": "7"}
    labels, annotations = _Tracked({"app": "a"}), _Tracked({"big": "x" * 4096})
    w.obj = replace(trim_workload({"metadata": meta}), labels=labels, annotations=annotations)
    held = [weakref.ref(labels), weakref.ref(annotations)]
    del labels, annotations
    reporter.event(w.key, w.obj, "Normal", "Sleeping", "idle")
    w.obj = trim_workload({"metadata": {**meta, "resourceVersion": "9"}})  # it moves on
    gc.collect()
    assert [ref() for ref in held] == [None, None]
    reporter.event(w.key, w.obj, "Normal", "Sleeping", "idle again")  # joins the waiting one
    recorder.release.set()
    await asyncio.gather(*tasks)
    assert recorder.involved == [
        {"metadata": {"namespace": "ops", "name": "a", "uid": "u-1", "resourceVersion": "9"}}
    ]
    assert recorder.written[0][1:4] == ("Sleeping", "idle again (the latest of 2)", 2)


def test_a_joined_message_says_how_many_it_stands_for() -> None:
    assert joined_message("idle for 5s", 1) == "idle for 5s"
    assert joined_message("idle for 5s", 3) == "idle for 5s (the latest of 3)"


class Reviews:
    """An API server that allows every access review, once `release` is set, counting them."""

    def __init__(self) -> None:
        self.asked = 0
        self.release = asyncio.Event()
        self.kube = kube_served_by(self._answer, connections=16)

    async def _answer(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("accessreviews"), request.url.path
        self.asked += 1
        await self.release.wait()
        return httpx.Response(201, json={"status": {"allowed": True}})


def clock() -> ManualClock:
    return ManualClock(NOW, 100.0)


CRD = APIResource("example.com", "v1", "widgets", "Widget", True, frozenset({"watch", "list"}))


async def test_workloads_asking_the_same_review_at_once_share_one_request() -> None:
    server = Reviews()
    reviews = AccessReviews(server.kube, ttl=60.0, clock=clock())
    asks = [reviews.may_watch("ops", "default", CRD, "ops") for _ in range(5)]
    asks += [reviews.may_watch_everywhere(CRD) for _ in range(5)]
    tasks = [asyncio.ensure_future(ask) for ask in asks]
    await asyncio.sleep(0)
    tasks[0].cancel()  # the first asker gives up: the others still get the answer
    server.release.set()
    answers = await asyncio.gather(*tasks[1:])
    cached = await reviews.may_watch("ops", "default", CRD, "ops")
    assert answers == [True] * 9
    assert cached
    assert server.asked == 3  # one SubjectAccessReview; list and watch for the controller itself


async def test_a_reconcile_takes_an_aged_answer_for_one_more_lifetime_never_a_stale_one() -> None:
    server = Reviews()
    server.release.set()
    moving = clock()
    reviews = AccessReviews(server.kube, ttl=60.0, clock=moving)
    asked = []
    await reviews.may_watch_everywhere(CRD)  # list and watch: two reviews
    await reviews.answer("ops", "op", CRD, "ops")
    asked.append(server.asked)
    moving.advance(90)  # aged, within a second lifetime: the reconcile's resolution asks nothing
    await reviews.may_watch_everywhere(CRD, fresh=False)
    await reviews.answer("ops", "op", CRD, "ops", fresh=False)
    asked.append(server.asked)
    await reviews.answer("ops", "op", CRD, "ops")  # asked again off the reconcile
    asked.append(server.asked)
    moving.advance(130)  # past a second lifetime: too old even for a reconcile
    await reviews.may_watch_everywhere(CRD, fresh=False)
    asked.append(server.asked)
    assert asked == [3, 3, 4, 6]


def _watch_widgets_in(namespace: str) -> RBACSnapshot:
    rule = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["watch"]}
    return RBACSnapshot.from_objects(
        [
            {"kind": "ClusterRole", "metadata": {"name": "w"}, "rules": [rule]},
            {
                "kind": "RoleBinding",
                "metadata": {"name": "w", "namespace": namespace},
                "roleRef": {"kind": "ClusterRole", "name": "w"},
                "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}],
            },
        ]
    )


async def test_what_rbac_grants_is_answered_without_a_review_and_the_rest_is_asked() -> None:
    snapshot: list[RBACSnapshot | None] = [None]
    sources: list[str] = []
    server = Reviews()
    server.release.set()
    reviews = AccessReviews(
        server.kube, ttl=60.0, clock=clock(), rbac=lambda: snapshot[0], on_answer=sources.append
    )
    answers = [await reviews.answer("ops", "op", CRD, "ops")]  # RBAC not listed yet
    snapshot[0] = _watch_widgets_in("ops")
    answers.append(await reviews.answer("ops", "op", CRD, "ops"))
    answers.append(await reviews.answer("ops", "op", CRD, "other"))  # another's to allow
    snapshot[0] = _watch_widgets_in("elsewhere")  # revoked here: the remembered review
    answers.append(await reviews.answer("ops", "op", CRD, "ops"))
    assert server.asked == 2
    assert answers == [(True, False), (True, True), (True, False), (True, False)]
    assert sources == ["review", "rbac", "review", "cache"]


class _Cluster:
    discovery_generation = 0
    rbac_generation = 0


async def test_a_workload_rbac_no_longer_grants_what_it_did_looks_again_afresh() -> None:
    snapshot = [_watch_widgets_in("ops")]
    reviews = AccessReviews(Reviews().kube, ttl=60.0, clock=clock(), rbac=lambda: snapshot[0])
    subs = Subscriptions(
        Context(clock(), lambda: True, lambda _: None, lambda c: c.close()),
        Watching(
            None,  # type: ignore[arg-type]  # no watches are held here
            reviews,
            _Cluster(),  # type: ignore[arg-type]
        ),
        lambda *_: None,
    )
    template = {"spec": {"serviceAccountName": "op"}}
    obj = {"metadata": {"name": "x"}, "spec": {"replicas": 0, "template": template}}
    granted = Workload(("Deployment", "ops", "x"), trim_workload(obj), NOW)
    other = Workload(
        ("Deployment", "ops", "y"), trim_workload({**obj, "metadata": {"name": "y"}}), NOW
    )
    workloads = {w.key: w for w in (granted, other)}
    assert await subs._may_watch((granted.key, granted.service_account), CRD, "ops", [])
    config = WorkloadConfig()
    before = subs._signature(granted.key, granted.obj, granted.watch, config)

    def object_of(key: WorkloadKey) -> WorkloadObject | None:
        return workloads[key].obj if key in workloads else None

    assert subs.revoke(object_of) == []  # RBAC unchanged
    snapshot[0] = _watch_widgets_in("elsewhere")
    assert subs.revoke(object_of) == [granted.key]  # not `other`, which RBAC granted nothing
    assert subs._signature(granted.key, granted.obj, granted.watch, config) != before
