"""Which shared watches a start can begin before the workloads that want them are reconciled.

A workload's annotations alone name its types (as discovery serves them) and, when they list
them, its namespaces. Whether its ServiceAccount may watch them there is decided later, at its
first reconcile: a watch started early only fills its store until a workload subscribes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from zeroscaler.core.activity import Scope
from zeroscaler.core.annotations import read_config
from zeroscaler.core.kinds import APIResource, Discovery


@dataclass(frozen=True, slots=True)
class Named:
    """The types a workload's annotations name, and where (None: anywhere, as RBAC will say)."""

    resources: tuple[APIResource, ...] = ()
    namespaces: Scope = None
    listed: bool = False  # whether the annotations list its namespaces ("*": every namespace)


def named_types(annotations: Mapping[str, str], discovery: Discovery) -> Named:
    """The served, watchable types a workload that would be managed names in its annotations;
    nothing for one opted out, without a timeout, or whose kinds come from RBAC."""
    config, _ = read_config(annotations)
    if config.opted_out or config.idle_timeout is None or not config.has_kinds:
        return Named()
    found: list[APIResource] = []
    for ref in (*config.watched, *config.owned):
        resource = discovery.resolve(ref)
        if resource is None or not {"list", "watch"} <= resource.verbs or resource in found:
            continue
        found.append(resource)
    listed = config.watch_namespaces
    where = None if listed is None or "*" in listed else frozenset(listed)
    return Named(tuple(found), where, listed is not None)
