"""The managers above a workload, read from what they leave on it: table tests, no cluster."""

from __future__ import annotations

import pytest

from zeroscaler.core.managers import (
    ARGO_CD,
    CVO,
    FLUX,
    HELM,
    OLM,
    OLM_V1,
    Manager,
    by_field_manager,
    detect,
    field_managers_of,
    never_sleeps,
)

# (id, labels, annotations, field managers, expected managers as text)
CASES: list[tuple[str, dict[str, str], dict[str, str], set[str], list[str]]] = [
    ("nothing", {}, {}, {"kubectl-client-side-apply"}, []),
    ("OLM's CSV", {"olm.owner.kind": "ClusterServiceVersion", "olm.owner": "op.v1.2.0"}, {},
     set(), ["OLM (ClusterServiceVersion op.v1.2.0)"]),
    ("OLM v1", {"olm.operatorframework.io/owner-kind": "ClusterExtension",
                "olm.operatorframework.io/owner-name": "op"}, {}, set(),
     ["OLM v1 (ClusterExtension op)"]),
    ("Argo CD by annotation tracking", {},
     {"argocd.argoproj.io/tracking-id": "ops-app:apps/Deployment:ops/op"}, set(),
     ["Argo CD (Application ops-app)"]),
    ("Flux Kustomization", {"kustomize.toolkit.fluxcd.io/name": "infra",
                            "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}, {}, set(),
     ["Flux (Kustomization flux-system/infra)"]),
    ("Flux HelmRelease installed by Helm", {"helm.toolkit.fluxcd.io/name": "op",
                                            "helm.toolkit.fluxcd.io/namespace": "ops",
                                            "app.kubernetes.io/managed-by": "Helm"},
     {"meta.helm.sh/release-name": "op", "meta.helm.sh/release-namespace": "ops"}, set(),
     ["Flux (HelmRelease ops/op)", "Helm (release ops/op)"]),
    ("OpenShift's release manifests",
     {}, {"include.release.openshift.io/self-managed-high-availability": "true"}, set(),
     ["cluster-version operator"]),
    ("known only by field manager", {}, {}, {"argocd-controller", "helm"},
     ["Argo CD", "Helm"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("labels", "annotations", "field_managers", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_managers_are_read_from_labels_annotations_and_field_managers(
    labels: dict[str, str], annotations: dict[str, str], field_managers: set[str],
    expected: list[str],
) -> None:  # fmt: skip
    assert [str(m) for m in detect(labels, annotations, field_managers)] == expected


def test_a_field_manager_names_its_manager_and_the_setting_that_stops_a_fight() -> None:
    argo = Manager(ARGO_CD, "Application ops-app")
    assert by_field_manager("argocd-controller", (argo,)) == argo
    assert by_field_manager("kustomize-controller", ()) == Manager(FLUX)
    assert by_field_manager("someone", ()) is None
    assert "RespectIgnoreDifferences=true" in argo.setting
    assert "spec.ignore" in Manager(FLUX).setting
    assert "enabled" in Manager(OLM_V1).setting
    assert "upgrade" in Manager(HELM).setting
    assert "reinstall" in Manager(OLM).setting


def test_only_the_cluster_version_operator_forbids_any_sleep() -> None:
    assert never_sleeps((Manager(HELM), Manager(CVO))) == Manager(CVO)
    assert never_sleeps((Manager(OLM),)) is None


def test_field_managers_are_read_from_managed_fields() -> None:
    entries = [{"manager": "helm"}, {"manager": "kube-controller-manager"}, {"x": 1}, "bad"]
    assert field_managers_of(entries) == frozenset({"helm", "kube-controller-manager"})
    assert field_managers_of(None) == frozenset()


def test_a_workload_applied_server_side_by_another_is_told_from_one_updated() -> None:
    from zeroscaler.core.managers import is_applied

    assert is_applied([{"manager": "helm", "operation": "Apply"}], "zeroscaler")
    assert not is_applied([{"manager": "helm", "operation": "Update"}], "zeroscaler")
    assert not is_applied([{"manager": "zeroscaler", "operation": "Apply"}], "zeroscaler")
    assert not is_applied(None, "zeroscaler")


def test_our_ownership_of_replicas_alone_is_given_up() -> None:
    from zeroscaler.core.managers import without_replicas

    helm = {"manager": "helm", "operation": "Apply", "fieldsV1": {"f:spec": {"f:template": {}}}}
    sleep = {
        "manager": "zeroscaler",
        "operation": "Update",
        "fieldsV1": {"f:metadata": {"f:annotations": {}}, "f:spec": {"f:replicas": {}}},
    }
    scale = {
        "manager": "zeroscaler",
        "operation": "Update",
        "subresource": "scale",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
    }
    assert without_replicas([helm, sleep, scale], "zeroscaler") == [
        helm,
        {**sleep, "fieldsV1": {"f:metadata": {"f:annotations": {}}}},
    ]
    assert without_replicas([helm], "zeroscaler") is None
