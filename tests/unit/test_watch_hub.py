"""The shared watches' index of users by namespace: an event asks only the users it may concern."""

from __future__ import annotations

import httpx

from tests.unit.mock_api import kube_served_by
from zeroscaler.controller.watches import Listeners, WatchHub
from zeroscaler.core.kinds import APIResource

THING = APIResource("example.com", "v1", "things", "Thing", verbs=frozenset({"list", "watch"}))
OTHER = APIResource("example.com", "v1", "others", "Other", verbs=frozenset({"list", "watch"}))
CLUSTERED = APIResource("example.com", "v1", "globals", "Global", namespaced=False)


def unreachable(request: httpx.Request) -> httpx.Response:
    """Every request fails to connect: the informers retry quietly until closed."""
    raise httpx.ConnectError("no cluster in unit tests", request=request)


def users_in(hub: WatchHub[str], resource: APIResource, namespace: str) -> set[str]:
    return set(hub.users_in(resource, namespace))


async def test_users_are_found_by_the_namespaces_they_watch() -> None:
    hub: WatchHub[str] = WatchHub(kube_served_by(unreachable), Listeners(lambda *_: None))
    hub.acquire(THING, "a", frozenset({"ns-1"}))
    hub.acquire(THING, "b", frozenset({"ns-1", "ns-2"}))
    hub.acquire(THING, "everywhere", None)
    hub.acquire(OTHER, "c", frozenset({"ns-1"}))
    hub.acquire(CLUSTERED, "d", frozenset({"ns-3"}))
    assert users_in(hub, THING, "ns-1") == {"a", "b", "everywhere"}
    assert users_in(hub, THING, "ns-2") == {"b", "everywhere"}
    assert users_in(hub, THING, "ns-9") == {"everywhere"}
    assert users_in(hub, OTHER, "ns-2") == set()
    assert users_in(hub, CLUSTERED, "") == {"d"}  # cluster-scoped: every user

    hub.set_scope(THING, "a", frozenset({"ns-2"}))  # its scope changed
    assert users_in(hub, THING, "ns-1") == {"b", "everywhere"}
    assert users_in(hub, THING, "ns-2") == {"a", "b", "everywhere"}
    hub.set_scope(THING, "b", None)
    assert users_in(hub, THING, "ns-9") == {"b", "everywhere"}

    hub.release(THING, "a")
    hub.release(THING, "everywhere")
    assert users_in(hub, THING, "ns-2") == {"b"}
    assert hub.resources == [THING, OTHER, CLUSTERED]
    hub.release(THING, "b")  # the last one out stops the watch and its index
    assert users_in(hub, THING, "ns-2") == set()
    assert THING not in hub.resources
    hub.acquire(THING, "a", frozenset({"ns-1"}))
    assert users_in(hub, THING, "ns-1") == {"a"}
    await hub.aclose()


async def test_a_type_whose_due_times_someone_reads_is_watched_whole_and_trimmed() -> None:
    import asyncio
    import json

    from zeroscaler.core.activity import due_of

    asked: list[str] = []
    cert = {
        "metadata": {"name": "web", "namespace": "ns-1", "resourceVersion": "5"},
        "spec": {"secretName": "web-tls"},
        "status": {"renewalTime": "2026-01-01T10:00:00Z"},
    }

    def serve(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("accept", ""))
        if request.url.params.get("watch"):
            raise httpx.ConnectError("no watch in unit tests", request=request)
        body = {"kind": "ThingList", "metadata": {"resourceVersion": "5"}, "items": [cert]}
        return httpx.Response(200, content=json.dumps(body).encode())

    hub: WatchHub[str] = WatchHub(kube_served_by(serve), Listeners(lambda *_: None))
    renewal = ("status", "renewalTime")
    hub.set_due(THING, "cert-manager", frozenset({renewal}))
    hub.acquire(THING, "cert-manager", None)
    hub.acquire(THING, "other", None)  # reads no due times: the same watch serves it
    kept = hub.kept(THING)
    assert kept is not None
    await asyncio.wait_for(kept.ready.wait(), 5)
    assert kept.cluster is not None  # watched everywhere: one cluster-wide watch
    informer = kept.cluster.informer
    assert not informer.metadata_only
    assert "as=PartialObjectMetadata" not in asked[0]
    stored = informer.store.get(("ns-1", "web"))
    assert due_of(stored) == ((renewal, 1767261600),)
    assert "spec" not in dict(stored or {})  # nothing of the object but metadata and due times
    # The last reader of due times goes: the watch is listed again, metadata only.
    hub.release(THING, "cert-manager")
    again = hub.kept(THING)
    assert again is not None
    assert again is not kept
    assert again.cluster is not None
    assert again.cluster.informer.metadata_only
    assert hub.due_paths(THING) == frozenset()
    await hub.aclose()
