"""What one more managed workload costs the controller's own memory, measured on its own.

The real `Controller` runs in this process over an API served by a function (`httpx.MockTransport`):
discovery, namespaces, RBAC granting the workloads' ServiceAccount its watches, and N asleep
Deployments shaped as the scale row leaves them (each watching one of 50 custom types in one
namespace, its census recorded). The watched types hold no objects, so what grows with N is the
controller's own state: each workload's record and the object it keeps, its interest, its places
in the shared watches' indexes and the queue. tracemalloc counts the Python heap while the
controller holds N workloads, reconciled and the start's warming over (its index of who names
what is the start's, not the workloads'), for two sizes; the cost of one more workload is the
growth between them over the workloads added, which leaves out what does not grow with N (the
modules, the 50 informers, discovery).

The answers are serialized before tracemalloc starts, so the fake API's own copy is not counted.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from bench.workloads import GROUP, NAMESPACE, SCOPES, TIMEOUT, TYPES, deployment, kind_of, scope_of
from zeroscaler.api import ClientLimits, Kube
from zeroscaler.api.credentials import ClusterAccess
from zeroscaler.controller.assembly import Controller
from zeroscaler.controller.flags import ControllerSettings
from zeroscaler.core.annotations import CENSUS, asleep_annotations

SLEPT_AT = datetime(2026, 12, 1, 12, tzinfo=UTC)


def _resource(name: str, kind: str, verbs: list[str], *, namespaced: bool = True) -> dict[str, Any]:
    return {
        "resource": name,
        "responseKind": {"group": "", "version": "", "kind": kind},
        "scope": "Namespaced" if namespaced else "Cluster",
        "verbs": verbs,
    }


def _group(name: str, version: str, resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "versions": [{"version": version, "resources": resources}]}


WATCH = ["get", "list", "watch"]
WRITE = [*WATCH, "create", "update", "patch", "delete"]


def _discovery() -> tuple[dict[str, Any], dict[str, Any]]:
    """/api and /apis as aggregated discovery answers them."""
    core = _group(
        "",
        "v1",
        [
            _resource("namespaces", "Namespace", WATCH, namespaced=False),
            _resource("configmaps", "ConfigMap", WRITE),
            _resource("services", "Service", WATCH),
            _resource("serviceaccounts", "ServiceAccount", WATCH),
            _resource("events", "Event", WRITE),
        ],
    )
    groups = [
        _group(
            "apps",
            "v1",
            [
                _resource("deployments", "Deployment", WRITE),
                _resource("statefulsets", "StatefulSet", WRITE),
            ],
        ),
        _group(
            "autoscaling",
            "v2",
            [_resource("horizontalpodautoscalers", "HorizontalPodAutoscaler", WATCH)],
        ),
        _group(
            "rbac.authorization.k8s.io",
            "v1",
            [
                _resource("roles", "Role", WATCH),
                _resource("rolebindings", "RoleBinding", WATCH),
                _resource("clusterroles", "ClusterRole", WATCH, namespaced=False),
                _resource("clusterrolebindings", "ClusterRoleBinding", WATCH, namespaced=False),
            ],
        ),
        _group(
            GROUP,
            "v1",
            [_resource(kind_of(t)[1], kind_of(t)[0], WATCH) for t in range(TYPES)],
        ),
    ]
    listed = {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2"}
    return {**listed, "items": [core]}, {**listed, "items": groups}


def asleep_deployment(i: int) -> dict[str, Any]:
    """Workload number i, asleep: what the scale row's workloads look like once all sleep."""
    kind, plural = kind_of(i % TYPES)
    annotations = {
        "zeroscaler.io/idle-timeout": TIMEOUT,
        "zeroscaler.io/watched-kinds": f"{kind}.{GROUP}",
        "zeroscaler.io/watch-namespaces": scope_of(i),
        **asleep_annotations(1, SLEPT_AT, SLEPT_AT),
        CENSUS: f"{plural}.{GROUP}=0",
    }
    obj = deployment(f"op-{i:05d}", annotations)
    obj["metadata"].update(
        namespace=NAMESPACE,
        uid=f"00000000-0000-4000-8000-{i:012d}",
        resourceVersion=str(100 + i),
        generation=2,
        labels=obj["spec"]["selector"]["matchLabels"],
    )
    obj["spec"]["replicas"] = 0
    obj["status"] = {"observedGeneration": 2}
    return obj


def _rbac() -> dict[str, list[dict[str, Any]]]:
    role = {
        "metadata": {"name": "zs-bench-watch", "resourceVersion": "1"},
        "rules": [{"apiGroups": [GROUP], "resources": ["*"], "verbs": WATCH}],
    }
    binding = {
        "metadata": {"name": "zs-bench-watch", "resourceVersion": "1"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "zs-bench-watch",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": NAMESPACE}],
    }
    return {
        "/apis/rbac.authorization.k8s.io/v1/clusterroles": [role],
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings": [binding],
    }


def _namespaces() -> list[dict[str, Any]]:
    names = [NAMESPACE, *(f"{NAMESPACE}-{k}" for k in range(SCOPES))]
    return [
        {
            "metadata": {
                "name": n,
                "resourceVersion": "1",
                "labels": {"zeroscaler.io/enabled": "true"} if n == NAMESPACE else {},
            }
        }
        for n in names
    ]


class FakeAPI:
    """Answers what the controller asks while it starts and holds its workloads: lists from
    bytes made up front, watches that stay open and quiet, and every access review allowed."""

    def __init__(self, workloads: int) -> None:
        api, apis = _discovery()
        collections = {
            "/api/v1/namespaces": _namespaces(),
            "/apis/apps/v1/deployments": [asleep_deployment(i) for i in range(workloads)],
            **_rbac(),
        }
        self._answers = {"/api": json.dumps(api).encode(), "/apis": json.dumps(apis).encode()}
        for path, items in collections.items():
            body = {"kind": "List", "metadata": {"resourceVersion": "1000000"}, "items": items}
            self._answers[path] = json.dumps(body).encode()
        empty = {"kind": "List", "metadata": {"resourceVersion": "1000000"}, "items": []}
        self._empty = json.dumps(empty).encode()
        self._allowed = json.dumps({"status": {"allowed": True}}).encode()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path.endswith("accessreviews"):
            return httpx.Response(201, content=self._allowed)
        if request.method != "GET":
            return httpx.Response(404, json={"kind": "Status", "reason": "NotFound"})
        if request.url.params.get("watch") in ("true", "1"):
            return httpx.Response(200, stream=_Quiet())
        return httpx.Response(200, content=self._answers.get(path, self._empty))


class _Quiet(httpx.AsyncByteStream):
    """A watch on which nothing happens, open until the client goes away."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await asyncio.Event().wait()
        yield b""  # never reached


@dataclass(frozen=True)
class Held:
    workloads: int
    traced_bytes: int  # the whole Python heap
    object_bytes: int  # of which the Deployments as the workload watch stores them
    seconds: float  # from start to every workload reconciled


def deep_bytes(roots: Iterable[object]) -> int:
    """The bytes of `roots` and all they hold, each object counted once however often shared
    (an interned string held by 10,000 workloads costs once)."""
    seen: set[int] = set()
    total = 0
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, Mapping):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
    return total


class Failures(logging.Handler):
    """Counts what the controller logs as failed: a reconcile that failed measures nothing, nor a
    start that stalled (the collector it paused then ran mid-start)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.ERROR or "failed" in message or "stalled" in message:
            self.messages.append(message)


async def _hold(workloads: int, limit: float = 300) -> Held:
    """Start a Controller over `workloads` asleep Deployments; the traced heap once all are
    managed."""
    fake = FakeAPI(workloads)
    gc.collect()
    tracemalloc.start()
    began = time.monotonic()
    settings = ControllerSettings(streaming_lists=False, metrics_port=0, workload_metrics=True)
    kube = Kube(
        ClusterAccess(server="https://127.0.0.1:1"),
        ClientLimits(max_connections=settings.max_connections),
        transport=httpx.MockTransport(fake),
    )
    scaler = Controller(kube, settings)
    failures = Failures()
    logging.getLogger("zeroscaler").addHandler(failures)
    run = asyncio.create_task(scaler.run())
    try:
        while time.monotonic() - began < limit:
            await asyncio.sleep(0.2)
            held = [w for w in scaler.workloads.values() if w.managed and w.watch.interest]
            # Warming's index of who names what lives only until every workload has had its
            # first look (250 B a workload here): the start's, not what a workload keeps.
            if len(held) == workloads and not len(scaler.queue) and not scaler.warming.active:
                break
        else:
            raise RuntimeError(f"{workloads} workloads were not all managed in {limit:.0f} s")
        seconds = time.monotonic() - began
        if failures.messages:
            raise RuntimeError(f"the controller failed while starting: {failures.messages[0]}")
        gc.collect()
        traced, _ = tracemalloc.get_traced_memory()
        stored = [o for i in scaler.workload_informers.values() for o in i.store.values()]
        if len(stored) != workloads:
            raise RuntimeError(f"{len(stored)} Deployments stored, not {workloads}")
        return Held(workloads, traced, deep_bytes(stored), seconds)
    finally:
        logging.getLogger("zeroscaler").removeHandler(failures)
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await scaler.aclose()
        await kube.aclose()
        tracemalloc.stop()


@dataclass(frozen=True)
class Growth:
    """What one more workload costs, between two sizes held."""

    small: Held
    large: Held

    def _each(self, field: str) -> float:
        added = self.large.workloads - self.small.workloads
        return float(getattr(self.large, field) - getattr(self.small, field)) / added

    @property
    def heap_bytes(self) -> float:
        return self._each("traced_bytes")

    @property
    def object_bytes(self) -> float:
        """Its Deployment, as the workload watch stores it (what any stored object costs)."""
        return self._each("object_bytes")

    @property
    def own_bytes(self) -> float:
        """Everything else: its record, its memories, its places in indexes and queues."""
        return self.heap_bytes - self.object_bytes


def per_workload(small: int = 1_000, large: int = 10_000) -> Growth:
    """Hold `small`, then `large` workloads, each in a controller of its own."""
    if not 0 < small < large:
        raise ValueError(f"need 0 < small < large, got {small} and {large}")
    return Growth(asyncio.run(_hold(small)), asyncio.run(_hold(large)))
