"""Never sleep what cannot wake: which of a backend's own `Fail` webhooks would refuse a request
its wake needs, in the shapes real operators register them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zeroscaler.core.coverage import Hook
from zeroscaler.core.wake_path import Backend, Surroundings, blockers

BACKEND = Backend("Deployment", "ops", "op", {"app": "op"}, ("op-webhook",))
AROUND = Surroundings(
    "zeroscaler",
    {
        name: {"kubernetes.io/metadata.name": name}
        for name in ("ops", "zeroscaler", "kube-system", "kube-node-lease", "apps")
    },
)
NOT_KUBE_SYSTEM = {
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
    ]
}
ONLY_APPS = {"matchLabels": {"kubernetes.io/metadata.name": "apps"}}


def hook(resources: list[str], groups: list[str], *, fails: bool = True, **fields: Any) -> Hook:
    rule = {"operations": ["CREATE", "UPDATE"], "apiGroups": groups, "apiVersions": ["*"],
            "resources": resources}  # fmt: skip
    match = json.dumps({"rules": [rule], **fields}, sort_keys=True)
    return Hook(
        "op-hooks", False, f"{resources[0]}.example.com", ("ops", "op-webhook"), match, fails
    )


@pytest.mark.parametrize(
    ("found", "request_"),
    [
        # A Pod webhook for every namespace but kube-system, as kubebuilder operators register it.
        (hook(["pods"], [""], namespaceSelector=NOT_KUBE_SYSTEM), "the pods of ops/op"),
        # Even when its object selector picks other pods: zeroscaler's own pods' labels are not
        # known here, and they must come back if zeroscaler restarts while it sleeps.
        (hook(["pods"], [""], objectSelector={"matchLabels": {"app": "other"}}),
         "pods in zeroscaler's namespace (zeroscaler)"),
        # zeroscaler's own wake write.
        (hook(["deployments/scale"], ["apps"]), "the scale write that wakes ops/op"),
        (hook(["*/scale"], ["*"]), "the scale write that wakes ops/op"),
        (hook(["*/*"], ["*"]), "the scale write that wakes ops/op"),
        (hook(["deployments"], ["apps"]), None),  # the resource alone: not its scale
        (hook(["replicasets"], ["apps"], namespaceSelector=NOT_KUBE_SYSTEM),
         "the ReplicaSet of ops/op"),
        (hook(["pods/binding"], [""]), "the scheduling of the pods of ops/op"),
        (hook(["endpointslices"], ["discovery.k8s.io"],
              objectSelector={"matchLabels": {"kubernetes.io/service-name": "op-webhook"}}),
         "the endpoints of Service ops/op-webhook"),
        # What keeps the cluster going.
        (hook(["leases"], ["coordination.k8s.io"], namespaceSelector=ONLY_APPS), None),
        (hook(["leases"], ["coordination.k8s.io"]),
         "Leases in zeroscaler's namespace (zeroscaler)"),
        (hook(["nodes"], [""]), "Nodes"),
        (hook(["clusterroles"], ["rbac.authorization.k8s.io"]), "ClusterRoles"),
        (hook(["namespaces"], [""], namespaceSelector=ONLY_APPS), "Namespaces"),
        # Its own kinds only, in its own namespaces: nothing a wake needs.
        (hook(["widgets"], ["example.com"]), None),
        (hook(["pods"], [""], namespaceSelector=ONLY_APPS), None),
        # failurePolicy Ignore refuses nothing (its own rule keeps it awake: fail-open).
        (hook(["pods"], [""], fails=False), None),
    ],
)  # fmt: skip
def test_a_fail_webhook_that_covers_a_request_the_wake_needs_blocks_the_sleep(
    found: Hook, request_: str | None
) -> None:
    blocked = blockers([found], BACKEND, AROUND)
    assert [b.request for b in blocked] == ([request_] if request_ else [])


def test_a_blocker_names_the_webhook_its_rule_and_the_request() -> None:
    [blocked] = blockers([hook(["pods"], [""], namespaceSelector=NOT_KUBE_SYSTEM)], BACKEND, AROUND)
    assert str(blocked) == (
        "ValidatingWebhookConfiguration op-hooks, webhook pods.example.com: its rule "
        'CREATE,UPDATE pods in groups "" covers the pods of ops/op'
    )


def test_not_knowing_a_namespaces_labels_is_taken_as_a_match() -> None:
    unknown = Surroundings("zeroscaler", {})
    [blocked] = blockers([hook(["pods"], [""], namespaceSelector=ONLY_APPS)], BACKEND, unknown)
    assert blocked.why == "its selectors may match labels not known in advance"


def test_a_statefulset_waits_for_its_revisions_not_a_replicaset() -> None:
    backend = Backend("StatefulSet", "ops", "db", {"app": "db"})
    assert blockers([hook(["replicasets"], ["apps"])], backend, AROUND) == []
    [blocked] = blockers([hook(["controllerrevisions"], ["apps"])], backend, AROUND)
    assert blocked.request == "the revisions of ops/db"
    [blocked] = blockers([hook(["statefulsets/scale"], ["apps"])], backend, AROUND)
    assert blocked.request == "the scale write that wakes ops/db"
