"""What the chart's two system test files share: where the chart is, a Deployment that never
runs a pod, and a kubeconfig as one of the chart's ServiceAccounts."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client as k8s

from localcluster.cluster import Cluster

CHART = Path(__file__).resolve().parents[2] / "charts" / "zeroscaler"
IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok only pretends to run containers


def zero_replica_deployment(name: str) -> k8s.V1Deployment:
    labels = {"app": name}
    return k8s.V1Deployment(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1DeploymentSpec(
            replicas=0,
            selector=k8s.V1LabelSelector(match_labels=labels),
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=labels),
                spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="main", image=IMAGE)]),
            ),
        ),
    )


def service_account_kubeconfig(cluster: Cluster, path: Path, namespace: str, sa: str) -> Path:
    token = cluster.kubectl("create", "token", sa, "-n", namespace).stdout.strip()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "sa",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {
                            "server": cluster.server,
                            "certificate-authority": str(cluster.ca_file),
                        },
                    }
                ],
                "users": [{"name": sa, "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "local", "user": sa}}],
            }
        )
    )
    return path
