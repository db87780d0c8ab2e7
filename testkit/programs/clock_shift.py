"""`python -m testkit.programs.clock_shift INSTANT FLAGS...`: the controller, as a real process,
whose wall clock reads INSTANT (RFC 3339) when it starts and runs on from there.

The windows' system tests need the controller to live through a window's start and end at a
chosen weekday and time of day, in seconds rather than hours. Everything but the clock is the
production program: the same `zeroscaler.cli.controller_main.run` with the same flags, which
builds its Controller with the `Clock` it is handed (None in production: the real one). The clock
here is the real one moved by a fixed offset taken once at start, so time still passes at its
real pace: the timer heap (the clock's monotonic time) and every wall-clock deadline the
controller works out agree, and the test waits for a boundary as the controller does. Nothing in
the installed product reads a variable or flag that could move its clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from datetime import datetime, timedelta

from zeroscaler.cli import controller_main
from zeroscaler.controller.flags import parse_settings
from zeroscaler.core.durations import parse_time
from zeroscaler.runtime.clock import LoopClock
from zeroscaler.runtime.logs import setup_logging


class ShiftedClock(LoopClock):
    """The real clocks, the wall clock moved by a fixed offset."""

    def __init__(self, offset: timedelta) -> None:
        self.offset = offset

    def now(self) -> datetime:
        return super().now() + self.offset


def main(argv: list[str]) -> int:
    instant, flags = parse_time(argv[0]), argv[1:]
    clock = ShiftedClock(timedelta(0))
    clock.offset = instant - clock.now()
    settings = parse_settings(flags)
    setup_logging(settings.log_level, settings.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(controller_main.run(settings, clock))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
