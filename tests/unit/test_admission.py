"""The admission decision: which annotations are added, and when nothing is."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from testkit.discovery import builtin_resources, crd_resource
from zeroscaler.core.admission import (
    AdmissionRequest,
    PatchDecision,
    annotate_from_policy,
    decide_patch,
    service_account_of,
)
from zeroscaler.core.inference import RBACSnapshot
from zeroscaler.core.kinds import Discovery
from zeroscaler.core.policy import DEFAULT_POLICY, Policy, merge_policies, parse_policy

NS = "team"
OPTED = {"zeroscaler.io/enabled": "true"}
DISCOVERY = Discovery([*builtin_resources(), crd_resource("example.com", "Widget", "widgets")])
CUSTOM = frozenset({"widgets.example.com"})
RBAC = RBACSnapshot.from_objects(
    [
        {
            "kind": "ClusterRole",
            "metadata": {"name": "op"},
            "rules": [
                {
                    "apiGroups": ["example.com"],
                    "resources": ["widgets"],
                    "verbs": ["watch", "list"],
                },
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["watch", "list"]},
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["watch", "create"]},
            ],
        },
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "op"},
            "roleRef": {"kind": "ClusterRole", "name": "op"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": NS}],
        },
    ]
)
FULL = {
    "zeroscaler.io/idle-timeout": "15m",
    "zeroscaler.io/max-sleep": "10h",
    "zeroscaler.io/watched-kinds": "ConfigMap,Widget.example.com",
    "zeroscaler.io/owned-kinds": "Deployment.apps",
    "zeroscaler.io/watch-namespaces": "*",
    "zeroscaler.io/injected": (
        "zeroscaler.io/idle-timeout,zeroscaler.io/max-sleep,zeroscaler.io/owned-kinds,"
        "zeroscaler.io/watch-namespaces,zeroscaler.io/watched-kinds"
    ),
}


def workload(
    annotations: dict[str, str] | None = None,
    account: str | None = "op",
    kind: str = "Deployment",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "w", "namespace": NS}
    if annotations is not None:
        meta["annotations"] = annotations
    if labels is not None:
        meta["labels"] = labels
    pod: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if account is not None:
        pod["serviceAccountName"] = account
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": meta,
        "spec": {"replicas": 1, "template": {"spec": pod}},
    }


def request(
    obj: Any, operation: str = "CREATE", kind: str = "Deployment", namespace: str = NS, **extra: Any
) -> AdmissionRequest:
    req: dict[str, Any] = {
        "uid": "u1",
        "kind": {"group": "apps", "version": "v1", "kind": kind},
        "resource": {"group": "apps", "version": "v1", "resource": kind.lower() + "s"},
        "namespace": namespace,
        "operation": operation,
        "object": obj,
        **extra,
    }
    return req  # type: ignore[return-value]


def decide(
    req: AdmissionRequest, policy: Policy = DEFAULT_POLICY, ns_labels: dict[str, str] | None = OPTED
) -> PatchDecision:
    return decide_patch(
        req, policy, RBAC, DISCOVERY, namespace_labels=ns_labels, custom_resources=CUSTOM
    )


def applied(obj: dict[str, Any], decision: PatchDecision) -> dict[str, Any]:
    result: dict[str, Any] = jsonpatch.JsonPatch(decision.patch).apply(copy.deepcopy(obj))
    return result


def annotations_after(obj: dict[str, Any], decision: PatchDecision) -> dict[str, str]:
    result: dict[str, str] = applied(obj, decision)["metadata"].get("annotations") or {}
    return result


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_a_workload_without_annotations_gets_every_key_in_one_add(
    kind: str, operation: str
) -> None:
    obj = workload(kind=kind)  # no annotations map at all
    decision = decide(request(obj, operation, kind))
    assert annotations_after(obj, decision) == FULL
    assert decision.patch[0]["op"] == "add"
    assert decision.patch[0]["path"] == "/metadata/annotations"


def test_keys_with_slash_are_escaped_when_annotations_exist() -> None:
    obj = workload({"team": "a"})
    decision = decide(request(obj))
    paths = {op["path"] for op in decision.patch}
    assert "/metadata/annotations/zeroscaler.io~1idle-timeout" in paths
    assert all(op["op"] == "add" for op in decision.patch)
    assert annotations_after(obj, decision) == {"team": "a", **FULL}


def test_null_annotations_are_replaced() -> None:
    obj = workload()
    obj["metadata"]["annotations"] = None
    assert annotations_after(obj, decide(request(obj))) == FULL


def test_second_pass_is_empty() -> None:
    obj = workload()
    once = applied(obj, decide(request(obj)))
    again = decide(request(once, "UPDATE"))
    assert again.patch == []


def test_person_written_values_survive() -> None:
    mine = {"zeroscaler.io/idle-timeout": "7m", "zeroscaler.io/watched-kinds": "Secret"}
    obj = workload(dict(mine))
    after = annotations_after(obj, decide(request(obj)))
    assert after["zeroscaler.io/idle-timeout"] == "7m"
    assert after["zeroscaler.io/watched-kinds"] == "Secret"
    assert after["zeroscaler.io/owned-kinds"] == "Deployment.apps"
    assert (
        after["zeroscaler.io/injected"]
        == "zeroscaler.io/max-sleep,zeroscaler.io/owned-kinds,zeroscaler.io/watch-namespaces"
    )


def test_ibm_aliases_count_as_written() -> None:
    obj = workload(
        {
            "controller-zero-scaler/idleTimeout": "600",
            "controller-zero-scaler/watchedKinds": '[{"apiVersion": "v1", "kind": "ConfigMap"}]',
            "controller-zero-scaler/ownedKinds": "[]",
        }
    )
    # Only what no alias stands for is added: the policy's max-sleep.
    after = annotations_after(obj, decide(request(obj)))
    assert {k: v for k, v in after.items() if k.startswith("zeroscaler.io/")} == {
        "zeroscaler.io/max-sleep": "10h",
        "zeroscaler.io/injected": "zeroscaler.io/max-sleep",
    }


def test_injected_list_is_extended_not_replaced() -> None:
    obj = workload({**FULL, "zeroscaler.io/injected": "zeroscaler.io/idle-timeout"})
    del obj["metadata"]["annotations"]["zeroscaler.io/owned-kinds"]
    after = annotations_after(obj, decide(request(obj, "UPDATE")))
    assert after["zeroscaler.io/injected"] == "zeroscaler.io/idle-timeout,zeroscaler.io/owned-kinds"


BOUNDED = merge_policies(
    [
        parse_policy(
            "defaults: {idleTimeout: 2m}\nbounds: {minIdleTimeout: 1m, maxIdleTimeout: 1h}\n"
            "rules:\n"
            "- {name: slow, namespaceSelector: {matchLabels: {tier: slow}}, idleTimeout: 3h}\n"
            "- {name: skip, workloadSelector: {matchLabels: {zs: 'off'}}, enabled: false}\n"
            "- {name: named, namespaceSelector: {matchLabels: {tier: named}},\n"
            "   watchedKinds: [widgets, Gone.x.io]}",
            "p",
        )
    ]
)


@pytest.mark.parametrize(
    ("written", "result", "warning"),
    [
        (
            "10s",
            "1m",
            "zeroscaler.io/idle-timeout: idle timeout 10s is below the policy minimum 1m; "
            "1m applies",
        ),
        (
            "2h",
            "1h",
            "zeroscaler.io/idle-timeout: idle timeout 2h is above the policy maximum 1h; "
            "1h applies",
        ),
        ("30m", "30m", None),
    ],
)
def test_out_of_bounds_timeouts_are_clamped_with_warning(
    written: str, result: str, warning: str | None
) -> None:
    obj = workload({"zeroscaler.io/idle-timeout": written})
    decision = decide(request(obj), BOUNDED)
    after = annotations_after(obj, decision)
    assert after["zeroscaler.io/idle-timeout"] == result
    if warning:
        assert warning in decision.warnings
        # Still the person's value, clamped: not listed, so no policy change replaces it.
        assert "zeroscaler.io/idle-timeout" not in after["zeroscaler.io/injected"]
        assert decide(request(applied(obj, decision), "UPDATE"), BOUNDED).patch == []
    else:
        assert not any("idle timeout" in w for w in decision.warnings)


def test_rule_timeout_is_clamped_too() -> None:
    obj = workload()
    decision = decide(request(obj), BOUNDED, {**OPTED, "tier": "slow"})
    assert annotations_after(obj, decision)["zeroscaler.io/idle-timeout"] == "1h"
    assert any("above the policy maximum" in w for w in decision.warnings)


def test_policy_rule_names_kinds() -> None:
    obj = workload()
    decision = decide(request(obj), BOUNDED, {**OPTED, "tier": "named"})
    after = annotations_after(obj, decision)
    assert after["zeroscaler.io/watched-kinds"] == "Gone.x.io,Widget.example.com"
    assert after["zeroscaler.io/owned-kinds"] == "Deployment.apps"  # still from RBAC
    assert any(
        "policy names Gone.x.io, which the API server does not serve yet" in w
        for w in decision.warnings
    )


@pytest.mark.parametrize(
    ("obj", "ns_labels", "policy", "reason"),
    [
        (workload({"zeroscaler.io/enabled": "false"}), OPTED, DEFAULT_POLICY, "opted out"),
        (workload(labels={"zs": "off"}), OPTED, BOUNDED, "excluded by policy rule 'skip'"),
        (workload(), {}, DEFAULT_POLICY, "not opted in"),
        (workload(), {"zeroscaler.io/enabled": "false"}, DEFAULT_POLICY, "not opted in"),
    ],
)
def test_opted_out_excluded_or_not_opted_in_workloads_get_no_patch_and_say_why(
    obj: dict[str, Any], ns_labels: dict[str, str], policy: Policy, reason: str
) -> None:
    decision = decide(request(obj), policy, ns_labels)
    assert decision.patch == []
    assert reason in decision.reason


@pytest.mark.parametrize(
    "req",
    [
        request(workload(), "DELETE"),
        request(workload(), "CONNECT"),
        request(workload(), subResource="scale"),
        request(workload(), kind="DaemonSet"),
        request(None),
        request(workload(), namespace=""),
        {**request(workload()), "kind": {"group": "", "version": "v1", "kind": "Deployment"}},
        {**request(workload()), "kind": "Deployment"},
    ],
)
def test_other_requests_are_left_alone(req: AdmissionRequest) -> None:
    assert decide(req).patch == []


@pytest.mark.parametrize(
    ("namespace", "excluded", "reason"),
    [
        ("kube-system", None, "namespace kube-system is excluded from mutation"),
        ("zeroscaler", {"kube-system", "zeroscaler"}, "namespace zeroscaler is excluded"),
        ("kube-system", {"zeroscaler"}, "added"),
        (NS, {"kube-system", "zeroscaler"}, "added"),
    ],
)
def test_excluded_namespaces_are_never_mutated_whatever_their_labels(
    namespace: str, excluded: set[str] | None, reason: str
) -> None:
    obj = workload()
    extra = {} if excluded is None else {"excluded_namespaces": excluded}
    req = request(obj, namespace=namespace)
    decision = decide_patch(
        req, DEFAULT_POLICY, RBAC, DISCOVERY, namespace_labels=OPTED, custom_resources=CUSTOM,
        **extra,
    )  # fmt: skip
    assert reason in decision.reason
    assert (decision.patch == []) == ("excluded" in reason)


def test_unknown_namespace_labels_trust_the_selector() -> None:
    obj = workload()
    decision = decide(request(obj), DEFAULT_POLICY, None)
    assert annotations_after(obj, decision) == FULL


def test_invalid_annotation_is_warned_and_kept() -> None:
    obj = workload({"zeroscaler.io/idle-timeout": "ten minutes"})
    decision = decide(request(obj))
    after = annotations_after(obj, decision)
    assert after["zeroscaler.io/idle-timeout"] == "ten minutes"
    assert any(
        w.startswith("zeroscaler.io/idle-timeout: 'ten minutes' is not a duration")
        for w in decision.warnings
    )


@pytest.mark.parametrize(
    ("meta", "warning"),
    [
        ({"annotations": ["a"]}, "metadata.annotations is not a map"),
        ({"annotations": {"a": 1}}, "metadata.annotations is not a map of strings to strings"),
        ({"labels": "x"}, "metadata.labels is not a map"),
        ("metadata", "metadata is not a map"),
    ],
)
def test_malformed_object_is_left_alone_with_warning(meta: Any, warning: str) -> None:
    obj = workload()
    obj["metadata"] = meta
    decision = decide(request(obj))
    assert decision.patch == []
    assert any(warning in w for w in decision.warnings)


def test_everything_grant_gives_timeout_only_with_warning() -> None:
    rbac = RBACSnapshot.from_objects(
        [
            {
                "kind": "ClusterRole",
                "metadata": {"name": "all"},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
            },
            {
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "all"},
                "roleRef": {"kind": "ClusterRole", "name": "all"},
                "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": NS}],
            },
        ]
    )
    obj = workload(account=None)
    decision = decide_patch(request(obj), DEFAULT_POLICY, rbac, DISCOVERY, namespace_labels=OPTED)
    assert annotations_after(obj, decision) == {
        "zeroscaler.io/idle-timeout": "15m",
        "zeroscaler.io/max-sleep": "10h",
        "zeroscaler.io/injected": "zeroscaler.io/idle-timeout,zeroscaler.io/max-sleep",
    }
    assert any("may watch every resource" in w for w in decision.warnings)


def test_with_inference_off_only_the_idle_timeout_is_injected() -> None:
    policy = merge_policies([parse_policy("inference: {fromRBAC: false}", "p")])
    obj = workload()
    assert set(annotations_after(obj, decide(request(obj), policy))) == {
        "zeroscaler.io/idle-timeout",
        "zeroscaler.io/max-sleep",
        "zeroscaler.io/injected",
    }


def test_the_service_account_comes_from_either_field_and_defaults_to_default() -> None:
    assert service_account_of(workload(account=None)) == "default"
    assert service_account_of(workload(account="x")) == "x"
    legacy = workload(account=None)
    legacy["spec"]["template"]["spec"]["serviceAccount"] = "old"
    assert service_account_of(legacy) == "old"
    assert service_account_of({"spec": {"template": {"spec": "x"}}}) is None
    assert service_account_of({"spec": {"template": {"spec": {"serviceAccountName": 3}}}}) is None
    assert service_account_of({}) == "default"


def test_dry_run_is_decided_the_same() -> None:
    obj = workload()
    assert decide(request(obj, dryRun=True)).patch == decide(request(obj)).patch


# --- values from policy follow it; a person's never change ----------------------------------------

SHORT = merge_policies([parse_policy("defaults: {idleTimeout: 30s}", "p")])
NO_WIDGETS = RBACSnapshot.from_objects(
    [
        {
            "kind": "ClusterRole",
            "metadata": {"name": "op"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["watch"]}],
        },
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "op"},
            "roleRef": {"kind": "ClusterRole", "name": "op"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": NS}],
        },
    ]
)


def from_policy(
    annotations: dict[str, str], policy: Policy = DEFAULT_POLICY, rbac: RBACSnapshot = RBAC
) -> dict[str, str | None]:
    return annotate_from_policy(
        workload(annotations), NS, policy, rbac, DISCOVERY, namespace_labels=OPTED
    ).changes


def test_a_policy_change_reaches_the_values_it_gave() -> None:
    assert from_policy(FULL, SHORT) == {"zeroscaler.io/idle-timeout": "30s"}
    assert from_policy(FULL) == {}


def test_a_persons_value_is_never_replaced_by_policy() -> None:
    person = {**FULL, "zeroscaler.io/idle-timeout": "2h"}
    person["zeroscaler.io/injected"] = "zeroscaler.io/watched-kinds"
    assert from_policy(person, SHORT) == {}


def test_an_rbac_change_infers_the_injected_kinds_again() -> None:
    assert from_policy(FULL, rbac=NO_WIDGETS) == {
        "zeroscaler.io/watched-kinds": "ConfigMap",
        "zeroscaler.io/owned-kinds": None,
        "zeroscaler.io/injected": (
            "zeroscaler.io/idle-timeout,zeroscaler.io/max-sleep,zeroscaler.io/watch-namespaces,"
            "zeroscaler.io/watched-kinds"
        ),
    }


def test_a_policy_rule_that_excludes_it_takes_back_what_policy_gave() -> None:
    mine = {
        **FULL,
        "zeroscaler.io/idle-timeout": "1h",
        "zeroscaler.io/injected": "zeroscaler.io/watched-kinds",
    }
    skip = merge_policies([parse_policy("rules: [{name: skip, enabled: false}]", "p")])
    assert from_policy(mine, skip) == {
        "zeroscaler.io/watched-kinds": None,
        "zeroscaler.io/injected": None,
    }


@pytest.mark.parametrize(
    ("manager", "listed"),
    [("kubectl-annotate", False), ("zeroscaler", True)],
)
def test_a_person_who_rewrites_an_injected_value_takes_it_over(manager: str, listed: bool) -> None:
    old = workload(dict(FULL))
    new = workload({**FULL, "zeroscaler.io/idle-timeout": "45m"})
    req = request(new, "UPDATE", oldObject=old, options={"fieldManager": manager})
    after = annotations_after(new, decide(req, SHORT))
    assert ("zeroscaler.io/idle-timeout" in after["zeroscaler.io/injected"]) is listed
    assert after["zeroscaler.io/idle-timeout"] == ("30s" if listed else "45m")


CERT_DISCOVERY = Discovery(
    [*builtin_resources(), crd_resource("cert-manager.io", "Certificate", "certificates")]
)


@pytest.mark.parametrize(
    ("watched", "policy_text", "expected"),
    [
        (
            "Certificate.cert-manager.io,Secret",
            "",
            {"zeroscaler.io/due-times": "Certificate.cert-manager.io=status.renewalTime"},
        ),
        ("certificates.cert-manager.io", "defaults: {dueLead: 5m}", {
            "zeroscaler.io/due-times": "Certificate.cert-manager.io=status.renewalTime",
            "zeroscaler.io/due-lead": "5m",
        }),
        ("Secret", "", {}),
        ("Certificate.cert-manager.io", "defaults: {dueTimes: {Certificate.cert-manager.io: ''}}",
         {}),
        ("Widget.example.com", "defaults: {dueTimes: {Widget.example.com: status.nextRun}}",
         {"zeroscaler.io/due-times": "Widget.example.com=status.nextRun"}),
    ],
)  # fmt: skip
def test_the_policy_due_times_of_the_kinds_it_watches_are_injected(
    watched: str, policy_text: str, expected: dict[str, str]
) -> None:
    policy = merge_policies([parse_policy(policy_text, "p")])
    mine = {"zeroscaler.io/idle-timeout": "5m", "zeroscaler.io/watched-kinds": watched}
    result = annotate_from_policy(
        workload(mine), NS, policy, RBAC, CERT_DISCOVERY, namespace_labels=OPTED
    )
    got = {k: v for k, v in result.changes.items() if "due" in k}
    assert got == expected


def test_max_sleep_follows_policy_and_zero_writes_none() -> None:
    never = merge_policies([parse_policy("defaults: {maxSleep: 0s}", "p")])
    ruled = merge_policies(
        [parse_policy("rules: [{name: short, maxSleep: 20m, namespaceSelector: {}}]", "p")]
    )
    mine = {"zeroscaler.io/idle-timeout": "5m", "zeroscaler.io/watched-kinds": "ConfigMap"}
    changes = annotate_from_policy(
        workload(mine), NS, never, RBAC, DISCOVERY, namespace_labels=OPTED
    ).changes
    assert "zeroscaler.io/max-sleep" not in changes
    changes = annotate_from_policy(
        workload(mine), NS, ruled, RBAC, DISCOVERY, namespace_labels=OPTED
    ).changes
    assert changes["zeroscaler.io/max-sleep"] == "20m"
