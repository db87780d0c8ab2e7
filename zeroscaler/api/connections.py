"""The connections under the API client: httpcore's own, with its upkeep made cheaper.

Each time a request starts or ends, httpcore's pool runs a pass over its connections:
- It asks every idle connection whether its socket has become readable (the server hung up). Its
  anyio stream answers by building the socket's whole attribute map, a `getpeername` call
  included, on every ask: a large share of the controller's CPU while many workloads are put to
  sleep (docs/scaling.md). Here the socket is found once, when the connection is made, and the
  check is one `poll`.
- For every idle connection it builds a list of all connections only to take its length, so a
  pass costs idle connections times all of them, and the watch client holds a connection per watch
  (docs/figures.md). `Pool` makes the same decisions in one walk.
"""

# httpcore's interface passes timeouts as arguments; these methods keep its signatures.
# ruff: noqa: ASYNC109

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx
from httpcore import AsyncConnectionInterface


def _readable(sock: socket.socket) -> bool:
    """Whether a read would return at once; a closed socket counts as readable, as httpcore's
    own check has it (its next read gives the end of the stream)."""
    if sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class Stream(httpcore.AsyncNetworkStream):
    """A connection's stream, answering "is_readable" from the socket found when it was made."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._socket is not None:
            return _readable(self._socket)
        return self._inner.get_extra_info(info)


class Network(httpcore.AsyncNetworkBackend):
    """Another network backend, its streams wrapped in `Stream`."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        inner = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return Stream(inner)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        return Stream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class Pool(httpcore.AsyncConnectionPool):
    """httpcore's pool, its upkeep pass linear in the connections.

    The pass decides as httpcore 1.0.9's does, which a unit test checks against it over random
    pools: connections closed or expired are dropped; an idle one is closed while the pool holds
    more connections than the keep-alive limit (its size, not its idle count, as httpcore has
    it); each queued request takes the first connection that can serve its origin, else a new
    one, if need be in place of the first idle one. Only the first step is quadratic in
    httpcore's."""

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        closing: list[AsyncConnectionInterface] = []
        kept: list[AsyncConnectionInterface] = []
        size = len(self._connections)  # as it shrinks, connection by connection
        for connection in self._connections:
            if connection.is_closed():
                size -= 1
            elif connection.has_expired() or (
                connection.is_idle() and size > self._max_keepalive_connections
            ):
                size -= 1
                closing.append(connection)
            else:
                kept.append(connection)
        self._connections[:] = kept
        # Each queued request, as httpcore does: rare, and a walk of the pool each.
        for request in [r for r in self._requests if r.is_queued()]:
            origin = request.request.url.origin
            available = [
                c for c in self._connections if c.can_handle_request(origin) and c.is_available()
            ]
            if available:
                request.assign_to_connection(available[0])
                continue
            if len(self._connections) >= self._max_connections:
                spare = next((c for c in self._connections if c.is_idle()), None)
                if spare is None:
                    continue  # it waits for a connection to come free
                self._connections.remove(spare)
                closing.append(spare)
            connection = self.create_connection(origin)
            self._connections.append(connection)
            request.assign_to_connection(connection)
        return closing


def cheap_idle_checks(client: httpx.AsyncClient) -> int:
    """Put `Network` under every connection pool of `client` (its own and a proxy's), and make
    its own a `Pool` (a proxy's pool is a subclass of httpcore's, left as it is); how many.

    httpx gives no way to pass a pool or a network backend, so the pools it made are reached
    through private attributes; a test fails if an upgrade of httpx or httpcore moves them."""
    pools = 0
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if isinstance(pool, httpcore.AsyncConnectionPool):
            if type(pool) is httpcore.AsyncConnectionPool:
                pool.__class__ = Pool  # the pass alone differs: no state of its own to add
            pool._network_backend = Network(pool._network_backend)
            pools += 1
    return pools
