"""Both ways of discovery agree on a real API server, so the fallback for older servers is sound."""

from __future__ import annotations

import asyncio

from localcluster.cluster import Cluster
from zeroscaler.api import Kube
from zeroscaler.api.credentials import load_access
from zeroscaler.core.kinds import APIResource


async def _both(cluster: Cluster) -> tuple[list[APIResource], list[APIResource], bool | None]:
    async with Kube(load_access(str(cluster.kubeconfig))) as kube:
        aggregated = await kube.discover()
        by_group = await kube.discover_by_group()
        return aggregated, by_group, kube.aggregated_discovery


def test_group_by_group_discovery_finds_what_aggregated_discovery_serves(
    cluster: Cluster,
) -> None:
    aggregated, by_group, served = asyncio.run(_both(cluster))
    assert served is True, "the API server did not answer with aggregated discovery"
    assert {r.group for r in aggregated} >= {"", "apps", "apiextensions.k8s.io"}
    only_one = set(aggregated) ^ set(by_group)
    assert not only_one, sorted(only_one, key=lambda r: (r.group, r.resource))
