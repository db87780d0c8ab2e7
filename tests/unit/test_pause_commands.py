"""`zeroscaler pause` and `resume`, selections for the four controls, and pauses as shown."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_cli import NOW, ON, workload
from zeroscaler.cli import main
from zeroscaler.cli.explain import describe_when, describe_windows
from zeroscaler.cli.session import EXIT_USAGE
from zeroscaler.cli.status import flags_of
from zeroscaler.cli.workload_view import read_view
from zeroscaler.core.durations import parse_time
from zeroscaler.core.manual import plan_pause, plan_resume

UNTIL = parse_time("2026-01-01T14:00:00Z")


@pytest.mark.parametrize(
    ("annotations", "until", "changes"),
    [
        ({}, None, {"zeroscaler.io/paused": "true"}),
        ({}, UNTIL, {"zeroscaler.io/paused-until": "2026-01-01T14:00:00Z"}),
        (
            {"zeroscaler.io/paused": "true"},
            UNTIL,
            {"zeroscaler.io/paused": None, "zeroscaler.io/paused-until": "2026-01-01T14:00:00Z"},
        ),
        (
            {"zeroscaler.io/paused-until": "2h"},
            None,
            {"zeroscaler.io/paused": "true", "zeroscaler.io/paused-until": None},
        ),
        ({"zeroscaler.io/paused": "true"}, None, {}),
    ],
)
def test_a_pause_replaces_the_one_before(
    annotations: dict[str, str], until: Any, changes: dict[str, str | None]
) -> None:
    assert plan_pause(annotations, until) == changes


def test_resume_ends_either_kind_of_pause() -> None:
    both = {"zeroscaler.io/paused": "true", "zeroscaler.io/paused-until": "2h", "x": "y"}
    assert plan_resume(both) == {"zeroscaler.io/paused": None, "zeroscaler.io/paused-until": None}
    assert plan_resume({"x": "y"}) == {}


def paused_until(value: str, managed_fields: list[dict[str, Any]] | None = None) -> Any:
    obj = workload("op", "ops", 2, **{"zeroscaler.io/idle-timeout": "10m"})
    obj["metadata"]["annotations"]["zeroscaler.io/paused-until"] = value
    if managed_fields is not None:
        obj["metadata"]["managedFields"] = managed_fields
    return read_view(obj, ON, NOW)


def owner(time: str, manager: str = "kubectl-annotate") -> dict[str, Any]:
    fields: dict[str, Any] = {"f:metadata": {"f:annotations": {"f:zeroscaler.io/paused-until": {}}}}
    return {"manager": manager, "operation": "Update", "time": time, "fieldsV1": fields}


@pytest.mark.parametrize(
    ("view", "paused", "why"),
    [
        (paused_until("2026-01-01T13:00:00Z"), True, "zeroscaler.io/paused-until 2026-01-01T13"),
        (paused_until("2026-01-01T11:00:00Z"), False, ""),
        # A duration counts from when the API server recorded it being written.
        (paused_until("2h", [owner("2026-01-01T11:00:00Z")]), True, "2026-01-01T13:00:00Z"),
        (paused_until("30m", [owner("2026-01-01T11:00:00Z")]), False, ""),
        # Written by two managers: the newest writing counts.
        (
            paused_until("2h", [owner("2026-01-01T09:00:00Z"), owner("2026-01-01T11:00:00Z", "x")]),
            True,
            "2026-01-01T13:00:00Z",
        ),
        (paused_until("2h"), False, ""),
    ],
)
def test_a_pause_is_shown_while_it_holds(view: Any, paused: bool, why: str) -> None:
    assert view.paused is paused
    assert ("paused" in flags_of(view)) is paused
    assert why in view.pause.why
    if paused:
        assert describe_when(view, NOW) == ["Sleeps: not while paused."]


def test_a_duration_with_no_record_of_its_writing_is_a_problem() -> None:
    assert "recorded no time it was written" in paused_until("2h").pause.problem


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["pause"], "give a WORKLOAD"),
        (["sleep", "op", "-l", "team=a"], "give a WORKLOAD or a selection"),
        (["wake", "-A", "-n", "ops"], "-n/--namespace and -A/--all-namespaces: give one"),
        (["resume", "-A", "ops/op"], "not both"),
    ],
)
def test_selections_are_checked_before_connecting(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["pause", "op", "--for", "a while"], "is not a duration"),
        (["pause", "op", "--until", "monday"], "is not an RFC 3339 time"),
        (["pause", "op", "--for", "2h", "--until", "2026-01-01T14:00:00Z"], "not allowed with"),
    ],
)
def test_pause_takes_a_duration_or_a_time(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == EXIT_USAGE
    assert said in capsys.readouterr().err


def windowed(state: str, **more: str) -> Any:
    annotations = {
        "zeroscaler.io/idle-timeout": "10m",
        "zeroscaler.io/watched-kinds": "ConfigMap",
        "zeroscaler.io/state": state,
        **more,
    }
    return read_view(workload("op", "ops", 0 if state == "asleep" else 2, **annotations), ON, NOW)


def test_explain_says_which_window_is_in_force_and_what_follows() -> None:
    # NOW is Thursday 2026-01-01, 12:00 UTC.
    view = windowed(
        "asleep",
        **{
            "zeroscaler.io/asleep-since": "2026-01-01T11:30:00Z",
            "zeroscaler.io/forced-sleep": "Thu 11:00-13:00 UTC hold",
            "zeroscaler.io/keep-awake": "Fri 08:00-18:00 Europe/Berlin",
        },
    )
    assert describe_windows(view, NOW) == [
        "Windows:",
        "  keep-awake: Fri 08:00-18:00 Europe/Berlin (annotation zeroscaler.io/keep-awake)",
        "  forced-sleep: Thu 11:00-13:00 UTC hold (annotation zeroscaler.io/forced-sleep)",
        "  in force: forced-sleep until 2026-01-01T13:00:00Z (in 1h): activity is held until "
        "it ends",
    ]
    assert "forced-sleep-hold" in flags_of(view)
    assert describe_when(view, NOW) == [
        "Asleep since 2026-01-01T11:30:00Z (30m ago): a change now is held until "
        "2026-01-01T13:00:00Z (in 1h), then it wakes."
    ]
    awake = windowed("awake", **{"zeroscaler.io/forced-sleep": "Thu 11:00-13:00 UTC"})
    assert describe_when(awake, NOW)[-1] == (
        "Sleeps: now: a forced-sleep window is in force (see Windows)."
    )
