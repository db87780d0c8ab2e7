"""The FastAPI application: `/mutate`, health, readiness and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from zeroscaler.api import ClientLimits, Kube
from zeroscaler.api.credentials import load_access
from zeroscaler.core.admission import decide_patch
from zeroscaler.runtime.clock import Clock, LoopClock
from zeroscaler.runtime.collectors import APIErrors, register_process_collectors
from zeroscaler.webhook.activation import Activation, Coverage, Holding
from zeroscaler.webhook.caches import LiveSource
from zeroscaler.webhook.covered import CoveredPaths
from zeroscaler.webhook.intake import Intake, Limits, Refused, refusal
from zeroscaler.webhook.own_paths import OwnPaths
from zeroscaler.webhook.review import build_response
from zeroscaler.webhook.settings import WebhookSettings
from zeroscaler.webhook.state import Source

log = logging.getLogger(__name__)

INTERNAL_ERROR = "zeroscaler webhook failed to decide (see its log): no annotations added"
NOT_READY = "zeroscaler webhook is starting (caches not synced): no annotations added"
EDGE_CONNECTIONS = 64  # the activator's: one watch per Service waited on, and its writes
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


def create_app(
    settings: WebhookSettings,
    source: Source | None = None,
    registry: CollectorRegistry | None = None,
    clock: Clock | None = None,
) -> FastAPI:
    """The webhook app; without a `source` it watches the cluster named by `settings`. Every
    part takes its time from `clock` (the real one when None)."""
    registry = registry if registry is not None else CollectorRegistry()
    clock = clock or LoopClock()
    live = source if source is not None else _live_source(settings, registry, clock)
    register_process_collectors(registry)
    # The API clients whose failed requests /metrics counts; `serve` adds the renewer's.
    clients: list[Kube] = [live.kube] if isinstance(live, LiveSource) else []
    registry.register(
        APIErrors("zeroscaler_webhook_api_errors", lambda: [k.errors for k in clients])
    )
    intake = Intake(
        Limits(settings.max_body_bytes, settings.body_budget_bytes, settings.read_timeout)
    )
    # The activator's waits and the watches of the two configurations get connections of their
    # own: held requests never take the ones the view (in combined mode, the controller's
    # writes and its Lease) depends on.
    kube = (
        Kube(
            live.kube.access,
            ClientLimits(max_connections=EDGE_CONNECTIONS, keepalive_connections=8),
        )
        if isinstance(live, LiveSource)
        else None
    )
    if kube is not None:
        clients.append(kube)
    own = OwnPaths(kube, settings.webhook_configuration, clock)
    admission = _Admission(settings, live, registry, intake, own, clock)
    covered = CoveredPaths(kube, settings.activator_configuration, clock)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await live.start()
        tasks = [asyncio.create_task(_freeze_when_ready(live, settings.gc_freeze))]
        for informer in (covered.informer, own.informer):
            if informer is not None:
                tasks.append(asyncio.create_task(informer.run()))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if kube is not None:
                await kube.aclose()
            await live.stop()

    app = FastAPI(
        title="zeroscaler-webhook",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.api_clients = clients
    # The API server calls the path the webhook's configuration holds (`OwnPaths`).
    for path in ("/", "/mutate", "/mutate/{token}"):
        app.post(path)(admission.mutate)
    holding = Holding(
        settings.namespace,
        settings.activator_requests,
        max_waiting=settings.activator_max_waiting,
    )
    coverage = Coverage(covered, live.namespace_labels)
    activation = Activation(kube, holding, coverage, intake, registry, clock)
    app.post("/activate/probe")(activation.probe)
    app.post("/activate/{rest:path}")(activation.activate)

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/readyz")
    async def readyz() -> PlainTextResponse:
        if live.is_ready():
            return PlainTextResponse("ok")
        return PlainTextResponse("caches not synced yet", status_code=503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


class _Admission:
    """`/mutate`: one AdmissionReview in, the patch `decide_patch` gives out, counted and timed."""

    def __init__(
        self,
        settings: WebhookSettings,
        live: Source,
        registry: CollectorRegistry,
        intake: Intake,
        own: OwnPaths,
        clock: Clock,
    ) -> None:
        self._clock = clock
        self._live = live
        self._intake = intake
        self._own = own
        self._excluded = frozenset([*settings.exclude_namespaces, settings.namespace])
        self._reviews = Counter(
            "zeroscaler_webhook_reviews_total",
            "Admission reviews by outcome (patched, unchanged, rejected, not-ready, error, "
            "not-found: at a path the configuration does not hold)",
            ["outcome"],
            registry=registry,
        )
        self._latency = Histogram(
            "zeroscaler_webhook_review_duration_seconds",
            "Time to decide one admission review",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )

    async def mutate(self, request: Request) -> Response:
        started = self._clock.monotonic()
        if not await self._own.accepts(request.url.path):
            self._reviews.labels("not-found").inc()
            return JSONResponse({"message": "not found"}, status_code=404)
        try:
            review = await self._intake.review(request)
        except Refused as e:
            self._reviews.labels("rejected").inc()
            return refusal(e)
        req = review["request"]
        live = self._live
        if not live.is_ready():
            # A cold cache would infer from nothing; leave the object to the controller's fallback.
            self._reviews.labels("not-ready").inc()
            return _json(build_response(req, [], [NOT_READY]))
        namespace = req.get("namespace")
        labels = (
            await live.namespace_labels(namespace)
            if isinstance(namespace, str) and namespace
            else None
        )
        view = live.view()
        try:
            decision = decide_patch(
                req,
                view.policy,
                view.rbac,
                view.discovery,
                namespace_labels=labels,
                custom_resources=view.custom_resources,
                excluded_namespaces=self._excluded,
            )
        except Exception:  # a bug must not block every deployment; admit unchanged and say so
            log.exception("deciding %s/%s failed", namespace, req.get("name"))
            self._reviews.labels("error").inc()
            return _json(build_response(req, [], [INTERNAL_ERROR]))
        self._reviews.labels("patched" if decision.patch else "unchanged").inc()
        self._latency.observe(self._clock.monotonic() - started)
        if decision.patch or decision.warnings:
            log.debug(
                "%s %s/%s: %s", req.get("operation"), namespace, req.get("name"), decision.reason
            )
        return _json(build_response(req, decision.patch, decision.warnings))


async def _freeze_when_ready(live: Source, enabled: bool) -> None:
    """Once caches are loaded, exempt everything alive from garbage collection passes.

    Imports and caches are long-lived; left in the collected generations, each full collection
    walks them all and stalls a review for tens of milliseconds (the p99 of the benchmark).
    """
    await live.wait_ready()
    if not enabled:
        return
    gc.collect()
    gc.freeze()


def _json(content: object) -> Response:
    """JSON, non-ASCII escaped: a lone surrogate echoed from a request must not fail to encode."""
    body = json.dumps(content, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    return Response(body, media_type="application/json")


def _live_source(settings: WebhookSettings, registry: CollectorRegistry, clock: Clock) -> Source:
    kube = Kube(load_access(settings.kubeconfig or None))
    return LiveSource(kube, settings, registry, clock=clock)
