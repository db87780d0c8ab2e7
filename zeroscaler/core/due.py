"""Due times: a field of a watched kind holding when the operator has work to do, and the wake
that comes a lead time before the earliest of them (DESIGN.md, "Work on a clock").

cert-manager publishes when it will renew each Certificate (`status.renewalTime`) and renews it
then from a timer in its memory; asleep, the timer is gone. A workload names such fields per kind
(`Certificate.cert-manager.io=status.renewalTime`); zeroscaler keeps the times from the shared
watch of that kind and wakes the workload that long before the earliest one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from zeroscaler.core.durations import _short, format_duration, format_time
from zeroscaler.core.kinds import KIND_REF_FORM, KindRef, KindRefError, parse_kind_ref

DUE_FORM = (
    "comma-separated Kind.group=field.path (e.g. Certificate.cert-manager.io=status.renewalTime)"
)
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,62}(\.[A-Za-z_][A-Za-z0-9_-]{0,62}){0,7}")
DEFAULT_LEAD = 120.0  # seconds: a start (pull, leader Lease, cache sync) is within it
# What a due time may be: an RFC 3339 time the API server wrote, to the second or finer.
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


@dataclass(frozen=True, slots=True)
class DueField:
    """A kind and the field of its objects that holds a due time."""

    kind: KindRef
    field: str  # dotted path, e.g. status.renewalTime

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.field.split("."))

    def __str__(self) -> str:
        return f"{self.kind.text}={self.field}"


@dataclass(frozen=True, slots=True)
class DueTime:
    """One object's due time, and what it is, in an Event's words."""

    at: datetime
    what: str  # e.g. "Certificate ops/web status.renewalTime"


def parse_due_field(text: str) -> DueField:
    """One `Kind.group=field.path`; raise ValueError naming the expected form."""
    kind_text, sep, field = text.strip().partition("=")
    field = field.strip()
    if not sep or not kind_text.strip() or not _FIELD.fullmatch(field):
        raise ValueError(f"{_short(text)} is not Kind.group=field.path ({DUE_FORM})")
    try:
        kind = parse_kind_ref(kind_text)
    except KindRefError as e:
        raise ValueError(f"{_short(text)}: {kind_text.strip()!r} is not {KIND_REF_FORM}") from e
    return DueField(kind, field)


def parse_due_fields(text: str) -> tuple[tuple[DueField, ...], list[str]]:
    """The annotation's fields, and a message for each malformed entry (left out)."""
    fields: list[DueField] = []
    errors: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            fields.append(parse_due_field(item))
        except ValueError as e:
            errors.append(str(e))
    return tuple(dict.fromkeys(fields)), errors


def format_due_fields(fields: Iterable[DueField]) -> str:
    return ",".join(sorted({str(f) for f in fields}))


def read_due(obj: Mapping[str, Any], path: tuple[str, ...]) -> int | None:
    """The time at `path` in an object, as whole seconds since the epoch; None when absent or not
    an RFC 3339 time (a malformed value is no due time)."""
    value: Any = obj
    for step in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    if not isinstance(value, str) or not _TIME.fullmatch(value):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(when.timestamp())


def as_time(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


@dataclass(frozen=True, slots=True)
class DueSummary:
    """What a decision needs of a workload's due times: the latest one already passed (a due
    time is work done, so the idle clock counts from it) and the earliest one after a moment."""

    passed: DueTime | None = None  # the latest at or before `now`
    next: DueTime | None = None  # the earliest after `after`


NO_DUE = DueSummary()


def summarize(times: Iterable[DueTime], now: datetime, after: datetime) -> DueSummary:
    """The latest due time at or before `now`, and the earliest after `after` (for an asleep
    workload, its sleep: a time already past when it fell asleep was its business awake)."""
    passed: DueTime | None = None
    upcoming: DueTime | None = None
    for due in times:
        if due.at <= now and (passed is None or due.at > passed.at):
            passed = due
        if due.at > after and (upcoming is None or due.at < upcoming.at):
            upcoming = due
    return DueSummary(passed, upcoming)


def due_wake_at(due: DueTime, lead: float) -> datetime:
    """When a sleeper is woken for a due time: `lead` seconds before it."""
    return due.at - timedelta(seconds=lead)


def due_reason(due: DueTime, lead: float) -> str:
    """A wake's reason for a due time, in an Event's words."""
    return f"{due.what} is due at {format_time(due.at)} (woken {format_duration(lead)} before)"
