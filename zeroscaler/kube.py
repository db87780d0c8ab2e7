"""The one door to the Kubernetes API: config, typed errors, JSON requests, watches, discovery.

Requests go through one shared `httpx.AsyncClient` per Kube, so objects stay plain JSON dicts and
cost little memory; where the server is and who we are comes from `zeroscaler.credentials`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import enum
import json
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextvars import ContextVar
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal, TypedDict, Unpack

import httpx

from zeroscaler.core.annotations import FIELD_MANAGER
from zeroscaler.core.kinds import APIResource
from zeroscaler.core.pacing import Pacer, parse_retry_after
from zeroscaler.credentials import ClusterAccess
from zeroscaler.network import cheap_idle_checks

log = logging.getLogger(__name__)

Obj = dict[str, Any]
PatchType = Literal["merge", "strategic", "json", "apply"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}
# Ask for metadata only: watches of many objects then cost a fraction of the bandwidth and memory.
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
ACCEPT_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
# Aggregated discovery (GA in 1.30, beta as v2beta1 before), else the older per-group answers.
_ACCEPT_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)
NO_AGGREGATED_DISCOVERY = (
    "the API server does not serve aggregated discovery (apidiscovery.k8s.io/v2, Kubernetes 1.30 "
    "and later): discovering group by group instead, one request per API group at each refresh"
)


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


class Withdrawn(Exception):
    """A request whose `unless` held when its turn came: it was never sent."""


class WatchOptions(TypedDict, total=False):
    """How a watch is asked for, beyond where it starts (`Kube.watch_batches`)."""

    params: Mapping[str, str | int | bool] | None
    metadata_only: bool
    timeout_seconds: int
    silence: float | None


class KubeError(Exception):
    """An API request failed; subclasses say how the caller should react."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(KubeError):
    """404: the object or type does not exist."""


class Conflict(KubeError):
    """409: a precondition or resourceVersion did not match; read again and decide again."""


class Forbidden(KubeError):
    """401/403: not allowed."""


class Gone(KubeError):
    """410: the resourceVersion is too old; list again."""


class Invalid(KubeError):
    """400/422: the request was rejected as malformed."""


class Transient(KubeError):
    """429, 5xx or a network error: try again later."""


class Silent(Transient):
    """A watch stream sent nothing for longer than its caller allowed: its connection is
    most likely dead, though nothing closed it."""


_ERRORS: dict[int, type[KubeError]] = {
    400: Invalid,
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}  # any other status, or none: Transient


def error_for(status: int, body: bytes | str) -> KubeError:
    """Map an HTTP status and a Status body to one of our error classes."""
    reason, message = "", ""
    try:
        status_obj = json.loads(body) if body else {}
        if isinstance(status_obj, dict):
            reason = str(status_obj.get("reason", ""))
            message = str(status_obj.get("message", ""))
    except (ValueError, UnicodeDecodeError):
        message = body[:500] if isinstance(body, str) else body[:500].decode(errors="replace")
    return _ERRORS.get(status, Transient)(status, reason, message)


# What a read response's stream is replaced with (see `_detached`).
_READ = httpx.ByteStream(b"")


def _decoded(content: bytes) -> Obj:
    """A JSON body as a dict; an empty one as an empty dict."""
    if not content:
        return {}
    result: Obj = json.loads(content)
    return result


# A list's metadata, its continue token among it, comes before its items.
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"\\]+)"')
_HEAD = 4096  # bytes searched for it: a list's metadata is well inside


def continue_token(page: bytes) -> str:
    """The continue token read from a list page's first bytes, before its items; "" when none is
    there. Only a guess (a page is not decoded to find it): the decoded page has the last word."""
    end = page.find(b'"items"', 0, _HEAD)
    found = _CONTINUE.search(page, 0, end if end >= 0 else _HEAD)
    return found.group(1).decode("ascii", "replace") if found else ""


# httpcore's trace event once a request is written whole (the `trace` request extension).
_REQUEST_SENT = "http11.send_request_body.complete"


async def _until_sent(page: asyncio.Future[bytes], sent: asyncio.Event) -> None:
    """Until the page's request is out, or the page has ended (an error, say)."""
    waiter = asyncio.ensure_future(sent.wait())
    either: set[asyncio.Future[Any]] = {page, waiter}
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


def _drop(future: asyncio.Future[bytes] | None) -> None:
    """Cancel a page asked for ahead that is no longer wanted; an error it ends with is seen."""
    if future is not None:
        future.cancel()
        future.add_done_callback(outcome_seen)


def outcome_seen(future: asyncio.Future[Any]) -> None:
    """Mark how a future nobody may await ended as seen: no "never retrieved" warning."""
    if not future.cancelled():
        future.exception()


def _detached(resp: httpx.Response) -> httpx.Response:
    """`resp`, read whole, without its stream: httpx's stream refers back to its response, a
    cycle only the collector frees. Until it ran, each response kept its body; with the collector
    paused for a start, every list page's did, 100 MB at 10,000 workloads over 200,000 objects
    (`bench/one_process.py`), and answers in flight at a freeze stayed until a full collection."""
    resp.stream = _READ
    return resp


SELF_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def self_access_review(
    verb: str, group: str, resource: str, namespace: str = "", subresource: str = ""
) -> dict[str, Any]:
    """The body of a SelfSubjectAccessReview: may the caller do `verb` on this resource?"""
    attributes = {"verb": verb, "group": group, "resource": resource}
    if namespace:
        attributes["namespace"] = namespace
    if subresource:
        attributes["subresource"] = subresource
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }


def review_allowed(answer: Mapping[str, Any]) -> bool:
    """Whether an access review's answer allows the request."""
    return bool((answer.get("status") or {}).get("allowed"))


class Kube:
    """An async client for the API server speaking plain JSON dicts.

    Requests other than watches are paced (`zeroscaler.core.pacing`): a 429 is sent again after
    its Retry-After, up to `retries` times, and holds back the requests behind it meanwhile.
    """

    def __init__(
        self,
        access: ClusterAccess,
        *,
        timeout: float = 30.0,
        max_connections: int = 64,
        keepalive_connections: int = 16,
        qps: float = 0.0,
        burst: int = 1,
        retries: int = 10,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        # transport: where requests go instead of the network (the unit tests' stand-in server).
        self.access = access
        self.pacer = Pacer(concurrency=max_connections, qps=qps, burst=burst)
        self.retries = retries
        self.throttled = 0  # 429 answers so far
        self.pages_ahead = 0  # list pages sent before the page before them was decoded
        self.on_throttled: Callable[[], None] = lambda: None
        # Requests waiting for the pacer, one line per priority; the most urgent line goes first.
        self._waiting: tuple[deque[asyncio.Future[float]], ...] = tuple(deque() for _ in Priority)
        self._quiet = asyncio.Event()  # set when the last request in flight is answered
        self._http = httpx.AsyncClient(
            base_url=access.server,
            verify=access.ssl_context(),
            auth=access.auth(),
            proxy=access.proxy,
            headers={"User-Agent": "zeroscaler"},
            timeout=httpx.Timeout(timeout),
            # Idle connections kept 30 s, not httpx's 5: the leader renews its Lease every 5 s and
            # paid a new TLS handshake for each, a third of an idle controller's CPU at 10,000
            # workloads. The API server keeps them 90 s (IdleTimeout in its secure serving).
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=keepalive_connections,
                keepalive_expiry=30.0,
            ),
            transport=transport,
        )
        cheap_idle_checks(self._http)
        # SNI and certificate check against this name instead of the server's host (a tunnel).
        self._extensions: dict[str, Any] | None = (
            {"sni_hostname": access.tls_server_name} if access.tls_server_name else None
        )
        # Discovery: each root's last answer (ETag, types), and the last combined list.
        self._etags: dict[str, tuple[str, list[APIResource]]] = {}
        self._discovered: list[APIResource] | None = None
        self.aggregated_discovery: bool | None = None  # None until the server has answered
        # Failed requests by (method, HTTP status; 0 when no answer came), for /metrics.
        self.errors: collections.Counter[tuple[str, int]] = collections.Counter()

    def sharing(self) -> Kube:
        """Another client over these connections, pacer and discovery cache that counts its own
        failed requests and 429s: one per component of a process (closed with this one)."""
        other = copy.copy(self)
        other.errors = collections.Counter()
        other.throttled = 0
        other.on_throttled = lambda: None
        return other

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

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
        resp = await self._send(
            method,
            path,
            params=params,
            content=content,
            headers=headers,
            priority=level,
            unless=unless,
        )
        return _decoded(self._checked(method, resp))

    def _checked(self, method: str, resp: httpx.Response) -> bytes:
        """A 2xx response's body; anything else raises its KubeError."""
        if resp.status_code >= 300:
            self.errors[(method, resp.status_code)] += 1
            raise error_for(resp.status_code, resp.content)
        return resp.content

    async def _page(
        self,
        path: str,
        params: Mapping[str, str | int | bool],
        accept: str,
        sent: asyncio.Event | None = None,
    ) -> bytes:
        """One page of a list, as bytes; `sent` is set once its request is out."""
        extensions = self._extensions
        if sent is not None:

            async def trace(name: str, info: Mapping[str, Any]) -> None:
                if name == _REQUEST_SENT:
                    sent.set()

            extensions = {**(extensions or {}), "trace": trace}
        resp = await self._send(
            "GET", path, params=params, headers={"Accept": accept}, extensions=extensions
        )
        return self._checked("GET", resp)

    async def _send(
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
        attempt = 0
        level = _PRIORITY.get() if priority is None else priority
        while True:
            await self._admit(level)
            if unless is not None and unless():
                self.pacer.cancel()
                self._hand_on()
                raise Withdrawn(f"{method} {path}")
            try:
                resp = await self._http.request(
                    method,
                    path,
                    params=_params(params),
                    content=content,
                    headers=headers,
                    extensions=self._extensions if extensions is None else extensions,
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
                return _detached(resp)
            # Rejected before it was carried out (priority and fairness, max-requests-inflight),
            # so sending it again is safe, writes included.
            self.throttled += 1
            self.on_throttled()
            self._release(parse_retry_after(resp.headers.get("Retry-After")))
            attempt += 1
            if attempt > self.retries:
                return _detached(resp)

    async def _admit(self, level: Priority) -> None:
        """Wait until the pacer lets this request go: first come, first served, by priority."""
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

    async def get(
        self,
        path: str,
        *,
        params: Mapping[str, str | int | bool] | None = None,
        accept: str = "application/json",
    ) -> Obj:
        return await self.request("GET", path, params=params, accept=accept)

    async def create(
        self, path: str, body: Obj, *, dry_run: bool = False, field_manager: str = FIELD_MANAGER
    ) -> Obj:
        params: dict[str, str | int | bool] = {"fieldManager": field_manager, **_dry(dry_run)}
        return await self.request("POST", path, body=body, params=params)

    async def create_warnings(self, path: str, body: Obj) -> list[str]:
        """Create `body` as a dry run and return the warnings admission gave (the `Warning`
        headers' texts): how the activator's probe learns that its webhook was called."""
        params: dict[str, str | int | bool] = {"fieldManager": FIELD_MANAGER, **_dry(True)}
        content = json.dumps(body, separators=(",", ":")).encode()
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        resp = await self._send("POST", path, params=params, content=content, headers=headers)
        if resp.status_code >= 300:
            self.errors[("POST", resp.status_code)] += 1
            raise error_for(resp.status_code, resp.content)
        return [_warning_text(h) for h in resp.headers.get_list("warning")]

    async def patch(
        self,
        path: str,
        body: Obj | list[Obj],
        patch_type: PatchType = "merge",
        *,
        dry_run: bool = False,
        field_manager: str = FIELD_MANAGER,
        urgent: bool = False,
        priority: Priority | None = None,
        unless: Callable[[], bool] | None = None,
    ) -> Obj:
        params: dict[str, str | int | bool] = {"fieldManager": field_manager, **_dry(dry_run)}
        return await self.request(
            "PATCH",
            path,
            body=body,
            params=params,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
            urgent=urgent,
            priority=priority,
            unless=unless,
        )

    async def delete(self, path: str) -> Obj:
        return await self.request("DELETE", path)

    async def list_all(
        self,
        path: str,
        *,
        params: Mapping[str, str | int | bool] | None = None,
        metadata_only: bool = False,
        page_size: int = 500,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> tuple[list[Obj], str]:
        """Every object of a collection, in pages; returns the items and the resourceVersion.
        `transform` is applied page by page, so the whole list is never held as it came.

        The next page is asked for once a page's continue token is read from its first bytes,
        and sent before the page is decoded: the API server prepares one while the other is
        decoded (waiting for each page in turn left a start's client idle a third of the time
        its workloads' list took).
        """
        accept = ACCEPT_METADATA_LIST if metadata_only else "application/json"
        query: dict[str, str | int | bool] = {**(params or {}), "limit": page_size}
        items: list[Obj] = []
        ahead: asyncio.Future[bytes] | None = None

        def ask(token: str, sent: asyncio.Event | None = None) -> asyncio.Future[bytes]:
            return asyncio.ensure_future(
                self._page(path, {**query, "continue": token}, accept, sent)
            )

        try:
            raw = await self._page(path, query, accept)
            while True:
                guess = continue_token(raw)
                if guess:
                    sent = asyncio.Event()
                    ahead = ask(guess, sent)
                    # A task runs only once this one waits: decoding first would hold it back.
                    await _until_sent(ahead, sent)
                    self.pages_ahead += sent.is_set()
                page = _decoded(raw)
                found = page.get("items") or []
                items.extend(map(transform, found) if transform is not None else found)
                meta = page.get("metadata") or {}
                token = meta.get("continue")
                if not token:
                    return items, str(meta.get("resourceVersion", ""))
                if ahead is None or token != guess:  # the first bytes said otherwise: ask anew
                    _drop(ahead)
                    ahead = ask(str(token))
                raw, ahead = await ahead, None
        finally:
            _drop(ahead)

    async def watch(
        self, path: str, *, resource_version: str, **options: Unpack[WatchOptions]
    ) -> AsyncIterator[Obj]:
        """Stream watch events (`{"type", "object"}`) from a resourceVersion, one by one, as
        `watch_batches` reads them."""
        async for events in self.watch_batches(path, resource_version=resource_version, **options):
            for event in events:
                yield event

    async def watch_batches(
        self,
        path: str,
        *,
        resource_version: str,
        params: Mapping[str, str | int | bool] | None = None,
        metadata_only: bool = False,
        timeout_seconds: int = 300,
        silence: float | None = None,
    ) -> AsyncIterator[list[Obj]]:
        """Stream watch events (`{"type", "object"}`) from a resourceVersion, each read's events
        together: a streaming list's 200,000 objects are decoded and passed on a read at a time,
        a few each, not one by one. A 410 raises Gone.

        With `silence`, a stream quiet for that many seconds raises Silent; without, only one
        quiet past its own end does.
        """
        query = {
            **(params or {}),
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        accept = ACCEPT_METADATA if metadata_only else "application/json"
        timeout = httpx.Timeout(30.0, read=timeout_seconds + 30.0 if silence is None else silence)
        resp: httpx.Response | None = None
        try:
            async with self._http.stream(
                "GET",
                path,
                params=_params(query),
                # Uncompressed: the API server gzips a streaming list (sendInitialEvents), and the
                # decoder then holds the events after it until more bytes come, for minutes.
                headers={"Accept": accept, "Accept-Encoding": "identity"},
                timeout=timeout,
                extensions=self._extensions,
            ) as resp:
                if resp.status_code >= 300:
                    self.errors[("WATCH", resp.status_code)] += 1
                    raise error_for(resp.status_code, await resp.aread())
                async for lines in _lines(resp.aiter_bytes()):
                    # One JSON text for the lot: the decoder's own cost is paid once a read.
                    events: list[Obj] = json.loads(b"[" + b",".join(lines) + b"]")
                    for i, event in enumerate(events):
                        if event.get("type") == "ERROR":
                            if i:
                                yield events[:i]
                            status = event.get("object") or {}
                            raise error_for(int(status.get("code") or 500), json.dumps(status))
                    yield events
        except httpx.ReadTimeout as e:
            self.errors[("WATCH", 0)] += 1
            raise Silent(0, "Silent", f"nothing came for {timeout.read:.0f} s") from e
        except httpx.TransportError as e:
            self.errors[("WATCH", 0)] += 1
            raise Transient(0, type(e).__name__, str(e) or repr(e)) from e
        finally:
            if resp is not None:  # closed by now: a watch alive at a freeze leaves no cycle
                _detached(resp)

    async def server_time(self) -> datetime | None:
        """The API server's clock (its /version answer's Date), to the second; None if unsaid."""
        resp = await self._send("GET", "/version", headers={"Accept": "application/json"})
        try:
            return parsedate_to_datetime(resp.headers.get("Date", ""))
        except (TypeError, ValueError):
            return None

    async def discover(self) -> list[APIResource]:
        """Every served resource type at its group's preferred version (aggregated discovery).

        Each root is asked again with the ETag of its last answer; when neither changed the server
        answers 304 and this returns the same list object as last time, with nothing parsed. A
        server without aggregated discovery is asked group by group (saying so once).
        """
        answers = [await self._discover_root(root) for root in ("/api", "/apis")]
        if self._discovered is None or any(fresh for _, fresh in answers):
            self._discovered = [r for resources, _ in answers for r in resources]
        return self._discovered

    async def _discover_root(self, root: str) -> tuple[list[APIResource], bool]:
        """A root's resource types, and whether they were read afresh (not a 304)."""
        headers = {"Accept": _ACCEPT_DISCOVERY}
        cached = self._etags.get(root)
        if cached is not None:
            headers["If-None-Match"] = cached[0]
        resp = await self._send("GET", root, headers=headers)
        if resp.status_code == 304 and cached is not None:
            return cached[1], False
        if resp.status_code >= 300:
            self.errors[("GET", resp.status_code)] += 1
            raise error_for(resp.status_code, resp.content)
        answer: Obj = resp.json()
        if answer.get("kind") != "APIGroupDiscoveryList":
            if self.aggregated_discovery is not False:
                log.warning(NO_AGGREGATED_DISCOVERY)
            self.aggregated_discovery = False
            return await self._discover_legacy(root, answer), True
        self.aggregated_discovery = True
        groups = answer.get("items") or []
        resources = [r for group in groups for r in _group_resources(group)]
        if etag := resp.headers.get("ETag"):
            self._etags[root] = (etag, resources)
        return resources, True

    async def discover_by_group(self) -> list[APIResource]:
        """Every served resource type asked group by group, as servers before 1.30 need."""
        return [r for root in ("/api", "/apis") for r in await self._discover_legacy(root)]

    async def _discover_legacy(self, root: str, answer: Obj | None = None) -> list[APIResource]:
        """A root's types from APIVersions (/api) or APIGroupList (/apis), one list per group.

        A group whose list fails (an aggregated API that is down) is left out until next time.
        """
        if answer is None:
            answer = await self.get(root)
        if root == "/api":
            versions = [("", str(v)) for v in (answer.get("versions") or [])[:1]]
        else:
            versions = [
                (str(g.get("name", "")), str((g.get("preferredVersion") or {}).get("version", "")))
                for g in answer.get("groups") or []
            ]
        resources: list[APIResource] = []
        for group, version in versions:
            path = f"{root}/{group}/{version}" if group else f"{root}/{version}"
            try:
                listing = await self.get(path)
            except KubeError as e:
                log.warning("API discovery of %s failed, leaving it out: %s", path.lstrip("/"), e)
                continue
            resources += _listed_resources(group, version, listing)
        return resources


def _group_resources(group: Obj) -> list[APIResource]:
    versions = group.get("versions") or []
    if not versions:
        return []
    preferred = versions[0]  # the server lists the preferred version first
    name = (group.get("metadata") or {}).get("name", "")
    out = []
    for r in preferred.get("resources") or []:
        kind = (r.get("responseKind") or {}).get("kind")
        if not kind:
            continue
        out.append(
            APIResource(
                group=name,
                version=preferred.get("version", ""),
                resource=r.get("resource", ""),
                kind=kind,
                namespaced=r.get("scope") == "Namespaced",
                verbs=frozenset(r.get("verbs") or ()),
                subresources=frozenset(
                    s.get("subresource", "") for s in r.get("subresources") or ()
                ),
                singular=r.get("singularResource", ""),
                short_names=tuple(r.get("shortNames") or ()),
            )
        )
    return out


def _listed_resources(group: str, version: str, listing: Obj) -> list[APIResource]:
    """The types in an APIResourceList; `deployments/scale` entries become subresources."""
    entries = [r for r in listing.get("resources") or [] if r.get("name")]
    subresources: dict[str, set[str]] = collections.defaultdict(set)
    for r in entries:
        parent, slash, sub = str(r["name"]).partition("/")
        if slash:
            subresources[parent].add(sub)
    return [
        APIResource(
            group=group,
            version=version,
            resource=str(r["name"]),
            kind=str(r["kind"]),
            namespaced=bool(r.get("namespaced")),
            verbs=frozenset(r.get("verbs") or ()),
            subresources=frozenset(subresources.get(str(r["name"]), ())),
            singular=str(r.get("singularName") or ""),
            short_names=tuple(r.get("shortNames") or ()),
        )
        for r in entries
        if "/" not in str(r["name"]) and r.get("kind")
    ]


def _warning_text(header: str) -> str:
    """The text of one `Warning: 299 - "text"` header (RFC 7234), or the header as it is."""
    code, _, rest = header.partition(" ")
    agent, _, text = rest.partition(" ")
    if code.isdigit() and agent and text.startswith('"') and text.endswith('"'):
        return text[1:-1].replace('\\"', '"')
    return header


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[bytes]]:
    """The non-empty lines of a byte stream, those each chunk completes together. A watch sends
    one JSON event a line, unencoded (see `Kube.watch_batches`): split as bytes, without httpx's
    text decoding and line decoder, which cost more than the JSON decoding of each event (a
    restart streams 200,000 of them in the scale row)."""
    rest = b""
    async for chunk in chunks:
        lines = chunk.split(b"\n")
        if rest:
            lines[0] = rest + lines[0]
        rest = lines.pop()
        complete = [line for line in lines if line.strip()]
        if complete:
            yield complete
    if rest.strip():
        yield [rest]


def _params(params: Mapping[str, str | int | bool] | None) -> dict[str, str] | None:
    if not params:
        return None
    return {
        k: ("true" if v is True else "false" if v is False else str(v)) for k, v in params.items()
    }


def _dry(dry_run: bool) -> dict[str, str | int | bool]:
    return {"dryRun": "All"} if dry_run else {}
