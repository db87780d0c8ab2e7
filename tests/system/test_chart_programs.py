"""The real programs with the chart's flags and the chart's RBAC: the controller and the webhook
run on loopback as the chart's ServiceAccounts, sleep and wake with a narrowed watch grant,
renew the webhook's certificate with the chart's identity; and the chart's NetworkPolicies
accepted by the real API server.
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client as k8s

from localcluster.cluster import Cluster
from localcluster.processes import free_port, stop
from testkit.steps import step
from testkit.waiting import wait_for
from tests.system.chart_kit import (
    CHART,
    service_account_kubeconfig,
    zero_replica_deployment,
)
from zeroscaler.certs.issue import new_ca, new_serving_cert
from zeroscaler.certs.rotation import split_bundle, stamps_for

# --- the real programs, run with the chart's flags and the chart's RBAC ---------------------------


def _installed_args(api: k8s.ApiClient, namespace: str, deployment: str) -> list[str]:
    spec = k8s.AppsV1Api(api).read_namespaced_deployment(deployment, namespace).spec
    args: list[str] = spec.template.spec.containers[0].args
    return args


def _local_args(args: list[str], overrides: dict[str, str]) -> list[str]:
    """The installed flags with some values replaced to run on loopback; each must be present."""
    flags = {a.split("=", 1)[0] for a in args}
    assert set(overrides) <= flags, f"the chart no longer passes {set(overrides) - flags}"
    return [
        f"{a.split('=', 1)[0]}={overrides[a.split('=', 1)[0]]}"
        if a.split("=", 1)[0] in overrides
        else a
        for a in args
    ]


@dataclass
class Program:
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def stop(self) -> None:
        stop(self.proc)


def _start(command: str, args: list[str], log: Path) -> Program:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / command), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Program(proc, log)


def _responds(program: Program, url: str, verify: ssl.SSLContext | bool) -> bool:
    assert program.proc.poll() is None, f"{url} exited:\n{program.tail()}"
    try:
        return httpx.get(url, verify=verify, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _replicas(api: k8s.ApiClient, namespace: str, name: str) -> int:
    return int(k8s.AppsV1Api(api).read_namespaced_deployment(name, namespace).spec.replicas)


@pytest.mark.parametrize("mode", ["split", "combined"])
def test_controller_and_webhook_work_with_the_charts_flags_and_rbac(
    cluster: Cluster, api: k8s.ApiClient, ns: str, opted_ns: str, tmp_path: Path, mode: str
) -> None:
    """Install, then run the programs on loopback as their ServiceAccounts with the installed
    command and flags (split: two programs; combined: one, as the controller's account): the
    webhook annotates from the chart's policy and the RBAC it may read; the controller leads, puts
    the workload to sleep and wakes it."""
    with step("the chart installs, its webhook called by URL with a certificate from a Secret"):
        port = free_port()
        ca = new_ca("chart-e2e-ca")
        cert, key = new_serving_cert(ca, ["127.0.0.1"]).write(tmp_path, "serving")
        k8s.CoreV1Api(api).create_namespaced_secret(
            ns,
            k8s.V1Secret(
                metadata=k8s.V1ObjectMeta(name="serving"),
                type="kubernetes.io/tls",
                string_data={"tls.crt": cert.read_text(), "tls.key": key.read_text()},
            ),
        )
        name = f"zs-{secrets.token_hex(3)}"
        fullname = f"{name}-zeroscaler"
        home = tmp_path / "helm"
        proc = cluster.helm(
            home,
            "install",
            name,
            str(CHART),
            "--namespace",
            ns,
            "--set",
            f"mode={mode}",
            "--set",
            "webhook.clientConfig.mode=url",
            "--set",
            f"webhook.clientConfig.url=https://127.0.0.1:{port}/mutate",
            "--set",
            "certificates.mode=secret",
            "--set",
            "certificates.secretName=serving",
            "--set",
            f"certificates.caBundle={base64.b64encode(ca.cert_pem).decode()}",
            "--set",
            "policy.defaults.idleTimeout=3s",
            "--set",
            "policy.bounds.minIdleTimeout=1s",
        )
        assert proc.returncode == 0, proc.stderr
        programs: list[Program] = []
        webhook_local = {
            "--host": "127.0.0.1",
            "--port": str(port),
            "--cert-file": str(cert),
            "--key-file": str(key),
        }
        metrics = free_port()
        controller_local = {
            "--metrics-host": "127.0.0.1",
            "--metrics-port": str(metrics),
            "--id": "chart-e2e",
        }
        verify = ssl.create_default_context(cadata=ca.cert_pem.decode())
    try:
        with step("the webhook runs as its account and syncs with only the chart's RBAC"):
            controller_kc = service_account_kubeconfig(
                cluster, tmp_path / "controller.kubeconfig", ns, f"{fullname}-controller"
            )
            if mode == "combined":
                # One program, as the controller's account: its flags, --, the webhook's.
                spec = k8s.AppsV1Api(api).read_namespaced_deployment(f"{fullname}-controller", ns)
                [installed] = spec.spec.template.spec.containers
                assert installed.command == ["zeroscaler-combined"]
                args = _local_args(installed.args, {**controller_local, **webhook_local})
                at = args.index("--")
                args.insert(at, f"--kubeconfig={controller_kc}")
                controller = webhook = _start(
                    "zeroscaler-combined", args, tmp_path / "combined.log"
                )
                programs.append(controller)
            else:
                webhook_args = _local_args(
                    _installed_args(api, ns, f"{fullname}-webhook"), webhook_local
                )
                webhook_kc = service_account_kubeconfig(
                    cluster, tmp_path / "webhook.kubeconfig", ns, f"{fullname}-webhook"
                )
                webhook = _start(
                    "zeroscaler-webhook",
                    [*webhook_args, f"--kubeconfig={webhook_kc}"],
                    tmp_path / "webhook.log",
                )
                programs.append(webhook)
            wait_for(
                partial(_responds, webhook, f"https://127.0.0.1:{port}/readyz", verify),
                "the webhook's caches to sync with only the chart's RBAC",
            )
        with step("the controller's watches sync with only the chart's RBAC"):
            if mode == "split":
                controller_args = _local_args(
                    _installed_args(api, ns, f"{fullname}-controller"), controller_local
                )
                controller = _start(
                    "zeroscaler-controller",
                    [*controller_args, f"--kubeconfig={controller_kc}"],
                    tmp_path / "controller.log",
                )
                programs.append(controller)
            wait_for(
                partial(_responds, controller, f"https://127.0.0.1:{metrics}/readyz", False),
                "the controller's watches to sync with only the chart's RBAC",
            )
        with step("the controller's /metrics answer only a token allowed to get them"):
            # Its /metrics, HTTPS as the chart has it, only to a token allowed to get it: the
            # controller's own account asks the real API server about each (a hostile scraper).
            scrape = f"https://127.0.0.1:{metrics}/metrics"
            assert httpx.get(scrape, verify=False, timeout=5).status_code == 401
            forged = {"Authorization": "Bearer not-a-token"}
            assert httpx.get(scrape, headers=forged, verify=False, timeout=5).status_code == 401
            admin = {"Authorization": f"Bearer {cluster.token}"}
            answer = httpx.get(scrape, headers=admin, verify=False, timeout=5)
            assert answer.status_code == 200
            assert "zeroscaler_managed_workloads" in answer.text
        with step("the controller takes its Lease"):
            leases = k8s.CoordinationV1Api(api)
            wait_for(
                lambda: (
                    leases.read_namespaced_lease(f"{fullname}-controller", ns).spec.holder_identity
                    == "chart-e2e"
                ),
                "the controller to take its Lease",
            )

        with step("the webhook annotates an operator from its RBAC"):
            # An operator that may watch ConfigMaps in its namespace, and nothing else.
            rbac = k8s.RbacAuthorizationV1Api(api)
            rbac.create_namespaced_role(
                opted_ns,
                k8s.V1Role(
                    metadata=k8s.V1ObjectMeta(name="operator"),
                    rules=[
                        k8s.V1PolicyRule(
                            api_groups=[""],
                            resources=["configmaps"],
                            verbs=["get", "list", "watch"],
                        )
                    ],
                ),
            )
            rbac.create_namespaced_role_binding(
                opted_ns,
                k8s.V1RoleBinding(
                    metadata=k8s.V1ObjectMeta(name="operator"),
                    role_ref=k8s.V1RoleRef(
                        api_group="rbac.authorization.k8s.io", kind="Role", name="operator"
                    ),
                    subjects=[
                        k8s.RbacV1Subject(kind="ServiceAccount", name="default", namespace=opted_ns)
                    ],
                ),
            )
            apps = k8s.AppsV1Api(api)

            def injected() -> dict[str, str] | None:
                dry = apps.create_namespaced_deployment(
                    opted_ns, zero_replica_deployment("probe"), dry_run="All"
                )
                found: dict[str, str] = dry.metadata.annotations or {}
                return (
                    found if "ConfigMap" in found.get("zeroscaler.io/watched-kinds", "") else None
                )

            wait_for(injected, "the webhook to annotate from the operator's RBAC")
            body = zero_replica_deployment("operator")
            body.spec.replicas = 2
            apps.create_namespaced_deployment(opted_ns, body)
            stored = apps.read_namespaced_deployment("operator", opted_ns).metadata.annotations
            assert stored["zeroscaler.io/idle-timeout"] == "3s", stored
            assert "ConfigMap" in stored["zeroscaler.io/watched-kinds"], stored

        with step("the controller puts the idle operator to sleep"):
            wait_for(
                lambda: _replicas(api, opted_ns, "operator") == 0,
                f"the controller to put the idle operator to sleep\n{controller.tail()}",
            )
        with step("a ConfigMap wakes it to 2 replicas"):
            k8s.CoreV1Api(api).create_namespaced_config_map(
                opted_ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="poke"))
            )
            wait_for(
                lambda: _replicas(api, opted_ns, "operator") == 2,
                f"the controller to wake the operator to 2 replicas\n{controller.tail()}",
            )
    finally:
        for program in programs:
            program.stop()
        cluster.helm(home, "uninstall", name, "--namespace", ns, "--wait")


def _events(api: k8s.ApiClient, namespace: str, name: str, reason: str) -> list[Any]:
    selector = f"involvedObject.name={name},reason={reason}"
    return list(k8s.CoreV1Api(api).list_namespaced_event(namespace, field_selector=selector).items)


def test_the_narrow_watch_grant_runs_sleep_and_wake_and_never_sleeps_an_unlisted_kind(
    cluster: Cluster, api: k8s.ApiClient, ns: str, opted_ns: str, tmp_path: Path
) -> None:
    """watchAllResources=false with ConfigMaps listed: the controller, as the chart's
    ServiceAccount, infers kinds from RBAC, sleeps and wakes on ConfigMaps, and tells a workload
    that names Secrets why it never sleeps."""
    with step("the chart installs with a narrow watch grant: ConfigMaps only"):
        name = f"zs-{secrets.token_hex(3)}"
        fullname = f"{name}-zeroscaler"
        home = tmp_path / "helm"
        proc = cluster.helm(home, "install", name, str(CHART), "--namespace", ns,
            "--set", "mode=split",  # the controller alone runs here
            "--set", "webhook.clientConfig.mode=url",
            "--set", f"webhook.clientConfig.url=https://127.0.0.1:{free_port()}/mutate",
            "--set", "certificates.mode=secret",
            "--set", "controller.rbac.watchAllResources=false",
            "--set", 'controller.rbac.watchedResources[0].apiGroups[0]=',
            "--set", "controller.rbac.watchedResources[0].resources[0]=configmaps",
            "--set", "controller.uninstall.enabled=false",
            # The controller applies the chart's policy too: let the 2 s timeouts below stand.
            "--set", "policy.bounds.minIdleTimeout=1s",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    controller: Program | None = None
    try:
        with step("the controller's watches sync with the narrow RBAC"):
            metrics = free_port()
            args = _local_args(
                _installed_args(api, ns, f"{fullname}-controller"),
                {"--metrics-host": "127.0.0.1", "--metrics-port": str(metrics), "--id": "narrow"},
            )
            kubeconfig = service_account_kubeconfig(
                cluster, tmp_path / "controller.kubeconfig", ns, f"{fullname}-controller"
            )
            controller = _start(
                "zeroscaler-controller", [*args, f"--kubeconfig={kubeconfig}"], tmp_path / "c.log"
            )
            wait_for(
                partial(_responds, controller, f"https://127.0.0.1:{metrics}/readyz", False),
                "the controller's watches to sync with the narrow RBAC",
            )
        with step("two operators start: one watches ConfigMaps, the other Secrets too"):
            # The controller itself may watch ConfigMaps only.
            core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
            for account, resources in (
                ("default", ["configmaps"]),
                ("reader", ["configmaps", "secrets"]),
            ):
                if account != "default":
                    core.create_namespaced_service_account(
                        opted_ns, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name=account))
                    )
                rule = k8s.V1PolicyRule(
                    api_groups=[""], resources=resources, verbs=["list", "watch"]
                )
                rbac.create_namespaced_role(
                    opted_ns, k8s.V1Role(metadata=k8s.V1ObjectMeta(name=account), rules=[rule])
                )
                rbac.create_namespaced_role_binding(
                    opted_ns,
                    k8s.V1RoleBinding(
                        metadata=k8s.V1ObjectMeta(name=account),
                        role_ref=k8s.V1RoleRef(
                            api_group="rbac.authorization.k8s.io", kind="Role", name=account
                        ),
                        subjects=[
                            k8s.RbacV1Subject(
                                kind="ServiceAccount", name=account, namespace=opted_ns
                            )
                        ],
                    ),
                )
            apps = k8s.AppsV1Api(api)
            listed, unlisted = (
                zero_replica_deployment("listed"),
                zero_replica_deployment("unlisted"),
            )
            listed.metadata.annotations = {"zeroscaler.io/idle-timeout": "2s"}  # kinds from RBAC
            unlisted.metadata.annotations = {
                "zeroscaler.io/idle-timeout": "2s",
                "zeroscaler.io/watched-kinds": "ConfigMap, Secret",
            }
            unlisted.spec.template.spec.service_account_name = "reader"
            for body in (listed, unlisted):
                body.spec.replicas = 2
                apps.create_namespaced_deployment(opted_ns, body)

        with step("the operator whose kinds come from RBAC sleeps"):

            def asleep() -> bool:
                return _replicas(api, opted_ns, "listed") == 0

            wait_for(asleep, "the operator whose kinds are inferred from RBAC to sleep")
        with step("a ConfigMap wakes it"):
            k8s.CoreV1Api(api).create_namespaced_config_map(
                opted_ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="poke"))
            )
            wait_for(
                lambda: _replicas(api, opted_ns, "listed") == 2,
                "a ConfigMap to wake it to 2 replicas",
            )
        with step("the one that names Secrets is told why it never sleeps"):
            wait_for(
                lambda: _events(api, opted_ns, "unlisted", "ControllerNotPermitted"),
                "a Warning Event on the workload that names Secrets",
            )
            [warning] = _events(api, opted_ns, "unlisted", "ControllerNotPermitted")
            assert warning.type == "Warning"
            assert "secrets" in warning.message, warning.message
            assert "controller.rbac.watchedResources" in warning.message
        with step("the first sleeps again, the other stays up, and no request was refused"):
            # The listed one sleeps again while the other, idle just as long, stays up.
            wait_for(asleep, "the ConfigMap operator to sleep again")
            assert _replicas(api, opted_ns, "unlisted") == 2
            unlisted_now = apps.read_namespaced_deployment("unlisted", opted_ns).metadata
            assert "zeroscaler.io/state" not in (unlisted_now.annotations or {})
            assert not _events(api, opted_ns, "listed", "InferenceUnavailable")
            # Not one request was refused (a refusal logs as "403 Forbidden: ...").
            assert "Forbidden" not in controller.log.read_text(), controller.tail()
    finally:
        if controller is not None:
            controller.stop()
        cluster.helm(home, "uninstall", name, "--namespace", ns, "--wait")


# --- in-process renewal with the chart's own identity ---------------------------------------------


def test_the_webhook_renews_with_exactly_the_chart_rbac_and_flags(
    cluster: Cluster, api: k8s.ApiClient, ns: str, tmp_path: Path
) -> None:
    """The real webhook, as the chart's ServiceAccount with the chart's flags, rotates the CA."""
    name, port = f"zs-{secrets.token_hex(3)}", free_port()
    fullname = f"{name}-zeroscaler"
    values = [
        "--set", "mode=split",  # the webhook alone runs here
        "--set", "webhook.clientConfig.mode=url",
        "--set", f"webhook.clientConfig.url=https://127.0.0.1:{port}/mutate",
        "--set", f"webhook.port={port}",  # not the default: the real node's kubelet has 10250 here
        "--set", "certificates.mode=job",
        "--set", "certificates.job.renewal.servingLifetime=8s",
        "--set", "certificates.job.renewal.caLifetime=24s",
        "--set-json", "certificates.job.renewal.fraction=0.5",
        "--set-json", "certificates.job.renewal.syncInterval=0.25",
        "--set-json", "certificates.job.renewal.settle=1.5",
    ]  # fmt: skip
    home = tmp_path / "helm"
    proc = cluster.helm(home, "install", name, str(CHART), "--namespace", ns, "--wait",
                 "--timeout", "180s", *values)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    webhook: subprocess.Popen[bytes] | None = None
    log = tmp_path / "webhook.log"
    try:
        # kwok runs no Job: write the Secret the certs Job would have, with seconds-long lifetimes.
        now = datetime.now(UTC)
        ca = new_ca("chart-renewal-ca", lifetime=timedelta(seconds=24), now=now)
        pair = new_serving_cert(ca, ["127.0.0.1"], lifetime=timedelta(seconds=8), now=now)
        secret = f"{fullname}-webhook-tls"
        raw = {"ca.crt": ca.cert_pem, "ca.key": ca.key_pem, "tls.crt": pair.cert_pem,
               "tls.key": pair.key_pem}  # fmt: skip
        core = k8s.CoreV1Api(api)
        core.create_namespaced_secret(
            ns,
            {
                "metadata": {"name": secret, "annotations": stamps_for("issued", now)},
                "type": "kubernetes.io/tls",
                "data": {k: base64.b64encode(v).decode() for k, v in raw.items()},
            },
        )
        rendered = cluster.helm(home, "template", name, str(CHART), "--namespace", ns,
                         "--show-only", "templates/webhook-deployment.yaml", *values)  # fmt: skip
        assert rendered.returncode == 0, rendered.stderr
        [dep] = [d for d in yaml.safe_load_all(rendered.stdout) if d]
        [container] = dep["spec"]["template"]["spec"]["containers"]
        local = {"/tmp/tls/": f"{tmp_path}/tls/", "--host=0.0.0.0": "--host=127.0.0.1"}
        args = []
        for arg in container["args"]:
            for old, new in local.items():
                arg = arg.replace(old, new)
            args.append(arg)
        assert f"--port={port}" in args
        kubeconfig = service_account_kubeconfig(
            cluster,
            tmp_path / "sa.kubeconfig",
            ns,
            dep["spec"]["template"]["spec"]["serviceAccountName"],
        )
        binary = Path(sys.executable).parent / container["command"][0]
        with log.open("ab") as out:
            webhook = subprocess.Popen(
                [str(binary), *args, f"--kubeconfig={kubeconfig}"],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        admission = k8s.AdmissionregistrationV1Api(api)

        def rotated_and_bundled() -> bool:
            assert webhook is not None
            assert webhook.poll() is None, log.read_text()
            data = core.read_namespaced_secret(secret, ns).data
            cas = split_bundle(base64.b64decode(data["ca.crt"]))
            hooks = admission.read_mutating_webhook_configuration(fullname).webhooks
            return (
                len(cas) == 1
                and cas[0] != ca.cert_pem
                and all(h.client_config.ca_bundle == data["ca.crt"] for h in hooks)
            )

        wait_for(
            rotated_and_bundled,
            f"a CA rotation as the chart's webhook\n{log.read_text()[-3000:]}",
            90,
        )
        text = log.read_text()
        assert "HTTP/1.1 403" not in text, text[-3000:]
        assert "Forbidden" not in text, text[-3000:]
    finally:
        if webhook is not None:
            stop(webhook)
        cluster.helm(home, "uninstall", name, "--namespace", ns, "--wait")


def test_the_api_server_accepts_the_network_policies(
    cluster: Cluster, ns: str, tmp_path: Path
) -> None:
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    egress = [{"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"port": 6443}]}]
    rendered = cluster.helm(tmp_path, "template", "zs", str(CHART), "--namespace", ns,
        "--show-only", "templates/networkpolicy.yaml",
        "--set", "networkPolicy.enabled=true",
        "--set-json", f"networkPolicy.controller.from={json.dumps([peer])}",
        "--set-json", f"networkPolicy.egress={json.dumps(egress)}",
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    # Server-side dry run: the real API server validates them and stores nothing.
    applied = cluster.kubectl(
        "apply", "--dry-run=server", "-n", ns, "-f", "-", input=rendered.stdout
    )
    assert sorted(applied.stdout.split("\n")[:2]) == [
        "networkpolicy.networking.k8s.io/zs-zeroscaler-controller created (server dry run)",
        "networkpolicy.networking.k8s.io/zs-zeroscaler-webhook created (server dry run)",
    ]
