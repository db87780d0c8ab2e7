"""Shared watches that keep only what their users' scopes need: listed and watched in the
namespaces their users watch, cluster-wide where one watches everywhere, and a scope that widens
or narrows live with no change missed, none told twice, and nothing listed told as a change.

The API server here is a function over a real `Kube`: one namespaced type, its objects, a
resourceVersion that every change moves, and watches that start from a version and are told each
later change in their namespace (or all), in order, as the real one does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from tests.unit.mock_api import kube_served_by
from zeroscaler.cluster.informer import WatchEvent
from zeroscaler.controller.watches import Listeners, SharedWatch, Waiting, WatchHub
from zeroscaler.core.activity import Scope
from zeroscaler.core.kinds import APIResource

THING = APIResource("example.com", "v1", "things", "Thing", verbs=frozenset({"list", "watch"}))
OTHER = APIResource("example.com", "v1", "others", "Other", verbs=frozenset({"list", "watch"}))
EVERY = "/apis/example.com/v1/things"


def path_in(namespace: str) -> str:
    return f"/apis/example.com/v1/namespaces/{namespace}/things"


class Server:
    """The API server of one type (and OTHER, empty): lists and watches as the real one serves
    them, with lists that can be held (their snapshot taken on arrival, the answer sent when
    let go) and watches that can be held (their events kept until let go)."""

    def __init__(self) -> None:
        self.version = 100
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.history: list[dict[str, Any]] = []
        self.watches: list[tuple[str | None, asyncio.Queue[dict[str, Any]]]] = []
        self.listed: list[str] = []
        self.held_lists: dict[str | None, asyncio.Event] = {}
        self.held_watches: dict[str | None, asyncio.Event] = {}
        self.kube = kube_served_by(self.answer, connections=64)

    def put(self, namespace: str, name: str) -> int:
        self.version += 1
        kind = "MODIFIED" if (namespace, name) in self.objects else "ADDED"
        obj = {"metadata": {"name": name, "namespace": namespace,
                            "resourceVersion": str(self.version)}}  # fmt: skip
        self.objects[(namespace, name)] = obj
        self._tell({"type": kind, "object": obj})
        return self.version

    def delete(self, namespace: str, name: str) -> int:
        self.version += 1
        obj = self.objects.pop((namespace, name))
        gone = {"metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        self._tell({"type": "DELETED", "object": gone})
        return self.version

    def _tell(self, event: dict[str, Any]) -> None:
        self.history.append(event)
        namespace = event["object"]["metadata"]["namespace"]
        for where, queue in self.watches:
            if where is None or where == namespace:
                queue.put_nowait(event)

    def hold_lists(self, namespace: str | None) -> asyncio.Event:
        self.held_lists[namespace] = asyncio.Event()
        return self.held_lists[namespace]

    def hold_watches(self, namespace: str | None) -> asyncio.Event:
        self.held_watches[namespace] = asyncio.Event()
        return self.held_watches[namespace]

    async def answer(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.split("/")
        namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts else None
        if parts[-1] != "things":
            return httpx.Response(200, json={"items": [], "metadata": {"resourceVersion": "1"}})
        if request.url.params.get("watch"):
            since = int(request.url.params["resourceVersion"])
            queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            for event in self.history:
                meta = event["object"]["metadata"]
                if int(meta["resourceVersion"]) > since and namespace in (None, meta["namespace"]):
                    queue.put_nowait(event)
            self.watches.append((namespace, queue))
            return httpx.Response(200, stream=_Stream(queue, self.held_watches.get(namespace)))
        self.listed.append(request.url.path)
        items = [o for (ns, _), o in self.objects.items() if namespace in (None, ns)]
        version = self.version  # the snapshot is taken when the list arrives
        held = self.held_lists.get(namespace)
        if held is not None:
            await held.wait()
        body = {"items": items, "metadata": {"resourceVersion": str(version)}}
        return httpx.Response(200, content=json.dumps(body).encode())


class _Stream(httpx.AsyncByteStream):
    def __init__(self, queue: asyncio.Queue[dict[str, Any]], held: asyncio.Event | None) -> None:
        self.queue, self.held = queue, held

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            event = await self.queue.get()
            if self.held is not None:
                await self.held.wait()
            yield json.dumps(event).encode() + b"\n"


class Watching:
    """A hub over the server, and what it told: events (kind, namespace, name, version), the
    namespaces each user was let read, and where lists came."""

    def __init__(self, server: Server, **options: Any) -> None:
        self.told: list[tuple[str, str, str, str]] = []
        self.served: list[tuple[str, Scope]] = []
        self.synced: list[Scope] = []
        listeners: Listeners[str] = Listeners(
            self._event, lambda _, where: self.synced.append(where), on_served=self._served
        )
        self.hub: WatchHub[str] = WatchHub(server.kube, listeners, **options)

    def _event(self, resource: APIResource, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        self.told.append((event.type, meta["namespace"], meta["name"], meta["resourceVersion"]))

    def _served(self, _: APIResource, __: SharedWatch[str], user: str, where: Scope) -> None:
        self.served.append((user, where))

    def kept(self) -> SharedWatch[str]:
        kept = self.hub.kept(THING)
        assert kept is not None
        return kept

    def names(self) -> list[str]:
        return sorted(o["name"] for o in self.kept().values())


async def until(check: Callable[[], bool], what: str) -> None:
    """Until `check()` holds; a few seconds at most (nothing here waits on the clock)."""
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def filled() -> Server:
    """A server holding three things in each of four namespaces (versions 101 to 112)."""
    found = Server()
    for namespace in ("ops", "dev", "ci", "elsewhere"):
        for n in range(3):
            found.put(namespace, f"{namespace}-{n}")
    return found


async def test_namespaced_users_list_and_keep_their_namespaces_alone() -> None:
    server = filled()
    watching = Watching(server)
    assert watching.hub.acquire(THING, "a", frozenset({"ops"})) == frozenset()
    watching.hub.acquire(THING, "b", frozenset({"ops", "dev"}))
    kept = watching.kept()
    await kept.ready.wait()
    assert sorted(server.listed) == [path_in("dev"), path_in("ops")]
    assert watching.names() == ["dev-0", "dev-1", "dev-2", "ops-0", "ops-1", "ops-2"]
    served = {(user, frozenset(where or ())) for user, where in watching.served}
    assert served == {
        ("a", frozenset({"ops"})),
        ("b", frozenset({"dev"})),
        ("b", frozenset({"ops"})),
    }
    assert watching.told == []  # what was listed is not news
    server.put("ops", "new")
    server.put("elsewhere", "unseen")  # nobody's namespace: not even received
    await until(lambda: len(watching.told) == 1, "the change in ops told")
    assert watching.told == [("ADDED", "ops", "new", "113")]
    await watching.hub.aclose()
    await server.kube.aclose()


async def test_a_new_namespace_is_listed_for_its_user_alone_while_others_are_told_changes() -> None:
    server = filled()
    watching = Watching(server)
    watching.hub.acquire(THING, "a", frozenset({"ops"}))
    await watching.kept().ready.wait()
    watching.served.clear()
    held = server.hold_lists("dev")
    assert watching.hub.acquire(THING, "b", frozenset({"dev"})) == frozenset()  # not listed yet
    assert not watching.kept().ready.is_set()
    server.put("ops", "during")  # a's change while dev is being listed
    await until(lambda: len(watching.told) == 1, "a's change told")
    held.set()
    await watching.kept().ready.wait()
    assert watching.served == [("b", frozenset({"dev"}))]  # b reads dev once, as a list
    assert watching.told == [("ADDED", "ops", "during", "113")]  # dev's list told no one
    # A user joining a namespace listed already reads it at once.
    assert watching.hub.acquire(THING, "c", frozenset({"dev", "ops"})) == frozenset({"dev", "ops"})
    await watching.hub.aclose()
    await server.kube.aclose()


async def test_widening_to_everywhere_tells_what_changed_while_the_whole_type_was_listed() -> None:
    server = filled()
    watching = Watching(server)
    watching.hub.acquire(THING, "a", frozenset({"ops"}))
    kept = watching.kept()
    await kept.ready.wait()
    # ops's watch falls behind: a change there reaches the whole type's list before it.
    held = server.hold_watches("ops")
    server.put("ops", "ops-0")  # 113
    assert watching.hub.acquire(THING, "everywhere", None) == frozenset()
    await until(lambda: kept.promoted, "the cluster-wide watch taking over")
    assert kept.spaced == {}  # ops's watch stopped
    # The change ops's watch had not told is told once, from the difference; the objects that
    # were there all along are not.
    assert watching.told == [("MODIFIED", "ops", "ops-0", "113")]
    assert ("everywhere", None) in watching.served
    held.set()  # ops's watch, stopped, tells nothing more
    server.put("dev", "after")
    await until(lambda: len(watching.told) == 2, "a change after, told by the cluster-wide watch")
    assert watching.told[1] == ("ADDED", "dev", "after", "114")
    assert len(kept) == len(server.objects)
    await watching.hub.aclose()
    await server.kube.aclose()


async def test_widening_when_the_old_watch_saw_further_tells_nothing_twice() -> None:
    server = filled()
    watching = Watching(server)
    watching.hub.acquire(THING, "a", frozenset({"ops"}))
    kept = watching.kept()
    await kept.ready.wait()
    held = server.hold_lists(None)  # the whole type's list is of 112...
    watching.hub.acquire(THING, "everywhere", None)
    await until(lambda: EVERY in server.listed, "the cluster-wide list asked for")
    server.put("ops", "ops-1")  # ...and ops's watch tells this change (113) before it comes
    await until(lambda: len(watching.told) == 1, "the change told by ops's watch")
    held.set()
    await until(lambda: kept.promoted, "the cluster-wide watch taking over")
    server.put("ops", "ops-2")  # 114
    await until(lambda: len(watching.told) == 2, "the next change told")
    # The cluster-wide watch, started from 112, was told 113 again: kept, not told twice.
    assert watching.told == [
        ("MODIFIED", "ops", "ops-1", "113"),
        ("MODIFIED", "ops", "ops-2", "114"),
    ]
    await watching.hub.aclose()
    await server.kube.aclose()


async def test_narrowing_keeps_the_whole_type_until_each_namespace_is_listed() -> None:
    server = filled()
    watching = Watching(server)
    watching.hub.acquire(THING, "a", frozenset({"ops"}))
    watching.hub.acquire(THING, "everywhere", None)
    kept = watching.kept()
    await until(lambda: kept.promoted, "cluster-wide")
    held = server.hold_lists("ops")
    watching.hub.release(THING, "everywhere")
    assert kept.reach == frozenset({"ops"})
    assert kept.promoted  # still serving until ops is listed on its own
    server.put("ops", "meanwhile")  # 113, told by the cluster-wide watch
    server.put("dev", "no-longer")  # nobody watches dev now: its user is gone
    await until(lambda: len(watching.told) == 2, "changes told meanwhile")
    held.set()
    await until(lambda: not kept.promoted, "ops's own watch taking over")
    assert kept.cluster is None
    server.put("ops", "after")
    await until(lambda: len(watching.told) == 3, "a change after")
    assert [t[2] for t in watching.told] == ["meanwhile", "no-longer", "after"]
    assert watching.names() == ["after", "meanwhile", "ops-0", "ops-1", "ops-2"]
    await watching.hub.aclose()
    await server.kube.aclose()


async def test_a_namespace_nobody_watches_any_longer_is_dropped() -> None:
    server = filled()
    watching = Watching(server)
    watching.hub.acquire(THING, "a", frozenset({"ops", "dev"}))
    kept = watching.kept()
    await kept.ready.wait()
    watching.hub.set_scope(THING, "a", frozenset({"ops"}))
    assert sorted(kept.spaced) == ["ops"]
    assert watching.names() == ["ops-0", "ops-1", "ops-2"]
    # Widening again reads what it had not read: dev, once listed again.
    assert watching.hub.set_scope(THING, "a", frozenset({"ops", "ci"})) == frozenset()
    await kept.ready.wait()
    assert watching.served[-1] == ("a", frozenset({"ci"}))
    await watching.hub.aclose()
    await server.kube.aclose()


async def test_a_type_wanted_in_most_namespaces_is_watched_cluster_wide() -> None:
    server = filled()
    watching = Watching(server, namespace_count=lambda: 4)
    watching.hub.acquire(THING, "a", frozenset({"ops", "dev"}))  # two of four: by namespace
    kept = watching.kept()
    await kept.ready.wait()
    assert kept.reach == frozenset({"ops", "dev"})
    watching.hub.acquire(THING, "b", frozenset({"ci"}))  # three of four: cluster-wide
    await until(lambda: kept.promoted, "cluster-wide")
    assert kept.reach is None
    assert watching.told == []  # nothing was news
    await watching.hub.aclose()
    await server.kube.aclose()


async def test_past_the_budget_the_type_with_most_namespaces_is_watched_cluster_wide() -> None:
    server = filled()
    # Two types cost two connections; THING by namespace two more; OTHER's three do not fit.
    watching = Watching(server, budget=4)
    watching.hub.acquire(THING, "a", frozenset({"ops", "dev"}))
    watching.hub.acquire(OTHER, "b", frozenset({"ops", "dev", "ci"}))
    kept, other = watching.kept(), watching.hub.kept(OTHER)
    assert other is not None
    assert (kept.reach, other.reach) == (frozenset({"ops", "dev"}), None)
    assert watching.hub.watch_count() == 3
    await watching.hub.aclose()
    await server.kube.aclose()


def test_users_waiting_are_found_by_the_namespaces_listed() -> None:
    waiting: Waiting[str] = Waiting()
    waiting.wait("a", frozenset({"ops", "dev"}))
    waiting.wait("b", frozenset({"dev"}))
    waiting.wait("c", None)  # waits for every namespace: the cluster-wide watch
    assert sorted(waiting.served(frozenset({"dev"}))) == [
        ("a", frozenset({"dev"})),
        ("b", frozenset({"dev"})),
    ]
    assert ("a" in waiting, "b" in waiting, len(waiting)) == (True, False, 2)
    assert waiting.served(frozenset({"dev", "ci"})) == []  # nobody waits for them any longer
    assert waiting.forget("a") == frozenset({"ops"})
    assert waiting.forget("a") == frozenset()
    waiting.wait("d", frozenset({"ops"}))
    waiting.wait("d", frozenset({"ci"}))  # waits anew: no longer for ops
    assert waiting.served(frozenset({"ops"})) == []
    assert sorted(waiting.served(None)) == [("c", None), ("d", frozenset({"ci"}))]
    assert len(waiting) == 0


async def test_each_watch_by_namespace_has_a_connection_of_its_own_closed_when_it_stops() -> None:
    server = filled()
    watching = Watching(server)
    watching.hub.acquire(THING, "a", frozenset({"ops", "dev"}))
    kept = watching.kept()
    await kept.ready.wait()
    clients = [c.informer.kube for c in kept.channels()]
    assert len({id(k.http) for k in (server.kube, *clients)}) == 3
    assert all(k.pacer is server.kube.pacer and k.errors is server.kube.errors for k in clients)
    dev = kept.spaced["dev"]
    watching.hub.acquire(THING, "a", frozenset({"ops"}))
    await until(lambda: dev.task is not None and dev.task.done(), "the dev watch ended")
    assert dev.informer.kube.http.is_closed
    assert not kept.spaced["ops"].informer.kube.http.is_closed
    await watching.hub.aclose()
    assert kept.channels() == []
    assert all(k.http.is_closed for k in clients)
    await server.kube.aclose()


async def test_a_restart_for_due_times_lists_each_namespace_again_for_its_users() -> None:
    server = filled()
    watching = Watching(server)
    watching.hub.acquire(THING, "a", frozenset({"ops"}))
    watching.hub.acquire(THING, "b", frozenset({"dev"}))
    first = watching.kept()
    await first.ready.wait()
    assert sorted(watching.served) == [("a", frozenset({"ops"})), ("b", frozenset({"dev"}))]
    watching.hub.set_due(THING, "a", frozenset({("status", "renewalTime")}))
    again = watching.kept()
    assert again is not first
    await again.ready.wait()
    assert again.reach == frozenset({"ops", "dev"})
    assert all(not c.informer.metadata_only for c in again.channels())
    assert sorted(watching.served[2:]) == [("a", frozenset({"ops"})), ("b", frozenset({"dev"}))]
    assert watching.told == []  # a list again is no change
    await watching.hub.aclose()
    await server.kube.aclose()
