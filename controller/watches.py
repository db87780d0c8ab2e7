"""Shared metadata-only watches: one per resource type, started on first use, stopped on last."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, cast

from zeroscaler.core.activity import shrink
from zeroscaler.core.kinds import APIResource
from zeroscaler.kube import Kube, Obj
from zeroscaler.watching import Informer, WatchEvent

log = logging.getLogger(__name__)

Listener = Callable[[APIResource, WatchEvent], None]
SyncListener = Callable[[APIResource], None]
U = TypeVar("U", bound=Hashable)


def _shrink(obj: Obj) -> Obj:
    # A compact read-only Mapping, not a dict: the store and every reader only use get().
    return cast(Obj, shrink(obj))


class WatchHub(Generic[U]):
    """Reference-counted informers keyed by resource type; events go to one listener."""

    def __init__(
        self, kube: Kube, listener: Listener, on_synced: SyncListener | None = None
    ) -> None:
        self._kube = kube
        self._listener = listener
        self._on_synced = on_synced
        self._informers: dict[APIResource, tuple[Informer, asyncio.Task[None]]] = {}
        self._users: dict[APIResource, set[U]] = {}

    @property
    def resources(self) -> list[APIResource]:
        return list(self._informers)

    def users(self, resource: APIResource) -> set[U]:
        return self._users.get(resource, set())

    def informer(self, resource: APIResource) -> Informer | None:
        entry = self._informers.get(resource)
        return entry[0] if entry else None

    def acquire(self, resource: APIResource, user: U) -> Informer | None:
        """Count `user` in; returns the informer when it was already running (its store is warm)."""
        users = self._users.setdefault(resource, set())
        users.add(user)
        if resource in self._informers:
            return self._informers[resource][0]
        informer = Informer(self._kube, resource.api_path(), metadata_only=True, transform=_shrink)
        informer.add_handler(lambda event: self._listener(resource, event))
        if self._on_synced is not None:
            on_synced = self._on_synced
            informer.add_sync_handler(lambda: on_synced(resource))
        task = asyncio.create_task(informer.run(), name=f"watch {resource.group_resource}")
        self._informers[resource] = (informer, task)
        log.info("watch started", extra={"resource": resource.group_resource})
        return None

    def release(self, resource: APIResource, user: U) -> None:
        """Count `user` out; the last one out stops the watch."""
        users = self._users.get(resource)
        if users is None:
            return
        users.discard(user)
        if users:
            return
        del self._users[resource]
        entry = self._informers.pop(resource, None)
        if entry is not None:
            entry[1].cancel()
            log.info("watch stopped", extra={"resource": resource.group_resource})

    async def aclose(self) -> None:
        tasks = [task for _, task in self._informers.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._informers.clear()
        self._users.clear()
