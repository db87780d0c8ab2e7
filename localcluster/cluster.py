"""Start and stop a real control plane on loopback.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok each get a free 127.0.0.1
port and one directory; the API server serves a certificate of our own CA and accepts a static admin
token. Optionally one real node (containerd and a kubelet, see `localcluster.realnode`) joins the
kwok nodes. Everything started is stopped by process id, in reverse order; when start-up fails, the
tails of the component logs say why.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from localcluster import realnode
from localcluster.build import PAUSE_IMAGE
from localcluster.processes import free_port
from localcluster.realnode import RealNode
from zeroscaler.certs.issue import (
    CertPair,
    new_ca,
    new_rsa_key_pem,
    new_serving_cert,
    public_key_pem,
)

SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"  # kwok hands out fake pod IPs from here; nothing ever dials them
READY_TIMEOUT = 120.0

Progress = Callable[[str], None]


class ClusterError(RuntimeError):
    """The control plane did not come up; the message carries the components' log tails."""


@dataclass
class Component:
    name: str
    pid: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    program: str = ""  # the executable's name where it is not `name` (a namespace wrapper)
    cmd: list[str] = field(default_factory=list)  # how it was started, to start it again
    env: dict[str, str] | None = None

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return _pid_runs(self.pid, self.program or self.name)


@dataclass
class Cluster:
    """A running local control plane and how to reach it."""

    workdir: Path
    server: str
    token: str
    ca_file: Path
    kubeconfig: Path
    binaries: dict[str, Path]
    components: list[Component] = field(default_factory=list)
    owns_workdir: bool = True
    real_node: RealNode | None = None
    real_node_absent: str = ""  # why there is no real node, when one was asked for
    real_node_seconds: float = 0.0  # from its namespaces' creation to the node being Ready

    def import_image(self, archive: Path) -> None:
        """Import an image archive into the real node's containerd."""
        if self.real_node is None:
            raise ClusterError(
                f"no real node to import {archive.name} into: {self.real_node_absent}"
            )
        self.real_node.import_image(archive)

    def client(self, timeout: float = 30.0) -> httpx.Client:
        """A synchronous HTTP client authenticated as the cluster admin."""
        return httpx.Client(
            base_url=self.server,
            verify=ssl.create_default_context(cafile=str(self.ca_file)),
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
        )

    def helm(
        self,
        home: Path,
        *args: str,
        check: bool = False,
        timeout: float = 600.0,
        binary: str = "helm",
    ) -> subprocess.CompletedProcess[str]:
        """Run a built helm (`helm`: Helm 3; `helm4`: Helm 4) against this cluster, its cache and
        config kept under `home`."""
        env = {**os.environ}
        for key in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            env[key] = str(home / key.lower())
        cmd = [str(self.binaries[binary]), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        if check and proc.returncode != 0:
            raise ClusterError(f"helm {args[0]} failed: {proc.stderr.strip()}")
        return proc

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster."""
        cmd = [str(self.binaries["kubectl"]), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def restart(self, name: str, sig: int = signal.SIGKILL, down: float = 0.0) -> None:
        """Kill one component with `sig`, leave it down `down` seconds, and start it again on the
        same ports and data (fault tests)."""
        old = next(c for c in self.components if c.name == name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(old.pid, sig)
        if old.proc is not None:
            old.proc.wait()
        self.components.remove(old)
        time.sleep(down)
        _launch(self, name, [], old.proc is None, argv=old.cmd, env=old.env)
        if name == "etcd":
            url = next(a.split("=", 1)[1] for a in old.cmd if a.startswith("--listen-client-urls="))
            _wait(self, "etcd /health", lambda _c: _etcd_healthy(url))
        else:
            _wait(
                self, f"{name} ready", lambda c: name != "kube-apiserver" or _get_ok(c, "/readyz")
            )

    def log_tails(self, lines: int = 25) -> str:
        parts = []
        for c in self.components:
            text = c.log.read_text(errors="replace") if c.log.exists() else ""
            tail = "\n".join(text.splitlines()[-lines:])
            parts.append(f"--- {c.name} ({'running' if c.alive() else 'exited'}), {c.log}\n{tail}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop every component we started, newest first; remove the real node's cgroups and our
        directory."""
        for c in reversed(self.components):
            _terminate(c)
        self.components.clear()
        left = realnode.cleanup(self.real_node) if self.real_node is not None else []
        self.real_node = None
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if left:
            raise ClusterError(f"could not remove the real node's cgroups: {', '.join(left)}")

    def state(self) -> dict[str, Any]:
        """What a later process needs to reach or stop this cluster."""
        return {
            "workdir": str(self.workdir),
            "server": self.server,
            "token": self.token,
            "ca_file": str(self.ca_file),
            "kubeconfig": str(self.kubeconfig),
            "binaries": {k: str(v) for k, v in self.binaries.items()},
            "components": [
                {"name": c.name, "pid": c.pid, "log": str(c.log), "program": c.program}
                for c in self.components
            ],
            "real_node": self.real_node.state() if self.real_node else None,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Cluster:
        return cls(
            workdir=Path(state["workdir"]),
            server=state["server"],
            token=state["token"],
            ca_file=Path(state["ca_file"]),
            kubeconfig=Path(state["kubeconfig"]),
            binaries={k: Path(v) for k, v in state["binaries"].items()},
            components=[
                Component(c["name"], c["pid"], Path(c["log"]), program=c.get("program", ""))
                for c in state["components"]
            ],
            real_node=RealNode.from_state(state["real_node"]) if state.get("real_node") else None,
        )


def start(
    binaries: Mapping[str, Path],
    *,
    workdir: Path | None = None,
    nodes: int = 2,
    progress: Progress | None = None,
    detach: bool = False,
    real_node: bool = False,
) -> Cluster:
    """Start a control plane and wait until it can run Pods; stop it again if that fails.

    With `real_node`, a real kubelet joins too; where it cannot, the cluster comes up without it and
    says why (under CI=true that is an error instead).
    """
    say = progress or (lambda _m: None)
    started = time.monotonic()
    owns = workdir is None
    work = Path(tempfile.mkdtemp(prefix="zeroscaler-cluster-")) if workdir is None else workdir
    work.mkdir(parents=True, exist_ok=True)
    pki = _write_pki(work)
    port = free_port()
    token = secrets.token_hex(16)
    (work / "tokens.csv").write_text(f'{token},zeroscaler-admin,admin,"system:masters"\n')
    server = f"https://127.0.0.1:{port}"
    kubeconfig = work / "kubeconfig"
    _write_kubeconfig(kubeconfig, server, pki["ca.crt"], token)
    cluster = Cluster(
        work, server, token, pki["ca.crt"], kubeconfig, dict(binaries), owns_workdir=owns
    )
    try:
        etcd_url = _start_etcd(cluster, detach)
        _launch(cluster, "kube-apiserver", _apiserver_args(cluster, pki, port, etcd_url), detach)
        _wait(cluster, "kube-apiserver /readyz", lambda c: _get_ok(c, "/readyz"))
        say(f"kube-apiserver ready at {server} ({time.monotonic() - started:.1f}s)")
        kc = str(kubeconfig)
        _launch(
            cluster,
            "kube-controller-manager",
            [
                f"--kubeconfig={kc}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--service-account-private-key-file={pki['sa.key']}",
                f"--root-ca-file={pki['ca.crt']}",
                "--use-service-account-credentials=false",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--controllers=*,-nodeipam,-csrsigning,-bootstrapsigner,-tokencleaner",
                "--concurrent-deployment-syncs=10",
                "--concurrent-statefulset-syncs=10",
                # Its client's default, 20 requests a second, took 25 minutes to write the status
                # of the scale row's 10,000 new Deployments, during its idle window.
                "--kube-api-qps=200",
                "--kube-api-burst=400",
            ],
            detach,
        )
        _launch(
            cluster,
            "kube-scheduler",
            [
                f"--kubeconfig={kc}",
                "--leader-elect=false",
                "--secure-port=0",
            ],
            detach,
        )
        _launch(
            cluster,
            "kwok",
            [
                f"--kubeconfig={kc}",
                # Only the nodes we create for it: the real node is the kubelet's.
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-ip=127.0.0.1",
                f"--cidr={POD_CIDR}",
                f"--server-address=127.0.0.1:{free_port()}",
                f"--config={cluster.binaries['kwok-stages.yaml']}",
                "--node-lease-duration-seconds=40",
            ],
            detach,
        )
        _create_nodes(cluster, nodes)
        _wait(cluster, "a Ready node", _has_ready_node)
        _wait(
            cluster,
            "the default ServiceAccount",
            lambda c: _get_ok(c, "/api/v1/namespaces/default/serviceaccounts/default"),
        )
        if real_node:
            join_real_node(cluster, progress=say, detach=detach)
        kinds = f"{nodes} kwok nodes" + (" and a real node" if cluster.real_node else "")
        say(f"control plane ready with {kinds} ({time.monotonic() - started:.1f}s)")
        return cluster
    except BaseException as e:
        tails = cluster.log_tails()
        cluster.stop()
        if isinstance(e, ClusterError):
            raise ClusterError(f"{e}\n{tails}") from e
        raise


def join_real_node(
    cluster: Cluster, *, progress: Progress | None = None, detach: bool = False
) -> None:
    """Add a real kubelet to a running cluster and wait until its node is Ready. Where this
    machine cannot run one, the cluster stays without it and `real_node_absent` says why (under
    CI=true that is an error instead). A cluster joins at most one real node."""
    if cluster.real_node is not None:
        raise ClusterError("this cluster has a real node already")
    say = progress or (lambda _m: None)
    began = time.monotonic()
    node = _start_containerd(cluster, _pki_paths(cluster.workdir), detach, say)
    if node is None:
        return
    _start_kubelet(cluster, node, detach)
    _wait(cluster, "the real node to be Ready", lambda c: _node_ready(c, realnode.NODE_NAME))
    cluster.real_node_seconds = round(time.monotonic() - began, 2)
    say(f"real node Ready ({cluster.real_node_seconds:.1f}s)")


def _pki_paths(work: Path) -> dict[str, Path]:
    """Where `_write_pki` wrote the cluster's certificates and keys."""
    pki = work / "pki"
    names = ["ca", "apiserver", "kubelet-client"]
    paths = {f"{n}.{ext}": pki / f"{n}.{ext}" for n in names for ext in ("crt", "key")}
    return {**paths, "sa.key": pki / "sa.key", "sa.pub": pki / "sa.pub"}


def _write_pki(work: Path) -> dict[str, Path]:
    paths = _pki_paths(work)
    ca = new_ca("zeroscaler-local-ca")
    ca.write(paths["ca.crt"].parent, "ca")
    hosts = [
        "127.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "10.96.0.1",
    ]
    new_serving_cert(ca, hosts).write(paths["apiserver.crt"].parent, "apiserver")
    # The API server's identity towards kubelets (logs, exec), allowed everything by RBAC.
    kubelet_client = new_serving_cert(
        ca, ["kube-apiserver-kubelet-client"], client=True, organization="system:masters"
    )
    kubelet_client.write(paths["kubelet-client.crt"].parent, "kubelet-client")
    sa_key_pem = new_rsa_key_pem()
    paths["sa.key"].touch(mode=0o600)
    paths["sa.key"].write_bytes(sa_key_pem)
    paths["sa.pub"].write_bytes(public_key_pem(sa_key_pem))
    return paths


def _write_kubeconfig(path: Path, server: str, ca_file: Path, token: str) -> None:
    ca_data = base64.b64encode(ca_file.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "zeroscaler-local",
                "cluster": {"server": server, "certificate-authority-data": ca_data},
            }
        ],
        "users": [{"name": "zeroscaler-admin", "user": {"token": token}}],
        "contexts": [
            {
                "name": "zeroscaler-local",
                "context": {"cluster": "zeroscaler-local", "user": "zeroscaler-admin"},
            }
        ],
        "current-context": "zeroscaler-local",
    }
    path.touch(mode=0o600)
    path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML; kubectl reads either


def _start_etcd(cluster: Cluster, detach: bool) -> str:
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    _launch(
        cluster,
        "etcd",
        [
            f"--data-dir={cluster.workdir / 'etcd'}",
            "--name=default",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=default=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
            "--quota-backend-bytes=4294967296",
        ],
        detach,
    )
    _wait(cluster, "etcd /health", lambda _c: _etcd_healthy(url))
    return url


def _apiserver_args(cluster: Cluster, pki: dict[str, Path], port: int, etcd_url: str) -> list[str]:
    return [
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--advertise-address=127.0.0.1",
        "--endpoint-reconciler-type=none",
        # Webhooks, conversions and APIServices given by `service` are called at a ready endpoint
        # of the Service, not its ClusterIP: host-network pods on the real node are on loopback.
        "--enable-aggregator-routing=true",
        f"--tls-cert-file={pki['apiserver.crt']}",
        f"--tls-private-key-file={pki['apiserver.key']}",
        f"--client-ca-file={pki['ca.crt']}",
        f"--token-auth-file={cluster.workdir / 'tokens.csv'}",
        "--authorization-mode=Node,RBAC",  # Node: what a kubelet may read and write, as upstream
        "--enable-admission-plugins=NodeRestriction",
        f"--kubelet-client-certificate={pki['kubelet-client.crt']}",
        f"--kubelet-client-key={pki['kubelet-client.key']}",
        f"--kubelet-certificate-authority={pki['ca.crt']}",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={pki['sa.pub']}",
        f"--service-account-signing-key-file={pki['sa.key']}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        f"--cert-dir={cluster.workdir / 'apiserver-certs'}",
        "--profiling=false",
        "--v=0",
    ]


def _launch(
    cluster: Cluster,
    name: str,
    args: list[str],
    detach: bool,
    *,
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Component:
    logs = cluster.workdir / "logs"
    logs.mkdir(exist_ok=True)
    log_path = logs / f"{name}.log"
    cmd = argv or [str(cluster.binaries[name]), *args]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cluster.workdir,
            start_new_session=True,  # its own process group: stopped as a whole, untouched by ^C
        )
    program = "" if argv is None or Path(cmd[0]).name == name else Path(cmd[0]).name
    component = Component(name, proc.pid, log_path, None if detach else proc, program, cmd, env)
    cluster.components.append(component)
    return component


def _start_containerd(
    cluster: Cluster, pki: dict[str, Path], detach: bool, say: Progress
) -> RealNode | None:
    """The real node's namespaces and containerd, or None (said why) where it cannot run here."""
    reason = realnode.unavailable(cluster.binaries, cluster.workdir)
    if reason is not None:
        if os.environ.get("CI") == "true":
            raise ClusterError(f"real node: cannot start under CI=true: {reason}")
        say(f"real node: not started, kwok nodes only: {reason}")
        cluster.real_node_absent = reason
        return None
    ca = CertPair(pki["ca.crt"].read_bytes(), pki["ca.key"].read_bytes())
    node = realnode.prepare(
        cluster.workdir / "node", cluster.binaries, ca, pki["ca.crt"], cluster.server, PAUSE_IMAGE
    )
    cluster.real_node = node  # from here on stop() removes its cgroups, whatever fails next
    b = cluster.binaries
    init = _launch(cluster, "real-node-init", [], detach, argv=realnode.init_argv(node, b))
    try:
        node.init_pid = realnode.find_init(init.pid)
    except realnode.RealNodeError as e:
        raise ClusterError(str(e)) from e
    _launch(
        cluster,
        "containerd",
        [],
        detach,
        argv=realnode.enter_argv(node.init_pid, realnode.containerd_argv(node, b)),
        env=realnode.containerd_env(b),
    )
    _wait(cluster, "containerd", lambda _c: node.containerd_ready(), timeout=30)
    try:
        node.import_image(b["pause.tar"])
    except realnode.RealNodeError as e:
        raise ClusterError(f"the pause image: {e}") from e
    return node


def _start_kubelet(cluster: Cluster, node: RealNode, detach: bool) -> None:
    argv = realnode.enter_argv(node.init_pid, realnode.kubelet_argv(node, cluster.binaries))
    _launch(cluster, "kubelet", [], detach, argv=argv)


def _create_nodes(cluster: Cluster, count: int) -> None:
    resources = {"cpu": "64", "memory": "256Gi", "pods": "1000"}
    with cluster.client() as http:
        for i in range(count):
            name = f"kwok-node-{i}"
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    # As a kubelet labels its node: charts select Linux nodes by this label.
                    "labels": {
                        "type": "kwok",
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                    },
                },
                "status": {"capacity": resources, "allocatable": resources},
            }
            resp = http.post("/api/v1/nodes", json=body)
            if resp.status_code not in (201, 409):
                raise ClusterError(f"creating node {name}: {resp.status_code} {resp.text[:300]}")


def _has_ready_node(cluster: Cluster) -> bool:
    with cluster.client(timeout=5) as http:
        resp = http.get("/api/v1/nodes")
        if resp.status_code != 200:
            return False
        for node in resp.json().get("items", []):
            for cond in (node.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "Ready" and cond.get("status") == "True":
                    return True
    return False


def _node_ready(cluster: Cluster, name: str) -> bool:
    with cluster.client(timeout=5) as http:
        resp = http.get(f"/api/v1/nodes/{name}")
        if resp.status_code != 200:
            return False
        conditions = (resp.json().get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _get_ok(cluster: Cluster, path: str) -> bool:
    try:
        with cluster.client(timeout=5) as http:
            return http.get(path).status_code == 200
    except httpx.HTTPError:
        return False


def _etcd_healthy(url: str) -> bool:
    try:
        resp = httpx.get(f"{url}/health", timeout=2)
        return resp.status_code == 200 and resp.json().get("health") == "true"
    except (httpx.HTTPError, ValueError):
        return False


def _wait(
    cluster: Cluster, what: str, ready: Callable[[Cluster], bool], timeout: float = READY_TIMEOUT
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [c.name for c in cluster.components if not c.alive()]
        if dead:
            raise ClusterError(f"waiting for {what}: {', '.join(dead)} exited")
        if ready(cluster):
            return
        time.sleep(0.2)
    raise ClusterError(f"{what} not ready after {timeout:.0f}s")


def _pid_runs(pid: int, name: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return name.encode() in cmdline.split(b"\0", 1)[0]


def _terminate(c: Component, grace: float = 10.0) -> None:
    if not c.alive():
        return
    try:
        os.killpg(c.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if c.proc is not None:
            try:
                c.proc.wait(timeout=0.1)
                return
            except subprocess.TimeoutExpired:
                continue
        if not c.alive():
            return
        time.sleep(0.1)
    try:
        os.killpg(c.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if c.proc is not None:
        c.proc.wait()
