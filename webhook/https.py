"""The webhook's HTTPS server: uvicorn with a reloadable certificate, and renewal beside it.

`zeroscaler-webhook` runs it alone; `zeroscaler-combined` runs it beside the controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from zeroscaler.api import Kube, KubeError
from zeroscaler.api.credentials import load_access
from zeroscaler.runtime.clock import Clock, LoopClock
from zeroscaler.webhook.app import create_app
from zeroscaler.webhook.settings import WebhookSettings
from zeroscaler.webhook.tls import CertReloader, server_context

if TYPE_CHECKING:
    from zeroscaler.certs.renewer import Renewer

log = logging.getLogger(__name__)
FIRST_PAIR_WAIT = 120.0  # seconds to wait for the TLS Secret at start (the install Job writes it)


class _OwnedServer(uvicorn.Server):
    """A server that leaves signals to its owner, which stops it by setting an event."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(
    settings: WebhookSettings,
    app: FastAPI | None = None,
    *,
    registry: CollectorRegistry | None = None,
    stop: asyncio.Event | None = None,
    kube: Kube | None = None,
    clock: Clock | None = None,
) -> None:
    """Run uvicorn (one worker, HTTP/1.1) with TLS whose certificate follows the files on disk.

    Without `stop` uvicorn handles SIGTERM and SIGINT; with it, setting it stops the server. A
    `kube` given is the renewer's API client (its owner closes it); else the renewer makes one.
    Renewal, and the app made here, take their time from `clock` (the real one when None).
    """
    if missing := settings.tls_files_missing():
        raise ValueError(missing)
    registry = registry if registry is not None else CollectorRegistry()
    clock = clock or LoopClock()
    renewer = _renewer(settings, registry, kube, clock) if settings.cert_secret else None
    if renewer is not None:
        await _first_pair(renewer, settings, owned=kube is None)
    ctx = server_context(settings.cert_file, settings.key_file)
    app = app if app is not None else create_app(settings, registry=registry, clock=clock)
    if renewer is not None and hasattr(app.state, "api_clients"):
        app.state.api_clients.append(renewer.kube)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http="h11",
        lifespan="on",
        log_level=settings.log_level.lower(),
        log_config=None,  # uvicorn's records go to our handler, in our format
        access_log=False,
        limit_concurrency=settings.max_connections,
        ssl_certfile=settings.cert_file,
        ssl_keyfile=settings.key_file,
    )
    config.load()
    config.ssl = ctx  # ours: TLS 1.2+ and reloadable
    reloader = CertReloader(ctx, settings.cert_file, settings.key_file)
    tasks = [asyncio.create_task(reloader.watch(settings.cert_check_interval))]
    if renewer is not None:
        # A renewed pair is served at once, not at the reloader's next check.
        tasks.append(asyncio.create_task(renewer.run(on_change=reloader.check)))
    server = uvicorn.Server(config) if stop is None else _OwnedServer(config)
    if stop is not None:
        tasks.append(asyncio.create_task(_exit_on(stop, server)))
    try:
        await server.serve()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if renewer is not None and kube is None:
            await renewer.kube.aclose()


def _renewer(
    settings: WebhookSettings, registry: CollectorRegistry, kube: Kube | None, clock: Clock
) -> Renewer:
    # Imported here: only a renewing webhook needs the certificate code and what it loads.
    from zeroscaler.certs.renewer import Renewer, RenewerConfig
    from zeroscaler.certs.schedule import RenewalPolicy

    config = RenewerConfig(
        namespace=settings.namespace,
        secret=settings.cert_secret,
        webhook_configuration=settings.cert_webhook_configuration,
        cert_file=Path(settings.cert_file),
        key_file=Path(settings.key_file),
        policy=RenewalPolicy(
            renew_fraction=settings.cert_renew_fraction,
            settle=timedelta(seconds=settings.cert_settle),
        ),
        serving_lifetime=timedelta(seconds=settings.cert_serving_lifetime),
        ca_lifetime=timedelta(seconds=settings.cert_ca_lifetime),
        interval=settings.cert_sync_interval,
    )
    kube = kube if kube is not None else Kube(load_access(settings.kubeconfig or None))
    return Renewer(kube, config, clock, registry=registry)


async def _first_pair(renewer: Renewer, settings: WebhookSettings, *, owned: bool) -> None:
    """Wait until the TLS Secret's serving pair is on disk: the server cannot start without it."""
    clock = renewer.clock
    deadline = clock.monotonic() + FIRST_PAIR_WAIT
    while True:
        try:
            if await renewer.sync_files():
                return
            problem = "not found or without a serving pair"
        except KubeError as e:
            problem = str(e)
        if clock.monotonic() > deadline:
            if owned:
                await renewer.kube.aclose()
            raise SystemExit(
                f"zeroscaler-webhook: --cert-secret {settings.namespace}/{settings.cert_secret}: "
                f"{problem} after {FIRST_PAIR_WAIT:g}s (zeroscaler certs writes it)"
            )
        log.info("waiting for the certificate Secret: %s", problem)
        await asyncio.sleep(min(settings.cert_sync_interval, 2.0))


async def _exit_on(stop: asyncio.Event, server: uvicorn.Server) -> None:
    await stop.wait()
    server.should_exit = True
