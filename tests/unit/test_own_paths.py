"""The webhook answers reviews only at a path its own configuration holds, and the controller
gives a Service-backed webhook without a path a secret one: a caller who is not the API server,
and cannot read webhook configurations, gets a 404 and learns nothing."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from typing import Any

import httpx
import jsonpatch
import pytest

from tests.unit.mock_api import kube_served_by
from zeroscaler.controller.context import Context
from zeroscaler.controller.secret_path import SecretPath
from zeroscaler.core.webhook_paths import paths_of, secret_path_patch
from zeroscaler.runtime.clock import ManualClock
from zeroscaler.webhook.own_paths import OwnPaths

PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/zeroscaler"
SERVICE = {"namespace": "zeroscaler", "name": "zeroscaler-webhook", "port": 443}


def configuration(*clients: dict[str, Any], version: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": "zeroscaler", "resourceVersion": version},
        "webhooks": [
            {"name": f"w{i}.zeroscaler.io", "clientConfig": c} for i, c in enumerate(clients)
        ],
    }


class Server:
    """The webhook's configuration, read and JSON-patched as the API server would."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.patches: list[list[dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != PATH:
            return httpx.Response(404, json={"reason": "NotFound"})
        if request.method == "PATCH":
            ops = json.loads(request.content)
            self.patches.append(ops)
            try:
                patched = jsonpatch.apply_patch(copy.deepcopy(self.obj), ops)
            except jsonpatch.JsonPatchTestFailed:
                return httpx.Response(409, json={"reason": "Conflict"})
            patched["metadata"]["resourceVersion"] = str(
                int(patched["metadata"]["resourceVersion"]) + 1
            )
            self.obj = patched
        return httpx.Response(200, json=self.obj)


@pytest.mark.parametrize(
    ("clients", "paths"),
    [
        ([{"service": SERVICE}], {"/"}),  # no path: the API server calls the root
        ([{"service": {**SERVICE, "path": "/mutate/abc"}}], {"/mutate/abc"}),
        ([{"url": "https://127.0.0.1:9443/mutate"}], {"/mutate"}),
        ([{"url": "https://127.0.0.1:9443"}], {"/"}),
    ],
)
def test_the_paths_a_configuration_is_called_at(
    clients: list[dict[str, Any]], paths: set[str]
) -> None:
    assert paths_of(configuration(*clients)) == paths


def test_a_service_without_a_path_is_given_the_token_another_webhook_has_or_a_new_one() -> None:
    fresh = secret_path_patch(configuration({"service": SERVICE}), "NEW")
    assert fresh == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/webhooks/0/clientConfig/service/path", "value": "/mutate/NEW"},
    ]
    two = configuration({"service": {**SERVICE, "path": "/mutate/OLD"}}, {"service": SERVICE})
    assert secret_path_patch(two, "NEW") == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/webhooks/1/clientConfig/service/path", "value": "/mutate/OLD"},
    ]
    # A path given (a fixed one, or one already secret) and a URL are left as they are.
    assert (
        secret_path_patch(configuration({"service": {**SERVICE, "path": "/mutate"}}), "N") is None
    )
    assert secret_path_patch(configuration({"url": "https://127.0.0.1:9443/mutate"}), "N") is None


def test_the_leader_writes_the_secret_path_and_the_webhook_then_answers_only_there() -> None:
    server = Server(configuration({"service": SERVICE}))
    leading = [False]

    async def scenario() -> list[bool]:
        kube = kube_served_by(server)
        context = Context(ManualClock(), lambda: leading[0], lambda _: None, lambda c: c.close())
        keeper = SecretPath(kube, context, "zeroscaler")
        running = asyncio.create_task(keeper.run())
        await asyncio.sleep(0.05)
        assert server.patches == []  # a standby writes nothing
        leading[0] = True
        keeper.leading()
        await asyncio.sleep(0.1)
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        own = OwnPaths(kube, "zeroscaler")  # nothing watches here: a review reads it afresh
        path = server.obj["webhooks"][0]["clientConfig"]["service"]["path"]
        return [await own.accepts(path), await own.accepts("/mutate"), await own.accepts("/")]

    assert asyncio.run(scenario()) == [True, False, False]
    [ops] = server.patches
    token = ops[1]["value"].removeprefix("/mutate/")
    assert len(token) >= 24  # 18 random bytes


def test_without_a_configuration_only_the_fixed_path_is_answered() -> None:
    async def scenario() -> list[bool]:
        own = OwnPaths(None, "")
        return [await own.accepts(p) for p in ("/mutate", "/", "/mutate/x")]

    assert asyncio.run(scenario()) == [True, False, False]
