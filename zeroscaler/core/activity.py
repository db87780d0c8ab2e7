"""Whether one watch event is activity for one workload (DESIGN.md, "What counts as activity")."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from operator import attrgetter
from time import gmtime, strftime
from types import MappingProxyType
from typing import Any, Literal

from zeroscaler.core.annotations import FIELD_MANAGER, LEADER_ANNOTATION
from zeroscaler.core.disclosure import object_words
from zeroscaler.core.due import read_due
from zeroscaler.core.durations import parse_time
from zeroscaler.core.kinds import APIResource
from zeroscaler.core.sharing import shared

MANAGER = FIELD_MANAGER  # changes written only by us are never activity

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]
GroupKind = tuple[str, str]
CRD_KIND: GroupKind = ("apiextensions.k8s.io", "CustomResourceDefinition")
Scope = frozenset[str] | None  # namespaces an interest covers; None: every namespace
Meta = Mapping[str, Any]

_VERBS: dict[ChangeType, str] = {"ADDED": "created", "MODIFIED": "changed", "DELETED": "deleted"}
_COMPARED = ("generation", "labels", "annotations", "finalizers", "ownerReferences")


@dataclass(frozen=True, slots=True)
class Change:
    """One observed change of an object (metadata only is enough)."""

    type: ChangeType
    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None = None
    initial: bool = False  # from the first list of a watch, not news by itself


@dataclass(frozen=True, slots=True)
class Interest:
    """The objects whose changes wake one workload."""

    watched: Mapping[GroupKind, Scope]
    owned: Mapping[GroupKind, Scope]
    self_ref: tuple[str, str, str, str] = ("", "", "", "")  # group, kind, namespace, name
    since: datetime | None = None  # objects of an initial list changed after this are news
    names: Mapping[GroupKind, frozenset[str]] = field(default_factory=dict)  # RBAC resourceNames
    namespaces: Scope = None  # where the workload works: see `working_namespaces`
    definitions: frozenset[str] = frozenset()  # CRD names (plural.group) of its watched kinds
    self_uid: str = ""  # the workload's uid: its own ReplicaSets and Pods name it as their owner


@dataclass(frozen=True, slots=True)
class Activity:
    """A change that counts, with the words an Event uses for it."""

    kind: str
    namespace: str
    name: str
    reason: str


def find_activity(change: Change, resource: APIResource, interest: Interest) -> Activity | None:
    """The activity this change is for the workload, or None when it does not count."""
    meta: Meta = change.obj.get("metadata") or {}
    if not is_in_interest(meta, resource, interest):
        return None
    if not is_news(change, resource.has_status, interest.since):
        return None
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    what = object_words(resource.kind, namespace, name, interest.self_ref[2])
    owner = (
        controller_owner(meta) if (resource.group, resource.kind) not in interest.watched else None
    )
    if owner is not None:
        what += f" (controlled by a {owner[1]})"
    verb = "changed while zeroscaler was not watching" if change.initial else _VERBS[change.type]
    return Activity(resource.kind, namespace, name, f"{what} {verb}")


def is_in_interest(meta: Meta, resource: APIResource, interest: Interest) -> bool:
    """Whether a change of this object, whatever it is, could be activity for the workload."""
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    group_kind = (resource.group, resource.kind)
    if (resource.group, resource.kind, namespace, name) == interest.self_ref:
        return False
    if is_leader_lock(resource, meta):
        return False
    if group_kind in OWN_KINDS and is_own_child(meta, group_kind, interest):
        return False
    if group_kind in interest.watched:
        scope = interest.watched[group_kind]
    elif group_kind in interest.owned:
        owner = controller_owner(meta)
        if owner is None or owner not in interest.watched:
            return False
        scope = interest.owned[group_kind]
    else:
        return False
    if resource.namespaced and not is_in_scope(namespace, scope):
        return False
    if not resource.namespaced and not concerns_namespaces(resource, name, interest):
        return False
    allowed_names = interest.names.get(group_kind)
    return allowed_names is None or name in allowed_names


def is_news(change: Change, has_status: bool, since: datetime | None) -> bool:
    """Whether the change itself is one that counts, whoever it is for."""
    if change.initial:
        newest = newest_change_time(change.obj.get("metadata") or {})
        return since is not None and newest is not None and newest > since
    if change.type != "MODIFIED" or change.old is None:
        return True
    old: Meta = change.old.get("metadata") or {}
    new: Meta = change.obj.get("metadata") or {}
    if is_own_write(old, new):
        return False
    return not has_status or not is_status_only(old, new)


def is_status_only(old: Meta, new: Meta) -> bool:
    """Whether nothing that a status-only update leaves alone has changed."""
    if any((old.get(f) or None) != (new.get(f) or None) for f in _COMPARED):
        return False
    return old.get("deletionTimestamp") == new.get("deletionTimestamp")


def is_own_write(old: Meta, new: Meta) -> bool:
    """Whether every managedFields entry that changed belongs to zeroscaler (a sleep or a wake)."""
    before, after = set(writes(old)), set(writes(new))
    changed = before ^ after
    return bool(changed) and all(manager == MANAGER for manager, *_ in changed)


def scope_alone(resource: APIResource, interest: Interest) -> tuple[bool, Scope]:
    """Whether `is_in_interest` reads nothing of an object of `resource` but its namespace, and
    the scope it then holds that namespace to: a namespaced kind the workload watches, not its
    own kind, with no resourceNames and no leader locks among it (most of what a census reads)."""
    group_kind = (resource.group, resource.kind)
    plain = (
        resource.namespaced
        and group_kind in interest.watched
        and group_kind != interest.self_ref[:2]
        and group_kind not in interest.names
        and group_kind not in _LOCK_KINDS
        and group_kind not in OWN_KINDS
    )
    return plain, interest.watched.get(group_kind) if plain else None


# What a Deployment or StatefulSet makes of itself: its sleep and wake create and delete them.
_POD: GroupKind = ("", "Pod")
_REPLICA_SET: GroupKind = ("apps", "ReplicaSet")
OWN_KINDS = frozenset({_POD, _REPLICA_SET})
_TEMPLATE_HASH = "pod-template-hash"  # the label a Deployment's ReplicaSets and their Pods carry


def is_own_child(meta: Meta, group_kind: GroupKind, interest: Interest) -> bool:
    """Whether a Pod or ReplicaSet belongs to the workload itself (owner chain to it): a sleep or
    a wake makes and removes them, which is never activity for that workload.

    A ReplicaSet or a StatefulSet's Pod names the workload as its controller, by uid. A
    Deployment's Pod names its ReplicaSet, which the Deployment controller always names
    `<deployment>-<pod-template-hash>`: the label on the Pod makes that exact without the
    ReplicaSet at hand (a metadata watch of Pods alone has no ReplicaSets)."""
    group, kind, namespace, name = interest.self_ref
    if str(meta.get("namespace") or "") != namespace or not name:
        return False
    owner = _controller_ref(meta)
    if owner is None:
        return False
    owner_group = str(owner.get("apiVersion") or "").rpartition("/")[0]
    owner_kind, owner_name = str(owner.get("kind") or ""), str(owner.get("name") or "")
    if (owner_group, owner_kind) == (group, kind):
        # The uid tells this workload from an earlier one of the same name; a name alone suffices
        # where the uid is not known.
        uid = str(owner.get("uid") or "")
        return owner_name == name and (not interest.self_uid or uid == interest.self_uid)
    if group_kind == _POD and kind == "Deployment" and (owner_group, owner_kind) == _REPLICA_SET:
        template_hash = (rarer_fields(meta).get("labels") or {}).get(_TEMPLATE_HASH)
        return bool(template_hash) and owner_name == f"{name}-{template_hash}"
    return False


def _controller_ref(meta: Meta) -> Mapping[str, Any] | None:
    for ref in rarer_fields(meta).get("ownerReferences") or ():
        if ref.get("controller") is True:
            return ref  # type: ignore[no-any-return]
    return None


_LEASE = ("coordination.k8s.io", "Lease")
_ANNOTATED_LOCKS = frozenset({("", "ConfigMap"), ("", "Endpoints")})
_LOCK_KINDS = _ANNOTATED_LOCKS | {_LEASE}  # the kinds `is_leader_lock` can be true of


def is_leader_lock(resource: APIResource, meta: Meta) -> bool:
    """Leases, and ConfigMaps or Endpoints carrying the leader-election annotation."""
    group_kind = (resource.group, resource.kind)
    if group_kind == _LEASE:
        return True
    if group_kind in _ANNOTATED_LOCKS:
        return LEADER_ANNOTATION in (meta.get("annotations") or {})
    return False


def is_in_scope(namespace: str, scope: Scope) -> bool:
    return scope is None or namespace in scope


def working_namespaces(watched: Iterable[tuple[APIResource, Scope]]) -> Scope:
    """The namespaces a workload works in: the union of its namespaced watched kinds' scopes."""
    union: set[str] = set()
    for resource, scope in watched:
        if not resource.namespaced:
            continue
        if scope is None:
            return None
        union |= scope
    return frozenset(union) if union else None


def definitions_of(watched: Iterable[APIResource]) -> frozenset[str]:
    """The CRD names (plural.group) that would define these kinds."""
    return frozenset(r.group_resource for r in watched if r.group)


def concerns_namespaces(resource: APIResource, name: str, interest: Interest) -> bool:
    """Whether a cluster-scoped object matters to a workload that works in a list of namespaces.

    Frameworks such as kopf watch every Namespace and CRD only to learn where to work; for them a
    Namespace counts when it is one they work in, a CRD when it defines one of their watched kinds.
    """
    if interest.namespaces is None:
        return True
    if (resource.group, resource.kind) == ("", "Namespace"):
        return name in interest.namespaces
    if (resource.group, resource.kind) == CRD_KIND:
        return name in interest.definitions
    return True  # Nodes, ClusterRoles…: no namespace to narrow them by


def controller_owner(meta: Meta) -> GroupKind | None:
    """The (group, kind) of the owner reference marked `controller: true`."""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") is True:
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            return group, str(ref.get("kind") or "")
    return None


def newest_change_time(meta: Meta) -> datetime | None:
    """The latest time someone other than zeroscaler changed more than the status."""
    if isinstance(meta, MetadataOnly):  # every stored object: read a start's every one
        return meta.newest_change()
    return _newest(meta.get("creationTimestamp"), map(_entry, meta.get("managedFields") or ()))


def _newest(
    created: int | str | None, entries: Iterable[tuple[str, str, str, int | str]]
) -> datetime | None:
    """The latest of `created` and the times of the writes by others than zeroscaler to more
    than the status; times kept as seconds are compared as they are, one made at the end."""
    newest: int | None = None
    texts: list[int | str | None] = [created]
    for manager, _, subresource, when in entries:
        if subresource == "status" or manager == MANAGER:
            continue
        if type(when) is int:
            newest = when if newest is None or when > newest else newest
        else:
            texts.append(when)
    if not any(texts):
        return None if newest is None else datetime.fromtimestamp(newest, UTC)
    return max(filter(None, [*map(_as_time, texts), _as_time(newest)]), default=None)


def _as_time(when: int | str | None) -> datetime | None:
    """A time as listed (text) or as `shrink` keeps it (seconds); None if it is none."""
    if isinstance(when, int):
        return datetime.fromtimestamp(when, UTC)
    try:
        return parse_time(str(when)) if when else None
    except ValueError:
        return None


def shrink(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """Keep only the metadata the activity rules read, compactly: 200,000 objects stay cheap."""
    meta: Meta = obj.get("metadata") or {}
    times: Times
    writers: tuple[Writer, ...] = ()
    if fields := meta.get("managedFields"):
        entries = [_entry(e) for e in fields]
        if len(entries) == 1:  # most objects: one writer
            times = _compact_time(entries[0][3])
        else:
            times = tuple([_compact_time(e[3]) for e in entries])
        writers = shared(tuple([e[:3] for e in entries]))  # a cluster has few writers
    else:  # its creation time is its only one; those made in one burst share its text
        times = sys.intern(str(meta.get("creationTimestamp") or ""))
    rarer = [attr for attr in _RARER if meta.get(attr)]
    return MetadataOnly(
        str(meta.get("name") or ""),
        sys.intern(str(meta.get("namespace") or "")),
        _compact_version(str(meta.get("resourceVersion") or "")),
        meta.get("generation") or 0,
        writers,
        times,
        Compact(tuple(rarer), tuple([meta[k] for k in rarer])) if rarer else None,
    )


def rarer_fields(meta: Meta) -> Meta:
    """Where the fields beyond those every object has (labels, annotations, finalizers, owners,
    deletion time) are read fastest: a stored object's own few (none, for most), else the
    metadata itself."""
    if isinstance(meta, MetadataOnly):  # a stored object with due times too (`DueMetadata`)
        return meta.rarer()
    return meta


def _compact_version(version: str) -> int | str:
    """A resourceVersion of digits (etcd's) as an int, 24 bytes less, if it reads back the same."""
    if version.isascii() and version.isdigit() and len(version) < 19 and version[0] != "0":
        return int(version)
    return version


Writer = tuple[str, str, str]  # a managedFields entry's manager, operation and subresource
# The writes' times as a stored object keeps them: one, or one per writer; each as seconds, or
# the text it came as. An object without writers keeps its creation time's text instead.
Times = int | str | tuple[int | str, ...]


@lru_cache(maxsize=4096)  # objects written in one burst share their times
def _compact_time(text: str) -> int | str:
    """A time as the API server writes it (2026-01-02T03:04:05Z) as seconds since the epoch, 32
    bytes where its text is 69; any other text as it came."""
    # A year before 1000 would be written back without its leading zeros.
    if len(text) != 20 or not text.isascii() or text[4::3] != "--T::Z" or text[0] == "0":
        return text
    try:
        return int(datetime.fromisoformat(text).timestamp())
    except ValueError:  # no such day or second
        return text


@lru_cache(maxsize=4096)
def _time_text(seconds: int) -> str:
    return strftime("%Y-%m-%dT%H:%M:%SZ", gmtime(seconds))


def writes(meta: Meta) -> Iterator[tuple[str, str, str, str]]:
    """The managedFields entries as (manager, operation, subresource, time), from an object as
    listed or as `shrink` keeps it."""
    return _as_text(_writes_at(meta))


def kept_writes(writers: tuple[Writer, ...], times: Times) -> Iterator[tuple[str, str, str, str]]:
    """As `writes`, from the writers and times of a stored object (`MetadataOnly.plain`)."""
    return _as_text(_paired(writers, times))


def _as_text(
    entries: Iterator[tuple[str, str, str, int | str]],
) -> Iterator[tuple[str, str, str, str]]:
    return (
        (manager, operation, subresource, when if type(when) is str else _time_text(when))
        for manager, operation, subresource, when in entries
    )


def _paired(writers: tuple[Writer, ...], times: Times) -> Iterator[tuple[str, str, str, int | str]]:
    """Each writer with its time, as a stored object keeps them."""
    if not writers:
        return
    each = times if isinstance(times, tuple) else (times,)
    for (manager, operation, subresource), when in zip(writers, each, strict=True):
        yield manager, operation, subresource, when


def _writes_at(meta: Meta) -> Iterator[tuple[str, str, str, int | str]]:
    """As `writes`, with a time `shrink` keeps as seconds left as it is."""
    if isinstance(meta, MetadataOnly):
        return meta.writes_at()
    return map(_entry, meta.get("managedFields") or ())


class Compact(Mapping[str, Any]):
    """A read-only mapping stored as a tuple of values and its shape's index of keys, shared by
    every mapping with the same keys; a fraction of a dict's size."""

    __slots__ = ("_index", "_values")
    # One index (key -> position) per shape: a few shapes for every stored object.
    _shapes: dict[tuple[str, ...], dict[str, int]] = {}  # noqa: RUF012

    def __init__(self, keys: tuple[str, ...], values: tuple[Any, ...]) -> None:
        index = Compact._shapes.get(keys)
        if index is None:
            index = Compact._shapes[keys] = {k: i for i, k in enumerate(keys)}
        self._index = index
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[self._index[key]]

    def get(self, key: str, default: Any = None) -> Any:
        i = self._index.get(key)
        return default if i is None else self._values[i]

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return repr(dict(self))


def _entry(e: Mapping[str, Any] | Sequence[str]) -> tuple[str, str, str, str]:
    """A managedFields entry as (manager, operation, subresource, time), from either form."""
    if isinstance(e, tuple):
        return e
    assert isinstance(e, Mapping)
    return (
        str(e.get("manager", "")),
        str(e.get("operation", "")),
        str(e.get("subresource", "")),
        str(e.get("time", "")),
    )


class MetadataOnly(Mapping[str, Any]):
    """A stored object of which only the metadata the activity rules read is kept: reading
    "metadata" gives the object itself (no wrapper object), anything else reads as the metadata.

    Every stored object is one of these, 2,000,000 at 100,000 workloads, so each field costs 2 MB
    a byte. The fields every object has are slots: a resourceVersion of digits as an int, the
    managedFields as the writers (a tuple shared with every object they wrote) and the times,
    one alone or a tuple, each as seconds where it reads back the same. The creation time is
    kept only for an object without managedFields (the writes' times are no earlier), in the
    times' slot. The rarer fields are one `Compact`, or None.
    """

    __slots__ = ("_generation", "_name", "_namespace", "_rarer", "_times", "_version", "_writers")

    def __init__(
        self,
        name: str,
        namespace: str,
        version: int | str,
        generation: int,
        writers: tuple[Writer, ...],
        times: Times,
        rarer: Compact | None,
    ) -> None:
        self._name, self._namespace, self._version = name, namespace, version
        self._generation, self._writers, self._rarer = generation, writers, rarer
        self._times = times

    def get(self, key: str, default: Any = None) -> Any:
        read = _FIELDS.get(key)
        if read is None:
            if key == "metadata":
                return self
            return default if self._rarer is None else self._rarer.get(key, default)
        value = read(self)
        return value if value else default  # an empty field is an absent one, as when listed

    def newest_change(self) -> datetime | None:
        """`newest_change_time` of this object: its one writer's time read directly (most
        objects), else its writers' times, or its creation time when it has no writers."""
        writers, times = self._writers, self._times
        if not writers:  # its creation time's text, kept in the times' slot
            return None if isinstance(times, tuple) else _as_time(times)
        if type(times) is int:
            manager, _, subresource = writers[0]
            if subresource == "status" or manager == MANAGER:
                return None
            return datetime.fromtimestamp(times, UTC)
        return _newest(None, _paired(writers, times))

    def writes_at(self) -> Iterator[tuple[str, str, str, int | str]]:
        """The managedFields entries as (manager, operation, subresource, time), each time as
        kept: seconds since the epoch, or the text it came as (`writes` reads them as text)."""
        return _paired(self._writers, self._times)

    @property
    def key(self) -> tuple[str, str]:
        """Its namespace and name, as a store files it."""
        return self._namespace, self._name

    def plain(self) -> tuple[str, str, int, tuple[Writer, ...], Times] | None:
        """Its namespace, name, generation, writers and their times, when it has none of the
        rarer fields (most objects); None when it has some."""
        if self._rarer is not None:
            return None
        return self._namespace, self._name, self._generation, self._writers, self._times

    def rarer(self) -> Meta:
        """The rarer fields kept (each one set), as a mapping; empty for most objects."""
        return _NONE if self._rarer is None else self._rarer

    def _creation_time(self) -> Times:
        return "" if self._writers else self._times

    def _resource_version(self) -> str:
        return self._version if type(self._version) is str else str(self._version)

    def _managed_fields(self) -> tuple[tuple[str, str, str, str], ...]:
        return tuple(writes(self))

    def __getitem__(self, key: str) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _ABSENT) is not _ABSENT

    def __iter__(self) -> Iterator[str]:
        for key in _FIELDS:
            if self.get(key):
                yield key
        if self._rarer is not None:
            yield from self._rarer

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:  # `obj.get("metadata") or {}`, read for every object: no counting
        return bool(self._name) or any(True for _ in self)

    def __repr__(self) -> str:
        return repr({"metadata": dict(self)})


_ABSENT: Any = object()
_NONE: Meta = MappingProxyType({})
# How each field every stored object has is read (a lookup: `get` is the hottest call of a restart).
_FIELDS: dict[str, Callable[[MetadataOnly], Any]] = {
    "name": attrgetter("_name"),
    "namespace": attrgetter("_namespace"),
    "resourceVersion": MetadataOnly._resource_version,
    "generation": attrgetter("_generation"),
    "managedFields": MetadataOnly._managed_fields,
    "creationTimestamp": MetadataOnly._creation_time,
}
# What `shrink` keeps beside the fields every object has, of those the rules compare; most
# objects have none of them.
_RARER = tuple(f for f in ("deletionTimestamp", *_COMPARED) if f not in _FIELDS)


Path = tuple[str, ...]


class DueMetadata(MetadataOnly):
    """A stored object of a kind with due-time fields: its metadata as every stored object keeps
    it, and the due times found at the watched paths, as seconds. Only objects that have one
    are stored so; the others stay plain."""

    __slots__ = ("_due",)

    _due: tuple[tuple[Path, int], ...]

    def due_at(self, path: Path) -> int | None:
        for found, seconds in self._due:
            if found == path:
                return seconds
        return None

    @property
    def due(self) -> tuple[tuple[Path, int], ...]:
        return self._due


def _with_due(stored: MetadataOnly, due: tuple[tuple[Path, int], ...]) -> DueMetadata:
    made = DueMetadata.__new__(DueMetadata)
    for slot in MetadataOnly.__slots__:
        object.__setattr__(made, slot, getattr(stored, slot))
    made._due = due
    return made


def shrink_with_due(paths: Iterable[Path]) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """The transform of a watch of whole objects: each object shrunk as a metadata watch keeps
    it, and the due times at `paths` kept beside (a few bytes; nothing else of the object)."""
    wanted = tuple(sorted(set(paths)))

    def transform(obj: Mapping[str, Any]) -> Mapping[str, Any]:
        stored = shrink(obj)
        due = tuple((p, s) for p in wanted if (s := read_due(obj, p)) is not None)
        if not due or not isinstance(stored, MetadataOnly):
            return stored
        return _with_due(stored, due)

    return transform


def due_of(stored: Mapping[str, Any] | None) -> tuple[tuple[Path, int], ...]:
    """The due times a stored object holds (none for a plain one)."""
    return stored.due if isinstance(stored, DueMetadata) else ()
