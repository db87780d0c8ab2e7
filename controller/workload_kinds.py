"""A workload's kinds: as annotated, or inferred from its ServiceAccount's RBAC when none are."""

from __future__ import annotations

import dataclasses

from zeroscaler.cluster.view import ClusterView
from zeroscaler.controller.watch_memory import WatchMemory
from zeroscaler.controller.workload_object import WorkloadObject
from zeroscaler.core.activity import GroupKind
from zeroscaler.core.annotations import (
    Notice,
    WorkloadConfig,
    has_kinds_annotated,
    kinds_inferred,
)
from zeroscaler.core.inference import infer_kinds
from zeroscaler.core.kinds import parse_kind_refs
from zeroscaler.core.policy import DEFAULT_POLICY
from zeroscaler.core.sharing import shared_mapping


def settle_kinds(
    watch: WatchMemory, obj: WorkloadObject, config: WorkloadConfig, cluster: ClusterView
) -> tuple[WorkloadConfig, list[Notice]]:
    """The config with its kinds; without kinds annotated, those its RBAC says it watches.
    Handed its own memory (`watch`) and the workload as last read."""
    watch.inferred, watch.names = False, shared_mapping({})
    if config.idle_timeout is None or has_kinds_annotated(obj.annotations):
        return config, []
    watch.inferred = True  # RBAC changes now concern this workload
    if not cluster.is_rbac_synced():
        return config, [("InferenceUnavailable", "RBAC is not readable; no kinds inferred")]
    discovery = cluster.discovery
    found = infer_kinds(
        cluster.rbac(),
        obj.namespace,
        obj.service_account,
        discovery,
        ignore=DEFAULT_POLICY.inference.ignore,
    )
    named: dict[GroupKind, frozenset[str]] = {}
    for canonical, names in found.resource_names.items():
        resolved = discovery.resolve(parse_kind_refs(canonical)[0][0])
        if resolved is not None:
            named[(resolved.group, resolved.kind)] = frozenset(names)
    watch.names = shared_mapping(named)
    warnings: list[Notice] = [("InferenceLimited", message) for message in found.warnings]
    if not found.watched:
        return config, warnings
    watched, _ = parse_kind_refs(",".join(found.watched))
    owned, _ = parse_kind_refs(",".join(found.owned))
    namespaces = config.watch_namespaces
    if namespaces is None and found.namespaces:
        namespaces = tuple(found.namespaces)
    account = f"{obj.namespace}/{obj.service_account}"
    warnings.append(kinds_inferred(account, found.watched, found.owned))
    inferred = dataclasses.replace(
        config, watched=tuple(watched), owned=tuple(owned), watch_namespaces=namespaces
    )
    return inferred, warnings
