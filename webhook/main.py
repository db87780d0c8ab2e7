"""`zeroscaler-webhook`: serve the admission webhook over TLS with uvicorn."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

import uvicorn
from fastapi import FastAPI
from pydantic_settings import CliApp

from webhook.app import create_app
from webhook.settings import Settings
from webhook.tls import CertReloader, server_context


def main(argv: Sequence[str] | None = None) -> None:
    """Parse settings, build the app, and serve until interrupted."""
    settings = CliApp.run(Settings, cli_args=list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    for chatty in ("httpx", "httpcore"):  # one line per API request is noise even when debugging
        logging.getLogger(chatty).setLevel(max(logging.INFO, logging.getLogger().level))
    if not settings.cert_file or not settings.key_file:
        sys.exit("zeroscaler-webhook: --cert-file and --key-file are required (HTTPS only)")
    asyncio.run(serve(settings))


async def serve(settings: Settings, app: FastAPI | None = None) -> None:
    """Run uvicorn (one worker, HTTP/1.1) with TLS whose certificate follows the files on disk."""
    if not settings.cert_file or not settings.key_file:
        raise ValueError("cert_file and key_file are required")
    ctx = server_context(settings.cert_file, settings.key_file)
    config = uvicorn.Config(
        app if app is not None else create_app(settings),
        host=settings.host,
        port=settings.port,
        http="h11",
        lifespan="on",
        log_level=settings.log_level.lower(),
        access_log=False,
        ssl_certfile=settings.cert_file,
        ssl_keyfile=settings.key_file,
    )
    config.load()
    config.ssl = ctx  # ours: TLS 1.2+ and reloadable
    reloader = CertReloader(ctx, settings.cert_file, settings.key_file)
    watcher = asyncio.create_task(reloader.watch(settings.cert_check_interval))
    try:
        await uvicorn.Server(config).serve()
    finally:
        watcher.cancel()
