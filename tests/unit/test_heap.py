"""The collector paused for a start's catch-up and run again after it; old garbage never frozen;
the API client's answers freed without it."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import httpx
import pytest

from zeroscaler.api import Kube
from zeroscaler.api.credentials import ClusterAccess
from zeroscaler.controller.heap import pause_collection, release_free_memory, resume_collection


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    gc.enable() if enabled else gc.disable()


def test_a_paused_collector_leaves_cycles_to_the_next_full_collection() -> None:
    pause_collection()
    assert not gc.isenabled()
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    for _ in range(2000):  # enough allocations for many automatic collections, none of which run
        _Node()
    assert gone() is not None
    resume_collection()  # the catch-up's leftovers frozen, not walked
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    assert gone() is not None
    release_free_memory(full=True)  # the housekeeping's half-hourly full collection
    assert gone() is None


def test_resuming_a_collector_that_runs_changes_nothing() -> None:
    gc.enable()
    resume_collection()
    assert gc.isenabled()


def _old_cycle() -> weakref.ref[_Node]:
    """A cycle that survived a collection while in use (promoted to the oldest generation),
    then died."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gc.collect(1)
    return weakref.ref(a)


def test_a_cycle_that_grew_old_before_it_died_is_freed_not_frozen() -> None:
    gc.freeze()  # what the test run holds already: the oldest generation starts empty
    gone = _old_cycle()
    release_free_memory()
    assert gone() is None


def test_an_oldest_generation_filled_by_a_burst_is_left_to_the_full_collection() -> None:
    gc.freeze()
    burst = [[n] for n in range(100)]
    gc.collect(1)
    gone = _old_cycle()
    release_free_memory(oldest_limit=len(burst))  # more than that: only the young are walked
    assert gone() is not None
    release_free_memory(full=True)
    assert gone() is None


def _answers_kept(serve: str) -> tuple[list[weakref.ref[httpx.Response]], list[object]]:
    """Responses the API client got, as weak references, from a fake API answering GETs with a
    list and watches with two events; and what the client returned of them."""
    answers: list[weakref.ref[httpx.Response]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("watch") == "true":
            lines = b'{"type":"ADDED","object":{}}\n{"type":"DELETED","object":{}}\n'
            response = httpx.Response(200, stream=httpx.ByteStream(lines))
        else:
            response = httpx.Response(200, json={"items": [{"metadata": {"name": "a"}}]})
        answers.append(weakref.ref(response))
        return response

    async def use() -> list[object]:
        async with Kube(
            ClusterAccess(server="https://127.0.0.1:1"), transport=httpx.MockTransport(handler)
        ) as kube:
            if serve == "watch":
                return [e async for e in kube.watch("/api/v1/configmaps", resource_version="1")]
            return [await kube.get("/api/v1/configmaps") for _ in range(3)]

    return answers, asyncio.run(use())


@pytest.mark.parametrize("serve", ["list", "watch"])
def test_an_answer_is_freed_once_read_without_the_collector(serve: str) -> None:
    # httpx's stream refers back to its response: with the collector paused for a start, every
    # list page's body stayed until it ran again (100 MB at 10,000 workloads).
    gc.collect()
    gc.disable()
    answers, got = _answers_kept(serve)
    assert len(got) == (2 if serve == "watch" else 3)
    assert answers, "the fake API was never asked"
    assert [a() for a in answers] == [None] * len(answers)
