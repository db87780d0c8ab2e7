"""Real operators' RBAC, workloads and CRDs, built from the facts in tests/fixtures/operators."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "operators"
RBAC = "rbac.authorization.k8s.io"
Obj = dict[str, Any]

_TOP = {"source", "namespace", "workload", "serviceAccounts", "roles", "clusterRoles"}
_TOP |= {"roleBindings", "clusterRoleBindings", "crds", "examples"}
_SOURCE = {"repository", "commit", "files", "crds"}
_WORKLOAD = {"kind", "name", "serviceAccountName", "serviceAccount", "serviceName", "labels"}
_WORKLOAD |= {"containers", "podAnnotations", "annotations", "replicas"}
_ROLE = {"labels", "aggregateFrom", "rules"}
_RULE = {"verbs": "verbs", "groups": "apiGroups", "resources": "resources"}
_RULE |= {"names": "resourceNames", "urls": "nonResourceURLs"}
_BINDING = {"role", "subjects"}
_CRD = {"group", "kind", "plural", "scope", "version"}
_ANNOTATE = {"namespace", "resource", "selector", "annotations", "overwrite"}


class FixtureError(ValueError):
    """A fixture file does not follow the format of tests/fixtures/operators/README.md."""


@dataclass(frozen=True)
class CRD:
    group: str
    kind: str
    plural: str
    namespaced: bool
    version: str = "v1"


@dataclass(frozen=True)
class OperatorFacts:
    name: str
    source: Mapping[str, Any]
    objects: list[Obj]  # ServiceAccounts, Roles, ClusterRoles, bindings, then the workload
    crds: list[CRD]
    examples: Mapping[str, Any]


def load_operators() -> list[OperatorFacts]:
    """Every operator fixture, in name order."""
    return [load_operator(p) for p in sorted(FIXTURES.glob("*.yaml"))]


def load_operator(path: Path) -> OperatorFacts:
    """One fixture file as the Kubernetes objects it describes; unknown keys are errors."""
    where = path.name
    doc = _fields(yaml.safe_load(path.read_text()), _TOP, where)
    source = _fields(doc.get("source"), _SOURCE, f"{where}: source")
    if not {"repository", "commit", "files"} <= source.keys():
        raise FixtureError(f"{where}: source needs repository, commit and files")
    ns = str(doc["namespace"])
    objects: list[Obj] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": n, "namespace": ns}}
        for n in doc.get("serviceAccounts") or []
    ]
    for key, kind in (("roles", "Role"), ("clusterRoles", "ClusterRole")):
        for name, spec in (doc.get(key) or {}).items():
            at = f"{where}: {key}.{name}"
            objects.append(_role(kind, name, ns, _fields(spec, _ROLE, at), at))
    for key, kind in (
        ("roleBindings", "RoleBinding"),
        ("clusterRoleBindings", "ClusterRoleBinding"),
    ):
        for name, spec in (doc.get(key) or {}).items():
            at = f"{where}: {key}.{name}"
            objects.append(_binding(kind, name, ns, _fields(spec, _BINDING, at), at))
    objects.append(workload(doc["workload"], ns, f"{where}: workload"))
    crds = []
    for i, c in enumerate(doc.get("crds") or []):
        c = _fields(c, _CRD, f"{where}: crds[{i}]")
        namespaced = c["scope"] == "Namespaced"
        crds.append(CRD(c["group"], c["kind"], c["plural"], namespaced, c.get("version", "v1")))
    return OperatorFacts(path.stem, source, objects, crds, doc.get("examples") or {})


def workload(spec: object, namespace: str, where: str = "workload") -> Obj:
    """A Deployment or StatefulSet from a fixture's workload entry."""
    w = _fields(spec, _WORKLOAD, where)
    pod: Obj = {k: w[k] for k in ("serviceAccountName", "serviceAccount") if k in w}
    pod["containers"] = [{"name": n, "image": i} for n, i in w["containers"].items()]
    template: Obj = {"metadata": {"labels": dict(w["labels"])}, "spec": pod}
    if "podAnnotations" in w:
        template["metadata"]["annotations"] = dict(w["podAnnotations"])
    body: Obj = {"selector": {"matchLabels": dict(w["labels"])}, "template": template}
    body.update({k: w[k] for k in ("replicas", "serviceName") if k in w})
    meta: Obj = {"name": w["name"], "namespace": namespace}
    if "annotations" in w:
        meta["annotations"] = dict(w["annotations"])
    return {"apiVersion": "apps/v1", "kind": w["kind"], "metadata": meta, "spec": body}


def ibm_annotated_deployment(namespace: str) -> Obj:
    """IBM controller-zero-scaler's annotated example Deployment, in `namespace`."""
    examples = load_operator(FIXTURES / "controller-zero-scaler.yaml").examples
    return workload(examples["annotatedDeployment"], namespace, "annotatedDeployment")


def ibm_readme_annotate_args(namespace: str) -> list[str]:
    """The `kubectl annotate` arguments of IBM's README, with `namespace` for its own."""
    examples = load_operator(FIXTURES / "controller-zero-scaler.yaml").examples
    cmd = _fields(examples["readmeAnnotate"], _ANNOTATE, "readmeAnnotate")
    args = ["annotate", "-n", namespace, cmd["resource"], "-l", cmd["selector"]]
    args += [f"{k}={v}" for k, v in cmd["annotations"].items()]
    return [*args, "--overwrite"] if cmd.get("overwrite") else args


def _role(kind: str, name: str, namespace: str, spec: Mapping[str, Any], where: str) -> Obj:
    meta: Obj = {"name": name}
    if kind == "Role":
        meta["namespace"] = namespace
    if "labels" in spec:
        meta["labels"] = dict(spec["labels"])
    obj: Obj = {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": meta}
    if "aggregateFrom" in spec:
        selectors = [{"matchLabels": dict(s)} for s in spec["aggregateFrom"]]
        obj["aggregationRule"] = {"clusterRoleSelectors": selectors}
    rules = []
    for i, rule in enumerate(spec.get("rules") or []):
        r = _fields(rule, set(_RULE), f"{where}: rules[{i}]")
        rules.append({_RULE[k]: list(v) for k, v in r.items()})
    obj["rules"] = rules
    return obj


def _binding(kind: str, name: str, namespace: str, spec: Mapping[str, Any], where: str) -> Obj:
    role_kind, _, role_name = str(spec["role"]).partition(" ")
    if role_kind not in ("Role", "ClusterRole") or not role_name:
        raise FixtureError(
            f"{where}: role {spec['role']!r} is not `Role name` or `ClusterRole name`"
        )
    meta: Obj = {"name": name}
    if kind == "RoleBinding":
        meta["namespace"] = namespace
    subjects = []
    for text in spec["subjects"]:
        subject_kind, _, rest = str(text).partition(" ")
        if subject_kind == "ServiceAccount":
            sa_ns, _, sa_name = rest.partition("/")
            subjects.append({"kind": subject_kind, "name": sa_name, "namespace": sa_ns})
        elif subject_kind in ("User", "Group"):
            subjects.append({"kind": subject_kind, "name": rest, "apiGroup": RBAC})
        else:
            raise FixtureError(f"{where}: subject {text!r} is not `ServiceAccount ns/name`")
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name},
        "subjects": subjects,
    }


def _fields(value: object, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FixtureError(f"{where}: expected a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise FixtureError(
            f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})"
        )
    return value
