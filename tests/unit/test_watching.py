"""The informer's streaming list (watch-list): the collection sent first on the watch itself, and
lists in pages where the server refuses it."""

from __future__ import annotations

import asyncio
import gzip
import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.mock_api import kube_served_by
from zeroscaler.api import Gone, Kube
from zeroscaler.api.streams import split_lines
from zeroscaler.cluster.informer import INITIAL_EVENTS_END, Filed, Informer, ListWatch, WatchEvent

PATH = "/apis/example.com/v1/things"


def thing(name: str, rv: str, namespace: str = "ops") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": rv}}


def stream(*events: tuple[str, dict[str, Any]]) -> httpx.Response:
    lines = "".join(json.dumps({"type": t, "object": o}) + "\n" for t, o in events)
    return httpx.Response(200, content=lines.encode())


END = (
    "BOOKMARK",
    {"metadata": {"resourceVersion": "10", "annotations": {INITIAL_EVENTS_END: "true"}}},
)


class Server:
    """Answers lists, streaming watches and plain watches; records what was asked."""

    def __init__(self, *, streams: bool = True, streamed: list[httpx.Response] | None = None):
        self.streams = streams
        self.streamed = streamed or []
        self.asked: list[dict[str, str]] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        self.asked.append(params)
        if params.get("sendInitialEvents") == "true":
            if not self.streams:
                message = "sendInitialEvents is forbidden for watch unless the WatchList gate is on"
                body = {"kind": "Status", "reason": "Invalid", "message": message}
                return httpx.Response(422, json=body)
            if self.streamed:
                return self.streamed.pop(0)
        if params.get("watch") == "true":
            await asyncio.Event().wait()  # a quiet watch
        items = [thing("a", "3"), thing("b", "4", "dev")]
        return httpx.Response(200, json={"items": items, "metadata": {"resourceVersion": "9"}})


async def run_informer(kube: Kube, informer: Informer, until: Awaitable[object]) -> None:
    """Run `informer` until `until` is done (5 s at most), then stop it and close `kube`."""
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(5):
            await until
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.aclose()


async def run_until_synced(server: Server) -> tuple[Informer, list[WatchEvent]]:
    kube = kube_served_by(server, connections=4)
    informer = Informer(kube, PATH, ListWatch(metadata_only=True, streaming=True))
    seen: list[WatchEvent] = []
    informer.add_handler(seen.append)

    async def synced() -> None:
        await informer.synced.wait()
        await asyncio.sleep(0.05)  # what follows the end of the initial events

    await run_informer(kube, informer, synced())
    return informer, seen


async def test_a_streamed_list_fills_the_store_then_goes_on_as_a_watch() -> None:
    changed = thing("a", "11")
    server = Server(
        streamed=[
            stream(
                ("ADDED", thing("a", "3")),
                ("ADDED", thing("b", "4", "dev")),
                END,
                ("MODIFIED", changed),
            )
        ]
    )
    informer, seen = await run_until_synced(server)
    assert informer.streaming is True
    assert [(e.type, e.initial) for e in seen] == [
        ("ADDED", True),
        ("ADDED", True),
        ("MODIFIED", False),
    ]
    assert informer.store[("ops", "a")] == changed
    assert len(informer.store) == 2
    assert informer.resource_version == "11"  # the bookmark's, then the watch's; never an item's
    first = server.asked[0]
    assert (first["resourceVersionMatch"], first["resourceVersion"]) == ("NotOlderThan", "")
    assert not any("limit" in asked for asked in server.asked)  # no list in pages


async def test_a_server_that_refuses_streaming_is_listed_in_pages() -> None:
    server = Server(streams=False)
    informer, seen = await run_until_synced(server)
    assert informer.streaming is False
    assert sorted(informer.store) == [("dev", "b"), ("ops", "a")]
    assert all(e.initial for e in seen)
    assert server.asked[1]["limit"] == "500"  # the list, right after the refusal
    assert informer.resource_version == "9"


async def test_a_stream_that_ends_before_its_initial_events_do_is_streamed_again() -> None:
    cut = stream(("ADDED", thing("a", "3")))  # no bookmark: the collection may be incomplete
    whole = stream(("ADDED", thing("a", "3")), ("ADDED", thing("b", "4", "dev")), END)
    server = Server(streamed=[cut, whole])
    informer, seen = await run_until_synced(server)
    assert informer.streaming is True
    assert len(informer.store) == 2
    assert [e.obj["metadata"]["name"] for e in seen] == ["a", "b"]  # nothing of the cut stream
    assert [asked.get("sendInitialEvents") for asked in server.asked[:2]] == ["true", "true"]


def failed(code: int) -> tuple[str, dict[str, Any]]:
    """An ERROR event: the stream breaks with this status."""
    return ("ERROR", {"kind": "Status", "code": code, "reason": "InternalError"})


async def run_until(
    server: Server, done: Callable[[list[WatchEvent]], bool]
) -> tuple[Informer, list[WatchEvent]]:
    """Run an informer over `server` until what its handlers saw satisfies `done`."""
    kube = kube_served_by(server, connections=4)
    informer = Informer(kube, PATH, ListWatch(metadata_only=True, streaming=True))
    seen: list[WatchEvent] = []
    enough = asyncio.Event()

    def record(event: WatchEvent) -> None:
        seen.append(event)
        if done(seen):
            enough.set()

    informer.add_handler(record)
    await run_informer(kube, informer, enough.wait())
    return informer, seen


async def test_changes_before_the_end_of_the_initial_events_belong_to_the_collection() -> None:
    # A server that ends the initial events at its next bookmark tick sends what changed since its
    # snapshot first: the stream is not broken for it, the list is these changes applied.
    server = Server(
        streamed=[
            stream(
                ("ADDED", thing("a", "3")),
                ("ADDED", thing("b", "4", "dev")),
                ("MODIFIED", thing("a", "7")),
                ("DELETED", thing("b", "8", "dev")),
                ("ADDED", thing("c", "9")),
                END,
            )
        ]
    )
    informer, seen = await run_until_synced(server)
    assert [(e.type, e.obj["metadata"]["name"], e.initial) for e in seen] == [
        ("ADDED", "a", True),
        ("ADDED", "c", True),
    ]
    assert informer.store[("ops", "a")] == thing("a", "7")
    assert sorted(informer.store) == [("ops", "a"), ("ops", "c")]
    assert informer.resource_version == "10"
    # Streamed once, then watched on from the end: never streamed again.
    assert [asked.get("sendInitialEvents") for asked in server.asked] == ["true", None]


async def test_what_a_list_after_a_broken_stream_finds_is_news() -> None:
    # The first stream ends its initial events, then breaks. Whatever the next list finds that
    # the first did not happened while the informer was watching: it is not an initial object.
    first = stream(("ADDED", thing("a", "3")), END, failed(500))
    again = stream(("ADDED", thing("a", "3")), ("ADDED", thing("new", "12")), END)
    server = Server(streamed=[first, again])
    informer, seen = await run_until(server, lambda seen: len(seen) >= 2)
    assert [(e.type, e.obj["metadata"]["name"], e.initial) for e in seen] == [
        ("ADDED", "a", True),
        ("ADDED", "new", False),
    ]
    assert sorted(informer.store) == [("ops", "a"), ("ops", "new")]
    assert [asked.get("sendInitialEvents") for asked in server.asked[:2]] == ["true", "true"]


async def test_a_first_list_without_initial_events_is_read_by_the_sync_handlers_alone() -> None:
    # A start hands its 200,000 objects over whole; what a later list finds is still news.
    first = stream(("ADDED", thing("a", "3")), ("ADDED", thing("b", "4", "dev")), END, failed(500))
    again = stream(("ADDED", thing("a", "3")), ("ADDED", thing("new", "12")), END)
    server = Server(streamed=[first, again])
    kube = kube_served_by(server, connections=4)
    informer = Informer(
        kube, PATH, ListWatch(metadata_only=True, streaming=True, initial_events=False)
    )
    seen: list[WatchEvent] = []
    informer.add_handler(seen.append)
    synced: list[tuple[int, list[tuple[str, str]]]] = []
    twice = asyncio.Event()

    def on_synced() -> None:
        synced.append((informer.lists, sorted(informer.store)))
        if len(synced) == 2:
            twice.set()

    informer.add_sync_handler(on_synced)
    await run_informer(kube, informer, twice.wait())
    assert synced == [
        (1, [("dev", "b"), ("ops", "a")]),
        (2, [("ops", "a"), ("ops", "new")]),
    ]
    assert [(e.type, e.obj["metadata"]["name"], e.initial) for e in seen] == [
        ("ADDED", "new", False),
        ("DELETED", "b", False),
    ]


async def test_a_stream_that_breaks_after_its_list_retries_at_the_first_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three refusals back the informer off; a stream that then lists and breaks is a new outage.
    waits: list[float] = []
    sleep = asyncio.sleep

    async def no_wait(delay: float) -> None:
        waits.append(delay)
        await sleep(0)

    monkeypatch.setattr(random, "random", lambda: 0.5)  # no jitter
    monkeypatch.setattr(asyncio, "sleep", no_wait)
    refused = [httpx.Response(503, json={"kind": "Status", "code": 503}) for _ in range(3)]
    listed_then_broken = stream(("ADDED", thing("a", "3")), END, failed(500))
    again = stream(("ADDED", thing("a", "3")), ("ADDED", thing("new", "12")), END)
    server = Server(streamed=[*refused, listed_then_broken, again])
    await run_until(server, lambda seen: len(seen) >= 2)
    assert waits == [0.2, 0.4, 0.8, 0.2]


async def _fell_silent(*events: tuple[str, dict[str, Any]]) -> AsyncIterator[bytes]:
    """A watch's body: these events, then nothing for longer than the reader waits."""
    for kind, obj in events:
        yield json.dumps({"type": kind, "object": obj}).encode() + b"\n"
    raise httpx.ReadTimeout("timed out")


class Watches:
    """Answers a list, then watches from `bodies` in turn; a quiet watch once they run out."""

    def __init__(self, *bodies: AsyncIterator[bytes] | bytes) -> None:
        self.bodies = list(bodies)
        self.asked: list[dict[str, str]] = []
        self.watched = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        self.asked.append(params)
        if params.get("watch") != "true":
            items = [thing("a", "3")]
            return httpx.Response(200, json={"items": items, "metadata": {"resourceVersion": "9"}})
        if not self.bodies:
            self.watched.set()
            await asyncio.Event().wait()
        return httpx.Response(200, content=self.bodies.pop(0))


async def watch_until_quiet(server: Watches) -> Informer:
    kube = kube_served_by(server, connections=2)
    informer = Informer(kube, PATH, ListWatch(metadata_only=True))
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(5):
            await server.watched.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.aclose()
    return informer


async def test_a_watch_that_falls_silent_is_watched_again_from_where_it_was() -> None:
    # A connection dropped without a close sends nothing, not even the minutely bookmark: the
    # informer gives up on it after `silence` and watches on from the last resourceVersion seen.
    server = Watches(_fell_silent(("MODIFIED", thing("a", "12"))))
    informer = await watch_until_quiet(server)
    assert [(p.get("watch"), p.get("resourceVersion")) for p in server.asked] == [
        (None, None),  # the list
        ("true", "9"),
        ("true", "12"),  # no list again: nothing was lost
    ]
    assert informer.store[("ops", "a")] == thing("a", "12")
    assert informer.last_error is None
    assert informer.kube.errors[("WATCH", 0)] == 1


async def test_each_watch_lasts_a_random_one_to_two_timeouts() -> None:
    # Watches started together at a start must not all end (and start again) together.
    server = Watches(*[b""] * 40)
    await watch_until_quiet(server)
    lengths = [int(p["timeoutSeconds"]) for p in server.asked if p.get("watch")]
    assert len(lengths) == 41
    assert all(300 <= n <= 600 for n in lengths)
    assert len(set(lengths)) > 10
    assert [p.get("resourceVersion") for p in server.asked[1:]] == ["9"] * 41


async def _chunked(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    start = 0
    for cut in sorted(cuts):
        yield data[start:cut]
        start = cut
    yield data[start:]


@given(
    st.lists(st.text(alphabet='ab{}:" ', min_size=1, max_size=8), max_size=6),
    st.lists(st.integers(min_value=0, max_value=80), max_size=6),
    st.booleans(),
)
def test_a_watch_stream_is_split_into_its_lines_wherever_its_chunks_end(
    texts: list[str], cuts: list[int], trailing_newline: bool
) -> None:  # sync: hypothesis runs no coroutines
    wanted = [t.encode() for t in texts if t.strip()]
    data = b"\n\n".join(t.encode() for t in texts) + (b"\n" if trailing_newline else b"")
    chunks = _chunked(data, [min(c, len(data)) for c in cuts])

    async def split() -> list[bytes]:
        return [line async for lines in split_lines(chunks) for line in lines]

    assert asyncio.run(split()) == wanted


async def test_the_events_read_with_an_error_before_it_are_passed_on_first() -> None:
    # One read holds several events: those before the error still count.
    expired = {"kind": "Status", "code": 410, "reason": "Expired"}
    body = stream(("ADDED", thing("a", "3")), ("ERROR", expired), ("ADDED", thing("b", "4")))

    async def server(request: httpx.Request) -> httpx.Response:
        return body

    kube = kube_served_by(server, connections=1)
    seen: list[str] = []

    async def read() -> None:
        async for event in kube.watch(PATH, resource_version="1"):
            seen.append(event["object"]["metadata"]["name"])

    try:
        with pytest.raises(Gone):
            await read()
    finally:
        await kube.aclose()
    assert seen == ["a"]


async def test_a_watch_the_server_compressed_all_the_same_is_read_decompressed() -> None:
    body = gzip.compress(
        b"".join(
            json.dumps({"type": "ADDED", "object": thing(n, "3")}).encode() + b"\n" for n in "ab"
        )
    )

    async def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"Content-Encoding": "gzip"})

    kube = kube_served_by(server, connections=1)
    try:
        seen = [e async for e in kube.watch(PATH, resource_version="1")]
    finally:
        await kube.aclose()
    assert [e["object"]["metadata"]["name"] for e in seen] == ["a", "b"]


@dataclass(frozen=True, slots=True)
class _Kept(Filed):
    """A value an informer keeps instead of a dict, as the controller keeps its workloads."""

    namespace: str
    name: str
    resource_version: str

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def version(self) -> str:
        return self.resource_version


def _keep(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    kept = _Kept(meta["namespace"], meta["name"], meta["resourceVersion"])
    return cast(dict[str, Any], kept)  # an informer's objects are typed as dicts


async def test_a_value_that_files_itself_is_kept_by_its_key_and_told_apart_by_its_version() -> None:
    # Listed again after a broken stream: the unchanged object is no news, the new one is.
    first = stream(("ADDED", thing("a", "3")), END, failed(500))
    again = stream(("ADDED", thing("a", "3")), ("ADDED", thing("new", "12", "dev")), END)
    server = Server(streamed=[first, again])
    kube = kube_served_by(server, connections=4)
    informer = Informer(kube, PATH, ListWatch(streaming=True), transform=_keep)
    seen: list[WatchEvent] = []
    enough = asyncio.Event()

    def record(event: WatchEvent) -> None:
        seen.append(event)
        if len(seen) >= 2:
            enough.set()

    informer.add_handler(record)
    await run_informer(kube, informer, enough.wait())
    kept: list[object] = [e.obj for e in seen]
    assert [(e.type, e.initial) for e in seen] == [("ADDED", True), ("ADDED", False)]
    assert kept == [_Kept("ops", "a", "3"), _Kept("dev", "new", "12")]
    assert sorted(informer.store) == [("dev", "new"), ("ops", "a")]
