"""Policy parsing, validation, merging, rule matching and bounds."""

from __future__ import annotations

import pytest

from zeroscaler.core.policy import (
    DEFAULT_IGNORE,
    DEFAULT_POLICY,
    Policy,
    PolicyError,
    clamp_idle_timeout,
    evaluate_policy,
    merge_policies,
    parse_policy,
)
from zeroscaler.core.selectors import SelectorError, parse_selector

DESIGN_EXAMPLE = """
defaults:
  idleTimeout: 15m
bounds:
  minIdleTimeout: 1m
  maxIdleTimeout: 24h
rules:
  - name: dev-sleeps-fast
    namespaceSelector: {matchLabels: {env: dev}}
    workloadSelector: {matchLabels: {}}
    idleTimeout: 5m
  - name: prod-never-sleeps
    namespaceSelector: {matchLabels: {env: prod}}
    enabled: false
inference:
  fromRBAC: true
  ignore: [events, events.events.k8s.io, leases.coordination.k8s.io,
           tokenreviews.authentication.k8s.io, subjectaccessreviews.authorization.k8s.io]
  maxKinds: 50
"""


def example() -> Policy:
    return merge_policies([parse_policy(DESIGN_EXAMPLE, "zeroscaler/policy")])


def test_the_policy_example_in_the_design_doc_parses_to_its_values() -> None:
    policy = example()
    assert policy.idle_timeout == 900
    assert (policy.min_idle_timeout, policy.max_idle_timeout) == (60, 86400)
    assert [r.name for r in policy.rules] == ["dev-sleeps-fast", "prod-never-sleeps"]
    assert policy.inference.ignore == frozenset(DEFAULT_IGNORE)
    assert policy.inference.max_kinds == 50


@pytest.mark.parametrize(
    ("ns_labels", "wl_labels", "enabled", "timeout", "rule"),
    [
        ({"env": "dev"}, {}, True, 300, "dev-sleeps-fast"),
        ({"env": "prod"}, {"app": "x"}, False, 900, "prod-never-sleeps"),
        ({"env": "staging"}, {}, True, 900, None),
        ({}, {}, True, 900, None),
    ],
)
def test_first_matching_rule_wins(
    ns_labels: dict[str, str],
    wl_labels: dict[str, str],
    enabled: bool,
    timeout: float,
    rule: str | None,
) -> None:
    got = evaluate_policy(example(), ns_labels, wl_labels)
    assert (got.enabled, got.idle_timeout, got.rule) == (enabled, timeout, rule)


SELECTOR_RULES = """
rules:
  - name: labelled-and-tiered
    namespaceSelector:
      matchLabels: {team: a}
      matchExpressions:
        - {key: tier, operator: In, values: [gold, silver]}
        - {key: legacy, operator: DoesNotExist}
    workloadSelector:
      matchExpressions:
        - {key: app, operator: NotIn, values: [db]}
        - {key: owner, operator: Exists}
    idleTimeout: 2m
"""


@pytest.mark.parametrize(
    ("ns_labels", "wl_labels", "matches"),
    [
        ({"team": "a", "tier": "gold"}, {"owner": "me"}, True),
        ({"team": "a", "tier": "silver"}, {"owner": "me", "app": "web"}, True),
        ({"team": "a", "tier": "bronze"}, {"owner": "me"}, False),  # In fails
        ({"team": "b", "tier": "gold"}, {"owner": "me"}, False),  # matchLabels fails
        ({"team": "a", "tier": "gold", "legacy": ""}, {"owner": "me"}, False),  # DoesNotExist
        ({"team": "a", "tier": "gold"}, {"owner": "me", "app": "db"}, False),  # NotIn
        ({"team": "a", "tier": "gold"}, {}, False),  # Exists
    ],
)
def test_selectors_need_labels_and_expressions(
    ns_labels: dict[str, str], wl_labels: dict[str, str], matches: bool
) -> None:
    policy = merge_policies([parse_policy(SELECTOR_RULES, "p")])
    assert (evaluate_policy(policy, ns_labels, wl_labels).rule is not None) is matches


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "defaults: {idleTimeout: ten minutes}",
            "p: defaults.idleTimeout: 'ten minutes' is not a duration",
        ),
        ("defaults: {idleTimeout: 0s}", "p: defaults.idleTimeout: '0s' must be longer than zero"),
        (
            "defaults: {idleTimout: 5m}",
            "p: defaults.idleTimout: unknown field (expected one of idleTimeout, failOpenWebhooks, "
            "keepAwake",
        ),
        (
            "bounds: {minIdleTimeout: 2h, maxIdleTimeout: 1h}",
            "p: bounds.minIdleTimeout (2h) is above",
        ),
        ("rules: {name: x}", "p: rules: expected a list of rules"),
        ("rules: [{idleTimeout: 5m}]", "p: rules[0].name: None is not a non-empty string"),
        ("rules: [{name: a}, {name: a}]", "p: rules[1].name: 'a' is used twice"),
        ("rules: [{name: a, enabled: 'no'}]", "p: rules[0].enabled: 'no' is not true or false"),
        (
            "rules: [{name: a, namespaceSelector: [env]}]",
            "p: rules[0].namespaceSelector: expected a map",
        ),
        (
            "rules: [{name: a, namespaceSelector: {matchExpressions: [{key: k, operator: Has}]}}]",
            "p: rules[0].namespaceSelector.matchExpressions[0].operator: 'Has' is not one of In",
        ),
        (
            "rules: [{name: a, workloadSelector: {matchExpressions: [{key: k, operator: In}]}}]",
            "values: In needs a non-empty list of strings",
        ),
        (
            "rules: [{name: a, watchedKinds: [Foo..bar]}]",
            "p: rules[0].watchedKinds: 'Foo..bar' is not a kind",
        ),
        ("rules: [{name: a, selector: {}}]", "p: rules[0].selector: unknown field"),
        ("inference: {maxKinds: 0}", "p: inference.maxKinds: 0 is not a whole number, 1 or more"),
        ("inference: {ignore: events}", "p: inference.ignore: expected a list of resource"),
        (
            "inference: {fromRBAC: yes please}",
            "p: inference.fromRBAC: 'yes please' is not true or false",
        ),
        ("- a list", "p: policy.yaml must be a map"),
        ("defaults: [", "p: policy.yaml is not valid YAML at line 1"),
    ],
)
def test_invalid_policy_names_field_and_form(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "p")
    assert any(message in p for p in err.value.problems), err.value.problems


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy("defaults: {idleTimeout: x}\ninference: {maxKinds: -1}", "p")
    assert len(err.value.problems) == 2


def test_empty_document_keeps_defaults() -> None:
    assert merge_policies([parse_policy("", "p")]).idle_timeout == DEFAULT_POLICY.idle_timeout
    assert merge_policies([]) == DEFAULT_POLICY


def test_merge_in_name_order_later_values_win_rules_append() -> None:
    base = parse_policy(
        "defaults: {idleTimeout: 10m}\nbounds: {minIdleTimeout: 1m}\n"
        "rules: [{name: a, idleTimeout: 2m}]",
        "zeroscaler/00-base",
    )
    team = parse_policy(
        "defaults: {idleTimeout: 20m}\ninference: {maxKinds: 5}\n"
        "rules: [{name: b, enabled: false}]",
        "zeroscaler/50-team",
    )
    merged = merge_policies([team, base])  # given out of order on purpose
    assert merged.idle_timeout == 1200
    assert merged.min_idle_timeout == 60
    assert merged.inference.max_kinds == 5
    assert [r.name for r in merged.rules] == ["a", "b"]
    assert merged.sources == ("zeroscaler/00-base", "zeroscaler/50-team")


def test_merge_rejects_duplicate_rule_names_and_crossed_bounds() -> None:
    one = parse_policy("rules: [{name: a}]\nbounds: {minIdleTimeout: 2h}", "one")
    two = parse_policy("rules: [{name: a}]", "two")
    with pytest.raises(PolicyError, match="two: rules: name 'a' is already used in one"):
        merge_policies([one, two])
    three = parse_policy("bounds: {maxIdleTimeout: 1h}", "three")
    with pytest.raises(
        PolicyError, match=r"minIdleTimeout \(2h\) is above bounds.maxIdleTimeout \(1h\)"
    ):
        merge_policies([one, three])


@pytest.mark.parametrize(
    ("seconds", "clamped", "message"),
    [
        (30, 60, "idle timeout 30s is below the policy minimum 1m; 1m applies"),
        (60, 60, None),
        (3600, 3600, None),
        (86400, 86400, None),
        (90000, 86400, "idle timeout 25h is above the policy maximum 24h; 24h applies"),
    ],
)
def test_idle_timeouts_outside_the_bounds_are_clamped_with_a_warning(
    seconds: float, clamped: float, message: str | None
) -> None:
    assert clamp_idle_timeout(example(), seconds) == (clamped, message)


def test_no_bounds_means_no_clamp() -> None:
    assert clamp_idle_timeout(DEFAULT_POLICY, 1) == (1, None)


def test_rule_kinds_and_numeric_labels() -> None:
    policy = merge_policies(
        [
            parse_policy(
                "rules:\n- name: named\n  namespaceSelector: {matchLabels: {tier: 1, flag: true}}\n"
                "  watchedKinds: [ConfigMap, Foo.example.com]\n  ownedKinds: Deployment.apps",
                "p",
            )
        ]
    )
    got = evaluate_policy(policy, {"tier": "1", "flag": "true"}, {})
    assert got.watched_kinds == ("ConfigMap", "Foo.example.com")
    assert got.owned_kinds == ("Deployment.apps",)


def test_a_malformed_selector_is_refused_naming_the_field_at_fault() -> None:
    with pytest.raises(SelectorError, match=r"s\.matchLabels: expected a map"):
        parse_selector({"matchLabels": ["a"]}, "s")
    with pytest.raises(
        SelectorError, match=r"s\.matchExpressions\[0\]\.values: Exists takes no values"
    ):
        parse_selector(
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "s"
        )


def test_fail_open_webhooks_stay_awake_unless_a_rule_or_the_defaults_let_them_sleep() -> None:
    doc = parse_policy(
        "defaults: {failOpenWebhooks: sleep}\n"
        "rules:\n"
        "  - name: prod\n"
        "    namespaceSelector: {matchLabels: {env: prod}}\n"
        "    failOpenWebhooks: stayAwake\n",
        "p",
    )
    policy = merge_policies([doc])
    assert evaluate_policy(policy, {"env": "prod"}, {}).fail_open_webhooks == "stayAwake"
    assert evaluate_policy(policy, {"env": "dev"}, {}).fail_open_webhooks == "sleep"
    assert evaluate_policy(merge_policies([]), {}, {}).fail_open_webhooks == "stayAwake"
    with pytest.raises(PolicyError, match=r"p: rules\[0\]\.failOpenWebhooks: 'yes' is not one of"):
        parse_policy("rules: [{name: r, failOpenWebhooks: 'yes'}]", "p")
