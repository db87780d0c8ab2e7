"""The two workload types zeroscaler scales, and where the API serves them."""

from __future__ import annotations

WORKLOAD_RESOURCES = {"Deployment": "deployments", "StatefulSet": "statefulsets"}


def workload_path(kind: str, namespace: str, name: str = "") -> str:
    """The REST path of a Deployment or StatefulSet (or of the collection)."""
    path = f"/apis/apps/v1/namespaces/{namespace}/{WORKLOAD_RESOURCES[kind]}"
    return f"{path}/{name}" if name else path
