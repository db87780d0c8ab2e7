"""An example operator written with kopf, knowing nothing of zeroscaler.

For each Backup it writes a ConfigMap (the "backup") owned by the Backup, and records in the
Backup's status where it went. Run: `kopf run --standalone --namespace=NS operator.py`.
"""

from __future__ import annotations

import datetime
import sys
from typing import Any

import kopf
import kubernetes.client as k8s
import kubernetes.config


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Keep startup and shutdown quick: a scaled-down pod should go at once."""
    settings.peering.standalone = True
    settings.watching.server_timeout = 300
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()


@kopf.on.create("ops.example.org", "v1", "backups")
def back_up(
    name: str, namespace: str, spec: kopf.Spec, body: kopf.Body, **_: Any
) -> dict[str, str]:
    """Write the ConfigMap for a new Backup; kopf stores the result in its status."""
    target = f"backup-{name}"
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    configmap: dict[str, Any] = {
        "metadata": {"name": target},
        "data": {"source": str(spec.get("source", "")), "takenAt": when},
    }
    kopf.adopt(configmap, owner=body)
    k8s.CoreV1Api().create_namespaced_config_map(namespace, configmap)
    # One line per reconcile, in one write: handlers run in threads, and print() writes twice.
    sys.stdout.write(f"reconciled {namespace}/{name} into ConfigMap {target} at {when}\n")
    sys.stdout.flush()
    return {"configMap": target, "takenAt": when}
