"""Table tests for the activator's pure part: which webhooks it can cover, and what it writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zeroscaler.core.coverage import (
    PROBE_LABEL,
    PROBE_WEBHOOK,
    ActivatorState,
    Covered,
    Hook,
    Target,
    activate_path,
    activation_block,
    describe_request,
    has_ready_endpoint,
    hooks_of,
    needs_cover,
    parse_activate_path,
    parse_request_key,
    probe_answered,
    probe_lease,
    ready_endpoints,
    render,
    request_key,
)

RULES = [
    {
        "apiGroups": ["example.com"],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["widgets"],
        "scope": "Namespaced",
    }
]


def configuration(name: str, *webhooks: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "webhooks": list(webhooks)}


def webhook(name: str, client: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": client, "rules": RULES, **more}


SERVICE = {"service": {"namespace": "ops", "name": "op-webhook", "path": "/validate"}}
HOOK = hooks_of(False, configuration("op-hooks", webhook("check.example.com", SERVICE)))[0]
MUTATING = hooks_of(True, configuration("op-defaults", webhook("default.example.com", SERVICE)))[0]
ON = ActivatorState("0-zeroscaler-activator", "serving")


def test_hooks_keep_what_decides_which_requests_reach_them_and_skip_urls() -> None:
    selector = {"matchLabels": {"team": "a"}}
    found = hooks_of(
        False,
        configuration(
            "op-hooks",
            webhook("check.example.com", SERVICE, objectSelector=selector, timeoutSeconds=5),
            webhook("by-url.example.com", {"url": "https://example.com/x"}),
            "not a webhook",  # type: ignore[arg-type]
        ),
    )
    assert [(h.configuration, h.name, h.service, h.mutating) for h in found] == [
        ("op-hooks", "check.example.com", ("ops", "op-webhook"), False)
    ]
    # Matching fields only: its timeout and client are the backend's, not the copy's.
    assert json.loads(found[0].match) == {"rules": RULES, "objectSelector": selector}


@pytest.mark.parametrize(
    ("hooks", "state", "expected"),
    [
        ((), ActivatorState(), None),
        ((HOOK,), ActivatorState(), "the activator is off"),
        ((HOOK,), ActivatorState("0-zeroscaler-activator"), None),  # unknown: the probe decides
        ((HOOK,), ON, None),
        ((MUTATING,), ON, None),  # "op-defaults" is called after "0-zeroscaler-activator"
        (
            (HOOK,),
            ActivatorState("0-zeroscaler-activator", "failed"),
            "the activator cannot serve (its probe through the API server went unanswered)",
        ),
        (
            (MUTATING,),
            ActivatorState("zz-activator", "serving"),
            "MutatingWebhookConfiguration op-defaults is called before the activator's "
            "zz-activator (configurations are called in name order)",
        ),
        ((HOOK,), ActivatorState("zz-activator", "serving"), None),  # validating: always after
    ],
)
def test_activation_is_blocked_when_off_unanswered_or_called_too_late(
    hooks: tuple[Hook, ...], state: ActivatorState, expected: str | None
) -> None:
    assert activation_block(hooks, state) == expected


@pytest.mark.parametrize(
    ("asleep", "starting", "going", "expected"),
    [
        (False, False, False, False),  # awake and Ready: nothing to cover
        (False, False, True, True),  # covered before the sleep is written
        (True, False, False, True),
        (False, True, False, True),  # woken, not Ready yet
    ],
)
def test_a_backend_is_covered_from_before_its_sleep_until_it_is_ready(
    asleep: bool, starting: bool, going: bool, expected: bool
) -> None:
    assert needs_cover(asleep=asleep, starting=starting, going_to_sleep=going) is expected


BASE_URL = {"url": "https://127.0.0.1:8443/mutate", "caBundle": "Q0E="}
BASE_SERVICE = {
    "service": {"namespace": "zeroscaler", "name": "zeroscaler-webhook", "port": 443},
    "caBundle": "Q0E=",
}
BACKEND = Covered("Deployment", "ops", "op", (HOOK, MUTATING))
TOKEN = "t0k3n-t0k3n-t0k3n-t0k3n"


def same_token(_: str) -> str:
    return TOKEN


def test_the_configuration_copies_each_covered_webhook_and_ends_its_probe() -> None:
    webhooks, token = render([BACKEND], BASE_URL, 10, "zeroscaler", same_token)
    probe, *copies = webhooks
    assert probe["name"] == PROBE_WEBHOOK
    assert probe["objectSelector"] == {"matchLabels": {PROBE_LABEL: token}}
    assert probe["clientConfig"] == {
        "url": "https://127.0.0.1:8443/activate/probe",
        "caBundle": "Q0E=",
    }
    assert len(copies) == 2
    assert len({c["name"] for c in copies}) == 2
    for copy in copies:
        assert copy["rules"] == RULES
        assert copy["failurePolicy"] == "Ignore"
        assert copy["sideEffects"] == "NoneOnDryRun"  # a dry run wakes nothing
        assert copy["timeoutSeconds"] == 10
        assert copy["name"].endswith(".activator.zeroscaler.io")
        assert copy["clientConfig"] == {
            "url": f"https://127.0.0.1:8443/activate/{TOKEN}/9/deployment/ops/op/op-webhook",
            "caBundle": "Q0E=",
        }
    # The token names the content: covering something else changes it.
    assert render([], BASE_URL, 10, "zeroscaler", same_token)[1] != token


def test_nothing_covered_leaves_only_the_probe() -> None:
    webhooks, _ = render([], BASE_SERVICE, 10, "zeroscaler", same_token)
    assert [w["name"] for w in webhooks] == [PROBE_WEBHOOK]
    assert webhooks[0]["clientConfig"]["service"] == {
        "namespace": "zeroscaler",
        "name": "zeroscaler-webhook",
        "port": 443,
        "path": "/activate/probe",
    }


@pytest.mark.parametrize(("asked", "used"), [(1, 2), (45, 30), (10, 10)])
def test_the_timeout_is_bounded_to_what_the_api_server_allows(asked: int, used: int) -> None:
    webhooks, _ = render([BACKEND], BASE_URL, asked, "zeroscaler", same_token)
    assert {w["timeoutSeconds"] for w in webhooks[1:]} == {used}
    assert parse_activate_path(webhooks[1]["clientConfig"]["url"].split(":8443")[1]) == Target(
        TOKEN, used - 1, "Deployment", "ops", "op", "op-webhook"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/activate/probe",
        "/mutate",
        "/activate/9/deployment/ops/op/op-webhook",  # no token
        "/activate/short/9/deployment/ops/op/op-webhook",
        f"/activate/{TOKEN}/x/deployment/a/b/c",
        f"/activate/{TOKEN}/9/pod/a/b/c",
        f"/activate/{TOKEN}/9/deployment/../b/c",
        f"/activate/{TOKEN}/9/deployment/a/../c",
        f"/activate/{TOKEN}/9/deployment/a/b..c/d",
        f"/activate/{TOKEN}/9/deployment/A/b/c",
        f"/activate/{TOKEN}/9/deployment/a/b/c/d",
        f"/activate/{TOKEN}/9/deployment/a/%2e%2e/c",
        f"/activate/{TOKEN}/999/deployment/a/b/c",
        f"/activate/{TOKEN}/9/deployment/" + "a" * 64 + "/b/c",
    ],
)
def test_other_paths_are_not_activations(path: str) -> None:
    assert parse_activate_path(path) is None


def test_paths_and_request_keys_name_the_workload() -> None:
    backend = Covered("StatefulSet", "ops", "db", (HOOK,))
    path = activate_path(backend, HOOK, 4, TOKEN)
    assert parse_activate_path(path) == Target(TOKEN, 4, "StatefulSet", "ops", "db", "op-webhook")
    key = request_key("StatefulSet", "ops", "db.primary")
    assert key == "statefulset_ops_db.primary"
    assert parse_request_key(key) == ("StatefulSet", "ops", "db.primary")
    assert parse_request_key("pod_ops_x") is None
    assert parse_request_key("deployment_ops") is None


def test_the_probe_is_answered_only_by_its_own_token() -> None:
    lease = probe_lease("abc")
    assert lease["metadata"]["labels"] == {PROBE_LABEL: "abc"}
    assert probe_answered(["zeroscaler activator probe abc"], "abc")
    assert not probe_answered(["zeroscaler activator probe old"], "abc")
    assert not probe_answered([], "abc")


@pytest.mark.parametrize(
    ("slices", "ready"),
    [
        ([], False),
        ([{"endpoints": []}], False),
        ([{"endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": False}}]}], False),
        ([{"endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]}], True),
        ([{"endpoints": [{"addresses": ["127.0.0.1"]}]}], True),  # unset means ready
        ([{"endpoints": [{"addresses": [], "conditions": {"ready": True}}]}], False),
    ],
)
def test_a_service_is_ready_with_one_ready_endpoint(
    slices: list[dict[str, Any]], ready: bool
) -> None:
    assert has_ready_endpoint(slices) is ready


def test_ready_endpoints_are_named_by_their_pod_so_a_new_pod_is_told_from_a_stopping_one() -> None:
    # Host-network pods share the node's address: only the Pod's uid tells them apart.
    slices = [
        {"endpoints": [_endpoint("old", True), _endpoint("gone", False)]},
        {"endpoints": [_endpoint("new", True), {"addresses": ["10.0.0.9", "10.0.0.8"]}]},
    ]
    assert ready_endpoints(slices) == {"old", "new", "10.0.0.9,10.0.0.8"}
    assert ready_endpoints(slices) - ready_endpoints(slices[:1]) == {"new", "10.0.0.9,10.0.0.8"}


def _endpoint(uid: str, ready: bool) -> dict[str, Any]:
    return {
        "addresses": ["192.0.2.10"],
        "conditions": {"ready": ready},
        "targetRef": {"kind": "Pod", "name": f"guard-{uid}", "uid": uid},
    }


def test_a_request_is_described_as_an_event_would_say_it() -> None:
    request = {
        "operation": "CREATE",
        "resource": {"group": "example.com", "resource": "widgets"},
        "namespace": "ops",
        "name": "w1",
        "userInfo": {"username": "alice"},
    }
    assert describe_request(request, "ops") == "CREATE widgets.example.com ops/w1 by alice"
    assert describe_request({"operation": "CREATE", "resource": {"resource": "pods"}}, "ops") == (
        "CREATE pods (new)"
    )


@pytest.mark.parametrize(
    ("request_", "said"),
    [
        # Elsewhere: the object is named, the person is not.
        ({"operation": "DELETE", "resource": {"resource": "configmaps"}, "namespace": "prod",
          "name": "settings", "userInfo": {"username": "admin"}},
         "DELETE configmaps prod/settings"),
        # A Secret elsewhere is not named either.
        ({"operation": "DELETE", "resource": {"resource": "secrets"}, "namespace": "prod",
          "name": "db-password", "userInfo": {"username": "admin"}},
         "DELETE secrets in namespace prod"),
        ({"operation": "CREATE", "resource": {"resource": "serviceaccounts"},
          "subResource": "token", "namespace": "prod", "name": "robot"},
         "CREATE serviceaccounts/token in namespace prod"),
        ({"operation": "UPDATE", "resource": {"group": "external-secrets.io",
          "resource": "externalsecrets"}, "namespace": "prod", "name": "aws"},
         "UPDATE externalsecrets.external-secrets.io in namespace prod"),
        # At home, a Secret is named, and so is who asked; words are cut to safe characters.
        ({"operation": "UPDATE", "resource": {"resource": "secrets"}, "namespace": "ops",
          "name": "tls", "userInfo": {"username": "eve\n<script>" + "x" * 200}},
         "UPDATE secrets ops/tls by eve??script?" + "x" * 87 + "~"),
    ],
)  # fmt: skip
def test_a_description_names_nothing_the_backends_namespace_may_not_see(
    request_: dict[str, Any], said: str
) -> None:
    assert describe_request(request_, "ops") == said
