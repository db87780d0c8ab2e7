"""A start's warm watches: listed before any workload subscribes, delivering to no one until one
does, and a change to them hurries the first reconcile of the workloads that name them there."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any, cast

import httpx
import pytest

from tests.unit.mock_api import kube_served_by
from zeroscaler.api import Obj
from zeroscaler.cluster.informer import WatchEvent
from zeroscaler.controller.changes import ChangeFeed, Followers, Lookups
from zeroscaler.controller.context import Context, Watching
from zeroscaler.controller.metrics import Metrics
from zeroscaler.controller.permissions import AccessReviews
from zeroscaler.controller.subscription import Subscriptions
from zeroscaler.controller.warming import Warming
from zeroscaler.controller.watches import Listeners, WatchHub
from zeroscaler.controller.workload import Workload, WorkloadKey
from zeroscaler.controller.workload_object import trim_workload
from zeroscaler.core.activity import Activity, Interest, shrink
from zeroscaler.core.annotations import read_status
from zeroscaler.core.census import tally
from zeroscaler.core.early_watches import Named, named_types
from zeroscaler.core.kinds import APIResource, Discovery
from zeroscaler.runtime.clock import ManualClock

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
VERBS = frozenset({"list", "watch"})
WIDGET = APIResource("example.com", "v1", "widgets", "Widget", verbs=VERBS)
GADGET = APIResource("example.com", "v1", "gadgets", "Gadget", verbs=VERBS)
SECRET = APIResource("example.com", "v1", "secrets", "Secret", verbs=VERBS)  # not ours to watch
NODE = APIResource("", "v1", "nodes", "Node", namespaced=False, verbs=VERBS)
GETONLY = APIResource("example.com", "v1", "reports", "Report", verbs=frozenset({"get"}))
DISCOVERY = Discovery([WIDGET, GADGET, SECRET, NODE, GETONLY])


def notes(kinds: str, **more: str) -> dict[str, str]:
    return {"zeroscaler.io/idle-timeout": "5m", "zeroscaler.io/watched-kinds": kinds, **more}


def test_the_types_named_are_those_served_and_watchable() -> None:
    named = named_types(
        notes(
            "Widget.example.com, Missing.example.com, Report.example.com",
            **{"zeroscaler.io/owned-kinds": "Gadget.example.com, Widget.example.com"},
            **{"zeroscaler.io/watch-namespaces": "ops, dev"},
        ),
        DISCOVERY,
    )
    assert named == Named((WIDGET, GADGET), frozenset({"ops", "dev"}), listed=True)
    everywhere = notes("Widget.example.com", **{"zeroscaler.io/watch-namespaces": "*"})
    assert named_types(everywhere, DISCOVERY) == Named((WIDGET,), None, listed=True)
    unlisted = named_types(notes("Widget.example.com"), DISCOVERY)  # where RBAC will say
    assert (unlisted.namespaces, unlisted.listed) == (None, False)
    opted_out = notes("Widget.example.com", **{"zeroscaler.io/enabled": "false"})
    assert named_types(opted_out, DISCOVERY) == Named()
    no_timeout = {"zeroscaler.io/watched-kinds": "Widget.example.com"}
    assert named_types(no_timeout, DISCOVERY) == Named()
    assert named_types({"zeroscaler.io/idle-timeout": "5m"}, DISCOVERY) == Named()  # from RBAC


class Api:
    """Allows the controller every type but secrets; lists one widget in `ops`; watches hang."""

    def __init__(self) -> None:
        self.kube = kube_served_by(self._answer, connections=16)
        self.listed: list[str] = []
        self.widgets: list[Obj] = [
            {"metadata": {"name": "w", "namespace": "ops", "resourceVersion": "5"}}
        ]

    async def _answer(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("selfsubjectaccessreviews"):
            review = json.loads(request.content)
            allowed = review["spec"]["resourceAttributes"]["resource"] != "secrets"
            return httpx.Response(201, json={"status": {"allowed": allowed}})
        if request.url.params.get("watch"):
            await asyncio.Event().wait()  # nothing changes: until the test closes the hub
        self.listed.append(path)
        return httpx.Response(
            200,
            json={
                "items": self.widgets if "widgets" in path else [],
                "metadata": {"resourceVersion": "9"},
            },
        )


class Namespaces:
    def __init__(self) -> None:
        self.synced = asyncio.Event()


class Cluster:
    def __init__(self) -> None:
        self.discovered = asyncio.Event()
        self.discovery = DISCOVERY
        self.namespaces = Namespaces()

    def list(self) -> None:
        """Discovery answered and the namespaces listed."""
        self.discovered.set()
        self.namespaces.synced.set()


def workload(name: str, namespace: str, notes: dict[str, str]) -> Workload:
    meta = {"name": name, "namespace": namespace, "annotations": notes}
    obj = trim_workload({"metadata": meta, "spec": {"replicas": 0}})
    return Workload(("Deployment", namespace, name), obj, last_activity=NOW)


class Start:
    """A start's parts over one hub; activity the feed finds is only listed in `noted`, and what
    the subscriptions find in `found` (the feed tells them of a list only when `followed`)."""

    def __init__(self, *, followed: bool = False) -> None:
        self.api = Api()
        self.noted: list[tuple[WorkloadKey, Activity]] = []
        self.found: list[str] = []
        listeners: Listeners[WorkloadKey] = Listeners(
            lambda r, e: self.feed.on_object(r, e),
            lambda r, where: self.feed.on_synced(r, where),
            on_served=lambda r, kept, key, where: self.feed.on_served(r, kept, key, where),
            on_listed=lambda r, count: self.feed.on_listed(r, count),
        )
        self.hub: WatchHub[WorkloadKey] = WatchHub(self.api.kube, listeners)
        self.workloads: dict[WorkloadKey, Workload] = {}
        self.enqueued: list[WorkloadKey] = []
        self.running: set[WorkloadKey] = set()  # reconciles under way
        self.cluster = Cluster()
        self.hurried: list[WorkloadKey] = []
        self.tasks: list[asyncio.Task[None]] = []
        context = Context(
            ManualClock(NOW, 1.0), lambda: True, self.enqueued.append, self._background
        )
        self.subs = Subscriptions(
            Context(ManualClock(NOW, 1.0), lambda: True, lambda _: None, lambda c: c.close()),
            Watching(self.hub, AccessReviews(self.api.kube, ttl=60.0), self.cluster),  # type: ignore[arg-type]
            lambda _, activity, __: self.found.append(activity.reason),
        )
        self.warming = Warming(
            context,
            Watching(
                self.hub,
                AccessReviews(self.api.kube, ttl=60.0, clock=ManualClock(NOW, 1.0)),
                self.cluster,  # type: ignore[arg-type]
            ),
            self.workloads,
            self.hurried.append,
            lambda namespace: namespace != "closed",
        )
        followers = Followers(
            catch_up=self.subs.catch_up if followed else None,
            check_census=self.subs.check_census if followed else None,
            on_first_seen=self.warming.on_workload,
            on_change=self.warming.on_change,
        )
        self.feed = ChangeFeed(
            self.workloads,
            context,
            Metrics(lambda: True),
            lambda key, _, __, found, ___: self.noted.append((key, found)),
            Lookups(self.hub.users, self.hub.users_in, self.running.__contains__),
            followers,
        )

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.create_task(work))

    def add(self, w: Workload) -> None:
        kept = cast(Obj, w.obj)  # as a workloads' informer keeps it
        self.feed.on_workload("Deployment", WatchEvent("ADDED", kept))

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)
        if self.cluster.namespaces.synced.is_set():  # else one waits for it
            await asyncio.gather(*self.tasks)

    async def aclose(self) -> None:
        await self.hub.aclose()
        await self.api.kube.aclose()


IN_OPS = {"zeroscaler.io/watch-namespaces": "ops"}


async def test_a_start_warms_what_workloads_name_and_delivers_it_to_no_one() -> None:
    start = Start()
    start.add(workload("a", "ops", notes("Widget.example.com", **IN_OPS)))
    start.add(workload("b", "ops", notes("Secret.example.com", **IN_OPS)))  # we may not watch it
    start.add(workload("c", "ops", {"zeroscaler.io/watched-kinds": "Gadget.example.com"}))
    start.add(workload("d", "closed", notes("Gadget.example.com", **IN_OPS)))  # not opted in
    # Its namespaces are whatever RBAC will say: a whole type listed for it could be in vain.
    start.add(workload("e", "ops", notes("Gadget.example.com")))
    await start.settle()
    assert start.hub.resources == []  # discovery has not answered yet
    start.cluster.list()
    await start.settle()
    assert start.hub.resources == [WIDGET]
    kept = start.hub.kept(WIDGET)
    assert kept is not None
    await kept.ready.wait()
    assert len(kept) == 1
    assert start.hub.users(WIDGET) == set()
    assert start.noted == []  # its list reached no workload: none has subscribed
    # A workload's own reconcile subscribes (after its access checks) and finds it listed.
    key = ("Deployment", "ops", "a")
    assert start.hub.acquire(WIDGET, key, frozenset({"ops"})) == frozenset({"ops"})
    assert start.api.listed == ["/apis/example.com/v1/namespaces/ops/widgets"]  # once, early
    await start.aclose()


async def test_a_change_hurries_the_first_look_of_those_naming_it_there_once() -> None:
    start = Start()
    start.cluster.list()
    here = workload("here", "ops", notes("Widget.example.com"))
    anywhere = workload("anywhere", "team", notes("Widget.example.com"))
    elsewhere = workload(
        "elsewhere",
        "ops",
        notes("Widget.example.com", **{"zeroscaler.io/watch-namespaces": "dev"}),
    )
    looked = workload("looked", "ops", notes("Widget.example.com"))
    nodes = workload("nodes", "dev", notes("Node", **{"zeroscaler.io/watch-namespaces": "dev"}))
    for w in (here, anywhere, elsewhere, looked, nodes):
        start.add(w)
    await start.settle()
    start.workloads[looked.key].watch.signature = ()  # reconciled already: subscribed as usual
    change = {"metadata": {"name": "x", "namespace": "ops", "resourceVersion": "6"}}
    start.feed.on_object(WIDGET, WatchEvent("ADDED", change, initial=True))  # a list: not news
    assert start.hurried == []
    start.feed.on_object(WIDGET, WatchEvent("ADDED", change))
    assert sorted(start.hurried) == sorted([here.key, anywhere.key])
    start.feed.on_object(WIDGET, WatchEvent("MODIFIED", change, change))
    assert len(start.hurried) == 2  # once each: their first look is on its way
    start.feed.on_object(NODE, WatchEvent("ADDED", {"metadata": {"name": "n"}}))
    assert start.hurried[2:] == [nodes.key]  # cluster-scoped: whatever namespaces they named
    assert start.noted == []
    await start.aclose()


async def test_finishing_stops_the_warm_watches_nobody_took_and_warms_no_more() -> None:
    start = Start()
    start.cluster.list()
    start.add(workload("a", "ops", notes("Widget.example.com", **IN_OPS)))
    start.add(workload("b", "ops", notes("Gadget.example.com", **IN_OPS)))
    await start.settle()
    assert sorted(r.resource for r in start.hub.resources) == ["gadgets", "widgets"]
    start.hub.acquire(WIDGET, ("Deployment", "ops", "a"), frozenset({"ops"}))
    start.warming.finish()
    assert start.hub.resources == [WIDGET]
    start.add(workload("later", "ops", notes("Gadget.example.com", **IN_OPS)))
    await start.settle()
    assert start.hub.resources == [WIDGET]
    await start.aclose()


async def test_a_type_is_warmed_in_the_namespaces_named_and_narrows_to_its_users_after() -> None:
    start = Start()
    start.cluster.list()
    start.add(workload("a", "ops", notes("Widget.example.com", **IN_OPS)))
    start.add(
        workload(
            "b", "dev", notes("Widget.example.com", **{"zeroscaler.io/watch-namespaces": "dev"})
        )
    )
    await start.settle()
    kept = start.hub.kept(WIDGET)
    assert kept is not None
    await kept.ready.wait()
    assert sorted(kept.spaced) == ["dev", "ops"]  # by namespace, not the whole type
    start.hub.acquire(WIDGET, ("Deployment", "ops", "a"), frozenset({"ops"}))
    start.warming.finish()  # b never came: dev is no longer wanted
    assert sorted(kept.spaced) == ["ops"]
    await start.aclose()


SLEPT = "2026-05-01T11:00:00Z"
BEFORE = {"manager": "kubectl", "operation": "Update", "time": "2026-05-01T10:00:00Z"}
AFTER = {"manager": "kubectl", "operation": "Update", "time": "2026-05-01T11:30:00Z"}


def raw_widget(name: str, written: dict[str, str] = BEFORE) -> Obj:
    """As the API server lists it."""
    version = "5" if written is BEFORE else "6"  # an update moves the resourceVersion
    meta = {
        "name": name,
        "namespace": "ops",
        "resourceVersion": version,
        "managedFields": [written],
    }
    return {"metadata": meta}


def widget(name: str, written: dict[str, str] = BEFORE) -> Obj:
    return cast(Obj, shrink(raw_widget(name, written)))  # stored as the shared watches store it


async def joining_warm_widgets(
    w: Workload, listed: list[Obj]
) -> tuple[Start, Subscriptions, list[str]]:
    """A start whose warm Widget watch has listed `listed`, and `w` subscribing to it late; the
    reasons of the activity found go into the list returned."""
    start = Start()
    start.api.widgets = listed
    start.hub.warm(WIDGET, frozenset({"ops"}))
    kept = start.hub.kept(WIDGET)
    assert kept is not None
    await kept.ready.wait()
    subs, found = start.subs, start.found
    subs.set_interest(w.key, w.obj, w.watch, w.status)
    subs.subscribe(w.key, w.watch, w.idle, w.status, {WIDGET})
    return start, subs, found


@pytest.mark.parametrize(
    ("at_restart", "woken"),
    [
        (["a", "b"], None),  # nothing changed while down
        (["a", "b", "c"], "Widget ops/c changed while zeroscaler was not watching"),
        (["a", "b*"], "Widget ops/b changed while zeroscaler was not watching"),
        (["a"], "1 Widget.example.com object deleted while zeroscaler was not watching"),
    ],
)
async def test_a_sleeper_joining_a_warm_watch_is_woken_by_what_changed_while_down(
    at_restart: list[str], woken: str | None
) -> None:
    interest = Interest(watched={("example.com", "Widget"): frozenset({"ops"})}, owned={})
    at_sleep = tally([widget("a"), widget("b")], WIDGET, interest)
    notes = notes_for_sleeper(f"Widget.example.com={at_sleep}")
    w = workload("sleeper", "ops", notes)
    w.status, _ = read_status(notes)
    w.watch.unchecked = frozenset({"Widget.example.com"})
    w.watch.scopes = ({("example.com", "Widget"): frozenset({"ops"})}, {})
    listed = [
        raw_widget(name.rstrip("*"), AFTER if name.endswith("*") or name == "c" else BEFORE)
        for name in at_restart
    ]
    start, subs, found = await joining_warm_widgets(w, listed)
    subs.check_census(w.key, w.obj, w.watch, w.idle, w.status)
    if woken is None:
        assert found == []
    else:
        assert len(found) == 1
        assert found[0].startswith(woken)
    await start.aclose()


@pytest.mark.parametrize(
    ("clock_restarted", "woken"),
    [
        (datetime(2026, 5, 1, 11, 29, 59, 500000, tzinfo=UTC), True),  # `c` written after
        # In the second `c` was written (the API times changes to the second): taken as before.
        (datetime(2026, 5, 1, 11, 30, 0, 500000, tzinfo=UTC), False),
        (datetime(2026, 5, 1, 11, 30, 1, 200000, tzinfo=UTC), False),  # `c` written before
    ],
)
async def test_an_awake_workload_catches_up_on_what_changed_since_its_clock_restarted(
    clock_restarted: datetime, woken: bool
) -> None:
    """Its watch's first list came after it was first managed: an object written in between is
    activity, not something that happened before its idle clock started."""
    w = workload("awake", "ops", notes("Widget.example.com"))
    w.idle.last_activity = clock_restarted
    w.watch.scopes = ({("example.com", "Widget"): frozenset({"ops"})}, {})
    start, _, found = await joining_warm_widgets(w, [raw_widget("a"), raw_widget("c", AFTER)])
    assert found == (["Widget ops/c changed while zeroscaler was not watching"] if woken else [])
    await start.aclose()


CHANGED = "Widget ops/c changed while zeroscaler was not watching"


@pytest.mark.parametrize(
    ("state", "census", "reconciling", "woken", "enqueued"),
    [
        # Its census covers the kind: compared once the list is in, it names what changed.
        ("asleep", True, False, [CHANGED], False),
        # A reconcile under way compares it itself: it is asked for another.
        ("asleep", True, True, [], True),
        ("asleep", False, False, [CHANGED], False),
        # Awake: its idle clock restarted when it was first managed, after all of it.
        ("awake", False, False, [], False),
    ],
    ids=["asleep, with a census", "with a census, reconciling", "asleep, without one", "awake"],
)
async def test_a_first_list_catches_up_the_workloads_already_holding_its_watch(
    state: str, census: bool, reconciling: bool, woken: list[str], enqueued: bool
) -> None:
    # A first list is handed over whole, not object by object: each workload that subscribed
    # while it was listed learns from it what a workload joining later would, without a whole
    # reconcile of its own.
    interest = Interest(watched={("example.com", "Widget"): frozenset({"ops"})}, owned={})
    notes = notes_for_sleeper(f"Widget.example.com={tally([widget('a')], WIDGET, interest)}")
    if not census:
        del notes["zeroscaler.io/census"]
    if state == "awake":
        notes["zeroscaler.io/state"] = "awake"
    w = workload("sleeper", "ops", notes)
    w.status, _ = read_status(notes)
    w.watch.unchecked = frozenset({"Widget.example.com"} if census else ())
    w.watch.scopes = ({("example.com", "Widget"): frozenset({"ops"})}, {})
    start = Start(followed=True)
    changed = {"name": "c", "namespace": "ops", "resourceVersion": "6", "managedFields": [AFTER]}
    start.api.widgets = [raw_widget("a"), {"metadata": changed}]
    start.workloads[w.key] = w
    subs, found = start.subs, start.found
    if reconciling:
        start.running.add(w.key)
    subs.set_interest(w.key, w.obj, w.watch, w.status)
    subs.subscribe(
        w.key, w.watch, w.idle, w.status, {WIDGET}
    )  # before the list: nothing to catch up on yet
    kept = start.hub.kept(WIDGET)
    assert kept is not None
    assert found == []
    await kept.ready.wait()
    assert [reason.split(" (")[0] for reason in found] == woken
    assert start.enqueued == ([w.key] if enqueued else [])
    await start.aclose()


def notes_for_sleeper(census: str) -> dict[str, str]:
    return {
        **notes("Widget.example.com", **{"zeroscaler.io/watch-namespaces": "ops"}),
        "zeroscaler.io/state": "asleep",
        "zeroscaler.io/asleep-since": SLEPT,
        "zeroscaler.io/last-activity": SLEPT,
        "zeroscaler.io/census": census,
    }
