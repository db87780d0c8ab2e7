"""How far each shared watch reaches, and how one watch hands a namespace over to another.

A type whose users all watch it in lists of namespaces is listed and watched in each of those
namespaces alone, so the objects of the namespaces nobody here watches are never listed, kept or
compared; a type any user watches everywhere (or a cluster-scoped one) is watched cluster-wide.
Every namespace-scoped watch holds a connection of its own, so their number has a budget: past
it, the types with the most namespaces are watched cluster-wide instead; and a type wanted in
most of the cluster's namespaces is watched cluster-wide anyway (`plan`).

When a namespace moves from one watch to another (a type widening to cluster-wide, or narrowing
back), the new watch lists it first and takes over only once listed: both then hold the
namespace's objects as of their own resourceVersion, and `handover` says what the users must
still be told so that no change is missed and none is told twice, and what the list found that
was there all along is never told as a change.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

K = TypeVar("K", bound=Hashable)
ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]


def plan(sizes: Mapping[K, int | None], budget: int, most: int | None = None) -> set[K]:
    """The types watched by namespace: `sizes` gives how many namespaces each type is wanted in
    (None: it must be watched cluster-wide). One that is wanted in more than `most` namespaces
    is watched cluster-wide too: listing it whole costs little more than listing most of it,
    and a watch by namespace holds a connection each. A cluster-wide watch costs one
    connection, a namespaced type one per namespace: the types with the fewest namespaces are
    watched by namespace first, for as long as all the watches fit in `budget` connections
    (ties in key order, so that a plan is stable)."""
    if budget < 0:
        raise ValueError(f"budget: {budget}; at least 0")
    narrow = [
        (size, str(key), key)
        for key, size in sizes.items()
        if size is not None and (most is None or size <= most)
    ]
    left = budget - len(sizes)  # every type has at least its one connection
    if sum(max(size - 1, 0) for size, _, _ in narrow) <= left:
        return {key for _, _, key in narrow}  # all fit: most clusters
    chosen = set()
    for size, _, key in sorted(narrow):
        extra = max(size - 1, 0)
        if extra > left:
            break
        chosen.add(key)
        left -= extra
    return chosen


def version_order(version: object) -> int | None:
    """A resourceVersion as a number to order by: etcd's revisions are, though the API promises
    nothing of the kind; None where it is not one (then nothing is assumed of its order)."""
    if isinstance(version, int):
        return version
    text = str(version)
    if text.isascii() and text.isdigit() and (text == "0" or text[0] != "0"):
        return int(text)
    return None


@dataclass(frozen=True, slots=True)
class Handover:
    """What a namespace's move from an old watch to a new one tells its users.

    `changes`: what changed between the old watch's last event and the new watch's list, told as
    events (the new watch listed later than the old had seen). `skip_through`: the new watch's
    events up to this resourceVersion were told already by the old one (it had seen further than
    the new list), so they are kept but not told again (None: nothing to skip)."""

    changes: tuple[tuple[ChangeType, Mapping[str, Any], Mapping[str, Any] | None], ...] = ()
    skip_through: int | None = None


def handover(
    old_version: object,
    old: Mapping[str, Mapping[str, Any]],
    new_version: object,
    new: Mapping[str, Mapping[str, Any]],
) -> Handover:
    """The move of one namespace, whose objects by name the old watch holds as of `old_version`
    and the new one as of `new_version`.

    Where the versions cannot be ordered, the two are compared object by object, as a list that
    comes again after a watch expired is: what differs is told, at worst a change told twice."""
    before, after = version_order(old_version), version_order(new_version)
    if before is not None and after is not None and before >= after:
        return Handover(skip_through=before)
    return Handover(changes=tuple(differences(old, new)))


def differences(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
) -> Iterable[tuple[ChangeType, Mapping[str, Any], Mapping[str, Any] | None]]:
    """The changes from `old` to `new` (objects by name), as watch events: added, modified (a new
    resourceVersion), deleted (the last object seen)."""
    for name, obj in new.items():
        was = old.get(name)
        if was is None:
            yield "ADDED", obj, None
        elif _version(was) != _version(obj):
            yield "MODIFIED", obj, was
    for name, was in old.items():
        if name not in new:
            yield "DELETED", was, was


def _version(obj: Mapping[str, Any]) -> object:
    meta = obj.get("metadata") or {}
    return meta.get("resourceVersion")
