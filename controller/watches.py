"""Shared metadata-only watches: one per resource type, started on first use (or warmed ahead of
it on a start), stopped on last."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar, cast

from zeroscaler.api import Kube, Obj
from zeroscaler.cluster.informer import Informer, Store, WatchEvent
from zeroscaler.core.activity import Scope, shrink, shrink_with_due
from zeroscaler.core.kinds import APIResource

log = logging.getLogger(__name__)

Path = tuple[str, ...]  # a due-time field, e.g. ("status", "renewalTime")
Listener = Callable[[APIResource, WatchEvent], None]
SyncListener = Callable[[APIResource], None]
FirstListListener = Callable[[APIResource, Store], None]
U = TypeVar("U", bound=Hashable)


# A compact read-only Mapping, not a dict: the store and every reader only use get(). Typed
# once here rather than by a call around each of a list's objects.
_shrink = cast(Callable[[Obj], Obj], shrink)


def _first_sync_logger(informer: Informer, resource: APIResource) -> Callable[[], None]:
    """Log once how long the first list took and what it holds (a start's cost, per type)."""
    began = asyncio.get_running_loop().time()
    logged = False

    def log_first() -> None:
        nonlocal logged
        if not logged:
            logged = True
            seconds = round(asyncio.get_running_loop().time() - began, 3)
            extra = {"resource": resource.group_resource, "objects": len(informer.store)}
            log.info("watch synced", extra={**extra, "seconds": seconds})

    return log_first


class WatchHub(Generic[U]):
    """Reference-counted informers keyed by resource type; events go to one listener.

    Each user is also indexed by the namespaces it watches a type in, so an event asks only the
    users it may concern: with 10,000 workloads over 50 types, 200 a type, each in its own
    namespace, an event is checked against a few instead of all 200.

    With `on_first_list`, a watch's first list reaches no listener object by object: it is handed
    over whole, once, before `on_synced` (a start lists 200,000 objects in the scale row).
    """

    def __init__(
        self,
        kube: Kube,
        listener: Listener,
        on_synced: SyncListener | None = None,
        *,
        on_first_list: FirstListListener | None = None,
        streaming: bool = False,
    ) -> None:
        self._kube = kube
        self._streaming = streaming  # list as watch-list streams where the server offers them
        self._listener = listener
        self._on_synced = on_synced
        self._on_first_list = on_first_list
        self._informers: dict[APIResource, tuple[Informer, asyncio.Task[None]]] = {}
        self._users: dict[APIResource, set[U]] = {}
        self._scopes: dict[APIResource, dict[U, Scope]] = {}
        self._everywhere: dict[APIResource, set[U]] = {}
        # Tuples, not sets: most namespaces have one user a type, and a set of one is 216 bytes.
        self._by_namespace: dict[APIResource, dict[str, tuple[U, ...]]] = {}
        # Due-time fields each user reads of a type, and those its running watch keeps: a type
        # anyone reads due times of is watched whole (trimmed to those fields), else metadata only.
        self._due_wanted: dict[APIResource, dict[U, frozenset[Path]]] = {}
        self._due_kept: dict[APIResource, frozenset[Path]] = {}

    @property
    def resources(self) -> list[APIResource]:
        return list(self._informers)

    def users(self, resource: APIResource) -> set[U]:
        return self._users.get(resource, set())

    def users_in(self, resource: APIResource, namespace: str) -> Iterable[U]:
        """The users an object of `resource` in `namespace` may concern (cluster-scoped: all)."""
        if not resource.namespaced or not namespace:
            return self.users(resource)
        here = self._by_namespace.get(resource, {}).get(namespace, ())
        return itertools.chain(self._everywhere.get(resource, ()), here)

    def set_scope(self, resource: APIResource, user: U, scope: Scope) -> None:
        """Index `user` under the namespaces it watches `resource` in (None: every namespace)."""
        scopes = self._scopes.setdefault(resource, {})
        if user in scopes and scopes[user] == scope:
            return
        self._unindex(resource, user)
        scopes[user] = scope
        if scope is None:
            self._everywhere.setdefault(resource, set()).add(user)
            return
        by_namespace = self._by_namespace.setdefault(resource, {})
        for namespace in scope:
            by_namespace[namespace] = (*by_namespace.get(namespace, ()), user)

    def _unindex(self, resource: APIResource, user: U) -> None:
        scopes = self._scopes.get(resource, {})
        if user not in scopes:
            return
        scope = scopes.pop(user)
        if scope is None:
            self._everywhere[resource].discard(user)
            return
        by_namespace = self._by_namespace[resource]
        for namespace in scope:
            users = tuple(u for u in by_namespace[namespace] if u != user)
            if users:
                by_namespace[namespace] = users
            else:
                del by_namespace[namespace]

    def due_paths(self, resource: APIResource) -> frozenset[Path]:
        """The due-time fields the watch of `resource` keeps (none: a metadata-only watch)."""
        return self._due_kept.get(resource, frozenset())

    def set_due(self, resource: APIResource, user: U, paths: frozenset[Path]) -> None:
        """Let `user` read the due times at `paths` of `resource`; a running watch whose fields
        change is started again (listed once more) with the new ones."""
        wanted = self._due_wanted.setdefault(resource, {})
        if paths:
            wanted[user] = paths
        else:
            wanted.pop(user, None)
        if not wanted:
            del self._due_wanted[resource]
        if resource in self._informers and self._wanted_paths(resource) != self.due_paths(resource):
            _, task = self._informers.pop(resource)
            task.cancel()
            log.info(
                "watch restarted for its due times", extra={"resource": resource.group_resource}
            )
            self._start(resource)

    def _wanted_paths(self, resource: APIResource) -> frozenset[Path]:
        wanted = self._due_wanted.get(resource)
        return frozenset().union(*wanted.values()) if wanted else frozenset()

    def informer(self, resource: APIResource) -> Informer | None:
        entry = self._informers.get(resource)
        return entry[0] if entry else None

    def acquire(self, resource: APIResource, user: U, scope: Scope = None) -> Informer | None:
        """Count `user` in, watching `scope`; returns the informer when it was already running
        (its store is warm)."""
        users = self._users.setdefault(resource, set())
        users.add(user)
        self.set_scope(resource, user, scope)
        if resource in self._informers:
            return self._informers[resource][0]
        self._start(resource)
        return None

    def warm(self, resource: APIResource) -> None:
        """Start listing `resource` before anyone uses it. Its events concern no one until a user
        is counted in (after that user's access checks), who then finds its store warm."""
        if resource not in self._informers:
            self._start(resource, warm=True)

    def drop_unused(self) -> list[APIResource]:
        """Stop the watches warmed that nobody came to use; returns their types."""
        unused = [r for r in self._informers if not self._users.get(r)]
        for resource in unused:
            self._due_kept.pop(resource, None)
            _, task = self._informers.pop(resource)
            task.cancel()
            log.info("warm watch unused, stopped", extra={"resource": resource.group_resource})
        return unused

    def _start(self, resource: APIResource, *, warm: bool = False) -> None:
        due = self._wanted_paths(resource)
        if due:
            self._due_kept[resource] = due
        else:
            self._due_kept.pop(resource, None)
        informer = Informer(
            self._kube,
            resource.api_path(),
            metadata_only=not due,
            transform=cast(Callable[[Obj], Obj], shrink_with_due(due)) if due else _shrink,
            streaming=self._streaming,
            initial_events=self._on_first_list is None,
        )
        informer.add_handler(lambda event: self._listener(resource, event))
        informer.add_sync_handler(_first_sync_logger(informer, resource))
        if self._on_first_list is not None:
            on_first_list = self._on_first_list

            def first_list() -> None:
                if informer.lists == 1:
                    on_first_list(resource, informer.store)

            informer.add_sync_handler(first_list)
        if self._on_synced is not None:
            on_synced = self._on_synced
            informer.add_sync_handler(lambda: on_synced(resource))
        task = asyncio.create_task(informer.run(), name=f"watch {resource.group_resource}")
        self._informers[resource] = (informer, task)
        log.info("watch started", extra={"resource": resource.group_resource, "warm": warm})

    def release(self, resource: APIResource, user: U) -> None:
        """Count `user` out; the last one out stops the watch."""
        users = self._users.get(resource)
        if users is None:
            return
        users.discard(user)
        self._unindex(resource, user)
        if users:
            self.set_due(resource, user, frozenset())
            return
        del self._users[resource]
        for index in (self._scopes, self._everywhere, self._by_namespace):
            index.pop(resource, None)
        self._due_wanted.pop(resource, None)
        self._due_kept.pop(resource, None)
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
        for index in (self._users, self._scopes, self._everywhere, self._by_namespace):
            index.clear()
        self._due_wanted.clear()
        self._due_kept.clear()
