"""How long an awake workload has been idle, from the objects it watches as a list shows them.

The controller keeps its idle clock in memory and writes `last-activity` only at state changes, so
a reader outside it (the CLI) asks the objects themselves: the newest `managedFields` time of an
object that counts as activity, under the same rules (`find_activity`) the controller applies to an
initial list. Deletions leave nothing to list, so they are not seen here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from zeroscaler.core.activity import (
    Activity,
    Change,
    GroupKind,
    Interest,
    Scope,
    definitions_of,
    find_activity,
    newest_change_time,
    working_namespaces,
)
from zeroscaler.core.kinds import APIResource

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Seen:
    """The newest activity found among listed objects, and what it was."""

    at: datetime
    activity: Activity


def build_interest(
    watched: Iterable[tuple[APIResource, Scope]],
    owned: Iterable[tuple[APIResource, Scope]],
    workload: tuple[str, str, str],
    since: datetime | None,
) -> Interest:
    """The Interest the controller would hold for a workload (kind, namespace, name)."""
    watched, owned = list(watched), list(owned)
    kind, namespace, name = workload
    scopes: dict[GroupKind, Scope] = {(r.group, r.kind): s for r, s in watched}
    return Interest(
        watched=scopes,
        owned={(r.group, r.kind): s for r, s in owned},
        self_ref=("apps", kind, namespace, name),
        since=since or EPOCH,
        namespaces=working_namespaces(watched),
        definitions=definitions_of(r for r, _ in watched),
    )


def newest_activity(
    listed: Iterable[tuple[APIResource, Mapping[str, Any]]], interest: Interest
) -> Seen | None:
    """The newest change among `listed` objects that counts for the workload after `since`."""
    best: Seen | None = None
    for resource, obj in listed:
        found = find_activity(Change("ADDED", obj, initial=True), resource, interest)
        if found is None:
            continue
        at = newest_change_time(obj.get("metadata") or {})
        if at is not None and (best is None or at > best.at):
            best = Seen(at, found)
    return best


def estimate_idle_start(
    last_activity: datetime | None, created: datetime | None, seen: Seen | None
) -> datetime | None:
    """Where the idle clock of an awake workload stands: the latest of what is known."""
    known = [t for t in (last_activity, created, seen.at if seen else None) if t is not None]
    return max(known, default=None)
