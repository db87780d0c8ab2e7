"""What a workload watches, as the subscriptions (`subscription.py`) and its kinds
(`workload_kinds.py`) remember it: declared here, below the parts; written by those two alone."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from zeroscaler.core.activity import GroupKind, Interest, Scope
from zeroscaler.core.annotations import Notice
from zeroscaler.core.kinds import APIResource

Scopes = tuple[Mapping[GroupKind, Scope], Mapping[GroupKind, Scope]]  # watched, owned
NO_NAMES: Mapping[GroupKind, frozenset[str]] = MappingProxyType({})
NO_DUE: Mapping[APIResource, frozenset[tuple[str, ...]]] = MappingProxyType({})


@dataclass(slots=True)
class WatchMemory:
    """What the workload watches, kept by `workload_kinds.py` and `subscription.py`."""

    signature: tuple[Any, ...] | None = None  # what the last resolution depended on
    scopes: Scopes = ({}, {})  # replaced, never changed in place
    kind_warnings: tuple[Notice, ...] = ()
    resources: AbstractSet[APIResource] = frozenset()  # the shared watches it holds
    unseen: AbstractSet[APIResource] = frozenset()  # kinds the controller may not watch
    interest: Interest | None = None
    inferred: bool = False  # no kinds annotated: they come from the ServiceAccount's RBAC
    # Inferred resourceNames, per kind.
    names: Mapping[GroupKind, frozenset[str]] = field(default_factory=lambda: NO_NAMES)
    namespaces: Scope = None  # where it works: the namespaces its watched kinds cover
    definitions: frozenset[str] = frozenset()  # the CRDs of its watched kinds
    unchecked: frozenset[str] = frozenset()  # kinds of its census not yet compared
    # The due-time fields it reads, per watched type (most workloads: none).
    due: Mapping[APIResource, frozenset[tuple[str, ...]]] = field(default_factory=lambda: NO_DUE)

    def kind_names(self) -> list[str]:
        """The watched and owned kinds resolved, as `Kind.group`."""
        return [
            f"{kind}.{group}" if group else kind
            for group, kind in (*self.scopes[0], *self.scopes[1])
        ]
