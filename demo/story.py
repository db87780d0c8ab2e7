"""The demo's story on a cluster: install, sleep, a Backup wakes the operator, it reconciles.

On the real node everything runs in containers: zeroscaler from its chart and image, the example
operator from its plain manifests and image. Without a real node the same story runs on kwok
nodes, with the webhook, the controller and the operator as local processes.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import secrets
import ssl
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import yaml

from demo.timeline import Recorder, Sample
from image import build as image_build
from localcluster.cluster import Cluster
from localcluster.processes import free_port, running
from testkit.real_chart import PLACEMENT, real_node_values
from testkit.standin import StandIn, service_account_kubeconfig
from zeroscaler.certs.issue import new_ca, new_serving_cert

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EXAMPLE = ROOT / "examples" / "backup-operator"
CHART = ROOT / "charts" / "zeroscaler"
NAMESPACE, OPERATOR = "backups", "backup-operator"
RELEASE_NS = "zeroscaler"
GROUP = "ops.example.org"
Say = Callable[[str], None]
T = TypeVar("T")


@dataclass(frozen=True)
class Options:
    """How long the operator may idle, and how many times a Backup wakes it."""

    idle_timeout: int = 15
    wakes: int = 2
    images: Path = ROOT / "dist"


def run(cluster: Cluster, work: Path, opts: Options, say: Say) -> dict[str, Any]:
    """Tell the whole story on `cluster`; returns the summary (what happened, and how fast)."""
    mode = "real-node" if cluster.real_node is not None else "kwok"
    if mode == "kwok":
        why = cluster.real_node_absent
        say(f"no real node ({why}): kwok nodes, and the operator as a local process")
    with ExitStack() as stack:
        step(say, f"helm install zeroscaler (policy: idle after {opts.idle_timeout}s)")
        if mode == "real-node":
            stack.enter_context(_zeroscaler_in_containers(cluster, work, opts, say))
        else:
            stack.enter_context(_zeroscaler_as_processes(cluster, work, opts, say))
        stack.callback(_remove_operator, cluster)
        annotations = _install_operator(cluster, mode, opts, say)
        recorder = stack.enter_context(Recorder(cluster, NAMESPACE, OPERATOR, say))
        if mode == "kwok":
            stack.enter_context(_operator_stand_in(cluster, work))
        summary: dict[str, Any] = {
            "mode": mode,
            "real_node_absent": cluster.real_node_absent or None,
            "idle_timeout_s": opts.idle_timeout,
            "annotations": annotations,
        }
        _wait(lambda: _running(recorder.latest()), "the operator's pod running", 180)
        step(say, f"nobody creates a Backup for {opts.idle_timeout}s: the operator is put to sleep")
        summary["slept"] = _wait_asleep(recorder, say)
        zeroscaler_status(cluster, say)
        summary["wakes"] = [
            _wake(cluster, recorder, work, mode, i, opts, say) for i in range(1, opts.wakes + 1)
        ]
        summary["slept_again"] = all(w["slept_again"] for w in summary["wakes"])
        summary["p50"] = _p50(summary["wakes"])
        recorder.mark("end")
        summary["samples"] = recorder.samples
        summary["marks"] = recorder.marks
        return summary
    raise AssertionError("unreachable")  # pragma: no cover (mypy: ExitStack may swallow)


def step(say: Say, message: str) -> None:
    say(f"\n== {message}")


def show(cluster: Cluster, say: Say, *args: str) -> str:
    out = cluster.kubectl(*args).stdout.rstrip()
    say(f"$ kubectl {' '.join(args)}\n{out}")
    return out


def zeroscaler_status(cluster: Cluster, say: Say) -> None:
    cmd = [str(BIN / "zeroscaler"), "status", "-A", "--kubeconfig", str(cluster.kubeconfig)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.rstrip()
    say(f"$ zeroscaler status\n{out}")


# --- zeroscaler -----------------------------------------------------------------------------------


@contextmanager
def _zeroscaler_in_containers(
    cluster: Cluster, work: Path, opts: Options, say: Say
) -> Iterator[None]:
    """The chart and zeroscaler's image on the real node, as the chart's system test installs it."""
    for name in ("zeroscaler", OPERATOR):
        archive = opts.images / f"{name}-image.tar"
        if not archive.exists():
            raise SystemExit(f"demo failed: {archive} is missing: `make demo` builds it")
        cluster.import_image(archive)
    say("   imported zeroscaler's and the operator's images into the real node's containerd")
    home = work / "helm"
    # The chart's default mode, combined: the controller's pod serves the webhook too.
    values = real_node_values(
        cluster.server, free_port(), free_port(), controller_replicas=1,
        idle_timeout=f"{opts.idle_timeout}s", mode="combined",
    )  # fmt: skip
    (work / "values.yaml").write_text(yaml.safe_dump(values))
    cluster.kubectl("create", "namespace", RELEASE_NS)
    cluster.helm(home, "install", "zeroscaler", str(CHART), "-n", RELEASE_NS,
                 "-f", str(work / "values.yaml"), "--timeout", "300s", check=True)  # fmt: skip
    try:
        ready = functools.partial(_component_ready, cluster, "controller")
        _wait(ready, "the zeroscaler pod (controller and webhook) Ready", 240)
        show(cluster, say, "-n", RELEASE_NS, "get", "pods", "-o", "wide")
        yield
    finally:
        cluster.helm(home, "uninstall", "zeroscaler", "-n", RELEASE_NS, "--wait",
                     "--timeout", "120s", check=True)  # fmt: skip
        cluster.kubectl("delete", "namespace", RELEASE_NS, "--wait=false", check=False)


def _component_ready(cluster: Cluster, component: str) -> bool:
    out = cluster.kubectl(
        "-n", RELEASE_NS, "get", "pods", "-l", f"app.kubernetes.io/component={component}",
        "-o", "jsonpath={.items[*].status.containerStatuses[*].ready}", check=False,
    ).stdout  # fmt: skip
    return "true" in out.split()


@contextmanager
def _zeroscaler_as_processes(
    cluster: Cluster, work: Path, opts: Options, say: Say
) -> Iterator[None]:
    """The chart, with the webhook and controller as local processes (kwok runs no containers)."""
    port, metrics_port = free_port(), free_port()
    ca = new_ca("zeroscaler-demo-ca")
    cert, key = new_serving_cert(ca, ["127.0.0.1"]).write(work, "webhook")
    cluster.kubectl("create", "namespace", RELEASE_NS)
    cluster.kubectl("-n", RELEASE_NS, "create", "secret", "tls", "zeroscaler-webhook-tls",
                    f"--cert={cert}", f"--key={key}")  # fmt: skip
    home = work / "helm"
    cluster.helm(home, "install", "zeroscaler", str(CHART), "--namespace", RELEASE_NS,
                 "--set", "webhook.clientConfig.mode=url",
                 "--set", f"webhook.clientConfig.url=https://127.0.0.1:{port}/mutate",
                 "--set", "certificates.mode=secret",
                 "--set", f"certificates.caBundle={base64.b64encode(ca.cert_pem).decode()}",
                 "--set", f"policy.defaults.idleTimeout={opts.idle_timeout}s",
                 "--set", "policy.bounds.minIdleTimeout=1s", check=True)  # fmt: skip
    kc = str(cluster.kubeconfig)
    webhook = [str(BIN / "zeroscaler-webhook"), "--kubeconfig", kc, "--namespace", RELEASE_NS,
               "--cert-file", str(cert), "--key-file", str(key), "--port", str(port),
               "--log-level", "warning"]  # fmt: skip
    controller = [str(BIN / "zeroscaler-controller"), "--kubeconfig", kc, "--lease-namespace",
                  RELEASE_NS, "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port),
                  "--log-level", "warning"]  # fmt: skip
    try:
        with running(webhook, work / "webhook.log"), running(controller, work / "controller.log"):
            tls = ssl.create_default_context(cadata=ca.cert_pem.decode())
            _wait(lambda: _ok(f"https://127.0.0.1:{port}/readyz", tls), "the webhook ready")
            _wait(lambda: _ok(f"http://127.0.0.1:{metrics_port}/readyz", None), "the controller")
            say("   webhook and controller ready (local processes)")
            yield
    finally:
        cluster.helm(home, "uninstall", "zeroscaler", "-n", RELEASE_NS, check=True)
        cluster.kubectl("delete", "namespace", RELEASE_NS, "--wait=false", check=False)


def _ok(url: str, tls: ssl.SSLContext | None) -> bool:
    try:
        return httpx.get(url, verify=tls if tls else True, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# --- the operator ---------------------------------------------------------------------------------


def operator_objects(cluster: Cluster, mode: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The example's plain manifests; on the real node its Deployment gets placement and address.

    The real node has a taint and a label (only pods that ask run there), no pod network
    (hostNetwork) and no Service addresses (in-cluster config pointed at the API server).
    """
    objects = [d for d in yaml.safe_load_all((EXAMPLE / "manifests.yaml").read_text()) if d]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    if mode == "real-node":
        pod.update(PLACEMENT, hostNetwork=True)
        server = httpx.URL(cluster.server)
        container = pod["containers"][0]
        container["image"] = image_build.BACKUP_OPERATOR.name()
        container["imagePullPolicy"] = "Never"
        container["env"] = [
            {"name": "KUBERNETES_SERVICE_HOST", "value": server.host},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(server.port)},
        ]
    return [o for o in objects if o is not deployment], deployment


def _install_operator(cluster: Cluster, mode: str, opts: Options, say: Say) -> dict[str, str]:
    step(say, "the backup operator, from its plain manifests (no zeroscaler annotations in them)")
    # The namespace opts in to the webhook; the manifests themselves stay as they are.
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"zeroscaler.io/enabled": "true"}},
    }
    rest, deployment = operator_objects(cluster, mode)
    cluster.kubectl("apply", "-f", "-", input=_yaml([namespace, *rest]))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/backups.{GROUP}")
    if mode == "real-node":
        say("   its Deployment, for the real node: + nodeSelector, toleration, hostNetwork, and")
        say("   KUBERNETES_SERVICE_HOST/PORT pointing at the API server on 127.0.0.1")
    # The webhook reads RBAC and discovery through caches: dry runs until both are in force.
    want = f"Backup.{GROUP}"

    def admitted() -> dict[str, str] | None:
        out = cluster.kubectl(
            "apply", "--dry-run=server", "-o", "json", "-f", "-", input=_yaml([deployment]),
            check=False,
        ).stdout  # fmt: skip
        notes = json.loads(out or "{}").get("metadata", {}).get("annotations", {})
        return notes if want in notes.get("zeroscaler.io/watched-kinds", "") else None

    _wait(admitted, "the webhook inferring the operator's watched kinds", 60)
    cluster.kubectl("apply", "-f", "-", input=_yaml([deployment]))
    got = json.loads(
        cluster.kubectl("-n", NAMESPACE, "get", "deployment", OPERATOR, "-o",
                        "jsonpath={.metadata.annotations}").stdout or "{}"
    )  # fmt: skip
    ours = {k: v for k, v in sorted(got.items()) if k.startswith("zeroscaler.io/")}
    say("annotations the webhook injected (from policy and the operator's RBAC):")
    for k, v in ours.items():
        say(f"   {k}: {v}")
    return ours


@contextmanager
def _operator_stand_in(cluster: Cluster, work: Path) -> Iterator[StandIn]:
    kubeconfig = service_account_kubeconfig(cluster, NAMESPACE, OPERATOR, work / "op.kubeconfig")
    cmd = [sys.executable, "-m", "kopf", "run", "--standalone", "--quiet",
           f"--namespace={NAMESPACE}", str(EXAMPLE / "operator.py")]  # fmt: skip
    with StandIn(cluster, NAMESPACE, OPERATOR, cmd, work / "operator.log",
                 env={"KUBECONFIG": str(kubeconfig)}) as standin:  # fmt: skip
        yield standin


def _remove_operator(cluster: Cluster) -> None:
    cluster.kubectl("delete", "namespace", NAMESPACE, "--timeout=120s", check=False)
    for kind in ("clusterrolebinding", "clusterrole"):
        cluster.kubectl("delete", kind, f"{OPERATOR}-cluster", check=False)


def _yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects)


# --- sleeping and waking --------------------------------------------------------------------------


def _running(s: Sample | None) -> bool:
    return s is not None and s.replicas > 0 and "Running" in s.pods.values()


def _asleep(s: Sample | None) -> bool:
    return s is not None and s.replicas == 0 and not s.pods


def _wait_asleep(recorder: Recorder, say: Say, since: float = 0.0) -> bool:
    """Wait for replicas 0 and no pod left; say when each happened after `since`."""
    _wait(lambda: _asleep(recorder.latest()), "the operator going to sleep", 240)
    scaled = recorder.first_after(since, lambda s: s.replicas == 0)
    gone = recorder.mark("asleep")
    say(
        f"[{gone:6.1f}s] asleep: scaled to 0 at {scaled or gone:.1f}s, "
        f"its pod gone {gone - (scaled or gone):.1f}s later"
    )
    return True


def _wake(
    cluster: Cluster, recorder: Recorder, work: Path, mode: str, i: int, opts: Options, say: Say
) -> dict[str, Any]:
    name = f"nightly-{i}-{secrets.token_hex(2)}"
    step(say, f"while it sleeps, someone creates Backup {name}")
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Backup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"source": f"postgres://orders/{i}"},
    }
    wall0 = time.time() - recorder.now()  # the timeline's zero on the wall clock
    with cluster.client() as http:
        created = recorder.mark(f"Backup {i}")
        resp = http.post(f"/apis/{GROUP}/v1/namespaces/{NAMESPACE}/backups", json=body)
    resp.raise_for_status()
    _wait(lambda: (s := recorder.latest()) is not None and s.replicas > 0, "the wake", 60)
    scaled = recorder.first_after(created, lambda s: s.replicas > 0) or recorder.now()
    recorder.mark(f"woken {i}", at=scaled)
    woke_on = _woken_event(cluster)
    say(f"[{scaled:6.1f}s] woken {scaled - created:.2f}s after the create: {woke_on}")
    _wait(lambda: _running(recorder.latest()), "the operator's pod running", 180)
    started = recorder.first_after(scaled, _running) or recorder.now()
    configmap = _wait(lambda: _configmap(cluster, name), f"ConfigMap backup-{name}", 120)
    taken = datetime.datetime.fromisoformat(configmap["data"]["takenAt"]).timestamp() - wall0
    recorder.mark(f"reconciled {i}", at=taken)
    by = _reconciled_by(cluster, recorder, work, mode, name)
    say(
        f"[{taken:6.1f}s] ConfigMap backup-{name} written by {by}: "
        f"{taken - created:.2f}s from create to reconciled"
    )
    show(cluster, say, "-n", NAMESPACE, "get", "backup", name, "-o",
         "custom-columns=NAME:.metadata.name,SOURCE:.spec.source,"
         "CONFIGMAP:.status.back_up.configMap,TAKEN:.status.back_up.takenAt")  # fmt: skip
    zeroscaler_status(cluster, say)
    step(say, f"idle again for {opts.idle_timeout}s: back to sleep")
    slept_again = _wait_asleep(recorder, say, since=taken)
    return {
        "backup": name,
        "woke_on": woke_on,
        "wake_decision_s": round(scaled - created, 3),
        "pod_start_s": round(started - scaled, 3),
        "operator_start_s": round(taken - started, 3),
        "create_to_reconciled_s": round(taken - created, 3),
        "configmap_after_wake": taken > scaled,
        "reconciled_by": by,
        "slept_again": slept_again,
    }


def _woken_event(cluster: Cluster) -> str:
    def latest() -> str | None:
        out = cluster.kubectl(
            "-n", NAMESPACE, "get", "events", "--field-selector",
            f"involvedObject.name={OPERATOR},reason=Woken", "-o", "json",
        ).stdout  # fmt: skip
        items = sorted(json.loads(out)["items"], key=lambda e: e["metadata"]["creationTimestamp"])
        return str(items[-1]["message"]) if items else None

    return _wait(latest, "the Woken event", 30)


def _configmap(cluster: Cluster, backup: str) -> dict[str, Any] | None:
    out = cluster.kubectl(
        "-n", NAMESPACE, "get", "configmap", f"backup-{backup}", "-o", "json", check=False
    ).stdout  # fmt: skip
    return cast(dict[str, Any], json.loads(out)) if out.strip() else None


def _reconciled_by(cluster: Cluster, recorder: Recorder, work: Path, mode: str, name: str) -> str:
    """Who wrote the ConfigMap: the operator container whose log says so (or the stand-in)."""
    line = f"reconciled {NAMESPACE}/{name} "
    if mode == "kwok":
        text = (work / "operator.log").read_text(errors="replace")
        return "local process (kwok stand-in)" if line in text else "nobody"
    sample = recorder.latest()
    for pod in sample.pods if sample else {}:
        logs = cluster.kubectl("-n", NAMESPACE, "logs", pod, "-c", "operator", check=False)
        if line in logs.stdout:
            return f"pod/{pod} (container operator)"
    return "nobody"


def _p50(wakes: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("wake_decision_s", "pod_start_s", "operator_start_s", "create_to_reconciled_s")
    return {k: round(statistics.median(w[k] for w in wakes), 3) for k in keys} if wakes else {}


def _wait(check: Callable[[], T | None], what: str, timeout: float = 90) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.1)
    raise SystemExit(f"demo failed: {what} did not happen within {timeout:.0f}s")
