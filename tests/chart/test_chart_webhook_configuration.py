"""The webhook configurations the chart renders: which requests the API server sends to zeroscaler's
webhook and how it reaches it, and the activator's, made empty for the controller to fill.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import pytest
from pydantic_settings import CliApp

from tests.chart.conftest import NAMESPACE, RELEASE, Helm
from tests.chart.rendered import (
    ENABLED_LABEL,
    URL,
    args_of,
    certs_job,
    container,
    deployment,
    grants,
    only,
    render,
    roles,
    webhook_configuration,
    webhook_entry,
)
from zeroscaler.controller.flags import parse_settings as parse_controller_flags
from zeroscaler.webhook.settings import WebhookSettings

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
    settings = CliApp.run(WebhookSettings, cli_args=args_of(objs, "webhook"))
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


# --- the activator -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["split", "combined"])
def test_the_activator_is_made_empty_for_the_controller_to_fill(helm: Helm, mode: str) -> None:
    objs = render(helm, mode=mode)
    activator = only(objs, "MutatingWebhookConfiguration", f"0-{RELEASE}-zeroscaler-activator")
    # No `webhooks`: the chart does not own them, so an upgrade never uncovers a sleeper.
    assert "webhooks" not in activator
    requests = only(objs, "ConfigMap", f"{RELEASE}-zeroscaler-activator-requests")
    assert "data" not in requests
    flags = args_of(objs, "controller")
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
    assert not [a for a in args_of(off, "controller") if a.startswith("--activator")]
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
    assert "--activator-timeout=20" in args_of(renamed, "controller")
    bad = helm.template("--set", "activator.timeoutSeconds=40")
    assert bad.returncode != 0
    assert "timeoutSeconds" in bad.stderr
