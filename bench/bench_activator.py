"""The activator's cost on admission, through a real API server on loopback, and a sleeper's wake.

Part 1: ConfigMap creates at a fixed rate, open loop, each request timed from send to answer.
  - plain: no webhook matches them;
  - no-op: a no-op TLS webhook (the webhook benchmark's) matches them;
  - no-op, activator idle: the same, with the activator's configuration installed while nothing
    sleeps (it holds only its probe, so the API server never calls it for these);
  - no-op, activator covering an awake backend: the activator also covers these creates, for a
    backend whose Service has a ready endpoint, so it answers at once (the moments after a wake).
  Each way alone at the full rate for its phase, so each is measured under the same load, in
  rounds: the ways without the activator's configuration and those with it take turns, which goes
  first alternating, and the configuration is made or removed between them. A create that fails,
  or takes over LIMIT, counts as one that took LIMIT.
  Target: p99 with the activator idle within 1 ms of the no-op way at 200 requests a second; the
  covering way is reported beside it (a backend is covered while up only until it is Ready).
  The run exits non-zero when the target is missed or a way has no answer.
Part 2, with a real node: a covered create while its backend sleeps, from send to admission, split
into the wake (request to scale-up), the pod's start (to its container running) and the backend's
own start (to Ready, and the answer).

    python -m bench.bench_activator             # 200 requests/s, 5 s a phase; 3 sleeper wakes
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.judge import Run, Target, alternated, report, with_failures
from bench.measures import quantile
from bench.saved import RESULTS
from bench.webhooks import noop_webhook, start_webhook, wait_up, webhook_configuration
from bench.workloads import deployment
from localcluster import build, netns
from localcluster.cluster import Cluster, start
from localcluster.processes import free_port, stop
from zeroscaler.api import ClientLimits, Conflict, Kube, KubeError, NotFound
from zeroscaler.api.credentials import load_access
from zeroscaler.certs.issue import new_ca, new_serving_cert
from zeroscaler.core.coverage import Covered, hooks_of, render

MAX_REQUESTS = 5_000  # per phase, whatever the rate and seconds asked
LIMIT = 10.0  # seconds a create may take; one that fails or takes longer counts as this long
ROUNDS = 4  # phases of each way, the activator's configuration made and removed between them
PLAIN, NOOP, IDLE, COVERED = "plain", "no-op", "no-op, activator idle", "no-op, activator covering"
NAMESPACES = {PLAIN: "bench-plain", NOOP: "bench-noop", IDLE: "bench-noop", COVERED: "bench-awake"}
TARGET_MS = 1.0


@dataclass
class Way:
    name: str
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float


async def _load(kube: Kube, ways: list[str], rate: int, seconds: float) -> dict[str, Sample]:
    """Creates at `rate` a second in all, round robin over `ways`, none waiting for another."""
    count = min(int(rate * seconds), MAX_REQUESTS)
    timings: dict[str, list[float]] = {w: [] for w in ways}
    errors = dict.fromkeys(ways, 0)
    body = {"metadata": {"generateName": "bench-"}, "data": {"k": "v"}}

    async def one(way: str) -> None:
        began = time.perf_counter()
        try:
            await kube.create(f"/api/v1/namespaces/{NAMESPACES[way]}/configmaps", body)
        except Exception:
            errors[way] += 1
            return
        timings[way].append(time.perf_counter() - began)

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    tasks = []
    for i in range(count):
        delay = t0 + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(ways[i % len(ways)])))
    await asyncio.gather(*tasks)
    return {way: Sample(timings[way], errors[way]) for way in ways}


@dataclass
class Sample:
    """One way's answers in one phase: each successful create's seconds, and the failures."""

    seconds: list[float]
    errors: int


def summarize(name: str, samples: list[Sample]) -> Way:
    """A way's phases together, each failure counted as an answer after LIMIT."""
    errors = sum(s.errors for s in samples)
    values = sorted(with_failures((x for s in samples for x in s.seconds), errors, LIMIT))
    if not values:
        return Way(name, 0, 0, float("nan"), float("nan"))
    p50, p99 = quantile(values, 0.5) * 1e3, quantile(values, 0.99) * 1e3
    return Way(name, len(values) - errors, errors, p50, p99)


ACTIVATOR = "0-bench-activator"


def _new_token(_: str) -> str:
    return secrets.token_urlsafe(18)


async def _until_called(kube: Kube, namespace: str, way: str) -> None:
    """Until the API server calls what was just registered (a create comes back through it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            await kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {
                "generateName": "warm-"}})  # fmt: skip
            return
        except Exception:
            await asyncio.sleep(0.2)
    raise SystemExit(f"{way}: the API server never admitted a create")


async def _part_one(cluster: Cluster, rate: int, seconds: float) -> list[Way]:
    """The four ways in ROUNDS rounds, each way `seconds` / ROUNDS a round. The ways without the
    activator's configuration (plain, no-op) and those with it (idle, covering) take turns,
    which goes first alternating, the configuration made or removed between them and its state
    confirmed through the API server (a covered create reaches the activator, or no longer)."""
    from testkit.webhook import Webhook

    work = Path(tempfile.mkdtemp(prefix="bench-activator-"))
    ca = new_ca("bench-ca")
    pair = new_serving_cert(ca, ["127.0.0.1"])
    (work / "tls.crt").write_bytes(pair.cert_pem)
    (work / "tls.key").write_bytes(pair.key_pem)
    (work / "ca.crt").write_bytes(ca.cert_pem)
    port = free_port()
    noop = start_webhook("noop", port, str(work / "tls.crt"), str(work / "tls.key"))
    hook = Webhook(cluster, work, "bench-zeroscaler")
    kube = Kube(
        load_access(str(cluster.kubeconfig)), ClientLimits(max_connections=64, timeout=LIMIT)
    )
    samples: dict[str, list[Sample]] = {w: [] for w in (PLAIN, NOOP, IDLE, COVERED)}
    try:
        wait_up(f"https://127.0.0.1:{port}/", str(work / "ca.crt"), noop)
        for name in {*NAMESPACES.values(), "bench-zeroscaler"}:
            cluster.kubectl("create", "namespace", name)
        hook.start(extra=["--log-level", "warning", "--activator-configuration", ACTIVATOR])
        url = f"https://127.0.0.1:{port}/mutate"
        noop_hooks = [noop_webhook(url, ca.cert_pem, ["bench-noop", "bench-awake"])]
        admission = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
        await kube.create(admission, webhook_configuration("bench-noop", noop_hooks))
        await _until_called(kube, "bench-noop", NOOP)
        # The awake backend: its Deployment wants a replica (paused, it runs no pod), and its
        # Service has a ready endpoint, kept by hand.
        await kube.create(
            "/apis/apps/v1/namespaces/bench-awake/deployments", deployment("guard", {})
        )
        slice_ = {
            "metadata": {"name": "guard-1", "labels": {"kubernetes.io/service-name": "guard"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [netns.NODE_ADDRESS], "conditions": {"ready": True}}],
            "ports": [{"port": 9443, "protocol": "TCP"}],
        }
        await kube.create("/apis/discovery.k8s.io/v1/namespaces/bench-awake/endpointslices", slice_)
        backend = webhook_configuration("guard", [{
            **noop_hooks[0], "name": "guard.bench.zeroscaler.io",
            "clientConfig": {"service": {"namespace": "bench-awake", "name": "guard"}},
            "namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "bench-awake"}}}])  # fmt: skip
        covered = Covered("Deployment", "bench-awake", "guard", hooks_of(True, backend))
        base = {"url": f"https://127.0.0.1:{hook.port}/mutate",
                "caBundle": base64.b64encode(hook.ca.cert_pem).decode()}  # fmt: skip
        webhooks, _ = render([covered], base, 10, "bench-zeroscaler", _new_token)
        activator = webhook_configuration(ACTIVATOR, webhooks)
        states = {"without the activator": [PLAIN, NOOP], "with the activator": [IDLE, COVERED]}
        await _load(kube, [PLAIN, NOOP], rate, 1.0)  # warm connections and caches
        for number, order in enumerate(alternated(list(states), ROUNDS)):
            for state in order:
                present = state == "with the activator"
                await _set_activator(kube, hook, admission, activator, present)
                if present and number == 0:
                    await _load(kube, [IDLE, COVERED], rate, 1.0)  # its first calls warm it
                ways = states[state] if number % 2 == 0 else states[state][::-1]
                for way in ways:
                    samples[way].append((await _load(kube, [way], rate, seconds / ROUNDS))[way])
            print(f"[bench activator] round {number + 1}/{ROUNDS}", flush=True)
    finally:
        await kube.aclose()
        hook.stop()
        stop(noop)
    return [summarize(way, found) for way, found in samples.items()]


async def _set_activator(
    kube: Kube, hook: Any, admission: str, configuration: dict[str, Any], present: bool
) -> None:
    """Make or remove the activator's configuration, and wait until the API server acts on it:
    a covered create reaches the activator (its count of answers grows), or no longer does."""
    name = configuration["metadata"]["name"]
    try:
        if present:
            await kube.create(admission, configuration)
        else:
            await kube.delete(f"{admission}/{name}")
    except KubeError as e:
        if not isinstance(e, Conflict | NotFound):
            raise
    deadline = time.monotonic() + 30
    unchanged = 0
    while time.monotonic() < deadline:
        before = _activator_answers(hook)
        await kube.create(f"/api/v1/namespaces/{NAMESPACES[COVERED]}/configmaps",
                          {"metadata": {"generateName": "probe-"}})  # fmt: skip
        reached = _activator_answers(hook) > before
        if reached and present:
            return
        unchanged = 0 if reached else unchanged + 1
        if not present and unchanged >= 3:  # three creates in a row past it
            return
        await asyncio.sleep(0.1)
    raise SystemExit(f"the API server did not act on the activator's configuration ({present=})")


def _activator_answers(hook: Any) -> float:
    """The activator's count of requests answered, from its /metrics."""
    total = 0.0
    for line in hook.get("/metrics").text.splitlines():
        if line.startswith("zeroscaler_activator_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


@dataclass
class Wake:
    """One covered create while the backend slept, split where it spent its time (seconds)."""

    total: float  # the create sent to its answer
    wake: float  # to the scale-up written (the activator's request, the leader's wake)
    pod_start: float  # to the container running (scheduling, kubelet, containerd)
    backend_start: float  # to a ready endpoint (the backend's own start and readiness probe)
    answer: float  # to the answer (the activator sees the endpoint, then the backend reviews)


class _Firsts:
    """When each stage was first seen, by polling the API every few milliseconds meanwhile."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> _Firsts:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _poll(self) -> None:
        from kubernetes import client as k8s

        from testkit.activator import serving

        apps, core = k8s.AppsV1Api(self.api), k8s.CoreV1Api(self.api)
        while not self._stop.is_set():
            now = time.perf_counter()
            if "scaled" not in self.seen:
                if apps.read_namespaced_deployment("guard", self.namespace).spec.replicas:
                    self.seen["scaled"] = now
            elif "running" not in self.seen:
                for pod in core.list_namespaced_pod(self.namespace).items:
                    statuses = pod.status.container_statuses or []
                    if any(c.state and c.state.running for c in statuses):
                        self.seen["running"] = now
            elif "ready" not in self.seen and serving(self.api, self.namespace):
                self.seen["ready"] = now
            time.sleep(0.005)


def _pods(api: Any, namespace: str) -> list[Any]:
    from kubernetes import client as k8s

    return list(k8s.CoreV1Api(api).list_namespaced_pod(namespace).items)


def _part_two(binaries: dict[str, Path], wakes: int) -> list[Wake]:
    from kubernetes import config as k8s_config

    from image import build as image_build
    from testkit.activator import deployed_guard, start_zeroscaler, stop_zeroscaler
    from testkit.controller import WIDGET_GROUP, Ref, create_widget, wait_asleep
    from testkit.crds import create_crd
    from testkit.waiting import wait_for

    archive = image_build.REPO / "dist" / "zeroscaler-image.tar"
    cluster = start({**binaries, **build.ensure_binaries(node=True)}, nodes=1, real_node=True)
    results: list[Wake] = []
    try:
        if cluster.real_node is None:
            raise SystemExit(f"no real node, so no sleeper to wake: {cluster.real_node_absent}")
        cluster.import_image(archive)
        api = k8s_config.new_client_from_config(config_file=str(cluster.kubeconfig))
        create_crd(api, WIDGET_GROUP, "Widget", "widgets")
        cluster.kubectl("create", "namespace", "bench-zs")
        cluster.kubectl("create", "namespace", "bench-guard")
        cluster.kubectl("label", "namespace", "bench-guard", "zeroscaler.io/enabled=true")
        work = Path(tempfile.mkdtemp(prefix="bench-activator-"))
        zs = start_zeroscaler(cluster, api, "bench-zs", work)
        try:
            with deployed_guard(api, "bench-guard", work, image_build.default_name(), "2s"):
                for i in range(wakes):
                    wait_asleep(api, Ref("bench-guard", "guard"), 1, timeout=60)
                    wait_for(lambda: not _pods(api, "bench-guard"), "the sleeper's pod gone", 60)
                    with _Firsts(api, "bench-guard") as firsts:
                        began = time.perf_counter()
                        create_widget(api, "bench-guard", f"w-{i}")
                        done = time.perf_counter()
                    seen = firsts.seen
                    if set(seen) != {"scaled", "running", "ready"}:
                        raise SystemExit(f"wake {i}: stages seen {sorted(seen)}, not all three")
                    results.append(
                        Wake(done - began, seen["scaled"] - began,
                             seen["running"] - seen["scaled"], seen["ready"] - seen["running"],
                             done - seen["ready"])
                    )  # fmt: skip
                    print(f"[bench activator] wake {i + 1}/{wakes}: {done - began:.2f} s")
        finally:
            stop_zeroscaler(api, zs)
            api.close()
    finally:
        cluster.stop()
    return results


def _report(ways: list[Way], rate: int) -> None:
    print(f"\nadmission through the API server, ConfigMap creates at {rate}/s (open loop)")
    print(f"{'way':<30} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p99 ms':>8}")
    for w in ways:
        print(f"{w.name:<30} {w.requests:>8} {w.errors:>6} {w.p50_ms:>8.2f} {w.p99_ms:>8.2f}")


def targets(ways: list[Way], wakes: list[Wake] | None) -> list[Target]:
    """The activator idle against the no-op way (its target), the covering way's cost as a
    measurement (a backend is covered while awake only between its wake and its Ready), and the
    median covered wake when asked for. A way without answers fails."""
    by = {w.name: w for w in ways}

    def p99(name: str) -> float | None:
        way = by.get(name)
        return way.p99_ms if way is not None and way.requests else None

    def over(name: str) -> float | None:
        mine, noop = p99(name), p99(NOOP)
        return None if mine is None or noop is None else mine - noop

    found = [
        Target(f"{PLAIN}: p99", p99(PLAIN), None, "ms"),
        Target(f"{NOOP}: p99", p99(NOOP), None, "ms"),
        Target(f"p99 of {IDLE!r} less {NOOP!r}", over(IDLE), TARGET_MS, "ms"),
        Target(f"p99 of {COVERED!r} less {NOOP!r}", over(COVERED), None, "ms"),
    ]
    if wakes is not None:
        total = statistics.median(w.total for w in wakes) if wakes else None
        found.append(Target("a covered create while its backend sleeps, median", total, None,
                            "s"))  # fmt: skip
    return found


def _report_wakes(wakes: list[Wake]) -> None:
    print(f"\na covered create while its backend sleeps, {len(wakes)} wakes (seconds)")
    print(f"{'':<8} {'total':>7} {'wake':>7} {'pod':>7} {'backend':>8} {'answer':>7}")
    for i, w in enumerate(wakes, 1):
        print(f"{i:<8} {w.total:>7.2f} {w.wake:>7.2f} {w.pod_start:>7.2f} "
              f"{w.backend_start:>8.2f} {w.answer:>7.2f}")  # fmt: skip
    median = Wake(*(statistics.median(getattr(w, f) for w in wakes) for f in Wake.__annotations__))
    print(f"{'median':<8} {median.total:>7.2f} {median.wake:>7.2f} {median.pod_start:>7.2f} "
          f"{median.backend_start:>8.2f} {median.answer:>7.2f}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=int, default=200, help="requests a second, all ways")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds a phase (max 30)")
    parser.add_argument(
        "--wakes", type=int, default=3, help="covered creates while asleep (max 10)"
    )
    args = parser.parse_args(argv)
    binaries = build.find_binaries(build.load_versions())
    if any(name not in binaries for name in ("kube-apiserver", "etcd", "kubectl")):
        print("control plane not built (make controlplane)", file=sys.stderr)
        return 1
    print("[bench activator] starting a control plane", flush=True)
    run = Run()
    cluster = start(binaries, nodes=1)
    try:
        print(f"[bench activator] {args.rate}/s, {args.seconds:g} s a phase", flush=True)
        ways = asyncio.run(_part_one(cluster, args.rate, min(args.seconds, 30.0)))
    finally:
        cluster.stop()
    _report(ways, args.rate)
    wakes: list[Wake] = []
    if args.wakes > 0:
        print("[bench activator] a sleeping backend on the real node", flush=True)
        wakes = _part_two(binaries, min(args.wakes, 10))
        if wakes:
            _report_wakes(wakes)
    judged = targets(ways, wakes if args.wakes > 0 else None)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "activator.json"
    saved = {"rate": args.rate, "ways": [asdict(w) for w in ways],
             "wakes": [asdict(w) for w in wakes]}  # fmt: skip
    out.write_text(json.dumps(run.stamped(saved, judged), indent=2))
    print(f"written {out}")
    return 1 if report(judged) else 0


if __name__ == "__main__":
    sys.exit(main())
