"""Real operators' RBAC and workloads (tests/fixtures/operators), come back annotated."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import Cluster
from testkit.crds import create_crd
from testkit.discovery import OPERATOR_EXPECTED, Operator, operators
from testkit.webhook import (
    Admitted,
    Webhook,
    admitted_until,
    apply_objects,
    create_workload,
    running_webhook,
)

pytestmark = pytest.mark.cluster

Obj = dict[str, Any]


def localise(objects: list[Obj], namespace: str, prefix: str) -> tuple[list[Obj], Obj]:
    """Move the namespaced objects into `namespace` and prefix cluster-scoped names."""
    out: list[Obj] = []
    workload: Obj | None = None
    for original in objects:
        obj = copy.deepcopy(original)
        kind, meta = obj.get("kind"), obj.setdefault("metadata", {})
        if kind in ("ClusterRole", "ClusterRoleBinding"):
            meta.pop("namespace", None)
            meta["name"] = f"{prefix}-{meta['name']}"
        else:
            meta["namespace"] = namespace
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            if obj["roleRef"]["kind"] == "ClusterRole":
                obj["roleRef"]["name"] = f"{prefix}-{obj['roleRef']['name']}"
            for subject in obj.get("subjects") or []:
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace
        if kind in ("Deployment", "StatefulSet"):
            workload = obj
        else:
            out.append(obj)
    assert workload is not None
    return out, workload


def expected_annotations(name: str, namespace: str) -> dict[str, str]:
    watched, owned, scope = OPERATOR_EXPECTED[name]
    wanted = {"zeroscaler.io/idle-timeout": "15m", "zeroscaler.io/max-sleep": "10h"}
    if watched:
        wanted["zeroscaler.io/watched-kinds"] = ",".join(watched)
    if owned:
        wanted["zeroscaler.io/owned-kinds"] = ",".join(owned)
    if scope:
        wanted["zeroscaler.io/watch-namespaces"] = ",".join(
            namespace if s == "myproject" else s for s in scope
        )
    wanted["zeroscaler.io/injected"] = ",".join(sorted(wanted))
    return wanted


@pytest.fixture
def hook(
    cluster: Cluster, api: k8s.ApiClient, tmp_path: Path, ns: str, opted_ns: str
) -> Iterator[Webhook]:
    # Policy in a namespace of its own: the webhook never mutates in the one it runs in.
    with running_webhook(cluster, api, tmp_path, ns) as running:
        running.enrol(api, opted_ns)
        yield running


def crds_of(op: Operator, api: k8s.ApiClient) -> None:
    for crd in op.crds:
        create_crd(
            api,
            crd.group,
            crd.kind,
            crd.resource,
            namespaced=crd.namespaced,
            version_name=crd.version,
        )


@pytest.mark.parametrize("op", list(operators()), ids=lambda op: op.name)
def test_operator_comes_back_annotated(
    cluster: Cluster, api: k8s.ApiClient, hook: Webhook, opted_ns: str, op: Operator
) -> None:
    crds_of(op, api)
    objects, workload = localise(op.objects, opted_ns, opted_ns)
    try:
        apply_objects(api, objects)
        wanted = expected_annotations(op.name, opted_ns)
        wildcard = not OPERATOR_EXPECTED[op.name][0]

        def settled(admitted: Admitted) -> bool:
            if wildcard:  # nothing inferred either way: wait for the reason to be given
                return any("may watch every resource" in w for w in admitted.warnings)
            return admitted.annotations == wanted

        admitted_until(cluster, opted_ns, workload, settled, f"{op.name} annotated as expected")
        created = create_workload(cluster, opted_ns, workload)
        assert created.annotations == wanted
        if wildcard:
            assert any("may watch every resource" in w for w in created.warnings)
    finally:
        rbac = k8s.RbacAuthorizationV1Api(api)
        for obj in objects:
            try:
                if obj["kind"] == "ClusterRole":
                    rbac.delete_cluster_role(obj["metadata"]["name"])
                elif obj["kind"] == "ClusterRoleBinding":
                    rbac.delete_cluster_role_binding(obj["metadata"]["name"])
            except ApiException as e:
                if e.status != 404:
                    raise
