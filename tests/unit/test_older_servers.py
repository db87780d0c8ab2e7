"""Against API servers lacking something zeroscaler uses: it degrades and says so, never crashes."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from zeroscaler.api import Kube
from zeroscaler.api.credentials import ClusterAccess
from zeroscaler.api.discovery import NO_AGGREGATED_DISCOVERY
from zeroscaler.cli.session import Failure, Session
from zeroscaler.core.kinds import APIResource

# What a server without aggregated discovery answers (Kubernetes before 1.26, or a proxy that
# drops the Accept parameters): the root lists, then one APIResourceList per group version.
LEGACY: dict[str, dict[str, Any]] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/apis": {
        "kind": "APIGroupList",
        "groups": [
            {
                "name": "apps",
                "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"},
            },
            {
                "name": "example.com",
                "versions": [
                    {"groupVersion": "example.com/v2", "version": "v2"},
                    {"groupVersion": "example.com/v1", "version": "v1"},
                ],
                "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"},
            },
            {
                "name": "metrics.k8s.io",
                "preferredVersion": {
                    "groupVersion": "metrics.k8s.io/v1beta1",
                    "version": "v1beta1",
                },
            },
        ],
    },
    "/api/v1": {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {"name": "configmaps", "singularName": "configmap", "namespaced": True,
             "kind": "ConfigMap", "verbs": ["get", "list", "watch"], "shortNames": ["cm"]},
            {"name": "namespaces", "singularName": "namespace", "namespaced": False,
             "kind": "Namespace", "verbs": ["get", "list", "watch"]},
            {"name": "namespaces/status", "singularName": "", "namespaced": False,
             "kind": "Namespace", "verbs": ["get", "patch"]},
        ],
    },
    "/apis/apps/v1": {
        "kind": "APIResourceList",
        "groupVersion": "apps/v1",
        "resources": [
            {"name": "deployments", "singularName": "deployment", "namespaced": True,
             "kind": "Deployment", "verbs": ["get", "list", "watch", "patch"],
             "shortNames": ["deploy"]},
            {"name": "deployments/scale", "namespaced": True, "kind": "Scale",
             "group": "autoscaling", "version": "v1", "verbs": ["get", "patch"]},
            {"name": "deployments/status", "namespaced": True, "kind": "Deployment",
             "verbs": ["get"]},
        ],
    },
    "/apis/example.com/v1": {
        "kind": "APIResourceList",
        "groupVersion": "example.com/v1",
        "resources": [
            {"name": "widgets", "singularName": "widget", "namespaced": True, "kind": "Widget",
             "verbs": ["list", "watch"]},
        ],
    },
}  # fmt: skip

EXPECTED = {
    APIResource("", "v1", "configmaps", "ConfigMap", True,
                frozenset({"get", "list", "watch"}), frozenset(), "configmap", ("cm",)),
    APIResource("", "v1", "namespaces", "Namespace", False,
                frozenset({"get", "list", "watch"}), frozenset({"status"}), "namespace"),
    APIResource("apps", "v1", "deployments", "Deployment", True,
                frozenset({"get", "list", "watch", "patch"}), frozenset({"scale", "status"}),
                "deployment", ("deploy",)),
    APIResource("example.com", "v1", "widgets", "Widget", True,
                frozenset({"list", "watch"}), frozenset(), "widget"),
}  # fmt: skip

AGGREGATED_APPS: dict[str, Any] = {
    "metadata": {"name": "apps"},
    "versions": [
        {
            "version": "v1",
            "resources": [
                {
                    "resource": "deployments",
                    "responseKind": {"group": "", "version": "", "kind": "Deployment"},
                    "scope": "Namespaced",
                    "singularResource": "deployment",
                    "verbs": ["get", "list", "watch", "patch"],
                    "shortNames": ["deploy"],
                    "subresources": [{"subresource": "scale"}, {"subresource": "status"}],
                }
            ],
        }
    ],
}


def _transport(answers: dict[str, httpx.Response], seen: list[httpx.Request]) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.get(request.url.path) or httpx.Response(404, json={"kind": "Status"})

    return httpx.AsyncClient(base_url="https://127.0.0.1:1", transport=httpx.MockTransport(handler))


def _served_by(answers: dict[str, httpx.Response], seen: list[httpx.Request]) -> Kube:
    kube = Kube(ClusterAccess(server="https://127.0.0.1:1"))
    kube.http = _transport(answers, seen)
    return kube


def _legacy_server(overrides: dict[str, httpx.Response] | None = None) -> dict[str, httpx.Response]:
    answers = {path: httpx.Response(200, json=body) for path, body in LEGACY.items()}
    return {**answers, **(overrides or {})}


async def test_a_server_without_aggregated_discovery_is_asked_group_by_group(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[httpx.Request] = []
    kube = _served_by(_legacy_server(), seen)
    with caplog.at_level(logging.WARNING, logger="zeroscaler.api.discovery"):
        first, second = await kube.discover(), await kube.discover()
    assert kube.aggregated_discovery is False
    assert set(first) == set(second) == EXPECTED
    # The preferred version only; said once, not at every refresh.
    assert "/apis/example.com/v2" not in {r.url.path for r in seen}
    assert [r.getMessage() for r in caplog.records].count(NO_AGGREGATED_DISCOVERY) == 1


async def test_a_group_that_fails_to_answer_is_left_out_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = httpx.Response(503, json={"kind": "Status", "message": "service unavailable"})
    kube = _served_by(_legacy_server({"/apis/metrics.k8s.io/v1beta1": down}), [])
    with caplog.at_level(logging.WARNING, logger="zeroscaler.api.discovery"):
        assert set(await kube.discover()) == EXPECTED
    assert any(
        "apis/metrics.k8s.io/v1beta1 failed, leaving it out: 503" in r.getMessage()
        for r in caplog.records
    )


async def test_aggregated_discovery_is_asked_first_and_read_when_served() -> None:
    seen: list[httpx.Request] = []
    answers = {
        "/api": httpx.Response(200, json={"kind": "APIGroupDiscoveryList", "items": []}),
        "/apis": httpx.Response(
            200,
            json={
                "apiVersion": "apidiscovery.k8s.io/v2beta1",
                "kind": "APIGroupDiscoveryList",
                "items": [AGGREGATED_APPS],
            },
        ),
    }
    kube = _served_by(answers, seen)
    found = await kube.discover()
    assert kube.aggregated_discovery is True
    assert found == [
        APIResource("apps", "v1", "deployments", "Deployment", True,
                    frozenset({"get", "list", "watch", "patch"}), frozenset({"scale", "status"}),
                    "deployment", ("deploy",)),
    ]  # fmt: skip
    assert [r.url.path for r in seen] == ["/api", "/apis"]
    accept = seen[0].headers["Accept"].split(",")
    assert accept[0] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    assert accept[-1] == "application/json"


async def test_the_cli_says_which_api_it_misses_when_self_subject_review_is_not_served() -> None:
    session = Session(ClusterAccess(server="https://127.0.0.1:1"))
    session.kube.http = _transport({}, [])  # before 1.28: every path answers 404
    with pytest.raises(Failure, match=r"does not serve SelfSubjectReview .*1\.28 or later"):
        await session.username()
