"""The chart's RBAC: each part holds exactly the access it needs, writes are named, and an
administrator may narrow or take over the grants.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import pytest

from tests.chart.conftest import NAMESPACE, RELEASE, Helm
from tests.chart.rendered import (
    args_of,
    container,
    deployment,
    grants,
    only,
    render,
    roles,
    tls_secret_of_webhook,
    write_grants,
)

# --- RBAC ----------------------------------------------------------------------------------------


def test_no_rule_grants_every_verb(helm: Helm) -> None:
    for values in ([], ["--set", "certificates.mode=certManager"]):
        for name, rules in roles(render(helm, *values)).items():
            for rule in rules:
                assert "*" not in rule["verbs"], name


def test_only_the_certs_job_and_renewal_may_touch_secrets_by_name(helm: Helm) -> None:
    objs = render(helm)
    tls = tls_secret_of_webhook(objs)
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
    assert not [a for a in args_of(objs, "webhook") if a.startswith("--cert-secret")]


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
