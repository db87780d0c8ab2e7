"""The `zeroscaler status` table, built from objects as the API returns them."""

from __future__ import annotations

from typing import Any

from zeroscaler.cli import Row, format_table, status_rows
from zeroscaler.core.durations import parse_time

NOW = parse_time("2026-01-01T12:00:00Z")


def workload(name: str, ns: str, replicas: int, **annotations: str) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "annotations": annotations,
        },
        "spec": {"replicas": replicas},
    }


ASLEEP = workload(
    "op",
    "ops",
    0,
    **{
        "zeroscaler.io/idle-timeout": "10m",
        "zeroscaler.io/watched-kinds": "Widget.example.com, ConfigMap",
        "zeroscaler.io/state": "asleep",
        "zeroscaler.io/restore-replicas": "3",
        "zeroscaler.io/last-activity": "2026-01-01T11:00:00Z",
    },
)
AWAKE = workload(
    "ibm",
    "ops",
    2,
    **{
        "controller-zero-scaler/idleTimeout": "60s",
        "controller-zero-scaler/watchedKinds": '[{"apiVersion": "apps/v1", "Kind": "Deployment"}]',
    },
)
PLAIN = workload("web", "ops", 2)
OUTSIDE = workload("op", "other", 1, **{"zeroscaler.io/idle-timeout": "1m"})
EVENTS = [
    {
        "involvedObject": {"uid": "uid-op"},
        "lastTimestamp": "2026-01-01T10:00:00Z",
        "message": "ConfigMap ops/a changed: scaled from 0 to 3 replicas",
    },
    {
        "involvedObject": {"uid": "uid-op"},
        "lastTimestamp": "2026-01-01T10:30:00Z",
        "message": "Widget ops/w deleted: scaled from 0 to 3 replicas",
    },
]


def test_status_rows() -> None:
    rows = status_rows([ASLEEP, AWAKE, PLAIN, OUTSIDE], {"ops"}, EVENTS, NOW)
    assert rows == [
        Row("ops", "ibm", "Deployment", "awake", "2", "-", "1m", "Deployment.v1.apps", "-"),
        Row(
            "ops",
            "op",
            "Deployment",
            "asleep",
            "0 (wakes to 3)",
            "1h",
            "10m",
            "Widget.example.com, ConfigMap",
            "Widget ops/w deleted",
        ),
    ]


def test_workload_we_slept_outside_an_opted_in_namespace_is_shown_unmanaged() -> None:
    rows = status_rows([ASLEEP], set(), [], NOW)
    assert [r.state for r in rows] == ["unmanaged"]


def test_format_table_aligns_columns() -> None:
    text = format_table([Row("a", "bb", "Deployment", "awake", "1", "-", "1m", "X", "-")])
    header, line = text.splitlines()
    assert header.index(" NAME ") + 1 == line.index("bb")
    assert header.startswith("NAMESPACE  NAME")
