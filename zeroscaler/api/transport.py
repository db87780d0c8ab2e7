"""Requests to the API server: one pooled HTTP client, paced by priority, answers as JSON dicts.

Where the server is and who we are comes from `credentials`; the sockets from `connections`.
Lists, watches and discovery are built on `Transport.send` in modules of their own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import enum
import json
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Self

import httpx

from zeroscaler.api.connections import cheap_idle_checks
from zeroscaler.api.credentials import ClusterAccess
from zeroscaler.api.errors import Transient, Withdrawn, error_for
from zeroscaler.core.pacing import Pacer, parse_retry_after

Obj = dict[str, Any]


class Priority(enum.IntEnum):
    """Which waiting requests the pacer lets go first: the lowest value."""

    URGENT = 0  # a wake's scale write and the reads it needs; the Lease
    PROMPT = 1  # what finishes a wake: its record
    NORMAL = 2  # sleeps, access reviews, policy, everything not named
    BACKGROUND = 3  # Events: late is fine, but never ahead of a wake or a sleep


_PRIORITY: ContextVar[Priority] = ContextVar("zeroscaler_priority", default=Priority.NORMAL)


@contextlib.contextmanager
def prioritized(level: Priority) -> Iterator[None]:
    """Requests made inside, and in tasks started inside, wait at `level`."""
    token = _PRIORITY.set(level)
    try:
        yield
    finally:
        _PRIORITY.reset(token)


def urgently(on: bool = True) -> contextlib.AbstractContextManager[None]:
    """Requests made inside go before other waiting ones (all a wake needs, reads included)."""
    return prioritized(Priority.URGENT if on else Priority.NORMAL)


# What a read response's stream is replaced with (see `detached`).
_READ = httpx.ByteStream(b"")


def decoded(content: bytes) -> Obj:
    """A JSON body as a dict; an empty one as an empty dict."""
    if not content:
        return {}
    result: Obj = json.loads(content)
    return result


def detached(resp: httpx.Response) -> httpx.Response:
    """`resp`, read whole, without its stream: httpx's stream refers back to its response, a
    cycle only the collector frees. Until it ran, each response kept its body; with the collector
    paused for a start, every list page's did, and answers in flight at a freeze stayed until a
    full collection."""
    resp.stream = _READ
    return resp


def query_params(params: Mapping[str, str | int | bool] | None) -> dict[str, str] | None:
    """Query parameters as the API server reads them (booleans lowercase)."""
    if not params:
        return None
    return {
        k: ("true" if v is True else "false" if v is False else str(v)) for k, v in params.items()
    }


def outcome_seen(future: asyncio.Future[Any]) -> None:
    """Mark how a future nobody may await ended as seen: no "never retrieved" warning."""
    if not future.cancelled():
        future.exception()


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """How much a client may ask of the API server at once, and how long it waits."""

    timeout: float = 30.0  # seconds a request may take (a watch sets its own)
    max_connections: int = 64  # also the requests in flight at most
    keepalive_connections: int = 16
    qps: float = 0.0  # 0: no rate limit
    burst: int = 1
    retries: int = 10  # a 429 sent again at most this many times


DEFAULT_LIMITS = ClientLimits()


class Tally:
    """A count that copies of a client share: a watch client's 429s are its parent's too."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class Transport:
    """Paced requests over one pooled `httpx.AsyncClient` (`zeroscaler.core.pacing`): a 429 is
    sent again after its Retry-After, up to `retries` times, and holds back the requests behind
    it meanwhile."""

    def __init__(
        self,
        access: ClusterAccess,
        limits: ClientLimits = DEFAULT_LIMITS,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        # transport: where requests go instead of the network (the unit tests' stand-in server).
        self.access = access
        self.pacer = Pacer(concurrency=limits.max_connections, qps=limits.qps, burst=limits.burst)
        self.retries = limits.retries
        self._throttles = Tally()  # 429 answers so far, shared with `dedicated` copies
        self.pages_ahead = 0  # list pages sent before the page before them was decoded
        # Requests waiting for the pacer, one line per priority; the most urgent line goes first.
        self._waiting: tuple[deque[asyncio.Future[float]], ...] = tuple(deque() for _ in Priority)
        self._quiet = asyncio.Event()  # set when the last request in flight is answered
        # What each client of these connections is made with (`dedicated` makes more).
        self._client_options: dict[str, Any] = {
            "base_url": access.server,
            "verify": access.ssl_context(),  # one context: loading the CAs costs each time
            "auth": access.auth(),
            "proxy": access.proxy,
            "headers": {"User-Agent": "zeroscaler"},
            "timeout": httpx.Timeout(limits.timeout),
            "transport": transport,
        }
        self.http = self._client(limits.max_connections, limits.keepalive_connections)
        # SNI and certificate check against this name instead of the server's host (a tunnel).
        self.extensions: dict[str, Any] | None = (
            {"sni_hostname": access.tls_server_name} if access.tls_server_name else None
        )
        # Failed requests by (method, HTTP status; 0 when no answer came), for /metrics.
        self.errors: collections.Counter[tuple[str, int]] = collections.Counter()

    def _client(self, connections: int, keepalive: int) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            # Idle connections kept 30 s, not httpx's 5: the leader renews its Lease every 5 s and
            # would pay a new TLS handshake for each. The API server keeps them 90 s (IdleTimeout
            # in its secure serving).
            limits=httpx.Limits(
                max_connections=connections,
                max_keepalive_connections=keepalive,
                keepalive_expiry=30.0,
            ),
            **self._client_options,
        )
        cheap_idle_checks(client)
        return client

    def dedicated(self) -> Self:
        """Another client with one connection of its own (closed by `aclose`), sharing this
        one's pacer, credentials, failed-request counts and 429 count: for one long watch
        that also lists. A pool's upkeep walks every connection it holds at each request's start
        and end, so a thousand watches in one pool made each of a start's thousand lists walk a
        thousand connections (docs/scaling.md)."""
        other = copy.copy(self)
        other.http = self._client(1, 1)
        return other

    def sharing(self) -> Self:
        """Another client over these connections, pacer and caches that counts its own failed
        requests and 429s: one per component of a process (closed with this one)."""
        other = copy.copy(self)
        other.errors = collections.Counter()
        other._throttles = Tally()
        return other

    @property
    def throttled(self) -> int:
        """429 answers so far, its `dedicated` copies' included."""
        return self._throttles.count

    async def aclose(self) -> None:
        await self.http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int | bool] | None = None,
        body: Obj | list[Obj] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        urgent: bool = False,
        priority: Priority | None = None,
        unless: Callable[[], bool] | None = None,
    ) -> Obj:
        """One request; a 2xx JSON body comes back as a dict, anything else raises a KubeError.

        It waits for the pacer at `priority` (default: the context's, see `prioritized`; `urgent`
        is Priority.URGENT, for a wake's scale write). A request whose `unless()` is true when its
        turn comes is not sent: `Withdrawn` is raised.
        """
        headers = {"Accept": accept}
        content = None
        if body is not None:
            headers["Content-Type"] = content_type
            content = json.dumps(body, separators=(",", ":")).encode()
        level = Priority.URGENT if urgent else priority
        resp = await self.send(
            method,
            path,
            params=params,
            content=content,
            headers=headers,
            priority=level,
            unless=unless,
        )
        return decoded(self.checked(method, resp))

    def checked(self, method: str, resp: httpx.Response) -> bytes:
        """A 2xx response's body; anything else is counted and raises its KubeError."""
        if resp.status_code >= 300:
            self.errors[(method, resp.status_code)] += 1
            raise error_for(resp.status_code, resp.content)
        return resp.content

    async def send(
        self,
        method: str,
        path: str,
        *,
        headers: dict[str, str],
        params: Mapping[str, str | int | bool] | None = None,
        content: bytes | None = None,
        priority: Priority | None = None,
        unless: Callable[[], bool] | None = None,
        extensions: dict[str, Any] | None = None,
    ) -> httpx.Response:
        """One request when the pacer lets it go, sent again after each 429 (up to `retries`);
        the answer read whole, whatever its status."""
        attempt = 0
        level = _PRIORITY.get() if priority is None else priority
        while True:
            await self._admit(level)
            if unless is not None and unless():
                self.pacer.cancel()
                self._hand_on()
                raise Withdrawn(f"{method} {path}")
            try:
                resp = await self.http.request(
                    method,
                    path,
                    params=query_params(params),
                    content=content,
                    headers=headers,
                    extensions=self.extensions if extensions is None else extensions,
                )
            except httpx.TransportError as e:
                self._release(None)
                self.errors[(method, 0)] += 1
                raise Transient(0, type(e).__name__, str(e) or repr(e)) from e
            except BaseException:
                self._release(None)
                raise
            if resp.status_code != 429:
                self._release(None)
                return detached(resp)
            # Rejected before it was carried out (priority and fairness, max-requests-inflight),
            # so sending it again is safe, writes included.
            self._throttles.count += 1
            self._release(parse_retry_after(resp.headers.get("Retry-After")))
            attempt += 1
            if attempt > self.retries:
                return detached(resp)

    async def _admit(self, level: Priority) -> None:
        """Wait until the pacer lets this request go: first come, first served, by priority."""
        # The loop's time, not a given clock: the pacer's waits are the loop's own sleeps.
        loop = asyncio.get_running_loop()
        ahead = any(self._waiting[: level + 1])
        wait = None if ahead else self.pacer.start(loop.time())
        if wait is None:
            turn: asyncio.Future[float] = loop.create_future()
            self._waiting[level].append(turn)
            try:
                wait = await turn  # given by `_hand_on`, which admitted this request
            except BaseException:
                if turn.done() and not turn.cancelled():
                    self.pacer.cancel()
                    self._hand_on()
                raise
        if wait > 0:
            try:
                await asyncio.sleep(wait)
            except BaseException:
                self.pacer.cancel()
                self._hand_on()
                raise

    async def settle(self) -> None:
        """Return once no request is in flight (bound it with `asyncio.timeout`)."""
        while self.pacer.in_flight:
            self._quiet.clear()
            await self._quiet.wait()

    def _release(self, retry_after: float | None) -> None:
        self.pacer.finish(asyncio.get_running_loop().time(), retry_after)
        self._hand_on()

    def _hand_on(self) -> None:
        """Admit waiting requests, the most urgent first, while the pacer allows."""
        now = asyncio.get_running_loop().time()
        for queue in self._waiting:
            while queue:
                if queue[0].done():  # cancelled while waiting
                    queue.popleft()
                    continue
                wait = self.pacer.start(now)
                if wait is None:
                    return
                queue.popleft().set_result(wait)
        if not self.pacer.in_flight:
            self._quiet.set()
