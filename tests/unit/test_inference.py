"""RBAC inference: bindings, roles, aggregation, wildcards, classification, and real operators."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.discovery import OPERATOR_EXPECTED, builtin_resources, crd_resource, operators
from zeroscaler.core.admission import service_account_of
from zeroscaler.core.inference import Inferred, RBACSnapshot, infer_kinds, is_builtin_group
from zeroscaler.core.kinds import APIResource, Discovery
from zeroscaler.core.policy import DEFAULT_IGNORE

NS = "ops"
SA = "op"
WIDGETS = crd_resource("example.com", "Widget", "widgets")
GADGETS = crd_resource("example.com", "Gadget", "gadgets")
DISCOVERY = Discovery([*builtin_resources(), WIDGETS, GADGETS])
CUSTOM = frozenset({"widgets.example.com", "gadgets.example.com"})


def rule(
    groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None
) -> dict[str, Any]:
    r: dict[str, Any] = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        r["resourceNames"] = names
    return r


def role(
    name: str, rules: list[dict[str, Any]], namespace: str | None = None, **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    if "labels" in extra:
        meta["labels"] = extra.pop("labels")
    return {
        "kind": "Role" if namespace else "ClusterRole",
        "metadata": meta,
        "rules": rules,
        **extra,
    }


def sa(name: str = SA, namespace: str | None = NS) -> dict[str, Any]:
    s = {"kind": "ServiceAccount", "name": name}
    if namespace is not None:
        s["namespace"] = namespace
    return s


def binding(
    role_kind: str, role_name: str, subjects: list[dict[str, Any]], namespace: str | None = None
) -> dict[str, Any]:
    return {
        "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
        "metadata": {"name": f"b-{role_name}", **({"namespace": namespace} if namespace else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": subjects,
    }


def infer(
    objects: list[dict[str, Any]],
    *,
    max_kinds: int = 50,
    ignore: tuple[str, ...] = DEFAULT_IGNORE,
    custom: frozenset[str] | None = CUSTOM,
) -> Inferred:
    return infer_kinds(
        RBACSnapshot.from_objects(objects),
        NS,
        SA,
        DISCOVERY,
        ignore=ignore,
        max_kinds=max_kinds,
        custom_resources=custom,
    )


WATCH = ["get", "list", "watch"]
ALL = ["get", "list", "watch", "create", "update", "delete"]
CM_WIDGETS = [rule([""], ["configmaps"], WATCH), rule(["example.com"], ["widgets"], ALL)]

CASES: list[tuple[str, list[dict[str, Any]], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = [
    (
        "ClusterRole through ClusterRoleBinding: all namespaces",
        [role("r", CM_WIDGETS), binding("ClusterRole", "r", [sa()])],
        ("ConfigMap", "Widget.example.com"),
        (),
        ("*",),
    ),
    (
        "Role through RoleBinding: its namespace",
        [role("r", CM_WIDGETS, NS), binding("Role", "r", [sa()], NS)],
        ("ConfigMap", "Widget.example.com"),
        (),
        (NS,),
    ),
    (
        "ClusterRole through RoleBindings: their namespaces",
        [
            role("r", CM_WIDGETS),
            binding("ClusterRole", "r", [sa()], "b"),
            binding("ClusterRole", "r", [sa()], "a"),
        ],
        ("ConfigMap", "Widget.example.com"),
        (),
        ("a", "b"),
    ),
    (
        "RoleBinding subject without namespace means the binding's namespace",
        [role("r", CM_WIDGETS, NS), binding("Role", "r", [sa(namespace=None)], NS)],
        ("ConfigMap", "Widget.example.com"),
        (),
        (NS,),
    ),
    (
        "another ServiceAccount's binding gives nothing",
        [
            role("r", CM_WIDGETS),
            binding("ClusterRole", "r", [sa("other")]),
            binding("ClusterRole", "r", [sa(SA, "elsewhere")]),
        ],
        (),
        (),
        (),
    ),
    *[
        (
            f"group subject {group}",
            [
                role("r", CM_WIDGETS),
                binding("ClusterRole", "r", [{"kind": "Group", "name": group}]),
            ],
            ("ConfigMap", "Widget.example.com"),
            (),
            ("*",),
        )
        for group in (
            "system:serviceaccounts",
            f"system:serviceaccounts:{NS}",
            "system:authenticated",
        )
    ],
    (
        "group of another namespace gives nothing",
        [
            role("r", CM_WIDGETS),
            binding("ClusterRole", "r", [{"kind": "Group", "name": "system:serviceaccounts:x"}]),
        ],
        (),
        (),
        (),
    ),
    (
        "the ServiceAccount's user name",
        [
            role("r", CM_WIDGETS),
            binding(
                "ClusterRole", "r", [{"kind": "User", "name": f"system:serviceaccount:{NS}:{SA}"}]
            ),
        ],
        ("ConfigMap", "Widget.example.com"),
        (),
        ("*",),
    ),
    (
        "aggregated ClusterRole collects labelled roles, transitively",
        [
            role(
                "agg",
                [],
                aggregationRule={"clusterRoleSelectors": [{"matchLabels": {"agg": "top"}}]},
            ),
            role(
                "mid",
                [rule([""], ["secrets"], WATCH)],
                labels={"agg": "top"},
                aggregationRule={"clusterRoleSelectors": [{"matchLabels": {"agg": "low"}}]},
            ),
            role("low", [rule(["example.com"], ["gadgets"], WATCH)], labels={"agg": "low"}),
            role("unrelated", [rule([""], ["pods"], WATCH)], labels={"agg": "other"}),
            binding("ClusterRole", "agg", [sa()]),
        ],
        ("Gadget.example.com", "Secret"),
        (),
        ("*",),
    ),
    (
        "built-in watch+create owned, watch-only watched, create-only nothing, CRD watched",
        [
            role(
                "r",
                [
                    rule(["apps"], ["deployments"], ALL),
                    rule([""], ["services"], ["create", "get"]),
                    rule([""], ["pods"], ["watch"]),
                    rule([""], ["pods"], ["create"]),
                    rule(["example.com"], ["widgets"], ["*"]),
                    rule(["batch"], ["jobs"], ["*"]),
                ],
            ),
            binding("ClusterRole", "r", [sa()]),
        ],
        ("Widget.example.com",),
        ("Deployment.apps", "Job.batch", "Pod"),
        ("*",),
    ),
    (
        "subresources dropped",
        [
            role(
                "r",
                [
                    rule(["apps"], ["deployments/scale", "deployments/status"], ["*"]),
                    rule(["example.com"], ["widgets/status"], ["*"]),
                ],
            ),
            binding("ClusterRole", "r", [sa()]),
        ],
        (),
        (),
        (),
    ),
    (
        "ignore list dropped (events, leases)",
        [
            role(
                "r", [rule(["", "events.k8s.io", "coordination.k8s.io"], ["events", "leases"], ALL)]
            ),
            binding("ClusterRole", "r", [sa()]),
        ],
        (),
        (),
        (),
    ),
    (
        "wildcard resources in a group expand through discovery",
        [role("r", [rule(["example.com"], ["*"], WATCH)]), binding("ClusterRole", "r", [sa()])],
        ("Gadget.example.com", "Widget.example.com"),
        (),
        ("*",),
    ),
    (
        "wildcard group with a named resource",
        [
            role("r", [rule(["*"], ["widgets", "ingresses"], WATCH)]),
            binding("ClusterRole", "r", [sa()]),
        ],
        ("Ingress.networking.k8s.io", "Widget.example.com"),
        (),
        ("*",),
    ),
    (
        "cluster-scoped kinds from a ClusterRoleBinding do not widen a RoleBinding's scope",
        [
            role("ns", CM_WIDGETS),
            binding("ClusterRole", "ns", [sa()], NS),
            role("global", [rule(["rbac.authorization.k8s.io"], ["clusterrolebindings"], ALL)]),
            binding("ClusterRole", "global", [sa()]),
        ],
        ("ConfigMap", "Widget.example.com"),
        ("ClusterRoleBinding.rbac.authorization.k8s.io",),
        (NS,),
    ),
    (
        "verbs other than watch and create say nothing",
        [
            role("r", [rule([""], ["configmaps"], ["get", "list", "update", "patch"])]),
            binding("ClusterRole", "r", [sa()]),
        ],
        (),
        (),
        (),
    ),
    (
        "non-resource URLs are skipped",
        [
            role("r", [{"nonResourceURLs": ["/metrics"], "verbs": ["*"]}]),
            binding("ClusterRole", "r", [sa()]),
        ],
        (),
        (),
        (),
    ),
]


@pytest.mark.parametrize(
    ("objects", "watched", "owned", "namespaces"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_watched_and_owned_kinds_and_namespaces_are_inferred_from_rbac(
    objects: list[dict[str, Any]],
    watched: tuple[str, ...],
    owned: tuple[str, ...],
    namespaces: tuple[str, ...],
) -> None:
    got = infer(objects)
    assert (got.watched, got.owned, got.namespaces) == (watched, owned, namespaces)


def test_everything_infers_nothing_with_warning() -> None:
    got = infer(
        [role("r", [*CM_WIDGETS, rule(["*"], ["*"], ["*"])]), binding("ClusterRole", "r", [sa()])]
    )
    assert not got.has_kinds
    assert got.namespaces == ()
    assert len(got.warnings) == 1
    assert "may watch every resource (ClusterRoleBinding b-r)" in got.warnings[0]
    assert "zeroscaler.io/watched-kinds" in got.warnings[0]


def test_wildcard_over_max_kinds_is_not_used() -> None:
    got = infer(
        [
            role(
                "r", [rule(["", "apps"], ["*"], WATCH), rule(["example.com"], ["widgets"], WATCH)]
            ),
            binding("ClusterRole", "r", [sa()]),
        ],
        max_kinds=5,
    )
    assert got.watched == ("Widget.example.com",)
    assert any("over inference.maxKinds 5); that grant is not used" in w for w in got.warnings)


def test_create_only_wildcard_everything_is_bounded_not_fatal() -> None:
    got = infer(
        [
            role("r", [rule(["*"], ["*"], ["create"]), rule([""], ["configmaps"], WATCH)]),
            binding("ClusterRole", "r", [sa()]),
        ],
        max_kinds=10,
    )
    assert got.watched == ("ConfigMap",)
    assert any("not used" in w for w in got.warnings)


def test_resource_names_are_noted() -> None:
    got = infer(
        [
            role("r", [rule([""], ["configmaps"], WATCH, names=["lock", "config"])]),
            binding("ClusterRole", "r", [sa()]),
        ]
    )
    assert got.watched == ("ConfigMap",)
    assert got.resource_names == {"ConfigMap": ("config", "lock")}
    assert any("ConfigMap: RBAC allows watching only config, lock" in w for w in got.warnings)


def test_an_unlimited_grant_lifts_a_names_limit() -> None:
    got = infer(
        [
            role(
                "r",
                [
                    rule([""], ["configmaps"], WATCH, names=["lock"]),
                    rule([""], ["configmaps"], WATCH),
                ],
            ),
            binding("ClusterRole", "r", [sa()]),
        ]
    )
    assert got.resource_names == {}


def test_unserved_resources_and_missing_roles_are_reported() -> None:
    got = infer(
        [
            role("r", [rule(["istio.io"], ["gateways"], WATCH)]),
            binding("ClusterRole", "r", [sa()]),
            binding("ClusterRole", "gone", [sa()]),
            binding("Role", "gone-too", [sa()], NS),
        ]
    )
    assert not got.has_kinds
    assert (
        "RoleBinding ops/b-gone-too refers to Role gone-too, which does not exist" in got.warnings
    )
    assert (
        "ClusterRoleBinding b-gone refers to ClusterRole gone, which does not exist" in got.warnings
    )
    assert any("does not serve, left out: gateways.istio.io" in w for w in got.warnings)


def test_builtin_group_fallback_when_crds_unknown() -> None:
    got = infer(
        [
            role(
                "r", [rule(["example.com"], ["widgets"], ALL), rule(["apps"], ["deployments"], ALL)]
            ),
            binding("ClusterRole", "r", [sa()]),
        ],
        custom=None,
    )
    assert (got.watched, got.owned) == (("Widget.example.com",), ("Deployment.apps",))
    assert [is_builtin_group(g) for g in ("", "apps", "networking.k8s.io", "example.com")] == [
        True,
        True,
        True,
        False,
    ]


def test_malformed_objects_are_tolerated() -> None:
    snapshot = RBACSnapshot.from_objects(
        [
            {"kind": "ClusterRole", "metadata": None, "rules": "nope"},
            {
                "kind": "ClusterRoleBinding",
                "roleRef": {"kind": "Role", "name": "x"},
            },  # invalid: CRB to Role
            {"kind": "RoleBinding", "metadata": {"namespace": NS}, "roleRef": "x"},
            {
                "kind": "ClusterRole",
                "metadata": {"name": "r"},
                "rules": [None, 3, {"verbs": "watch"}],
            },
        ]
    )
    assert snapshot.bindings == ()
    assert infer_kinds(snapshot, NS, SA, DISCOVERY) == Inferred()


OPERATOR_WARNINGS = {
    "argo-rollouts": "does not serve, left out: ambassadormappings.getambassador.io",
    "banzaicloud-istio-operator": "default may watch every resource",
    "controller-zero-scaler": "default may watch every resource",
    "redis-operator": "left out: configmaps.coordination.k8s.io, leases, rediscluster.",
    "strimzi-kafka-operator": "does not serve, left out: buildconfigs.build.openshift.io",
}


def test_every_operator_has_an_expectation() -> None:
    assert sorted(op.name for op in operators()) == sorted(OPERATOR_EXPECTED)


@pytest.mark.parametrize("op", list(operators()), ids=lambda op: op.name)
def test_the_rbac_real_operators_ship_infers_the_kinds_they_use(op: Any) -> None:
    workload = op.workload
    account = service_account_of(workload)
    assert account is not None
    got = infer_kinds(
        RBACSnapshot.from_objects(op.objects),
        workload["metadata"]["namespace"],
        account,
        op.discovery(),
        ignore=DEFAULT_IGNORE,
        max_kinds=50,
        custom_resources=op.custom_resources,
    )
    assert (got.watched, got.owned, got.namespaces) == OPERATOR_EXPECTED[op.name]
    expected_warning = OPERATOR_WARNINGS.get(op.name)
    if expected_warning is None:
        assert got.warnings == ()
    else:
        assert any(expected_warning in w for w in got.warnings), got.warnings


@pytest.mark.parametrize(
    ("labels", "watched"),
    [
        ({"kubernetes.io/bootstrapping": "rbac-defaults"}, ("ConfigMap",)),
        ({}, ("ClusterTrustBundle.certificates.k8s.io", "ConfigMap")),
    ],
)
def test_kubernetes_own_bindings_say_nothing_about_an_operator(
    labels: dict[str, str], watched: tuple[str, ...]
) -> None:
    # Kubernetes 1.37 binds this to every ServiceAccount; the same grant made by a person counts.
    trust = APIResource(
        "certificates.k8s.io", "v1", "clustertrustbundles", "ClusterTrustBundle", False,
        frozenset({"get", "list", "watch"}),
    )  # fmt: skip
    everyone = binding(
        "ClusterRole", "system:cluster-trust-bundle-discovery",
        [{"kind": "Group", "name": "system:serviceaccounts"}],
    )  # fmt: skip
    everyone["metadata"]["labels"] = labels
    objects = [
        role(
            "system:cluster-trust-bundle-discovery",
            [rule(["certificates.k8s.io"], ["clustertrustbundles"], ["get", "list", "watch"])],
        ),
        everyone,
        role("r", [rule([""], ["configmaps"], WATCH)]),
        binding("ClusterRole", "r", [sa()]),
    ]
    got = infer_kinds(
        RBACSnapshot.from_objects(objects),
        NS,
        SA,
        Discovery([*builtin_resources(), trust]),
        ignore=DEFAULT_IGNORE,
        custom_resources=CUSTOM,
    )
    assert got.watched == watched
