"""How long an awake workload has been idle, from listed objects, under the activity rules."""

from __future__ import annotations

from typing import Any

from zeroscaler.core.durations import parse_time
from zeroscaler.core.idleness import build_interest, estimate_idle_start, newest_activity
from zeroscaler.core.kinds import APIResource

CONFIGMAP = APIResource("", "v1", "configmaps", "ConfigMap")
WIDGET = APIResource("example.com", "v1", "widgets", "Widget", subresources=frozenset({"status"}))
POD = APIResource("", "v1", "pods", "Pod", subresources=frozenset({"status"}))
NAMESPACE = APIResource("", "v1", "namespaces", "Namespace", namespaced=False)
LAST = parse_time("2026-01-01T10:00:00Z")
INTEREST = build_interest(
    [(WIDGET, frozenset({"ops"})), (CONFIGMAP, frozenset({"ops"})), (NAMESPACE, None)],
    [(POD, frozenset({"ops"}))],
    ("Deployment", "ops", "op"),
    LAST,
)


def obj(name: str, *entries: tuple[str, str, str], ns: str = "ops", **meta: Any) -> dict[str, Any]:
    fields = [
        {"manager": m, "operation": "Update", "time": t, **({"subresource": s} if s else {})}
        for m, t, s in entries
    ]
    return {"metadata": {"name": name, "namespace": ns, "managedFields": fields, **meta}}


def test_the_newest_counted_change_wins() -> None:
    listed = [
        (CONFIGMAP, obj("a", ("kubectl", "2026-01-01T10:30:00Z", ""))),
        (WIDGET, obj("w", ("kubectl", "2026-01-01T10:20:00Z", ""))),
    ]
    seen = newest_activity(listed, INTEREST)
    assert seen is not None
    assert (seen.at, seen.activity.kind, seen.activity.name) == (
        parse_time("2026-01-01T10:30:00Z"),
        "ConfigMap",
        "a",
    )


def test_changes_that_do_not_count_are_left_out() -> None:
    leader = {"control-plane.alpha.kubernetes.io/leader": "{}"}
    listed = [
        (WIDGET, obj("w", ("op", "2026-01-01T11:00:00Z", "status"))),  # status only
        (WIDGET, obj("w", ("zeroscaler", "2026-01-01T11:00:00Z", ""))),  # ours
        (CONFIGMAP, obj("lock", ("op", "2026-01-01T11:00:00Z", ""), annotations=leader)),
        (CONFIGMAP, obj("b", ("kubectl", "2026-01-01T11:00:00Z", ""), ns="elsewhere")),
        (POD, obj("p", ("kubelet", "2026-01-01T11:00:00Z", ""))),  # no controller owner
        (NAMESPACE, obj("ci-run", ("kubectl", "2026-01-01T11:00:00Z", ""), ns="")),
        (CONFIGMAP, obj("old", ("kubectl", "2026-01-01T09:00:00Z", ""))),  # before last activity
    ]
    assert newest_activity(listed, INTEREST) is None


def test_owned_objects_count_through_their_controller_owner() -> None:
    owner = [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "controller": True}]
    pod = obj("p", ("op", "2026-01-01T11:00:00Z", ""), ownerReferences=owner)
    seen = newest_activity([(POD, pod)], INTEREST)
    assert seen is not None
    assert seen.activity.kind == "Pod"


def test_idle_since_is_the_latest_known() -> None:
    created = parse_time("2026-01-01T09:00:00Z")
    assert estimate_idle_start(None, None, None) is None
    assert estimate_idle_start(LAST, created, None) == LAST
    seen = newest_activity([(CONFIGMAP, obj("a", ("x", "2026-01-01T10:30:00Z", "")))], INTEREST)
    assert estimate_idle_start(LAST, created, seen) == parse_time("2026-01-01T10:30:00Z")
    assert estimate_idle_start(None, created, None) == created
