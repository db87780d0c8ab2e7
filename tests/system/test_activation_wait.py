"""What the activator waits for, against the real API server: a covered request for a backend put
to sleep a moment ago is held until a pod started by the wake serves, not answered on the word of
the stopping pod's endpoint, which its EndpointSlice still calls ready for a moment.

The activator runs in this process (its own FastAPI routes over an in-memory transport); the
workload, its scale, the EndpointSlice and the wake requests are real objects. No controller
runs: the test plays the wake by scaling the workload up and rewriting the slice as the
EndpointSlice controller would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from localcluster import netns
from localcluster.cluster import Cluster
from testkit.steps import step
from zeroscaler.api import Kube
from zeroscaler.api.credentials import load_access
from zeroscaler.core.coverage import request_key
from zeroscaler.core.workloads import workload_path
from zeroscaler.webhook.activation import Activation, Coverage, Holding
from zeroscaler.webhook.covered import CoveredPaths
from zeroscaler.webhook.intake import Intake, Limits

REQUESTS = "wake-requests"
LABELS = {"app": "guard"}


@dataclass
class Backend:
    kube: Kube
    namespace: str
    client: httpx.AsyncClient
    registry: CollectorRegistry

    async def request(self, wait: int) -> dict[str, Any]:
        path = _path(self.namespace, wait)
        answer = await self.client.post(path, json=_review(self.namespace), timeout=60)
        answer.raise_for_status()
        return dict(answer.json()["response"])

    def answered(self, outcome: str) -> float:
        labels = {"outcome": outcome}
        return self.registry.get_sample_value("zeroscaler_activator_requests_total", labels) or 0

    async def wake_asked(self) -> bool:
        path = f"/api/v1/namespaces/{self.namespace}/configmaps/{REQUESTS}"
        data = (await self.kube.get(path)).get("data") or {}
        return request_key("Deployment", self.namespace, "guard") in data

    async def endpoints(self, *pods: tuple[str, bool]) -> None:
        """The guard Service's one EndpointSlice, holding these pods (uid, ready)."""
        await self.kube.patch(
            f"{_slices(self.namespace)}/guard-1", {"endpoints": [_endpoint(*p) for p in pods]}
        )

    async def scale(self, replicas: int) -> None:
        path = workload_path("Deployment", self.namespace, "guard") + "/scale"
        await self.kube.patch(path, {"spec": {"replicas": replicas}})


@asynccontextmanager
async def _backend(cluster: Cluster, namespace: str, replicas: int) -> AsyncIterator[Backend]:
    async with Kube(load_access(str(cluster.kubeconfig))) as kube:
        core = f"/api/v1/namespaces/{namespace}"
        await kube.create(f"{core}/configmaps", {"metadata": {"name": REQUESTS}})
        await kube.create(workload_path("Deployment", namespace), _deployment(replicas))
        slice_ = {
            "metadata": {"name": "guard-1", "labels": {"kubernetes.io/service-name": "guard"}},
            "addressType": "IPv4",
            "endpoints": [_endpoint("old-pod", True)],
            "ports": [{"port": 9443, "protocol": "TCP"}],
        }
        await kube.create(_slices(namespace), slice_)
        configuration = f"activator-{namespace}"
        await kube.create(CONFIGURATIONS, _configuration(configuration, namespace))
        registry = CollectorRegistry()
        app = FastAPI()
        activation = Activation(
            kube,
            Holding(namespace, REQUESTS),
            Coverage(CoveredPaths(kube, configuration), _no_labels),
            Intake(Limits()),
            registry,
        )
        app.post("/activate/{rest:path}")(activation.activate)
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://activator") as c:
                yield Backend(kube, namespace, c, registry)
        finally:
            await kube.delete(f"{CONFIGURATIONS}/{configuration}")


def test_a_stopping_pods_endpoint_is_not_taken_for_the_woken_backend(
    cluster: Cluster, ns: str
) -> None:
    async def scenario() -> None:
        # Put to sleep a moment ago: the workload is at zero, its pod's endpoint still "ready".
        async with _backend(cluster, ns, replicas=0) as guard:
            with step("nothing wakes it: the request waits its whole time, then is allowed"):
                assert (await guard.request(wait=2))["allowed"] is True
                assert guard.answered("timeout") == 1
                assert guard.answered("ready") == 0
                assert await guard.wake_asked()

            with step("woken while a request waits: answered once a pod of the wake is ready"):
                waiting = asyncio.create_task(guard.request(wait=20))
                await guard.scale(1)
                await guard.endpoints(("old-pod", False), ("new-pod", False))
                await asyncio.sleep(0.5)
                assert not waiting.done(), "answered before any pod of the wake was ready"
                await guard.endpoints(("new-pod", True))
                assert (await waiting)["allowed"] is True
                assert guard.answered("ready") == 1

    asyncio.run(scenario())


def test_an_awake_backend_is_answered_at_once_and_its_request_still_counts(
    cluster: Cluster, ns: str
) -> None:
    async def scenario() -> None:
        async with _backend(cluster, ns, replicas=1) as guard:
            # Nothing changes while it is asked: waiting at all would end in a timeout.
            assert (await guard.request(wait=20))["allowed"] is True
            assert guard.answered("ready") == 1
            for _ in range(100):  # the wake is asked in the background: activity all the same
                if await guard.wake_asked():
                    break
                await asyncio.sleep(0.1)
            assert await guard.wake_asked()

    asyncio.run(scenario())


CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
TOKEN = "cGF0aC10b2tlbi1mb3ItdGVzdHM"


def _path(namespace: str, wait: int) -> str:
    return f"/activate/{TOKEN}/{wait}/deployment/{namespace}/guard/guard"


def _configuration(name: str, namespace: str) -> dict[str, Any]:
    """An activator configuration covering guard's webhook, at the two waits the tests ask for.
    Its rules name a kind no test creates, so the API server never calls it."""
    rule = {"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"],
            "resources": ["widgets"]}  # fmt: skip
    webhooks = [
        {
            "name": f"h{wait}.activator.zeroscaler.io",
            "clientConfig": {"url": f"https://{netns.NODE_ADDRESS}:9{_path(namespace, wait)}"},
            "rules": [rule],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Ignore",
            "sideEffects": "NoneOnDryRun",
            "admissionReviewVersions": ["v1"],
        }
        for wait in (2, 20)
    ]
    return {"metadata": {"name": name}, "webhooks": webhooks}


async def _no_labels(namespace: str) -> None:
    return None  # not known: the namespace selector is not what these tests are about


def _slices(namespace: str) -> str:
    return f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"


def _deployment(replicas: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "guard"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": LABELS},
            "template": {
                "metadata": {"labels": LABELS},
                # Placed nowhere: no node carries this label, so no pod runs for it.
                "spec": {
                    "nodeSelector": {"zeroscaler.io/test": "nowhere"},
                    "containers": [{"name": "guard", "image": "guard:test"}],
                },
            },
        },
    }


def _endpoint(uid: str, ready: bool) -> dict[str, Any]:
    return {
        "addresses": [netns.NODE_ADDRESS],  # never dialled: no webhook is registered
        "conditions": {"ready": ready, "terminating": not ready},
        "targetRef": {"kind": "Pod", "name": uid, "uid": uid},
    }


def _review(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-widget",
            "operation": "CREATE",
            "namespace": namespace,
            "resource": {"group": "example.com", "version": "v1", "resource": "widgets"},
            "object": {"metadata": {"name": "w1"}},
        },
    }
