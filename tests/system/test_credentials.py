"""Kubeconfig settings that change how the API server is reached, against the real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localcluster.cluster import Cluster
from zeroscaler.api import Kube, Transient
from zeroscaler.api.credentials import load_access


def _with_server_name(cluster: Cluster, path: Path, name: str) -> Path:
    doc = json.loads(cluster.kubeconfig.read_text())
    doc["clusters"][0]["cluster"]["tls-server-name"] = name
    path.write_text(json.dumps(doc))
    return path


async def _get(kube: Kube) -> None:
    await kube.get("/version")


async def _watch(kube: Kube) -> None:
    _, rv = await kube.list_all("/api/v1/namespaces", metadata_only=True)
    async for _ in kube.watch("/api/v1/namespaces", resource_version=rv, timeout_seconds=1):
        pass


async def _through(kubeconfig: Path, *calls: str) -> None:
    async with Kube(load_access(str(kubeconfig))) as kube:
        for call in calls:
            await {"get": _get, "watch": _watch}[call](kube)


async def test_tls_server_name_a_certificate_carries_is_accepted(
    cluster: Cluster, tmp_path: Path
) -> None:
    # The serving certificate names kubernetes.default.svc as well as the address we dial.
    kubeconfig = _with_server_name(cluster, tmp_path / "k", "kubernetes.default.svc")
    await _through(kubeconfig, "get", "watch")


@pytest.mark.parametrize("call", ["get", "watch"])
async def test_tls_server_name_is_what_the_certificate_is_checked_against(
    cluster: Cluster, tmp_path: Path, call: str
) -> None:
    # 127.0.0.1 alone would pass; a name the certificate lacks must not.
    kubeconfig = _with_server_name(cluster, tmp_path / "k", "elsewhere.example")
    with pytest.raises(Transient, match=r"elsewhere\.example"):
        await _through(kubeconfig, call)
