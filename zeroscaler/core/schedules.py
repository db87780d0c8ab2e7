"""Time windows and pauses: which window is in force at `now`, and when that changes next.

Keep-awake windows forbid sleeping (and wake a sleeper at their start); forced-sleep windows put
a workload to sleep at their start, and with `hold` keep activity from waking it until they end.
Everything here is decided from data and `now`; the zone database is read through `zoneinfo`.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from zeroscaler.core.durations import DurationError, _short, format_time, parse_duration, parse_time

WindowKind = Literal["keep-awake", "forced-sleep"]
ActivityMode = Literal["wake", "hold"]

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
WINDOW_FORM = (
    "DAYS HH:MM-HH:MM ZONE [except YYYY-MM-DD,...] [hold|wake], windows separated by ';' "
    '(e.g. "Mon-Fri 20:00-07:00 Europe/Berlin hold")'
)
DAYS_FORM = "weekdays such as Mon-Fri, Sat,Sun or * (Mon Tue Wed Thu Fri Sat Sun)"
TIME_FORM = "a time of day HH:MM, 00:00 to 24:00"
ZONE_FORM = "an IANA time zone such as Europe/Berlin, America/New_York or UTC"
DATE_FORM = "dates YYYY-MM-DD separated by commas"
PAUSE_FORM = "an RFC 3339 time (2026-12-01T08:00:00Z) or a duration such as 90m, 2h, 72h"
MAX_WINDOWS = 32  # per annotation or policy field: each look walks every window's days
MAX_EXCEPTIONS = 366
DAY = 24 * 60
# How far around `now` occurrences are enumerated: a week each way and one more day for windows
# that span midnight. A boundary further away is looked at again from the horizon.
_HORIZON_DAYS = 8

_TIME = re.compile(r"^(\d{1,2}):(\d{2})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class WindowError(ValueError):
    """A window that cannot be read; the message names the part and the expected form."""


@dataclass(frozen=True, slots=True)
class Window:
    """Weekdays and a time range in a zone; the range may end the next day (`end <= start`)."""

    kind: WindowKind
    days: frozenset[int]  # 0 is Monday
    start: int  # minutes after local midnight, 0 to 1439
    end: int  # minutes after local midnight, 1 to 1440
    zone: str
    exceptions: frozenset[date] = frozenset()  # days on which it does not start
    activity: ActivityMode = "wake"  # forced-sleep only: what activity does inside it

    @property
    def text(self) -> str:
        """The window as the annotation writes it."""
        parts = [_format_days(self.days), f"{_hhmm(self.start)}-{_hhmm(self.end)}", self.zone]
        if self.exceptions:
            parts += ["except", ",".join(d.isoformat() for d in sorted(self.exceptions))]
        if self.kind == "forced-sleep" and self.activity == "hold":
            parts.append("hold")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Phase:
    """A window kind in force: since when, until when, and the windows that make it."""

    start: datetime
    end: datetime
    windows: tuple[Window, ...]
    hold: bool = False  # forced sleep whose activity waits for the end

    @property
    def text(self) -> str:
        return "; ".join(w.text for w in self.windows)


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """What the windows say at one instant, and the next instant at which that may change."""

    keep_awake: Phase | None = None
    forced_sleep: Phase | None = None  # never while a keep-awake window is in force
    next_boundary: datetime | None = None


NO_SCHEDULE = ScheduleState()


@dataclass(frozen=True, slots=True)
class _Occurrence:
    window: Window
    start: datetime
    end: datetime


# -- reading windows ---------------------------------------------------------------------------


def parse_windows(text: str, kind: WindowKind) -> tuple[Window, ...]:
    """The windows of an annotation value, `;` between them; raise WindowError at a bad one."""
    items = [item.strip() for item in text.split(";")]
    if not any(items):
        raise WindowError(f"{_short(text)} has no window (use {WINDOW_FORM})")
    windows = []
    for i, item in enumerate(items, 1):
        if not item:
            continue
        try:
            windows.append(parse_window(item, kind))
        except WindowError as e:
            where = f"window {i} {_short(item)}" if len(items) > 1 else _short(item)
            raise WindowError(f"{where}: {e}; expected {WINDOW_FORM}") from None
    if len(windows) > MAX_WINDOWS:
        raise WindowError(f"{len(windows)} windows, over {MAX_WINDOWS}")
    return tuple(windows)


def parse_window(text: str, kind: WindowKind) -> Window:
    """One window: `DAYS HH:MM-HH:MM ZONE [except DATES] [hold|wake]`."""
    tokens = text.split()
    if len(tokens) < 3:
        raise WindowError("needs weekdays, a time range and a time zone")
    days, times, zone, rest = tokens[0], tokens[1], tokens[2], tokens[3:]
    start_text, dash, end_text = times.partition("-")
    if not dash:
        raise WindowError(f"{_short(times)} is not a time range HH:MM-HH:MM")
    activity: str = "wake"
    if rest and rest[-1].lower() in ("hold", "wake"):
        activity = rest.pop().lower()
    exceptions: list[str] = []
    if rest:
        if rest[0].lower() != "except" or len(rest) < 2:
            raise WindowError(f"{_short(' '.join(rest))} is not understood")
        exceptions = [d for token in rest[1:] for d in token.split(",") if d]
    return make_window(
        kind,
        days=days,
        start=start_text,
        end=end_text,
        zone=zone,
        exceptions=exceptions,
        activity=activity,
    )


def make_window(
    kind: WindowKind,
    *,
    days: str,
    start: str,
    end: str,
    zone: str,
    exceptions: Sequence[str] = (),
    activity: str = "wake",
) -> Window:
    """A window from its parts as text; raise WindowError naming the part that is wrong."""
    begin, finish = _minutes(start, "start"), _minutes(end, "end")
    if begin == DAY:
        raise WindowError(f"start {_short(start)} is not {TIME_FORM} before 24:00")
    if begin == finish:
        raise WindowError(
            f"start and end are both {_hhmm(begin)}: an empty window (a whole day is 00:00-24:00)"
        )
    if finish == 0:
        finish = DAY  # "22:00-00:00" ends at midnight
    if activity not in ("wake", "hold"):
        raise WindowError(f"activity {_short(activity)} is not wake or hold")
    if kind == "keep-awake" and activity == "hold":
        raise WindowError("hold applies to forced-sleep windows only")
    return Window(
        kind=kind,
        days=parse_days(days),
        start=begin,
        end=finish,
        zone=check_zone(zone),
        exceptions=_dates(exceptions),
        activity="hold" if activity == "hold" else "wake",
    )


def parse_days(text: str) -> frozenset[int]:
    """Weekdays: names and ranges separated by commas (`Mon-Fri`, `Sat,Sun`, `Fri-Mon`), or `*`."""
    if text.strip() == "*":
        return frozenset(range(7))
    days: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        a, b = _day(first, text), _day(last, text) if dash else None
        if b is None:
            days.add(a)
        else:
            days.update((a + i) % 7 for i in range((b - a) % 7 + 1))
    return frozenset(days)


def check_zone(name: str) -> str:
    """The zone's name if the zone database knows it."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise WindowError(f"{_short(name)} is not {ZONE_FORM}") from None
    return name


def format_windows(windows: Iterable[Window]) -> str:
    """Windows as an annotation writes them."""
    return "; ".join(w.text for w in windows)


def _day(text: str, whole: str) -> int:
    name = text.strip()[:1].upper() + text.strip()[1:].lower()
    if name not in DAY_NAMES:
        raise WindowError(f"{_short(whole)} is not {DAYS_FORM}")
    return DAY_NAMES.index(name)


def _format_days(days: frozenset[int]) -> str:
    if len(days) == 7:
        return "*"
    # Runs of consecutive days, Monday first: Mon-Fri, Sat,Sun as Sat-Sun.
    parts, day = [], 0
    while day < 7:
        if day not in days:
            day += 1
            continue
        last = day
        while last + 1 < 7 and last + 1 in days:
            last += 1
        first, end = DAY_NAMES[day], DAY_NAMES[last]
        parts.append(first if last == day else f"{first}-{end}")
        day = last + 1
    return ",".join(parts)


def _minutes(text: str, part: str) -> int:
    m = _TIME.match(text.strip())
    hours, minutes = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    if not (0 <= hours <= 24 and 0 <= minutes <= 59) or (hours == 24 and minutes):
        raise WindowError(f"{part} {_short(text)} is not {TIME_FORM}")
    return hours * 60 + minutes


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _dates(texts: Sequence[str]) -> frozenset[date]:
    if len(texts) > MAX_EXCEPTIONS:
        raise WindowError(f"{len(texts)} exception dates, over {MAX_EXCEPTIONS}")
    found = set()
    for text in texts:
        try:
            if not _DATE.match(text.strip()):
                raise ValueError(text)
            found.add(date.fromisoformat(text.strip()))
        except ValueError:
            raise WindowError(f"exception {_short(text)} is not {DATE_FORM}") from None
    return frozenset(found)


# -- what is in force --------------------------------------------------------------------------


def schedule_state(windows: Sequence[Window], now: datetime) -> ScheduleState:
    """The keep-awake and forced-sleep phases in force at `now`, and the next boundary.

    Overlapping windows of one kind join; where a keep-awake and a forced-sleep window overlap,
    keep-awake wins, and where forced-sleep windows that hold and that wake overlap, wake wins
    (both the side that never keeps an operator from its work).
    """
    if not windows:
        return NO_SCHEDULE
    occurrences = [o for w in windows for o in _occurrences(w, now)]
    if not occurrences:  # every day in the horizon an exception: look again from its end
        return ScheduleState(next_boundary=now + timedelta(days=_HORIZON_DAYS - 1))
    boundaries = sorted({b for o in occurrences for b in (o.start, o.end)})
    here = _at(occurrences, now)
    # The first boundary after now where the state differs; none within the horizon: its edge.
    later = [b for b in boundaries if b > now]
    next_boundary = next((b for b in later if _at(occurrences, b) != here), None)
    if next_boundary is None:
        next_boundary = later[-1] if later else now + timedelta(days=_HORIZON_DAYS - 1)
    keep, forced = here[0], here[1]
    keep_phase = forced_phase = None
    if keep:
        keep_phase = _phase(occurrences, boundaries, now, "keep-awake", next_boundary, False)
    elif forced:
        forced_phase = _phase(occurrences, boundaries, now, "forced-sleep", next_boundary, here[2])
    return ScheduleState(keep_phase, forced_phase, next_boundary)


def jitter(seed: str, spread: float) -> float:
    """A workload's own delay in [0, spread): stable across restarts, spread evenly."""
    if spread <= 0:
        return 0.0
    return zlib.crc32(seed.encode()) / 2**32 * spread


def _occurrences(window: Window, now: datetime) -> list[_Occurrence]:
    """The window's occurrences starting from a horizon before `now` to one after, in UTC."""
    zone = ZoneInfo(window.zone)
    today = now.astimezone(zone).date()
    found = []
    for offset in range(-_HORIZON_DAYS, _HORIZON_DAYS + 1):
        day = today + timedelta(days=offset)
        if day.weekday() not in window.days or day in window.exceptions:
            continue
        start = _instant(day, window.start, zone)
        end_day = day if window.end > window.start else day + timedelta(days=1)
        end = _instant(end_day, window.end, zone)
        if end > start:  # a window wholly inside the hour skipped in spring is not read that day
            found.append(_Occurrence(window, start, end))
    return found


def _instant(day: date, minutes: int, zone: ZoneInfo) -> datetime:
    """A local time of day as an instant, so that a window is in force while the local clock
    reads a time inside it: a time skipped in spring is the moment the clock jumps past it (02:30
    is 03:00 summer time); a time read twice in autumn is its first reading."""
    if minutes == DAY:
        day, minutes = day + timedelta(days=1), 0
    local = datetime.combine(day, time(minutes // 60, minutes % 60), tzinfo=zone)
    instant = local.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == local.replace(tzinfo=None):
        return instant
    # Skipped: the jump lies between the reading with the offset after it and the one before.
    low, high = local.replace(fold=1).astimezone(UTC), instant
    after = high.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == after:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


# (keep-awake in force, forced sleep in force, forced sleep holds)
_State = tuple[bool, bool, bool]


def _at(occurrences: Sequence[_Occurrence], instant: datetime) -> _State:
    covering = [o for o in occurrences if o.start <= instant < o.end]
    keep = any(o.window.kind == "keep-awake" for o in covering)
    forced = [o for o in covering if o.window.kind == "forced-sleep"]
    in_force = bool(forced) and not keep
    hold = in_force and all(o.window.activity == "hold" for o in forced)
    return keep, in_force, hold


def _phase(
    occurrences: Sequence[_Occurrence],
    boundaries: Sequence[datetime],
    now: datetime,
    kind: WindowKind,
    end: datetime,
    hold: bool,
) -> Phase:
    """The stretch of one kind in force around `now`: back to where it began, on to `end`."""
    index = 1 if kind == "forced-sleep" else 0
    start = now
    for b in reversed([b for b in boundaries if b <= now]):
        if not _at(occurrences, b)[index]:
            break
        start = b
    # The end said is where the kind stops, not merely where its hold turns to wake.
    for b in (b for b in boundaries if b >= end):
        if not _at(occurrences, b)[index]:
            end = b
            break
    windows = {
        o.window: None for o in occurrences if o.window.kind == kind and o.start <= now < o.end
    }
    return Phase(start, end, tuple(windows), hold)


# -- pauses ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PauseUntil:
    """`zeroscaler.io/paused-until` as written: an instant, or a duration from when it was set."""

    at: datetime | None = None
    seconds: float | None = None


def parse_pause_until(text: str) -> PauseUntil:
    """An RFC 3339 time or a duration; raise WindowError with the expected form."""
    try:
        return PauseUntil(at=parse_time(text))
    except ValueError:
        pass
    try:
        seconds = parse_duration(text)
    except DurationError:
        raise WindowError(f"{_short(text)} is not {PAUSE_FORM}") from None
    if seconds <= 0:
        raise WindowError(f"{_short(text)} must be longer than zero ({PAUSE_FORM})")
    return PauseUntil(seconds=seconds)


def pause_end(pause: PauseUntil, set_at: datetime | None) -> datetime | None:
    """When a pause ends: its time, or its duration after `set_at` (when the API server recorded
    the annotation being written); None when a duration has no such record."""
    if pause.at is not None:
        return pause.at
    if pause.seconds is None or set_at is None:
        return None
    return set_at + timedelta(seconds=pause.seconds)


def describe_phase(phase: Phase, kind: WindowKind, source: str) -> str:
    """`forced-sleep window "..." (source) from T to T`, for Events and the command."""
    return (
        f'{kind} window "{phase.text}" ({source}) from {format_time(phase.start)} '
        f"to {format_time(phase.end)}"
    )


def windows_by_kind(windows: Iterable[Window]) -> Mapping[WindowKind, tuple[Window, ...]]:
    """The windows of each kind, in order."""
    keep = tuple(w for w in windows if w.kind == "keep-awake")
    forced = tuple(w for w in windows if w.kind == "forced-sleep")
    return {"keep-awake": keep, "forced-sleep": forced}
