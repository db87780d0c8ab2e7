"""The real operators' fixture files: each names its source, and builds the objects it describes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from testkit.operators import FIXTURES, FixtureError, load_operator, load_operators

SMALL = """\
source: {repository: example/op, commit: 0123456789abcdef0123456789abcdef01234567, files: [a.yaml]}
namespace: ops
workload:
  kind: StatefulSet
  name: op
  serviceAccountName: op
  labels: {app: op}
  containers: {manager: 'example/op:1'}
serviceAccounts: [op]
roles:
  leader: {rules: [{verbs: [get], groups: [coordination.k8s.io], resources: [leases], names: [op]}]}
clusterRoles:
  op-manager:
    aggregateFrom: [{example.com/aggregate-to-op: 'true'}]
    rules: []
  op-rules:
    labels: {example.com/aggregate-to-op: 'true'}
    rules:
      - {verbs: [watch], groups: ['', apps], resources: [configmaps, deployments]}
      - {verbs: [get], urls: [/metrics]}
roleBindings:
  leader: {role: Role leader, subjects: [ServiceAccount ops/op]}
clusterRoleBindings:
  op: {role: ClusterRole op-manager, subjects: [ServiceAccount ops/op, Group system:masters]}
crds:
  - {group: example.com, kind: Widget, plural: widgets, scope: Cluster}
  - {group: example.com, kind: Gadget, plural: gadgets, scope: Namespaced, version: v1alpha1}
"""
RBAC = "rbac.authorization.k8s.io"


def test_every_fixture_names_its_source_repository_commit_and_files() -> None:
    ops = load_operators()
    assert len(ops) == len(list(FIXTURES.glob("*.yaml"))) > 0
    for op in ops:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", op.source["repository"]), op.name
        assert re.fullmatch(r"[0-9a-f]{40}", op.source["commit"]), op.name
        assert op.source["files"], op.name


def test_a_fixture_builds_the_kubernetes_objects_it_describes(tmp_path: Path) -> None:
    (tmp_path / "op.yaml").write_text(SMALL)
    op = load_operator(tmp_path / "op.yaml")
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in op.objects}
    assert [o["kind"] for o in op.objects] == [
        "ServiceAccount",
        "Role",
        "ClusterRole",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "StatefulSet",
    ]
    assert by_kind["Role", "leader"]["metadata"] == {"name": "leader", "namespace": "ops"}
    assert by_kind["Role", "leader"]["rules"] == [
        {
            "verbs": ["get"],
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["op"],
        }
    ]
    manager = by_kind["ClusterRole", "op-manager"]
    assert manager["aggregationRule"] == {
        "clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-op": "true"}}]
    }
    assert manager["rules"] == []
    rules = by_kind["ClusterRole", "op-rules"]
    assert rules["metadata"]["labels"] == {"example.com/aggregate-to-op": "true"}
    assert rules["rules"][0]["apiGroups"] == ["", "apps"]
    assert rules["rules"][1] == {"verbs": ["get"], "nonResourceURLs": ["/metrics"]}
    binding = by_kind["ClusterRoleBinding", "op"]
    assert "namespace" not in binding["metadata"]
    assert binding["roleRef"] == {"apiGroup": RBAC, "kind": "ClusterRole", "name": "op-manager"}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "op", "namespace": "ops"},
        {"kind": "Group", "name": "system:masters", "apiGroup": RBAC},
    ]
    assert by_kind["RoleBinding", "leader"]["metadata"]["namespace"] == "ops"
    sts = by_kind["StatefulSet", "op"]
    assert sts["metadata"] == {"name": "op", "namespace": "ops"}
    assert sts["spec"]["selector"] == {"matchLabels": {"app": "op"}}
    assert sts["spec"]["template"]["spec"] == {
        "serviceAccountName": "op",
        "containers": [{"name": "manager", "image": "example/op:1"}],
    }
    assert [(c.group, c.kind, c.plural, c.namespaced, c.version) for c in op.crds] == [
        ("example.com", "Widget", "widgets", False, "v1"),
        ("example.com", "Gadget", "gadgets", True, "v1alpha1"),
    ]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "names: [op]",
            "resourceNames: [op]",
            "roles.leader: rules[0]: unknown key 'resourceNames'",
        ),
        ("aggregateFrom:", "aggregate:", "clusterRoles.op-manager: unknown key 'aggregate'"),
        ("role: Role leader", "role: Rol leader", "roleBindings.leader: role 'Rol leader' is not"),
        ("ServiceAccount ops/op]", "SA ops/op]", "roleBindings.leader: subject 'SA ops/op' is not"),
        (", files: [a.yaml]}", "}", "source needs repository, commit and files"),
    ],
)
def test_a_misspelt_fixture_is_refused_with_the_place_named(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in SMALL
    (tmp_path / "op.yaml").write_text(SMALL.replace(old, new, 1))
    with pytest.raises(FixtureError, match=re.escape(f"op.yaml: {message}")):
        load_operator(tmp_path / "op.yaml")
