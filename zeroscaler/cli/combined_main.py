"""`zeroscaler-combined`: the controller and the webhook in one process, over one cluster view.

Flags before `--` are the controller's, flags after it the webhook's (whose `--kubeconfig` is not
used: both halves talk over the controller's two API clients' connections and pacers, each
counting its own failed requests). Namespaces, RBAC, CRDs, discovery and, when both name the same
namespace, the policy ConfigMaps are watched once for both. Leader election governs the
controller half only; the webhook half serves on every replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence

from prometheus_client import CollectorRegistry
from pydantic_settings import CliApp

from zeroscaler.controller import supervisor
from zeroscaler.controller.assembly import Controller
from zeroscaler.controller.flags import ControllerSettings, parse_settings
from zeroscaler.runtime.collectors import Forwarded
from zeroscaler.runtime.logs import setup_logging
from zeroscaler.runtime.shutdown import stop_on_signals
from zeroscaler.webhook import https
from zeroscaler.webhook.app import create_app
from zeroscaler.webhook.caches import LiveSource
from zeroscaler.webhook.settings import WebhookSettings


def split_arguments(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The controller's flags (before the first `--`) and the webhook's (after it)."""
    args = list(argv)
    if "--" not in args:
        return args, []
    at = args.index("--")
    return args[:at], args[at + 1 :]


async def run(controller: ControllerSettings, webhook: WebhookSettings) -> None:
    """Both halves until SIGTERM or SIGINT, or until either fails (which stops the other)."""
    stop = stop_on_signals()
    async with supervisor.clients(controller) as clients:
        kube = clients.requests
        # CRD specs are kept: the webhook names kinds that discovery does not serve yet.
        scaler = Controller(kube, controller, clients.watches, crd_specs=True)
        shared = controller.policy_source == webhook.namespace
        registry = CollectorRegistry()
        # The webhook's requests (Events, renewal) share the controller's connections and pacer,
        # but its /metrics counts only its own failures; the activator has connections of its own.
        webhook_kube = kube.sharing()
        source = LiveSource(
            webhook_kube,
            webhook,
            registry,
            cluster=scaler.cluster,
            policies=scaler.policies if shared else None,
            clock=scaler.clock,
        )
        app = create_app(webhook, source, registry, scaler.clock)
        # One scrape of the metrics port sees both halves (the chart's one ServiceMonitor).
        scaler.metrics.registry.register(Forwarded(registry))
        parts = [
            asyncio.create_task(supervisor.serve(controller, scaler, clients, stop)),
            asyncio.create_task(
                https.serve(
                    webhook,
                    app,
                    registry=registry,
                    stop=stop,
                    kube=webhook_kube,
                    clock=scaler.clock,
                )
            ),
        ]
        try:
            await asyncio.wait(parts, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.set()
            results = await asyncio.gather(*parts, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            raise result


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    controller_args, webhook_args = split_arguments(sys.argv[1:] if argv is None else argv)
    controller = parse_settings(controller_args)
    webhook = CliApp.run(WebhookSettings, cli_args=webhook_args)
    if missing := webhook.tls_files_missing():
        sys.exit(f"zeroscaler-combined: after --, {missing}")
    setup_logging(controller.log_level, controller.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(controller, webhook))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
