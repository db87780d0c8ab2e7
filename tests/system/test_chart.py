"""The Helm chart installed on the real local control plane: what it creates, what it allows, that
`helm uninstall` takes it all away, and its certificate hooks.

The webhook runs in url mode against a recording TLS server on loopback (nothing may dial a Service
or pod IP here), with a Secret made by the test so that no certificate Job has to run: kwok only
pretends to run containers. The programs run with the chart's flags and RBAC are
`test_chart_programs.py`.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import Cluster
from testkit.recording_webhook import RecordingWebhook as Recorder
from testkit.recording_webhook import recording_webhook
from testkit.steps import step
from testkit.waiting import wait_for
from tests.system.chart_kit import (
    CHART,
    IMAGE,
    service_account_kubeconfig,
    zero_replica_deployment,
)
from zeroscaler.certs.issue import new_ca, new_serving_cert
from zeroscaler.core.policy import DEFAULT_IGNORE, parse_policy

ENABLED_LABEL = "zeroscaler.io/enabled"
SEEN_ANNOTATION = "test.zeroscaler.io/seen-by"


# --- a recording webhook on loopback --------------------------------------------------------------


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorder]:
    with recording_webhook(tmp_path_factory.mktemp("tls"), SEEN_ANNOTATION, "chart-url") as rec:
        yield rec


# --- helm -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    fullname: str
    secret: str


def _create_namespace(api: k8s.ApiClient, prefix: str, labels: dict[str, str]) -> str:
    name = f"{prefix}-{secrets.token_hex(3)}"
    k8s.CoreV1Api(api).create_namespace(
        k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name, labels=labels))
    )
    return name


def _install(
    cluster: Cluster, api: k8s.ApiClient, home: Path, namespace: str, recorder: Recorder
) -> Release:
    """Install the chart in url mode with a Secret made here; waits for both Deployments."""
    name = f"zs-{secrets.token_hex(3)}"
    release = Release(name, namespace, f"{name}-zeroscaler", f"{name}-serving")
    pair = new_serving_cert(new_ca("chart-test-serving-ca"), ["127.0.0.1"])
    k8s.CoreV1Api(api).create_namespaced_secret(
        namespace,
        k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name=release.secret),
            type="kubernetes.io/tls",
            string_data={"tls.crt": pair.cert_pem.decode(), "tls.key": pair.key_pem.decode()},
        ),
    )
    proc = cluster.helm(
        home,
        "install",
        name,
        str(CHART),
        "--namespace",
        namespace,
        "--wait",
        "--timeout",
        "180s",
        "--set",
        "mode=split",  # the tests below look at each component's own account and Deployment
        "--set",
        "webhook.clientConfig.mode=url",
        "--set",
        f"webhook.clientConfig.url={recorder.url}",
        "--set",
        "webhook.failurePolicy=Ignore",
        "--set",
        "certificates.mode=secret",
        "--set",
        f"certificates.secretName={release.secret}",
        "--set",
        f"certificates.caBundle={base64.b64encode(recorder.ca_pem).decode()}",
    )
    assert proc.returncode == 0, proc.stderr
    return release


@pytest.fixture(scope="module")
def installed(
    cluster: Cluster,
    api: k8s.ApiClient,
    recorder: Recorder,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Release]:
    home = tmp_path_factory.mktemp("helm")
    namespace = _create_namespace(api, "chart", {})
    release = _install(cluster, api, home, namespace, recorder)
    yield release
    cluster.helm(home, "uninstall", release.name, "--namespace", namespace, "--wait")
    k8s.CoreV1Api(api).delete_namespace(namespace)


# --- RBAC as the real authorizer sees it ----------------------------------------------------------


def _allowed(
    api: k8s.ApiClient,
    release: Release,
    component: str,
    verb: str,
    resource: str,
    *,
    group: str = "",
    namespace: str | None = None,
    name: str = "",
    subresource: str = "",
) -> bool:
    """Whether the component's ServiceAccount may do this, asked with a SubjectAccessReview."""
    sa = f"{release.fullname}-{component}"
    review = k8s.V1SubjectAccessReview(
        spec=k8s.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{release.namespace}:{sa}",
            groups=[
                "system:serviceaccounts",
                f"system:serviceaccounts:{release.namespace}",
                "system:authenticated",
            ],
            resource_attributes=k8s.V1ResourceAttributes(
                verb=verb,
                group=group,
                resource=resource,
                namespace=namespace,
                name=name,
                subresource=subresource,
            ),
        )
    )
    answer = k8s.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(answer.status.allowed)


def test_controller_may_scale_workloads_and_watch_any_kind_but_not_delete(
    api: k8s.ApiClient, installed: Release
) -> None:
    def can(verb: str, resource: str, **kw: str) -> bool:
        return _allowed(api, installed, "controller", verb, resource, **kw)

    for workload in ("deployments", "statefulsets"):
        assert can("patch", workload, group="apps", namespace="default", subresource="scale")
        assert can("get", workload, group="apps", namespace="default", subresource="scale")
        assert can("patch", workload, group="apps", namespace="default")
        assert can("watch", workload, group="apps")
        assert not can("update", workload, group="apps", namespace="default")
        assert not can("delete", workload, group="apps", namespace="default")
    assert can("watch", "widgets", group="example.com")
    assert can("list", "configmaps")
    assert can("create", "subjectaccessreviews", group="authorization.k8s.io")
    assert can("create", "events", namespace="default")
    assert can("list", "horizontalpodautoscalers", group="autoscaling")
    assert not can("create", "pods", namespace="default")
    assert not can("patch", "configmaps", namespace="default")
    assert not can("create", "secrets", namespace=installed.namespace)
    # zeroscaler's own webhook configuration (given its secret path), no one else's.
    configurations = {"group": "admissionregistration.k8s.io"}
    assert can("patch", "mutatingwebhookconfigurations", name=installed.fullname, **configurations)
    assert not can("patch", "mutatingwebhookconfigurations", name="someone-elses", **configurations)


def test_the_network_facing_webhook_may_not_write_any_workload(
    api: k8s.ApiClient, installed: Release
) -> None:
    """Any pod can reach the webhook: its account, as the real authorizer answers, can read a
    workload's scale and write nothing of it (the default mode, split)."""

    def can(verb: str, resource: str, **kw: str) -> bool:
        return _allowed(api, installed, "webhook", verb, resource, **kw)

    for workload in ("deployments", "statefulsets"):
        assert can("get", workload, group="apps", namespace="default", subresource="scale")
        for verb in ("patch", "update", "create", "delete"):
            assert not can(verb, workload, group="apps", namespace="default")
            assert not can(verb, workload, group="apps", namespace="default", subresource="scale")
    for verb in ("patch", "update"):
        assert not can(
            verb,
            "mutatingwebhookconfigurations",
            group="admissionregistration.k8s.io",
            name=f"0-{installed.fullname}-activator",
        )


def test_the_admission_policy_lets_the_controller_change_only_replicas_and_its_own_keys(
    api: k8s.ApiClient, installed: Release, ns: str
) -> None:
    """Its patch access cannot rewrite a pod template, whoever holds its token: the API server's
    ValidatingAdmissionPolicy refuses it (the controller's account impersonated)."""
    apps = k8s.AppsV1Api(api)
    apps.create_namespaced_deployment(
        ns,
        {
            "metadata": {"name": "op", "annotations": {"owner": "team-a"}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "op"}},
                "template": {
                    "metadata": {"labels": {"app": "op"}},
                    "spec": {"containers": [{"name": "op", "image": IMAGE}]},
                },
            },
        },
    )
    user = f"system:serviceaccount:{installed.namespace}:{installed.fullname}-controller"
    as_controller = k8s.ApiClient(api.configuration, header_name="Impersonate-User",
                                  header_value=user)  # fmt: skip
    controller = k8s.AppsV1Api(as_controller)

    def patch(body: dict[str, Any]) -> str:
        try:
            controller.patch_namespaced_deployment("op", ns, body)
        except ApiException as e:
            return str(json.loads(e.body).get("message", "")) if e.body else str(e.status)
        return "allowed"

    template = {"spec": {"template": {"spec": {"containers": [{"name": "op", "image": "evil"}]}}}}
    # The policy takes a moment to reach the API server's admission: until a refusal is seen.
    wait_for(lambda: patch(template) != "allowed", "the admission policy to be in force")
    assert "may change no field of a workload's spec but replicas" in patch(template)
    foreign = {"metadata": {"annotations": {"owner": "mallory"}}}
    assert "no annotation of a workload but zeroscaler.io/" in patch(foreign)
    assert "no label" in patch({"metadata": {"labels": {"app": "other"}}})
    asleep = {
        "spec": {"replicas": 0},
        "metadata": {
            "annotations": {"zeroscaler.io/state": "asleep", "zeroscaler.io/restore-replicas": "1"},
            "labels": {"zeroscaler.io/state": "asleep"},
        },
    }
    assert patch(asleep) == "allowed"
    scaled = apps.read_namespaced_deployment("op", ns)
    assert scaled.spec.replicas == 0
    assert scaled.spec.template.spec.containers[0].image == IMAGE
    assert scaled.metadata.annotations["owner"] == "team-a"
    # A person (here the admin) is not held by it.
    apps.patch_namespaced_deployment("op", ns, {"metadata": {"annotations": {"owner": "team-b"}}})
    as_controller.close()


def test_controller_may_hold_only_its_own_lease(api: k8s.ApiClient, installed: Release) -> None:
    lease = f"{installed.fullname}-controller"

    def can(verb: str, namespace: str, name: str = "") -> bool:
        return _allowed(
            api,
            installed,
            "controller",
            verb,
            "leases",
            group="coordination.k8s.io",
            namespace=namespace,
            name=name,
        )

    assert can("create", installed.namespace)
    assert can("get", installed.namespace, lease)
    assert can("patch", installed.namespace, lease)
    assert not can("patch", installed.namespace, "someone-elses-lease")
    assert not can("patch", "default", lease)
    assert not can("delete", installed.namespace, lease)


def test_webhook_only_reads_rbac_namespaces_and_its_policy(
    api: k8s.ApiClient, installed: Release
) -> None:
    def can(verb: str, resource: str, **kw: str) -> bool:
        return _allowed(api, installed, "webhook", verb, resource, **kw)

    rbac = "rbac.authorization.k8s.io"
    for resource in ("roles", "rolebindings", "clusterroles", "clusterrolebindings"):
        assert can("list", resource, group=rbac)
        assert can("watch", resource, group=rbac)
        assert not can("create", resource, group=rbac)
    assert can("watch", "namespaces")
    assert can("list", "configmaps", namespace=installed.namespace)
    assert can("create", "events", namespace=installed.namespace)
    assert not can("list", "configmaps", namespace="default")
    assert not can("create", "events", namespace="default")
    assert not can("list", "secrets", namespace=installed.namespace)
    assert not can("patch", "deployments", group="apps", namespace="default")
    assert not can("patch", "namespaces")


# --- what was installed ---------------------------------------------------------------------------


def test_both_components_run_with_two_replicas_and_budgets(
    api: k8s.ApiClient, installed: Release
) -> None:
    apps = k8s.AppsV1Api(api)
    policy = k8s.PolicyV1Api(api)
    for component, command in (
        ("controller", "zeroscaler-controller"),
        ("webhook", "zeroscaler-webhook"),
    ):
        name = f"{installed.fullname}-{component}"
        deployment = apps.read_namespaced_deployment(name, installed.namespace)
        assert deployment.status.ready_replicas == 2
        container = deployment.spec.template.spec.containers[0]
        assert container.command == [command]
        assert container.security_context.read_only_root_filesystem is True
        assert container.security_context.capabilities.drop == ["ALL"]
        assert deployment.spec.template.spec.security_context.run_as_non_root is True
        # The disruption controller counts the pods the budget's selector matches.
        wait_for(
            partial(_expected_pods_is, policy, name, installed.namespace, 2),
            f"the {component} budget to cover its two pods",
        )


def test_webhook_configuration_points_at_the_url_with_the_given_ca(
    api: k8s.ApiClient, installed: Release, recorder: Recorder
) -> None:
    config = k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(
        installed.fullname
    )
    [hook] = config.webhooks
    assert hook.client_config.url == recorder.url
    assert hook.client_config.service is None
    assert base64.b64decode(hook.client_config.ca_bundle) == recorder.ca_pem
    assert hook.namespace_selector.match_labels == {ENABLED_LABEL: "true"}
    [expression] = hook.namespace_selector.match_expressions
    assert (expression.key, expression.operator) == ("kubernetes.io/metadata.name", "NotIn")
    assert expression.values == [installed.namespace, "kube-system"]
    assert hook.failure_policy == "Ignore"
    assert hook.side_effects == "None"
    assert hook.reinvocation_policy == "IfNeeded"
    assert hook.admission_review_versions == ["v1"]
    [rule] = hook.rules
    assert rule.api_groups == ["apps"]
    assert sorted(rule.resources) == ["deployments", "statefulsets"]
    assert sorted(rule.operations) == ["CREATE", "UPDATE"]


def _expected_pods_is(policy: Any, name: str, namespace: str, count: int) -> bool:
    budget = policy.read_namespaced_pod_disruption_budget(name, namespace)
    return bool(budget.status.expected_pods == count)


def test_api_server_calls_the_webhook_for_opted_in_namespaces_only(
    api: k8s.ApiClient, installed: Release, recorder: Recorder, ns: str, opted_ns: str
) -> None:
    apps = k8s.AppsV1Api(api)

    def annotated(namespace: str, name: str) -> str | None:
        found = apps.read_namespaced_deployment(name, namespace).metadata.annotations or {}
        value: str | None = found.get(SEEN_ANNOTATION)
        return value

    # The API server picks up a new webhook configuration within moments; dry runs find out when.
    wait_for(
        lambda: (
            apps.create_namespaced_deployment(
                opted_ns, zero_replica_deployment("probe"), dry_run="All"
            ).metadata.annotations
            or {}
        ).get(SEEN_ANNOTATION),
        "the webhook configuration to take effect",
    )
    apps.create_namespaced_deployment(opted_ns, zero_replica_deployment("operator"))
    assert annotated(opted_ns, "operator") == "chart-url"
    apps.patch_namespaced_deployment("operator", opted_ns, {"metadata": {"labels": {"x": "y"}}})
    # The deployment controller's own updates (revision annotation) pass through it as well.
    operations = recorder.saw("Deployment", opted_ns, "operator")
    assert operations[0] == "CREATE"
    assert set(operations[1:]) == {"UPDATE"}

    template = zero_replica_deployment("db").spec
    apps.create_namespaced_stateful_set(
        opted_ns,
        k8s.V1StatefulSet(
            metadata=k8s.V1ObjectMeta(name="db"),
            spec=k8s.V1StatefulSetSpec(
                replicas=0,
                service_name="db",
                selector=template.selector,
                template=template.template,
            ),
        ),
    )
    stored = apps.read_namespaced_stateful_set("db", opted_ns).metadata.annotations or {}
    assert stored.get(SEEN_ANNOTATION) == "chart-url"

    apps.create_namespaced_deployment(ns, zero_replica_deployment("bystander"))
    assert annotated(ns, "bystander") is None
    assert recorder.saw("Deployment", ns, "bystander") == []

    # The release's own namespace is never sent, even when someone opts it in.
    k8s.CoreV1Api(api).patch_namespace(
        installed.namespace, {"metadata": {"labels": {ENABLED_LABEL: "true"}}}
    )
    apps.create_namespaced_deployment(installed.namespace, zero_replica_deployment("own"))
    apps.create_namespaced_deployment(
        opted_ns, zero_replica_deployment("after")
    )  # the webhook still works
    assert annotated(opted_ns, "after") == "chart-url"
    assert annotated(installed.namespace, "own") is None
    assert recorder.saw("Deployment", installed.namespace, "own") == []


def test_policy_configmap_holds_the_defaults(api: k8s.ApiClient, installed: Release) -> None:
    maps = (
        k8s.CoreV1Api(api)
        .list_namespaced_config_map(installed.namespace, label_selector="zeroscaler.io/policy=true")
        .items
    )
    assert [m.metadata.name for m in maps] == [f"{installed.fullname}-policy"]
    doc = parse_policy(maps[0].data["policy.yaml"], maps[0].metadata.name)
    assert doc.idle_timeout == 15 * 60
    assert doc.min_idle_timeout == 60
    assert doc.max_idle_timeout == 24 * 3600
    assert doc.from_rbac is True
    assert doc.ignore == DEFAULT_IGNORE
    assert doc.max_kinds == 50


# --- uninstall ------------------------------------------------------------------------------------


def _gone(read: Any, *args: str) -> bool:
    try:
        read(*args)
    except ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def _none_listed(list_: Any, namespace: str, selector: str) -> bool:
    return not list_(namespace, label_selector=selector).items


def test_uninstall_removes_everything_the_chart_made(
    cluster: Cluster, api: k8s.ApiClient, recorder: Recorder, ns: str, tmp_path: Path
) -> None:
    with step("the chart makes its objects"):
        release = _install(cluster, api, tmp_path, ns, recorder)
        rbac = k8s.RbacAuthorizationV1Api(api)
        core = k8s.CoreV1Api(api)
        cluster_scoped = [
            (
                k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration,
                release.fullname,
            ),
            *[
                (rbac.read_cluster_role, f"{release.fullname}-{c}")
                for c in ("controller", "webhook")
            ],
            *[
                (rbac.read_cluster_role_binding, f"{release.fullname}-{c}")
                for c in ("controller", "webhook")
            ],
        ]
        selector = f"app.kubernetes.io/instance={release.name}"
        namespaced = [
            k8s.AppsV1Api(api).list_namespaced_deployment,
            k8s.PolicyV1Api(api).list_namespaced_pod_disruption_budget,
            core.list_namespaced_config_map,
            core.list_namespaced_service,
            core.list_namespaced_service_account,
            rbac.list_namespaced_role,
            rbac.list_namespaced_role_binding,
        ]
        for read, name in cluster_scoped:
            assert not _gone(read, name), name
        for list_ in namespaced:
            assert list_(ns, label_selector=selector).items, list_.__name__

    with step("helm uninstall deletes everything the chart made"):
        proc = cluster.helm(tmp_path, "uninstall", release.name, "--namespace", ns, "--wait")
        assert proc.returncode == 0, proc.stderr

        for read, name in cluster_scoped:
            wait_for(partial(_gone, read, name), f"{name} to be deleted")
        for list_ in namespaced:
            wait_for(
                partial(_none_listed, list_, ns, selector),
                f"{list_.__name__} to find nothing of the release",
            )
    with step("the Secret, ours and not the chart's, stays"):
        assert core.read_namespaced_secret(release.secret, ns).type == "kubernetes.io/tls"


# --- the certificate hooks ------------------------------------------------------------------------


def test_certs_hooks_clean_up_and_their_rbac_is_enough_for_zeroscaler_certs(
    cluster: Cluster, api: k8s.ApiClient, recorder: Recorder, ns: str, tmp_path: Path
) -> None:
    name = f"zs-{secrets.token_hex(3)}"
    fullname, job_name = f"{name}-zeroscaler", f"{name}-zeroscaler-certs"
    values = [
        "--set",
        "webhook.clientConfig.mode=url",
        "--set",
        f"webhook.clientConfig.url={recorder.url}",
        "--set",
        "certificates.mode=job",
    ]
    home = tmp_path / "helm"
    proc = cluster.helm(
        home,
        "install",
        name,
        str(CHART),
        "--namespace",
        ns,
        "--wait",
        "--timeout",
        "180s",
        *values,
    )
    assert proc.returncode == 0, proc.stderr
    registration = k8s.AdmissionregistrationV1Api(api)
    rbac = k8s.RbacAuthorizationV1Api(api)
    try:
        # kwok completes Job pods without running them: the hooks "succeed" and are deleted.
        assert _gone(k8s.BatchV1Api(api).read_namespaced_job, job_name, ns)
        assert _gone(rbac.read_cluster_role, job_name)
        assert _gone(rbac.read_namespaced_role, job_name, ns)
        assert _gone(k8s.CoreV1Api(api).read_namespaced_service_account, job_name, ns)

        # Do what the Job's container does, with exactly the hook's RBAC and the Job's flags.
        rendered = cluster.helm(
            home,
            "template",
            name,
            str(CHART),
            "--namespace",
            ns,
            "--show-only",
            "templates/certs-job.yaml",
            *values,
        )
        assert rendered.returncode == 0, rendered.stderr
        docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
        [job] = [d for d in docs if d["kind"] == "Job"]
        access = yaml.safe_dump_all([d for d in docs if d["kind"] != "Job"])
        cluster.kubectl("apply", "-f", "-", input=access)
        try:
            kubeconfig = service_account_kubeconfig(
                cluster,
                tmp_path / "sa.kubeconfig",
                ns,
                job["spec"]["template"]["spec"]["serviceAccountName"],
            )
            [container] = job["spec"]["template"]["spec"]["containers"]
            assert container["command"] == ["zeroscaler"]
            run = [
                sys.executable,
                "-c",
                "import sys; from zeroscaler.cli import main; sys.exit(main())",
                *container["args"],
                f"--kubeconfig={kubeconfig}",
            ]
            first = subprocess.run(run, capture_output=True, text=True, timeout=120)
            assert first.returncode == 0, first.stderr
            again = subprocess.run(run, capture_output=True, text=True, timeout=120)
            assert again.returncode == 0, again.stderr
            assert "caBundle current" in again.stdout
        finally:
            cluster.kubectl("delete", "--ignore-not-found", "-f", "-", input=access)

        secret = k8s.CoreV1Api(api).read_namespaced_secret(f"{fullname}-webhook-tls", ns)
        ca = x509.load_pem_x509_certificate(base64.b64decode(secret.data["ca.crt"]))
        serving = x509.load_pem_x509_certificate(base64.b64decode(secret.data["tls.crt"]))
        serving.verify_directly_issued_by(ca)
        sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
        [hook] = registration.read_mutating_webhook_configuration(fullname).webhooks
        assert base64.b64decode(hook.client_config.ca_bundle) == base64.b64decode(
            secret.data["ca.crt"]
        )
        assert hook.client_config.url == recorder.url

        # An upgrade re-applies the configuration; the caBundle the Job wrote must survive it.
        upgraded = cluster.helm(
            home,
            "upgrade",
            name,
            str(CHART),
            "--namespace",
            ns,
            "--wait",
            "--timeout",
            "180s",
            *values,
            "--set",
            "webhook.timeoutSeconds=7",
        )
        assert upgraded.returncode == 0, upgraded.stderr
        [hook] = registration.read_mutating_webhook_configuration(fullname).webhooks
        assert hook.timeout_seconds == 7
        assert base64.b64decode(hook.client_config.ca_bundle) == base64.b64decode(
            secret.data["ca.crt"]
        )
    finally:
        cluster.helm(home, "uninstall", name, "--namespace", ns, "--wait")
    assert _gone(registration.read_mutating_webhook_configuration, fullname)
