"""The controller's /metrics over TLS, only to a bearer token the API server allows to get it:
scrapes as a hostile caller, an unknown user and Prometheus would make them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from localcluster.processes import free_port
from tests.unit.mock_api import kube_served_by
from zeroscaler.controller.metrics import serve_http
from zeroscaler.controller.scrapers import ScrapeAccess
from zeroscaler.controller.supervisor import self_signed_tls
from zeroscaler.runtime.clock import ManualClock

TOKENS = {"prometheus-token": "system:serviceaccount:monitoring:prometheus", "tenant": "alice"}


class API:
    """TokenReviews and SubjectAccessReviews: Prometheus may get /metrics, alice may not."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = json.loads(request.content)
        self.asked.append(body["kind"])
        if body["kind"] == "TokenReview":
            user = TOKENS.get(body["spec"]["token"])
            status = {"authenticated": True, "user": {"username": user}} if user else {}
            return httpx.Response(201, json={**body, "status": status})
        spec = body["spec"]
        allowed = spec["user"] == TOKENS["prometheus-token"] and spec["nonResourceAttributes"] == {
            "path": "/metrics",
            "verb": "get",
        }
        return httpx.Response(201, json={**body, "status": {"allowed": allowed}})


@pytest.mark.parametrize(
    ("authorization", "status", "asked"),
    [
        (None, 401, []),
        ("Basic cHJvbWV0aGV1czo=", 401, []),
        ("Bearer " + "x" * 20_000, 401, []),  # no token the API server issues is that long
        ("Bearer made-up", 401, ["TokenReview"]),
        ("Bearer tenant", 403, ["TokenReview", "SubjectAccessReview"]),
        ("Bearer prometheus-token", 200, ["TokenReview", "SubjectAccessReview"]),
    ],
)
def test_a_scrape_needs_a_token_whose_user_may_get_the_path(
    authorization: str | None, status: int, asked: list[str]
) -> None:
    api = API()

    async def scenario() -> list[int]:
        access = ScrapeAccess(kube_served_by(api), ManualClock())
        headers = {"authorization": authorization} if authorization else {}
        return [await access.status(headers, "/metrics") for _ in range(3)]

    assert asyncio.run(scenario()) == [status] * 3
    assert api.asked == asked  # the answer is kept: asked once for three scrapes


def test_an_answer_is_kept_for_its_time_only() -> None:
    api, clock = API(), ManualClock()

    async def scenario() -> None:
        access = ScrapeAccess(kube_served_by(api), clock, ttl=60)
        headers = {"authorization": "Bearer prometheus-token"}
        await access.status(headers, "/metrics")
        clock.advance(59)
        await access.status(headers, "/metrics")
        clock.advance(2)
        await access.status(headers, "/metrics")

    asyncio.run(scenario())
    assert api.asked.count("TokenReview") == 2


def test_the_server_answers_probes_to_anyone_and_metrics_only_to_a_permitted_token() -> None:
    api = API()

    async def scenario() -> list[tuple[str, int, str]]:
        port = free_port()
        guard = ScrapeAccess(kube_served_by(api), ManualClock()).status
        routes = {
            "/healthz": lambda _: (200, "text/plain", b"ok\n"),
            "/metrics": lambda _: (200, "text/plain", b"zeroscaler_workloads 3\n"),
        }
        server = await serve_http(
            "127.0.0.1", port, routes, tls=self_signed_tls("127.0.0.1"), guard=guard
        )
        found = []
        async with httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}", verify=False) as c:
            for path, token in [
                ("/healthz", None),
                ("/metrics", None),
                ("/metrics", "tenant"),
                ("/metrics", "prometheus-token"),
            ]:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                answer = await c.get(path, headers=headers)
                found.append((path, answer.status_code, answer.text))
        server.close()
        return found

    assert asyncio.run(scenario()) == [
        ("/healthz", 200, "ok\n"),
        ("/metrics", 401, "unauthorized\n"),
        ("/metrics", 403, "forbidden\n"),
        ("/metrics", 200, "zeroscaler_workloads 3\n"),
    ]
