"""What the benchmarks on a cluster share to set it up: the cluster itself, the namespaces, the
custom types and the ServiceAccount their workloads watch with, the workloads (paused
Deployments), the watched objects (through the API server or straight into etcd), the
controller's command line, and the watched objects as the API server sends them, for the
benchmarks that fake it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from zeroscaler.api import Conflict, Kube

GROUP = "bench.zeroscaler.example.com"


NAMESPACE = "zs-bench"  # the workloads, the baseline and its objects


SCOPES = 200  # namespaces zs-bench-0.. that the workloads watch, one per 50 workloads


FILLED_SCOPES = range(20)  # where the idle row's objects go: the scopes of 1,000 workloads


FAN_OUT = 20  # workloads woken together by one write in the fan-out row


TYPES = 50


TIMEOUT = "2s"


BIN = Path(sys.executable).parent


MADE_FROM = 1_764_410_400  # 2025-11-29T10:00:00Z: the bench's objects were made in the year after


def kind_of(i: int) -> tuple[str, str]:
    """Kind and plural of watched type number i."""
    return f"Thing{i}", f"things{i}"


async def create_if_missing(kube: Kube, path: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(Conflict):
        await kube.create(path, body)


async def gather_limited(
    jobs: list[Callable[[], Awaitable[None]]], limit: int = 32, progress: str = ""
) -> None:
    """Run `jobs`, `limit` at a time; with a `progress` label, print how far every 10 s."""
    gate = asyncio.Semaphore(limit)
    done = 0

    async def one(job: Callable[[], Awaitable[None]]) -> None:
        nonlocal done
        async with gate:
            await job()
        done += 1

    async def report() -> None:
        began = time.monotonic()
        while True:
            await asyncio.sleep(10)
            rate = done / (time.monotonic() - began)
            print(f"{progress}: {done} / {len(jobs)} ({rate:.0f}/s)", flush=True)

    reporter = asyncio.create_task(report()) if progress and jobs else None
    try:
        await asyncio.gather(*(one(j) for j in jobs))
    finally:
        if reporter is not None:
            reporter.cancel()


def scope_of(i: int) -> str:
    """The namespace workload number i watches."""
    return f"{NAMESPACE}-{(i // TYPES) % SCOPES}"


async def setup_cluster(kube: Kube) -> None:
    """Namespaces (the workloads' one opted in), 50 CRDs, a ServiceAccount allowed to watch them."""
    await create_if_missing(
        kube,
        "/api/v1/namespaces",
        {"metadata": {"name": NAMESPACE, "labels": {"zeroscaler.io/enabled": "true"}}},
    )
    for k in range(SCOPES + 1):
        name = f"{NAMESPACE}-{k}" if k < SCOPES else f"{NAMESPACE}-fan-out"
        await create_if_missing(kube, "/api/v1/namespaces", {"metadata": {"name": name}})
    await create_if_missing(
        kube, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {"metadata": {"name": "op"}}
    )
    await create_if_missing(
        kube,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "metadata": {"name": "zs-bench-watch"},
            "rules": [
                {"apiGroups": [GROUP], "resources": ["*"], "verbs": ["get", "list", "watch"]}
            ],
        },
    )
    await create_if_missing(
        kube,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": "zs-bench-watch"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "zs-bench-watch",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": NAMESPACE}],
        },
    )
    for i in range(TYPES):
        kind, plural = kind_of(i)
        await create_if_missing(
            kube,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            {
                "metadata": {"name": f"{plural}.{GROUP}"},
                "spec": {
                    "group": GROUP,
                    "names": {"kind": kind, "plural": plural, "listKind": f"{kind}List"},
                    "scope": "Namespaced",
                    "versions": [
                        {
                            "name": "v1",
                            "served": True,
                            "storage": True,
                            "subresources": {"status": {}},
                            "schema": {
                                "openAPIV3Schema": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    ],
                },
            },
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        served = {r.resource for r in await kube.discover() if r.group == GROUP}
        if len(served) >= TYPES:
            return
        await asyncio.sleep(1)
    raise RuntimeError("the benchmark's CRDs were not served in time")


def deployment(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A paused Deployment: the API object scales, but no Pods are made (cheap on 2 cores)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 1,
            "paused": True,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "op",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def workload_name(i: int) -> str:
    return f"op-{i:04d}"


async def ensure_workloads(kube: Kube, count: int, first: int = 0, progress: str = "") -> None:
    """Workloads `first` to `count` - 1 (those that exist already are left as they are)."""

    def job(i: int) -> Callable[[], Awaitable[None]]:
        kind, _ = kind_of(i % TYPES)
        return workload_creator(kube, workload_name(i), kind, scope_of(i))

    await gather_limited([job(i) for i in range(first, count)], progress=progress)


def workload_creator(kube: Kube, name: str, kind: str, scope: str) -> Callable[[], Awaitable[None]]:
    annotations = {
        "zeroscaler.io/idle-timeout": TIMEOUT,
        "zeroscaler.io/watched-kinds": f"{kind}.{GROUP}",
        "zeroscaler.io/watch-namespaces": scope,
    }
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    return lambda: create_if_missing(kube, path, deployment(name, annotations))


def _creator(kube: Kube, path: str, body: dict[str, Any]) -> Callable[[], Awaitable[None]]:
    async def create() -> None:
        await kube.create(path, body)

    return create


def _etcd_put(t: int, namespace: str, name: str) -> dict[str, Any]:
    """A put that stores one object straight in etcd, as the API server stores a custom resource."""
    kind, plural = kind_of(t)
    obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid4()),
            "generation": 1,
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    key = f"/registry/{GROUP}/{plural}/{namespace}/{name}"
    return {"key": b64(key), "value": b64(json.dumps(obj, separators=(",", ":")))}


def _etcd_txn(
    client: httpx.AsyncClient, etcd: str, puts: list[dict[str, Any]]
) -> Callable[[], Awaitable[None]]:
    body = {"success": [{"requestPut": put} for put in puts]}

    async def create() -> None:
        (await client.post(f"{etcd}/v3/kv/txn", json=body)).raise_for_status()

    return create


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def fill_objects(
    kube: Kube,
    total: int,
    scopes: Sequence[int | str] = FILLED_SCOPES,
    progress: str = "",
    etcd: str = "",
    on_listed: Callable[[], None] = lambda: None,
) -> int:
    """Create watched objects until `scopes` (namespaces zs-bench-<scope>) hold `total`, spread
    evenly over types and scopes.

    With `etcd` (its client URL) they are written to etcd directly, one of each type to a
    transaction (the API server's watches see them as they see its own writes; two of one type
    at one resourceVersion and a watch missed some): many times as fast as creating them one by
    one through the API server. Returns how many the benchmark's types hold in all scopes.
    """
    places = [(t, k) for t in range(TYPES) for k in scopes]
    per_place, extra = divmod(total, len(places))
    have: dict[tuple[int, str], int] = {}
    existing = 0
    for t in range(TYPES):  # one list per type, not one per place: 10,000 lists take a while
        items, _ = await kube.list_all(f"/apis/{GROUP}/v1/{kind_of(t)[1]}", metadata_only=True)
        existing += len(items)
        for obj in items:
            where = (t, obj["metadata"]["namespace"])
            have[where] = have.get(where, 0) + 1
    jobs: list[Callable[[], Awaitable[None]]] = []
    puts: dict[int, list[dict[str, Any]]] = {t: [] for t in range(TYPES)}
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=4), timeout=60) as client:
        for n, (t, k) in enumerate(places):
            kind, plural = kind_of(t)
            namespace = f"{NAMESPACE}-{k}"
            path = f"/apis/{GROUP}/v1/namespaces/{namespace}/{plural}"
            # Small objects: the controller's watches store metadata only anyway.
            body = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"generateName": "o-"}}
            wanted = per_place + (1 if n < extra else 0)
            for j in range(have.pop((t, namespace), 0), wanted):
                if etcd:  # the same names again after a partial fill: overwritten
                    puts[t].append(_etcd_put(t, namespace, f"e-{k}-{j}"))
                else:
                    jobs.append(_creator(kube, path, body))
        batches = [[p for p in batch if p] for batch in itertools.zip_longest(*puts.values())]
        jobs += [_etcd_txn(client, etcd, batch) for batch in batches]
        on_listed()  # what was there is counted; the writes begin
        await gather_limited(jobs, limit=4 if etcd else 48, progress=progress)
    return existing + len(jobs) - len(batches) + sum(len(b) for b in batches)


@contextlib.contextmanager
def cluster_for(kubeconfig: str | None) -> Iterator[tuple[str, str]]:
    """The cluster `kubeconfig` names, else a local one for the run: its kubeconfig and, for one
    started here, its etcd's client URL."""
    if kubeconfig is not None:
        yield kubeconfig, ""
        return
    from localcluster import build
    from localcluster.cluster import start

    binaries = build.ensure_binaries(progress=lambda m: print(m, file=sys.stderr))
    cluster = start(binaries, nodes=1, progress=lambda m: print(m, file=sys.stderr))
    try:
        etcd = next(c for c in cluster.components if c.name == "etcd")
        urls = [a.split("=", 1)[1] for a in etcd.cmd if a.startswith("--listen-client-urls=")]
        yield str(cluster.kubeconfig), urls[0]
    finally:
        cluster.stop()


def compile_bytecode() -> None:
    """Compile the project's modules ahead of the starts, as the image does at its build: with
    PYTHONDONTWRITEBYTECODE set, each controller start would compile its 58 modules again (about
    70 ms here, which no start in a cluster pays) and the raw list beside it far fewer."""
    import compileall

    import zeroscaler

    root = Path(zeroscaler.__file__).parent
    # compileall does not follow links; the controller's and the webhook's packages are ones.
    trees = [root, *(p.resolve() for p in root.iterdir() if p.is_symlink() and p.is_dir())]
    trees.append(Path(__file__).parent)  # the raw list and the baseline are started from here
    if not all([compileall.compile_dir(tree, quiet=1) for tree in trees]):
        print("note: some bytecode could not be written; starts will compile it", flush=True)


def controller_command(kubeconfig: str, port: int, log_level: str = "") -> list[str]:
    """The controller as the benchmarks run it (ZEROSCALER_BENCH_PROFILE: under cProfile)."""
    profile = os.environ.get("ZEROSCALER_BENCH_PROFILE")  # a cProfile output path
    launcher = ["-m", "cProfile", "-o", profile] if profile else []
    level = log_level or os.environ.get("ZEROSCALER_BENCH_LOG_LEVEL", "warning")
    return [
        str(BIN / "python"), *launcher, "-m", "zeroscaler.cli.controller_main",
        "--kubeconfig", kubeconfig,
        "--metrics-host", "127.0.0.1",
        "--metrics-port", str(port),
        "--lease-namespace", NAMESPACE,
        "--log-level", level,
        "--access-review-ttl", "600",
    ]  # fmt: skip


def api_object(t: int, k: int, i: int) -> dict[str, Any]:
    """One item of a PartialObjectMetadataList, as JSON decoding makes it: each made in a second
    of its own, as objects made over months are (one made in a burst shares its time)."""
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(MADE_FROM + t * 600_000 + i))
    raw = {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            "name": f"o-{t:02d}{k:02d}{i:05d}x",
            "generateName": "o-",
            "namespace": f"zs-bench-{k}",
            "uid": f"6d1c1d9e-1c1f-4c2a-9d3b-{t:04d}{k:04d}{i:04d}",
            "resourceVersion": str(1_000_000 + t * 10_000 + k * 100 + i),
            "generation": 1,
            "creationTimestamp": made,
            "managedFields": [
                {
                    "manager": "python-httpx",
                    "operation": "Update",
                    "apiVersion": "bench.zeroscaler.example.com/v1",
                    "time": made,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:generateName": {}}},
                }
            ],
        },
    }
    decoded: dict[str, Any] = json.loads(json.dumps(raw))  # fresh strings, as from the wire
    return decoded


def api_object_text(t: int, k: int, i: int) -> str:
    """`api_object(t, k, i)` as compact JSON, written directly: a faked API serving 2,000,000 of
    them spends its time on the controller's work, not on building and encoding dicts."""
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(MADE_FROM + t * 600_000 + i))
    return (
        '{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{'
        f'"name":"o-{t:02d}{k:02d}{i:05d}x","generateName":"o-","namespace":"zs-bench-{k}",'
        f'"uid":"6d1c1d9e-1c1f-4c2a-9d3b-{t:04d}{k:04d}{i:04d}",'
        f'"resourceVersion":"{1_000_000 + t * 10_000 + k * 100 + i}","generation":1,'
        f'"creationTimestamp":"{made}","managedFields":[{{"manager":"python-httpx",'
        '"operation":"Update","apiVersion":"bench.zeroscaler.example.com/v1",'
        f'"time":"{made}","fieldsType":"FieldsV1",'
        '"fieldsV1":{"f:metadata":{"f:generateName":{}}}}]}}'
    )
