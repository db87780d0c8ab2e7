"""The Helm chart, rendered with `helm template` under several value sets: what it would install.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import argparse
import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import CliApp

from image import build as image_build
from testkit.exposed_metrics import exposed as exposed_metrics
from testkit.real_chart import local_image
from tests.chart.conftest import CHART, NAMESPACE, RELEASE, Helm
from zeroscaler.api.credentials import in_cluster
from zeroscaler.certs.command import add_certs
from zeroscaler.controller.flags import parse_settings as parse_controller_flags
from zeroscaler.controller.uninstall import add_uninstall
from zeroscaler.core.policy import DEFAULT_IGNORE, parse_policy
from zeroscaler.webhook.settings import WebhookSettings

ENABLED_LABEL = "zeroscaler.io/enabled"
URL = "https://127.0.0.1:9443/mutate"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
# On the host network the webhook needs a node port other than the kubelet's 10250.
HOST_NETWORK = ("--set", "hostNetwork=true", "--set", "webhook.port=9443")

Obj = dict[str, Any]

# Verbs that change something; everything else (get, list, watch) only reads.
WRITE_VERBS = {
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "escalate",
    "bind",
    "impersonate",
    "approve",
    "sign",
    "use",
}


def render(helm: Helm, *args: str, mode: str | None = "split") -> list[Obj]:
    """The objects `helm template` renders (hooks included) for these flags, in `mode` (split
    unless told: most tests look at the two Deployments; None renders the chart's default)."""
    proc = helm.template(*(["--set", f"mode={mode}"] if mode else []), *args)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def only(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    """The one object of `kind` (and `name`); fails when there is none or more than one."""
    found = [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def kinds(objs: list[Obj]) -> list[str]:
    return sorted(o["kind"] for o in objs)


def deployment(objs: list[Obj], component: str) -> Obj:
    return only(objs, "Deployment", f"{RELEASE}-zeroscaler-{component}")


def container(dep: Obj) -> Obj:
    containers = dep["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: Obj = containers[0]
    return result


def webhook_configuration(objs: list[Obj]) -> Obj:
    """zeroscaler's own MutatingWebhookConfiguration (not the activator's)."""
    found = [
        o
        for o in objs
        if o["kind"] == "MutatingWebhookConfiguration"
        and o["metadata"]["labels"].get("app.kubernetes.io/component") != "activator"
    ]
    assert len(found) == 1, f"expected zeroscaler's own configuration, found {len(found)}"
    return found[0]


def webhook_entry(objs: list[Obj]) -> Obj:
    config = webhook_configuration(objs)
    assert len(config["webhooks"]) == 1
    entry: Obj = config["webhooks"][0]
    return entry


def certs_job(objs: list[Obj]) -> Obj:
    return only(objs, "Job", f"{RELEASE}-zeroscaler-certs")


def is_hook(obj: Obj) -> bool:
    return "helm.sh/hook" in (obj["metadata"].get("annotations") or {})


def roles(objs: list[Obj]) -> dict[str, list[Obj]]:
    """Rules of every Role and ClusterRole, by "Kind/name"."""
    return {
        f"{o['kind']}/{o['metadata']['name']}": o.get("rules") or []
        for o in objs
        if o["kind"] in ("Role", "ClusterRole")
    }


def grants(rules: list[Obj], group: str, resource: str, verb: str, name: str = "") -> bool:
    """Whether RBAC rules allow `verb` on `resource` in `group` (for object `name`, if given)."""
    for rule in rules:
        if not ({group, "*"} & set(rule.get("apiGroups") or [])):
            continue
        if not ({resource, "*"} & set(rule.get("resources") or [])):
            continue
        if not ({verb, "*"} & set(rule.get("verbs") or [])):
            continue
        names = rule.get("resourceNames") or []
        if names and name not in names:
            continue
        return True
    return False


def write_grants(rules: list[Obj]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) for every write verb the rules name."""
    return {
        (g, r, v)
        for rule in rules
        for g in rule.get("apiGroups") or []
        for r in rule.get("resources") or []
        for v in rule.get("verbs") or []
        if v in WRITE_VERBS
    }


# --- what is installed ---------------------------------------------------------------------------


def test_split_mode_renders_both_components_and_everything_around_them(helm: Helm) -> None:
    objs = render(helm)
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
            "Deployment",
            "MutatingWebhookConfiguration",
            "MutatingWebhookConfiguration",  # the activator's
            "NetworkPolicy",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "PodDisruptionBudget",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "Service",
            "Service",
            "ServiceAccount",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",  # the controller's writes: deployments
            "ValidatingAdmissionPolicy",  # and statefulsets
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicyBinding",
        ]
    )
    hooks = [o for o in objs if is_hook(o)]
    each = ["ClusterRole", "ClusterRoleBinding", "Job", "Role", "RoleBinding", "ServiceAccount"]
    assert kinds(hooks) == sorted(each * 2)  # the certs Job's and the uninstall Job's
    assert container(deployment(objs, "controller"))["command"] == ["zeroscaler-controller"]
    assert container(deployment(objs, "webhook"))["command"] == ["zeroscaler-webhook"]
    assert deployment(objs, "controller")["spec"]["replicas"] == 2
    assert deployment(objs, "webhook")["spec"]["replicas"] == 2


@pytest.mark.parametrize("mode", ["split", "combined"])
def test_every_object_carries_the_standard_labels(helm: Helm, mode: str) -> None:
    for obj in render(helm, mode=mode):
        labels = obj["metadata"]["labels"]
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        assert labels["app.kubernetes.io/name"] == "zeroscaler", where
        assert labels["app.kubernetes.io/instance"] == RELEASE, where
        assert labels["app.kubernetes.io/managed-by"] == "Helm", where
        assert labels["app.kubernetes.io/version"], where
        assert labels["app.kubernetes.io/component"], where
        assert labels["helm.sh/chart"].startswith("zeroscaler-"), where


@pytest.mark.parametrize("mode", ["split", "combined"])
def test_namespaced_objects_go_to_the_release_namespace(helm: Helm, mode: str) -> None:
    cluster_scoped = {
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for obj in render(helm, mode=mode):
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]


def test_names_fit_kubernetes_limits_for_a_long_release_name(helm: Helm) -> None:
    long_release = "a-release-name-of-fifty-three-characters-the-maximum1"  # helm allows 53
    proc = helm.template(release=long_release)
    assert proc.returncode == 0, proc.stderr
    for obj in yaml.safe_load_all(proc.stdout):
        if obj:
            assert len(obj["metadata"]["name"]) <= 63, obj["metadata"]["name"]


# --- the webhook configuration -------------------------------------------------------------------


def test_webhook_matches_opted_in_namespaces_and_apps_workloads(helm: Helm) -> None:
    entry = webhook_entry(render(helm))
    assert entry["namespaceSelector"]["matchLabels"] == {ENABLED_LABEL: "true"}
    assert entry["rules"] == [
        {
            "apiGroups": ["apps"],
            "apiVersions": ["v1"],
            "resources": ["deployments", "statefulsets"],
            "operations": ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        }
    ]
    assert entry["sideEffects"] == "None"
    assert entry["admissionReviewVersions"] == ["v1"]
    assert entry["failurePolicy"] == "Ignore"
    assert entry["reinvocationPolicy"] == "IfNeeded"
    assert 1 <= entry["timeoutSeconds"] <= 10
    assert "objectSelector" not in entry


@pytest.mark.parametrize(
    ("values", "excluded"),
    [
        ([], [NAMESPACE, "kube-system"]),
        (["--set-json", 'webhook.excludeNamespaces=["kube-system","ops"]'],
         [NAMESPACE, "kube-system", "ops"]),
        (["--set-json", "webhook.excludeNamespaces=[]"], [NAMESPACE]),
        (["--set-json", f'webhook.excludeNamespaces=["{NAMESPACE}"]'], [NAMESPACE]),
    ],
)  # fmt: skip
def test_the_release_namespace_and_excluded_ones_are_never_sent_to_the_webhook(
    helm: Helm, values: list[str], excluded: list[str]
) -> None:
    objs = render(helm, *values)
    assert webhook_entry(objs)["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded}
    ]
    # The webhook itself refuses the same namespaces, should a request reach it anyway.
    settings = CliApp.run(WebhookSettings, cli_args=_args(objs, "webhook"))
    assert {*settings.exclude_namespaces, settings.namespace} == set(excluded)


def test_service_mode_points_the_api_server_at_the_webhook_pods(helm: Helm) -> None:
    objs = render(helm)
    ref = webhook_entry(objs)["clientConfig"]["service"]
    assert "url" not in webhook_entry(objs)["clientConfig"]
    service = only(objs, "Service", ref["name"])
    assert ref["namespace"] == NAMESPACE
    assert "path" not in ref  # the controller writes a secret one in; an upgrade leaves it be
    assert (
        f"--webhook-configuration={RELEASE}-zeroscaler"
        in container(deployment(objs, "webhook"))["args"]
    )
    port = next(p for p in service["spec"]["ports"] if p["port"] == ref["port"])
    dep = deployment(objs, "webhook")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    named = {p["name"]: p["containerPort"] for p in container(dep)["ports"]}
    assert port["targetPort"] in named
    assert f"--port={named[port['targetPort']]}" in container(dep)["args"]


def test_url_mode_calls_a_fixed_url_and_certifies_its_host(helm: Helm) -> None:
    objs = render(
        helm, "--set", "webhook.clientConfig.mode=url", "--set", f"webhook.clientConfig.url={URL}"
    )
    assert webhook_entry(objs)["clientConfig"] == {"url": URL}
    job_args = certs_job(objs)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--host=127.0.0.1" in job_args
    assert not any(".svc" in a for a in job_args)


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_failure_policy_is_configurable(helm: Helm, policy: str) -> None:
    entry = webhook_entry(render(helm, "--set", f"webhook.failurePolicy={policy}"))
    assert entry["failurePolicy"] == policy


def test_object_selector_narrows_the_webhook_when_given(helm: Helm) -> None:
    entry = webhook_entry(render(helm, "--set", "webhook.objectSelector.matchLabels.team=a"))
    assert entry["objectSelector"] == {"matchLabels": {"team": "a"}}
    assert entry["namespaceSelector"]["matchLabels"] == {ENABLED_LABEL: "true"}


# --- certificates --------------------------------------------------------------------------------


def _tls_secret_of_webhook(objs: list[Obj]) -> str:
    """The Secret the webhook serves from: mounted, or read by its renewal (--cert-secret)."""
    volumes = deployment(objs, "webhook")["spec"]["template"]["spec"]["volumes"]
    mounted = [v["secret"]["secretName"] for v in volumes if "secret" in v]
    read = [a.split("=", 1)[1] for a in _args(objs, "webhook") if a.startswith("--cert-secret=")]
    assert len(mounted + read) == 1, (mounted, read)
    name: str = (mounted + read)[0]
    return name


def test_certs_job_writes_the_mounted_secret_and_patches_this_configuration(
    helm: Helm,
) -> None:
    objs = render(helm)
    job = certs_job(objs)
    hooks = set(job["metadata"]["annotations"]["helm.sh/hook"].split(","))
    assert {"pre-install", "pre-upgrade", "post-install"} <= hooks
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "certs"
    assert f"--secret={_tls_secret_of_webhook(objs)}" in args
    config_name = webhook_configuration(objs)["metadata"]["name"]
    assert f"--webhook-configuration={config_name}" in args
    assert f"--host={RELEASE}-zeroscaler-webhook.{NAMESPACE}.svc" in args
    # The Job patches the caBundle; the chart leaves it out so upgrades keep it.
    assert "caBundle" not in webhook_entry(objs)["clientConfig"]
    # Its RBAC exists before it runs: lower hook weight, same hook events.
    for obj in objs:
        if is_hook(obj) and obj["kind"] != "Job" and obj["metadata"]["name"].endswith("-certs"):
            annotations = obj["metadata"]["annotations"]
            assert int(annotations["helm.sh/hook-weight"]) < 0
            assert set(annotations["helm.sh/hook"].split(",")) == hooks
            assert "hook-succeeded" in annotations["helm.sh/hook-delete-policy"]


def test_cert_manager_mode_issues_the_secret_and_injects_the_ca(helm: Helm) -> None:
    objs = render(helm, "--set", "certificates.mode=certManager")
    assert not any(o["kind"] == "Job" and o["metadata"]["name"].endswith("-certs") for o in objs)
    config = webhook_configuration(objs)
    injected = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    namespace, certificate = injected.split("/")
    assert namespace == NAMESPACE
    serving = only(objs, "Certificate", certificate)
    assert serving["spec"]["secretName"] == _tls_secret_of_webhook(objs)
    assert f"{RELEASE}-zeroscaler-webhook.{NAMESPACE}.svc" in serving["spec"]["dnsNames"]
    issuer = only(objs, "Issuer", serving["spec"]["issuerRef"]["name"])
    assert "ca" in issuer["spec"]
    ca = only(objs, "Certificate", issuer["spec"]["ca"]["secretName"])
    assert ca["spec"]["isCA"] is True
    assert "selfSigned" in only(objs, "Issuer", ca["spec"]["issuerRef"]["name"])["spec"]


def test_cert_manager_mode_can_use_an_existing_cluster_issuer(helm: Helm) -> None:
    objs = render(
        helm,
        "--set",
        "certificates.mode=certManager",
        "--set",
        "certificates.certManager.issuerRef.name=corp-ca",
        "--set",
        "certificates.certManager.issuerRef.kind=ClusterIssuer",
    )
    assert not any(o["kind"] == "Issuer" for o in objs)
    serving = only(objs, "Certificate")
    assert serving["spec"]["issuerRef"]["name"] == "corp-ca"
    assert serving["spec"]["issuerRef"]["kind"] == "ClusterIssuer"


def test_cert_manager_in_url_mode_certifies_the_ip_address(helm: Helm) -> None:
    objs = render(
        helm,
        "--set",
        "certificates.mode=certManager",
        "--set",
        "webhook.clientConfig.mode=url",
        "--set",
        f"webhook.clientConfig.url={URL}",
    )
    serving = only(objs, "Certificate", f"{RELEASE}-zeroscaler-webhook-serving")
    assert serving["spec"]["ipAddresses"] == ["127.0.0.1"]
    assert "dnsNames" not in serving["spec"]


def test_secret_mode_uses_a_given_secret_and_ca_bundle(helm: Helm) -> None:
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    objs = render(
        helm,
        "--set",
        "certificates.mode=secret",
        "--set",
        "certificates.secretName=my-tls",
        "--set",
        f"certificates.caBundle={bundle}",
    )
    assert not any(is_hook(o) and "pre-delete" not in o["metadata"]["annotations"]["helm.sh/hook"]
                   for o in objs)  # fmt: skip
    assert not any(o["kind"] in ("Certificate", "Issuer") for o in objs)
    assert _tls_secret_of_webhook(objs) == "my-tls"
    assert webhook_entry(objs)["clientConfig"]["caBundle"] == bundle


# --- RBAC ----------------------------------------------------------------------------------------


def test_no_rule_grants_every_verb(helm: Helm) -> None:
    for values in ([], ["--set", "certificates.mode=certManager"]):
        for name, rules in roles(render(helm, *values)).items():
            for rule in rules:
                assert "*" not in rule["verbs"], name


def test_only_the_certs_job_and_renewal_may_touch_secrets_by_name(helm: Helm) -> None:
    objs = render(helm)
    tls = _tls_secret_of_webhook(objs)
    for name, rules in roles(objs).items():
        named = [r for r in rules if "secrets" in (r.get("resources") or [])]
        if name == f"Role/{RELEASE}-zeroscaler-certs":
            assert named, "the certs Job needs its Secret"
            assert grants(rules, "", "secrets", "patch", tls)
            assert not grants(rules, "", "secrets", "patch", "someone-elses")
            assert not grants(rules, "", "secrets", "get", "someone-elses")
            assert not grants(rules, "", "secrets", "list")
        elif name == f"Role/{RELEASE}-zeroscaler-uninstall":
            assert grants(rules, "", "secrets", "delete", tls)
            assert not grants(rules, "", "secrets", "delete", "someone-elses")
            for verb in ("get", "list", "watch", "create", "patch", "update"):
                assert not grants(rules, "", "secrets", verb, tls), verb
        elif name == f"Role/{RELEASE}-zeroscaler-webhook":
            assert grants(rules, "", "secrets", "get", tls)
            assert grants(rules, "", "secrets", "update", tls)
            for verb in ("get", "update"):
                assert not grants(rules, "", "secrets", verb, "someone-elses")
            for verb in ("list", "watch", "create", "patch", "delete"):
                assert not grants(rules, "", "secrets", verb, tls), verb
        else:
            assert not named, name


@pytest.mark.parametrize(
    "values",
    [
        ["--set", "certificates.mode=certManager"],
        ["--set", "certificates.mode=secret"],
        ["--set", "certificates.job.renewal.enabled=false"],
    ],
)
def test_a_webhook_that_does_not_renew_may_not_touch_secrets_or_its_configuration(
    helm: Helm, values: list[str]
) -> None:
    objs = render(helm, *values)
    prefix = f"{RELEASE}-zeroscaler-webhook"
    assert write_grants(roles(objs)[f"ClusterRole/{prefix}"]) == set()
    assert not [r for r in roles(objs)[f"Role/{prefix}"] if "secrets" in r["resources"]]
    assert not [a for a in _args(objs, "webhook") if a.startswith("--cert-secret")]


def test_wildcard_resources_are_read_only(helm: Helm) -> None:
    for name, rules in roles(render(helm)).items():
        for rule in rules:
            if "*" in rule.get("resources", []) or "*" in rule.get("apiGroups", []):
                assert set(rule["verbs"]) <= {"list", "watch"}, name


def test_write_access_is_exactly_what_each_part_needs(helm: Helm) -> None:
    by_name = roles(render(helm))
    prefix = f"{RELEASE}-zeroscaler"
    assert write_grants(by_name[f"ClusterRole/{prefix}-controller"]) == {
        ("apps", "deployments", "patch"),
        ("apps", "statefulsets", "patch"),
        ("apps", "deployments/scale", "patch"),
        ("apps", "statefulsets/scale", "patch"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
        ("authentication.k8s.io", "tokenreviews", "create"),  # who scrapes /metrics
        ("", "events", "create"),
        ("", "events", "patch"),
        # The activator's configuration and zeroscaler's own (its secret path), by name (below).
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch"),
    }
    controller_rules = by_name[f"ClusterRole/{prefix}-controller"]
    activator = f"0-{RELEASE}-zeroscaler-activator"
    for own in (activator, f"{RELEASE}-zeroscaler"):
        assert grants(controller_rules, "admissionregistration.k8s.io",
                      "mutatingwebhookconfigurations", "patch", own)  # fmt: skip
    assert not grants(controller_rules, "admissionregistration.k8s.io",
                      "mutatingwebhookconfigurations", "patch", "someone-elses")  # fmt: skip
    assert write_grants(by_name[f"Role/{prefix}-controller"]) == {
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "patch"),
    }
    # Renewal (the default mode): its own caBundle, by name, and the TLS Secret, by name.
    assert write_grants(by_name[f"ClusterRole/{prefix}-webhook"]) == {
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch")
    }
    hook_rules = by_name[f"ClusterRole/{prefix}-webhook"]
    config = f"{RELEASE}-zeroscaler"
    assert grants(hook_rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations",
                  "patch", config)  # fmt: skip
    assert not grants(hook_rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations",
                      "patch", "someone-elses")  # fmt: skip
    # The activator reads whether a backend sleeps from its scale, never its pod template.
    for resource in ("deployments", "statefulsets"):
        assert grants(hook_rules, "apps", f"{resource}/scale", "get")
        assert not grants(hook_rules, "apps", resource, "get")
    # It knows the activator's paths (and their tokens) from the activator's configuration only.
    activator = f"0-{RELEASE}-zeroscaler-activator"
    for verb in ("get", "list", "watch"):
        assert grants(hook_rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations",
                      verb, activator)  # fmt: skip
        assert not grants(hook_rules, "admissionregistration.k8s.io",
                          "mutatingwebhookconfigurations", verb, "someone-elses")  # fmt: skip
    assert write_grants(by_name[f"Role/{prefix}-webhook"]) == {
        ("", "events", "create"),
        ("", "events", "patch"),
        ("", "secrets", "update"),
        ("", "configmaps", "patch"),  # the activator's wake requests, by name
    }
    webhook_role = by_name[f"Role/{prefix}-webhook"]
    assert grants(webhook_role, "", "configmaps", "patch", f"{prefix}-activator-requests")
    assert not grants(webhook_role, "", "configmaps", "patch", "policy")
    assert write_grants(by_name[f"ClusterRole/{prefix}-certs"]) == {
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch")
    }
    # Uninstall: wake workloads, delete this chart's configuration, Lease and Secret by name.
    uninstall = by_name[f"ClusterRole/{prefix}-uninstall"]
    assert write_grants(uninstall) == {
        ("apps", "deployments", "patch"),
        ("apps", "statefulsets", "patch"),
        ("apps", "deployments/scale", "patch"),
        ("apps", "statefulsets/scale", "patch"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "delete"),
        ("", "events", "create"),
        ("", "events", "patch"),
    }
    assert not grants(uninstall, "admissionregistration.k8s.io", "mutatingwebhookconfigurations",
                      "delete", "someone-elses")  # fmt: skip
    assert write_grants(by_name[f"Role/{prefix}-uninstall"]) == {
        ("coordination.k8s.io", "leases", "delete"),
        ("", "secrets", "delete"),
    }


def test_controller_reads_what_it_watches_and_scales_workloads(helm: Helm) -> None:
    objs = render(helm)
    cluster_rules = roles(objs)[f"ClusterRole/{RELEASE}-zeroscaler-controller"]
    for group, resource in [
        ("", "configmaps"),
        ("example.com", "widgets"),
        ("apps", "deployments"),
        ("autoscaling", "horizontalpodautoscalers"),
        ("", "namespaces"),
    ]:
        assert grants(cluster_rules, group, resource, "list"), resource
        assert grants(cluster_rules, group, resource, "watch"), resource
    for resource in ("deployments", "statefulsets", "deployments/scale", "statefulsets/scale"):
        assert grants(cluster_rules, "apps", resource, "get"), resource
        assert grants(cluster_rules, "apps", resource, "patch"), resource
    assert not grants(cluster_rules, "apps", "deployments", "delete")
    assert not grants(cluster_rules, "apps", "deployments", "update")
    assert not grants(cluster_rules, "coordination.k8s.io", "leases", "patch")


def test_controller_lease_access_is_limited_to_its_own_lease(helm: Helm) -> None:
    objs = render(helm)
    rules = roles(objs)[f"Role/{RELEASE}-zeroscaler-controller"]
    args = container(deployment(objs, "controller"))["args"]
    lease = next(a.split("=", 1)[1] for a in args if a.startswith("--lease-name="))
    assert f"--lease-namespace={NAMESPACE}" in args
    assert grants(rules, "coordination.k8s.io", "leases", "patch", lease)
    assert grants(rules, "coordination.k8s.io", "leases", "get", lease)
    assert not grants(rules, "coordination.k8s.io", "leases", "patch", "another-lease")
    binding = only(objs, "RoleBinding", f"{RELEASE}-zeroscaler-controller")
    sa = deployment(objs, "controller")["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]


def test_controller_watch_grant_can_be_narrowed_to_listed_resources(helm: Helm) -> None:
    objs = render(
        helm,
        "--set",
        "controller.rbac.watchAllResources=false",
        "--set",
        "controller.rbac.watchedResources[0].apiGroups[0]=example.com",
        "--set",
        "controller.rbac.watchedResources[0].resources[0]=widgets",
    )
    rules = roles(objs)[f"ClusterRole/{RELEASE}-zeroscaler-controller"]
    assert not any("*" in r["resources"] or "*" in r["apiGroups"] for r in rules)
    assert grants(rules, "example.com", "widgets", "watch")
    assert not grants(rules, "example.com", "gadgets", "watch")
    assert not grants(rules, "", "secrets", "list")
    assert grants(rules, "apps", "statefulsets/scale", "patch")
    assert grants(rules, "apps", "deployments", "watch")
    assert grants(rules, "", "namespaces", "watch")
    assert grants(rules, "apiextensions.k8s.io", "customresourcedefinitions", "watch")
    assert grants(rules, "autoscaling", "horizontalpodautoscalers", "watch")
    # What workloads serve is known in the narrow mode too, read-only.
    for group, resource in [
        ("", "services"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("apiregistration.k8s.io", "apiservices"),
    ]:
        assert grants(rules, group, resource, "list"), resource
        assert grants(rules, group, resource, "watch"), resource
        assert not grants(rules, group, resource, "patch"), resource
    # Inference from RBAC works in the narrow mode too.
    for resource in ("roles", "rolebindings", "clusterroles", "clusterrolebindings"):
        for verb in ("list", "watch"):
            assert grants(rules, "rbac.authorization.k8s.io", resource, verb), resource


def test_webhook_reads_rbac_namespaces_and_policy_only(helm: Helm) -> None:
    objs = render(helm)
    prefix = f"ClusterRole/{RELEASE}-zeroscaler-webhook"
    cluster_rules = roles(objs)[prefix]
    for resource in ("roles", "rolebindings", "clusterroles", "clusterrolebindings"):
        assert grants(cluster_rules, "rbac.authorization.k8s.io", resource, "watch")
    assert grants(cluster_rules, "", "namespaces", "list")
    assert grants(cluster_rules, "apiextensions.k8s.io", "customresourcedefinitions", "watch")
    assert not grants(cluster_rules, "", "configmaps", "list"), "policy is read in one namespace"
    assert not grants(cluster_rules, "", "secrets", "list")
    ns_rules = roles(objs)[f"Role/{RELEASE}-zeroscaler-webhook"]
    assert grants(ns_rules, "", "configmaps", "watch")


def test_rbac_can_be_left_to_the_administrator(helm: Helm) -> None:
    objs = render(helm, "--set", "rbac.create=false")
    assert not [o for o in objs if o["kind"].endswith(("Role", "RoleBinding"))]
    assert [o for o in objs if o["kind"] == "ServiceAccount"]


# --- pods ----------------------------------------------------------------------------------------


def _pod_specs(objs: list[Obj]) -> list[tuple[str, Obj]]:
    return [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in objs
        if o["kind"] in ("Deployment", "Job")
    ]


@pytest.mark.parametrize(("mode", "pods"), [("split", 4), ("combined", 3)])
def test_every_pod_meets_the_restricted_pod_security_standard(
    helm: Helm, mode: str, pods: int
) -> None:
    specs = _pod_specs(render(helm, mode=mode))
    assert len(specs) == pods
    for name, spec in specs:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert not spec.get("hostNetwork"), name
        assert not spec.get("hostPID"), name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            assert sc["runAsNonRoot"] is True, name
            assert sc.get("privileged") is not True, name
            assert c["resources"]["requests"]["memory"], name
            assert c["resources"]["limits"]["memory"], name
            assert "/tmp" in {m["mountPath"] for m in c["volumeMounts"]}, name


@pytest.mark.parametrize(
    ("component", "values", "scheme"),
    [
        ("controller", [], "HTTPS"),  # its metrics port is HTTPS with metricsAuthorization
        ("controller", ["--set", "controller.metricsAuthorization=false"], "HTTP"),
        ("webhook", [], "HTTPS"),
    ],
)
def test_probes_use_health_and_readiness_endpoints(
    helm: Helm, component: str, values: list[str], scheme: str
) -> None:
    c = container(deployment(render(helm, *values), component))
    ports = {p["name"] for p in c["ports"]}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["httpGet"]["scheme"] == scheme
        assert probe["httpGet"]["port"] in ports


def _containers(objs: list[Obj]) -> list[tuple[str, Obj]]:
    return [(name, c) for name, spec in _pod_specs(objs) for c in spec["containers"]]


def test_host_network_puts_every_pod_in_the_nodes_network(helm: Helm) -> None:
    specs = _pod_specs(render(helm, *HOST_NETWORK))
    assert len(specs) == 4
    for name, spec in specs:
        assert spec["hostNetwork"] is True, name
        assert spec["dnsPolicy"] == "ClusterFirstWithHostNet", name
    assert not any("dnsPolicy" in spec for _, spec in _pod_specs(render(helm)))


@pytest.mark.parametrize(
    ("flags", "unavailable", "surge"),
    [([], 0, 1), (HOST_NETWORK, 1, 0)],
)
def test_rollouts_free_the_nodes_ports_first_on_the_host_network(
    helm: Helm, flags: list[str], unavailable: int, surge: int
) -> None:
    objs = render(helm, *flags)
    for component in ("controller", "webhook"):
        strategy = deployment(objs, component)["spec"]["strategy"]
        assert strategy == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": unavailable, "maxSurge": surge},
        }, component


def test_api_server_address_reaches_in_cluster_config_of_every_container(
    helm: Helm, tmp_path: Path
) -> None:
    for name, c in _containers(render(helm)):
        assert "KUBERNETES_SERVICE_HOST" not in {e["name"] for e in c.get("env") or []}, name
    objs = render(helm, "--set", "apiServer.host=127.0.0.1", "--set", "apiServer.port=6443")
    containers = _containers(objs)
    assert len(containers) == 4
    for name, c in containers:
        env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
        access = in_cluster(env, tmp_path)
        assert access.server == "https://127.0.0.1:6443", name


def test_default_image_is_the_release_name_with_the_charts_app_version(helm: Helm) -> None:
    for name, c in _containers(render(helm)):
        assert c["image"] == f"ghcr.io/zeroscaler/zeroscaler:{APP_VERSION}", name


def test_local_image_values_name_the_archive_make_image_builds(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"image": local_image()}))
    for name, c in _containers(render(helm, "--values", str(values))):
        assert c["image"] == image_build.default_name(), name  # docker.io/library/zeroscaler:V
        assert c["imagePullPolicy"] == "Never", name


DIGEST = f"sha256:{'ab' * 32}"


@pytest.mark.parametrize(
    ("flags", "image"),
    [
        (["--set", "image.registry=registry.example:5000"],
         f"registry.example:5000/zeroscaler/zeroscaler:{APP_VERSION}"),
        (["--set", "global.imageRegistry=mirror.example/ghcr"],
         f"mirror.example/ghcr/zeroscaler/zeroscaler:{APP_VERSION}"),
        (["--set", "global.imageRegistry=mirror.example", "--set", "image.registry=other.example"],
         f"mirror.example/zeroscaler/zeroscaler:{APP_VERSION}"),
        (["--set", "image.registry=", "--set", "image.repository=zeroscaler"],
         f"zeroscaler:{APP_VERSION}"),
        (["--set", "image.tag=0.2.0-rc.1"], "ghcr.io/zeroscaler/zeroscaler:0.2.0-rc.1"),
        (["--set", "global.imageRegistry=mirror.example", "--set", f"image.digest={DIGEST}"],
         f"mirror.example/zeroscaler/zeroscaler@{DIGEST}"),
    ],
)  # fmt: skip
def test_image_reference_is_registry_repository_and_tag_or_digest(
    helm: Helm, flags: list[str], image: str
) -> None:
    images = {c["image"] for _, c in _containers(render(helm, *flags))}
    assert images == {image}


LINUX = {"kubernetes.io/os": "linux"}


@pytest.mark.parametrize("mode", ["split", "combined"])
def test_every_pod_runs_on_linux_nodes_of_any_architecture(helm: Helm, mode: str) -> None:
    objs = render(helm, mode=mode)
    specs = _pod_specs(objs)
    assert len(specs) == (4 if mode == "split" else 3)
    for name, spec in specs:
        assert spec["nodeSelector"] == LINUX, name
    assert "kubernetes.io/arch" not in yaml.safe_dump_all(objs)


def test_the_linux_selector_can_be_dropped(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.nodeSelector.kubernetes\\.io/os=null")
    assert "nodeSelector" not in deployment(objs, "controller")["spec"]["template"]["spec"]
    assert deployment(objs, "webhook")["spec"]["template"]["spec"]["nodeSelector"] == LINUX


@pytest.mark.parametrize("mode", ["job", "certManager"])
def test_configuration_annotations_reach_the_webhook_configuration(helm: Helm, mode: str) -> None:
    objs = render(
        helm,
        "--set", f"certificates.mode={mode}",
        "--set", "webhook.configurationAnnotations.admissions\\.enforcer/disabled=true",
    )  # fmt: skip
    annotations = webhook_configuration(objs)["metadata"]["annotations"]
    assert annotations["admissions.enforcer/disabled"] == "true"  # a string, as annotations are
    assert ("cert-manager.io/inject-ca-from" in annotations) is (mode == "certManager")


def test_the_webhook_configuration_has_no_annotations_by_default(helm: Helm) -> None:
    assert "annotations" not in webhook_configuration(render(helm))["metadata"]


def test_real_node_scheduling_reaches_every_pod(helm: Helm, tmp_path: Path) -> None:
    selector = {"zeroscaler.io/real-node": "true"}
    toleration = {"key": "zeroscaler.io/real-node", "operator": "Exists", "effect": "NoSchedule"}
    values = tmp_path / "values.yaml"
    placement = {"nodeSelector": selector, "tolerations": [toleration]}
    values.write_text(
        yaml.safe_dump(
            {"controller": placement, "webhook": placement, "certificates": {"job": placement}}
        )
    )
    specs = _pod_specs(render(helm, "--values", str(values)))
    assert len(specs) == 4
    for name, spec in specs:
        assert spec["nodeSelector"] == {**selector, **LINUX}, name
        assert spec["tolerations"] == [toleration], name


def test_controller_metrics_port_is_exposed_for_scraping(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.metricsPort=9100")
    c = container(deployment(objs, "controller"))
    assert {"name": "metrics", "containerPort": 9100, "protocol": "TCP"} in c["ports"]
    assert "--metrics-port=9100" in c["args"]
    service = only(objs, "Service", f"{RELEASE}-zeroscaler-controller-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_replicas_follow_values(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.replicas=3", "--set", "webhook.replicas=4")
    assert deployment(objs, "controller")["spec"]["replicas"] == 3
    assert deployment(objs, "webhook")["spec"]["replicas"] == 4


def test_disruption_budgets_select_each_components_pods(helm: Helm) -> None:
    objs = render(helm)
    for component in ("controller", "webhook"):
        pdb = only(objs, "PodDisruptionBudget", f"{RELEASE}-zeroscaler-{component}")
        pod_labels = deployment(objs, component)["spec"]["template"]["metadata"]["labels"]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        assert pdb["spec"]["maxUnavailable"] == 1
    other = deployment(objs, "webhook")["spec"]["template"]["metadata"]["labels"]
    pdb = only(objs, "PodDisruptionBudget", f"{RELEASE}-zeroscaler-controller")
    assert not pdb["spec"]["selector"]["matchLabels"].items() <= other.items()


def test_disruption_budget_takes_min_available_and_can_be_off(helm: Helm) -> None:
    objs = render(
        helm,
        "--set",
        "webhook.podDisruptionBudget.minAvailable=1",
        "--set",
        "controller.podDisruptionBudget.enabled=false",
    )
    pdb = only(objs, "PodDisruptionBudget")
    assert pdb["metadata"]["name"] == f"{RELEASE}-zeroscaler-webhook"
    assert pdb["spec"]["minAvailable"] == 1
    assert "maxUnavailable" not in pdb["spec"]


# --- command lines, checked against the programs' own parsers ------------------------------------


def _args(objs: list[Obj], component: str) -> list[str]:
    args: list[str] = container(deployment(objs, component))["args"]
    return [a.replace("$(POD_NAME)", "pod-0") for a in args]


def test_controller_flags_are_understood_by_zeroscaler_controller(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.dryRun=true", "--set", "logLevel=debug")
    settings = parse_controller_flags(_args(objs, "controller"))
    assert settings.dry_run is True
    assert settings.log_level == "debug"
    assert settings.lease_namespace == NAMESPACE
    assert settings.policy_source == NAMESPACE  # the policy ConfigMaps the webhook reads too
    assert settings.excluded == {"kube-system", NAMESPACE}
    assert settings.lease_name == f"{RELEASE}-zeroscaler-controller"
    assert settings.id == "pod-0"
    assert settings.metrics_host == "0.0.0.0"
    assert settings.metrics_port == 8080
    assert settings.log_format == "text"
    env = {e["name"] for e in container(deployment(objs, "controller"))["env"]}
    assert "POD_NAME" in env


def test_the_log_format_value_reaches_both_components(helm: Helm) -> None:
    objs = render(helm, "--set", "logFormat=json")
    assert parse_controller_flags(_args(objs, "controller")).log_format == "json"
    assert CliApp.run(WebhookSettings, cli_args=_args(objs, "webhook")).log_format == "json"


def test_webhook_flags_are_understood_by_zeroscaler_webhook(helm: Helm) -> None:
    objs = render(helm)
    settings = CliApp.run(WebhookSettings, cli_args=_args(objs, "webhook"))
    assert settings.namespace == NAMESPACE
    assert settings.host == "0.0.0.0"
    assert settings.port == 10250  # what a GKE private control plane reaches without a rule
    mounts = {
        m["name"]: m["mountPath"] for m in container(deployment(objs, "webhook"))["volumeMounts"]
    }
    # Renewing, it writes the Secret's pair into its writable scratch volume.
    assert settings.cert_file == f"{mounts['tmp']}/tls/tls.crt"
    assert settings.key_file == f"{mounts['tmp']}/tls/tls.key"
    assert settings.cert_secret == f"{RELEASE}-zeroscaler-webhook-tls"
    assert settings.cert_webhook_configuration == f"{RELEASE}-zeroscaler"
    assert settings.cert_renew_fraction == 0.67
    assert settings.cert_serving_lifetime == 365 * 86400
    assert settings.cert_ca_lifetime == 3650 * 86400
    assert (settings.cert_sync_interval, settings.cert_settle) == (10, 60)


def test_renewal_values_reach_the_webhook_flags(helm: Helm) -> None:
    objs = render(
        helm,
        "--set-json", "certificates.job.renewal.fraction=0.5",
        "--set", "certificates.job.renewal.servingLifetime=720h",
        "--set", "certificates.job.renewal.caLifetime=8760h",
        "--set", "certificates.job.renewal.syncInterval=5",
        "--set", "certificates.job.renewal.settle=30",
    )  # fmt: skip
    settings = CliApp.run(WebhookSettings, cli_args=_args(objs, "webhook"))
    assert settings.cert_renew_fraction == 0.5
    assert settings.cert_serving_lifetime == 720 * 3600
    assert settings.cert_ca_lifetime == 8760 * 3600
    assert (settings.cert_sync_interval, settings.cert_settle) == (5, 30)


def test_webhook_flags_without_renewal_serve_the_mounted_pair(helm: Helm) -> None:
    objs = render(helm, "--set", "certificates.mode=certManager")
    settings = CliApp.run(WebhookSettings, cli_args=_args(objs, "webhook"))
    mounts = {
        m["name"]: m["mountPath"] for m in container(deployment(objs, "webhook"))["volumeMounts"]
    }
    assert settings.cert_file == f"{mounts['tls']}/tls.crt"
    assert settings.key_file == f"{mounts['tls']}/tls.key"
    assert settings.cert_secret == ""


def test_certs_job_flags_are_understood_by_zeroscaler_certs(helm: Helm) -> None:
    objs = render(helm, "--set", "certificates.job.renewBefore=48h")
    parser = argparse.ArgumentParser(prog="zeroscaler")
    add_certs(parser.add_subparsers(dest="command", required=True))
    job = certs_job(objs)["spec"]["template"]["spec"]["containers"][0]
    assert job["command"] == ["zeroscaler"]
    args = parser.parse_args(job["args"])
    assert args.command == "certs"
    assert args.namespace == NAMESPACE
    assert args.secret == _tls_secret_of_webhook(objs)
    assert args.webhook_configuration == webhook_configuration(objs)["metadata"]["name"]
    service = webhook_entry(objs)["clientConfig"]["service"]["name"]
    assert args.service == service
    assert args.renew_before == "48h"
    assert f"{service}.{NAMESPACE}.svc" in args.host


@pytest.mark.parametrize(("mode", "secret"), [("job", True), ("certManager", False)])
def test_uninstall_hook_flags_are_understood_by_zeroscaler_uninstall(
    helm: Helm, mode: str, secret: bool
) -> None:
    objs = render(helm, "--set", f"certificates.mode={mode}")
    job = only(objs, "Job", f"{RELEASE}-zeroscaler-uninstall")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    [c] = job["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["zeroscaler"]
    parser = argparse.ArgumentParser(prog="zeroscaler")
    add_uninstall(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(c["args"])
    assert args.command == "uninstall"
    assert args.namespace == NAMESPACE
    assert args.controller == deployment(objs, "controller")["metadata"]["name"]
    lease = next(
        a.split("=", 1)[1]
        for a in container(deployment(objs, "controller"))["args"]
        if a.startswith("--lease-name=")
    )
    assert args.lease == lease
    assert args.webhook_configuration == webhook_configuration(objs)["metadata"]["name"]
    # The TLS Secret goes only where zeroscaler wrote it; cert-manager's and yours stay.
    assert args.secret == (_tls_secret_of_webhook(objs) if secret else None)
    # Its RBAC exists before it runs.
    for obj in objs:
        if is_hook(obj) and obj["metadata"]["name"].endswith("-uninstall") and obj is not job:
            assert obj["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
            assert int(obj["metadata"]["annotations"]["helm.sh/hook-weight"]) < 0


def test_uninstall_hook_can_be_turned_off(helm: Helm) -> None:
    objs = render(helm, "--set", "controller.uninstall.enabled=false")
    assert not [o for o in objs if o["metadata"]["name"].endswith("-uninstall")]


@pytest.mark.parametrize("mode", ["certManager", "secret"])
def test_webhook_pods_mount_only_the_serving_pair(helm: Helm, mode: str) -> None:
    objs = render(helm, "--set", f"certificates.mode={mode}")
    volumes = deployment(objs, "webhook")["spec"]["template"]["spec"]["volumes"]
    tls = next(v for v in volumes if "secret" in v)
    assert sorted(item["key"] for item in tls["secret"]["items"]) == ["tls.crt", "tls.key"]


def test_a_renewing_webhook_mounts_no_secret(helm: Helm) -> None:
    volumes = deployment(render(helm), "webhook")["spec"]["template"]["spec"]["volumes"]
    assert not [v for v in volumes if "secret" in v]


# --- policy --------------------------------------------------------------------------------------


def _policy(objs: list[Obj]) -> str:
    config = only(objs, "ConfigMap", f"{RELEASE}-zeroscaler-policy")
    assert config["metadata"]["labels"]["zeroscaler.io/policy"] == "true"
    text: str = config["data"]["policy.yaml"]
    return text


def test_policy_configmap_holds_the_documented_defaults(helm: Helm) -> None:
    doc = parse_policy(_policy(render(helm)), "chart")
    assert doc.idle_timeout == 15 * 60
    assert doc.min_idle_timeout == 60
    assert doc.max_idle_timeout == 24 * 3600
    assert doc.from_rbac is True
    assert doc.ignore == DEFAULT_IGNORE
    assert doc.max_kinds == 50
    assert doc.rules == ()


def test_policy_rules_from_values_reach_the_configmap(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        json.dumps(
            {
                "policy": {
                    "defaults": {"idleTimeout": "30m"},
                    "rules": [
                        {
                            "name": "dev-sleeps-fast",
                            "namespaceSelector": {"matchLabels": {"env": "dev"}},
                            "idleTimeout": "5m",
                        },
                        {
                            "name": "prod-never-sleeps",
                            "namespaceSelector": {"matchLabels": {"env": "prod"}},
                            "enabled": False,
                        },
                    ],
                }
            }
        )
    )
    doc = parse_policy(_policy(render(helm, "-f", str(values))), "chart")
    assert doc.idle_timeout == 30 * 60
    assert [(r.name, r.idle_timeout, r.enabled) for r in doc.rules] == [
        ("dev-sleeps-fast", 300, None),
        ("prod-never-sleeps", None, False),
    ]
    assert doc.rules[0].matches({"env": "dev"}, {})


def test_policy_configmap_can_be_left_out(helm: Helm) -> None:
    objs = render(helm, "--set", "policy.create=false")
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"] == [
        f"{RELEASE}-zeroscaler-activator-requests"
    ]


# --- monitoring, network policies, priority -----------------------------------------------------

MONITORING = ["--set", "monitoring.serviceMonitor.enabled=true"]
RULES = ["--set", "monitoring.prometheusRule.enabled=true"]


def test_nothing_for_prometheus_by_default_and_network_policies_that_admit_scrapers(
    helm: Helm,
) -> None:
    objs = render(helm)
    assert not set(kinds(objs)) & {"ServiceMonitor", "PrometheusRule"}
    policies = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "NetworkPolicy"}
    webhook, controller = (
        policies[f"{RELEASE}-zeroscaler-webhook"],
        policies[f"{RELEASE}-zeroscaler-controller"],
    )
    # The webhook's port from any source (where the API server calls from differs by platform),
    # the metrics port from the usual scrapers only.
    assert webhook["ingress"] == [{"ports": [{"port": 10250, "protocol": "TCP"}]}]
    [rule] = controller["ingress"]
    [peer] = rule["from"]
    assert peer["namespaceSelector"] == {}
    assert peer["podSelector"]["matchExpressions"][0]["values"][0] == "prometheus"
    off = render(helm, "--set", "networkPolicy.enabled=false")
    assert "NetworkPolicy" not in kinds(off)


def test_service_monitors_scrape_both_components_through_their_services(helm: Helm) -> None:
    objs = render(helm, *MONITORING, "--set", "monitoring.serviceMonitor.labels.release=prom")
    services = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    for component, port, scheme in (
        ("controller", "metrics", "https"),  # with Prometheus's own token
        ("webhook", "https", "https"),
    ):
        monitor = only(objs, "ServiceMonitor", f"{RELEASE}-zeroscaler-{component}")
        assert monitor["metadata"]["labels"]["release"] == "prom"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        wanted = monitor["spec"]["selector"]["matchLabels"]
        [service] = [
            svc for svc in services.values()
            if wanted.items() <= svc["metadata"]["labels"].items()
        ]  # fmt: skip
        [endpoint] = monitor["spec"]["endpoints"]
        assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
        assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", scheme)
        assert service["spec"]["ports"][0]["name"] == port
        if component == "controller":
            assert endpoint["bearerTokenFile"].endswith("/serviceaccount/token")


@pytest.mark.parametrize(
    ("values", "tls"),
    [
        ([], {
            "serverName": f"{RELEASE}-zeroscaler-webhook.{NAMESPACE}.svc",
            "ca": {"secret": {"name": f"{RELEASE}-zeroscaler-webhook-tls", "key": "ca.crt"}},
        }),
        (["--set", "certificates.mode=secret"], {"insecureSkipVerify": True}),
        (["--set", "monitoring.serviceMonitor.webhookTlsConfig.serverName=x"], {"serverName": "x"}),
    ],
)  # fmt: skip
def test_the_webhook_monitor_trusts_the_ca_in_use(
    helm: Helm, values: list[str], tls: dict[str, Any]
) -> None:
    objs = render(helm, *MONITORING, *values)
    [endpoint] = only(objs, "ServiceMonitor", f"{RELEASE}-zeroscaler-webhook")["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == tls


def test_service_monitor_needs_the_controller_metrics_service(helm: Helm) -> None:
    proc = helm.template(*MONITORING, "--set", "controller.metricsService.enabled=false")
    assert proc.returncode != 0
    assert "controller.metricsService.enabled" in proc.stderr


def test_alerts_cover_wakes_sleepers_and_the_webhook_with_metrics_that_exist(helm: Helm) -> None:
    rule = only(
        render(helm, *RULES, "--set", "monitoring.prometheusRule.labels.team=ops"), "PrometheusRule"
    )
    assert rule["metadata"]["labels"]["team"] == "ops"
    [group] = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert set(alerts) == {
        "ZeroscalerNoLeader",
        "ZeroscalerWakesFailing",
        "ZeroscalerWakesSlow",
        "ZeroscalerStuckAsleep",
        "ZeroscalerWebhookErrors",
        "ZeroscalerWebhookNotReady",
        "ZeroscalerWebhookCertificateExpiring",
    }
    exposed = set(exposed_metrics())
    for name, alert in alerts.items():
        used = set(re.findall(r"\b(zeroscaler_[a-z_]+)\{", alert["expr"]))
        assert used, name
        assert used <= exposed, f"{name} uses {sorted(used - exposed)}"
        # Each selector names this release's namespace: another install's pods do not count.
        assert alert["expr"].count("zeroscaler_") == alert["expr"].count(f'namespace="{NAMESPACE}"')
        assert alert["labels"]["severity"] in ("warning", "critical")
        assert alert["annotations"]["summary"]
    assert 'outcome=~"error|rejected"' in alerts["ZeroscalerWebhookErrors"]["expr"]
    assert "zeroscaler_wake_latency_seconds_bucket" in alerts["ZeroscalerWakesSlow"]["expr"]
    assert "zeroscaler_wake_failures_total" in alerts["ZeroscalerWakesFailing"]["expr"]
    assert "zeroscaler_pending_wakes" in alerts["ZeroscalerStuckAsleep"]["expr"]


def test_alert_thresholds_are_values(helm: Helm) -> None:
    objs = render(
        helm, *RULES,
        "--set", "monitoring.prometheusRule.wakeLatencySeconds=2",
        "--set", "monitoring.prometheusRule.stuckAsleepFor=30m",
        "--set-json", "monitoring.prometheusRule.webhookErrorRatio=0.2",
        "--set", "certificates.mode=certManager",
    )  # fmt: skip
    alerts = {r["alert"]: r for r in only(objs, "PrometheusRule")["spec"]["groups"][0]["rules"]}
    assert alerts["ZeroscalerWakesSlow"]["expr"].endswith("> 2")
    assert alerts["ZeroscalerStuckAsleep"]["for"] == "30m"
    assert alerts["ZeroscalerWebhookErrors"]["expr"].endswith("> 0.2")
    # cert-manager renews, not the webhook: its expiry gauge is not exported then.
    assert "ZeroscalerWebhookCertificateExpiring" not in alerts


def test_network_policies_admit_only_each_component_port(helm: Helm) -> None:
    peer = {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}
    objs = render(
        helm,
        "--set", "networkPolicy.enabled=true",
        "--set-json", f"networkPolicy.controller.from=[{json.dumps(peer)}]",
    )  # fmt: skip
    for component, port in (("controller", 8080), ("webhook", 10250)):
        policy = only(objs, "NetworkPolicy", f"{RELEASE}-zeroscaler-{component}")
        pod_labels = deployment(objs, component)["spec"]["template"]["metadata"]["labels"]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        [rule] = policy["spec"]["ingress"]
        assert rule["ports"] == [{"port": port, "protocol": "TCP"}]
        ports = [p["containerPort"] for p in container(deployment(objs, component))["ports"]]
        assert port in ports
        assert rule.get("from") == ([peer] if component == "controller" else None)


def test_network_policy_egress_rules_are_used_when_given(helm: Helm) -> None:
    egress = [{"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"port": 6443}]}]
    objs = render(
        helm,
        "--set", "networkPolicy.enabled=true",
        "--set-json", f"networkPolicy.egress={json.dumps(egress)}",
    )  # fmt: skip
    for component in ("controller", "webhook"):
        policy = only(objs, "NetworkPolicy", f"{RELEASE}-zeroscaler-{component}")
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert policy["spec"]["egress"] == egress


def test_priority_class_for_every_pod(helm: Helm) -> None:
    objs = render(
        helm,
        "--set", "controller.priorityClassName=system-cluster-critical",
        "--set", "webhook.priorityClassName=high",
        "--set", "certificates.job.priorityClassName=batch",
    )  # fmt: skip
    assert deployment(objs, "controller")["spec"]["template"]["spec"]["priorityClassName"] == (
        "system-cluster-critical"
    )
    assert deployment(objs, "webhook")["spec"]["template"]["spec"]["priorityClassName"] == "high"
    assert certs_job(objs)["spec"]["template"]["spec"]["priorityClassName"] == "batch"
    for _, spec in _pod_specs(render(helm)):
        assert "priorityClassName" not in spec


# --- values that are refused ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "replicaCount=2"], "replicaCount"),
        (["--set", "webhook.failurePolicy=Sometimes"], "failurePolicy"),
        (["--set", "controller.replicas=two"], "replicas"),
        (["--set", "webhook.timeoutSeconds=60"], "timeoutSeconds"),
        (["--set", "certificates.mode=vault"], "mode"),
        (["--set", "webhook.clientConfig.mode=url"], "url"),
        (
            [
                "--set",
                "webhook.clientConfig.mode=url",
                "--set",
                "webhook.clientConfig.url=http://127.0.0.1:9443/mutate",
            ],
            "url",
        ),
        (["--set", "policy.defaults.idleTimeout=ten minutes"], "idleTimeout"),
        (["--set", "policy.inference.maxKinds=0"], "maxKinds"),
        (["--set", "logLevel=loud"], "logLevel"),
        (["--set", "logFormat=yaml"], "logFormat"),
        (["--set", "controller.rbac.watchAll=false"], "watchAll"),
        (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
        (["--set", "image.registry=https://ghcr.io"], "registry"),
        (["--set", "global.imageRegistry=mirror.example/"], "imageRegistry"),
        (["--set", "image.repository=zeroscaler/zeroscaler:0.1.0"], "repository"),
        (
            ["--set-json", 'webhook.configurationAnnotations={"a": {"b": 1}}'],
            "configurationAnnotations",
        ),
        (["--set", "hostNetwork=yes"], "hostNetwork"),
        (["--set", "apiServer.host=https://127.0.0.1"], "host"),
        (["--set", "apiServer.port=0"], "port"),
        (["--set", "monitoring.serviceMonitor.every=1m"], "every"),
        (["--set", "monitoring.prometheusRule.stuckAsleepFor=soon"], "stuckAsleepFor"),
        (["--set-json", "monitoring.prometheusRule.webhookErrorRatio=2"], "webhookErrorRatio"),
        (["--set", "networkPolicy.webhook.from=anyone"], "from"),
        (["--set-json", 'webhook.excludeNamespaces=["Bad_Name"]'], "excludeNamespaces"),
        (["--set-json", "certificates.job.renewal.fraction=1.5"], "fraction"),
    ],
)
def test_schema_rejects_bad_values(helm: Helm, flags: list[str], message: str) -> None:
    proc = helm.template(*flags)
    assert proc.returncode != 0, f"{flags} were accepted"
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("version", "accepted"),
    [("1.29.9", False), ("1.30.0", True), ("1.30.2-gke.1", True), ("1.36.3", True)],
)
def test_chart_needs_kubernetes_1_30_or_newer(helm: Helm, version: str, accepted: bool) -> None:
    proc = helm.template("--kube-version", version)
    assert (proc.returncode == 0) is accepted, proc.stderr
    if not accepted:
        assert "kubeVersion" in proc.stderr


def test_renewal_settle_shorter_than_two_syncs_fails_with_guidance(helm: Helm) -> None:
    proc = helm.template(
        "--set", "certificates.job.renewal.syncInterval=10",
        "--set", "certificates.job.renewal.settle=15",
    )  # fmt: skip
    assert proc.returncode != 0
    assert "certificates.job.renewal.settle (15) must be at least twice syncInterval" in proc.stderr


def test_url_mode_without_a_url_fails_with_guidance(helm: Helm) -> None:
    proc = helm.template("--set", "webhook.clientConfig.mode=url")
    assert proc.returncode != 0
    assert "webhook.clientConfig.url is required" in proc.stderr
    assert "https://127.0.0.1:9443/mutate" in proc.stderr


# --- mode combined: one Deployment, the controller and the webhook in one process ----------------


def _halves(objs: list[Obj]) -> tuple[list[str], list[str]]:
    """The combined container's controller flags and webhook flags, split at `--`."""
    args = _args(objs, "controller")
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


# --- the activator -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["split", "combined"])
def test_the_activator_is_made_empty_for_the_controller_to_fill(helm: Helm, mode: str) -> None:
    objs = render(helm, mode=mode)
    activator = only(objs, "MutatingWebhookConfiguration", f"0-{RELEASE}-zeroscaler-activator")
    # No `webhooks`: the chart does not own them, so an upgrade never uncovers a sleeper.
    assert "webhooks" not in activator
    requests = only(objs, "ConfigMap", f"{RELEASE}-zeroscaler-activator-requests")
    assert "data" not in requests
    flags = _args(objs, "controller")
    args = parse_controller_flags(flags[: flags.index("--")] if "--" in flags else flags)
    assert args.activator_configuration == activator["metadata"]["name"]
    assert args.activator_requests == requests["metadata"]["name"]
    assert args.activator_timeout == 10
    assert args.webhook_configuration == webhook_configuration(objs)["metadata"]["name"]
    # Its name sorts before any configuration whose name starts with a letter.
    assert activator["metadata"]["name"] < "a"


def test_the_activator_can_be_turned_off_or_renamed(helm: Helm) -> None:
    off = render(helm, "--set", "activator.enabled=false")
    assert [o["metadata"]["name"] for o in off if o["kind"] == "MutatingWebhookConfiguration"] == [
        f"{RELEASE}-zeroscaler"
    ]
    assert not [a for a in _args(off, "controller") if a.startswith("--activator")]
    rules = roles(off)[f"ClusterRole/{RELEASE}-zeroscaler-controller"]
    # Its own configuration still gets its secret path; the activator's name is not granted.
    config = ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
    assert grants(rules, *config, "patch", f"{RELEASE}-zeroscaler")
    assert not grants(rules, *config, "patch", f"0-{RELEASE}-zeroscaler-activator")
    renamed = render(
        helm,
        "--set",
        "activator.configurationName=00-first",
        "--set",
        "activator.timeoutSeconds=20",
    )
    only(renamed, "MutatingWebhookConfiguration", "00-first")
    assert "--activator-timeout=20" in _args(renamed, "controller")
    bad = helm.template("--set", "activator.timeoutSeconds=40")
    assert bad.returncode != 0
    assert "timeoutSeconds" in bad.stderr
