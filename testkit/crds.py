"""Minimal CustomResourceDefinitions for system tests."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from testkit.waiting import wait_for


def create_crd(
    api: k8s.ApiClient,
    group: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    status: bool = True,
    version_name: str = "v1",
) -> None:
    """A served CRD that accepts any object, created once per cluster; waits until established."""
    version: dict[str, Any] = {
        "name": version_name,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "listKind": f"{kind}List",
            },
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [version],
        },
    }
    ext = k8s.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as e:
        if e.status != 409:
            raise

    def established() -> bool:
        crd = ext.read_custom_resource_definition(f"{plural}.{group}")
        conditions = (crd.status and crd.status.conditions) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, f"CRD {plural}.{group} established", 60)
