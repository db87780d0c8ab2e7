"""The API client's sockets: every pool httpx makes gets the cheaper idle check, and the check
tells an idle connection from one the server hung up, as httpcore's own does."""

from __future__ import annotations

import asyncio
import random
import socket
from typing import Any, cast

import httpcore
import httpx
from httpcore._async.connection_pool import AsyncPoolRequest

from zeroscaler.api.connections import Network, Pool, Stream, cheap_idle_checks


class _Inner(httpcore.AsyncNetworkStream):
    """A connection's stream over one end of a socket pair."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.asked: list[str] = []

    def get_extra_info(self, info: str) -> Any:
        self.asked.append(info)
        return self.sock if info == "socket" else None


def test_every_pool_of_a_client_gets_the_cheaper_check() -> None:
    direct = httpx.AsyncClient()
    assert cheap_idle_checks(direct) == 1
    assert isinstance(direct._transport._pool._network_backend, Network)  # type: ignore[attr-defined]
    # A proxy's pool too: its tunnels are connections like any other.
    assert cheap_idle_checks(httpx.AsyncClient(proxy="http://192.0.2.1:3128")) == 2
    # A stand-in transport has no pool and is left as it is.
    assert (
        cheap_idle_checks(
            httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(200)))
        )
        == 0
    )


def test_an_idle_connection_is_readable_only_once_the_server_hangs_up() -> None:
    ours, theirs = socket.socketpair()
    inner = _Inner(ours)
    stream = Stream(inner)
    assert stream.get_extra_info("is_readable") is False
    theirs.close()  # the server hung up: the next read gives the end of the stream
    assert stream.get_extra_info("is_readable") is True
    ours.close()
    assert stream.get_extra_info("is_readable") is True
    # The socket was looked up once, when the stream was made, not on every check.
    assert inner.asked == ["socket"]
    # Anything else is asked of the stream underneath.
    assert stream.get_extra_info("ssl_object") is None
    assert inner.asked == ["socket", "ssl_object"]


def test_a_stream_without_a_socket_asks_the_one_underneath() -> None:
    class Plain(httpcore.AsyncNetworkStream):
        def get_extra_info(self, info: str) -> Any:
            return "theirs" if info == "is_readable" else None

    assert Stream(Plain()).get_extra_info("is_readable") == "theirs"


def test_data_waiting_on_an_idle_connection_makes_it_readable() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        stream = Stream(_Inner(ours))
        theirs.sendall(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
        assert stream.get_extra_info("is_readable") is True


class _Connection:
    """A connection in a given state, as the pool's upkeep pass reads it."""

    def __init__(self, origin: httpcore.Origin, state: dict[str, bool]) -> None:
        self.origin, self.state = origin, state
        self.checks = 0  # has_expired polls the socket: the pass must ask as often as httpcore's

    def can_handle_request(self, origin: httpcore.Origin) -> bool:
        return origin == self.origin

    def is_available(self) -> bool:
        return self.state["available"]

    def is_idle(self) -> bool:
        return self.state["idle"]

    def is_closed(self) -> bool:
        return self.state["closed"]

    def has_expired(self) -> bool:
        self.checks += 1
        return self.state["expired"]


def _pool(kind: type[httpcore.AsyncConnectionPool], seed: int) -> httpcore.AsyncConnectionPool:
    """A pool of `kind` holding random connections and requests, the same for the same seed;
    new connections are available at once half the time (as an HTTP/2 one is)."""
    rng = random.Random(seed)
    wire_origins = [httpcore.Origin(b"https", host, 443) for host in (b"a", b"b")]
    made_available = rng.random() < 0.5

    class Fake(kind):  # type: ignore[misc, valid-type]
        def create_connection(self, origin: httpcore.Origin) -> Any:
            state = {"available": made_available, "idle": False, "closed": False, "expired": False}
            return _Connection(origin, state)

    pool = Fake(max_connections=rng.randint(1, 8), max_keepalive_connections=rng.randint(0, 8))
    for _ in range(rng.randint(0, 10)):
        idle = rng.random() < 0.5
        state = {
            "idle": idle,
            "available": idle or rng.random() < 0.2,
            "closed": rng.random() < 0.15,
            "expired": rng.random() < 0.15,
        }
        pool._connections.append(_Connection(rng.choice(wire_origins), state))
    for _ in range(rng.randint(0, 6)):
        origin = rng.choice(wire_origins)
        url = httpcore.URL(scheme=origin.scheme, host=origin.host, port=origin.port, target=b"/")
        request = AsyncPoolRequest(httpcore.Request("GET", url))
        if rng.random() < 0.3:  # already on a connection
            request.connection = cast(Any, _Connection(origin, {}))
        pool._requests.append(request)
    return pool


def _outcome(pool: Any, closing: list[Any]) -> list[Any]:
    """What a pass decided, told by position: the pool's connections, those closed, and where
    each request went (a connection's place in the pool, or a new one's origin)."""
    everyone = list(pool._connections) + closing

    def place(c: Any) -> Any:
        return everyone.index(c) if c in everyone else ("elsewhere",)

    return [
        [(c.origin, c.state, c.checks) for c in pool._connections],
        [(c.origin, c.checks) for c in closing],
        [None if r.connection is None else place(r.connection) for r in pool._requests],
    ]


def test_the_linear_pass_decides_as_httpcores_own() -> None:
    async def compare() -> int:
        differing = 0
        for seed in range(1000):
            theirs, ours = _pool(httpcore.AsyncConnectionPool, seed), _pool(Pool, seed)
            expected = _outcome(theirs, theirs._assign_requests_to_connections())
            if _outcome(ours, ours._assign_requests_to_connections()) != expected:
                differing += 1
        return differing

    assert asyncio.run(compare()) == 0


def test_a_pass_over_many_idle_connections_asks_each_once() -> None:
    """httpcore's pass asks every connection whether it is idle once for each idle one."""

    async def asked(kind: type[httpcore.AsyncConnectionPool]) -> int:
        pool = kind(max_connections=1024, max_keepalive_connections=1024)
        origin = httpcore.Origin(b"https", b"a", 443)
        state = {"idle": True, "available": True, "closed": False, "expired": False}
        connections = [_Connection(origin, state) for _ in range(200)]
        calls = 0

        def is_idle() -> bool:
            nonlocal calls
            calls += 1
            return True

        for c in connections:
            c.is_idle = is_idle  # type: ignore[method-assign]
        pool._connections.extend(cast(Any, connections))
        pool._assign_requests_to_connections()
        return calls

    assert asyncio.run(asked(httpcore.AsyncConnectionPool)) == 200 * 201  # the quadratic pass
    assert asyncio.run(asked(Pool)) == 200


def test_a_client_pool_is_made_linear() -> None:
    client = httpx.AsyncClient()
    cheap_idle_checks(client)
    assert type(client._transport._pool) is Pool  # type: ignore[attr-defined]
    proxied = httpx.AsyncClient(proxy="http://192.0.2.1:3128")
    cheap_idle_checks(proxied)
    assert type(proxied._transport._pool) is Pool  # type: ignore[attr-defined]
    # The proxy's pool makes its connections its own way: it keeps its class.
    assert all(type(t._pool) is not Pool for t in proxied._mounts.values())  # type: ignore[union-attr]
