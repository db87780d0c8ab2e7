"""The activator's endpoints: a covered admission request wakes its sleeping backend and waits.

Only a path the activator's configuration holds is an activation (`CoveredPaths`); any other is
answered at once, allowed, having done nothing and read nothing. So is a request the copied
rules would never send there, and a dry run (the configuration declares no side effects on dry
runs, and a wake is one). The webhook scales nothing itself (one writer): it asks the leading
controller for the wake by writing the request into a ConfigMap the controller watches, then
answers once the backend's Service has a ready endpoint of a pod started by the wake, or when
its time is up. Either way the request is allowed: the backend's own webhook is called next by
the API server and decides. The probe endpoint only answers with a warning naming the
configuration's content, which the controller reads back.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from zeroscaler.api import Forbidden, Kube, KubeError, NotFound, Obj
from zeroscaler.core.admission import AdmissionRequest, AdmissionReview
from zeroscaler.core.coverage import (
    MAX_TIMEOUT,
    PROBE_LABEL,
    PROBE_WARNING,
    Target,
    describe_request,
    ready_endpoints,
    request_key,
)
from zeroscaler.core.durations import format_time
from zeroscaler.core.matching import Attributes, webhook_matches
from zeroscaler.core.workloads import workload_path
from zeroscaler.runtime.clock import Clock, LoopClock
from zeroscaler.webhook.covered import CoveredPaths
from zeroscaler.webhook.intake import Intake, Refused, refusal
from zeroscaler.webhook.review import build_response

log = logging.getLogger(__name__)

ASK_AGAIN_AFTER = 1.0  # seconds: a burst of requests for one sleeper writes one wake request
NONE: frozenset[str] = frozenset()
READY_FRESH = 0.5  # seconds a ready endpoint seen is trusted without reading again
# Seconds between the first ready endpoint and the answer: the API server that calls the backend
# next finds the endpoint by its own watch of the same EndpointSlices, and a request passed on
# before it has the endpoint fails ("no endpoints available for service"). One API server's watch
# was never seen to trail ours (`bench endpoints`); with several, the caller's is not the one read.
READY_SETTLE = 0.2
WAIT_BUCKETS = (0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
MAX_WAITING = 200  # covered requests held at once; more are answered at once
NamespaceLabels = Callable[[str], Awaitable[Mapping[str, str] | None]]


@dataclass(frozen=True, slots=True)
class Holding:
    """Where a held request asks for its wake (the `requests` ConfigMap in `namespace`), how long
    it settles once a ready endpoint is seen, and how many are held at once."""

    namespace: str
    requests: str
    settle: float = READY_SETTLE
    max_waiting: int = MAX_WAITING


@dataclass(frozen=True, slots=True)
class Coverage:
    """What a request is looked up in: the paths the activator's configuration covers, and a
    namespace's labels for the rules copied with each."""

    paths: CoveredPaths
    namespace_labels: NamespaceLabels


class Activation:
    """`/activate/<token>/...`: wake, wait for a ready endpoint, allow; `/activate/probe`: say
    so."""

    def __init__(
        self,
        kube: Kube | None,
        holding: Holding,
        coverage: Coverage,
        intake: Intake,
        registry: CollectorRegistry,
        clock: Clock | None = None,
    ) -> None:
        self._kube = kube
        self._clock: Clock = clock or LoopClock()
        self._settle = holding.settle
        self._requests_path = (
            f"/api/v1/namespaces/{holding.namespace}/configmaps/{holding.requests}"
        )
        self._intake = intake
        self._covered = coverage.paths
        self._namespace_labels = coverage.namespace_labels
        self._max_waiting = holding.max_waiting
        self._held = 0  # covered requests waiting now
        self._asked: dict[str, float] = {}  # request key: monotonic time it was last written
        self._written: set[str] | None = None  # the requests ConfigMap's keys, once read
        self._ready_at: dict[tuple[str, str], float] = {}  # Service: when last seen ready
        self._waiting: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._scale_forbidden = False  # warned once that scales may not be read
        self._answers = Counter(
            "zeroscaler_activator_requests_total",
            "Requests the activator answered, by outcome (ready, timeout, failed, probe; at once: "
            "unknown path, unmatched, dry-run, overloaded, rejected)",
            ["outcome"],
            registry=registry,
        )
        self._waits = Histogram(
            "zeroscaler_activator_wait_seconds",
            "Time from a covered request to its answer (its backend's wake and start)",
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        waiting = Gauge(
            "zeroscaler_activator_waiting_requests",
            "Covered requests waiting for their backend now",
            registry=registry,
        )
        waiting.set_function(lambda: self._held)

    async def probe(self, request: Request) -> Response:
        review = await self._review(request)
        if isinstance(review, Response):
            return review
        labels = ((review.get("object") or {}).get("metadata") or {}).get("labels") or {}
        self._answers.labels("probe").inc()
        token = str(labels.get(PROBE_LABEL, ""))[:64] if isinstance(labels, Mapping) else ""
        warning = f"{PROBE_WARNING} {token}"
        return JSONResponse(build_response(review, [], [warning]))

    async def activate(self, request: Request, rest: str) -> Response:
        review = await self._review(request)
        if isinstance(review, Response):
            return review
        entry = await self._covered.entry(f"/activate/{rest}")
        if entry is None or self._kube is None:
            return self._at_once(review, "unknown")
        if review.get("dryRun") is True:
            return self._at_once(review, "dry-run")
        if await self._unmatched(entry.match, review):
            return self._at_once(review, "unmatched")
        if self._held >= self._max_waiting:
            log.warning("activator busy: a covered request answered without waiting")
            return self._at_once(review, "overloaded")
        target = entry.target
        what = describe_request(review, target.namespace)
        answer = build_response(review, [], [])
        del review  # the request's objects are let go before the wait
        return await self._activate(self._kube, target, what, answer)

    async def _activate(
        self, kube: Kube, target: Target, what: str, answer: AdmissionReview
    ) -> Response:
        started = self._clock.monotonic()
        outcome = "failed"
        self._held += 1
        try:
            async with asyncio.timeout(max(target.wait, 0.5)):
                await self._answer(kube, target, what)
                outcome = "ready"
        except TimeoutError:
            outcome = "timeout"
        except KubeError as e:
            workload = f"{target.namespace}/{target.name}"
            log.warning("activation failed: %s", e, extra={"workload": workload})
        finally:
            self._held -= 1
        self._answers.labels(outcome).inc()
        self._waits.observe(self._clock.monotonic() - started)
        return JSONResponse(answer)

    def _at_once(self, review: AdmissionRequest, outcome: str) -> Response:
        """Allowed, unchanged, with nothing done: the backend's own webhook is called next."""
        self._answers.labels(outcome).inc()
        return JSONResponse(build_response(review, [], []))

    async def _unmatched(self, match: Mapping[str, Any], review: AdmissionRequest) -> bool:
        """Whether the rules the covered webhook was copied from would never send this request
        (the API server sends only what they match: this one did not come from it)."""
        resource: Mapping[str, Any] = review.get("resource") or {}
        namespace = str(review.get("namespace") or "")
        labels = await self._namespace_labels(namespace) if namespace else None
        attributes = Attributes(
            operation=str(review.get("operation") or ""),
            group=str(resource.get("group") or ""),
            version=str(resource.get("version") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(review.get("subResource") or ""),
            namespace=namespace,
            object_labels=_labels(review.get("object")),
            old_labels=_labels(review.get("oldObject")),
            namespace_labels=labels,
        )
        return webhook_matches(match, attributes).verdict == "no"

    async def _answer(self, kube: Kube, target: Target, what: str) -> None:
        """Ask for the wake and wait for it, unless the backend serves already."""
        waiter = self._waiting.get((target.namespace, target.service))
        if waiter is None or waiter.done():
            stale = await self._stale(kube, target)
            if stale is None:
                # Covered but up (woken, or about to be put to sleep): still activity.
                self._background(self._ask(kube, target, what))
                return
        else:
            stale = NONE  # joins the wait under way, which keeps its own
        await self._ask(kube, target, what)
        await asyncio.shield(self._waiter(kube, target.namespace, target.service, stale))

    async def _review(self, request: Request) -> AdmissionRequest | Response:
        try:
            review = await self._intake.review(request)
        except Refused as e:
            self._answers.labels("rejected").inc()
            return refusal(e)
        return review["request"]

    async def _ask(self, kube: Kube, target: Target, what: str) -> None:
        """Ask the controller for the wake, once a second at most for one workload; keys of
        backends no longer covered are taken out on the way."""
        key = request_key(*target.key)
        now = self._clock.monotonic()
        if now - self._asked.get(key, -ASK_AGAIN_AFTER) < ASK_AGAIN_AFTER:
            return
        self._asked[key] = now
        value = json.dumps(
            {"at": format_time(self._clock.now()), "what": what}, separators=(",", ":")
        )
        if self._written is None:
            found = await kube.get(self._requests_path)
            self._written = set(found.get("data") or {})
        stale = self._written - self._covered.covered_keys() - {key}
        data: dict[str, str | None] = {k: None for k in stale}
        data[key] = value
        await kube.patch(self._requests_path, {"data": data})
        self._written = (self._written - stale) | {key}
        self._asked = {k: t for k, t in self._asked.items() if now - t < ASK_AGAIN_AFTER}
        log.info("wake asked", extra={"workload": f"{target.namespace}/{target.name}"})

    def _slices_path(self, namespace: str) -> str:
        return f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(_logged(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _stale(self, kube: Kube, target: Target) -> frozenset[str] | None:
        """None if the backend serves and goes on serving: the workload wants replicas and its
        Service has a ready endpoint (a yes is trusted for READY_FRESH seconds, so a burst of
        requests costs one look). Otherwise the ready endpoints that will not serve for long."""
        kind, namespace, name, service = (
            target.kind,
            target.namespace,
            target.name,
            target.service,
        )
        now = self._clock.monotonic()
        if now - self._ready_at.get((namespace, service), -READY_FRESH) < READY_FRESH:
            return None
        # The workload first: once it is seen at zero, every endpoint listed after it is of a
        # pod being stopped, which its EndpointSlice still calls ready for a moment.
        asleep = await self._asleep(kube, kind, namespace, name)
        listing = await kube.get(self._slices_path(namespace), params=_selector(service))
        ready = ready_endpoints(listing.get("items") or [])
        if asleep:
            return ready
        if ready:
            self._ready_at[(namespace, service)] = now
            return None
        return NONE

    async def _asleep(self, kube: Kube, kind: str, namespace: str, name: str) -> bool:
        """Whether the workload is scaled to zero (read from its scale, all the webhook may read
        of it). A workload that is gone is not: its endpoints alone say whether anything serves,
        as they do when the webhook may not read scales (its role made by hand, without them)."""
        try:
            scale = await kube.get(workload_path(kind, namespace, name) + "/scale")
        except NotFound:
            return False
        except Forbidden as e:
            if not self._scale_forbidden:
                self._scale_forbidden = True
                log.warning(
                    "the activator may not get deployments/scale and statefulsets/scale: a "
                    "request just after a sleep may be answered on a stopping pod's endpoint "
                    "(grant them as the chart's webhook ClusterRole does): %s",
                    e,
                )
            return False
        return not (scale.get("spec") or {}).get("replicas")  # zero is left out of a Scale

    def _waiter(
        self, kube: Kube, namespace: str, service: str, stale: frozenset[str]
    ) -> asyncio.Task[None]:
        """One watch per Service for every request waiting on it, bounded in time."""
        key = (namespace, service)
        task = self._waiting.get(key)
        if task is None or task.done():
            task = asyncio.create_task(self._wait_ready(kube, namespace, service, stale))
            self._waiting[key] = task
            task.add_done_callback(lambda t: _forget(self._waiting, key, t))
        return task

    async def _wait_ready(
        self, kube: Kube, namespace: str, service: str, stale: frozenset[str]
    ) -> None:
        async with asyncio.timeout(MAX_TIMEOUT):
            await self._until_ready(kube, namespace, service, stale)
        await asyncio.sleep(self._settle)
        self._ready_at[(namespace, service)] = self._clock.monotonic()

    async def _until_ready(
        self, kube: Kube, namespace: str, service: str, stale: frozenset[str]
    ) -> None:
        """Until the Service's EndpointSlices hold a ready endpoint not in `stale`."""
        while True:
            listing = await kube.get(self._slices_path(namespace), params=_selector(service))
            slices: dict[str, Obj] = {
                str(s["metadata"]["name"]): s for s in listing.get("items") or []
            }
            if ready_endpoints(slices.values()) - stale:
                return
            version = str((listing.get("metadata") or {}).get("resourceVersion", ""))
            async for event in kube.watch(
                self._slices_path(namespace),
                resource_version=version,
                params=_selector(service),
                timeout_seconds=30,
            ):
                obj = event.get("object") or {}
                name = str((obj.get("metadata") or {}).get("name", ""))
                if event.get("type") == "DELETED":
                    slices.pop(name, None)
                elif event.get("type") in ("ADDED", "MODIFIED"):
                    slices[name] = obj
                if ready_endpoints(slices.values()) - stale:
                    return


async def _logged(work: Coroutine[Any, Any, None]) -> None:
    try:
        await work
    except KubeError as e:
        log.warning("wake not asked: %s", e)


def _forget(
    waiting: dict[tuple[str, str], asyncio.Task[None]],
    key: tuple[str, str],
    task: asyncio.Task[None],
) -> None:
    if waiting.get(key) is task:
        del waiting[key]
    if not task.cancelled():
        task.exception()  # retrieved: a wait that timed out is no error to log


def _selector(service: str) -> Mapping[str, str]:
    return {"labelSelector": f"kubernetes.io/service-name={service}"}


def _labels(obj: object) -> dict[str, str | None] | None:
    """An object's labels as a webhook's objectSelector reads them; None when there is none."""
    if not isinstance(obj, Mapping):
        return None
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): str(v) for k, v in labels.items()}
