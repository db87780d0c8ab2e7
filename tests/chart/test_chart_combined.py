"""Mode combined: one Deployment, the controller and the webhook in one process, and split as the
default so that the webhook holds no write access to workloads.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import CliApp

from tests.chart.conftest import NAMESPACE, RELEASE, Helm
from tests.chart.rendered import (
    MONITORING,
    Obj,
    args_of,
    container,
    deployment,
    grants,
    is_hook,
    kinds,
    only,
    render,
    roles,
    webhook_entry,
)
from zeroscaler.controller.flags import parse_settings as parse_controller_flags
from zeroscaler.webhook.settings import WebhookSettings

# --- mode combined: one Deployment, the controller and the webhook in one process ----------------


def _halves(objs: list[Obj]) -> tuple[list[str], list[str]]:
    """The combined container's controller flags and webhook flags, split at `--`."""
    args = args_of(objs, "controller")
    at = args.index("--")
    return args[:at], args[at + 1 :]


def test_defaults_are_split_so_the_webhook_holds_no_write_access_to_workloads(
    helm: Helm,
) -> None:
    objs = render(helm, mode=None)
    commands = sorted(container(o)["command"][0] for o in objs if o["kind"] == "Deployment")
    assert commands == ["zeroscaler-controller", "zeroscaler-webhook"]
    webhook_rules = roles(objs)[f"ClusterRole/{RELEASE}-zeroscaler-webhook"]
    for resource in ("deployments", "statefulsets", "deployments/scale", "statefulsets/scale"):
        for verb in ("patch", "update", "create", "delete"):
            assert not grants(webhook_rules, "apps", resource, verb)


def test_combined_is_one_deployment_that_serves_the_webhook_too(helm: Helm) -> None:
    objs = render(helm, mode="combined")
    regular = [o for o in objs if not is_hook(o)]
    assert kinds(regular) == sorted(
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",  # the metrics reader, to bind to whatever scrapes
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "ConfigMap",
            "ConfigMap",  # the activator's wake requests
            "Deployment",
            "MutatingWebhookConfiguration",
            "MutatingWebhookConfiguration",  # the activator's
            "NetworkPolicy",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "Service",
            "Service",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicyBinding",
        ]
    )
    dep = deployment(objs, "controller")
    c = container(dep)
    assert c["command"] == ["zeroscaler-combined"]
    assert dep["spec"]["replicas"] == 2
    assert c["resources"] == {"requests": {"cpu": "50m", "memory": "128Mi"},
                              "limits": {"memory": "384Mi"}}  # fmt: skip
    # Both halves understand their flags; they read the same policy namespace (one watch).
    controller_flags, webhook_flags = _halves(objs)
    controller = parse_controller_flags(controller_flags)
    webhook = CliApp.run(WebhookSettings, cli_args=webhook_flags)
    assert controller.policy_source == webhook.namespace == NAMESPACE
    assert controller.excluded == {*webhook.exclude_namespaces, webhook.namespace}
    assert webhook.cert_secret == f"{RELEASE}-zeroscaler-webhook-tls"
    # The API server's Service reaches the webhook half's port on these pods.
    ref = webhook_entry(objs)["clientConfig"]["service"]
    service = only(objs, "Service", ref["name"])
    assert (
        service["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    )
    port = next(p for p in service["spec"]["ports"] if p["port"] == ref["port"])
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert named == {"metrics": controller.metrics_port, "https": webhook.port}
    assert port["targetPort"] == "https"
    # Ready when the webhook's caches are; alive while the controller's endpoint answers.
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert c["livenessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": "metrics",
        "scheme": "HTTPS",  # metricsAuthorization: the metrics port is HTTPS
    }


def test_combined_pods_hold_both_components_roles_under_one_service_account(helm: Helm) -> None:
    objs = render(helm, mode="combined")
    sa = deployment(objs, "controller")["spec"]["template"]["spec"]["serviceAccountName"]
    assert sa == f"{RELEASE}-zeroscaler-controller"
    accounts = [o["metadata"]["name"] for o in objs if o["kind"] == "ServiceAccount"]
    assert f"{RELEASE}-zeroscaler-webhook" not in accounts
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for part in ("controller", "webhook"):
            binding = only(objs, kind, f"{RELEASE}-zeroscaler-{part}")
            assert [s["name"] for s in binding["subjects"]] == [sa], (kind, part)


def test_combined_pods_mount_the_pair_unless_the_webhook_renews_it(helm: Helm) -> None:
    spec = deployment(render(helm, mode="combined"), "controller")["spec"]["template"]["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["tmp"]
    objs = render(helm, "--set", "certificates.mode=secret", mode="combined")
    spec = deployment(objs, "controller")["spec"]["template"]["spec"]
    (tls,) = [v for v in spec["volumes"] if v["name"] == "tls"]
    assert [i["key"] for i in tls["secret"]["items"]] == ["tls.crt", "tls.key"]
    webhook = CliApp.run(WebhookSettings, cli_args=_halves(objs)[1])
    mounts = {
        m["name"]: m["mountPath"] for m in container(deployment(objs, "controller"))["volumeMounts"]
    }
    assert Path(webhook.cert_file).parent == Path(mounts["tls"])
    assert not webhook.cert_secret


def test_combined_mode_has_one_disruption_budget_and_network_policies_that_add_up(
    helm: Helm,
) -> None:
    objs = render(helm, "--set", "networkPolicy.enabled=true", mode="combined")
    pods = deployment(objs, "controller")["spec"]["template"]["metadata"]["labels"]
    (pdb,) = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pods.items()
    ports = set()
    for policy in (o for o in objs if o["kind"] == "NetworkPolicy"):
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= pods.items()
        ports |= {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert ports == {8080, 10250}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "hostNetwork=true"], "webhook.port 10250 is the kubelet's"),
        (["--set", "hostNetwork=true", "--set", "webhook.port=9443",
          "--set", "controller.metricsPort=10250"], "controller.metricsPort 10250 is the"),
    ],
)  # fmt: skip
def test_on_the_host_network_the_kubelets_port_is_refused(
    helm: Helm, flags: list[str], message: str
) -> None:
    proc = helm.template(*flags)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


def test_combined_mode_on_the_host_network_binds_both_ports_in_one_pod(helm: Helm) -> None:
    objs = render(helm, "--set", "hostNetwork=true", "--set", "webhook.port=9443", mode="combined")
    dep = deployment(objs, "controller")
    assert dep["spec"]["template"]["spec"]["hostNetwork"] is True
    assert {p["containerPort"] for p in container(dep)["ports"]} == {8080, 9443}
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}


def test_an_unknown_mode_is_refused_by_the_schema(helm: Helm) -> None:
    proc = helm.template("--set", "mode=both")
    assert proc.returncode != 0
    assert "mode" in proc.stderr


def test_combined_mode_has_one_service_monitor_as_one_scrape_carries_both_halves(
    helm: Helm,
) -> None:
    objs = render(helm, *MONITORING, mode="combined")
    monitors = [o["metadata"]["name"] for o in objs if o["kind"] == "ServiceMonitor"]
    assert monitors == [f"{RELEASE}-zeroscaler-controller"]
