"""Continuous list-then-watch of one collection, with a local store (an informer).

Lists first, then watches from the list's resourceVersion with bookmarks; a 410 Gone lists again and
reports what changed meanwhile as ordinary events; other failures reconnect with capped backoff.
A watch that falls silent (no event, not even a bookmark) is on a dead connection: it is started
again from its resourceVersion.
With `streaming`, the list is a watch that sends the collection first (watch-list:
`sendInitialEvents`), one connection instead of a list in pages and then a watch; a server that
refuses it is listed in pages from then on. Without `initial_events`, a first list tells the
handlers nothing object by object: its sync handlers read the store instead.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    ItemsView,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    ValuesView,
)
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from zeroscaler.api import Gone, Invalid, Kube, KubeError, Obj, Silent, Transient
from zeroscaler.core.activity import MetadataOnly

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
# The bookmark that ends a streaming list's initial events carries this annotation.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# The API server's watch cache sends every watch a bookmark about once a minute, changes or not;
# a watch silent for two of those is on a dead connection, and is started again from where it was.
SILENCE = 120.0


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change seen; `initial` marks objects from a first list (they are not news)."""

    type: EventType
    obj: Obj
    old: Obj | None = None
    initial: bool = False


Handler = Callable[[WatchEvent], None]
T = TypeVar("T")


class Filed:
    """A kept object that is no dict but a value of its own (what a transform made of one): it
    names its own key and resourceVersion, which the informer files and compares it by."""

    __slots__ = ()

    @property
    def key(self) -> Key:
        raise NotImplementedError

    @property
    def version(self) -> str:
        raise NotImplementedError


def key_of(obj: Obj) -> Key:
    stored: object = obj  # typed as what came, most often what a shared watch keeps of it
    if type(stored) is MetadataOnly:  # 200,000 of them filed at a start
        return stored.key
    if isinstance(stored, Filed):
        return stored.key
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class Store(MutableMapping[Key, Obj]):
    """An informer's objects by namespace, then name: the objects of a few namespaces are read
    without walking the rest of the type (a sleep's census of a workload's scope).

    What is worked out from a namespace's objects (`summary`) is kept until one of them changes:
    workloads sharing a namespace read it once between them, not once each."""

    __slots__ = ("_count", "_namespaces", "_summaries")

    def __init__(self, objects: Iterable[Obj] = ()) -> None:
        self._summaries: dict[str, dict[str, Any]] = {}
        # A list's objects, filed without a call per object to `__setitem__`.
        self._namespaces: dict[str, dict[str, Obj]] = {}
        groups = self._namespaces
        for obj in objects:
            namespace, name = key_of(obj)
            names = groups.get(namespace)
            if names is None:
                names = groups[namespace] = {}
            names[name] = obj
        self._count = sum(map(len, groups.values()))

    def __getitem__(self, key: Key) -> Obj:
        return self._namespaces[key[0]][key[1]]

    def __setitem__(self, key: Key, obj: Obj) -> None:
        if self._summaries:
            self._summaries.pop(key[0], None)
        names = self._namespaces.get(key[0])
        if names is None:
            names = self._namespaces[key[0]] = {}
        if key[1] not in names:
            self._count += 1
        names[key[1]] = obj

    def __delitem__(self, key: Key) -> None:
        if self._summaries:
            self._summaries.pop(key[0], None)
        names = self._namespaces[key[0]]
        del names[key[1]]
        self._count -= 1
        if not names:
            del self._namespaces[key[0]]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        return key[1] in self._namespaces.get(key[0], {})

    def __iter__(self) -> Iterator[Key]:
        for namespace, names in self._namespaces.items():
            for name in names:
                yield namespace, name

    def __len__(self) -> int:
        return self._count

    def values(self) -> ValuesView[Obj]:
        return _Values(self)

    def items(self) -> ItemsView[Key, Obj]:
        return _Items(self)

    def in_namespaces(self, namespaces: Collection[str] | None) -> Iterator[Obj]:
        """The objects in `namespaces` (None: all; "" holds the cluster-scoped ones)."""
        if namespaces is None:
            return iter(self.values())
        found = (self._namespaces.get(n) for n in namespaces)
        return itertools.chain.from_iterable(names.values() for names in found if names)

    def groups(self) -> ItemsView[str, dict[str, Obj]]:
        """Each namespace with its objects by name (read only)."""
        return self._namespaces.items()

    def namespaces(self) -> Collection[str]:
        """The namespaces that hold objects ("" for the cluster-scoped ones)."""
        return self._namespaces.keys()

    def named(self, namespace: str) -> Mapping[str, Obj]:
        """The objects of one namespace by name (read only)."""
        return self._namespaces.get(namespace, _NO_OBJECTS)

    def summary(self, namespace: str, name: str, work_out: Callable[[Iterable[Obj]], T]) -> T:
        """`work_out` of the objects in `namespace`, kept under `name` until one of them changes."""
        kept = self._summaries.get(namespace)
        if kept is None:
            kept = self._summaries[namespace] = {}
        elif name in kept:
            found: T = kept[name]
            return found
        value = kept[name] = work_out(self._namespaces.get(namespace, {}).values())
        return value


_NO_OBJECTS: Mapping[str, Obj] = {}


class Readable(Protocol):
    """What a census or a replay reads of a type's objects: a store, or several stores of one
    type that each hold some of its namespaces (a namespaced shared watch)."""

    def in_namespaces(self, namespaces: Collection[str] | None) -> Iterator[Obj]: ...

    def namespaces(self) -> Collection[str]: ...

    def summary(self, namespace: str, name: str, work_out: Callable[[Iterable[Obj]], T]) -> T: ...


class _Values(ValuesView[Obj]):
    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._store = store

    def __iter__(self) -> Iterator[Obj]:
        return itertools.chain.from_iterable(n.values() for _, n in self._store.groups())


class _Items(ItemsView[Key, Obj]):
    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._store = store

    def __iter__(self) -> Iterator[tuple[Key, Obj]]:
        for namespace, names in self._store.groups():
            for name, obj in names.items():
                yield (namespace, name), obj


@dataclass(frozen=True, slots=True)
class ListWatch:
    """How an informer asks for its collection and keeps watching it."""

    metadata_only: bool = False  # objects as PartialObjectMetadata
    streaming: bool = False  # the list as a watch-list stream, where the server offers one
    initial_events: bool = True  # a first list told to the handlers object by object
    timeout_seconds: int = 300  # the shortest watch; each is given 1-2 times this
    silence: float = SILENCE
    max_backoff: float = 5.0  # 30 s, after an API server outage, delayed wakes as long


class Informer:
    """Keeps `store` equal to the collection at `path` and tells handlers about every change."""

    def __init__(
        self,
        kube: Kube,
        path: str,
        how: ListWatch = ListWatch(),
        *,
        params: Mapping[str, str] | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        owns_client: bool = False,  # `kube` is its own (`Kube.dedicated`): closed when it ends
    ) -> None:
        self.kube = kube
        self.owns_client = owns_client
        self.path = path
        self.params = dict(params or {})
        self.transform = transform
        # Each knob an attribute of its own: read as before, with no lookup through `how`.
        self.metadata_only = how.metadata_only
        self.timeout_seconds = how.timeout_seconds
        self.silence = how.silence
        self.max_backoff = how.max_backoff
        self.store = Store()
        self.synced = asyncio.Event()
        self.attempted = asyncio.Event()  # a first list has been answered, or has failed
        self.resource_version = ""
        self.last_error: KubeError | None = None
        # Whether the server streams the initial list (watch-list): None until it has answered.
        self.streaming: bool | None = None if how.streaming else False
        # Whether a first list is sent to the handlers as one ADDED event an object (a start's
        # 200,000 objects, each dispatched, cost more than listing them).
        self.initial_events = how.initial_events
        self._lists = 0  # complete lists so far: after the first, what a list finds is news
        self._handlers: list[Handler] = []
        self._sync_handlers: list[Callable[[], None]] = []

    def add_sync_handler(self, handler: Callable[[], None]) -> None:
        """Call `handler` after every complete list, once the store holds the whole collection."""
        self._sync_handlers.append(handler)

    @property
    def lists(self) -> int:
        """How many complete lists the store has been replaced by (1 in a first list's sync
        handlers)."""
        return self._lists

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def remove_handler(self, handler: Handler) -> None:
        self._handlers.remove(handler)

    async def run(self) -> None:
        """List (or stream the list) and watch until cancelled."""
        try:
            await self._run()
        finally:
            if self.owns_client:
                await self.kube.aclose()

    async def _run(self) -> None:
        backoff = 0.2
        while True:
            lists = self._lists
            try:
                if self.streaming is False:
                    await self._list()
                else:
                    await self._stream()  # on until its stream ends
                while True:
                    await self._watch()
            except Gone:
                log.debug("watch expired, listing again", extra={"path": self.path})
                continue
            except Invalid as e:
                if self.streaming is None:  # a release before watch-list, or its gate is off
                    self.streaming = False
                    log.info("streaming lists refused, listing in pages: %s", e, extra=self._at)
                    continue
                self._failed(e)
            except KubeError as e:
                self._failed(e)
            if self._lists > lists:  # it listed before failing: a new outage, not the same one
                backoff = 0.2
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, self.max_backoff)

    @property
    def _at(self) -> dict[str, str]:
        return {"path": self.path}

    def _failed(self, e: KubeError) -> None:
        self.last_error = e
        self.attempted.set()
        log.warning("watch failed: %s", e, extra=self._at)

    async def _list(self) -> None:
        items, rv = await self.kube.list_all(
            self.path,
            params=self.params,
            metadata_only=self.metadata_only,
            transform=self.transform,  # page by page: a big list is never held as it came
        )
        self._install(Store(items), rv)

    async def _stream(self) -> None:
        """Watch with the whole collection sent first (`sendInitialEvents`), on one connection:
        the store is replaced when the server marks the end of the initial events, then the
        stream goes on as a watch from there."""
        params = {
            **self.params,
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
        }
        fresh: Store | None = Store()
        # resourceVersion "": as fresh as a list, the server waits for its cache to catch up
        async for events in self._events("", params):
            for event in events:
                if fresh is None:
                    self._apply(event)
                elif self._collect(fresh, event):
                    fresh = None
        if fresh is not None:  # ended before the whole collection came: stream it again
            raise Transient(0, "StreamEnded", "the stream ended before its initial events did")

    def _collect(self, fresh: Store, event: Obj) -> bool:
        """One of a streaming list's initial events into `fresh`; at their end, the store is
        installed and True returned."""
        kind, raw = event.get("type"), event.get("object") or {}
        # Items' resourceVersions are their own, not the stream's. A server may send changes
        # made after its snapshot before the end (one that ends at its next bookmark tick):
        # they go into the collection, which the end's resourceVersion then covers.
        if kind in ("ADDED", "MODIFIED"):
            obj = self._shape(raw)
            fresh[key_of(obj)] = obj
        elif kind == "DELETED":
            fresh.pop(key_of(self._shape(raw)), None)
        elif kind == "BOOKMARK" and _is_initial_end(raw):
            self.streaming = True
            self._install(fresh, _rv(raw))
            return True
        return False

    def _install(self, fresh: Store, rv: str) -> None:
        """The whole collection as of `rv`: replace the store, tell what changed, mark synced."""
        initial = self._lists == 0
        self._lists += 1
        old_store, self.store = self.store, fresh
        self.resource_version = rv
        listed = fresh.items() if self.initial_events or not initial else ()
        for key, obj in listed:
            before = old_store.get(key)
            if before is None:
                self._emit(WatchEvent("ADDED", obj, initial=initial))
            elif _rv(before) != _rv(obj):
                self._emit(WatchEvent("MODIFIED", obj, before))
        for key, obj in old_store.items():
            if key not in fresh:
                self._emit(WatchEvent("DELETED", obj, obj))
        self.last_error = None
        self.synced.set()
        self.attempted.set()
        for handler in list(self._sync_handlers):
            try:
                handler()
            except Exception:
                log.exception("sync handler failed", extra=self._at)

    async def _watch(self) -> None:
        async for events in self._events(self.resource_version, self.params):
            for event in events:
                self._apply(event)

    async def _events(self, rv: str, params: Mapping[str, str]) -> AsyncIterator[list[Obj]]:
        """One watch's events, those read together at a time; it ends quietly at its timeout and
        when it falls silent.

        Each watch lasts a random 1-2 times `timeout_seconds`, as client-go's do: watches that
        started together (at a start) do not all end together, and end less often.
        """
        try:
            async for events in self.kube.watch_batches(
                self.path,
                resource_version=rv,
                params=params,
                metadata_only=self.metadata_only,
                timeout_seconds=random.randint(self.timeout_seconds, 2 * self.timeout_seconds),
                silence=self.silence,
            ):
                yield events
        except Silent as e:
            log.debug("watch fell silent, watching again: %s", e, extra=self._at)

    def _apply(self, event: Obj) -> None:
        """One event of a watch under way: into the store, and to the handlers."""
        kind, raw = event.get("type"), event.get("object") or {}
        rv = _rv(raw)
        if rv:
            self.resource_version = rv
        if kind == "BOOKMARK":
            return
        obj = self._shape(raw)
        key = key_of(obj)
        if kind == "DELETED":
            old = self.store.pop(key, None)
            self._emit(WatchEvent("DELETED", obj, old))
        elif kind in ("ADDED", "MODIFIED"):
            old = self.store.get(key)
            self.store[key] = obj
            self._emit(WatchEvent("ADDED" if old is None else "MODIFIED", obj, old))

    def _shape(self, obj: Obj) -> Obj:
        return self.transform(obj) if self.transform else obj

    def _emit(self, event: WatchEvent) -> None:
        for handler in list(self._handlers):
            try:
                handler(event)
            except Exception:  # a bad handler must not stop the watch for everyone else
                log.exception("watch handler failed", extra={"path": self.path})


def _is_initial_end(obj: Obj) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(INITIAL_EVENTS_END) == "true")


def _rv(obj: Obj) -> str:
    stored: object = obj
    if isinstance(stored, Filed):
        return stored.version
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
