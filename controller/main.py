"""`zeroscaler-controller`: assemble the scaler, leader election and HTTP endpoints, then run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence

from controller.leader import LeaderElector
from controller.metrics import Route, serve_http
from controller.scaler import Scaler
from controller.settings import Settings, parse_settings
from zeroscaler.access import load_access
from zeroscaler.kube import Kube
from zeroscaler.logs import setup_logging

log = logging.getLogger("controller")


def routes(scaler: Scaler) -> dict[str, Route]:
    """The HTTP endpoints: liveness, readiness (watches synced) and Prometheus metrics."""
    return {
        "/healthz": lambda: (200, "text/plain", b"ok\n"),
        "/readyz": lambda: (
            (200, "text/plain", b"ok\n") if scaler.ready else (503, "text/plain", b"syncing\n")
        ),
        "/metrics": lambda: (200, "text/plain; version=0.0.4", scaler.metrics.render()),
    }


async def run(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT; give the Lease up on the way out."""
    access = load_access(settings.kubeconfig)
    # Every shared watch holds a connection of its own, so watches get a large pool; requests get
    # a small one whose connections all stay open (a TLS handshake costs more than a short wait).
    async with (
        Kube(access, max_connections=settings.max_connections) as watch_kube,
        Kube(
            access,
            max_connections=settings.request_connections,
            qps=settings.api_qps,
            burst=settings.api_burst,
        ) as kube,
    ):
        scaler = Scaler(kube, settings, watch_kube)
        elector = LeaderElector(
            kube,
            settings.lease_namespace,
            settings.lease_name,
            settings.id,
            settings.lease_duration,
            scaler.set_leader,
        )
        server = None
        if settings.metrics_port:
            server = await serve_http(settings.metrics_host, settings.metrics_port, routes(scaler))
        log.info(
            "starting",
            extra={"id": settings.id, "dry_run": settings.dry_run, "port": settings.metrics_port},
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        tasks = [asyncio.create_task(scaler.run()), asyncio.create_task(elector.run())]
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
        for task in [*tasks, stopper]:
            task.cancel()
        await asyncio.gather(*tasks, stopper, return_exceptions=True)
        await elector.release()
        await scaler.aclose()
        if server is not None:
            server.close()
        for task in done:
            if task is not stopper and not task.cancelled() and task.exception():
                raise task.exception()  # type: ignore[misc]
        log.info("stopped")


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    settings = parse_settings(argv)
    setup_logging(settings.log_level, settings.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
