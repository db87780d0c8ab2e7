"""The controller's two clocks, passed in so that its parts can be tested without waiting."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Wall-clock time for what is written and decided; loop time for deadlines and durations."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class LoopClock:
    """The real clocks: UTC now, and the running event loop's time (the timer heap's)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()
