"""Events take their time from the clock they are given: stamped with its time, and a repeat
counted on the Event before it for as long as that clock says the series is recent."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.unit.mock_api import kube_served_by
from zeroscaler.cluster.events import SERIES_WINDOW, EventRecorder
from zeroscaler.runtime.clock import ManualClock

EVENTS = "/api/v1/namespaces/ops/events"
WIDGET = {"metadata": {"name": "guard", "namespace": "ops", "uid": "u1"}}


class Server:
    """Creates Events (named in turn) and counts patches to them."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.method == "POST" and request.url.path == EVENTS:
            self.created.append(body)
            named = {**body, "metadata": {**body["metadata"], "name": f"e{len(self.created)}"}}
            return httpx.Response(201, json=named)
        self.patched.append((request.url.path, body))
        return httpx.Response(200, json=body)


def _emit_twice(clock: ManualClock, between: float) -> Server:
    server = Server()

    async def scenario() -> None:
        async with kube_served_by(server) as kube:
            events = EventRecorder(kube, clock, "zeroscaler-controller", "r1")
            await events.emit(WIDGET, "apps/v1", "Deployment", "Normal", "Sleeping", "slept")
            clock.advance(between)
            await events.emit(WIDGET, "apps/v1", "Deployment", "Normal", "Sleeping", "slept")

    asyncio.run(scenario())
    return server


def test_an_event_is_stamped_with_the_time_of_the_clock_it_is_given() -> None:
    clock = ManualClock(datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC))
    server = _emit_twice(clock, 90)
    assert server.created[0]["firstTimestamp"] == "2031-05-06T07:08:09Z"
    assert server.created[0]["lastTimestamp"] == "2031-05-06T07:08:09Z"
    assert server.patched == [
        (f"{EVENTS}/e1", {"count": 2, "lastTimestamp": "2031-05-06T07:09:39Z"})
    ]


def test_a_repeat_starts_a_new_event_once_the_given_clock_says_the_series_is_old() -> None:
    server = _emit_twice(ManualClock(datetime(2031, 5, 6, tzinfo=UTC)), SERIES_WINDOW + 1)
    assert server.patched == []
    assert [e["firstTimestamp"] for e in server.created] == [
        "2031-05-06T00:00:00Z",
        "2031-05-06T00:10:01Z",
    ]
