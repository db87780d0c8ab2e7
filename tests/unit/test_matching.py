"""Whether a webhook is called for a request, as the API server decides it: rules, scope,
namespace and object selectors, and what is `maybe` when labels are not known."""

from __future__ import annotations

from typing import Any

import pytest

from zeroscaler.core.matching import Attributes, selector_verdict, webhook_matches

POD_CREATE = Attributes(
    "CREATE", "", "v1", "pods", namespace="ops", object_labels={"app": "op"}, namespace_labels={}
)
SCALE = Attributes("UPDATE", "apps", "v1", "deployments", "scale", namespace="ops")
BINDING = Attributes("CREATE", "", "v1", "pods", "binding", namespace="ops", namespace_labels={})
NODE = Attributes("UPDATE", "", "v1", "nodes", labels_known=False)
NAMESPACE = Attributes("CREATE", "", "v1", "namespaces", namespace="ops", object_labels={"a": "b"})


def hook(resources: list[str], **fields: Any) -> dict[str, Any]:
    rule = {
        "operations": fields.pop("operations", ["CREATE", "UPDATE"]),
        "apiGroups": fields.pop("groups", ["", "apps"]),
        "apiVersions": fields.pop("versions", ["v1"]),
        "resources": resources,
    }
    if "scope" in fields:
        rule["scope"] = fields.pop("scope")
    return {"rules": [rule], **fields}


@pytest.mark.parametrize(
    ("resources", "request_", "verdict"),
    [
        (["pods"], POD_CREATE, "yes"),
        (["pods"], BINDING, "no"),  # the resource alone, not its subresources
        (["pods/*"], BINDING, "yes"),
        (["pods/*"], POD_CREATE, "yes"),  # `pods/*` takes the resource itself too
        (["*"], BINDING, "no"),
        (["*"], POD_CREATE, "yes"),
        (["*/scale"], SCALE, "yes"),  # a wake's scale write calls it
        (["deployments"], SCALE, "no"),
        (["deployments/scale"], SCALE, "yes"),
        (["*/*"], SCALE, "yes"),
        (["*/*"], BINDING, "yes"),
        (["configmaps"], POD_CREATE, "no"),
    ],
)
def test_resources_and_subresources_match_as_the_api_server_splits_them(
    resources: list[str], request_: Attributes, verdict: str
) -> None:
    assert webhook_matches(hook(resources), request_).verdict == verdict


@pytest.mark.parametrize(
    ("scope", "request_", "verdict"),
    [
        ("Namespaced", POD_CREATE, "yes"),
        ("Namespaced", NAMESPACE, "no"),  # a Namespace is cluster-scoped, namespace set or not
        ("Cluster", NAMESPACE, "yes"),
        ("Cluster", NODE, "maybe"),  # a Node's labels are not known: nothing to narrow here
        ("Cluster", POD_CREATE, "no"),
        ("*", POD_CREATE, "yes"),
    ],
)
def test_scope(scope: str, request_: Attributes, verdict: str) -> None:
    webhook = hook(["*"], scope=scope, objectSelector={"matchLabels": {"x": "y"}})
    if request_ is not NODE:
        webhook.pop("objectSelector")
    assert webhook_matches(webhook, request_).verdict == verdict


def test_operations_groups_and_versions() -> None:
    assert webhook_matches(hook(["pods"], operations=["*"]), POD_CREATE).verdict == "yes"
    assert webhook_matches(hook(["pods"], operations=["DELETE"]), POD_CREATE).verdict == "no"
    assert webhook_matches(hook(["pods"], groups=["apps"]), POD_CREATE).verdict == "no"
    assert webhook_matches(hook(["pods"], groups=["*"]), POD_CREATE).verdict == "yes"
    # Equivalent (the default) calls it for the resource at another version too; Exact does not.
    assert webhook_matches(hook(["pods"], versions=["v1beta1"]), POD_CREATE).verdict == "yes"
    exact = hook(["pods"], versions=["v1beta1"], matchPolicy="Exact")
    assert webhook_matches(exact, POD_CREATE).verdict == "no"


@pytest.mark.parametrize(
    ("selector", "request_", "verdict"),
    [
        ({"matchLabels": {"team": "a"}}, Attributes("CREATE", "", "v1", "pods", namespace="ops",
                                                     namespace_labels={"team": "a"}), "yes"),
        ({"matchLabels": {"team": "a"}}, Attributes("CREATE", "", "v1", "pods", namespace="ops",
                                                     namespace_labels={"team": "b"}), "no"),
        ({"matchLabels": {"team": "a"}}, Attributes("CREATE", "", "v1", "pods", namespace="ops"),
         "maybe"),  # the namespace's labels are not known
        ({"matchLabels": {"team": "a"}}, NODE, "yes"),  # never skips other cluster-scoped objects
        ({"matchLabels": {"a": "b"}}, NAMESPACE, "yes"),  # a Namespace: its own labels
        ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                "values": ["kube-system"]}]},
         Attributes("CREATE", "", "v1", "pods", namespace="kube-system",
                    namespace_labels={"kubernetes.io/metadata.name": "kube-system"}), "no"),
    ],
)  # fmt: skip
def test_the_namespace_selector(selector: Any, request_: Attributes, verdict: str) -> None:
    assert webhook_matches(hook(["*"], namespaceSelector=selector), request_).verdict == verdict


@pytest.mark.parametrize(
    ("selector", "labels", "verdict"),
    [
        ({}, {"app": "op"}, "yes"),
        ({"matchLabels": {"app": "op"}}, {"app": "op", "pod-template-hash": None}, "yes"),
        ({"matchLabels": {"pod-template-hash": "abc"}}, {"pod-template-hash": None}, "maybe"),
        ({"matchExpressions": [{"key": "pod-template-hash", "operator": "Exists"}]},
         {"pod-template-hash": None}, "yes"),
        ({"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}, {"app": "op"},
         "yes"),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["op"]}]},
         {"app": "op"}, "no"),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}, {}, "no"),
        ({"matchLabels": {"app": "op"}}, None, "maybe"),
        ({"matchLabels": "not a map"}, {"app": "op"}, "maybe"),  # never taken by the API server
    ],
)  # fmt: skip
def test_label_selectors_are_three_valued(selector: Any, labels: Any, verdict: str) -> None:
    assert selector_verdict(selector, labels) == verdict


def test_the_object_selector_matches_the_object_or_the_old_object() -> None:
    webhook = hook(["pods"], objectSelector={"matchLabels": {"app": "op"}})
    update = Attributes(
        "UPDATE", "", "v1", "pods", namespace="ops", object_labels={}, old_labels={"app": "op"}
    )
    assert webhook_matches(webhook, update).verdict == "yes"
    gone = Attributes("DELETE", "", "v1", "pods", namespace="ops")  # no object to match
    assert webhook_matches(webhook, gone).verdict == "no"
    unknown = Attributes("CREATE", "", "v1", "pods", namespace="ops", labels_known=False)
    assert webhook_matches(webhook, unknown).verdict == "maybe"


def test_a_match_names_its_rule_and_match_conditions_make_it_maybe() -> None:
    conditions = [
        {"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:')"}
    ]
    found = webhook_matches(hook(["pods"], matchConditions=conditions), POD_CREATE)
    assert (found.verdict, found.rule) == ("maybe", 'CREATE,UPDATE pods in groups "","apps"')
    assert found.why == "its matchConditions are not evaluated"
    assert webhook_matches({"rules": "junk"}, POD_CREATE).verdict == "no"
