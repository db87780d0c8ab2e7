"""The demo's timeline: pod states as a reader sees them, runs of states, and the PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from demo.timeline import Mark, Sample, _spans, plot, pod_state


def _pod(phase: str, node: str | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }


def test_pod_states_read_as_kubectl_shows_them() -> None:
    assert pod_state(_pod("Pending")) == "Pending"
    assert pod_state(_pod("Pending", node="n")) == "ContainerCreating"
    assert pod_state(_pod("Running", node="n")) == "Running"
    assert pod_state(_pod("Running", node="n", deleting=True)) == "Terminating"


def test_spans_join_equal_states_and_end_at_the_next_state() -> None:
    samples = [
        Sample(0.0, 1, {"a": "Pending"}),
        Sample(1.0, 1, {"a": "Running"}),
        Sample(2.0, 1, {"a": "Running"}),
        Sample(3.0, 0, {"a": "Terminating"}),
        Sample(4.0, 0, {}),
    ]
    assert _spans(samples, "a") == [
        ("Pending", 0.0, 1.0),
        ("Running", 1.0, 3.0),
        ("Terminating", 3.0, 4.0),
    ]


def test_plot_writes_a_png(tmp_path: Path) -> None:
    samples = [
        Sample(float(t), 1 if t < 5 else 0, {"op-1": "Running"} if t < 5 else {}) for t in range(8)
    ]
    out = plot(samples, [Mark(5.0, "asleep")], tmp_path / "t.png", "title")
    assert out.read_bytes().startswith(b"\x89PNG")
