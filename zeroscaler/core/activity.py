"""Whether one watch event is activity for one workload (DESIGN.md, "What counts as activity")."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from zeroscaler.core.annotations import LEADER_ANNOTATION
from zeroscaler.core.durations import parse_time
from zeroscaler.core.kinds import APIResource

MANAGER = "zeroscaler"  # our field manager: changes written only by us are never activity

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]
GroupKind = tuple[str, str]
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
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    group_kind = (resource.group, resource.kind)
    if (resource.group, resource.kind, namespace, name) == interest.self_ref:
        return None
    if is_leader_lock(resource, meta):
        return None
    owner: GroupKind | None = None
    if group_kind in interest.watched:
        scope = interest.watched[group_kind]
    elif group_kind in interest.owned:
        owner = controller_owner(meta)
        if owner is None or owner not in interest.watched:
            return None
        scope = interest.owned[group_kind]
    else:
        return None
    if resource.namespaced and not is_in_scope(namespace, scope):
        return None
    if not is_news(change, resource.has_status, interest.since):
        return None
    where = f"{namespace}/{name}" if namespace else name
    what = f"{resource.kind} {where}"
    if owner is not None:
        what += f" (controlled by a {owner[1]})"
    verb = "changed while zeroscaler was not watching" if change.initial else _VERBS[change.type]
    return Activity(resource.kind, namespace, name, f"{what} {verb}")


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
        str(e.get("time"))
        for e in meta.get("managedFields") or ()
        if e.get("time") and e.get("subresource") != "status" and e.get("manager") != MANAGER
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


def shrink(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only the metadata the activity rules read, so 50,000 stored objects stay cheap."""
    meta: Meta = obj.get("metadata") or {}
    kept: dict[str, Any] = {}
    for field in ("name", "namespace", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
        if meta.get(field):
            kept[field] = sys.intern(str(meta[field])) if field == "namespace" else meta[field]
    for field in (*_COMPARED,):
        if meta.get(field):
            kept[field] = meta[field]
    fields = meta.get("managedFields")
    if fields:
        kept["managedFields"] = [
            {k: _intern(e[k]) for k in ("manager", "operation", "subresource", "time") if e.get(k)}
            for e in fields
        ]
    return {"metadata": kept}


def _entry(e: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(e.get("manager", "")),
        str(e.get("operation", "")),
        str(e.get("subresource", "")),
        str(e.get("time", "")),
    )


def _intern(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) else value
