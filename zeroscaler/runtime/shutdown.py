"""How a command is told to stop: SIGTERM or SIGINT sets one event that all its parts wait on.

The controller and the combined process both stop this way (the Lease is given up, writes on their
way land); the webhook alone leaves signals to uvicorn.
"""

from __future__ import annotations

import asyncio
import signal


def stop_on_signals() -> asyncio.Event:
    """An event set on SIGTERM or SIGINT, in the running loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
