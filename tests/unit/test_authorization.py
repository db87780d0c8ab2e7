"""RBAC authorization on a snapshot: subjects, binding scope, wildcards, names, aggregation."""

from __future__ import annotations

from typing import Any

import pytest

from zeroscaler.core.authorization import Request, rbac_allows
from zeroscaler.core.inference import RBACSnapshot

NS = "ops"
SA = "op"
WATCH_CM = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["watch"]}


def role(name: str, rules: list[dict[str, Any]], namespace: str = "", **meta: Any) -> Any:
    kind = "Role" if namespace else "ClusterRole"
    extra = {"aggregationRule": meta.pop("aggregation")} if "aggregation" in meta else {}
    metadata = {"name": name, **({"namespace": namespace} if namespace else {}), **meta}
    return {"kind": kind, "metadata": metadata, "rules": rules, **extra}


def binding(role_kind: str, role_name: str, subject: dict[str, str], namespace: str = "") -> Any:
    return {
        "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
        "metadata": {"name": f"b-{role_name}", **({"namespace": namespace} if namespace else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": [subject],
    }


SA_SUBJECT = {"kind": "ServiceAccount", "name": SA, "namespace": NS}


def allows(objects: list[Any], request: Request, namespace: str = NS, sa: str = SA) -> bool:
    return rbac_allows(RBACSnapshot.from_objects(objects), namespace, sa, request)


CM_IN = Request("watch", "", "configmaps", "apps")
CM_EVERYWHERE = Request("watch", "", "configmaps")


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        (SA_SUBJECT, True),
        ({"kind": "ServiceAccount", "name": SA}, True),  # a RoleBinding's own namespace
        ({"kind": "ServiceAccount", "name": SA, "namespace": "other"}, False),
        ({"kind": "ServiceAccount", "name": "someone-else", "namespace": NS}, False),
        ({"kind": "User", "name": f"system:serviceaccount:{NS}:{SA}"}, True),
        ({"kind": "User", "name": SA}, False),
        ({"kind": "Group", "name": "system:serviceaccounts"}, True),
        ({"kind": "Group", "name": f"system:serviceaccounts:{NS}"}, True),
        ({"kind": "Group", "name": "system:serviceaccounts:other"}, False),
        ({"kind": "Group", "name": "system:authenticated"}, True),
        ({"kind": "Group", "name": "system:unauthenticated"}, False),
    ],
)
def test_subjects_that_name_the_account(subject: dict[str, str], expected: bool) -> None:
    objects = [role("r", [WATCH_CM], NS), binding("Role", "r", subject, NS)]
    assert allows(objects, Request("watch", "", "configmaps", NS)) is expected


def test_a_service_account_subject_without_namespace_means_the_bindings() -> None:
    subject = {"kind": "ServiceAccount", "name": SA}
    objects = [role("r", [WATCH_CM], "apps"), binding("Role", "r", subject, "apps")]
    assert not allows(objects, CM_IN)  # it names apps/op, not ops/op
    assert allows(objects, CM_IN, namespace="apps")


def test_a_role_binding_grants_only_in_its_own_namespace() -> None:
    objects = [role("r", [WATCH_CM]), binding("ClusterRole", "r", SA_SUBJECT, "apps")]
    assert allows(objects, CM_IN)
    assert not allows(objects, Request("watch", "", "configmaps", "other"))
    assert not allows(objects, CM_EVERYWHERE)  # every namespace: only ClusterRoleBindings count


def test_a_cluster_role_binding_grants_everywhere() -> None:
    objects = [role("r", [WATCH_CM]), binding("ClusterRole", "r", SA_SUBJECT)]
    assert allows(objects, CM_IN)
    assert allows(objects, CM_EVERYWHERE)


def test_a_role_binding_uses_the_role_of_its_namespace() -> None:
    objects = [role("r", [WATCH_CM], "other"), binding("Role", "r", SA_SUBJECT, "apps")]
    assert not allows(objects, CM_IN)


@pytest.mark.parametrize(
    "objects",
    [
        [binding("ClusterRole", "missing", SA_SUBJECT)],
        [binding("Role", "missing", SA_SUBJECT, "apps")],
        [role("r", [WATCH_CM]), binding("Role", "r", SA_SUBJECT, "apps")],  # Role, not ClusterRole
    ],
)
def test_a_missing_role_grants_nothing(objects: list[Any]) -> None:
    assert not allows(objects, CM_IN)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (WATCH_CM, True),
        ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}, True),
        ({"apiGroups": ["*"], "resources": ["configmaps"], "verbs": ["watch"]}, True),
        ({"apiGroups": [""], "resources": ["*"], "verbs": ["watch"]}, True),
        ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}, False),
        ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["Watch"]}, False),  # exact
        ({"apiGroups": ["apps"], "resources": ["configmaps"], "verbs": ["watch"]}, False),
        ({"apiGroups": [""], "resources": ["secrets"], "verbs": ["watch"]}, False),
        ({"apiGroups": [""], "resources": ["configmaps/status"], "verbs": ["watch"]}, False),
        ({"apiGroups": [""], "resources": ["*/status"], "verbs": ["watch"]}, False),
        ({"apiGroups": [], "resources": ["configmaps"], "verbs": ["watch"]}, False),
        ({"apiGroups": [""], "resources": [], "verbs": ["watch"]}, False),
    ],
)
def test_verbs_groups_and_resources_match_exactly_or_by_wildcard(
    rule: dict[str, Any], expected: bool
) -> None:
    objects = [role("r", [rule]), binding("ClusterRole", "r", SA_SUBJECT)]
    assert allows(objects, CM_IN) is expected


@pytest.mark.parametrize(
    ("resource", "rule_resources", "expected"),
    [
        ("deployments/scale", ["deployments/scale"], True),
        ("deployments/scale", ["*/scale"], True),
        ("deployments/scale", ["*"], True),
        ("deployments/scale", ["deployments"], False),
        ("deployments/scale", ["*/status"], False),
    ],
)
def test_a_subresource_is_granted_by_its_own_name_or_a_wildcard_not_by_its_parent(
    resource: str, rule_resources: list[str], expected: bool
) -> None:
    rule = {"apiGroups": ["apps"], "resources": rule_resources, "verbs": ["watch"]}
    objects = [role("r", [rule]), binding("ClusterRole", "r", SA_SUBJECT)]
    assert allows(objects, Request("watch", "apps", resource, "apps")) is expected


def test_resource_names_grant_only_those_objects() -> None:
    named = {**WATCH_CM, "resourceNames": ["lock"]}
    objects = [role("r", [named]), binding("ClusterRole", "r", SA_SUBJECT)]
    assert allows(objects, Request("watch", "", "configmaps", "apps", "lock"))
    assert not allows(objects, Request("watch", "", "configmaps", "apps", "other"))
    assert not allows(objects, CM_IN)  # a request for every object needs a rule for every object
    unnamed = [role("r", [WATCH_CM]), binding("ClusterRole", "r", SA_SUBJECT)]
    assert allows(unnamed, Request("watch", "", "configmaps", "apps", "lock"))


def test_aggregated_cluster_roles_grant_what_they_select() -> None:
    selector = {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}
    objects = [
        role("top", [], aggregation=selector),
        role("part", [WATCH_CM], labels={"agg": "yes"}),
        role("unselected", [{**WATCH_CM, "resources": ["secrets"]}], labels={"agg": "no"}),
        binding("ClusterRole", "top", SA_SUBJECT, "apps"),
    ]
    assert allows(objects, CM_IN)
    assert not allows(objects, Request("watch", "", "secrets", "apps"))


def test_rules_of_several_bindings_add_up() -> None:
    secrets = {**WATCH_CM, "resources": ["secrets"]}
    objects = [
        role("a", [WATCH_CM]),
        role("b", [secrets], "apps"),
        binding("ClusterRole", "a", SA_SUBJECT),
        binding("Role", "b", SA_SUBJECT, "apps"),
    ]
    assert allows(objects, Request("watch", "", "secrets", "apps"))
    assert allows(objects, CM_EVERYWHERE)
    assert not allows(objects, Request("watch", "", "secrets", "other"))


def test_answers_are_remembered_per_snapshot() -> None:
    rbac = RBACSnapshot.from_objects(
        [role("r", [WATCH_CM]), binding("ClusterRole", "r", SA_SUBJECT)]
    )
    assert rbac_allows(rbac, NS, SA, CM_IN)
    rbac.roles.clear()  # a snapshot never changes: what it answered once stands
    assert rbac_allows(rbac, NS, SA, CM_IN)
