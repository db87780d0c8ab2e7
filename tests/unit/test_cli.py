"""The CLI's pure parts: the status table and items, request words, explain's lines, patches."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zeroscaler.cli import program_name
from zeroscaler.cli.control import event_message, patch_body
from zeroscaler.cli.explain import explain_lines
from zeroscaler.cli.session import Failure, describe_request, failure_for, parse_target
from zeroscaler.cli.status import format_table, last_wakes, render, status_row
from zeroscaler.cli.view import Reach, read_facts
from zeroscaler.core.activity import Activity
from zeroscaler.core.durations import parse_time
from zeroscaler.core.idleness import Seen
from zeroscaler.core.kinds import APIResource, parse_kind_ref
from zeroscaler.core.manual import Manual
from zeroscaler.core.scope import Grant
from zeroscaler.kube import Forbidden, Transient

NOW = parse_time("2026-01-01T12:00:00Z")
ON = {"zeroscaler.io/enabled": "true"}
WIDGET = APIResource("example.com", "v1", "widgets", "Widget", verbs=frozenset({"list", "watch"}))


def workload(name: str, ns: str, replicas: int, **annotations: str) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T08:00:00Z",
            "annotations": annotations,
        },
        "spec": {"replicas": replicas, "template": {"spec": {"serviceAccountName": "operator"}}},
    }


ASLEEP = workload(
    "op",
    "ops",
    0,
    **{
        "zeroscaler.io/idle-timeout": "10m",
        "zeroscaler.io/watched-kinds": "Widget.example.com, ConfigMap",
        "zeroscaler.io/state": "asleep",
        "zeroscaler.io/restore-replicas": "3",
        "zeroscaler.io/asleep-since": "2026-01-01T11:10:00Z",
        "zeroscaler.io/last-activity": "2026-01-01T11:00:00Z",
    },
)
AWAKE = workload(
    "ibm",
    "ops",
    2,
    **{
        "controller-zero-scaler/idleTimeout": "60s",
        "controller-zero-scaler/watchedKinds": '[{"apiVersion": "apps/v1", "Kind": "Deployment"}]',
        "zeroscaler.io/paused": "true",
        "zeroscaler.io/flapping": "woken 5 times by argocd-controller",
        "zeroscaler.io/wake-replicas": "many",
    },
)
EVENTS = [
    {
        "involvedObject": {"uid": "uid-op"},
        "lastTimestamp": "2026-01-01T10:00:00Z",
        "message": "ConfigMap ops/a changed: scaled from 0 to 3 replicas",
    },
    {
        "involvedObject": {"uid": "uid-op"},
        "lastTimestamp": "2026-01-01T10:30:00Z",
        "message": "Widget ops/w deleted: scaled from 0 to 3 replicas",
    },
]


def test_status_rows_show_state_restore_idleness_and_flags() -> None:
    asleep, awake = read_facts(ASLEEP, ON), read_facts(AWAKE, ON)
    row = status_row(asleep, last_wakes(EVENTS), NOW)
    assert (row.state, row.replicas, row.restore, row.idle_for, row.timeout) == (
        "asleep",
        "0",
        "3",
        "1h",
        "10m",
    )
    assert (row.flags, row.last_wake) == ("-", "Widget ops/w deleted")
    row = status_row(awake, {}, NOW)
    assert (row.state, row.restore, row.idle_for, row.timeout) == ("awake", "-", "4h", "1m")
    assert row.flags == "paused,flapping,invalid-annotations"


def test_awake_idleness_counts_from_the_newest_change_seen() -> None:
    facts = read_facts(AWAKE, ON)
    facts.seen = Seen(parse_time("2026-01-01T11:58:00Z"), Activity("Widget", "ops", "w", "x"))
    assert status_row(facts, {}, NOW).idle_for == "2m"
    facts.complete = False  # some kinds could not be listed: it may be less
    assert status_row(facts, {}, NOW).idle_for == "<=2m"


def test_a_scaled_up_sleeper_is_waking_and_one_we_slept_outside_is_unmanaged() -> None:
    waking = {**ASLEEP, "spec": {"replicas": 3}}
    assert status_row(read_facts(waking, ON), {}, NOW).state == "waking"
    assert status_row(read_facts(ASLEEP, {}), {}, NOW).state == "unmanaged"


def test_render_leaves_out_workloads_zeroscaler_has_nothing_to_do_with() -> None:
    plain = read_facts(workload("web", "ops", 2), ON)
    text = render([read_facts(ASLEEP, ON), plain], {}, NOW, "table", all_ns=False)
    header, line = text.splitlines()
    assert "NAMESPACE" not in header
    assert line.startswith("op ")
    assert render([plain], {}, NOW, "table", all_ns=False).startswith("No workloads")
    wide = render([read_facts(ASLEEP, ON)], {}, NOW, "wide", all_ns=True)
    assert "WATCHED KINDS" in wide
    assert "Widget.example.com, ConfigMap" in wide


def test_json_items_carry_seconds_times_and_flags() -> None:
    doc = json.loads(render([read_facts(AWAKE, ON)], {}, NOW, "json", all_ns=True))
    [item] = doc["items"]
    assert item["idleSeconds"] == 4 * 3600
    assert item["idleSince"] == "2026-01-01T08:00:00Z"
    assert (item["timeoutSeconds"], item["restore"], item["paused"]) == (60.0, None, True)
    assert item["flapping"] == "woken 5 times by argocd-controller"
    assert item["flags"] == ["paused", "flapping", "invalid-annotations"]
    assert (item["watched"], item["owned"], item["watchNamespaces"]) == (
        ["Deployment.v1.apps"],
        [],
        None,
    )
    assert item["problems"] == [
        "zeroscaler.io/wake-replicas: 'many' is not a whole number of replicas, 1 or more"
    ]


def test_format_table_aligns_columns() -> None:
    row = status_row(read_facts(ASLEEP, ON), {}, NOW)
    header, line = format_table([row]).splitlines()
    assert header.index("STATE") == line.index("asleep")


@pytest.mark.parametrize(
    ("method", "path", "words"),
    [
        (
            "GET",
            "/apis/apps/v1/namespaces/ops/deployments",
            "list deployments.apps in namespace ops",
        ),
        ("GET", "/apis/apps/v1/deployments", "list deployments.apps in all namespaces"),
        ("GET", "/api/v1/namespaces/ops", "get namespaces ops"),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/ops/deployments/op",
            "patch deployments.apps op in namespace ops",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/ops/deployments/op/scale",
            "patch deployments.apps/scale op in namespace ops",
        ),
        (
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            "create subjectaccessreviews.authorization.k8s.io in all namespaces",
        ),
    ],
)
def test_a_request_is_described_in_the_words_of_rbac_verbs_and_resources(
    method: str, path: str, words: str
) -> None:
    assert describe_request(method, path) == words


def test_failures_are_one_line_and_name_the_request() -> None:
    denied = failure_for(
        Forbidden(403, "Forbidden", "nope"), "GET", "/api/v1/namespaces/x/events", "https://k"
    )
    assert str(denied) == "access denied: you may not list events in namespace x (nope)"
    down = failure_for(
        Transient(0, "ConnectError", "refused"), "GET", "/api/v1/namespaces", "https://k"
    )
    assert str(down) == "cannot reach the API server at https://k (ConnectError: refused)"


def test_a_target_is_namespace_slash_name_or_a_name_in_the_current_namespace() -> None:
    assert parse_target("ops/op", "default") == ("ops", "op")
    assert parse_target("op", "team") == ("team", "op")
    with pytest.raises(Failure, match="NAMESPACE/NAME"):
        parse_target("a/b/c", "x")


def test_program_name_as_a_kubectl_plugin() -> None:
    assert program_name("/usr/local/bin/kubectl-zeroscaler") == "kubectl zeroscaler"
    assert program_name("zeroscaler") == "zeroscaler"


def test_one_patch_carries_replicas_and_status_with_a_precondition() -> None:
    plan = Manual("sleep", 3, {"zeroscaler.io/state": "asleep"})
    assert patch_body(plan, "42") == {
        "metadata": {"resourceVersion": "42", "annotations": {"zeroscaler.io/state": "asleep"}},
        "spec": {"replicas": 0},
    }
    assert "spec" not in patch_body(Manual("restart-clock", 2, {}), "42")
    assert event_message(Manual("wake", 3), "alice", "wake", "X").startswith(
        "woken by alice (zeroscaler wake): scaled from 0 to 3 replicas"
    )


def test_explain_says_what_wakes_it_and_when_it_sleeps() -> None:
    awake = {**ASLEEP, "spec": ASLEEP["spec"] | {"replicas": 3}}
    awake["metadata"] = {
        **ASLEEP["metadata"],
        "annotations": {
            "zeroscaler.io/idle-timeout": "10m",
            "zeroscaler.io/watched-kinds": "Widget.example.com, ConfigMap",
            "zeroscaler.io/state": "awake",
            "zeroscaler.io/last-activity": "2026-01-01T11:55:00Z",
            "zeroscaler.io/enabled": "maybe",
        },
    }
    facts = read_facts(awake, ON)
    facts.reach = [
        Reach(
            parse_kind_ref("Widget.example.com"),
            "zeroscaler.io/watched-kinds",
            False,
            WIDGET,
            Grant(True, frozenset({"ops"})),
            True,
            (("", False), ("ops", True)),
        ),
        Reach(parse_kind_ref("ConfigMap"), "zeroscaler.io/watched-kinds", False),
    ]
    warning = {
        "type": "Warning",
        "reason": "NotPermitted",
        "message": "may not watch x",
        "count": 3,
        "lastTimestamp": "2026-01-01T11:59:00Z",
    }
    text = "\n".join(explain_lines(facts, [warning], NOW))
    assert "Deployment ops/op: awake (3 replicas)" in text
    assert "Widget.example.com (watched, widgets.example.com): counts in namespace ops" in text
    assert "ServiceAccount ops/operator may watch it: all namespaces: no, ops: yes" in text
    assert "ConfigMap (watched): not served" in text
    assert "Sleeps: at 2026-01-01T12:05:00Z (in 5m), unless something changes." in text
    assert 'zeroscaler.io/enabled: \'maybe\' is not "true" or "false"; ignored' in text
    assert "Event NotPermitted, 3 times, last at 2026-01-01T11:59:00Z: may not watch x" in text


def test_explain_of_a_sleeper_says_why_it_sleeps() -> None:
    sleeping = {
        "reason": "Sleeping",
        "message": "idle for 10m (timeout 10m): scaled from 3 to 0",
        "lastTimestamp": "2026-01-01T11:10:00Z",
    }
    lines = explain_lines(read_facts(ASLEEP, ON), [sleeping], NOW)
    assert lines[0] == "Deployment ops/op: asleep (0 replicas; wakes to 3)"
    assert "Put to sleep: idle for 10m (timeout 10m): scaled from 3 to 0" in lines
    assert any(line.startswith("Asleep since 2026-01-01T11:10:00Z (50m ago)") for line in lines)
