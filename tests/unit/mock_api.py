"""A real `Kube` whose requests a function answers: the unit tests' API server, no network.

Tests build on the client itself over `httpx.MockTransport` rather than fake its methods, so the
pacing, priorities, error mapping and JSON handling they pass through are the product's own.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine

import httpx

from zeroscaler.api import ClientLimits, Kube
from zeroscaler.api.credentials import ClusterAccess

Handler = (
    Callable[[httpx.Request], httpx.Response]
    | Callable[[httpx.Request], Coroutine[None, None, httpx.Response]]
)


def kube_served_by(handler: Handler, connections: int = 1) -> Kube:
    """A Kube whose requests `handler` answers (sync or async), `connections` at a time."""
    return Kube(
        ClusterAccess(server="https://127.0.0.1:1"),
        ClientLimits(max_connections=connections),
        transport=httpx.MockTransport(handler),
    )
