"""A local process standing in for a workload's pods: it runs while the workload has replicas.

kwok nodes only pretend to run containers, so an operator under test runs on the host instead, as
its own ServiceAccount, and stops when zeroscaler scales its Deployment to zero, as its pod would.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx
import yaml

from localcluster.cluster import Cluster
from localcluster.processes import stop

_POLL = 0.2  # seconds between looks at the Deployment's replicas


def service_account_kubeconfig(cluster: Cluster, namespace: str, name: str, path: Path) -> Path:
    """Write a kubeconfig that authenticates as a ServiceAccount, with a token from TokenRequest."""
    with cluster.client() as http:
        resp = http.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            json={"spec": {"expirationSeconds": 3600}},
        )
    resp.raise_for_status()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {
                    "server": cluster.server,
                    "certificate-authority": str(cluster.ca_file),
                },
            }
        ],
        "users": [{"name": name, "user": {"token": resp.json()["status"]["token"]}}],
        "contexts": [
            {"name": name, "context": {"cluster": "local", "user": name, "namespace": namespace}}
        ],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


class StandIn:
    """Runs `cmd` while the Deployment `namespace/name` has replicas; stops it at zero."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        name: str,
        cmd: Sequence[str],
        log: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.cluster, self.namespace, self.name = cluster, namespace, name
        self.cmd, self.log = list(cmd), log
        self.env = {**os.environ, **(env or {})}
        self.starts = self.stops = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"standin-{name}", daemon=True)

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._done.set()
        self._thread.join()
        if self._proc is not None:
            stop(self._proc)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def _follow(self) -> None:
        path = f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{self.name}"
        with self.cluster.client(timeout=5) as http:
            while not self._done.wait(_POLL):
                try:
                    resp = http.get(path)
                except httpx.HTTPError:
                    continue
                if resp.status_code != 200:
                    continue
                wanted = int(resp.json().get("spec", {}).get("replicas") or 0) > 0
                if wanted and not self.running:
                    self._start()
                elif not wanted and self._proc is not None:
                    stop(self._proc)
                    self._proc = None
                    self.stops += 1

    def _start(self) -> None:
        with self.log.open("ab") as out:
            self._proc = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        self.starts += 1
