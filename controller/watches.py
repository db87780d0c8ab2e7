"""Shared metadata-only watches: one set per resource type, started on first use (or warmed ahead
of it on a start), stopped on last, reaching only as far as their users' scopes.

A type whose users all watch it in lists of namespaces is listed and watched in each of those
namespaces alone; one that any user watches everywhere (or a cluster-scoped one) is watched
cluster-wide, within a budget of namespace-scoped watches (`zeroscaler.core.reach`). The
namespaces a type is watched in follow its users live. When a type moves between one
cluster-wide watch and watches by namespace, the new watches list first and take over only once
listed, each namespace handed over so that no change is missed or told twice, and nothing a list
found is told as a change (`core/reach.py`, `handover`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from zeroscaler.api import Kube, Obj
from zeroscaler.cluster.informer import Informer, ListWatch, Store, WatchEvent, key_of
from zeroscaler.core.activity import Scope, shrink, shrink_with_due
from zeroscaler.core.kinds import APIResource
from zeroscaler.core.reach import handover, plan, version_order
from zeroscaler.runtime.clock import Clock, LoopClock

log = logging.getLogger(__name__)

Path = tuple[str, ...]  # a due-time field, e.g. ("status", "renewalTime")
U = TypeVar("U", bound=Hashable)
T = TypeVar("T")
Listener = Callable[[APIResource, WatchEvent], None]
# A type's objects in `Scope` (None: all) listed, or listed again.
SyncListener = Callable[[APIResource, Scope], None]
ListedListener = Callable[[APIResource, int], None]  # how many objects a watch's list brought
RESERVED = 128  # a watch client's connections kept for all but the shared watches by namespace
NOTHING: frozenset[str] = frozenset()

# A compact read-only Mapping, not a dict: the store and every reader only use get(). Typed
# once here rather than by a call around each of a list's objects.
_shrink = cast(Callable[[Obj], Obj], shrink)


class Channel:
    """One watch of a type: cluster-wide (`namespace` None) or in one namespace."""

    __slots__ = ("informer", "namespace", "skip", "stopped", "task")

    def __init__(self, informer: Informer, namespace: str | None) -> None:
        self.informer = informer
        self.namespace = namespace
        self.task: asyncio.Task[None] | None = None
        self.stopped = False
        # Per namespace handed over to it: the resourceVersion through which its events were
        # told already by the watch that held the namespace before.
        self.skip: dict[str, int] = {}

    @property
    def synced(self) -> bool:
        return self.informer.synced.is_set()

    @property
    def store(self) -> Store:
        return self.informer.store

    def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()


class Waiting(Generic[U]):
    """Users waiting to read namespaces not listed yet (None: every namespace), indexed by the
    namespace they wait for: a namespace listed finds its users without a walk of all."""

    def __init__(self) -> None:
        self.by_user: dict[U, Scope] = {}
        self._by_namespace: dict[str, set[U]] = {}

    def __contains__(self, user: object) -> bool:
        return user in self.by_user

    def __len__(self) -> int:
        return len(self.by_user)

    def wait(self, user: U, wanted: Scope) -> None:
        self.forget(user)
        self.by_user[user] = wanted
        for namespace in wanted or ():
            self._by_namespace.setdefault(namespace, set()).add(user)

    def forget(self, user: U) -> Scope:
        """Stop `user` waiting; what it waited for (nothing: the empty set)."""
        wanted = self.by_user.pop(user, NOTHING)
        for namespace in wanted or ():
            users = self._by_namespace[namespace]
            users.discard(user)
            if not users:
                del self._by_namespace[namespace]
        return wanted

    def served(self, namespaces: Scope) -> list[tuple[U, Scope]]:
        """`namespaces` (None: all) listed: who may read what now, no longer waiting for it."""
        if namespaces is None:
            found = list(self.by_user.items())
            self.by_user.clear()
            self._by_namespace.clear()
            return found
        now: dict[U, set[str]] = {}
        for namespace in namespaces:
            for user in self._by_namespace.pop(namespace, ()):
                now.setdefault(user, set()).add(namespace)
        for user, read in now.items():
            left = cast(frozenset[str], self.by_user[user]) - read
            if left:
                self.by_user[user] = left
            else:
                del self.by_user[user]
        return [(user, frozenset(read)) for user, read in now.items()]


class SharedWatch(Generic[U]):
    """The watches of one type, and what their users read of it: each namespace's objects from
    the one listed watch that serves it, read as a store is (`Readable`)."""

    def __init__(self, hub: WatchHub[U], resource: APIResource) -> None:
        self._hub = hub
        self.resource = resource
        self.cluster: Channel | None = None  # the cluster-wide watch, if any
        self.promoted = False  # whether the cluster-wide watch serves every namespace
        self.spaced: dict[str, Channel] = {}  # the watches by namespace
        self.reach: Scope = NOTHING  # where it is to watch (None: cluster-wide)
        self.ready = asyncio.Event()  # every namespace of its reach served by a listed watch
        self._announced = False  # its first readiness logged
        self._began = hub.clock.monotonic()
        # Users that may not read yet all they watch: what they wait for (None: all).
        self.waiting: Waiting[U] = Waiting()
        self._unlisted: set[str] = set()  # namespaces of its reach whose watch has not listed

    # What a reader sees.

    def serving(self, namespace: str) -> Channel | None:
        """The listed watch whose objects of `namespace` are authoritative, if any."""
        if self.promoted:
            return self.cluster
        channel = self.spaced.get(namespace)
        return channel if channel is not None and channel.synced else None

    def synced_in(self, namespaces: Scope) -> bool:
        """Whether every namespace of `namespaces` (None: all) is served by a listed watch."""
        if self.promoted:
            return True
        if namespaces is None or not self.resource.namespaced:
            return False
        return all(self.serving(n) is not None for n in namespaces)

    def in_namespaces(self, namespaces: Collection[str] | None) -> Iterator[Obj]:
        if namespaces is None:
            return itertools.chain.from_iterable(s.in_namespaces(None) for s in self._stores())
        return self._objects_in(namespaces)

    def _objects_in(self, namespaces: Collection[str]) -> Iterator[Obj]:
        for namespace in namespaces:
            channel = self.serving(namespace)
            if channel is not None:
                yield from channel.store.named(namespace).values()

    def _stores(self) -> Iterator[Store]:
        if self.promoted and self.cluster is not None:
            yield self.cluster.store
            return
        for channel in self.spaced.values():
            if channel.synced:
                yield channel.store

    def namespaces(self) -> Collection[str]:
        if self.promoted and self.cluster is not None:
            return self.cluster.store.namespaces()
        return [n for n, c in self.spaced.items() if c.synced and n in c.store.namespaces()]

    def summary(self, namespace: str, name: str, work_out: Callable[[Iterable[Obj]], T]) -> T:
        channel = self.serving(namespace)
        if channel is None:
            return work_out(())
        return channel.store.summary(namespace, name, work_out)

    def values(self) -> Iterator[Obj]:
        return self.in_namespaces(None)

    def __len__(self) -> int:
        return sum(len(s) for s in self._stores())

    @property
    def watches(self) -> int:
        """How many watches (connections) it holds now."""
        return len(self.spaced) + (self.cluster is not None)

    def channels(self) -> list[Channel]:
        return [*self.spaced.values(), *([self.cluster] if self.cluster else [])]

    # Following where it is to reach.

    def set_reach(self, reach: Scope) -> None:
        """Watch cluster-wide (None) or in exactly these namespaces, without a gap: a watch that
        is to take over from another lists first."""
        self.reach = reach
        if reach is None:
            if self.cluster is None:
                self.cluster = self._open(None)
            elif self.cluster.synced and not self.promoted:
                self._promote()
        else:
            for namespace in reach - self.spaced.keys():
                self.spaced[namespace] = self._open(namespace)
                self._unlisted.add(namespace)
            for namespace in self.spaced.keys() - reach:
                self.spaced.pop(namespace).stop()
                self._unlisted.discard(namespace)
            if self.promoted:
                self._demote_when_listed()
            elif self.cluster is not None:
                self.cluster.stop()  # it was to take over, and is no longer wanted
                self.cluster = None
        self._settle()

    def add(self, namespaces: Iterable[str]) -> None:
        """More namespaces to watch, while watching by namespace."""
        if self.reach is not None:
            self.set_reach(self.reach | frozenset(namespaces))

    def discard(self, namespaces: Iterable[str]) -> None:
        """Namespaces nobody watches any longer, while watching by namespace."""
        if self.reach is not None:
            self.set_reach(self.reach - frozenset(namespaces))

    def stop(self) -> None:
        for channel in self.channels():
            channel.stop()
        self.spaced.clear()
        self._unlisted.clear()
        self.cluster, self.promoted = None, False

    def _open(self, namespace: str | None) -> Channel:
        resource = self.resource
        due = self._hub.due_paths(resource)
        # A connection of its own: in one pool with a thousand others, each request's start and
        # end would walk them all.
        informer = Informer(
            self._hub.kube.dedicated(),
            resource.api_path(namespace),
            ListWatch(metadata_only=not due, streaming=self._hub.streaming, initial_events=False),
            transform=cast(Callable[[Obj], Obj], shrink_with_due(due)) if due else _shrink,
            owns_client=True,
        )
        channel = Channel(informer, namespace)
        informer.add_handler(lambda event: self._on_event(channel, event))
        informer.add_sync_handler(lambda: self._on_listed(channel))
        name = f"watch {resource.group_resource} in {namespace or 'every namespace'}"
        channel.task = asyncio.create_task(informer.run(), name=name)
        return channel

    def _on_event(self, channel: Channel, event: WatchEvent) -> None:
        if channel.stopped or (channel is self.cluster) is not self.promoted:
            return  # not serving (yet): its store follows, and it tells no one
        if channel.skip:
            namespace = key_of(event.obj)[0]
            through = channel.skip.get(namespace)
            if through is not None:
                version = version_order((event.obj.get("metadata") or {}).get("resourceVersion"))
                if version is not None and version <= through:
                    return  # told already by the watch it took the namespace over from
                del channel.skip[namespace]
        self._hub.listener(self.resource, event)

    def _on_listed(self, channel: Channel) -> None:
        if channel.stopped:
            return
        first = channel.informer.lists == 1
        if first:
            self._hub.on_listed(self.resource, len(channel.store))
        if channel is self.cluster:
            if not self.promoted and self.reach is None:
                self._promote()
            elif self.promoted:
                self._hub.on_synced(self.resource, None)  # listed again after it expired
        else:
            self._unlisted.discard(cast(str, channel.namespace))
            if self.promoted:
                self._demote_when_listed()
            else:
                namespace = frozenset({cast(str, channel.namespace)})
                if first:
                    self._served(namespace)
                self._hub.on_synced(self.resource, namespace)
        self._settle()

    def _promote(self) -> None:
        """The cluster-wide watch has listed: it takes every namespace over from the watches by
        namespace, and the users waiting for namespaces nobody watched read them."""
        cluster = cast(Channel, self.cluster)
        self.promoted = True
        for namespace, channel in self.spaced.items():
            if channel.synced:
                self._hand_over(namespace, channel, cluster)
            channel.stop()
        self.spaced.clear()
        self._unlisted.clear()
        self._served(None)
        self._hub.on_synced(self.resource, None)

    def _demote_when_listed(self) -> None:
        """Narrowing from cluster-wide: once every namespace of the reach is listed by a watch of
        its own, each takes its namespace over and the cluster-wide watch stops."""
        reach = self.reach
        if reach is None or self._unlisted:
            return
        cluster = cast(Channel, self.cluster)
        self.promoted = False
        for namespace in reach:
            self._hand_over(namespace, cluster, self.spaced[namespace])
        cluster.stop()
        self.cluster = None

    def _hand_over(self, namespace: str, old: Channel, new: Channel) -> None:
        moved = handover(
            old.informer.resource_version,
            old.store.named(namespace),
            new.informer.resource_version,
            new.store.named(namespace),
        )
        if moved.skip_through is not None:
            new.skip[namespace] = moved.skip_through
        for kind, obj, was in moved.changes:
            self._hub.listener(self.resource, WatchEvent(kind, cast(Obj, obj), cast(Obj, was)))

    def _served(self, namespaces: Scope) -> None:
        """`namespaces` (None: all) are now read from a listed watch: the users waiting for them
        read them once, as an initial list, and stop waiting."""
        for user, now in self.waiting.served(namespaces):
            self._hub.on_served(self.resource, self, user, now)

    def enter(self, user: U, scope: Scope, known: Scope) -> Scope:
        """`user` now watches `scope`, and had watched `known`: what it may read at once, listed
        already, that it had not read (the caller reads it as an initial list); it waits for the
        rest, told through the hub's `on_served`."""
        if user in self.waiting:  # of what it had watched, it had not read this
            unread = self.waiting.forget(user)
            known = NOTHING if unread is None or known is None else known - unread
        if known is None:
            return NOTHING  # it had read every namespace
        new = None if scope is None else scope - known
        if self.promoted or (new is not None and not new):
            return new
        if new is None:
            self.waiting.wait(user, None)
            return NOTHING
        ready = frozenset(n for n in new if self.serving(n) is not None)
        if new - ready:
            self.waiting.wait(user, new - ready)
        return ready

    def _settle(self) -> None:
        """Keep `ready` (and the log of its first time) true to the watches' state."""
        if not (self.promoted or (self.reach is not None and not self._unlisted)):
            self.ready.clear()
            return
        if self.ready.is_set():
            return
        self.ready.set()
        if not self._announced:
            self._announced = True
            seconds = round(self._hub.clock.monotonic() - self._began, 3)
            extra = {"resource": self.resource.group_resource, "objects": len(self)}
            log.info("watch synced", extra={**extra, "watches": self.watches, "seconds": seconds})


class _Wants(Generic[U]):
    """Who watches one type where, and where a start warms it."""

    __slots__ = ("by_namespace", "everywhere", "scopes", "users", "warm", "warm_only")

    def __init__(self) -> None:
        self.users: set[U] = set()
        self.scopes: dict[U, Scope] = {}
        self.everywhere: set[U] = set()
        # Tuples, not sets: most namespaces have one user a type, and a set of one is 216 bytes.
        self.by_namespace: dict[str, tuple[U, ...]] = {}
        self.warm: Scope = NOTHING  # what a start warms (None: everywhere)
        self.warm_only = 0  # warm namespaces no user watches

    def size(self, resource: APIResource) -> int | None:
        """How many namespaces it is wanted in (None: everywhere)."""
        if not resource.namespaced or self.everywhere or self.warm is None:
            return None
        return len(self.by_namespace) + self.warm_only

    def wanted(self) -> frozenset[str]:
        return frozenset(self.by_namespace).union(self.warm or ())

    def is_wanted(self, namespace: str) -> bool:
        warm = self.warm
        return namespace in self.by_namespace or warm is None or namespace in warm


@dataclass(frozen=True, slots=True)
class Listeners(Generic[U]):
    """Who a hub tells: each event, where a list came (`on_synced`), a user that may now read
    a watch (`on_served`), and how many objects a list brought (`on_listed`)."""

    on_event: Listener
    on_synced: SyncListener | None = None
    on_served: Callable[[APIResource, SharedWatch[U], U, Scope], None] | None = None
    on_listed: ListedListener | None = None


class WatchHub(Generic[U]):
    """Reference-counted shared watches keyed by resource type; events go to one listener.

    Each user is also indexed by the namespaces it watches a type in, so an event asks only the
    users it may concern: with 10,000 workloads over 50 types, 200 a type, each in its own
    namespace, an event is checked against a few instead of all 200. The same index says where a
    type is watched: in the namespaces its users watch it in, or cluster-wide where one watches it
    everywhere, within `budget` connections in all (`core/reach.py`).

    A watch's list reaches no listener object by object: a user reads what it had not read once,
    as an initial list, either at once (`acquire` and `set_scope` say what) or when it is listed
    (`on_served`); `on_synced` says where a list came.
    """

    def __init__(
        self,
        kube: Kube,
        listeners: Listeners[U],
        *,
        streaming: bool = False,
        budget: int = 4096 - RESERVED,
        namespace_count: Callable[[], int] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.kube = kube
        self.clock: Clock = clock or LoopClock()
        self.streaming = streaming  # list as watch-list streams where the server offers them
        self.listener = listeners.on_event
        self._on_synced = listeners.on_synced
        self._on_served = listeners.on_served
        self._on_listed = listeners.on_listed
        self.budget = budget
        # How many namespaces the cluster has: a type wanted in more than half of them is
        # watched cluster-wide (None: no such bound).
        self._namespace_count = namespace_count
        self._watches: dict[APIResource, SharedWatch[U]] = {}
        self._wants: dict[APIResource, _Wants[U]] = {}
        # Due-time fields each user reads of a type, and those its running watches keep: a type
        # anyone reads due times of is watched whole (trimmed to those fields), else metadata only.
        self._due_wanted: dict[APIResource, dict[U, frozenset[Path]]] = {}
        self._due_kept: dict[APIResource, frozenset[Path]] = {}

    def on_synced(self, resource: APIResource, where: Scope) -> None:
        if self._on_synced is not None:
            self._on_synced(resource, where)

    def on_served(
        self, resource: APIResource, watch: SharedWatch[U], user: U, where: Scope
    ) -> None:
        if self._on_served is not None:
            self._on_served(resource, watch, user, where)

    def on_listed(self, resource: APIResource, count: int) -> None:
        if self._on_listed is not None:
            self._on_listed(resource, count)

    @property
    def resources(self) -> list[APIResource]:
        return list(self._watches)

    def watch_count(self) -> int:
        """How many watches all the types hold (a connection each)."""
        return sum(w.watches for w in self._watches.values())

    def watches_by_scope(self) -> dict[str, int]:
        """The watches open in one namespace each, and cluster-wide."""
        spaced = sum(len(w.spaced) for w in self._watches.values())
        return {"namespace": spaced, "cluster": self.watch_count() - spaced}

    def users(self, resource: APIResource) -> set[U]:
        wants = self._wants.get(resource)
        return wants.users if wants is not None else set()

    def users_in(self, resource: APIResource, namespace: str) -> Iterable[U]:
        """The users an object of `resource` in `namespace` may concern (cluster-scoped: all)."""
        wants = self._wants.get(resource)
        if wants is None:
            return ()
        if not resource.namespaced or not namespace:
            return wants.users
        return itertools.chain(wants.everywhere, wants.by_namespace.get(namespace, ()))

    def kept(self, resource: APIResource) -> SharedWatch[U] | None:
        """The type's watches and what they hold, if it is watched."""
        return self._watches.get(resource)

    def set_scope(self, resource: APIResource, user: U, scope: Scope) -> Scope:
        """Index `user` under the namespaces it watches `resource` in (None: every namespace);
        returns what it may read at once that it had not watched before (None: all)."""
        wants = self._wants.setdefault(resource, _Wants())
        had = user in wants.scopes
        known = wants.scopes.get(user, NOTHING)
        if had and known == scope:
            return NOTHING
        wants.scopes[user] = scope
        self._reindex(resource, wants, user, known, scope)
        watch = self._watches.get(resource)
        return NOTHING if watch is None else watch.enter(user, scope, known)

    def _reindex(
        self, resource: APIResource, wants: _Wants[U], user: U, old: Scope, new: Scope
    ) -> None:
        if old is None:
            wants.everywhere.discard(user)
        if new is None:
            wants.everywhere.add(user)
        before, after = old or NOTHING, new or NOTHING
        emptied, fresh = [], []
        by_namespace = wants.by_namespace
        for namespace in before - after:
            users = tuple(u for u in by_namespace[namespace] if u != user)
            if users:
                by_namespace[namespace] = users
            else:
                del by_namespace[namespace]
                emptied.append(namespace)
        for namespace in after - before:
            users = by_namespace.get(namespace, ())
            by_namespace[namespace] = (*users, user)
            if not users:
                fresh.append(namespace)
        warm = wants.warm
        if warm:
            wants.warm_only += sum(n in warm for n in emptied) - sum(n in warm for n in fresh)
        self._follow(
            resource,
            [n for n in fresh if warm is not None and n not in warm],
            [n for n in emptied if warm is not None and n not in warm],
        )

    def _follow(
        self, resource: APIResource | None, fresh: Iterable[str] = (), emptied: Iterable[str] = ()
    ) -> None:
        """Namespaces of `resource` newly wanted or no longer wanted: the plan within the budget
        again, and each watch that is to change told."""
        sizes = {r: self._wants[r].size(r) for r in self._watches}
        most = None if self._namespace_count is None else self._namespace_count() // 2
        chosen = plan(sizes, self.budget, most)
        for other, watch in self._watches.items():
            if other not in chosen:
                if watch.reach is not None:
                    watch.set_reach(None)
            elif watch.reach is None:  # cluster-wide until now
                watch.set_reach(self._wants[other].wanted())
            elif other is resource:
                if fresh:
                    watch.add(fresh)
                if emptied:
                    watch.discard(emptied)

    def due_paths(self, resource: APIResource) -> frozenset[Path]:
        """The due-time fields the watches of `resource` keep (none: metadata-only watches)."""
        return self._due_kept.get(resource, frozenset())

    def set_due(self, resource: APIResource, user: U, paths: frozenset[Path]) -> None:
        """Let `user` read the due times at `paths` of `resource`; watches whose fields change
        are started again (listed once more) with the new ones."""
        wanted = self._due_wanted.setdefault(resource, {})
        if paths:
            wanted[user] = paths
        else:
            wanted.pop(user, None)
        if not wanted:
            del self._due_wanted[resource]
        watch = self._watches.get(resource)
        if watch is not None and self._wanted_paths(resource) != self.due_paths(resource):
            log.info(
                "watch restarted for its due times", extra={"resource": resource.group_resource}
            )
            self._restart(resource, watch)

    def _wanted_paths(self, resource: APIResource) -> frozenset[Path]:
        wanted = self._due_wanted.get(resource)
        return frozenset().union(*wanted.values()) if wanted else frozenset()

    def _restart(self, resource: APIResource, old: SharedWatch[U]) -> None:
        """New watches of `resource` over the same namespaces, listed anew: each user reads
        what it watches once more, as an initial list, when it is listed (`on_served`)."""
        old.stop()
        self._start(resource)
        watch = self._watches[resource]
        watch.set_reach(old.reach)
        wants = self._wants.get(resource)
        for user, scope in (wants.scopes if wants is not None else {}).items():
            watch.enter(user, scope, NOTHING)

    def acquire(self, resource: APIResource, user: U, scope: Scope = None) -> Scope:
        """Count `user` in, watching `scope`; returns the namespaces (None: all) it may read at
        once, listed already, as an initial list. It reads the rest through `on_served`."""
        wants = self._wants.setdefault(resource, _Wants())
        wants.users.add(user)
        if resource not in self._watches:
            self._start(resource)
        return self.set_scope(resource, user, scope)

    def warm(self, resource: APIResource, namespaces: Scope = None) -> None:
        """List `resource` in `namespaces` (None: everywhere) before anyone uses it. Its events
        concern no one until a user is counted in (after that user's access checks), who then
        finds it listed."""
        wants = self._wants.setdefault(resource, _Wants())
        was = wants.warm
        if was is not None:
            wants.warm = None if namespaces is None else was | namespaces
        added = NOTHING if wants.warm is None else wants.warm - (was or NOTHING)
        fresh = [n for n in added if n not in wants.by_namespace]
        if wants.warm is not None:
            wants.warm_only += len(fresh)
        if resource not in self._watches:
            self._start(resource, warm=True)
        self._follow(resource, fresh)

    def drop_unused(self) -> list[APIResource]:
        """Stop what was warmed that nobody came to use; returns the types no longer watched."""
        unused = []
        for resource, wants in list(self._wants.items()):
            warm, wants.warm, wants.warm_only = wants.warm, NOTHING, 0
            if not wants.users:
                del self._wants[resource]
                watch = self._watches.pop(resource, None)
                self._due_kept.pop(resource, None)
                if watch is not None:
                    watch.stop()
                    unused.append(resource)
                    log.info(
                        "warm watch unused, stopped", extra={"resource": resource.group_resource}
                    )
            elif warm is None or warm:
                gone = [] if warm is None else [n for n in warm if n not in wants.by_namespace]
                self._follow(resource, (), gone)
        self._follow(None)  # the budget the types gone leave to others
        return unused

    def _start(self, resource: APIResource, *, warm: bool = False) -> None:
        due = self._wanted_paths(resource)
        if due:
            self._due_kept[resource] = due
        else:
            self._due_kept.pop(resource, None)
        self._watches[resource] = SharedWatch(self, resource)
        log.info("watch started", extra={"resource": resource.group_resource, "warm": warm})

    def release(self, resource: APIResource, user: U) -> None:
        """Count `user` out; the last one out stops the watches."""
        wants = self._wants.get(resource)
        if wants is None or user not in wants.users:
            return
        wants.users.discard(user)
        watch = self._watches.get(resource)
        if watch is not None:
            watch.waiting.forget(user)
        if wants.users or wants.warm is None or wants.warm:
            self._reindex(resource, wants, user, wants.scopes.pop(user, NOTHING), NOTHING)
            self.set_due(resource, user, frozenset())
            return
        del self._wants[resource]
        self._due_wanted.pop(resource, None)
        self._due_kept.pop(resource, None)
        watch = self._watches.pop(resource, None)
        if watch is not None:
            watch.stop()
            log.info("watch stopped", extra={"resource": resource.group_resource})
        self._follow(None)

    async def aclose(self) -> None:
        tasks = [c.task for w in self._watches.values() for c in w.channels() if c.task]
        for watch in self._watches.values():
            watch.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watches.clear()
        self._wants.clear()
        self._due_wanted.clear()
        self._due_kept.clear()
