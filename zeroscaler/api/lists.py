"""Lists in pages: the next page asked for while the page before it is decoded."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from typing import Any

from zeroscaler.api.transport import Obj, Transport, decoded, outcome_seen

# Ask for metadata only: lists of many objects then cost a fraction of the bandwidth and memory.
ACCEPT_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)

# A list's metadata, its continue token among it, comes before its items.
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"\\]+)"')
_HEAD = 4096  # bytes searched for it: a list's metadata is well inside

# httpcore's trace event once a request is written whole (the `trace` request extension).
_REQUEST_SENT = "http11.send_request_body.complete"


def continue_token(page: bytes) -> str:
    """The continue token read from a list page's first bytes, before its items; "" when none is
    there. Only a guess (a page is not decoded to find it): the decoded page has the last word."""
    end = page.find(b'"items"', 0, _HEAD)
    found = _CONTINUE.search(page, 0, end if end >= 0 else _HEAD)
    return found.group(1).decode("ascii", "replace") if found else ""


async def fetch_page(
    api: Transport,
    path: str,
    params: Mapping[str, str | int | bool],
    accept: str,
    sent: asyncio.Event | None = None,
) -> bytes:
    """One page of a list, as bytes; `sent` is set once its request is out."""
    extensions = api.extensions
    if sent is not None:

        async def trace(name: str, info: Mapping[str, Any]) -> None:
            if name == _REQUEST_SENT:
                sent.set()

        extensions = {**(extensions or {}), "trace": trace}
    resp = await api.send(
        "GET", path, params=params, headers={"Accept": accept}, extensions=extensions
    )
    return api.checked("GET", resp)


async def list_all(
    api: Transport,
    path: str,
    *,
    params: Mapping[str, str | int | bool] | None = None,
    metadata_only: bool = False,
    page_size: int = 500,
    transform: Callable[[Obj], Obj] | None = None,
) -> tuple[list[Obj], str]:
    """Every object of a collection, in pages; returns the items and the resourceVersion.
    `transform` is applied page by page, so the whole list is never held as it came.

    The next page is asked for once a page's continue token is read from its first bytes, and
    sent before the page is decoded: the API server prepares one while the other is decoded
    (waiting for each page in turn left the client idle while the server worked).
    """
    accept = ACCEPT_METADATA_LIST if metadata_only else "application/json"
    query: dict[str, str | int | bool] = {**(params or {}), "limit": page_size}
    items: list[Obj] = []
    ahead: asyncio.Future[bytes] | None = None

    def ask(token: str, sent: asyncio.Event | None = None) -> asyncio.Future[bytes]:
        return asyncio.ensure_future(
            fetch_page(api, path, {**query, "continue": token}, accept, sent)
        )

    try:
        raw = await fetch_page(api, path, query, accept)
        while True:
            guess = continue_token(raw)
            if guess:
                sent = asyncio.Event()
                ahead = ask(guess, sent)
                # A task runs only once this one waits: decoding first would hold it back.
                await _until_sent(ahead, sent)
                api.pages_ahead += sent.is_set()
            page = decoded(raw)
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
