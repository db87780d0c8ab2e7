"""Polling with a deadline: tests wait for a state, they never assert on timing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None], what: str, timeout: float = 60.0, interval: float = 0.2
) -> T:
    """Call `check` until it returns something truthy; after `timeout` s, fail naming `what`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
