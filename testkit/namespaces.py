"""The controller manager's CA map in a test's namespace, there from the start."""

from __future__ import annotations

from kubernetes import client as k8s

ROOT_CA = "kube-root-ca.crt"
ROOT_CA_NOTE = "kubernetes.io/description"  # the publisher rewrites the map without one


def publish_root_ca(core: k8s.CoreV1Api, namespace: str, ca_pem: str) -> None:
    """Write the controller manager's CA ConfigMap into `namespace` as its publisher writes it.

    Created later by the controller manager, it is activity no test expects: a watch started
    before it takes the create for news, and a sleeper watching ConfigMaps wakes. It can come a
    minute late: after a test that took the API server away, the controller manager's watches
    back off for up to 30 s, doubled by jitter, before they list again. Its publisher finds this
    one equal to its own (the cluster's CA, with a description) and leaves it as it is.
    """
    body = {
        "metadata": {"name": ROOT_CA, "annotations": {ROOT_CA_NOTE: "published by the test"}},
        "data": {"ca.crt": ca_pem},
    }
    try:
        core.create_namespaced_config_map(namespace, body)
    except k8s.ApiException as e:
        if e.status != 409:  # 409: the publisher was first, with the same content
            raise
