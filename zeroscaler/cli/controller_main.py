"""`zeroscaler-controller`: the scaler, leader election and HTTP endpoints, until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from zeroscaler.controller import supervisor
from zeroscaler.controller.assembly import Controller
from zeroscaler.controller.flags import ControllerSettings, parse_settings
from zeroscaler.runtime.clock import Clock
from zeroscaler.runtime.logs import setup_logging
from zeroscaler.runtime.shutdown import stop_on_signals


async def run(settings: ControllerSettings, clock: Clock | None = None) -> None:
    """Run until SIGTERM or SIGINT; give the Lease up on the way out. `clock` defaults to the
    real one; a test may hand in one that reads another instant
    (testkit/programs/clock_shift.py)."""
    stop = stop_on_signals()
    async with supervisor.clients(settings) as clients:
        scaler = Controller(clients.requests, settings, clients.watches, clock)
        await supervisor.serve(settings, scaler, clients, stop)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    settings = parse_settings(argv)
    setup_logging(settings.log_level, settings.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
