"""Table tests for what a workload serves, and for readiness: literal objects, no API."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from zeroscaler.core.links import (
    Link,
    LinkKind,
    Serving,
    find_serving,
    links_of,
    selects,
    serving_notices,
)
from zeroscaler.core.readiness import is_ready, start_bound

VWC: LinkKind = "ValidatingWebhookConfiguration"
MWC: LinkKind = "MutatingWebhookConfiguration"
CRD: LinkKind = "CustomResourceDefinition"
APISVC: LinkKind = "APIService"


def svc(namespace: str, name: str) -> dict[str, str]:
    return {"namespace": namespace, "name": name, "path": "/validate"}


LINK_CASES: list[tuple[str, LinkKind, dict[str, Any], tuple[Link, ...]]] = [
    (
        "each webhook's Service, once",
        VWC,
        {
            "metadata": {"name": "op-validating"},
            "webhooks": [
                {"name": "a.example.com", "clientConfig": {"service": svc("ops", "op-webhook")}},
                {"name": "b.example.com", "clientConfig": {"service": svc("ops", "op-webhook")}},
                {"name": "c.example.com", "clientConfig": {"service": svc("ops", "other")}},
            ],
        },
        (
            Link(VWC, "op-validating", ("ops", "op-webhook")),
            Link(VWC, "op-validating", ("ops", "other")),
        ),
    ),
    (
        "a webhook given by url names no Service: not attributable",
        MWC,
        {
            "metadata": {"name": "by-url"},
            "webhooks": [{"name": "a", "clientConfig": {"url": "https://op.example.com/m"}}],
        },
        (),
    ),
    (
        "no webhooks at all",
        MWC,
        {"metadata": {"name": "empty"}},
        (),
    ),
    (
        "a CRD converted by a webhook",
        CRD,
        {
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "conversion": {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {"service": svc("ops", "converter")},
                        "conversionReviewVersions": ["v1"],
                    },
                }
            },
        },
        (Link(CRD, "widgets.example.com", ("ops", "converter")),),
    ),
    (
        "a CRD without conversion (strategy None) calls nothing",
        CRD,
        {"metadata": {"name": "plain.example.com"}, "spec": {"conversion": {"strategy": "None"}}},
        (),
    ),
    (
        "an APIService backed by a Service",
        APISVC,
        {
            "metadata": {"name": "v1beta1.metrics.example.com"},
            "spec": {"service": {"namespace": "ops", "name": "metrics", "port": 443}},
        },
        (Link(APISVC, "v1beta1.metrics.example.com", ("ops", "metrics")),),
    ),
    (
        "a local APIService (the API server's own group) has no Service",
        APISVC,
        {"metadata": {"name": "v1.apps"}, "spec": {"group": "apps"}},
        (),
    ),
]


@pytest.mark.parametrize(
    ("kind", "obj", "expected"), [c[1:] for c in LINK_CASES], ids=[c[0] for c in LINK_CASES]
)
def test_links_of(kind: LinkKind, obj: dict[str, Any], expected: tuple[Link, ...]) -> None:
    assert links_of(kind, obj) == expected


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"app": "op"}, {"app": "op", "tier": "x"}, True),
        ({"app": "op", "tier": "y"}, {"app": "op", "tier": "x"}, False),
        ({"app": "op"}, {}, False),
        ({}, {"app": "op"}, False),  # no selector: endpoints kept by hand
        (None, {"app": "op"}, False),
    ],
)
def test_selects(selector: dict[str, str] | None, labels: dict[str, str], expected: bool) -> None:
    assert selects(selector, labels) is expected


HOOK = Link(VWC, "op-validating", ("ops", "op-webhook"))
CONVERTER = Link(CRD, "widgets.example.com", ("ops", "converter"))
ELSEWHERE = Link(APISVC, "v1.metrics.example.com", ("other", "op-webhook"))
LINKS = {
    ("ops", "op-webhook"): [HOOK],
    ("ops", "converter"): [CONVERTER],
    ("other", "op-webhook"): [ELSEWHERE],
}

Services = list[tuple[str, dict[str, str] | None]]
SERVING_CASES: list[tuple[str, dict[str, str], Services, Serving]] = [
    (
        "one Service selects its pods and backs a webhook",
        {"app": "op"},
        [("op-webhook", {"app": "op"}), ("converter", {"app": "other"})],
        Serving((HOOK,)),
    ),
    (
        "two Services: a webhook and a conversion, sorted",
        {"app": "op", "role": "manager"},
        [("op-webhook", {"app": "op"}), ("converter", {"role": "manager"})],
        Serving((CONVERTER, HOOK)),
    ),
    (
        "a Service of the same name in another namespace is not its own",
        {"app": "x"},
        [("op-webhook", {"app": "y"})],
        Serving(),
    ),
    (
        "a Service selecting it that nothing calls",
        {"app": "op"},
        [("plain", {"app": "op"})],
        Serving(),
    ),
]


@pytest.mark.parametrize(
    ("labels", "services", "expected"),
    [c[1:] for c in SERVING_CASES],
    ids=[c[0] for c in SERVING_CASES],
)
def test_find_serving(
    labels: dict[str, str],
    services: Services,
    expected: Serving,
) -> None:
    assert find_serving("ops", labels, services, LINKS) == expected


def test_what_is_served_says_why_it_stays_awake() -> None:
    both = Serving((CONVERTER, HOOK))
    assert both.api == (CONVERTER,)
    assert both.admission == (HOOK,)
    assert both.keeps_awake
    assert not Serving().keeps_awake
    # The strongest reason first: a conversion breaks reads, a webhook writes.
    assert both.reason() == (
        "backs CustomResourceDefinition widgets.example.com (Service ops/converter); "
        "never put to sleep"
    )
    assert serving_notices(both) == [
        (
            "BacksAPI",
            "backs CustomResourceDefinition widgets.example.com (Service ops/converter): reads "
            "of its custom resources at other versions fail while it sleeps; never put to sleep",
        ),
        (
            "BacksWebhook",
            "backs ValidatingWebhookConfiguration op-validating (Service ops/op-webhook): the "
            "API server calls it on admission, and no activator can answer for it while it "
            "sleeps (the activator is off); not put to sleep while that lasts",
        ),
    ]
    answered = dataclasses.replace(both, unanswered=None)
    assert answered.keeps_awake  # a conversion still keeps it awake
    assert [reason for reason, _ in serving_notices(answered)] == ["BacksAPI"]
    webhook_only = dataclasses.replace(Serving((HOOK,)), unanswered=None)
    assert not webhook_only.keeps_awake


READY_CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, int, bool | None]] = [
    ("all replicas ready", {"replicas": 3}, {"observedGeneration": 4, "readyReplicas": 3}, 4, True),
    ("more in a rollout", {"replicas": 2}, {"observedGeneration": 4, "readyReplicas": 3}, 4, True),
    ("some ready", {"replicas": 3}, {"observedGeneration": 4, "readyReplicas": 1}, 4, False),
    ("none ready: no readyReplicas", {"replicas": 1}, {"observedGeneration": 4}, 4, False),
    (
        "ready counted before the scale-up: stale",
        {"replicas": 3},
        {"observedGeneration": 3, "readyReplicas": 3},
        4,
        False,
    ),
    ("no status yet, pods wanted", {"replicas": 1}, None, 1, False),
    ("no status, at zero", {"replicas": 0}, None, 1, True),
    ("paused: makes no pods, nothing to wait for", {"replicas": 3, "paused": True}, {}, 2, None),
]


@pytest.mark.parametrize(
    ("spec", "status", "generation", "expected"),
    [c[1:] for c in READY_CASES],
    ids=[c[0] for c in READY_CASES],
)
def test_is_ready(
    spec: dict[str, Any], status: dict[str, Any] | None, generation: int, expected: bool | None
) -> None:
    assert is_ready(spec, status, generation) is expected


def test_start_bound_is_at_least_ten_minutes() -> None:
    assert start_bound(5.0) == 600.0
    assert start_bound(3600.0) == 3600.0
