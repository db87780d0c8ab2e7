"""Durations in Go syntax (`90s`, `15m`, `1h30m`) or plain seconds, and RFC 3339 times."""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime

DURATION_FORM = "a duration such as 90s, 15m, 1h30m, or plain seconds"

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_MAX_LEN = 64


class DurationError(ValueError):
    """A value that is not a duration."""


# Kept: every reconcile reads its workload's timeout, and most workloads have one of a few.
@functools.lru_cache(maxsize=256)
def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration or a plain number of seconds."""
    value = text.strip()
    if not value or len(value) > _MAX_LEN:
        raise DurationError(f"{_short(text)} is not {DURATION_FORM}")
    try:
        seconds = float(value)
    except ValueError:
        pos, seconds = 0, 0.0
        for m in _PART.finditer(value):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(value):
            raise DurationError(f"{_short(text)} is not {DURATION_FORM}") from None
    if not seconds >= 0 or seconds == float("inf"):
        raise DurationError(f"{_short(text)} is not {DURATION_FORM}")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest Go-style spelling of whole seconds (`1h30m`, `90s` → `1m30s`)."""
    total = round(seconds)
    if total == 0:
        return "0s"
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if n)


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as a timezone-aware datetime; raise ValueError otherwise."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"{_short(text)} has no time zone")
    return parsed


def format_time(when: datetime) -> str:
    """RFC 3339 in UTC with second precision, as Kubernetes writes times."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _short(text: str, limit: int = 40) -> str:
    """Quote a user value for a message, cut so a 100 KB value cannot flood an Event."""
    return repr(text if len(text) <= limit else text[:limit] + "…")
