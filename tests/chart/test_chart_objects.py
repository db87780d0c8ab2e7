"""What the chart installs in each mode: every object, its standard labels, its namespace, and
names that fit Kubernetes' limits.

Not unit tests: they run the helm binary the control-plane build provides (see conftest.py)."""

from __future__ import annotations

import pytest
import yaml

from tests.chart.conftest import NAMESPACE, RELEASE, Helm
from tests.chart.rendered import (
    container,
    deployment,
    is_hook,
    kinds,
    render,
)

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
