"""The activator's endpoint over a stand-in API server: what it reads to tell a backend that serves
from one put to sleep a moment ago, what it does when it may not read a workload's scale, and
what a caller who is not the API server gets from it: forged paths, requests the covered rules
would never send, dry runs, more waiters than it holds. (`tests/system/test_activation_wait.py`
shows the waits against the real API server.)"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from tests.unit.mock_api import kube_served_by
from zeroscaler.runtime.clock import Clock, ManualClock
from zeroscaler.webhook.activation import Activation, Coverage, Holding
from zeroscaler.webhook.covered import CoveredPaths
from zeroscaler.webhook.intake import Intake, Limits

SCALE = "/apis/apps/v1/namespaces/ops/deployments/guard/scale"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/ops/endpointslices"
REQUESTS = "/api/v1/namespaces/zs/configmaps/wakes"
CONFIGURATION = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/zs-activator"
TOKEN = "Q2FyZWZ1bGx5LWNob3Nlbg"
COVERED = f"/activate/{TOKEN}/{{wait}}/deployment/ops/guard/guard"
REVIEW: dict[str, Any] = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u1",
        "operation": "CREATE",
        "resource": {"group": "example.com", "version": "v1", "resource": "widgets"},
        "namespace": "ops",
        "name": "w1",
        "object": {"metadata": {"name": "w1"}},
    },
}


def _configuration(wait: int) -> dict[str, Any]:
    """The activator's configuration: one covered copy of guard's webhook for widgets in ops."""
    rules = [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"],
              "apiVersions": ["v1"], "resources": ["widgets"]}]  # fmt: skip
    return {
        "metadata": {"name": "zs-activator"},
        "webhooks": [
            {
                "name": "hguard.activator.zeroscaler.io",
                "clientConfig": {"url": "https://127.0.0.1:8443" + COVERED.format(wait=wait)},
                "rules": rules,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}},
            }
        ],
    }


class Server:
    """The few answers the activator asks for; a wake request, once written, is remembered."""

    def __init__(self, scale: int | None, starts: bool = False, wait: int = 2) -> None:
        self.scale = scale  # None: the scale may not be read (403)
        self.starts = starts  # once the wake is asked, the watch sees a new pod's endpoint
        self.wait = wait
        self.requests: dict[str, str] = {}  # the wake requests ConfigMap's data
        self.patches: list[dict[str, Any]] = []
        self.asked: list[str] = []
        self.started_at: float | None = None  # loop time the new endpoint was sent
        self.answered_at: float | None = None  # loop time the activator answered

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.asked.append(f"{request.method} {path}")
        if path == SCALE:
            if self.scale is None:
                return _status(403, "Forbidden")
            spec = {"replicas": self.scale} if self.scale else {}  # zero is left out
            return httpx.Response(200, json={"kind": "Scale", "spec": spec})
        if path == SLICES and request.method == "GET":
            if request.url.params.get("watch"):
                if self.starts and f"PATCH {REQUESTS}" in self.asked:
                    self.started_at = asyncio.get_running_loop().time()
                    event = {"type": "MODIFIED", "object": _slice("p1", "p2")}
                    return httpx.Response(200, content=json.dumps(event).encode() + b"\n")
                await asyncio.sleep(30)  # a watch on which nothing happens
                return httpx.Response(200, content=b"")
            return httpx.Response(200, json={"metadata": {"resourceVersion": "5"},
                                             "items": [_slice("p1")]})  # fmt: skip
        if path == CONFIGURATION:
            return httpx.Response(200, json=_configuration(self.wait))
        if path == REQUESTS and request.method == "GET":
            return httpx.Response(200, json={"data": dict(self.requests)})
        if path == REQUESTS and request.method == "PATCH":
            data = json.loads(request.content)["data"]
            self.patches.append(data)
            for key, value in data.items():
                if value is None:
                    self.requests.pop(key, None)
                else:
                    self.requests[key] = value
            return httpx.Response(200, json={"data": dict(self.requests)})
        return _status(404, "NotFound")


def _slice(*pods: str) -> dict[str, Any]:
    """The guard Service's one EndpointSlice, a ready endpoint for each pod uid."""
    endpoints = [
        {"addresses": ["192.0.2.10"], "targetRef": {"kind": "Pod", "uid": uid}} for uid in pods
    ]
    return {"metadata": {"name": "guard-1"}, "endpoints": endpoints}


def _status(code: int, reason: str) -> httpx.Response:
    return httpx.Response(code, json={"kind": "Status", "reason": reason, "message": reason})


def _answer(
    server: Server,
    wait: int,
    settle: float = 0.0,
    *,
    path: str | None = None,
    review: dict[str, Any] | None = None,
    max_waiting: int = 200,
    clock: Clock | None = None,
) -> tuple[dict[str, Any], CollectorRegistry]:
    server.wait = wait

    async def scenario() -> tuple[dict[str, Any], CollectorRegistry]:
        registry = CollectorRegistry()
        async with kube_served_by(server, connections=4) as kube:
            activation = Activation(
                kube,
                Holding("zs", "wakes", settle, max_waiting),
                Coverage(CoveredPaths(kube, "zs-activator", clock), _labels),
                Intake(Limits()),
                registry,
                clock,
            )
            app = FastAPI()
            app.post("/activate/{rest:path}")(activation.activate)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://a") as client:
                at = path if path is not None else COVERED.format(wait=wait)
                answer = await client.post(at, json=review or REVIEW)
                server.answered_at = asyncio.get_running_loop().time()
                await asyncio.sleep(0.05)  # the wake asked in the background, if it was
        return answer.json()["response"], registry

    return asyncio.run(scenario())


async def _labels(namespace: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": namespace}


def _outcome(registry: CollectorRegistry, outcome: str) -> float:
    labels = {"outcome": outcome}
    return registry.get_sample_value("zeroscaler_activator_requests_total", labels) or 0.0


def test_an_awake_backend_with_a_ready_endpoint_is_answered_at_once() -> None:
    server = Server(scale=1)
    answer, registry = _answer(server, wait=2)
    assert answer == {"uid": "u1", "allowed": True}
    assert _outcome(registry, "ready") == 1
    assert f"PATCH {REQUESTS}" in server.asked  # still activity: the wake asked beside it


def test_the_endpoint_of_a_backend_at_zero_is_not_taken_for_it() -> None:
    server = Server(scale=0)
    answer, registry = _answer(server, wait=2)
    assert answer["allowed"] is True  # allowed at the timeout: its own webhook decides
    assert _outcome(registry, "timeout") == 1
    assert server.asked[:5] == [
        f"GET {CONFIGURATION}",  # the path, looked up: nothing watches it in this test
        f"GET {SCALE}",
        f"GET {SLICES}",
        f"GET {REQUESTS}",  # its keys, once, so that stale ones can be taken out
        f"PATCH {REQUESTS}",
    ]


def test_a_woken_backend_is_answered_once_the_api_server_can_have_its_endpoint() -> None:
    """The new pod's endpoint ends the wait, but the answer waits the settle beyond it: the API
    server resolves the backend's Service from its own watch, which can trail the activator's."""
    server = Server(scale=0, starts=True)
    answer, registry = _answer(server, wait=5, settle=0.3)
    assert answer["allowed"] is True
    assert _outcome(registry, "ready") == 1  # ended by the new endpoint, not the timeout
    assert server.started_at is not None
    assert server.answered_at is not None
    assert server.answered_at - server.started_at >= 0.25  # asyncio may wake 1 tick early


def test_without_leave_to_read_scales_the_endpoints_alone_decide_and_it_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server(scale=None)
    with caplog.at_level(logging.WARNING, logger="zeroscaler.webhook.activation"):
        answer, registry = _answer(server, wait=2)
    assert answer["allowed"] is True
    assert _outcome(registry, "ready") == 1  # as before the scale was read: not failed
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "deployments/scale" in warnings[0]


FORGED = [
    f"/activate/{'A' * 22}/9/deployment/ops/guard/guard",  # the right shape, a guessed token
    f"/activate/{TOKEN}/9/deployment/prod/db/db",  # the token, with another target
    f"/activate/{TOKEN}/2/deployment/ops/guard/guard/..",
    "/activate/9/deployment/ops/guard/guard",  # the form before tokens
]


@pytest.mark.parametrize("path", FORGED)
def test_a_forged_path_is_answered_at_once_having_woken_and_read_nothing(path: str) -> None:
    server = Server(scale=0)
    answer, registry = _answer(server, wait=2, path=path)
    assert answer == {"uid": "u1", "allowed": True}
    assert _outcome(registry, "unknown") == 1
    # At most the activator's own configuration is read again; no workload, no endpoint.
    assert set(server.asked) <= {f"GET {CONFIGURATION}"}


@pytest.mark.parametrize(
    ("change", "outcome"),
    [
        ({"operation": "DELETE"}, "unmatched"),  # the covered rules take CREATE and UPDATE
        ({"namespace": "prod"}, "unmatched"),  # and widgets in ops only
        ({"resource": {"group": "", "version": "v1", "resource": "secrets"}}, "unmatched"),
        ({"dryRun": True}, "dry-run"),  # declared free of side effects on dry runs
    ],
)
def test_a_request_the_api_server_would_not_send_there_or_a_dry_run_wakes_nothing(
    change: dict[str, Any], outcome: str
) -> None:
    server = Server(scale=0)
    review = {**REVIEW, "request": {**REVIEW["request"], **change}}
    answer, registry = _answer(server, wait=2, review=review)
    assert answer == {"uid": "u1", "allowed": True}
    assert _outcome(registry, outcome) == 1
    assert server.asked == [f"GET {CONFIGURATION}"]


def test_more_covered_requests_than_it_holds_are_answered_at_once() -> None:
    server = Server(scale=0)
    answer, registry = _answer(server, wait=2, max_waiting=0)
    assert answer["allowed"] is True
    assert _outcome(registry, "overloaded") == 1
    assert f"PATCH {REQUESTS}" not in server.asked


def test_a_wake_request_takes_out_the_keys_of_backends_no_longer_covered() -> None:
    server = Server(scale=1)
    server.requests = {"deployment_ops_old": "{}", "deployment_prod_gone": "{}"}
    _answer(server, wait=2)
    assert set(server.requests) == {"deployment_ops_guard"}
    written = json.loads(server.requests["deployment_ops_guard"])
    assert written["what"] == "CREATE widgets.example.com ops/w1"


def test_a_wake_request_carries_the_time_of_the_clock_the_activator_is_given() -> None:
    server = Server(scale=1)
    _answer(server, wait=2, clock=ManualClock(datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)))
    written = json.loads(server.requests["deployment_ops_guard"])
    assert written["at"] == "2031-05-06T07:08:09Z"
