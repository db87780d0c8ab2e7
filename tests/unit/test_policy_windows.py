"""Windows and dry run in policy: read, merged, evaluated, and written onto workloads."""

from __future__ import annotations

import pytest

from tests.unit.test_admission import (
    DISCOVERY,
    FULL,
    NS,
    OPTED,
    RBAC,
    decide,
    request,
    workload,
)
from zeroscaler.core.admission import annotate_from_policy
from zeroscaler.core.policy import (
    Policy,
    PolicyError,
    dry_run_reason,
    evaluate_policy,
    merge_policies,
    parse_policy,
)
from zeroscaler.core.schedules import format_windows

POLICY = """
defaults:
  forcedSleep: ["Sat,Sun 00:00-24:00 UTC"]
rules:
  - name: dev-nights
    namespaceSelector: {matchLabels: {env: dev}}
    keepAwake:
      - days: Mon-Fri
        start: "08:00"
        end: 18:00           # unquoted: YAML reads 1080, taken back as the time
        timeZone: Europe/Berlin
        except: [2026-12-24, "2026-12-31"]
    forcedSleep:
      - Mon-Fri 20:00-07:00 Europe/Berlin hold
  - name: try-first
    namespaceSelector: {matchLabels: {env: trial}}
    dryRun: true
  - name: no-windows
    namespaceSelector: {matchLabels: {env: prod}}
    forcedSleep: []
"""


def policy(text: str = POLICY) -> Policy:
    return merge_policies([parse_policy(text, "zeroscaler/policy")])


@pytest.mark.parametrize(
    ("labels", "keep", "forced", "dry_run"),
    [
        (
            {"env": "dev"},
            "Mon-Fri 08:00-18:00 Europe/Berlin except 2026-12-24,2026-12-31",
            "Mon-Fri 20:00-07:00 Europe/Berlin hold",
            False,
        ),
        ({"env": "trial"}, "", "Sat-Sun 00:00-24:00 UTC", True),
        ({"env": "prod"}, "", "", False),
        ({}, "", "Sat-Sun 00:00-24:00 UTC", False),
    ],
)
def test_the_first_matching_rule_gives_windows_over_the_defaults(
    labels: dict[str, str], keep: str, forced: str, dry_run: bool
) -> None:
    effective = evaluate_policy(policy(), labels, {})
    assert format_windows(effective.keep_awake) == keep
    assert format_windows(effective.forced_sleep) == forced
    assert effective.dry_run is dry_run


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rules: [{name: a, forcedSleep: ['Mon-Fri 25:00-07:00 UTC']}]",
            "p: rules[0].forcedSleep[0]: 'Mon-Fri 25:00-07:00 UTC': start '25:00' is not a time "
            "of day HH:MM, 00:00 to 24:00; expected DAYS HH:MM-HH:MM ZONE",
        ),
        (
            "rules: [{name: a, keepAwake: [{days: Mon-Fri, start: '08:00', end: '18:00'}]}]",
            "p: rules[0].keepAwake[0]: timeZone: None is missing or not text; expected a map "
            "with days, start, end, timeZone",
        ),
        (
            "rules: [{name: a, keepAwake: [{days: Mon-Fri, start: '08:00', end: '18:00', "
            "timeZone: Europe/Paris, activity: hold}]}]",
            "p: rules[0].keepAwake[0]: hold applies to forced-sleep windows only",
        ),
        (
            "rules: [{name: a, forcedSleep: [{days: Mon, start: '20:00', end: '07:00', "
            "timeZone: Nowhere/City}]}]",
            "p: rules[0].forcedSleep[0]: 'Nowhere/City' is not an IANA time zone",
        ),
        (
            "rules: [{name: a, forcedSleep: [{days: Mon, start: '20:00', end: '07:00', "
            "timeZone: UTC, weekends: true}]}]",
            "p: rules[0].forcedSleep[0].weekends: unknown field (expected one of days, start, "
            "end, timeZone, except, activity)",
        ),
        ("defaults: {keepAwake: 5}", "p: defaults.keepAwake: expected a list of windows"),
        ("rules: [{name: a, dryRun: maybe}]", "p: rules[0].dryRun: 'maybe' is not true or false"),
    ],
)
def test_a_bad_window_in_policy_names_the_field_and_the_form(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "p")
    assert any(p.startswith(message) for p in err.value.problems), err.value.problems


def test_a_later_document_replaces_the_default_windows() -> None:
    first = parse_policy("defaults: {forcedSleep: 'Sat,Sun 00:00-24:00 UTC'}", "a")
    second = parse_policy("defaults: {forcedSleep: []}", "b")
    assert merge_policies([first]).forced_sleep != ()
    assert merge_policies([first, second]).forced_sleep == ()


def from_policy(
    annotations: dict[str, str], pol: Policy, ns_labels: dict[str, str]
) -> dict[str, str | None]:
    return annotate_from_policy(
        workload(annotations), NS, pol, RBAC, DISCOVERY, namespace_labels={**OPTED, **ns_labels}
    ).changes


def test_policy_windows_are_written_and_listed_as_injected() -> None:
    changes = from_policy(FULL, policy(), {"env": "dev"})
    assert changes["zeroscaler.io/keep-awake"] == (
        "Mon-Fri 08:00-18:00 Europe/Berlin except 2026-12-24,2026-12-31"
    )
    assert changes["zeroscaler.io/forced-sleep"] == "Mon-Fri 20:00-07:00 Europe/Berlin hold"
    injected = str(changes["zeroscaler.io/injected"]).split(",")
    assert {"zeroscaler.io/keep-awake", "zeroscaler.io/forced-sleep"} <= set(injected)


def test_a_persons_windows_are_never_replaced_and_policy_windows_follow_the_policy() -> None:
    mine = {**FULL, "zeroscaler.io/forced-sleep": "Sun 00:00-24:00 UTC"}
    assert "zeroscaler.io/forced-sleep" not in from_policy(mine, policy(), {"env": "dev"})
    # Given by policy, then a rule with none: taken back.
    given = {
        **FULL,
        "zeroscaler.io/forced-sleep": "Sat-Sun 00:00-24:00 UTC",
        "zeroscaler.io/injected": FULL["zeroscaler.io/injected"] + ",zeroscaler.io/forced-sleep",
    }
    assert from_policy(given, policy(), {}) == {}
    changes = from_policy(given, policy(), {"env": "prod"})
    assert changes["zeroscaler.io/forced-sleep"] is None
    assert "zeroscaler.io/forced-sleep" not in str(changes["zeroscaler.io/injected"])


def test_a_malformed_window_of_a_person_is_left_to_them_not_replaced() -> None:
    bad = {**FULL, "zeroscaler.io/forced-sleep": "sometimes"}
    assert "zeroscaler.io/forced-sleep" not in from_policy(bad, policy(), {"env": "dev"})


@pytest.mark.parametrize(
    ("ns_labels", "reason"),
    [
        ({"zeroscaler.io/dry-run": "true"}, 'namespace labelled zeroscaler.io/dry-run: "true"'),
        ({"env": "trial"}, "policy rule 'try-first'"),
        ({"env": "dev"}, None),
        ({"zeroscaler.io/dry-run": "false"}, None),
    ],
)
def test_dry_run_by_namespace_label_or_policy(
    ns_labels: dict[str, str], reason: str | None
) -> None:
    assert dry_run_reason(policy(), ns_labels, {}) == reason


def test_dry_run_from_defaults_says_so() -> None:
    assert dry_run_reason(policy("defaults: {dryRun: true}"), {}, {}) == "policy defaults.dryRun"


@pytest.mark.parametrize("ns_labels", [{"zeroscaler.io/dry-run": "true"}, {"env": "trial"}])
def test_the_webhook_writes_nothing_where_zeroscaler_only_says_what_it_would_do(
    ns_labels: dict[str, str],
) -> None:
    decision = decide(request(workload()), policy(), {**OPTED, **ns_labels})
    assert decision.patch == []
    assert decision.reason.startswith("dry run (")
