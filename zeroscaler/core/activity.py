"""Whether one watch event is activity for one workload (DESIGN.md, "What counts as activity")."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from zeroscaler.core.annotations import FIELD_MANAGER, LEADER_ANNOTATION
from zeroscaler.core.durations import parse_time
from zeroscaler.core.kinds import APIResource

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
    where = f"{namespace}/{name}" if namespace else name
    what = f"{resource.kind} {where}"
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
    before = {_entry(e) for e in old.get("managedFields") or ()}
    after = {_entry(e) for e in new.get("managedFields") or ()}
    changed = before ^ after
    return bool(changed) and all(manager == MANAGER for manager, *_ in changed)


def is_leader_lock(resource: APIResource, meta: Meta) -> bool:
    """Leases, and ConfigMaps or Endpoints carrying the leader-election annotation."""
    if resource.group == "coordination.k8s.io" and resource.kind == "Lease":
        return True
    if resource.group == "" and resource.kind in ("ConfigMap", "Endpoints"):
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
    times = [
        time
        for manager, _, subresource, time in map(_entry, meta.get("managedFields") or ())
        if time and subresource != "status" and manager != MANAGER
    ]
    if meta.get("creationTimestamp"):
        times.append(str(meta["creationTimestamp"]))
    parsed = []
    for text in times:
        try:
            parsed.append(parse_time(text))
        except ValueError:
            continue
    return max(parsed, default=None)


def shrink(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """Keep only the metadata the activity rules read, compactly: 200,000 objects stay cheap."""
    meta: Meta = obj.get("metadata") or {}
    keys: list[str] = []
    values: list[Any] = []
    for attr in ("name", "namespace", "resourceVersion", "deletionTimestamp", *_COMPARED):
        if meta.get(attr):
            keys.append(attr)
            values.append(sys.intern(meta[attr]) if attr == "namespace" else meta[attr])
    fields = meta.get("managedFields")
    if fields:
        keys.append("managedFields")
        values.append(tuple(tuple(sys.intern(x) for x in _entry(e)) for e in fields))
    elif meta.get("creationTimestamp"):
        keys.append("creationTimestamp")
        # Objects made in one burst share their second: one string for all of them.
        values.append(sys.intern(str(meta["creationTimestamp"])))
    return MetadataOnly(tuple(keys), tuple(values))


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


class MetadataOnly(Compact):
    """An object of which only metadata is kept: `{"metadata": meta}` and `meta` in one small
    object (a wrapper around the metadata cost 56 bytes more per stored object). Reading
    "metadata" gives the object itself; everything else reads as the metadata."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        return self if key == "metadata" else self._values[self._index[key]]

    def get(self, key: str, default: Any = None) -> Any:
        if key == "metadata":
            return self
        i = self._index.get(key)
        return default if i is None else self._values[i]

    def __contains__(self, key: object) -> bool:
        return key == "metadata" or key in self._index

    def __repr__(self) -> str:
        return repr({"metadata": dict(self)})
