"""A real node beside the kwok nodes: containerd and a kubelet in private mount and PID namespaces.

Both run in the cluster's network namespace, with directories of the cluster's own bind-mounted over
/run, /var/lib and /var/log, so none of their state lands on the host. The pause program is PID 1 of
the node's PID namespace: when it stops, the kernel ends every shim and container with it. Pod
cgroups live under a cgroup root of the node's own, removed on stop. There is no pod network: only
hostNetwork pods run, on loopback (the node's address is a second one on `lo`, see `netns`). A
label and a NoSchedule taint keep every pod that does not ask for the node (toleration and
nodeSelector) on the kwok nodes.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster import netns
from localcluster.processes import free_port
from zeroscaler.certs.issue import CertPair, new_serving_cert

NODE_NAME = "127.0.0.1"  # kubelet refuses a loopback node IP unless the node is named after it
LABEL = "zeroscaler.io/real-node"
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
PRIVATE_DIRS = {"/run": "run", "/var/lib": "var-lib", "/var/log": "var-log"}
PARTS = (
    *("kubelet", "containerd", "ctr", "containerd-shim-runc-v2"),
    *("runc", "cni-loopback", "pause", "pause.tar"),
)
SOCKET = "/run/containerd/containerd.sock"  # as containerd and kubelet see it
# containerd's registry host configurations (one directory per registry host, a hosts.toml in it),
# read at each pull: a test that starts a registry tells the node about it while it runs.
REGISTRY_HOSTS = "etc/registry-hosts"
# The mount namespace's set-up, then the pause program as PID 1 of the PID namespace.
_INIT = (
    'set -e; mount --make-rshared /; mount --bind "$1" /run; mount --bind "$2" /var/lib; '
    'mount --bind "$3" /var/log; exec "$4"'
)


class RealNodeError(RuntimeError):
    """The real node did not come up, or an image could not be imported into it."""


@dataclass
class RealNode:
    """Where a real node keeps its state, and what stop must remove."""

    directory: Path
    cgroup_root: str
    ctr: Path
    init_pid: int = 0

    @property
    def socket(self) -> Path:
        """containerd's socket as the host sees it (through the bind-mounted /run)."""
        return self.directory / "run" / SOCKET.removeprefix("/run/")

    def import_image(self, archive: Path) -> None:
        """Import an image archive (OCI or docker-archive tar) for the kubelet's use."""
        cmd = [str(self.ctr), "--address", str(self.socket), "-n", "k8s.io", "images", "import"]
        proc = subprocess.run([*cmd, str(archive)], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RealNodeError(f"ctr images import {archive}: {proc.stderr.strip()[-1000:]}")

    def trust_plain_http_registry(self, host: str) -> None:
        """Let containerd pull from a registry on host (e.g. 127.0.0.1:5000) over plain HTTP."""
        directory = self.directory / REGISTRY_HOSTS / host
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hosts.toml").write_text(
            f'server = "http://{host}"\n\n[host."http://{host}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
        )

    def containerd_ready(self) -> bool:
        if not self.socket.exists():
            return False
        cmd = [str(self.ctr), "--address", str(self.socket), "version"]
        return subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0

    def state(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "cgroup_root": self.cgroup_root,
            "ctr": str(self.ctr),
            "init_pid": self.init_pid,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RealNode:
        return cls(
            Path(state["directory"]), state["cgroup_root"], Path(state["ctr"]), state["init_pid"]
        )


def unavailable(binaries: Mapping[str, Path], workdir: Path) -> str | None:
    """Why a real node cannot start on this machine, in one line; None when it can."""
    if os.geteuid() != 0:
        return "it needs root (containerd and the kubelet mount file systems and make cgroups)"
    missing = [p for p in PARTS if p not in binaries]
    if missing:
        return f"its parts are not built ({', '.join(missing)}): run `python -m localcluster build`"
    tools = [t for t in ("unshare", "nsenter", "mount") if shutil.which(t) is None]
    if tools:
        return f"it needs {', '.join(tools)} (util-linux)"
    if not [m for m in cgroup_mounts() if os.access(m, os.W_OK)]:
        return "no writable cgroup hierarchy is mounted under /sys/fs/cgroup"
    for path in [workdir, *(binaries[p] for p in PARTS)]:
        for private in PRIVATE_DIRS:
            if path.resolve().is_relative_to(private):
                return f"{path} is under {private}, which the node's own directory hides"
    return None


def cgroup_mounts() -> list[Path]:
    """Mount points of the cgroup hierarchies (v1 and v2) this process sees."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        if after.split(" ", 1)[0] in ("cgroup", "cgroup2"):
            found.append(Path(before.split(" ")[4]))
    return found


def prepare(
    directory: Path,
    binaries: Mapping[str, Path],
    ca: CertPair,
    ca_file: Path,
    server: str,
    pause_image: str,
) -> RealNode:
    """Write the node's configuration and certificates, and make its cgroup root."""
    for sub in (*PRIVATE_DIRS.values(), "etc", "cni", "pki"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    cgroup_root = f"zeroscaler-{secrets.token_hex(4)}"
    node = RealNode(directory, cgroup_root, binaries["ctr"])
    pki = directory / "pki"
    serving_crt, serving_key = new_serving_cert(ca, [NODE_NAME, "localhost"]).write(pki, "serving")
    client = new_serving_cert(
        ca, [f"system:node:{NODE_NAME}"], client=True, organization="system:nodes"
    )
    client_crt, client_key = client.write(pki, "client")
    kubeconfig = directory / "etc" / "kubeconfig"
    _write_json(
        kubeconfig,
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(
                            ca_file.read_bytes()
                        ).decode(),
                    },
                }
            ],
            "users": [
                {
                    "name": "kubelet",
                    "user": {"client-certificate": str(client_crt), "client-key": str(client_key)},
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "kubelet"}}],
            "current-context": "local",
        },
    )
    # Only loopback: enough for the node to report its network ready; hostNetwork pods need no more.
    _write_json(
        directory / "cni" / "10-loopback.conflist",
        {"cniVersion": "1.0.0", "name": "loopback", "plugins": [{"type": "loopback"}]},
    )
    (directory / "etc" / "containerd.toml").write_text(
        containerd_config(binaries, directory / "cni", pause_image, directory / REGISTRY_HOSTS)
    )
    port = free_port()
    (directory / "etc" / "resolv.conf").write_text("nameserver 127.0.0.1\n")
    _write_json(
        directory / "etc" / "kubelet.json",
        kubelet_config(cgroup_root, port, ca_file, serving_crt, serving_key, directory),
    )
    _make_cgroup_root(cgroup_root)  # last: from here on the caller must remove it again
    return node


def kubelet_config(
    cgroup_root: str, port: int, ca_file: Path, crt: Path, key: Path, directory: Path
) -> dict[str, Any]:
    """The KubeletConfiguration of a real node on this kind of machine."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # hosts with cgroup v1 hierarchies (kubelet 1.36 exits otherwise)
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{cgroup_root}",
        "failSwapOn": False,
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": free_port(),
        "tlsCertFile": str(crt),
        "tlsPrivateKeyFile": str(key),
        # As in a real cluster: the API server's client certificate, then RBAC through the API.
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{SOCKET}",
        "registerWithTaints": [TAINT],
        "resolvConf": str(directory / "etc" / "resolv.conf"),
        # Imported images cannot be pulled again: never collect them, never evict for disk space.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
    }


def containerd_config(
    binaries: Mapping[str, Path], cni_conf: Path, pause_image: str, registry_hosts: Path
) -> str:
    """containerd's configuration: state under the private /run and /var/lib, CRI for kubelet."""
    runtime = "plugins.'io.containerd.cri.v1.runtime'"
    return f"""version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "{SOCKET}"

[{runtime}]
  # Without CAP_SYS_RESOURCE the pause container's oom_score_adj of -998 cannot be set.
  restrict_oom_score_adj = true

[{runtime}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{runtime}.containerd.runtimes.runc.options]
  BinaryName = "{binaries["runc"]}"

[{runtime}.cni]
  bin_dirs = ["{binaries["cni-loopback"].parent}"]
  conf_dir = "{cni_conf}"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{pause_image}"

[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = "{registry_hosts}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def init_argv(node: RealNode, binaries: Mapping[str, Path]) -> list[str]:
    """The command that makes the node's namespaces and runs the pause program as their PID 1."""
    mounts = [str(node.directory / sub) for sub in PRIVATE_DIRS.values()]
    return [
        "unshare",
        "--mount",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--propagation=private",  # nothing mounted inside reaches the host
        "--",
        "sh",
        "-c",
        _INIT,
        "sh",
        *mounts,
        str(binaries["pause"]),
    ]


def find_init(unshare_pid: int, timeout: float = 20.0) -> int:
    """The host PID of the node's PID 1, once it has set up the mounts and runs pause."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in children(unshare_pid):
            try:
                if Path(f"/proc/{child}/comm").read_text().strip() == "pause":
                    return child
            except OSError:
                continue
        if not Path(f"/proc/{unshare_pid}").exists():
            break
        time.sleep(0.05)
    raise RealNodeError("the node's namespaces did not come up (see real-node-init.log)")


def enter_argv(init_pid: int, argv: list[str]) -> list[str]:
    """`argv` run inside the node's mount and PID namespaces."""
    return ["nsenter", f"--target={init_pid}", "--mount", "--pid", "--", *argv]


def containerd_argv(node: RealNode, binaries: Mapping[str, Path]) -> list[str]:
    return [str(binaries["containerd"]), f"--config={node.directory / 'etc' / 'containerd.toml'}"]


def containerd_env(binaries: Mapping[str, Path]) -> dict[str, str]:
    # containerd finds its shim on PATH.
    return {**os.environ, "PATH": f"{binaries['containerd'].parent}:{os.environ.get('PATH', '')}"}


def node_ip() -> str:
    """The node's address: the isolation's second loopback address, so that its host-network pods
    can be a Service's endpoints (a webhook by `service`); else 127.0.0.1."""
    return netns.NODE_ADDRESS if netns.has_node_address() else "127.0.0.1"


def kubelet_argv(node: RealNode, binaries: Mapping[str, Path]) -> list[str]:
    etc = node.directory / "etc"
    return [
        str(binaries["kubelet"]),
        f"--config={etc / 'kubelet.json'}",
        f"--kubeconfig={etc / 'kubeconfig'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={node_ip()}",
        f"--node-labels={LABEL}=true",
    ]


def cleanup(node: RealNode, timeout: float = 20.0) -> list[str]:
    """Once the node's processes are stopped: wait for its namespace to empty and remove its cgroup
    root; returns what could not be removed."""
    deadline = time.monotonic() + timeout
    while node.init_pid and _runs_pause(node.init_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = []
    for mount in cgroup_mounts():
        root = mount / node.cgroup_root
        if root.is_dir() and not _remove_cgroup_tree(root, deadline):
            left.append(str(root))
    return left


def _make_cgroup_root(name: str) -> None:
    for mount in cgroup_mounts():
        if not os.access(mount, os.W_OK):
            continue
        path = mount / name
        path.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):  # an empty cpuset admits no process
            parent, own = mount / knob, path / knob
            if parent.exists() and own.exists() and not own.read_text().strip():
                own.write_text(parent.read_text())


def _remove_cgroup_tree(root: Path, deadline: float) -> bool:
    while True:
        try:
            for dirpath, _dirs, _files in os.walk(root, topdown=False):
                Path(dirpath).rmdir()
            return True
        except OSError as e:
            # A cgroup stays busy for a moment after its last process was reaped.
            if e.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def inner_pid(wrapper_pid: int) -> int:
    """The process a namespace wrapper (nsenter) started, or the wrapper itself if it has none."""
    found = children(wrapper_pid)
    return found[0] if len(found) == 1 else wrapper_pid


def children(pid: int) -> list[int]:
    """The PIDs whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _runs_pause(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "pause"
    except OSError:
        return False


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n")  # JSON is YAML: both tools read it
