"""The activator's controller side over a real client: what it writes, when it may sleep a backend,
and which wake requests count. The API server is a function (`httpx.MockTransport`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.unit.mock_api import kube_served_by
from zeroscaler.cluster.informer import Informer, WatchEvent
from zeroscaler.controller.activator import Activator, ActivatorSettings
from zeroscaler.controller.context import Context
from zeroscaler.controller.idle_memory import IdleMemory
from zeroscaler.controller.registrations import ServingIndex, trim_registration, trim_service
from zeroscaler.controller.workload import Workload, WorkloadKey, settle_start
from zeroscaler.controller.workload_object import WorkloadObject, trim_workload
from zeroscaler.core.activity import Activity
from zeroscaler.core.annotations import asleep_annotations, read_status
from zeroscaler.core.coverage import (
    PROBE_LABEL,
    PROBE_WEBHOOK,
    parse_activate_path,
    request_key,
)
from zeroscaler.core.links import serving_notices
from zeroscaler.core.wake_path import Surroundings
from zeroscaler.runtime.clock import ManualClock

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
AROUND = Surroundings("zeroscaler", {})
KEY: WorkloadKey = ("Deployment", "ops", "op")
ACTIVATOR = "0-zeroscaler-activator"
OWN = "zeroscaler"
CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


class API:
    """The API server's side: zeroscaler's own configuration, the activator's, the probe."""

    def __init__(self, *, answers: bool = True, existing: dict[str, Any] | None = None) -> None:
        self.answers = answers  # whether the activator answers the probe
        self.existing = existing  # the activator's configuration as a restart finds it
        self.written: list[dict[str, Any]] = []
        self.probes: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path == f"{CONFIGURATIONS}/{OWN}":
            client = {"url": "https://127.0.0.1:8443/mutate", "caBundle": "Q0E="}
            return httpx.Response(200, json={"webhooks": [{"clientConfig": client}]})
        if request.method == "GET" and path == f"{CONFIGURATIONS}/{ACTIVATOR}":
            return httpx.Response(200, json=self.existing or {"metadata": {"name": ACTIVATOR}})
        if request.method == "PATCH" and path == f"{CONFIGURATIONS}/{ACTIVATOR}":
            self.written.append(json.loads(request.content))
            version = str(len(self.written))
            return httpx.Response(200, json={"metadata": {"resourceVersion": version}})
        if request.method == "POST" and path.endswith("/leases"):
            assert request.url.params["dryRun"] == "All"
            lease = json.loads(request.content)
            self.probes.append(lease)
            token = lease["metadata"]["labels"][PROBE_LABEL]
            headers = {"Warning": f'299 - "zeroscaler activator probe {token}"'}
            return httpx.Response(201, json=lease, headers=headers if self.answers else {})
        return httpx.Response(404, json={"reason": "NotFound", "message": path})


def backend(asleep: bool) -> Workload:
    meta: dict[str, Any] = {
        "name": "op",
        "namespace": "ops",
        "resourceVersion": "1",
        "annotations": asleep_annotations(2, NOW, NOW) if asleep else {},
    }
    obj = {"metadata": meta, "spec": {"replicas": 0 if asleep else 2, "template": {
        "metadata": {"labels": {"app": "op"}}}}}  # fmt: skip
    w = Workload(KEY, trim_workload(obj), NOW)
    w.managed = True
    w.status, _ = read_status(w.annotations)  # as a reconcile reads it
    return w


def webhooks(**fields: Any) -> dict[str, Any]:
    webhook = {
        "name": "check.example.com",
        "clientConfig": {"service": {"namespace": "ops", "name": "op-webhook"}},
        "rules": [{"operations": ["CREATE"], "resources": ["widgets"]}],
        **fields,
    }
    raw = {"metadata": {"name": "op-hooks"}, "webhooks": [webhook]}
    return trim_registration("ValidatingWebhookConfiguration")(raw)


def _no_tasks(work: Coroutine[Any, Any, None]) -> None:
    """The activator runs nothing in the background here."""
    work.close()


class Rig:
    """An activator over a serving index that knows one backend and its webhook."""

    def __init__(
        self,
        api: API,
        w: Workload,
        *,
        leader: bool = True,
        hooks: dict[str, Any] | None = None,
        fail_open_allowed: bool = False,
    ) -> None:
        self.fail_open_allowed = fail_open_allowed
        self.api = api
        self.workloads = {KEY: w}
        self.enqueued: list[WorkloadKey] = []
        self.activity: list[tuple[WorkloadKey, str]] = []
        kube = kube_served_by(api)
        crds = Informer(kube, "/crds")
        self.clock = ManualClock(NOW)
        context = Context(self.clock, lambda: leader, self.enqueued.append, _no_tasks)
        self.index = ServingIndex(kube, context, crds, self.workloads, activation=self._activation)
        for informer in [*self.index.informers, crds]:
            informer.synced.set()
        service = {"metadata": {"name": "op-webhook", "namespace": "ops"},
                   "spec": {"selector": {"app": "op"}}}  # fmt: skip
        self.index.on_service(WatchEvent("ADDED", trim_service(service), initial=True))
        self.index.on_registration(WatchEvent("ADDED", hooks or webhooks(), initial=True))
        settings = ActivatorSettings(
            configuration=ACTIVATOR,
            webhook_configuration=OWN,
            namespace="zeroscaler",
            requests="requests",
            timeout=10,
            probe_interval=10.0,
        )
        self.activator = Activator(
            kube, context, self.index, self.workloads, settings, self._on_activity
        )

    def _activation(self, key: WorkloadKey, obj: WorkloadObject, hooks: Any) -> str | None:
        allowed = self.fail_open_allowed
        started_in = self.workloads[key].idle.started_in
        return self.activator.activation(
            key, obj, started_in, hooks, AROUND, fail_open_allowed=allowed
        )

    def _on_activity(
        self, key: WorkloadKey, _: IdleMemory, __: bool, found: Activity, ___: datetime
    ) -> None:
        self.activity.append((key, found.reason))


async def test_a_backend_is_covered_and_the_probe_answered_before_it_may_sleep() -> None:
    api = API()
    rig = Rig(api, backend(asleep=False))
    w = rig.workloads[KEY]
    served = rig.activator.serving(w.key, w.obj)
    assert served is not None
    assert served.unanswered is None  # the activator may answer: it may sleep
    assert await rig.activator.cover(w.key, w.obj)
    written = api.written[-1]["webhooks"]
    assert written[0]["name"] == PROBE_WEBHOOK
    assert len(written) == 2  # the probe, and the copy of its one webhook
    assert written[1]["rules"] == [{"operations": ["CREATE"], "resources": ["widgets"]}]
    # The probe named the content just written.
    token = written[0]["objectSelector"]["matchLabels"][PROBE_LABEL]
    assert api.probes[-1]["metadata"]["labels"][PROBE_LABEL] == token
    # The sleep is written (here: called off); from now its state says whether it is covered.
    rig.activator.covered_done(w.key)
    await rig.activator.sync()
    assert [h["name"] for h in api.written[-1]["webhooks"]] == [PROBE_WEBHOOK]


async def test_an_unanswered_probe_calls_the_sleep_off_and_wakes_what_it_covers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("zeroscaler.controller.activator.PROBE_PAUSE", 0.0)
    api = API(answers=False)
    rig = Rig(api, backend(asleep=True))
    w = rig.workloads[KEY]
    rig.activator.serving(w.key, w.obj)
    assert not await rig.activator.cover(w.key, w.obj)
    assert rig.activator.state.health == "failed"
    assert KEY in rig.enqueued  # looked at again: an asleep backend is woken
    served = rig.activator.serving(w.key, w.obj)
    assert served is not None
    assert served.keeps_awake
    assert served.unanswered is not None
    assert "cannot serve" in served.unanswered


async def _until(done: Callable[[], bool]) -> bool:
    """Whether `done` holds within a thousand turns of the loop."""
    for _ in range(1000):
        if done():
            return True
        await asyncio.sleep(0)
    return done()


async def test_the_probe_comes_again_once_the_clock_it_is_given_says_the_interval_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = API()
    rig = Rig(api, backend(asleep=True))
    rig.activator.serving(KEY, rig.workloads[KEY].obj)  # covered: the run loop probes while it is
    syncs = [0]
    sync = rig.activator.sync

    async def counted() -> str:
        syncs[0] += 1
        return await sync()

    monkeypatch.setattr(rig.activator, "sync", counted)
    running = asyncio.create_task(rig.activator.run())
    try:
        assert await _until(lambda: len(api.probes) == 1)
        rig.activator.changed()
        assert await _until(lambda: syncs[0] == 2)
        rig.activator.changed()  # the second turn is over once the third syncs
        assert await _until(lambda: syncs[0] == 3)
        assert len(api.probes) == 1  # its clock has not moved: no new probe
        rig.clock.advance(10.0)
        rig.activator.changed()
        assert await _until(lambda: len(api.probes) == 2)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def test_only_the_leader_writes_the_configuration() -> None:
    api = API()
    rig = Rig(api, backend(asleep=True), leader=False)
    await rig.activator.sync()
    assert api.written == []


async def test_an_asleep_backend_stays_covered_and_is_written_once() -> None:
    api = API()
    rig = Rig(api, backend(asleep=True))
    rig.activator.serving(KEY, rig.workloads[KEY].obj)
    await rig.activator.sync()
    await rig.activator.sync()
    assert len(api.written) == 1
    assert len(api.written[0]["webhooks"]) == 2


def requests(data: dict[str, str], *, initial: bool = False) -> WatchEvent:
    return WatchEvent("ADDED" if initial else "MODIFIED", {"data": data}, initial=initial)


def test_a_changed_wake_request_is_activity_and_an_old_one_is_not() -> None:
    rig = Rig(API(), backend(asleep=True))
    key = request_key(*KEY)
    before = json.dumps({"at": "2026-01-01T11:00:00Z", "what": "CREATE widgets ops/a"})
    after = json.dumps(
        {"at": (NOW + timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ"), "what": "CREATE b"}
    )
    rig.activator.on_requests(requests({key: before}, initial=True))
    assert rig.activity == []  # asked before its sleep: not news after a restart
    rig.activator.on_requests(requests({key: after}, initial=True))
    assert rig.activity == [(KEY, "admission request: CREATE b")]
    rig.activator.on_requests(requests({key: after}))
    assert len(rig.activity) == 1  # the same request seen again
    rig.activator.on_requests(requests({key: before, "pod_ops_x": after, "junk": "{"}))
    assert len(rig.activity) == 2  # changed (live): activity, whatever its time says


def _covered_path(written: dict[str, Any]) -> str:
    return str(written["webhooks"][1]["clientConfig"]["url"]).split(":8443", 1)[1]


async def test_a_covered_path_holds_a_token_kept_across_rewrites_and_leaders() -> None:
    api = API()
    rig = Rig(api, backend(asleep=True))
    rig.activator.serving(KEY, rig.workloads[KEY].obj)
    await rig.activator.sync()
    path = _covered_path(api.written[-1])
    target = parse_activate_path(path)
    assert target is not None
    assert target.key == KEY
    assert len(target.token) >= 24
    # Another backend's copy, or a rewrite for any reason, keeps the path the API server calls.
    someone = {"metadata": {"name": ACTIVATOR, "resourceVersion": "99"}}
    rig.activator.on_configuration(WatchEvent("MODIFIED", someone))  # rewritten by someone else
    await rig.activator.sync()
    assert len(api.written) == 2
    assert _covered_path(api.written[-1]) == path
    # A new leader finds the paths in the configuration and keeps them too.
    again = Rig(API(existing=api.written[-1]), backend(asleep=True))
    again.activator.serving(KEY, again.workloads[KEY].obj)
    await again.activator.sync()
    assert _covered_path(again.api.written[-1]) == path
    # Elsewhere, a new token.
    other = Rig(API(), backend(asleep=True))
    other.activator.serving(KEY, other.workloads[KEY].obj)
    await other.activator.sync()
    assert _covered_path(other.api.written[-1]) != path


def test_a_wake_request_for_a_backend_not_covered_now_is_not_activity() -> None:
    rig = Rig(API(), backend(asleep=False))  # awake and not going to sleep: not covered
    after = json.dumps({"at": "2026-01-01T12:00:05Z", "what": "CREATE widgets ops/a"})
    rig.activator.on_requests(requests({request_key(*KEY): after}))
    assert rig.activity == []


def test_the_words_of_a_wake_request_are_cut_to_safe_ones_in_its_event() -> None:
    rig = Rig(API(), backend(asleep=True))
    forged = json.dumps({"at": "2026-01-01T12:00:05Z", "what": "x\u001b[2J" + "y" * 400})
    rig.activator.on_requests(requests({request_key(*KEY): forged}))
    [(_, reason)] = rig.activity
    assert reason.startswith("admission request: x?[2J")
    assert len(reason) <= len("admission request: ") + 300


EVERY_POD = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
              "resources": ["pods"]}]  # fmt: skip


def test_a_backend_whose_own_webhook_covers_its_pods_is_never_covered_and_stays_awake() -> None:
    rig = Rig(API(), backend(asleep=False), hooks=webhooks(rules=EVERY_POD))
    served = rig.activator.serving(KEY, rig.workloads[KEY].obj)
    assert served is not None
    assert served.keeps_awake
    assert served.unanswered == (
        "asleep, it could not wake: ValidatingWebhookConfiguration op-hooks, webhook "
        'check.example.com: its rule CREATE pods in groups "" covers the pods of ops/op'
    )
    [(reason, message)] = serving_notices(served)
    assert reason == "BacksWebhook"
    assert "could not wake" in message


def test_a_fail_open_backend_stays_awake_unless_policy_lets_it_sleep() -> None:
    fail_open = webhooks(failurePolicy="Ignore")
    awake = backend(asleep=False)
    served = Rig(API(), awake, hooks=fail_open).activator.serving(awake.key, awake.obj)
    assert served is not None
    assert served.unanswered is not None
    assert "failurePolicy Ignore" in served.unanswered
    allowed = Rig(API(), backend(asleep=False), hooks=fail_open, fail_open_allowed=True)
    served = allowed.activator.serving(KEY, allowed.workloads[KEY].obj)
    assert served is not None
    assert served.unanswered is None


def test_a_backend_that_took_longer_to_start_than_a_request_is_held_stays_awake() -> None:
    rig = Rig(API(), backend(asleep=False))
    w = rig.workloads[KEY]
    w.idle.started_in = 8.0  # within the 9 s a request is held (timeout 10)
    served = rig.activator.serving(w.key, w.obj)
    assert served is not None
    assert served.unanswered is None
    w.idle.started_in = 12.0
    served = rig.activator.serving(w.key, w.obj)
    assert served is not None
    assert served.unanswered == (
        "its last start took 12s from its wake to Ready, longer than the 9s the activator holds "
        "a request it covers"
    )


def test_the_time_from_a_wake_to_ready_is_remembered_once_it_is_ready() -> None:
    w = backend(asleep=False)
    w.idle.starting, w.idle.woken_at = True, NOW
    w.obj = replace(w.obj, has_status=True, ready_replicas=1, observed_generation=1)
    assert not settle_start(w, NOW + timedelta(seconds=3))  # not Ready yet
    assert w.idle.started_in is None
    w.obj = replace(w.obj, has_status=True, ready_replicas=2, observed_generation=1)
    assert settle_start(w, NOW + timedelta(seconds=7))
    assert w.idle.started_in == 7.0
    assert w.idle.woken_at is None
