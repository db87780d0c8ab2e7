"""Table tests for the activity rules of DESIGN.md, on metadata as a metadata watch gives it."""

from __future__ import annotations

from typing import Any

import pytest

from zeroscaler.core.activity import (
    MANAGER,
    Activity,
    Change,
    Interest,
    definitions_of,
    find_activity,
    newest_change_time,
    shrink,
    working_namespaces,
    writes,
)
from zeroscaler.core.durations import parse_time
from zeroscaler.core.kinds import APIResource

CONFIGMAP = APIResource("", "v1", "configmaps", "ConfigMap")
ENDPOINTS = APIResource("", "v1", "endpoints", "Endpoints")
SECRET = APIResource("", "v1", "secrets", "Secret")
LEASE = APIResource("coordination.k8s.io", "v1", "leases", "Lease")
WIDGET = APIResource("example.com", "v1", "widgets", "Widget", subresources=frozenset({"status"}))
DEPLOYMENT = APIResource(
    "apps", "v1", "deployments", "Deployment", subresources=frozenset({"status", "scale"})
)
NODEWIDGET = APIResource("example.com", "v1", "nodewidgets", "NodeWidget", namespaced=False)

INTEREST = Interest(
    watched={
        ("example.com", "Widget"): frozenset({"ops"}),
        ("", "ConfigMap"): None,
        ("coordination.k8s.io", "Lease"): None,
        ("", "Endpoints"): None,
        ("apps", "Deployment"): None,
        ("example.com", "NodeWidget"): frozenset({"ops"}),
    },
    owned={("", "Secret"): frozenset({"ops"})},
    self_ref=("apps", "Deployment", "ops", "widget-operator"),
    since=parse_time("2026-01-01T10:00:00Z"),
)


def meta(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ops", "name": "w1", "generation": 1, **fields}}


def mf(manager: str, time: str, subresource: str = "") -> dict[str, str]:
    entry = {"manager": manager, "operation": "Update", "time": time}
    if subresource:
        entry["subresource"] = subresource
    return entry


OWNER = [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w1", "controller": True}]
NOT_CONTROLLER = [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w1"}]
LEADER = {"control-plane.alpha.kubernetes.io/leader": '{"holderIdentity":"a"}'}

# (id, resource, change, expected reason or None)
CASES: list[tuple[str, APIResource, Change, str | None]] = [
    ("created", WIDGET, Change("ADDED", meta()), "Widget ops/w1 created"),
    ("deleted", WIDGET, Change("DELETED", meta(), meta()), "Widget ops/w1 deleted"),
    (
        "spec change bumps generation",
        WIDGET,
        Change("MODIFIED", meta(generation=2), meta()),
        "Widget ops/w1 changed",
    ),
    (
        "status-only update on a type with a status subresource",
        WIDGET,
        Change(
            "MODIFIED",
            meta(resourceVersion="2", managedFields=[mf("op", "2026-01-01T11:00:00Z", "status")]),
            meta(resourceVersion="1"),
        ),
        None,
    ),
    (
        "label change counts",
        WIDGET,
        Change("MODIFIED", meta(labels={"a": "b"}), meta()),
        "Widget ops/w1 changed",
    ),
    (
        "annotation change counts",
        WIDGET,
        Change("MODIFIED", meta(annotations={"a": "b"}), meta(annotations={"a": "c"})),
        "Widget ops/w1 changed",
    ),
    (
        "finalizer removed counts",
        WIDGET,
        Change("MODIFIED", meta(), meta(finalizers=["x"])),
        "Widget ops/w1 changed",
    ),
    (
        "owner reference added counts",
        WIDGET,
        Change("MODIFIED", meta(ownerReferences=OWNER), meta()),
        "Widget ops/w1 changed",
    ),
    (
        "deletion requested counts",
        WIDGET,
        Change("MODIFIED", meta(deletionTimestamp="2026-01-01T11:00:00Z"), meta()),
        "Widget ops/w1 changed",
    ),
    (
        "empty labels equal absent labels",
        WIDGET,
        Change("MODIFIED", meta(labels={}), meta()),
        None,
    ),
    (
        "outside the namespace scope",
        WIDGET,
        Change("ADDED", {"metadata": {"namespace": "elsewhere", "name": "w1"}}),
        None,
    ),
    (
        "cluster-scoped kinds ignore the namespace scope",
        NODEWIDGET,
        Change("ADDED", {"metadata": {"name": "n1"}}),
        "NodeWidget n1 created",
    ),
    (
        "every update counts without a status subresource",
        CONFIGMAP,
        Change("MODIFIED", meta(resourceVersion="2"), meta(resourceVersion="1")),
        "ConfigMap ops/w1 changed",
    ),
    (
        "any namespace when the scope is all",
        CONFIGMAP,
        Change("ADDED", {"metadata": {"namespace": "far", "name": "c"}}),
        "ConfigMap far/c created",
    ),
    ("a Lease is never activity", LEASE, Change("MODIFIED", meta(generation=9), meta()), None),
    ("a new Lease neither", LEASE, Change("ADDED", meta()), None),
    (
        "a ConfigMap leader lock is never activity",
        CONFIGMAP,
        Change("MODIFIED", meta(annotations=LEADER), meta(annotations={})),
        None,
    ),
    (
        "an Endpoints leader lock is never activity",
        ENDPOINTS,
        Change("MODIFIED", meta(annotations=LEADER), meta(annotations=LEADER)),
        None,
    ),
    (
        "owned kind controlled by a watched-kind object counts",
        SECRET,
        Change("ADDED", meta(ownerReferences=OWNER)),
        "Secret ops/w1 (controlled by a Widget) created",
    ),
    ("owned kind without an owner does not", SECRET, Change("ADDED", meta()), None),
    (
        "owned kind with a non-controller owner does not",
        SECRET,
        Change("ADDED", meta(ownerReferences=NOT_CONTROLLER)),
        None,
    ),
    (
        "owned kind controlled by an unwatched kind does not",
        SECRET,
        Change(
            "ADDED",
            meta(
                ownerReferences=[
                    {"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": True}
                ]
            ),
        ),
        None,
    ),
    (
        "owned kind outside its scope does not",
        SECRET,
        Change("ADDED", {"metadata": {"namespace": "x", "name": "s", "ownerReferences": OWNER}}),
        None,
    ),
    (
        "initial list: unchanged since last activity is not news",
        WIDGET,
        Change(
            "ADDED",
            meta(
                creationTimestamp="2026-01-01T09:00:00Z",
                managedFields=[mf("op", "2026-01-01T09:30:00Z")],
            ),
            initial=True,
        ),
        None,
    ),
    (
        "initial list: changed after last activity wakes",
        WIDGET,
        Change(
            "ADDED",
            meta(
                creationTimestamp="2026-01-01T09:00:00Z",
                managedFields=[mf("kubectl", "2026-01-01T10:00:01Z")],
            ),
            initial=True,
        ),
        "Widget ops/w1 changed while zeroscaler was not watching",
    ),
    (
        "initial list: created after last activity wakes",
        CONFIGMAP,
        Change("ADDED", meta(creationTimestamp="2026-01-01T10:30:00Z"), initial=True),
        "ConfigMap ops/w1 changed while zeroscaler was not watching",
    ),
    (
        "initial list: a later status write is not news",
        WIDGET,
        Change(
            "ADDED",
            meta(
                creationTimestamp="2026-01-01T09:00:00Z",
                managedFields=[mf("op", "2026-01-01T11:00:00Z", "status")],
            ),
            initial=True,
        ),
        None,
    ),
    (
        "a sleep or wake written by zeroscaler is not activity",
        DEPLOYMENT,
        Change(
            "MODIFIED",
            meta(
                generation=2,
                namespace="other",
                managedFields=[
                    mf("kubectl", "2026-01-01T09:00:00Z"),
                    mf("zeroscaler", "2026-01-01T11:00:00Z", "scale"),
                ],
            ),
            meta(namespace="other", managedFields=[mf("kubectl", "2026-01-01T09:00:00Z")]),
        ),
        None,
    ),
    (
        "a change by someone else at the same time as ours counts",
        DEPLOYMENT,
        Change(
            "MODIFIED",
            meta(
                generation=2,
                managedFields=[
                    mf("kubectl", "2026-01-01T11:00:00Z"),
                    mf("zeroscaler", "2026-01-01T11:00:00Z", "scale"),
                ],
            ),
            meta(managedFields=[mf("kubectl", "2026-01-01T09:00:00Z")]),
        ),
        "Deployment ops/w1 changed",
    ),
    (
        "the workload itself is never its own activity",
        DEPLOYMENT,
        Change(
            "MODIFIED", meta(name="widget-operator", generation=5), meta(name="widget-operator")
        ),
        None,
    ),
    (
        "a kind the workload does not name",
        APIResource("", "v1", "pods", "Pod"),
        Change("ADDED", meta()),
        None,
    ),
]


@pytest.mark.parametrize(
    ("resource", "change", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_which_changes_count_as_activity_and_the_reason_they_give(
    resource: APIResource, change: Change, expected: str | None
) -> None:
    found = find_activity(change, resource, INTEREST)
    assert (found.reason if found else None) == expected


def test_initial_list_without_a_last_activity_is_never_news() -> None:
    interest = Interest(watched={("", "ConfigMap"): None}, owned={}, since=None)
    change = Change("ADDED", meta(creationTimestamp="2026-01-01T10:30:00Z"), initial=True)
    assert find_activity(change, CONFIGMAP, interest) is None


def test_activity_names_the_object() -> None:
    assert find_activity(Change("DELETED", meta()), WIDGET, INTEREST) == Activity(
        "Widget", "ops", "w1", "Widget ops/w1 deleted"
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, None),
        ({"creationTimestamp": "2026-01-01T09:00:00Z"}, "2026-01-01T09:00:00Z"),
        (
            {
                "creationTimestamp": "2026-01-01T09:00:00Z",
                "managedFields": [
                    mf("a", "2026-01-01T09:10:00Z"),
                    mf("b", "2026-01-01T09:20:00Z", "status"),
                    mf("zeroscaler", "2026-01-01T09:30:00Z"),
                    mf("c", "not a time"),
                ],
            },
            "2026-01-01T09:10:00Z",
        ),
        (  # one writer, zeroscaler: the creation time is no later than its write
            {"creationTimestamp": "2026-01-01T09:00:00Z",
             "managedFields": [mf("zeroscaler", "2026-01-01T09:30:00Z")]},
            "2026-01-01T09:00:00Z",
        ),
        (
            {"creationTimestamp": "2026-01-01T09:00:00Z",
             "managedFields": [mf("kubelet", "2026-01-01T09:30:00Z", "status")]},
            "2026-01-01T09:00:00Z",
        ),
        (  # a time not as the API server writes it is kept as text, and read as such
            {"creationTimestamp": "2026-01-01T09:00:00Z",
             "managedFields": [mf("a", "2026-01-01T09:10:00.5Z")]},
            "2026-01-01T09:10:00.5Z",
        ),
        (
            {"managedFields": [mf("a", "2026-01-01T09:10:00Z"), mf("b", "2026-01-01T09:40:00Z"),
                               mf("c", "2026-01-01T09:20:00Z")]},
            "2026-01-01T09:40:00Z",
        ),
    ],
)  # fmt: skip
def test_the_last_change_is_the_newest_write_not_by_zeroscaler_nor_to_status(
    fields: dict[str, Any], expected: str | None
) -> None:
    assert newest_change_time(fields) == (parse_time(expected) if expected else None)


def test_a_stored_object_has_the_last_change_its_listed_self_has() -> None:
    """The stored form reads the last change its own way (most objects: one writer's seconds);
    written at the creation time, the one writer's time is what is kept."""
    for fields in (
        {"creationTimestamp": "2026-01-01T09:00:00Z"},
        {"managedFields": [mf("a", "2026-01-01T09:10:00Z")]},
        {"managedFields": [mf("zeroscaler", "2026-01-01T09:10:00Z")]},
        {"managedFields": [mf("k", "2026-01-01T09:10:00Z", "status")]},
        {"managedFields": [mf("a", "2026-01-01T09:10:00.5Z")]},
        {"managedFields": [mf("a", "2026-01-01T09:10:00Z"), mf("b", "2026-01-01T09:40:00Z")]},
        {"managedFields": [mf("a", "2026-01-01T09:50:00Z"), mf("b", "x", "status")]},
        {},
    ):
        listed = {"name": "a", **fields}
        stored = shrink({"metadata": listed})["metadata"]
        assert newest_change_time(stored) == newest_change_time(listed), fields


def test_shrink_keeps_what_the_rules_read() -> None:
    raw: dict[str, Any] = {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {
            "name": "w1",
            "namespace": "ops",
            "uid": "u",
            "resourceVersion": "7",
            "generation": 3,
            "labels": {"a": "b"},
            "ownerReferences": OWNER,
            "managedFields": [{**mf("op", "2026-01-01T09:10:00Z"), "fieldsV1": {"f:spec": {}}}],
        },
    }
    small = shrink(raw)
    assert dict(small["metadata"]) == {
        "name": "w1",
        "namespace": "ops",
        "resourceVersion": "7",
        "generation": 3,
        "labels": {"a": "b"},
        "ownerReferences": OWNER,
        "managedFields": (("op", "Update", "", "2026-01-01T09:10:00Z"),),
    }
    assert list(writes(small["metadata"])) == [("op", "Update", "", "2026-01-01T09:10:00Z")]
    assert newest_change_time(small["metadata"]) == parse_time("2026-01-01T09:10:00Z")
    assert small.get("spec") is None
    assert "spec" not in small
    assert "metadata" in small
    assert "labels" in small["metadata"]
    with pytest.raises(KeyError):
        small["metadata"]["finalizers"]
    change = Change("MODIFIED", small, shrink({"metadata": {**raw["metadata"], "generation": 2}}))
    assert find_activity(change, WIDGET, INTEREST) is not None


@pytest.mark.parametrize("version", ["7", "18446744073709551616", "007", "v3", "", "0"])
def test_a_stored_resource_version_reads_back_as_it_came(version: str) -> None:
    small = shrink({"metadata": {"name": "a", "resourceVersion": version}})
    assert small["metadata"].get("resourceVersion") == (version or None)


@pytest.mark.parametrize(
    "meta",
    [
        {},
        {"name": "a"},
        {"labels": {"a": "b"}},
        {"generation": 2},
        {"generation": 0},
        {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z"},  # kept with no writes only
    ],
)
def test_stored_metadata_is_a_mapping_of_what_it_kept(meta: dict[str, Any]) -> None:
    small = shrink({"metadata": meta})["metadata"]
    kept = {k: v for k, v in meta.items() if v}
    assert dict(small) == kept
    assert len(small) == len(kept)
    assert bool(small) is bool(kept)  # `get("metadata") or {}` reads an empty one as none


@pytest.mark.parametrize(
    "when",
    [
        "2026-01-01T09:10:00Z",
        "1969-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z",  # Go's zero time: the year would lose its zeros
        "0999-12-31T23:59:59Z",
        "2026-01-01T09:10:00.5Z",  # not as the API server writes times: kept as text
        "2026-01-01T09:10:00+02:00",
        "2026-02-30T00:00:00Z",  # no such day
        "2016-12-31T23:59:60Z",  # a leap second
        "2026-01-01 09:10:00Z",
        "",
    ],
)
def test_a_stored_write_time_reads_back_as_it_came(when: str) -> None:
    small = shrink({"metadata": {"name": "a", "managedFields": [mf("op", when)]}})["metadata"]
    assert list(writes(small)) == [("op", "Update", "", when)]


def test_objects_by_the_same_writers_share_them() -> None:
    def stored(when: str) -> Any:
        fields = [mf("op", when), mf("kubelet", when, "status")]
        return shrink({"metadata": {"name": "a", "managedFields": fields}})["metadata"]

    one, two = stored("2026-01-01T09:10:00Z"), stored("2026-03-01T00:00:00Z")
    assert one._writers is two._writers
    assert [w[3] for w in writes(two)] == ["2026-03-01T00:00:00Z"] * 2


def test_stored_writes_are_read_as_listed() -> None:
    fields = [mf("op", "2026-01-01T09:10:00Z"), mf(MANAGER, "2026-01-02T00:00:00Z")]
    listed = {"name": "a", "managedFields": fields, "creationTimestamp": "2026-01-01T00:00:00Z"}
    small = shrink({"metadata": listed})["metadata"]
    assert list(writes(small)) == list(writes(listed))
    assert len(list(writes(small))) == 2
    assert newest_change_time(small) == newest_change_time(listed)
    assert "creationTimestamp" not in small  # the writes' times say as much
    plain = shrink({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z"}})
    assert newest_change_time(plain["metadata"]) == parse_time("2026-01-01T00:00:00Z")


def test_rbac_resource_names_limit_what_counts() -> None:
    interest = Interest(
        watched={("", "ConfigMap"): None},
        owned={},
        names={("", "ConfigMap"): frozenset({"operator-config"})},
    )
    named = Change("ADDED", meta(name="operator-config"))
    other = Change("ADDED", meta(name="someone-else"))
    assert find_activity(named, CONFIGMAP, interest) is not None
    assert find_activity(other, CONFIGMAP, interest) is None


NAMESPACE = APIResource("", "v1", "namespaces", "Namespace", namespaced=False)
CRD = APIResource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
    subresources=frozenset({"status"}),
)
NODE = APIResource("", "v1", "nodes", "Node", namespaced=False, subresources=frozenset({"status"}))
CLUSTER_WATCHED: dict[tuple[str, str], frozenset[str] | None] = {
    ("", "Namespace"): None,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): None,
    ("", "Node"): None,
}
# A kopf operator run with --namespace=acc-kopf: its own kind there, Namespaces and CRDs everywhere.
KOPF = Interest(
    watched={**CLUSTER_WATCHED, ("acc.example.com", "Backup"): frozenset({"acc-kopf"})},
    owned={},
    namespaces=frozenset({"acc-kopf"}),
    definitions=frozenset({"backups.acc.example.com"}),
)
# prometheus-operator: every namespace, so every Namespace counts.
EVERYWHERE = Interest(watched={**CLUSTER_WATCHED}, owned={})


def cluster_object(name: str, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "generation": 1, **fields}}


@pytest.mark.parametrize(
    ("interest", "resource", "change", "counts"),
    [
        (KOPF, NAMESPACE, Change("ADDED", cluster_object("ci-run-42")), False),
        (KOPF, NAMESPACE, Change("DELETED", cluster_object("ci-run-42")), False),
        (
            KOPF,
            NAMESPACE,
            Change(
                "MODIFIED", cluster_object("tenant", labels={"a": "b"}), cluster_object("tenant")
            ),
            False,
        ),
        (KOPF, NAMESPACE, Change("ADDED", cluster_object("acc-kopf")), True),
        (
            KOPF,
            NAMESPACE,
            Change(
                "MODIFIED",
                cluster_object("acc-kopf", labels={"a": "b"}),
                cluster_object("acc-kopf"),
            ),
            True,
        ),
        (KOPF, CRD, Change("ADDED", cluster_object("widgets.other.example.com")), False),
        (KOPF, CRD, Change("DELETED", cluster_object("backups.acc.example.com")), True),
        (KOPF, NODE, Change("ADDED", cluster_object("node-7")), True),
        (EVERYWHERE, NAMESPACE, Change("ADDED", cluster_object("ci-run-42")), True),
        (
            EVERYWHERE,
            NAMESPACE,
            Change(
                "MODIFIED", cluster_object("team-a", labels={"x": "y"}), cluster_object("team-a")
            ),
            True,
        ),
        (EVERYWHERE, CRD, Change("ADDED", cluster_object("widgets.other.example.com")), True),
    ],
    ids=[
        "listed: another namespace created",
        "listed: another namespace deleted",
        "listed: another namespace labelled",
        "listed: its own namespace created",
        "listed: its own namespace labelled",
        "listed: a CRD of someone else's kind",
        "listed: the CRD of its own kind deleted",
        "listed: a Node still counts",
        "everywhere: any namespace created",
        "everywhere: any namespace labelled",
        "everywhere: any CRD",
    ],
)
def test_cluster_scoped_objects_for_a_list_of_namespaces(
    interest: Interest, resource: APIResource, change: Change, counts: bool
) -> None:
    assert (find_activity(change, resource, interest) is not None) is counts


@pytest.mark.parametrize(
    ("watched", "expected"),
    [
        ([], None),
        ([(WIDGET, frozenset({"a"}))], frozenset({"a"})),
        ([(WIDGET, frozenset({"a"})), (CONFIGMAP, frozenset({"b", "a"}))], frozenset({"a", "b"})),
        ([(WIDGET, frozenset({"a"})), (CONFIGMAP, None)], None),
        ([(WIDGET, frozenset({"a"})), (NAMESPACE, None), (NODE, None)], frozenset({"a"})),
        ([(NAMESPACE, None)], None),
    ],
    ids=[
        "nothing",
        "one",
        "a union",
        "one everywhere",
        "cluster-scoped kinds left out",
        "only those",
    ],
)
def test_a_workload_works_in_the_union_of_its_namespaced_kinds_scopes(
    watched: list[tuple[APIResource, frozenset[str] | None]], expected: frozenset[str] | None
) -> None:
    assert working_namespaces(watched) == expected


def test_definitions_of_name_the_crds_of_custom_kinds() -> None:
    assert definitions_of([WIDGET, CONFIGMAP, DEPLOYMENT]) == {
        "widgets.example.com",
        "deployments.apps",
    }


def test_a_secret_elsewhere_is_not_named_to_whoever_reads_the_workloads_events() -> None:
    interest = Interest(
        watched={("", "Secret"): None, ("", "ConfigMap"): None},
        owned={},
        self_ref=("apps", "Deployment", "ops", "op"),
    )
    elsewhere = {"metadata": {"namespace": "prod", "name": "db-password"}}
    found = find_activity(Change("DELETED", elsewhere), SECRET, interest)
    assert found is not None
    assert found.reason == "Secret in namespace prod deleted"
    at_home = {"metadata": {"namespace": "ops", "name": "tls"}}
    found = find_activity(Change("DELETED", at_home), SECRET, interest)
    assert found is not None
    assert found.reason == "Secret ops/tls deleted"
    # Other kinds elsewhere are named, as the workload's own account may watch them.
    found = find_activity(Change("DELETED", elsewhere), CONFIGMAP, interest)
    assert found is not None
    assert found.reason == "ConfigMap prod/db-password deleted"


POD = APIResource("", "v1", "pods", "Pod", subresources=frozenset({"status"}))
REPLICASET = APIResource(
    "apps", "v1", "replicasets", "ReplicaSet", subresources=frozenset({"status", "scale"})
)
OWN = Interest(
    watched={("", "Pod"): None, ("apps", "ReplicaSet"): None},
    owned={},
    self_ref=("apps", "Deployment", "ops", "op"),
    self_uid="uid-op",
)
OWN_STS = Interest(
    watched={("", "Pod"): None},
    owned={},
    self_ref=("apps", "StatefulSet", "ops", "db"),
    self_uid="uid-db",
)


def child(name: str, kind: str, owner: str, uid: str, ns: str = "ops", **labels: str) -> Change:
    group = "v1" if kind in ("Pod",) else "apps/v1"
    ref = {"apiVersion": group, "kind": kind, "name": owner, "uid": uid, "controller": True}
    body: dict[str, Any] = {"namespace": ns, "name": name, "ownerReferences": [ref]}
    if labels:
        body["labels"] = labels
    return Change("ADDED", {"metadata": body})


def rs_ref(name: str, owner: str, uid: str, ns: str = "ops") -> Change:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": owner, "uid": uid}
    body = {"namespace": ns, "name": name, "ownerReferences": [{**ref, "controller": True}]}
    return Change("ADDED", {"metadata": body})


def pod_of_rs(name: str, rs: str, template_hash: str, ns: str = "ops") -> Change:
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "controller": True}
    body = {
        "namespace": ns,
        "name": name,
        "ownerReferences": [ref],
        "labels": {"pod-template-hash": template_hash},
    }
    return Change("ADDED", {"metadata": body})


# (id, interest, resource, change, counts)
OWN_CASES: list[tuple[str, Interest, APIResource, Change, bool]] = [
    ("its own ReplicaSet", OWN, REPLICASET, rs_ref("op-7847f58c69", "op", "uid-op"), False),
    ("its own Pod, through its ReplicaSet", OWN, POD,
     pod_of_rs("op-7847f58c69-abcde", "op-7847f58c69", "7847f58c69"), False),
    ("a ReplicaSet of another Deployment", OWN, REPLICASET,
     rs_ref("other-5d4f", "other", "uid-other"), True),
    ("a ReplicaSet of an earlier Deployment of the same name", OWN, REPLICASET,
     rs_ref("op-1111", "op", "uid-old"), True),
    ("a ReplicaSet of the same name elsewhere", OWN, REPLICASET,
     rs_ref("op-7847f58c69", "op", "uid-op", ns="team-b"), True),
    ("a Pod of a Deployment whose name extends its own", OWN, POD,
     pod_of_rs("op-web-5d4f-xyz", "op-web-5d4f", "5d4f"), True),
    ("a Pod whose ReplicaSet is not named by its hash", OWN, POD,
     pod_of_rs("op-1-xyz", "op-1", "7847f58c69"), True),
    ("a bare Pod", OWN, POD, Change("ADDED", {"metadata": {"namespace": "ops", "name": "p"}}),
     True),
    ("its own StatefulSet Pod", OWN_STS, POD, child("db-0", "StatefulSet", "db", "uid-db"), False),
    ("another StatefulSet's Pod", OWN_STS, POD, child("web-0", "StatefulSet", "web", "u"), True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("interest", "resource", "change", "counts"),
    [case[1:] for case in OWN_CASES],
    ids=[case[0] for case in OWN_CASES],
)
def test_its_own_pods_and_replicasets_are_never_activity_for_it(
    interest: Interest, resource: APIResource, change: Change, counts: bool
) -> None:
    assert (find_activity(change, resource, interest) is not None) is counts
    # The same as a watch stores it (metadata only).
    stored = Change(change.type, shrink(change.obj))
    assert (find_activity(stored, resource, interest) is not None) is counts


def test_its_own_pods_are_left_out_of_its_census() -> None:
    from zeroscaler.core.census import tally

    mine = shrink(pod_of_rs("op-7847f58c69-abcde", "op-7847f58c69", "7847f58c69").obj)
    theirs = shrink(pod_of_rs("web-5d4f-xyz", "web-5d4f", "5d4f").obj)
    assert tally([mine, theirs], POD, OWN).count == 1
