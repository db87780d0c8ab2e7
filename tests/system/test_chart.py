"""The Helm chart installed on the real local control plane: what it creates, what it allows, and
that `helm uninstall` takes it all away.

The webhook runs in url mode against a recording TLS server on loopback (nothing may dial a Service
or pod IP here), with a Secret made by the test so that no certificate Job has to run: kwok only
pretends to run containers.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import Cluster
from localcluster.processes import free_port, stop
from testkit.recording_webhook import RecordingWebhook as Recorder
from testkit.recording_webhook import recording_webhook
from testkit.waiting import wait_for
from zeroscaler.certs.issue import new_ca, new_serving_cert
from zeroscaler.certs.rotation import split_bundle, stamps_for
from zeroscaler.core.policy import DEFAULT_IGNORE, parse_policy

CHART = Path(__file__).resolve().parents[2] / "charts" / "zeroscaler"
ENABLED_LABEL = "zeroscaler.io/enabled"
SEEN_ANNOTATION = "test.zeroscaler.io/seen-by"
IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok only pretends to run containers


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


def _deployment(name: str) -> k8s.V1Deployment:
    labels = {"app": name}
    return k8s.V1Deployment(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1DeploymentSpec(
            replicas=0,
            selector=k8s.V1LabelSelector(match_labels=labels),
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=labels),
                spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="main", image=IMAGE)]),
            ),
        ),
    )


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
                opted_ns, _deployment("probe"), dry_run="All"
            ).metadata.annotations
            or {}
        ).get(SEEN_ANNOTATION),
        "the webhook configuration to take effect",
    )
    apps.create_namespaced_deployment(opted_ns, _deployment("operator"))
    assert annotated(opted_ns, "operator") == "chart-url"
    apps.patch_namespaced_deployment("operator", opted_ns, {"metadata": {"labels": {"x": "y"}}})
    # The deployment controller's own updates (revision annotation) pass through it as well.
    operations = recorder.saw("Deployment", opted_ns, "operator")
    assert operations[0] == "CREATE"
    assert set(operations[1:]) == {"UPDATE"}

    template = _deployment("db").spec
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

    apps.create_namespaced_deployment(ns, _deployment("bystander"))
    assert annotated(ns, "bystander") is None
    assert recorder.saw("Deployment", ns, "bystander") == []

    # The release's own namespace is never sent, even when someone opts it in.
    k8s.CoreV1Api(api).patch_namespace(
        installed.namespace, {"metadata": {"labels": {ENABLED_LABEL: "true"}}}
    )
    apps.create_namespaced_deployment(installed.namespace, _deployment("own"))
    apps.create_namespaced_deployment(opted_ns, _deployment("after"))  # the webhook still works
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
    release = _install(cluster, api, tmp_path, ns, recorder)
    rbac = k8s.RbacAuthorizationV1Api(api)
    core = k8s.CoreV1Api(api)
    cluster_scoped = [
        (k8s.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration, release.fullname),
        *[(rbac.read_cluster_role, f"{release.fullname}-{c}") for c in ("controller", "webhook")],
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

    proc = cluster.helm(tmp_path, "uninstall", release.name, "--namespace", ns, "--wait")
    assert proc.returncode == 0, proc.stderr

    for read, name in cluster_scoped:
        wait_for(partial(_gone, read, name), f"{name} to be deleted")
    for list_ in namespaced:
        wait_for(
            partial(_none_listed, list_, ns, selector),
            f"{list_.__name__} to find nothing of the release",
        )
    # The Secret was ours, not the chart's: it stays.
    assert core.read_namespaced_secret(release.secret, ns).type == "kubernetes.io/tls"


# --- the certificate hooks ------------------------------------------------------------------------


def _service_account_kubeconfig(cluster: Cluster, path: Path, namespace: str, sa: str) -> Path:
    token = cluster.kubectl("create", "token", sa, "-n", namespace).stdout.strip()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "sa",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {
                            "server": cluster.server,
                            "certificate-authority": str(cluster.ca_file),
                        },
                    }
                ],
                "users": [{"name": sa, "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "local", "user": sa}}],
            }
        )
    )
    return path


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
            kubeconfig = _service_account_kubeconfig(
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
        controller_kc = _service_account_kubeconfig(
            cluster, tmp_path / "controller.kubeconfig", ns, f"{fullname}-controller"
        )
        if mode == "combined":
            # One program, as the controller's account: the controller's flags, --, the webhook's.
            spec = k8s.AppsV1Api(api).read_namespaced_deployment(f"{fullname}-controller", ns)
            [installed] = spec.spec.template.spec.containers
            assert installed.command == ["zeroscaler-combined"]
            args = _local_args(installed.args, {**controller_local, **webhook_local})
            at = args.index("--")
            args.insert(at, f"--kubeconfig={controller_kc}")
            controller = webhook = _start("zeroscaler-combined", args, tmp_path / "combined.log")
            programs.append(controller)
        else:
            webhook_args = _local_args(
                _installed_args(api, ns, f"{fullname}-webhook"), webhook_local
            )
            webhook_kc = _service_account_kubeconfig(
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
        leases = k8s.CoordinationV1Api(api)
        wait_for(
            lambda: (
                leases.read_namespaced_lease(f"{fullname}-controller", ns).spec.holder_identity
                == "chart-e2e"
            ),
            "the controller to take its Lease",
        )

        # An operator that may watch ConfigMaps in its namespace, and nothing else.
        rbac = k8s.RbacAuthorizationV1Api(api)
        rbac.create_namespaced_role(
            opted_ns,
            k8s.V1Role(
                metadata=k8s.V1ObjectMeta(name="operator"),
                rules=[
                    k8s.V1PolicyRule(
                        api_groups=[""], resources=["configmaps"], verbs=["get", "list", "watch"]
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
            dry = apps.create_namespaced_deployment(opted_ns, _deployment("probe"), dry_run="All")
            found: dict[str, str] = dry.metadata.annotations or {}
            return found if "ConfigMap" in found.get("zeroscaler.io/watched-kinds", "") else None

        wait_for(injected, "the webhook to annotate from the operator's RBAC")
        body = _deployment("operator")
        body.spec.replicas = 2
        apps.create_namespaced_deployment(opted_ns, body)
        stored = apps.read_namespaced_deployment("operator", opted_ns).metadata.annotations
        assert stored["zeroscaler.io/idle-timeout"] == "3s", stored
        assert "ConfigMap" in stored["zeroscaler.io/watched-kinds"], stored

        wait_for(
            lambda: _replicas(api, opted_ns, "operator") == 0,
            f"the controller to put the idle operator to sleep\n{controller.tail()}",
        )
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
        metrics = free_port()
        args = _local_args(
            _installed_args(api, ns, f"{fullname}-controller"),
            {"--metrics-host": "127.0.0.1", "--metrics-port": str(metrics), "--id": "narrow"},
        )
        kubeconfig = _service_account_kubeconfig(
            cluster, tmp_path / "controller.kubeconfig", ns, f"{fullname}-controller"
        )
        controller = _start(
            "zeroscaler-controller", [*args, f"--kubeconfig={kubeconfig}"], tmp_path / "c.log"
        )
        wait_for(
            partial(_responds, controller, f"https://127.0.0.1:{metrics}/readyz", False),
            "the controller's watches to sync with the narrow RBAC",
        )
        # One operator may watch ConfigMaps, the other Secrets too; the controller only ConfigMaps.
        core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
        for account, resources in (
            ("default", ["configmaps"]),
            ("reader", ["configmaps", "secrets"]),
        ):
            if account != "default":
                core.create_namespaced_service_account(
                    opted_ns, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name=account))
                )
            rule = k8s.V1PolicyRule(api_groups=[""], resources=resources, verbs=["list", "watch"])
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
                        k8s.RbacV1Subject(kind="ServiceAccount", name=account, namespace=opted_ns)
                    ],
                ),
            )
        apps = k8s.AppsV1Api(api)
        listed, unlisted = _deployment("listed"), _deployment("unlisted")
        listed.metadata.annotations = {"zeroscaler.io/idle-timeout": "2s"}  # kinds from RBAC
        unlisted.metadata.annotations = {
            "zeroscaler.io/idle-timeout": "2s",
            "zeroscaler.io/watched-kinds": "ConfigMap, Secret",
        }
        unlisted.spec.template.spec.service_account_name = "reader"
        for body in (listed, unlisted):
            body.spec.replicas = 2
            apps.create_namespaced_deployment(opted_ns, body)

        def asleep() -> bool:
            return _replicas(api, opted_ns, "listed") == 0

        wait_for(asleep, "the operator whose kinds are inferred from RBAC to sleep")
        k8s.CoreV1Api(api).create_namespaced_config_map(
            opted_ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="poke"))
        )
        wait_for(
            lambda: _replicas(api, opted_ns, "listed") == 2,
            "a ConfigMap to wake it to 2 replicas",
        )
        wait_for(
            lambda: _events(api, opted_ns, "unlisted", "ControllerNotPermitted"),
            "a Warning Event on the workload that names Secrets",
        )
        [warning] = _events(api, opted_ns, "unlisted", "ControllerNotPermitted")
        assert warning.type == "Warning"
        assert "secrets" in warning.message, warning.message
        assert "controller.rbac.watchedResources" in warning.message
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
        kubeconfig = _service_account_kubeconfig(
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
