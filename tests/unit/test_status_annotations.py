"""What the controller writes reads back as the status it meant; incomplete workloads say why."""

from __future__ import annotations

import pytest

from zeroscaler.core.annotations import (
    WorkloadStatus,
    asleep_annotations,
    awake_annotations,
    missing_settings,
    read_status,
)
from zeroscaler.core.durations import parse_time

T0 = parse_time("2026-01-01T12:00:00Z")
T1 = parse_time("2026-01-01T12:10:00Z")


def test_written_status_reads_back() -> None:
    assert read_status(asleep_annotations(3, T1, T0)) == (
        WorkloadStatus("asleep", 3, asleep_since=T1, last_activity=T0),
        [],
    )
    assert read_status(awake_annotations(T1)) == (
        WorkloadStatus("awake", last_activity=T1),
        [],
    )


@pytest.mark.parametrize(
    ("annotations", "reasons"),
    [
        ({"zeroscaler.io/idle-timeout": "10m"}, ["NoKindToWakeOn"]),
        ({"controller-zero-scaler/idleTimeout": "60"}, ["NoKindToWakeOn"]),
        ({"zeroscaler.io/watched-kinds": "ConfigMap"}, ["NoIdleTimeout"]),
        ({"controller-zero-scaler/ownedKinds": "[]"}, ["NoIdleTimeout"]),
        ({}, []),
        ({"zeroscaler.io/idle-timeout": "x", "zeroscaler.io/owned-kinds": "Secret"}, []),
    ],
)
def test_missing_settings_name_what_is_missing(
    annotations: dict[str, str], reasons: list[str]
) -> None:
    assert [reason for reason, _ in missing_settings(annotations)] == reasons
