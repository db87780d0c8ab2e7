"""Watches: events streamed from a resourceVersion, decoded a read at a time."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import TypedDict

import httpx

from zeroscaler.api.errors import Silent, Transient, error_for
from zeroscaler.api.transport import Obj, Transport, detached, query_params

# Ask for metadata only: watches of many objects then cost a fraction of the bandwidth and memory.
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


class WatchOptions(TypedDict, total=False):
    """How a watch is asked for, beyond where it starts (`watch_batches`)."""

    params: Mapping[str, str | int | bool] | None
    metadata_only: bool
    timeout_seconds: int
    silence: float | None


async def watch_batches(
    api: Transport,
    path: str,
    *,
    resource_version: str,
    params: Mapping[str, str | int | bool] | None = None,
    metadata_only: bool = False,
    timeout_seconds: int = 300,
    silence: float | None = None,
) -> AsyncIterator[list[Obj]]:
    """Stream watch events (`{"type", "object"}`) from a resourceVersion, each read's events
    together: a streaming list's many objects are decoded and passed on a read at a time, a few
    each, not one by one. A 410 raises Gone.

    With `silence`, a stream quiet for that many seconds raises Silent; without, only one quiet
    past its own end does. Watches are not paced: each holds a connection of its own.
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
        async with api.http.stream(
            "GET",
            path,
            params=query_params(query),
            # Uncompressed: the API server gzips a streaming list (sendInitialEvents), and the
            # decoder then holds the events after it until more bytes come, for minutes.
            headers={"Accept": accept, "Accept-Encoding": "identity"},
            timeout=timeout,
            extensions=api.extensions,
        ) as resp:
            if resp.status_code >= 300:
                api.errors[("WATCH", resp.status_code)] += 1
                raise error_for(resp.status_code, await resp.aread())
            async for lines in split_lines(resp.aiter_bytes()):
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
        api.errors[("WATCH", 0)] += 1
        raise Silent(0, "Silent", f"nothing came for {timeout.read:.0f} s") from e
    except httpx.TransportError as e:
        api.errors[("WATCH", 0)] += 1
        raise Transient(0, type(e).__name__, str(e) or repr(e)) from e
    finally:
        if resp is not None:  # closed by now: a watch alive at a freeze leaves no cycle
            detached(resp)


async def split_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[list[bytes]]:
    """The non-empty lines of a byte stream, those each chunk completes together. A watch sends
    one JSON event a line, unencoded (see `watch_batches`): split as bytes, without httpx's text
    decoding and line decoder, which cost more than the JSON decoding of each event."""
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
