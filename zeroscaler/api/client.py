"""The one door to the Kubernetes API: `Kube`, a paced client speaking plain JSON dicts.

Objects stay plain dicts and cost little memory. Requests, lists, watches and discovery each live
in a module of their own (`transport`, `lists`, `streams`, `discovery`); this class puts them
behind one object that every part of zeroscaler is handed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Literal, Unpack

import httpx

from zeroscaler.api import discovery, lists, streams
from zeroscaler.api.credentials import ClusterAccess
from zeroscaler.api.streams import WatchOptions
from zeroscaler.api.transport import DEFAULT_LIMITS, ClientLimits, Obj, Priority, Transport
from zeroscaler.core.annotations import FIELD_MANAGER
from zeroscaler.core.kinds import APIResource

PatchType = Literal["merge", "strategic", "json", "apply"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


class Kube(Transport):
    """An async client for the API server speaking plain JSON dicts.

    Requests other than watches are paced (`zeroscaler.core.pacing`): a 429 is sent again after
    its Retry-After, up to `retries` times, and holds back the requests behind it meanwhile.
    """

    def __init__(
        self,
        access: ClusterAccess,
        limits: ClientLimits = DEFAULT_LIMITS,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        super().__init__(access, limits, transport=transport)
        self._discovery = discovery.DiscoveryCache()  # shared by `sharing()` copies

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    @property
    def aggregated_discovery(self) -> bool | None:
        """Whether the server answers discovery aggregated; None until it has answered."""
        return self._discovery.aggregated

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
        resp = await self.send("POST", path, params=params, content=content, headers=headers)
        self.checked("POST", resp)
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
        """Every object of a collection and the list's resourceVersion (`lists.list_all`)."""
        return await lists.list_all(
            self,
            path,
            params=params,
            metadata_only=metadata_only,
            page_size=page_size,
            transform=transform,
        )

    def watch_batches(
        self, path: str, *, resource_version: str, **options: Unpack[WatchOptions]
    ) -> AsyncIterator[list[Obj]]:
        """Watch events from a resourceVersion, each read's together (`streams.watch_batches`)."""
        return streams.watch_batches(self, path, resource_version=resource_version, **options)

    async def watch(
        self, path: str, *, resource_version: str, **options: Unpack[WatchOptions]
    ) -> AsyncIterator[Obj]:
        """Watch events (`{"type", "object"}`) from a resourceVersion, one by one."""
        async for events in self.watch_batches(path, resource_version=resource_version, **options):
            for event in events:
                yield event

    async def discover(self) -> list[APIResource]:
        """Every served resource type at its group's preferred version (`discovery`)."""
        return await self._discovery.discover(self)

    async def discover_by_group(self) -> list[APIResource]:
        """Every served resource type asked group by group, as servers before 1.30 need."""
        return await discovery.discover_by_group(self)

    async def server_time(self) -> datetime | None:
        """The API server's clock (its /version answer's Date), to the second; None if unsaid."""
        resp = await self.send("GET", "/version", headers={"Accept": "application/json"})
        try:
            return parsedate_to_datetime(resp.headers.get("Date", ""))
        except (TypeError, ValueError):
            return None


def _warning_text(header: str) -> str:
    """The text of one `Warning: 299 - "text"` header (RFC 7234), or the header as it is."""
    code, _, rest = header.partition(" ")
    agent, _, text = rest.partition(" ")
    if code.isdigit() and agent and text.startswith('"') and text.endswith('"'):
        return text[1:-1].replace('\\"', '"')
    return header


def _dry(dry_run: bool) -> dict[str, str | int | bool]:
    return {"dryRun": "All"} if dry_run else {}
