"""`zeroscaler-webhook`: serve the admission webhook over TLS with uvicorn."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from pydantic_settings import CliApp

from zeroscaler.runtime.clock import LoopClock
from zeroscaler.runtime.logs import setup_logging
from zeroscaler.webhook.https import serve
from zeroscaler.webhook.settings import WebhookSettings


def main(argv: Sequence[str] | None = None) -> None:
    """Parse settings, build the app, and serve until interrupted."""
    settings = CliApp.run(WebhookSettings, cli_args=list(sys.argv[1:] if argv is None else argv))
    if missing := settings.tls_files_missing():
        sys.exit(f"zeroscaler-webhook: {missing}")
    setup_logging(settings.log_level, settings.log_format)
    asyncio.run(serve(settings, clock=LoopClock()))
