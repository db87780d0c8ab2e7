"""The managers above a workload: who else writes it, and what each needs to leave its sleep be.

An operator's Deployment is rarely written by one hand. OLM reinstalls it from its CSV, Argo CD and
Flux keep it equal to Git, Helm upgrades it, OpenShift's cluster-version operator reverts any
change to its manifests. Each is read from what it leaves on the workload (labels, annotations,
the field managers in managedFields), so that a wake by one of them is named as such and a fight
with one of them names the setting that ends it (docs/gitops.md, "The managers above").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

OLM_OWNER_KIND = "olm.owner.kind"
OLM_OWNER = "olm.owner"
OLM1_OWNER_KIND = "olm.operatorframework.io/owner-kind"
OLM1_OWNER = "olm.operatorframework.io/owner-name"
ARGOCD_TRACKING = "argocd.argoproj.io/tracking-id"
FLUX_KUSTOMIZATION = "kustomize.toolkit.fluxcd.io/name"
FLUX_KUSTOMIZATION_NS = "kustomize.toolkit.fluxcd.io/namespace"
FLUX_HELMRELEASE = "helm.toolkit.fluxcd.io/name"
FLUX_HELMRELEASE_NS = "helm.toolkit.fluxcd.io/namespace"
MANAGED_BY = "app.kubernetes.io/managed-by"
HELM_RELEASE = "meta.helm.sh/release-name"
HELM_RELEASE_NS = "meta.helm.sh/release-namespace"
CVO_PREFIX = "include.release.openshift.io/"  # a release payload's manifests carry these

# The annotations a manager leaves that `detect` reads (trimmed workloads keep only these).
READ_ANNOTATIONS = (ARGOCD_TRACKING, HELM_RELEASE, HELM_RELEASE_NS)

OLM = "OLM"
OLM_V1 = "OLM v1"
ARGO_CD = "Argo CD"
FLUX = "Flux"
HELM = "Helm"
CVO = "cluster-version operator"

# The field managers each writes with (as its managedFields entries name it).
FIELD_MANAGERS: Mapping[str, frozenset[str]] = {
    OLM: frozenset({"olm", "catalog"}),
    OLM_V1: frozenset({"olm.operatorframework.io", "operator-controller"}),
    ARGO_CD: frozenset({"argocd-controller"}),
    FLUX: frozenset({"kustomize-controller", "helm-controller"}),
    HELM: frozenset({"helm"}),
    CVO: frozenset({"cluster-version-operator"}),
}

# What stops each re-applying `spec.replicas` at every sleep (docs/gitops.md says it in full).
SETTINGS: Mapping[str, str] = {
    OLM: "OLM re-applies the CSV's replicas only on a reinstall (a CSV upgrade or edit, a "
    "Subscription config change, a certificate rotation); one that reinstalls at every sleep is "
    'broken in OLM: pause the workload (zeroscaler.io/paused: "true") while it is mended',
    OLM_V1: "OLM v1 re-applies its bundle on drift and has no setting to ignore a field: opt the "
    'workload out (zeroscaler.io/enabled: "false")',
    ARGO_CD: "give the Application ignoreDifferences for /spec/replicas of Deployments and "
    "StatefulSets (jsonPointers, or managedFieldsManagers [zeroscaler]) and the sync option "
    "RespectIgnoreDifferences=true",
    FLUX: "give the Kustomization spec.ignore (paths [/spec/replicas], target Deployment|"
    "StatefulSet), or the HelmRelease spec.driftDetection.ignore, for /spec/replicas",
    HELM: "Helm writes replicas only at an upgrade or a rollback: render no replicas for a "
    "workload zeroscaler manages, or run upgrades less often than its idle timeout",
    CVO: "the cluster-version operator reverts any scale-down of its manifests; never put to sleep",
}
GENERIC_SETTING = "let it leave spec.replicas to field manager zeroscaler"


@dataclass(frozen=True, slots=True)
class Manager:
    """One manager above a workload and what it manages the workload for."""

    name: str  # OLM, OLM v1, Argo CD, Flux, Helm, cluster-version operator
    owner: str = ""  # e.g. "ClusterServiceVersion my-op.v1.2.0", "Helm release ops/my-op"

    def __str__(self) -> str:
        return f"{self.name} ({self.owner})" if self.owner else self.name

    @property
    def setting(self) -> str:
        return SETTINGS.get(self.name, GENERIC_SETTING)


def detect(
    labels: Mapping[str, str], annotations: Mapping[str, str], field_managers: Iterable[str]
) -> tuple[Manager, ...]:
    """The managers a workload shows, in a fixed order; each named once."""
    found: dict[str, Manager] = {}
    if labels.get(OLM_OWNER_KIND) == "ClusterServiceVersion":
        found[OLM] = Manager(OLM, _owned("ClusterServiceVersion", labels.get(OLM_OWNER)))
    if OLM1_OWNER_KIND in labels:
        found[OLM_V1] = Manager(OLM_V1, _owned(labels[OLM1_OWNER_KIND], labels.get(OLM1_OWNER)))
    if ARGOCD_TRACKING in annotations:
        app = annotations[ARGOCD_TRACKING].partition(":")[0]
        found[ARGO_CD] = Manager(ARGO_CD, _owned("Application", app))
    for key, ns_key, kind in (
        (FLUX_KUSTOMIZATION, FLUX_KUSTOMIZATION_NS, "Kustomization"),
        (FLUX_HELMRELEASE, FLUX_HELMRELEASE_NS, "HelmRelease"),
    ):
        if key in labels and FLUX not in found:
            found[FLUX] = Manager(FLUX, _owned(kind, _qualified(labels.get(ns_key), labels[key])))
    if labels.get(MANAGED_BY, "").lower() == "helm" or HELM_RELEASE in annotations:
        release = _qualified(annotations.get(HELM_RELEASE_NS), annotations.get(HELM_RELEASE, ""))
        found[HELM] = Manager(HELM, _owned("release", release))
    if any(k.startswith(CVO_PREFIX) for k in annotations):
        found[CVO] = Manager(CVO)
    managers = set(field_managers)
    for name, names in FIELD_MANAGERS.items():
        if name not in found and managers & names:
            found[name] = Manager(name)
    order = list(FIELD_MANAGERS)
    return tuple(sorted(found.values(), key=lambda m: order.index(m.name)))


def by_field_manager(field_manager: str, managers: Sequence[Manager]) -> Manager | None:
    """The manager a field manager name belongs to: one detected on the workload first, else any
    known one by that name."""
    for m in managers:
        if field_manager in FIELD_MANAGERS.get(m.name, ()):
            return m
    for name, names in FIELD_MANAGERS.items():
        if field_manager in names:
            return Manager(name)
    return None


def never_sleeps(managers: Sequence[Manager]) -> Manager | None:
    """The manager under which a workload is never put to sleep: it reverts a sleep at once."""
    return next((m for m in managers if m.name == CVO), None)


def field_managers_of(managed_fields: object) -> frozenset[str]:
    """Every field manager named in a managedFields list."""
    if not isinstance(managed_fields, Sequence):
        return frozenset()
    return frozenset(
        str(e.get("manager"))
        for e in managed_fields
        if isinstance(e, Mapping) and isinstance(e.get("manager"), str)
    )


def _owned(kind: str, name: str | None) -> str:
    return f"{kind} {name}" if name else ""


def _qualified(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace and name else name


def is_applied(managed_fields: object, ours: str) -> bool:
    """Whether someone other than `ours` writes the workload by server-side apply (Helm 4, Flux,
    kubectl apply --server-side, Argo CD's ServerSideApply): such an applier's next apply is
    refused with a conflict on any field another manager owns with another value."""
    if not isinstance(managed_fields, Sequence):
        return False
    return any(
        isinstance(e, Mapping) and e.get("operation") == "Apply" and e.get("manager") != ours
        for e in managed_fields
    )


def without_replicas(managed_fields: object, ours: str) -> list[Mapping[str, object]] | None:
    """The managedFields with `ours` owning `spec.replicas` no more (its entries otherwise as
    they are; one left owning nothing is dropped), or None when it owns no replicas."""
    if not isinstance(managed_fields, Sequence):
        return None
    changed = False
    kept: list[Mapping[str, object]] = []
    for entry in managed_fields:
        if not isinstance(entry, Mapping):
            return None
        fields = entry.get("fieldsV1")
        spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
        if (
            entry.get("manager") != ours
            or not isinstance(spec, Mapping)
            or "f:replicas" not in spec
        ):
            kept.append(entry)
            continue
        changed = True
        assert isinstance(fields, Mapping)
        assert isinstance(spec, Mapping)
        rest_spec = {k: v for k, v in spec.items() if k != "f:replicas"}
        rest = {k: v for k, v in fields.items() if k != "f:spec"}
        if rest_spec:
            rest["f:spec"] = rest_spec
        if rest:
            kept.append({**entry, "fieldsV1": rest})
    return kept if changed else None
