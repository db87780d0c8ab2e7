"""What a sleeper gives back: quantities and a pod template's requests."""

from __future__ import annotations

from typing import Any

import pytest

from zeroscaler.core.savings import (
    Requests,
    format_cpu,
    format_memory,
    parse_quantity,
    pod_requests,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", 0.1),
        ("2", 2.0),
        ("1.5", 1.5),
        ("250000u", 0.25),
        ("512Mi", 512 * 2**20),
        ("1Gi", 2**30),
        ("1G", 1e9),
        ("1e3", 1000.0),
        ("128974848", 128974848.0),
        (3, 3.0),
        ("lots", None),
        ("1Qi", None),
        (None, None),
        (True, None),
    ],
)
def test_quantities(text: Any, value: float | None) -> None:
    found = parse_quantity(text)
    assert found == pytest.approx(value) if value is not None else found is None


# (case, pod spec, what one pod requests)
PODS: list[tuple[str, dict[str, Any], Requests]] = [
    ("nothing asked", {"containers": [{"name": "m"}]}, Requests()),
    (
        "requests summed over containers",
        {
            "containers": [
                {"name": "m", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                {"name": "s", "resources": {"requests": {"cpu": "50m", "memory": "16Mi"}}},
            ]
        },
        Requests(0.3, 80 * 2**20),
    ),
    (
        "a limit stands for a request left out",
        {"containers": [{"name": "m", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]},
        Requests(1.0, 2**30),
    ),
    (
        "init containers that stop are not counted; sidecars are",
        {
            "containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [
                {"name": "setup", "resources": {"requests": {"cpu": "4"}}},
                {
                    "name": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
                },
            ],
        },
        Requests(1.1, 32 * 2**20),
    ),
    (
        "malformed values count as nothing",
        {"containers": [{"name": "m", "resources": {"requests": {"cpu": "a lot"}}}, "junk"]},
        Requests(),
    ),
]


@pytest.mark.parametrize(("spec", "expected"), [p[1:] for p in PODS], ids=[p[0] for p in PODS])
def test_pod_requests(spec: dict[str, Any], expected: Requests) -> None:
    found = pod_requests(spec)
    assert found.cpu == pytest.approx(expected.cpu)
    assert found.memory == expected.memory


def test_formats() -> None:
    assert [format_cpu(c) for c in (0, 0.25, 1, 1.5, 12)] == ["0", "250m", "1", "1.5", "12"]
    assert [format_memory(m) for m in (0, 512 * 2**20, 1.5 * 2**30, 3 * 2**40)] == [
        "0",
        "512Mi",
        "1.5Gi",
        "3Ti",
    ]
    assert Requests(0.5, 10).times(3) == Requests(1.5, 30)
