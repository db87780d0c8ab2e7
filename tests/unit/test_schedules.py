"""Table tests for windows and pauses: literal instants across zones and both DST changes."""

from __future__ import annotations

from datetime import datetime

import pytest

from zeroscaler.core.durations import parse_time
from zeroscaler.core.schedules import (
    PauseUntil,
    ScheduleState,
    WindowError,
    format_windows,
    jitter,
    parse_pause_until,
    parse_windows,
    pause_end,
    schedule_state,
)


def t(text: str) -> datetime:
    return parse_time(text)


def fmt(when: datetime | None) -> str | None:
    return None if when is None else when.strftime("%Y-%m-%dT%H:%MZ")


def summary(state: ScheduleState) -> tuple[str, str | None, str | None, str | None]:
    """(what is in force, since, until, next boundary), times as UTC text."""
    phase = state.keep_awake or state.forced_sleep
    what = "none"
    if state.keep_awake is not None:
        what = "keep"
    elif state.forced_sleep is not None:
        what = "hold" if state.forced_sleep.hold else "forced"
    return (
        what,
        fmt(phase.start if phase else None),
        fmt(phase.end if phase else None),
        fmt(state.next_boundary),
    )


# (case, keep-awake windows, forced-sleep windows, now, (in force, since, until, next boundary))
CASES: list[tuple[str, str, str, str, tuple[str, str | None, str | None, str | None]]] = [
    # 2026-01-05 is a Monday; Berlin is UTC+1 in winter, UTC+2 in summer.
    (
        "a second before a weekday window in Berlin: nothing, next at its start",
        "Mon-Fri 08:00-18:00 Europe/Berlin",
        "",
        "2026-01-05T06:59:59Z",
        ("none", None, None, "2026-01-05T07:00Z"),
    ),
    (
        "at its start: keep-awake until 18:00 local",
        "Mon-Fri 08:00-18:00 Europe/Berlin",
        "",
        "2026-01-05T07:00:00Z",
        ("keep", "2026-01-05T07:00Z", "2026-01-05T17:00Z", "2026-01-05T17:00Z"),
    ),
    (
        "at its end: over, next on Tuesday",
        "Mon-Fri 08:00-18:00 Europe/Berlin",
        "",
        "2026-01-05T17:00:00Z",
        ("none", None, None, "2026-01-06T07:00Z"),
    ),
    (
        "Friday evening: the next start is Monday",
        "Mon-Fri 08:00-18:00 Europe/Berlin",
        "",
        "2026-01-09T18:00:00Z",
        ("none", None, None, "2026-01-12T07:00Z"),
    ),
    (
        "the same window in summer time is an hour earlier in UTC",
        "Mon-Fri 08:00-18:00 Europe/Berlin",
        "",
        "2026-07-06T06:00:00Z",
        ("keep", "2026-07-06T06:00Z", "2026-07-06T16:00Z", "2026-07-06T16:00Z"),
    ),
    (
        "Tokyo (UTC+9): Monday 09:00 is midnight UTC",
        "Mon-Fri 09:00-17:00 Asia/Tokyo",
        "",
        "2026-01-05T00:00:00Z",
        ("keep", "2026-01-05T00:00Z", "2026-01-05T08:00Z", "2026-01-05T08:00Z"),
    ),
    (
        "Los Angeles (UTC-8): Monday's window ends on Tuesday in UTC",
        "Mon-Fri 09:00-17:00 America/Los_Angeles",
        "",
        "2026-01-05T23:00:00Z",
        ("keep", "2026-01-05T17:00Z", "2026-01-06T01:00Z", "2026-01-06T01:00Z"),
    ),
    (
        "Kolkata (UTC+5:30): a half-hour zone",
        "Mon 09:00-10:00 Asia/Kolkata",
        "",
        "2026-01-05T03:29:00Z",
        ("none", None, None, "2026-01-05T03:30Z"),
    ),
    (
        "Kiritimati (UTC+14): Monday there begins on Sunday in UTC",
        "",
        "Mon 00:00-24:00 Pacific/Kiritimati",
        "2026-01-04T12:00:00Z",
        ("forced", "2026-01-04T10:00Z", "2026-01-05T10:00Z", "2026-01-05T10:00Z"),
    ),
    (
        "across midnight: Monday's night holds until Tuesday 07:00 local",
        "",
        "Mon-Fri 20:00-07:00 Europe/Berlin hold",
        "2026-01-06T05:59:00Z",
        ("hold", "2026-01-05T19:00Z", "2026-01-06T06:00Z", "2026-01-06T06:00Z"),
    ),
    (
        "across midnight: Friday's night runs into Saturday morning",
        "",
        "Mon-Fri 20:00-07:00 Europe/Berlin hold",
        "2026-01-10T05:00:00Z",
        ("hold", "2026-01-09T19:00Z", "2026-01-10T06:00Z", "2026-01-10T06:00Z"),
    ),
    (
        "across midnight: Sunday night is not a start day",
        "",
        "Mon-Fri 20:00-07:00 Europe/Berlin hold",
        "2026-01-11T20:00:00Z",
        ("none", None, None, "2026-01-12T19:00Z"),
    ),
    (
        "a window ending at midnight, written 00:00",
        "",
        "Mon 22:00-00:00 UTC",
        "2026-01-05T23:30:00Z",
        ("forced", "2026-01-05T22:00Z", "2026-01-06T00:00Z", "2026-01-06T00:00Z"),
    ),
    (
        "whole days join over midnight: Saturday and Sunday are one stretch",
        "",
        "Sat,Sun 00:00-24:00 UTC",
        "2026-01-10T12:00:00Z",
        ("forced", "2026-01-10T00:00Z", "2026-01-12T00:00Z", "2026-01-12T00:00Z"),
    ),
    (
        "a day range that wraps the week",
        "Fri-Mon 10:00-11:00 UTC",
        "",
        "2026-01-11T10:30:00Z",
        ("keep", "2026-01-11T10:00Z", "2026-01-11T11:00Z", "2026-01-11T11:00Z"),
    ),
    # Spring: on 2026-03-29 Berlin's clocks jump from 02:00 to 03:00 (01:00 UTC).
    (
        "spring: a start in the skipped hour is when the clock jumps past it",
        "Sun 02:30-04:00 Europe/Berlin",
        "",
        "2026-03-29T01:00:00Z",
        ("keep", "2026-03-29T01:00Z", "2026-03-29T02:00Z", "2026-03-29T02:00Z"),
    ),
    (
        "spring: just before the jump, the window skipped-into is still ahead",
        "Sun 02:30-04:00 Europe/Berlin",
        "",
        "2026-03-29T00:59:59Z",
        ("none", None, None, "2026-03-29T01:00Z"),
    ),
    (
        "spring: an end in the skipped hour ends at the jump (30 minutes that night)",
        "",
        "* 01:30-02:30 Europe/Berlin",
        "2026-03-29T00:45:00Z",
        ("forced", "2026-03-29T00:30Z", "2026-03-29T01:00Z", "2026-03-29T01:00Z"),
    ),
    (
        "spring: a window wholly inside the skipped hour does not happen that day",
        "",
        "Sun 02:00-02:45 Europe/Berlin",
        "2026-03-29T01:10:00Z",
        ("none", None, None, "2026-04-05T00:00Z"),
    ),
    (
        "spring in New York (2026-03-08, 07:00 UTC): 01:00-03:00 lasts one hour",
        "",
        "Sun 01:00-03:00 America/New_York",
        "2026-03-08T06:30:00Z",
        ("forced", "2026-03-08T06:00Z", "2026-03-08T07:00Z", "2026-03-08T07:00Z"),
    ),
    # Autumn: on 2026-10-25 Berlin's clocks go back from 03:00 to 02:00 (01:00 UTC).
    (
        "autumn: 02:00-03:00 covers both readings of the repeated hour",
        "",
        "Sun 02:00-03:00 Europe/Berlin",
        "2026-10-25T01:30:00Z",
        ("forced", "2026-10-25T00:00Z", "2026-10-25T02:00Z", "2026-10-25T02:00Z"),
    ),
    (
        "autumn: an end in the repeated hour is its first reading",
        "",
        "Sun 01:00-02:30 Europe/Berlin",
        "2026-10-25T01:15:00Z",
        ("none", None, None, "2026-11-01T00:00Z"),
    ),
    (
        "autumn in New York (2026-11-01): 00:00-03:00 lasts four hours",
        "Sun 00:00-03:00 America/New_York",
        "",
        "2026-11-01T05:30:00Z",
        ("keep", "2026-11-01T04:00Z", "2026-11-01T08:00Z", "2026-11-01T08:00Z"),
    ),
    (
        "overlap: keep-awake wins over forced sleep",
        "Mon-Fri 08:00-18:00 UTC",
        "* 17:00-07:00 UTC hold",
        "2026-01-05T17:30:00Z",
        ("keep", "2026-01-05T08:00Z", "2026-01-05T18:00Z", "2026-01-05T18:00Z"),
    ),
    (
        "overlap: forced sleep begins where keep-awake ends",
        "Mon-Fri 08:00-18:00 UTC",
        "* 17:00-07:00 UTC hold",
        "2026-01-05T18:00:00Z",
        ("hold", "2026-01-05T18:00Z", "2026-01-06T07:00Z", "2026-01-06T07:00Z"),
    ),
    (
        "overlap: hold until a waking forced window joins, then the state changes",
        "",
        "Mon 20:00-23:00 UTC hold; Mon 22:00-02:00 UTC",
        "2026-01-05T21:00:00Z",
        ("hold", "2026-01-05T20:00Z", "2026-01-06T02:00Z", "2026-01-05T22:00Z"),
    ),
    (
        "overlap: wake wins over hold where both are in force",
        "",
        "Mon 20:00-23:00 UTC hold; Mon 22:00-02:00 UTC",
        "2026-01-05T22:30:00Z",
        ("forced", "2026-01-05T20:00Z", "2026-01-06T02:00Z", "2026-01-06T02:00Z"),
    ),
    (
        "overlap: adjacent windows of one kind are one stretch",
        "Mon 08:00-12:00 UTC; Mon 12:00-18:00 UTC",
        "",
        "2026-01-05T11:00:00Z",
        ("keep", "2026-01-05T08:00Z", "2026-01-05T18:00Z", "2026-01-05T18:00Z"),
    ),
    (
        "exceptions: no window on the dates named",
        "Mon-Fri 08:00-18:00 Europe/Berlin except 2026-12-24,2026-12-31",
        "",
        "2026-12-24T10:00:00Z",
        ("none", None, None, "2026-12-25T07:00Z"),
    ),
    (
        "exceptions: a night window is excepted by the day it starts, not the day it ends",
        "",
        "Mon-Fri 20:00-07:00 UTC except 2026-01-06",
        "2026-01-06T05:00:00Z",
        ("forced", "2026-01-05T20:00Z", "2026-01-06T07:00Z", "2026-01-06T07:00Z"),
    ),
    (
        "exceptions: the excepted night is skipped",
        "",
        "Mon-Fri 20:00-07:00 UTC except 2026-01-06",
        "2026-01-06T21:00:00Z",
        ("none", None, None, "2026-01-07T20:00Z"),
    ),
    (
        "exceptions in the window's own zone: 24 December in Tokyo starts at 15:00 UTC",
        "* 00:00-24:00 Asia/Tokyo except 2026-12-24",
        "",
        "2026-12-23T16:00:00Z",
        ("none", None, None, "2026-12-24T15:00Z"),
    ),
    (
        "always: in force as far as is looked, and looked at again from there",
        "",
        "* 00:00-24:00 UTC",
        "2026-01-05T12:00:00Z",
        ("forced", "2025-12-28T00:00Z", "2026-01-14T00:00Z", "2026-01-14T00:00Z"),
    ),
]


@pytest.mark.parametrize(
    ("keep", "forced", "now", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_schedule_state(
    keep: str, forced: str, now: str, expected: tuple[str, str | None, str | None, str | None]
) -> None:
    windows = (parse_windows(keep, "keep-awake") if keep else ()) + (
        parse_windows(forced, "forced-sleep") if forced else ()
    )
    assert summary(schedule_state(windows, t(now))) == expected


def test_no_windows_say_nothing_and_never_look_again() -> None:
    assert schedule_state((), t("2026-01-05T12:00:00Z")) == ScheduleState()


def test_exceptions_covering_the_horizon_look_again_from_its_edge() -> None:
    dates = ",".join(f"2026-01-{d:02d}" for d in range(1, 20))
    windows = parse_windows(f"* 08:00-09:00 UTC except {dates}", "keep-awake")
    assert summary(schedule_state(windows, t("2026-01-05T12:00:00Z"))) == (
        "none",
        None,
        None,
        "2026-01-12T12:00Z",
    )


# (case, text, kind, canonical text)
READS = [
    ("days, range and zone", "mon-fri 8:00-18:00 UTC", "keep-awake", "Mon-Fri 08:00-18:00 UTC"),
    ("a list of days", "Sat,Sun 00:00-24:00 UTC", "forced-sleep", "Sat-Sun 00:00-24:00 UTC"),
    (
        "every day",
        "* 22:00-06:00 Europe/Berlin hold",
        "forced-sleep",
        "* 22:00-06:00 Europe/Berlin hold",
    ),
    ("wake is the default", "Mon 20:00-23:00 UTC wake", "forced-sleep", "Mon 20:00-23:00 UTC"),
    (
        "exceptions, sorted, spaces after commas",
        "Mon-Fri 08:00-18:00 UTC except 2026-12-31, 2026-12-24",
        "keep-awake",
        "Mon-Fri 08:00-18:00 UTC except 2026-12-24,2026-12-31",
    ),
    (
        "two windows",
        "Mon-Fri 08:00-18:00 UTC;Sat 10:00-12:00 Asia/Tokyo;",
        "keep-awake",
        "Mon-Fri 08:00-18:00 UTC; Sat 10:00-12:00 Asia/Tokyo",
    ),
    (
        "mixed days",
        "Mon,Wed-Thu,Sun 01:00-02:00 UTC",
        "keep-awake",
        "Mon,Wed-Thu,Sun 01:00-02:00 UTC",
    ),
]


@pytest.mark.parametrize(
    ("text", "kind", "canonical"), [r[1:] for r in READS], ids=[r[0] for r in READS]
)
def test_windows_read_and_written(text: str, kind: str, canonical: str) -> None:
    windows = parse_windows(text, kind)  # type: ignore[arg-type]
    assert format_windows(windows) == canonical
    assert parse_windows(canonical, kind) == windows  # type: ignore[arg-type]


FORM = "expected DAYS HH:MM-HH:MM ZONE"
# (case, text, kind, what the message must say)
BAD = [
    (
        "an hour past 24",
        "Mon-Fri 25:00-07:00 UTC",
        "forced-sleep",
        "start '25:00' is not a time of day HH:MM",
    ),
    ("minutes past 59", "Mon 08:00-08:60 UTC", "keep-awake", "end '08:60' is not a time of day"),
    ("24:00 as a start", "Mon 24:00-08:00 UTC", "keep-awake", "start '24:00' is not a time of day"),
    (
        "a misspelt day",
        "Mon-Fry 08:00-18:00 UTC",
        "keep-awake",
        "'Mon-Fry' is not weekdays such as Mon-Fri",
    ),
    (
        "an unknown zone",
        "Mon 08:00-18:00 Europe/Berln",
        "keep-awake",
        "'Europe/Berln' is not an IANA time zone",
    ),
    (
        "a path for a zone",
        "Mon 08:00-18:00 ../etc/passwd",
        "keep-awake",
        "is not an IANA time zone",
    ),
    (
        "no zone",
        "Mon-Fri 08:00-18:00",
        "keep-awake",
        "needs weekdays, a time range and a time zone",
    ),
    ("no range", "Mon-Fri 08:00 UTC", "keep-awake", "'08:00' is not a time range HH:MM-HH:MM"),
    (
        "an empty window",
        "Mon 08:00-08:00 UTC",
        "keep-awake",
        "an empty window (a whole day is 00:00-24:00)",
    ),
    (
        "a bad date",
        "Mon 08:00-18:00 UTC except 2026-13-01",
        "keep-awake",
        "exception '2026-13-01' is not dates YYYY-MM-DD",
    ),
    (
        "hold on keep-awake",
        "Mon 08:00-18:00 UTC hold",
        "keep-awake",
        "hold applies to forced-sleep windows only",
    ),
    (
        "a word not understood",
        "Mon 08:00-18:00 UTC sometimes",
        "keep-awake",
        "'sometimes' is not understood",
    ),
    (
        "except without dates",
        "Mon 08:00-18:00 UTC except",
        "keep-awake",
        "'except' is not understood",
    ),
    (
        "the second of two",
        "Mon 08:00-18:00 UTC; Tue 8-18 UTC",
        "keep-awake",
        "window 2 'Tue 8-18 UTC': start '8' is not",
    ),
    ("nothing", " ; ", "keep-awake", "has no window"),
]


@pytest.mark.parametrize(("text", "kind", "says"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_window_is_named_with_the_form_expected(text: str, kind: str, says: str) -> None:
    with pytest.raises(WindowError) as raised:
        parse_windows(text, kind)  # type: ignore[arg-type]
    assert says in str(raised.value)
    if "has no window" not in says:
        assert FORM in str(raised.value)


def test_jitter_is_stable_and_within_its_spread() -> None:
    spreads = [jitter(f"ns/op-{i}", 60.0) for i in range(200)]
    assert all(0.0 <= s < 60.0 for s in spreads)
    assert jitter("ns/op-1", 60.0) == jitter("ns/op-1", 60.0)
    assert len({round(s) for s in spreads}) > 40  # spread out, not bunched
    assert jitter("ns/op-1", 0.0) == 0.0


# (case, value, when it was set, when the pause ends)
PAUSES = [
    ("a time", "2026-01-05T08:00:00Z", None, "2026-01-05T08:00:00Z"),
    ("a time with an offset", "2026-01-05T09:00:00+01:00", None, "2026-01-05T08:00:00Z"),
    ("a duration from when it was written", "2h", "2026-01-05T06:00:00Z", "2026-01-05T08:00:00Z"),
    ("a duration with no record of its writing", "90m", None, None),
]


@pytest.mark.parametrize(
    ("value", "set_at", "ends"), [p[1:] for p in PAUSES], ids=[p[0] for p in PAUSES]
)
def test_pause_end(value: str, set_at: str | None, ends: str | None) -> None:
    end = pause_end(parse_pause_until(value), t(set_at) if set_at else None)
    assert end == (t(ends) if ends else None)


@pytest.mark.parametrize("value", ["tomorrow", "0s", "2026-01-05T08:00:00", ""])
def test_a_bad_pause_names_the_forms(value: str) -> None:
    with pytest.raises(WindowError, match=r"RFC 3339 time .* or a duration"):
        parse_pause_until(value)


def test_pause_values() -> None:
    assert parse_pause_until("72h") == PauseUntil(seconds=72 * 3600.0)
