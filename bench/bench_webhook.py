"""Admission latency over TLS at fixed request rates: the webhook against a no-op baseline.

Both servers run the same way (uvicorn, one worker, HTTP/1.1, TLS 1.2+) in their own process on
loopback; the webhook decides from a fixed view built from the real operators' RBAC, so the request
path is the production one minus nothing (it never calls the API server). Every run is bounded:
`--seconds` per rate and a hard cap on requests.
Then, when the local control plane is built, `kubectl apply` of Deployments through the real API
server with and without the webhook registered (`--applies` each way).

    python -m bench.bench_webhook            # 50, 200, 500 requests/s, 5 s each; 40 applies each
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import ssl
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bench.judge import Run, Target, alternated, report, with_failures
from bench.measures import quantile
from bench.saved import RESULTS
from bench.webhooks import start_webhook, wait_up
from localcluster.processes import free_port, stop

SIZES_KB = (5, 10, 20, 40)
MAX_REQUESTS = 20_000
LIMIT = 10.0  # seconds: the API server's default webhook timeout; a failure counts as this long
ROUNDS = 4  # slices a rate is cut into for each server, taking turns
TARGET_RATE = 200  # reviews a second where the targets hold
TARGET_P99_MS = 10.0
TARGET_RATIO = 1.5  # the webhook's p99 over the no-op's
CONNECTIONS = 16
OPTED = {"zeroscaler.io/enabled": "true"}


def noop_app() -> FastAPI:
    """The baseline: read the review, allow it, patch nothing."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/mutate")
    async def mutate(request: Request) -> JSONResponse:
        review = json.loads(await request.body())
        uid = review["request"]["uid"]
        return JSONResponse(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": True},
            }
        )

    return app


def webhook_app() -> FastAPI:
    """The real app over a fixed view: every operator's RBAC, built-in kinds and their CRDs."""
    from testkit.discovery import builtin_resources, operators
    from zeroscaler.core.inference import RBACSnapshot
    from zeroscaler.core.kinds import Discovery
    from zeroscaler.webhook.app import create_app
    from zeroscaler.webhook.settings import WebhookSettings
    from zeroscaler.webhook.state import StaticSource, View

    ops = list(operators())
    objects: list[dict[str, Any]] = []
    for op in ops:
        for obj in op.objects:
            if obj.get("kind") in ("RoleBinding", "ClusterRoleBinding", "ServiceAccount"):
                for subject in obj.get("subjects") or []:
                    subject["namespace"] = "bench"
            if obj.get("kind") in ("Role", "RoleBinding"):
                obj["metadata"]["namespace"] = "bench"
            objects.append(obj)
    crds = [c for op in ops for c in op.crds]
    view = View(
        rbac=RBACSnapshot.from_objects(objects),
        discovery=Discovery([*builtin_resources(), *crds]),
        custom_resources=frozenset(c.group_resource for c in crds),
    )
    return create_app(WebhookSettings(), StaticSource(view, {"bench": OPTED}))


def serve(kind: str, port: int, cert: str, key: str) -> None:
    """Run one server until terminated (called in a child process)."""
    from zeroscaler.webhook.https import serve as serve_tls
    from zeroscaler.webhook.settings import WebhookSettings

    settings = WebhookSettings(port=port, cert_file=cert, key_file=key, log_level="warning")
    app = webhook_app() if kind == "webhook" else noop_app()
    asyncio.run(serve_tls(settings, app))


def reviews(count: int, seed: int = 7) -> list[bytes]:
    """Realistic Deployment reviews of 5-40 KB, CREATE and UPDATE, for the operators' accounts."""
    from testkit.discovery import operators

    accounts = sorted(
        {
            o["spec"]["template"]["spec"].get("serviceAccountName", "default")
            for op in operators()
            for o in op.objects
            if o.get("kind") in ("Deployment", "StatefulSet")
        }
    )
    rng = random.Random(seed)
    bodies = []
    for i in range(count):
        size = SIZES_KB[i % len(SIZES_KB)] * 1024
        update = i % 3 == 0
        obj = _deployment(f"op-{i}", rng.choice(accounts))
        request: dict[str, Any] = {
            "uid": f"bench-{i}",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "namespace": "bench",
            "operation": "UPDATE" if update else "CREATE",
            "object": obj,
            "oldObject": obj if update else None,
            "dryRun": False,
        }
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }
        env = obj["spec"]["template"]["spec"]["containers"][0]["env"]
        while len(body := json.dumps(review).encode()) < size:  # grow to the wanted size
            env.extend({"name": f"SETTING_{len(env)}", "value": "x" * 48} for _ in range(8))
        bodies.append(body)
    return bodies


def _deployment(name: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "labels": {"app": name, "tier": "operators"},
            "annotations": {"team": "platform"},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "serviceAccountName": account,
                    "containers": [{"name": "manager", "image": "example/op:1.0", "env": []}],
                },
            },
        },
    }


@dataclass(frozen=True)
class Result:
    server: str
    rate: int
    sent: int
    errors: int
    p50_ms: float
    p99_ms: float
    achieved_rate: float
    server_cpu_ms: float = float("nan")  # CPU the server process spent per request: load-proof


@dataclass
class Slice:
    """One stretch of open-loop load on one server: what it sent, how long each answer took, how
    many failed."""

    sent: int
    latencies: list[float]
    errors: int
    seconds: float


async def load(url: str, ca: str, bodies: list[bytes], rate: int, seconds: float) -> Slice:
    """Open-loop load: request i is due at start + i/rate; latency counts from when it was due.

    A small keep-alive HTTP/1.1 client on asyncio streams sends them over a pool of TLS connections,
    so the load generator costs little next to the server it measures. A request unanswered after
    LIMIT seconds, or answered with an error, is a failure.
    """
    count = min(int(rate * seconds), MAX_REQUESTS)
    host, port = url.removeprefix("https://").split("/")[0].split(":")
    ctx = ssl.create_default_context(cafile=ca)
    pool = [await _Connection.open(host, int(port), ctx) for _ in range(CONNECTIONS)]
    for i, conn in enumerate(pool):  # warm every connection and the server
        await conn.post(bodies[i % len(bodies)])
    queue: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()
    latencies: list[float] = []
    errors = 0

    async def worker(conn: _Connection) -> None:
        nonlocal errors
        while (item := await queue.get()) is not None:
            i, due = item
            try:
                ok = await asyncio.wait_for(conn.post(bodies[i % len(bodies)]), LIMIT)
            except (OSError, ValueError, asyncio.IncompleteReadError, TimeoutError):
                ok = False
                conn.close()
                conn = await _Connection.open(host, int(port), ctx)
            if ok:
                latencies.append(time.perf_counter() - due)
            else:
                errors += 1

    workers = [asyncio.create_task(worker(c)) for c in pool]
    start = time.perf_counter() + 0.05
    for i in range(count):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait((i, due))
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.wait_for(asyncio.gather(*workers), timeout=seconds + 60)
    elapsed = time.perf_counter() - start
    for conn in pool:
        conn.close()
    return Slice(count, latencies, errors, elapsed)


def summarize(server: str, rate: int, slices: list[Slice], cpu_seconds: float) -> Result:
    """One server's slices at one rate as a row; each failure counts as an answer after LIMIT."""
    sent = sum(s.sent for s in slices)
    errors = sum(s.errors for s in slices)
    latencies = sorted(with_failures((x for s in slices for x in s.latencies), errors, LIMIT))
    elapsed = sum(s.seconds for s in slices)
    return Result(
        server=server,
        rate=rate,
        sent=sent,
        errors=errors,
        p50_ms=quantile(latencies, 0.50) * 1000,
        p99_ms=quantile(latencies, 0.99) * 1000,
        achieved_rate=sent / elapsed if elapsed > 0 else 0.0,
        server_cpu_ms=cpu_seconds * 1000 / sent if sent else float("nan"),
    )


class _Connection:
    """One keep-alive HTTPS connection that POSTs reviews and checks the answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host: str, port: int, ctx: ssl.SSLContext) -> _Connection:
        reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
        return cls(reader, writer)

    async def post(self, body: bytes) -> bool:
        head = (
            "POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        await self.writer.drain()
        status = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        if not status.startswith(b"HTTP/1.1 200"):
            return False
        return bool(json.loads(payload)["response"]["allowed"] is True)

    def close(self) -> None:
        self.writer.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def run(rates: list[int], seconds: float, plot: bool) -> list[Result]:
    """Each rate on both servers, taking turns; the rows, with failures counted at LIMIT."""
    from zeroscaler.certs.issue import new_ca, new_serving_cert

    results: list[Result] = []
    bodies = reviews(400)
    sizes = sorted(len(b) for b in bodies)
    print(f"reviews: {len(bodies)}, {sizes[0] // 1024}-{sizes[-1] // 1024} KB")
    with tempfile.TemporaryDirectory() as tmp:
        ca = new_ca()
        cert, key = new_serving_cert(ca, ["127.0.0.1"]).write(Path(tmp), "tls")
        ca_file = Path(tmp) / "ca.crt"
        ca_file.write_bytes(ca.cert_pem)
        servers = {kind: free_port() for kind in ("noop", "webhook")}
        procs = {
            kind: start_webhook(kind, port, str(cert), str(key)) for kind, port in servers.items()
        }
        try:
            for kind, port in servers.items():
                wait_up(f"https://127.0.0.1:{port}/healthz", str(ca_file), procs[kind])
            # Both servers are up throughout; at each rate they take turns in short slices,
            # the first one alternating, so a change in the machine's load touches both alike
            # and neither always runs first.
            for rate in rates:
                slices: dict[str, list[Slice]] = {kind: [] for kind in servers}
                cpu = dict.fromkeys(servers, 0.0)
                for order in alternated(list(servers), ROUNDS):
                    for kind in order:
                        url = f"https://127.0.0.1:{servers[kind]}/mutate"
                        before = _cpu_seconds(procs[kind].pid)
                        piece = asyncio.run(load(url, str(ca_file), bodies, rate, seconds / ROUNDS))
                        cpu[kind] += _cpu_seconds(procs[kind].pid) - before
                        slices[kind].append(piece)
                for kind in servers:
                    results.append(summarize(kind, rate, slices[kind], cpu[kind]))
                    print(_row(results[-1]), flush=True)
        finally:
            for proc in procs.values():
                stop(proc)
    _report(results, plot)
    return results


def _row(r: Result) -> str:
    return (
        f"{r.server:8} {r.rate:5d}/s  sent {r.sent:5d}  errors {r.errors:3d}  "
        f"p50 {r.p50_ms:7.2f} ms  p99 {r.p99_ms:7.2f} ms  achieved {r.achieved_rate:6.1f}/s  "
        f"server CPU {r.server_cpu_ms:5.2f} ms/request"
    )


def _report(results: list[Result], plot: bool) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    by = {(r.server, r.rate): r for r in results}
    print(
        "\nrate/s  noop p50  noop p99  webhook p50  webhook p99  p99 ratio"
        "  CPU ms/req noop  webhook  errors"
    )
    for rate in sorted({r.rate for r in results}):
        n, w = by.get(("noop", rate)), by.get(("webhook", rate))
        if n is None or w is None:
            continue
        ratio = w.p99_ms / n.p99_ms if n.p99_ms else float("nan")
        print(f"{rate:6d}  {n.p50_ms:8.2f}  {n.p99_ms:8.2f}  {w.p50_ms:11.2f}  {w.p99_ms:11.2f}"
              f"  {ratio:9.2f}  {n.server_cpu_ms:15.2f}  {w.server_cpu_ms:7.2f}"
              f"  {n.errors + w.errors:6d}")  # fmt: skip
    if plot and results:
        _plot(results)


def _plot(results: list[Result]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = sorted({r.rate for r in results})
    by = {(r.server, r.rate): r for r in results}
    fig, (lat, cpu) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.2
    series = [("noop", "p50", "#9ecae1"), ("noop", "p99", "#3182bd"),
              ("webhook", "p50", "#fdae6b"), ("webhook", "p99", "#e6550d")]  # fmt: skip
    for offset, (server, q, colour) in enumerate(series):
        values = [getattr(by[(server, rate)], f"{q}_ms") for rate in rates]
        xs = [i + (offset - 1.5) * width for i in range(len(rates))]
        lat.bar(xs, values, width, label=f"{server} {q}", color=colour)
    lat.axhline(10, color="grey", linestyle="--", linewidth=1, label="10 ms (p99 target)")
    lat.set_yscale("log")
    lat.set_xticks(range(len(rates)), [f"{r}/s" for r in rates])
    lat.set_ylabel("latency (ms, log scale)")
    lat.set_title("Admission latency over TLS, 5-40 KB reviews")
    lat.legend(fontsize=8)
    for offset, (server, colour) in enumerate([("noop", "#3182bd"), ("webhook", "#e6550d")]):
        values = [by[(server, rate)].server_cpu_ms for rate in rates]
        xs = [i + (offset - 0.5) * 0.35 for i in range(len(rates))]
        cpu.bar(xs, values, 0.35, label=server, color=colour)
    cpu.set_xticks(range(len(rates)), [f"{r}/s" for r in rates])
    cpu.set_ylabel("server CPU per request (ms)")
    cpu.set_title("Cost on one worker")
    cpu.legend(fontsize=8)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    fig.suptitle(f"{os.cpu_count()} CPUs, load average {load} at the end of the run", fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "webhook.png", dpi=120)
    plt.close(fig)


@dataclass(frozen=True)
class ApplyResult:
    webhook: bool
    applies: int
    p50_ms: float
    p99_ms: float


def run_e2e(applies: int) -> list[ApplyResult] | None:
    """`kubectl apply` of Deployments through the real API server, with and without the webhook."""
    from kubernetes import config as k8s_config

    from localcluster import build
    from localcluster.cluster import start
    from testkit.webhook import Webhook

    binaries = build.find_binaries(build.load_versions())
    if any(name not in binaries for name in ("kube-apiserver", "etcd", "kubectl")):
        print("end-to-end: control plane not built (make controlplane); skipped")
        return None
    cluster = start(binaries, nodes=1)
    hook: Webhook | None = None
    try:
        api = k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))
        for name in ("bench-plain", "bench-hooked", "bench-policy"):
            cluster.kubectl("create", "namespace", name)
        cluster.kubectl("label", "namespace", "bench-hooked", "zeroscaler.io/enabled=true")
        hook = Webhook(cluster, Path(tempfile.mkdtemp()), "bench-policy")
        hook.start(["--log-level", "warning"])
        hook.register(api)
        hook.enrol(api, "bench-hooked")
        deadline = time.monotonic() + 60
        # The registration is live once an apply comes back annotated.
        while "zeroscaler.io/injected" not in _apply(cluster, "bench-hooked", "probe"):
            if time.monotonic() > deadline:
                raise SystemExit("end-to-end: the API server never called the webhook")
            time.sleep(0.5)
        timings: dict[bool, list[float]] = {False: [], True: []}
        for i in range(applies):  # alternate, so drift in the machine's load hits both alike
            for hooked in (False, True):
                began = time.perf_counter()
                _apply(cluster, "bench-hooked" if hooked else "bench-plain", f"op-{i}")
                timings[hooked].append(time.perf_counter() - began)
        api.close()
    finally:
        if hook is not None:
            hook.stop()
        cluster.stop()
    results = []
    for hooked, values in timings.items():
        values.sort()
        results.append(
            ApplyResult(hooked, len(values), quantile(values, 0.5) * 1000,
                        quantile(values, 0.99) * 1000)
        )  # fmt: skip
    return results


def _apply(cluster: Any, namespace: str, name: str) -> str:
    manifest = json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "example/op:1.0"}]},
                },
            },
        }
    )
    out = cluster.kubectl("apply", "-o", "json", "-f", "-", input=manifest).stdout
    annotations = json.loads(out).get("metadata", {}).get("annotations") or {}
    return ",".join(sorted(annotations))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--rates", default="50,200,500", help="comma-separated requests/s")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per rate")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--applies", type=int, default=40, help="kubectl applies each way end to end (0: skip)"
    )
    parser.add_argument("--serve", choices=["noop", "webhook"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, args.cert, args.key)
        return
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    began = Run()
    results = run(rates, min(args.seconds, 60.0), not args.no_plot)
    e2e = run_e2e(min(args.applies, 200)) if args.applies > 0 else None
    if e2e:
        print("\nkubectl apply    p50 ms   p99 ms")
        for r in e2e:
            label = "with webhook" if r.webhook else "without"
            print(f"{label:14} {r.p50_ms:8.1f} {r.p99_ms:8.1f}")
    judged = targets(results, rates, e2e if args.applies > 0 else None)
    data = {
        "results": [asdict(r) for r in results],
        "kubectl_apply": [asdict(r) for r in e2e or []],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "webhook.json").write_text(json.dumps(began.stamped(data, judged), indent=2) + "\n")
    sys.exit(1 if report(judged) else 0)


def targets(results: list[Result], rates: list[int], e2e: list[ApplyResult] | None) -> list[Target]:
    """At TARGET_RATE, the webhook's p99 (failures counted at LIMIT) and its ratio to the no-op's;
    at the other rates the same as measurements; the webhook's cost on `kubectl apply` through
    the API server (when asked for) as a measurement. A rate asked for and not measured fails."""
    by = {(r.server, r.rate): r for r in results}
    found = []
    for rate in rates:
        noop, hook = by.get(("noop", rate)), by.get(("webhook", rate))
        judged = rate == TARGET_RATE
        p99 = hook.p99_ms if hook and hook.sent else None
        ratio = hook.p99_ms / noop.p99_ms if hook and noop and noop.p99_ms else None
        where = f"{rate}/s"
        found.append(Target(f"{where}: webhook p99", p99, TARGET_P99_MS if judged else None, "ms"))
        found.append(Target(f"{where}: webhook p99 / no-op p99", ratio,
                            TARGET_RATIO if judged else None, "x"))  # fmt: skip
    if e2e is not None:
        applies = {r.webhook: r for r in e2e}
        plain, hooked = applies.get(False), applies.get(True)
        overhead = hooked.p50_ms - plain.p50_ms if plain and hooked else None
        found.append(Target("kubectl apply, p50 with the webhook less without", overhead, None,
                            "ms"))  # fmt: skip
    return found


if __name__ == "__main__":
    main()
