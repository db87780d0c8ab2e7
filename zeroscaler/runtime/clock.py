"""The process's two clocks, handed to every part (controller, webhook, certificates, Events) by
what builds it, so that the parts agree on the time and can be tested without waiting."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Wall-clock time for what is written and decided; monotonic time for deadlines and durations
    (the timer heap's, a Lease's expiry)."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class LoopClock:
    """The real clocks: UTC now, and monotonic time (the time asyncio's loop keeps too)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        # What asyncio's loop.time() returns, without looking up the running loop (read several
        # times a reconcile, 10,000 of them in a restart).
        return time.monotonic()


class ManualClock:
    """Clocks that move only when told: the tests' stand-in for LoopClock."""

    def __init__(
        self, now: datetime = datetime(2026, 1, 1, 12, tzinfo=UTC), monotonic: float = 0.0
    ) -> None:
        self._now, self._monotonic = now, monotonic

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move both clocks on by `seconds`."""
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds
