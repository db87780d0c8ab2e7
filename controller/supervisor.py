"""The controller as a service: the scaler, leader election and HTTP endpoints until told to stop.

`zeroscaler-controller` runs it alone; `zeroscaler-combined` runs it beside the webhook, which
reads the scaler's cluster view and policy watch and talks through the same API clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import ssl
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from zeroscaler.api import ClientLimits, Kube
from zeroscaler.api.credentials import load_access
from zeroscaler.controller.assembly import Controller
from zeroscaler.controller.flags import ControllerSettings
from zeroscaler.controller.leader import LeaderElector, LeaseTerms
from zeroscaler.controller.metrics import Route, serve_http
from zeroscaler.controller.scrapers import ScrapeAccess

log = logging.getLogger("controller")

DRAIN_SECONDS = 2.0  # at most, for the writes on their way at shutdown before the Lease goes


def routes(scaler: Controller) -> dict[str, Route]:
    """The HTTP endpoints: liveness, readiness (watches synced) and Prometheus metrics."""
    return {
        "/healthz": lambda _: (200, "text/plain", b"ok\n"),
        "/readyz": lambda _: (
            (200, "text/plain", b"ok\n") if scaler.ready else (503, "text/plain", b"syncing\n")
        ),
        "/metrics": lambda query: (
            200,
            "text/plain; version=0.0.4",
            scaler.metrics.render(query.get("name[]", ())),
        ),
    }


@dataclass(frozen=True, slots=True)
class Clients:
    """The controller's API clients, each with connections of its own."""

    watches: Kube  # every shared watch holds one of its connections
    requests: Kube  # reads and writes, paced
    lease: Kube  # the Lease alone: nothing else can hold its connection when a renewal is due


@contextlib.asynccontextmanager
async def clients(settings: ControllerSettings) -> AsyncIterator[Clients]:
    """The controller's clients, closed on the way out."""
    access = load_access(settings.kubeconfig)
    _allow_open_files(settings.max_connections + 256)
    # Every shared watch holds a connection of its own, so watches get a large pool; requests get
    # a small one whose connections all stay open (a TLS handshake costs more than a short wait).
    # httpcore counts busy connections against the idle ones it may keep: with 16 kept, each
    # watch that ended (every 5 minutes) lost its connection and paid a handshake to start again.
    async with (
        Kube(
            access,
            ClientLimits(
                max_connections=settings.max_connections,
                keepalive_connections=settings.max_connections,
            ),
        ) as watch_kube,
        Kube(
            access,
            ClientLimits(
                max_connections=settings.request_connections,
                qps=settings.api_qps,
                burst=settings.api_burst,
            ),
        ) as kube,
        Kube(access, ClientLimits(max_connections=2, keepalive_connections=2)) as lease_kube,
    ):
        yield Clients(watch_kube, kube, lease_kube)


def _allow_open_files(wanted: int) -> None:
    """Raise the soft limit of open files towards `wanted`, within the hard one: each watch holds
    a socket, and a container's soft limit may be 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def self_signed_tls(host: str) -> ssl.SSLContext:
    """A TLS server context with a certificate made now (Prometheus scrapes it without checking,
    as it does kube-rbac-proxy's; what keeps the metrics private is the token)."""
    from zeroscaler.certs.issue import new_ca, new_serving_cert  # cryptography: only when asked

    ca = new_ca("zeroscaler-controller-metrics")
    pair = new_serving_cert(ca, [socket.gethostname(), *([host] if host != "0.0.0.0" else [])])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory() as folder:  # read once, then gone
        cert, key = Path(folder, "tls.crt"), Path(folder, "tls.key")
        key.touch(mode=0o600)
        key.write_bytes(pair.key_pem)
        cert.write_bytes(pair.cert_pem + ca.cert_pem)
        context.load_cert_chain(cert, key)
    return context


async def _settled(kube: Kube) -> None:
    """The requests on their way answered, or DRAIN_SECONDS gone."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            await kube.settle()


async def serve(
    settings: ControllerSettings, scaler: Controller, kube: Clients, stop: asyncio.Event
) -> None:
    """Run the scaler and the Lease until `stop` is set or either fails; give the Lease up
    once the writes on their way have landed."""
    terms = LeaseTerms(
        settings.lease_namespace, settings.lease_name, settings.id, settings.lease_duration
    )
    elector = LeaderElector(kube.lease, terms, scaler.clock, scaler.set_leader)
    server = None
    if settings.metrics_port:
        tls, guard = None, None
        if settings.metrics_auth:
            tls = self_signed_tls(settings.metrics_host)
            guard = ScrapeAccess(kube.requests, scaler.clock).status
        server = await serve_http(
            settings.metrics_host, settings.metrics_port, routes(scaler), tls=tls, guard=guard
        )
    log.info(
        "starting",
        extra={"id": settings.id, "dry_run": settings.dry_run, "port": settings.metrics_port},
    )
    tasks = [asyncio.create_task(scaler.run()), asyncio.create_task(elector.run())]
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
    for task in [*tasks, stopper]:
        task.cancel()
    await asyncio.gather(*tasks, stopper, return_exceptions=True)
    await elector.release(lambda: _settled(kube.requests))
    await scaler.aclose()
    if server is not None:
        server.close()
    for task in done:
        if task is not stopper and not task.cancelled() and task.exception():
            raise task.exception()  # type: ignore[misc]
    log.info("stopped")
