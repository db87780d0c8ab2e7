"""Chart values for zeroscaler's pods on the local cluster's real node (tests and benchmarks)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from image import build as image_build
from localcluster import realnode

# The real node is tainted and labelled: only pods that ask for it run there.
PLACEMENT: dict[str, Any] = {
    "nodeSelector": {realnode.LABEL: "true"},
    "tolerations": [{"key": realnode.LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}


def local_image() -> dict[str, str]:
    """Image values for the archive `make image` built, imported into the node: never pulled."""
    name, _, tag = image_build.default_name().rpartition(":")
    registry, _, repository = name.partition("/")
    return {"registry": registry, "repository": repository, "tag": tag, "pullPolicy": "Never"}


def real_node_values(
    server: str,
    webhook_port: int,
    metrics_port: int,
    *,
    controller_replicas: int = 2,
    idle_timeout: str = "5s",
    mode: str = "split",
) -> dict[str, Any]:
    """Values that run every pod on the real node's host network, talking to `server` directly."""
    api = urlparse(server)
    return {
        "mode": mode,  # combined: the controller's pods serve the webhook too
        "hostNetwork": True,  # the real node has no pod network
        "apiServer": {"host": api.hostname, "port": api.port},  # nor Service addresses
        "image": local_image(),  # imported, not pulled: there is no registry
        "controller": {
            "replicas": controller_replicas,
            "metricsPort": metrics_port,
            "leaderElection": {"leaseDuration": 5},
            **PLACEMENT,
        },
        "webhook": {
            "port": webhook_port,
            "clientConfig": {"mode": "url", "url": f"https://127.0.0.1:{webhook_port}/mutate"},
            # Its own Deployment's pod settings: mode split only (the schema refuses them else).
            **({"replicas": 1, **PLACEMENT} if mode == "split" else {}),
        },
        "certificates": {"job": PLACEMENT},
        "policy": {"defaults": {"idleTimeout": idle_timeout}, "bounds": {"minIdleTimeout": "1s"}},
    }
